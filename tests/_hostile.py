"""The hostile corpus (tests/hostile/): where it lives and how a program's header is read.

Header of a corpus file::

    # expect: timeout|killed      (allowed statuses)
    # value: 0                    (optional: the exact value, for status ok)
    # guard: fork_bomb_bounded    (optional: run that program first; it must return 0)
"""

from __future__ import annotations

from pathlib import Path

HOSTILE = Path(__file__).parent / "hostile"


def header(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines at the top of a corpus program."""
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, val = line[1:].partition(":")
        out[key.strip()] = val.strip()
    return out
