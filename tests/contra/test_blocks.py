"""blocks: one block per outermost statement of f's body, CCW weights (SPEC §3)."""

from __future__ import annotations

import ast
import itertools

import pytest

from codethinker.contra.blocks import ccw, split_blocks
from codethinker.contra.normalize import normalize_source


def spans(src: str, entry: str = "f") -> list[tuple[int, int, int]]:
    return [(b.start, b.end, b.weight) for b in split_blocks(normalize_source(src, entry))]


def weight(stmt_src: str) -> int:
    return ccw(ast.parse(stmt_src).body)


def test_spec_examples_straight_line_1_while_2():
    src = "def f(n):\n    x = 0\n    while n:\n        n -= 1\n        x += 2\n    return x\n"
    assert spans(src) == [(0, 1, 1), (2, 4, 2), (5, 5, 1)]


def test_paper_example_weights_1_1_1_2():
    src = "def f(n):\n    a = n + 1\n    b = a * 2\n    c = b - 3\n    return [i for i in range(c)]\n"
    assert spans(src) == [(0, 1, 1), (2, 2, 1), (3, 3, 1), (4, 4, 2)]


def test_def_line_and_module_lines_join_the_first_block():
    src = "import math\nK = 2\ndef f(x):\n    y = x\n    return y\n"
    assert spans(src) == [(0, 3, 1), (4, 4, 1)]


def test_single_line_function_is_one_block():
    assert spans("def f(x): return x\n") == [(0, 0, 1)]


def test_statements_sharing_a_line_share_a_block():
    src = "def f(x):\n    a = 1; b = 2\n    c = a if x else b; d = c\n    return d\n"
    assert spans(src) == [(0, 1, 1), (2, 2, 2), (3, 3, 1)]


def test_if_elif_else_is_one_block():
    src = (
        "def f(x):\n    if x > 1:\n        y = 1\n    elif x < 0:\n        y = 2\n"
        "    else:\n        y = 3\n    return y\n"
    )
    assert spans(src) == [(0, 6, 3), (7, 7, 1)]  # the def line joins the first block


@pytest.mark.parametrize(
    ("stmt", "expected"),
    [
        ("x = 1", 1),
        ("x = a and b", 2),
        ("x = a and b and c", 3),
        ("x = a or b and c", 3),
        ("if a or b:\n    pass", 3),
        ("x = [i for i in y]", 2),
        ("x = [i for i in y if i if i > 2]", 4),
        ("x = {k: v for k in a for v in b}", 3),
        ("x = sum(i for i in y if i)", 3),
        ("x = 1 if a else 2", 2),
        ("for i in x:\n    pass", 2),
        ("for i in x:\n    for j in i:\n        if j:\n            break", 4),
        ("while a:\n    a -= 1\nelse:\n    pass", 2),
        ("try:\n    pass\nexcept ValueError:\n    pass", 2),
        ("try:\n    pass\nexcept A:\n    pass\nexcept B:\n    pass\nfinally:\n    pass", 3),
        ("try:\n    pass\nfinally:\n    pass", 1),
        ("match x:\n    case 1:\n        pass\n    case _:\n        pass", 3),
        ("with open(p) as h:\n    pass", 1),
        ("def g(y):\n    if y:\n        return 1", 2),
        ("g = lambda y: y or 0", 2),
        ("return x", 1),
    ],
)
def test_ccw(stmt, expected):
    assert weight(stmt) == expected


def test_block_weights_in_a_mixed_function():
    src = (
        "def f(a, b):\n"
        "    if a and b or a:\n"  # if + 2 boolean operands
        "        z = [i for i in range(3) if i]\n"  # comprehension loop + condition
        "    elif b:\n"  # elif
        "        z = 1 if a else 2\n"  # conditional expression
        "    else:\n"
        "        z = 0\n"
        "    try:\n"
        "        q = 1\n"
        "    except ValueError:\n"
        "        q = 2\n"
        "    match a:\n"
        "        case 1:\n"
        "            w = 1\n"
        "        case _:\n"
        "            w = 2\n"
        "    return z, q, w\n"
    )
    assert spans(src) == [(0, 6, 8), (7, 10, 2), (11, 15, 3), (16, 16, 1)]


def test_blocks_are_contiguous_and_cover_the_listing():
    src = (
        '# x\nimport os\n\ndef f(x):\n    """d"""\n    a = [\n        1,\n\n        2]\n'
        "    for i in a:\n        x += i\n    return x\n"
    )
    prog = normalize_source(src)
    blocks = split_blocks(prog)
    assert blocks[0].start == 0
    for prev, nxt in itertools.pairwise(blocks):
        assert nxt.start == prev.end + 1
    assert blocks[-1].end == len(prog.lines) - 1
    assert [(b.start, b.end, b.weight) for b in blocks] == [(0, 4, 1), (5, 6, 2), (7, 7, 1)]


def test_other_entry_name():
    src = "def helper(x):\n    if x:\n        return 1\n    return 2\ndef g(x):\n    y = helper(x)\n    return y\n"
    assert spans(src, "g") == [(0, 5, 1), (6, 6, 1)]  # helper's decisions do not weigh on g's blocks


@pytest.mark.needs_shared
def test_cruxeval_blocks(cruxeval_path):
    import json

    for line in cruxeval_path.read_text().splitlines():
        row = json.loads(line)
        prog = normalize_source(row["code"])
        blocks = split_blocks(prog)
        assert blocks and blocks[0].start == 0 and blocks[-1].end == len(prog.lines) - 1, row["id"]
        assert all(b.weight >= 1 for b in blocks)
        assert all(b.start == a.end + 1 for a, b in itertools.pairwise(blocks)), row["id"]
