"""ast_filter: Solution methods -> plain functions f, every drop with its reason."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codethinker.contra.normalize import normalize_source
from codethinker.data.extract import DROP_REASONS, Drop, extract_function, filter_problems, positional_args

PRE = "from typing import *\nfrom collections import *\nfrom math import *\nimport math\ninf = float('inf')\n"


def sol(body: str) -> str:
    return "class Solution:\n" + textwrap.indent(textwrap.dedent(body), "    ")


def ex(src: str, entry: str = "g", **kw):
    return extract_function(src, f"Solution().{entry}", PRE, **kw)


def reason(src: str, entry: str = "g", **kw) -> str:
    with pytest.raises(Drop) as e:
        ex(src, entry, **kw)
    return e.value.reason


def test_strips_comments_docstrings_blank_lines_and_hints():
    src = sol(
        '''
        def g(self, nums: List[int], k: int = 2) -> int:
            """Docstring."""
            # a comment line
            total = 0  # trailing comment

            for x in nums:
                def inner(y):
                    """nested docstring"""
                    return y
                total += inner(x) * k
            return total
        '''
    )
    out = ex(src)
    assert out.code == (
        "def f(nums, k=2):\n    total = 0\n    for x in nums:\n        def inner(y):\n"
        "            return y\n        total += inner(x) * k\n    return total\n"
    )
    assert out.params == ["nums", "k"] and out.annotations == {"nums": "List[int]", "k": "int"}
    assert out.returns == "int" and out.n_lines == 7 and not out.recursive


def test_multiline_signature_and_string_literal_kept():
    src = sol(
        '''
        def g(
            self, s: str
        ) -> str:
            t = """a

        b"""
            u = s + t
            v = u * 2
            w = v[::-1]
            return w
        '''
    )
    code = ex(src).code
    assert code.startswith("def f(s):\n")
    assert '    t = """a\n\n    b"""\n' in code  # the blank line inside the string stays, text unchanged
    assert normalize_source(code).text.count("\n") == 8


def test_recursion_renamed_when_safe():
    src = sol(
        """
        def fib(self, n: int) -> int:
            if n < 2:
                return n
            a = self.fib(n - 1)
            b = self.fib(n - 2)
            return a + b
        """
    )
    out = ex(src, "fib")
    assert out.recursive and "f(n - 1)" in out.code and "self" not in out.code
    ns: dict = {}
    exec(compile(out.code, "<f>", "exec"), ns)  # our own test program, not data
    assert ns["f"](10) == 55


@pytest.mark.parametrize(
    "body",
    [
        "f = 1\nif n < 2:\n    return n\nx = self.fib(n - 1)\nreturn x + f",  # local f
        "def f(y):\n    return y\nif n < 2:\n    return n\nreturn self.fib(n - 1) + f(1)",  # nested def f
        "g = [f for f in range(3)]\nif n < 2:\n    return n\nreturn self.fib(n - 1) + len(g)",  # comprehension var
    ],
)
def test_recursion_rename_clash_dropped(body):
    src = sol("def fib(self, n):\n" + textwrap.indent(body, "    ") + "\n")
    assert reason(src, "fib") == "rename_clash"


def test_local_f_without_recursion_is_fine():
    src = sol("def g(self, n):\n    f = n + 1\n    a = f * 2\n    b = a - 1\n    c = b + 1\n    return c\n")
    assert ex(src).code.startswith("def f(n):\n    f = n + 1")


def test_self_state_and_other_methods_dropped():
    assert (
        reason(sol("def g(self, n):\n    self.x = n\n    a = 1\n    b = 2\n    c = 3\n    return n\n")) == "uses_self"
    )
    assert reason(
        sol("def g(self, n):\n    a = self.h(n)\n    b = 1\n    c = 2\n    return a\ndef h(self, n):\n    return n\n")
    ) == ("needs_other_methods")
    assert reason(sol("MOD = 7\ndef g(self, n):\n    a = n % self.MOD\n    b = 1\n    c = 2\n    return a\n")) == (
        "uses_self"
    )
    # passing self along, or rebinding it in a nested function, also needs self
    assert reason(sol("def g(self, n):\n    a = [self]\n    b = 1\n    c = 2\n    return n\n")) == "uses_self"
    body = "def g(self, n):\n    def h(self):\n        return self\n    a = 1\n    b = 2\n    return h(n)\n"
    assert reason(sol(body)) == "uses_self"


def test_helper_classes_and_module_code_dropped():
    linked = sol(
        "def g(self, head: Optional[ListNode]) -> int:\n    n = 0\n    while head:\n        n += 1\n"
        "        head = head.next\n    return n\n"
    )
    assert reason(linked) == "needs_helper_class"
    trie = "class Trie:\n    pass\n\n" + sol("def g(self, w):\n    t = Trie()\n    a = 1\n    b = 2\n    return w\n")
    assert reason(trie) == "needs_helper_class"
    pre = "MX = 10\n" + sol("def g(self, n):\n    a = MX\n    b = 1\n    c = 2\n    return a + n\n")
    assert reason(pre) == "needs_module_code"
    third = "from sortedcontainers import SortedList\n" + sol(
        "def g(self, n):\n    s = SortedList()\n    a = 1\n    b = 2\n    return n\n"
    )
    assert reason(third) == "third_party_module"
    assert reason(sol("def g(self, n):\n    a = undefined_thing(n)\n    b = 1\n    c = 2\n    return a\n")) == (
        "undefined_name"
    )


def test_other_drops():
    assert reason("class Solution:\n    def g(self, x:\n") == "syntax_error"
    assert reason(sol("def g(self, n):\n    return n\n")) == "too_short"
    assert ex(sol("def g(self, n):\n    return n\n"), min_lines=2).n_lines == 2
    assert reason(sol("def h(self, n):\n    return n\n")) == "entry_not_found"
    with pytest.raises(Drop, match="bad_entry_point"):
        extract_function(sol("def g(self):\n    pass\n"), "g", PRE)
    assert reason(sol("@cache\ndef g(self, n):\n    a = 1\n    b = 2\n    c = 3\n    return n\n")) == "decorated_method"


def test_imports_from_the_preamble():
    src = sol(
        "def g(self, s, n):\n    c = Counter(s)\n    best = -inf\n    r = math.sqrt(n) + pow(2, n, 7)\n"
        "    q = deque([1])\n    return [c[s[0]], best, r, len(q)]\n"
    )
    code = ex(src).code
    lines = code.split("\n")
    assert lines[:3] == ["import math", "from collections import Counter, deque", "inf = float('inf')"]
    assert "from math import pow" not in code  # the builtin pow wins over `from math import *`
    ns: dict = {}
    exec(compile(code, "<f>", "exec"), ns)
    assert ns["f"]("aab", 4) == [2, float("-inf"), 2.0 + 2, 1]


def test_staticmethod_and_unicode():
    out = ex(sol("@staticmethod\ndef g(n):\n    a = 1\n    b = 2\n    c = 3\n    return n + a + b + c\n"))
    assert out.code.startswith("def f(n):")
    out = ex(sol('def g(self, s):\n    t = "é"; u = self.g  # é\n    a = 1\n    b = 2\n    return len(s)\n'))
    assert '    t = "é"; u = f\n' in out.code


def test_positional_args():
    assert positional_args("nums = [2,7,11,15], target = 9", ["nums", "target"]) == "[2, 7, 11, 15], 9"
    assert positional_args("[1], k = 3", ["nums", "k"]) == "[1], 3"
    assert positional_args('s = "a\'b"', ["s"]) == '"a\'b"'
    for bad, params in [
        ("x = 1", ["y"]),
        ("1, 2", ["a"]),
        ("a = 1", ["a", "b"]),
        ("a = foo()", ["a"]),
        ("a = __import__('os').system('true')", ["a"]),
        ("*[1]", ["a"]),
        ("a = [1", ["a"]),
        ("a = " + "[" * 10000 + "]" * 10000, ["a"]),
    ]:
        with pytest.raises(ValueError):
            positional_args(bad, params)


literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(literals, min_size=1, max_size=4), st.integers(0, 4))
def test_positional_args_property(values, n_pos):
    from codethinker.contra.values import parse_call_args, strict_equal

    params = [f"p{i}" for i in range(len(values))]
    n_pos = min(n_pos, len(values))
    parts = [repr(v) for v in values[:n_pos]] + [
        f"{p} = {v!r}" for p, v in zip(params[n_pos:], values[n_pos:], strict=True)
    ]
    text = positional_args(", ".join(parts), params)
    args, kwargs = parse_call_args(text)
    assert not kwargs and len(args) == len(values)
    assert all(strict_equal(a, v) for a, v in zip(args, values, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_positional_args_never_crashes(text):
    try:
        positional_args(text, ["a", "b"])
    except ValueError:
        pass


def test_real_problems(leetcode_problems):
    kept, drops, _ = filter_problems(leetcode_problems)
    assert len(kept) + sum(drops.values()) == len(leetcode_problems)
    assert set(drops) <= set(DROP_REASONS)
    assert drops["too_short"] > 0 and drops["needs_helper_class"] > 0
    assert len(kept) > 80
    for fn in kept:
        tree = ast.parse(fn["code"])
        assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["f"]
        assert "self" not in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert fn["n_lines"] >= 5 and fn["examples"]
        assert normalize_source(fn["code"]).text == fn["code"]  # already normalized
    two_sum = next(f for f in kept if f["task_id"] == "two-sum")
    assert two_sum["examples"][0] == {"args": "[2, 7, 11, 15], 9", "output": "[0,1]"}
    assert Counter(f["recursive"] for f in kept)[False] > 0


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "x = 1",
                "return x",
                "# c",
                "",
                "if x:\n    y = self.g(x)",
                "for i in range(3):\n    x += i",
                "self.z = 2",
                '"""doc"""',
                "def f(a):\n    return a",
                's = """a\n\nb"""',
                "y = Counter(x)",
                "return self.h()",
                "while x:\n    x -= 1  # dec",
                "z = ListNode(1)",
            ]
        ),
        min_size=1,
        max_size=8,
    )
)
@example(stmts=['"""doc"""', '"""doc"""', "x = 1"])  # CI found: two leading strings, not idempotent
def test_extract_never_crashes(stmts):
    body = "\n".join(stmts)
    src = "class Solution:\n    def g(self, x):\n" + textwrap.indent(body, "        ") + "\n"
    try:
        out = ex(src, min_lines=1)
    except Drop as d:
        assert d.reason in DROP_REASONS
        return
    tree = ast.parse(out.code)
    assert tree.body[-1].name == "f" and normalize_source(out.code).text == out.code


@pytest.mark.parametrize(
    "src",
    ["(" * 100000, "class Solution:\n    def g(self):\n        return " + "-" * 100000 + "1\n", "\x00", ""],
)
def test_hostile_sources(src):
    with pytest.raises(Drop):
        ex(src)
