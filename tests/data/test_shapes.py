"""data.shapes: text, renamed and shape keys (property tests over generated programs), the split by shape
and the overlap audit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.data.shapes import overlap, renamed_key, shape_key, split_by_shape, text_key
from codethinker.data.synth import generate

NAMES = st.sampled_from(["a", "b", "q", "total", "zz", "res"])


def rename(code: str, old: str, new: str) -> str:
    import re

    return re.sub(rf"\b{old}\b", new, code)


class TestKeys:
    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, 10_000))
    def test_renaming_the_variables_keeps_renamed_and_shape(self, seed):
        p = generate(n=1, seed=seed)[0]
        fresh = rename(rename(p.source, "f", "g_fn"), "xs", "brand_new")
        assert renamed_key(fresh) == renamed_key(p.source) and shape_key(fresh) == shape_key(p.source)

    def test_constants_change_renamed_but_not_shape_and_builtins_are_operations(self):
        a = "def f(xs):\n    t = len(xs) + 1\n    return t\n"
        seven = a.replace("+ 1", "+ 7")
        assert shape_key(a) == shape_key(seven) and renamed_key(a) != renamed_key(seven)
        assert shape_key(a) != shape_key(a.replace("len", "sum"))  # an operation, not a name
        assert shape_key(a) != shape_key(a.replace("xs) + 1", "xs) - 1"))
        assert text_key(a) == text_key(a.replace("    t =", "    t  ="))
        assert text_key(a) != text_key(rename(a, "t", "u")) and renamed_key(a) == renamed_key(rename(a, "t", "u"))

    def test_swapping_two_names_is_the_same_renamed_program(self):
        a = "def f(a, b):\n    return a - b\n"
        assert renamed_key(a) == renamed_key("def f(b, a):\n    return b - a\n")
        assert renamed_key(a) != renamed_key("def f(a, b):\n    return b - a\n")


class TestSplit:
    @settings(max_examples=25, deadline=None)
    @given(st.integers(0, 50), st.integers(1, 40))
    def test_no_shape_on_both_sides_and_a_function_of_data_and_seed(self, seed, n):
        codes = {f"p{i}": p.source for i, p in enumerate(generate(n=80, seed=seed))}
        held, rest = split_by_shape(codes, seed, n)
        assert len(held) <= n and held | rest == set(codes) and not held & rest
        assert not {shape_key(codes[i]) for i in held} & {shape_key(codes[i]) for i in rest}
        assert split_by_shape(dict(reversed(list(codes.items()))), seed, n) == (held, rest)

    def test_held_out_programs_are_as_long_as_the_others(self):
        from collections import Counter

        from codethinker.data.shapes import _quotas, size

        codes = {f"p{i}": p.source for i, p in enumerate(generate(n=3000, seed=5))}
        held, rest = split_by_shape(codes, 0, 300)
        sizes = Counter(size(codes[i]) for i in held)
        quotas = _quotas(Counter(size(c) for c in codes.values()), 300)
        assert all(sizes[k] <= quotas[k] for k in sizes) and len(held) >= 290
        mean = lambda ids: sum(size(codes[i]) for i in ids) / len(ids)  # noqa: E731
        assert abs(mean(held) - mean(rest)) < 0.2

    def test_overlap_counts_each_kind(self):
        train = ["def f(x):\n    return x + 1\n"]
        held = ["def f(x):\n    return x + 1\n", "def g(y):\n    return y + 1\n", "def g(y):\n    return y + 2\n"]
        assert overlap(held, train) == {"n": 3, "text": 1, "renamed": 2, "shape": 3}

    def test_the_audit_is_overlap_per_held_out_set(self, capsys):
        """The stage's audit computes the training keys once for every set: the same counts as ``overlap``."""
        from codethinker.data.shapes import overlap_audit

        programs = [p.source for p in generate(n=60, seed=3)]
        train = [{"code": c} for c in programs[:40] + programs[:5]]  # a repeated program counts once
        held = {"a": [{"code": c} for c in programs[35:50]], "b": [{"code": c} for c in programs[50:]], "c": []}
        audit = overlap_audit(held, train, progress="audit")
        assert audit == {k: overlap([r["code"] for r in rows], programs[:40]) for k, rows in held.items()}
        assert audit["a"]["text"] == 5 and "audit" in capsys.readouterr().err  # the bar, on stderr
