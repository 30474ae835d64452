"""Record files of the data pipeline: JSON Lines in, atomic writes out.

Every stage reads JSONL with :func:`read_jsonl`, which names the file, the 1-based row and
the field of a malformed record (:class:`RecordError`), and writes through
:func:`atomic_write` (temporary file in the same folder + ``os.replace``), so that a stage
that fails never leaves a half-written output behind or damages one already written.

A writer's temporary file is ``.<name>.<pid>.<random>.tmp``, locked (``flock``) from its creation until
it is renamed over the target. A writer killed mid-write (SIGKILL: no cleanup runs) leaves its file
behind; the next :func:`atomic_write` of the same target removes every such file whose lock is free
and whose writer is gone (no process with its pid, or older than :data:`STALE_AFTER_S`), and never a
live writer's. :func:`require_rows` is what a stage checks of the inputs it turns into outputs
(:func:`codethinker.ops.stage.path` with ``rows=True``): an empty one stops the stage before it writes.

>>> rows = [{"task_id": "two-sum", "code": "def f(x):\\n    return x"}]
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
>>> write_jsonl(p, rows); read_jsonl(p, required={"task_id": str, "code": str}) == rows
True
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from codethinker.errors import CodethinkerError

STALE_AFTER_S = 60.0  # an unlocked temporary file this old is stale even when its pid is alive (reused)
_RANDOM = r"[a-z0-9_]{8}"  # tempfile.mkstemp's random part

__all__ = [
    "RecordError",
    "atomic_write",
    "check_record",
    "read_jsonl",
    "remove_stale_temps",
    "require_rows",
    "write_json",
    "write_jsonl",
]


class RecordError(CodethinkerError, ValueError):
    """A malformed record: names the file, the 1-based row and the field."""

    def __init__(self, path: str | os.PathLike[str], row: int | None, field: str | None, problem: str):
        self.path, self.row, self.field, self.problem = str(path), row, field, problem
        where = str(path)
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")


def check_record(
    rec: Any, required: Mapping[str, type | tuple[type, ...]], path: str | os.PathLike[str], row: int
) -> dict[str, Any]:
    """Check that ``rec`` is an object holding every ``required`` field with the given type."""
    if not isinstance(rec, dict):
        raise RecordError(path, row, None, f"expected a JSON object, got {type(rec).__name__}")
    for name, typ in required.items():
        if name not in rec:
            raise RecordError(path, row, name, "missing field")
        if not isinstance(rec[name], typ) or (typ is int and isinstance(rec[name], bool)):
            want = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            raise RecordError(path, row, name, f"expected {want}, got {type(rec[name]).__name__}")
    return rec


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def iter_jsonl(
    path: str | os.PathLike[str], required: Mapping[str, type | tuple[type, ...]] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the records of a ``.jsonl`` (or ``.jsonl.gz``) file, checking ``required`` fields."""
    p = Path(path)
    if not p.is_file():
        raise RecordError(p, None, None, "file not found")
    with _open_text(p) as fh:
        try:
            for i, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RecordError(p, i, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
                yield check_record(rec, required or {}, p, i)
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise RecordError(p, None, None, f"cannot read: {exc}") from None


def read_jsonl(
    path: str | os.PathLike[str], required: Mapping[str, type | tuple[type, ...]] | None = None
) -> list[dict[str, Any]]:
    return list(iter_jsonl(path, required))


def require_rows(path: str | os.PathLike[str]) -> None:
    """A :class:`RecordError` naming ``path`` when it is missing or holds no rows: a ``.jsonl``/``.jsonl.gz``
    without a non-blank line, a ``.parquet`` of 0 rows, any other file of only whitespace. A folder is not
    checked. A stage checks its inputs so before it writes: an empty one would replace its outputs with none.
    """
    p = Path(path)
    if p.is_dir():
        return
    if not p.is_file():
        raise RecordError(p, None, None, "file not found")
    try:
        if p.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            empty = pq.ParquetFile(p).metadata.num_rows == 0
        elif p.name.endswith((".jsonl", ".jsonl.gz")):
            with _open_text(p) as fh:
                empty = not any(line.strip() for line in fh)
        else:
            with p.open("rb") as fh:
                empty = not any(chunk.strip() for chunk in iter(lambda: fh.read(1 << 16), b""))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise RecordError(p, None, None, f"cannot read: {exc}") from None
    if empty:
        raise RecordError(p, None, None, "empty input (no rows): nothing written, the outputs are left as they were")


def _writer_gone(tmp: Path, pid: int | None) -> bool:
    """Whether the writer of ``tmp`` (its pid, None for a name without one) no longer runs; called with the
    file's lock held, so no writer holds it now."""
    if pid is not None and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            pass
    try:
        return time.time() - tmp.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that killed writers of ``path`` left beside it; returns them."""
    p = Path(path)
    name = re.compile(rf"\.{re.escape(p.name)}\.(?:(\d+)\.)?{_RANDOM}\.tmp")
    removed = []
    try:
        entries = [e for e in os.scandir(p.parent) if name.fullmatch(e.name)]
    except OSError:
        return removed
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live writer: BlockingIOError
            pid = name.fullmatch(entry.name).group(1)  # type: ignore[union-attr]
            if _writer_gone(Path(entry.path), int(pid) if pid else None):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it over ``path`` on success only; first remove
    what killed writers of ``path`` left (:func:`remove_stale_temps`)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(p)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # until the rename: a live writer's file is never stale
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            os.replace(tmp, p)  # the file still open and locked
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Atomically write ``records`` as JSON Lines; returns the number written."""
    n = 0
    with atomic_write(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n")
            n += 1
    return n


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON (metrics files)."""
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=False)
        fh.write("\n")
