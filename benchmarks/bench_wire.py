"""Decode cost of child -> parent frames (codethinker.sandbox.protocol) against pickle, clean and hostile.

    python benchmarks/bench_wire.py [--sizes 256,1024,4096] [--repeat 5] [--data PATH] [--unpickle-max N]

Prints, for realistic trace-runner result frames (lists of dicts of locals, 2-50 KB) and for
the 800 CRUXEval trace frames when ``--data`` exists: encode and decode time against
``pickle.dumps`` / ``pickle.loads`` of the same value (the restricted unpickler the parent used
runs at ``pickle.loads`` speed). Then, for each hostile frame at three sizes (KB), the decode
time per KB and the outcome: the time per KB must stay flat as the frame grows (linear).
Times are the best of ``--repeat`` runs (wall clock; on a loaded machine they are upper bounds).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pickle
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codethinker.sandbox import protocol as wire  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "cruxeval" / "cruxeval.jsonl"
P = sys.hash_info.modulus


def best(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    """Best wall time of one call, over ``repeat`` rounds of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


# --------------------------------------------------------------------------- clean frames
def _local(rng: random.Random) -> Any:
    k = rng.random()
    if k < 0.35:
        return rng.randint(-1000, 10**6)
    if k < 0.55:
        return "".join(rng.choice("abcdefgh ,:[]") for _ in range(rng.randint(0, 20)))
    if k < 0.75:
        return [rng.randint(0, 100) for _ in range(rng.randint(0, 12))]
    if k < 0.82:
        return {rng.choice("abcxyz"): rng.randint(0, 9) for _ in range(rng.randint(0, 5))}
    if k < 0.88:
        return (rng.randint(0, 9), "t")
    if k < 0.94:
        return rng.random() * 100
    return rng.choice([True, False, None])


def trace_frame(blocks: int, seed: int = 0) -> dict:
    """A result frame of the trace runner: one dict of 6 locals per block exit."""
    rng = random.Random(seed)
    exits = [{f"v{j}": _local(rng) for j in range(6)} for _ in range(blocks)]
    return {
        "status": "ok",
        "value": {"value": _local(rng), "exits": exits},
        "error_type": None,
        "error_message": None,
        "stdout": "",
        "stderr": "",
        "duration_s": 0.0012,
        "dirty": None,
    }


def clean_rows(repeat: int) -> None:
    print(f"clean trace-runner frames (best of {repeat})")
    print(f"{'blocks':>6} {'wire B':>8} {'pickle B':>8} | {'decode':>9} {'loads':>9} {'ratio':>5} {'us/KB':>6} |")
    print(f"{'':>6} {'':>8} {'':>8} | {'encode':>9} {'dumps':>9} {'ratio':>5}")
    for blocks in (20, 80, 200, 400):
        frame = trace_frame(blocks)
        data, pdata = wire.encode(frame), pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        assert wire.decode(data) == frame
        n = max(1, 200 // blocks)
        dec = best(lambda d=data: wire.decode(d), repeat, n)
        loads = best(lambda d=pdata: pickle.loads(d), repeat, n)
        enc = best(lambda f=frame: wire.encode(f), repeat, n)
        dumps = best(lambda f=frame: pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL), repeat, n)
        print(
            f"{blocks:>6} {len(data):>8} {len(pdata):>8} | {dec * 1e6:>7.0f}us {loads * 1e6:>7.0f}us "
            f"{dec / loads:>5.1f} {dec * 1e6 / (len(data) / 1024):>6.1f} | "
            f"{enc * 1e6:>7.0f}us {dumps * 1e6:>7.0f}us {enc / dumps:>5.1f}"
        )


def cruxeval_frames(path: Path) -> list[dict]:
    """Trace every CRUXEval program in the sandbox (the trace runner's jobs, as ``trace_iter`` makes
    them) and wrap each result's value in a result frame."""
    from codethinker.contra.tracer import ARGS_FN, _prepare
    from codethinker.sandbox import Job, Sandbox

    jobs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        try:
            prog, specs, args, kwargs, expr, _ = _prepare(row["code"], row["input"], "f")
        except Exception:
            continue
        options: dict = {"starts": [s.start for s in specs], **({"args_fn": ARGS_FN} if expr else {})}
        jobs.append(Job(expr or prog.text, args, kwargs, "f", runner="trace", options=options, entry_def=True))
    with Sandbox() as sb:
        results = list(sb.imap(iter(jobs)))
    return [
        {"status": "ok", "value": r.value, "stdout": "", "stderr": "", "duration_s": 0.001}
        for r in results
        if r.status == "ok"
    ]


def cruxeval_row(path: Path, repeat: int) -> None:
    frames = cruxeval_frames(path)
    datas = [wire.encode(f) for f in frames]
    pdatas = [pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL) for f in frames]
    assert [wire.decode(d) for d in datas] == frames
    dec = best(lambda: [wire.decode(d) for d in datas], repeat)
    loads = best(lambda: [pickle.loads(d) for d in pdatas], repeat)
    enc = best(lambda: [wire.encode(f) for f in frames], repeat)
    dumps = best(lambda: [pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL) for f in frames], repeat)
    sizes = sorted(len(d) for d in datas)
    n = len(frames)
    print(
        f"CRUXEval: {n} trace frames, wire bytes median {sizes[n // 2]} max {sizes[-1]}\n"
        f"  decode {dec / n * 1e6:.1f} us/frame vs pickle.loads {loads / n * 1e6:.1f} ({dec / loads:.1f}x); "
        f"encode {enc / n * 1e6:.1f} us/frame vs pickle.dumps {dumps / n * 1e6:.1f} ({enc / dumps:.1f}x)"
    )


# --------------------------------------------------------------------------- hostile frames
def _array(items: list[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


def _fill(item: bytes, kb: int, wrap: bytes = b"") -> bytes:
    """An array (or ``{"X":[...]}`` with ``wrap``) of copies of ``item`` of about ``kb`` KB."""
    body = _array([item] * max(1, kb * 1024 // (len(item) + 1)))
    return b'{"%s":%s}' % (wrap, body) if wrap else body


def _big(n: int) -> bytes:
    return b'{"i":"%x"}' % n


def _items_of(kb: int, per: int) -> int:
    return max(2, kb * 1024 // per)


def _colliding_frozensets(kb: int, k: int, bucket: int) -> bytes:
    """A set of groups of ``k`` frozensets of one hash, each of ``2 * bucket`` big ints, ``bucket`` to a
    hash (the decoder accepts about ``(k - 1) * (1 + bucket) <= 32``): the most comparisons per value.
    ``bucket`` is odd: frozensets whose values' hashes pair up all share one hash (CPython xors them)."""
    per = 2 * bucket * 24 * k  # bytes of one group
    groups = []
    for g in range(max(1, kb * 1024 // per)):
        sets = [
            [_big(j * P + 2 * g + h) for h in range(2) for j in range(bucket * i + 1, bucket * i + bucket + 1)]
            for i in range(k)
        ]
        groups.extend(b'{"f":%s}' % _array(s) for s in sets)
    return b'{"s":%s}' % _array(groups)


HOSTILE: dict[str, Callable[[int], bytes]] = {
    "clean trace frame (scaled)": lambda kb: wire.encode(trace_frame(max(1, kb * 1024 // 120))),
    "list of empty lists": lambda kb: _fill(b"[]", kb),
    "list of empty sets": lambda kb: _fill(b'{"s":[]}', kb),
    "one string (issue a, sent out)": lambda kb: b'["' + b"x" * (kb * 1024) + b'"]',
    "a 10 KB string repeated": lambda kb: _fill(b'"' + b"y" * 10_000 + b'"', kb),
    "non-ASCII escapes": lambda kb: b'["' + b"\\u00e9" * (kb * 1024 // 6) + b'"]',
    "20-digit ints": lambda kb: _fill(b"-18446744073709551615", kb),
    "4300-digit ints": lambda kb: _fill(b"9" * 4300, kb),
    "one 4300-digit float per item": lambda kb: _fill(b"0." + b"1" * 4300, kb),
    "one huge float": lambda kb: b"[0." + b"1" * (kb * 1024) + b"]",
    "set: 32 ints per hash (accepted)": lambda kb: (
        b'{"s":%s}' % _array([_big(k * P + g) for g in range(_items_of(kb, 24) // 32) for k in range(1, 33)])
    ),
    "set: hashes alike in low 40 bits": lambda kb: (
        b'{"s":%s}' % _array([str(g << 40).encode() for g in range(1, _items_of(kb, 16))])
    ),
    "dict: 32 tuple keys per hash": lambda kb: (
        b'{"d":%s}'
        % _array([b'{"t":[%s,1]},0' % _big(k * P + g) for g in range(_items_of(kb, 40) // 32) for k in range(1, 33)])
    ),
    "set: all ints one hash (issue b)": lambda kb: (
        b'{"s":%s}' % _array([_big(k * P) for k in range(_items_of(kb, 22))])
    ),
    "sets of 2 frozensets of one hash": lambda kb: _fill(wire.encode({frozenset({0, P}), frozenset({0, 2 * P})}), kb),
    "set: 3 frozensets a hash, at the limit": lambda kb: _colliding_frozensets(kb, 3, 15),
    "set: 32 frozensets a hash, 31 ints a hash": lambda kb: _colliding_frozensets(kb, 32, 31),
    "sets of 2 frozensets of frozensets": lambda kb: _fill(
        wire.encode({frozenset({frozenset({0, P})}), frozenset({frozenset({0, 2 * P})})}), kb
    ),
    "nesting (issue c)": lambda kb: b"[" * (kb * 1024),
    "garbage after a deep prefix": lambda kb: b'{"t":' * (kb * 1024 // 5),
}


def hostile_rows(sizes: list[int], repeat: int) -> None:
    print(f"\nhostile frames: decode time per KB at {sizes} KB (best of {repeat}); flat = linear")
    print("  (ok: decoded; E: WireError, the last message shown)")
    head = " ".join(f"{kb:>9}KB" for kb in sizes)
    print(f"{'frame':<36} {head}")
    for name, make in HOSTILE.items():
        cells, last = [], ""
        for kb in sizes:
            data = make(kb)
            try:
                wire.decode(data)
                mark = "ok"
            except wire.WireError as exc:
                mark, last = "E ", str(exc)[:70]

            def run(d: bytes = data) -> None:
                with contextlib.suppress(wire.WireError):
                    wire.decode(d)

            t = best(run, repeat)
            cells.append(f"{t * 1e6 / (len(data) / 1024):>7.1f}us {mark}")
        print(f"{name:<36} {' '.join(cells)}" + (f"  ({last})" if last else ""))


def issue_rows(repeat: int, unpickle_max: int) -> None:
    print("\nthe issue's frames")
    big = "x" * 100_000
    for copies in (1_000, 100_000, 10_000_000):
        value = {"status": "ok", "value": {"value": None, "exits": [{"s": big}] * copies}}
        t = best(lambda v=value: _refused(lambda: wire.encode(v)), repeat)
        print(f"  encode of one 100 KB string x {copies:>10,}: WireError after {t * 1e3:.1f} ms")
    for n in (5_000, 10_000, 40_000):
        data = b'{"s":%s}' % _array([_big(k * P) for k in range(n)])
        t = best(lambda d=data: _refused(lambda: wire.decode(d)), repeat)
        line = f"  set of {n:,} ints of one hash ({len(data) // 1024} KB): WireError after {t * 1e3:.1f} ms"
        if n <= unpickle_max:
            forged = _pickled_int_set([k * P for k in range(n)])
            t0 = time.perf_counter()
            assert len(_plain_unpickle(forged)) == n
            line += f"; the plain unpickler on it pickled ({len(forged) // 1024} KB): {time.perf_counter() - t0:.2f} s"
        print(line)
    for depth in (10**4, 10**6):
        data = b"[" * depth + b"]" * depth
        t = best(lambda d=data: _refused(lambda: wire.decode(d)), repeat)
        print(f"  nesting {depth:,} deep: WireError after {t * 1e3:.2f} ms")


def _refused(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except wire.WireError:
        return
    raise AssertionError("not refused")


def _pickled_int_set(ints: list[int]) -> bytes:
    """Protocol-4 opcodes for a set built item by item (what a forged frame could send)."""
    out = bytearray(b"\x80\x04\x8f(")  # PROTO 4, EMPTY_SET, MARK
    for n in ints:
        raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
        out += b"\x8a" + bytes([len(raw)]) + raw  # LONG1
    return bytes(out + b"\x90.")  # ADDITEMS, STOP


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: plain data only")


def _plain_unpickle(data: bytes) -> Any:
    """What the parent ran before the wire format: an unpickler of plain data (no class loads)."""
    return _PlainUnpickler(io.BytesIO(data)).load()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,1024,4096", help="hostile frame sizes in KB (three)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="CRUXEval jsonl (skipped when absent)")
    ap.add_argument("--unpickle-max", type=int, default=10_000, help="largest colliding set to time with pickle")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    clean_rows(args.repeat)
    if args.data.exists():
        cruxeval_row(args.data, args.repeat)
    hostile_rows(sizes, args.repeat)
    issue_rows(max(1, args.repeat // 2), args.unpickle_max)


if __name__ == "__main__":
    main()
