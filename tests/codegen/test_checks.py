"""codegen.checks: each LeetCodeDataset test form becomes (call, kind, expected), and judging the plain
value the sandbox returns agrees with the test's own assert (property tests against the preamble's real
``tree_node``/``is_same_tree`` and ``list_node``/``is_same_list``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.codegen.checks import Check, CheckError, level_order, parse_check
from codethinker.codegen.runner import _level_order, _nodes, plain

HELPERS = """
from collections import deque
class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next
def list_node(values):
    if not values:
        return None
    head = ListNode(values[0])
    p = head
    for val in values[1:]:
        node = ListNode(val)
        p.next = node
        p = node
    return head
def is_same_list(p1, p2):
    if p1 is None and p2 is None:
        return True
    if not p1 or not p2:
        return False
    return p1.val == p2.val and is_same_list(p1.next, p2.next)
class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right
def tree_node(values):
    if not values:
        return None
    root = TreeNode(values[0])
    i = 1
    queue = deque()
    queue.append(root)
    while queue:
        node = queue.popleft()
        if i < len(values) and values[i] is not None:
            node.left = TreeNode(values[i])
            queue.append(node.left)
        i += 1
        if i < len(values) and values[i] is not None:
            node.right = TreeNode(values[i])
            queue.append(node.right)
        i += 1
    return root
def is_same_tree(p, q):
    if not p and not q:
        return True
    elif not p or not q:
        return False
    elif p.val != q.val:
        return False
    else:
        return is_same_tree(p.left, q.left) and is_same_tree(p.right, q.right)
"""  # LeetCodeDataset's preamble helpers, as every record that uses them defines them
NS: dict = {}
exec(HELPERS, NS)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5))
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.tuples(kids, kids), st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=12,
)
LEVELS = st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=14).filter(lambda v: not v or v[0] is not None)


class TestParse:
    def test_the_three_forms(self):
        assert parse_check("assert candidate(nums = [2,7], target = 9) == [0,1]") == Check(
            "nums=[2,7], target=9", "value", [0, 1]
        )
        assert parse_check("assert [0, 1] == candidate(1)") == Check("1", "value", [0, 1])
        lst = parse_check("assert is_same_list(candidate(l1 = list_node([2,4])), list_node([7, 0]))")
        assert lst == Check("l1=list_node([2,4])", "list", [7, 0])
        tree = parse_check("assert is_same_tree(candidate(p = [3]), tree_node([3, None, 20, None, None]))")
        assert tree == Check("p=[3]", "tree", [3, None, 20])

    def test_inf_of_the_preamble_and_keyword_splats(self):
        assert parse_check("assert candidate(x = 1) == -inf").expected == float("-inf")
        assert parse_check("assert candidate(*a, **{'k': 1}) == 2").args == "*a, **{'k': 1}"

    @pytest.mark.parametrize(
        "test",
        [
            "assert candidate(1) == f(2)",
            "assert candidate(1) != 2",
            "assert candidate(1) == 2, 'msg'",
            "assert is_same(candidate(1), 2)",
            "assert is_same_list(candidate(1), list_node(x))",
            "assert is_same_tree(candidate(1), list_node([1]))",
            "assert is_same_list(candidate(1), list_node((1, 2)))",
            "assert candidate(1) == 2\nassert candidate(2) == 3",
            "x = candidate(1)",
            "assert other(1) == 2",
            "assert (",
            "assert candidate(1) == __import__('os').system('true')",
        ],
    )
    def test_anything_else_is_refused(self, test):
        with pytest.raises(CheckError):
            parse_check(test)

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=60))
    def test_any_text_parses_or_is_a_check_error(self, text):
        try:
            c = parse_check(text)
        except CheckError:
            return
        assert c.kind in ("value", "list", "tree")


class TestTrees:
    @settings(max_examples=300, deadline=None)
    @given(LEVELS, LEVELS)
    def test_same_tree_exactly_when_the_level_orders_are_equal(self, a, b):
        same = NS["is_same_tree"](NS["tree_node"](a), NS["tree_node"](b))
        assert same == (level_order(a) == level_order(b))

    @settings(max_examples=300, deadline=None)
    @given(LEVELS)
    def test_the_sandbox_side_reads_the_tree_as_the_parent_builds_it(self, values):
        assert _level_order(NS["tree_node"](values)) == level_order(values)
        assert Check("", "tree", level_order(values)).passes(_level_order(NS["tree_node"](values)))


class TestLists:
    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.integers(-5, 5), max_size=8), st.lists(st.integers(-5, 5), max_size=8))
    def test_same_list_exactly_when_the_values_are_equal(self, a, b):
        same = NS["is_same_list"](NS["list_node"](a), NS["list_node"](b))
        assert same == Check("", "list", a).passes(_nodes(NS["list_node"](b)))


class TestPlainValues:
    @settings(max_examples=300, deadline=None)
    @given(VALUES, VALUES)
    def test_the_parent_compares_as_the_assert_does(self, got, expected):
        assert Check("", "value", expected).passes(plain(got)) == (got == expected)

    def test_containers_of_collections_compare_as_they_would(self):
        from collections import Counter, OrderedDict, defaultdict, deque

        assert plain(Counter("aab")) == {"a": 2, "b": 1} and type(plain(OrderedDict(a=1))) is dict
        assert plain(defaultdict(list, k=[1])) == {"k": [1]} and plain(bytearray(b"x")) == b"x"
        assert plain(frozenset({1})) == {1}
        for bad in (deque([1]), iter([1]), object(), type("L", (list,), {})([1]), range(2)):
            with pytest.raises(Exception, match="not plain data"):
                plain(bad)
