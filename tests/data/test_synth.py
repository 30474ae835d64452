"""The short-program generator: deterministic, distinct, and every program runs and traces."""

from __future__ import annotations

import ast

import pytest

from codethinker.data.synth import generate


class TestGenerate:
    def test_deterministic_and_distinct(self):
        a, b = generate(300, seed=3), generate(300, seed=3)
        assert a == b
        assert len({(p.source, p.input) for p in a}) == 300
        assert generate(50, seed=4) != generate(50, seed=3)[:50]

    def test_every_program_parses_and_returns_without_error(self):
        for p in generate(500, seed=11):
            tree = ast.parse(p.source)
            assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == [p.entry]
            env: dict = {}
            exec(compile(tree, "<synth>", "exec"), env)
            ast.literal_eval(f"({p.input},)")  # the input is a literal argument list
            eval(f"{p.entry}({p.input})", env)

    def test_programs_are_short(self):
        lines = [p.source.count("\n") for p in generate(500, seed=5)]
        assert max(lines) <= 20 and sum(lines) / len(lines) < 10


@pytest.mark.slow
def test_every_program_traces_in_the_sandbox():
    from codethinker.contra.tracer import trace_many
    from codethinker.sandbox import bwrap_available

    if not bwrap_available():
        pytest.skip("bubblewrap (bwrap) is not available here")
    progs = generate(200, seed=2)
    outcomes = trace_many([(p.source, p.input, p.entry) for p in progs])
    assert [o.reason for o in outcomes if o.flow is None] == []
    assert min(len(o.flow.blocks) for o in outcomes) >= 2
