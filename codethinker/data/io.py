"""Record files of the data pipeline: JSON Lines in, atomic writes out.

Every stage reads JSONL with :func:`read_jsonl`, which names the file, the 1-based row and
the field of a malformed record (:class:`RecordError`), and writes through
:func:`atomic_write` (temporary file in the same folder + ``os.replace``), so that a stage
that fails never leaves a half-written output behind or damages one already written.

>>> rows = [{"task_id": "two-sum", "code": "def f(x):\\n    return x"}]
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
>>> write_jsonl(p, rows); read_jsonl(p, required={"task_id": str, "code": str}) == rows
True
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from codethinker.errors import CodethinkerError

__all__ = [
    "RecordError",
    "atomic_write",
    "check_record",
    "read_jsonl",
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


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it over ``path`` on success only."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
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
