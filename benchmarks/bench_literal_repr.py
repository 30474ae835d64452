"""Truth rendering: ``literal_repr`` (sets in sorted member order) against the plain
``canonicalize`` + ``repr`` it replaced, timed in the same run (not a test).

    python benchmarks/bench_literal_repr.py [--repeat 2000]

Values: a typical LOCALS dict of a LeetCode trace (a 200-int list, a string, a dict of 30 small lists,
a 20-int set), a flat list of 500 ints, and a dict holding 50 small sets.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codethinker.contra.values import canonicalize, literal_repr

VALUES = {
    "locals": {
        "nums": list(range(200)),
        "s": "abc" * 20,
        "d": {i: [i, i + 1] for i in range(30)},
        "st": set(range(20)),
    },
    "flat list": list(range(500)),
    "dict of sets": {i: {i, i + 1, i + 2} for i in range(50)},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=2000)
    n = ap.parse_args().repeat
    for name, v in VALUES.items():
        new = timeit.timeit(lambda v=v: literal_repr(v), number=n) / n
        old = timeit.timeit(lambda v=v: repr(canonicalize(v)), number=n) / n
        print(
            f"{name:13s} literal_repr {new * 1e6:7.1f} us   canonicalize+repr {old * 1e6:7.1f} us   "
            f"ratio {new / old:.2f}"
        )


if __name__ == "__main__":
    main()
