"""The tracer on all 800 CRUXEval programs (SPEC §3): coverage, outputs, self-consistency."""

from __future__ import annotations

import collections
import itertools

import pytest

from codethinker.contra.render import render_trace, skeleton
from codethinker.contra.tracer import Flow, trace_many
from codethinker.contra.validate import parse_trace, validate
from codethinker.contra.values import parse_literal, strict_equal
from codethinker.rewards.crm import crm_score

pytestmark = pytest.mark.needs_shared

MIN_TRACED = 0.95


@pytest.fixture(scope="module")
def traced(crux_rows):
    outs = trace_many([(r["code"], r["input"], "f") for r in crux_rows])
    assert len(outs) == len(crux_rows) == 800
    return list(zip(crux_rows, outs, strict=True))


def test_coverage(traced, capsys):
    ok = sum(o.ok for _, o in traced)
    reasons = collections.Counter(o.reason.split(":")[0] for _, o in traced if not o.ok)
    with capsys.disabled():
        print(f"\nCRUXEval: traced {ok}/{len(traced)}; not traced: {dict(reasons) or 'none'}")
        for row, o in traced:
            if not o.ok:
                print(f"  {row['id']}: {o.reason}")
    assert ok >= MIN_TRACED * len(traced), reasons
    assert all(o.reason for _, o in traced if not o.ok)


def test_outputs_equal_cruxeval(traced):
    wrong = [
        (r["id"], o.flow.output_text, r["output"])
        for r, o in traced
        if o.ok and not strict_equal(o.flow.output, parse_literal(r["output"]))
    ]
    assert not wrong


def test_ground_truth_trace_scores_4(traced):
    bad = []
    for row, o in traced:
        if not o.ok:
            continue
        flow = o.flow
        text = render_trace(flow)
        back = Flow.from_json(flow.to_json())
        for truth in (flow, back):
            v = validate(text, truth)
            s = crm_score(text, truth)
            if not v.ok or s["reward"] != 4.0 or s["rcs"] != 1.0:
                bad.append((row["id"], v.reason, v.detail, s["reward"]))
        if crm_score(skeleton(flow), back)["reward"] != 4.0 or not parse_trace(text, "f").ok:
            bad.append((row["id"], "skeleton/parse_trace"))
    assert not bad


def test_flows_are_well_formed(traced):
    for row, o in traced:
        if not o.ok:
            continue
        flow = o.flow
        assert flow.blocks[0].start == 0, row["id"]
        assert all(b.start == a.end + 1 for a, b in itertools.pairwise(flow.blocks)), row["id"]
        assert flow.blocks[-1].end <= len(flow.lines) - 1
        assert all(b.weight >= 1 and type(b.locals) is dict for b in flow.blocks)
        assert flow.input == row["input"].strip()


def test_expression_inputs_are_traced(traced):
    exprs = [(r, o) for r, o in traced if "join" in r["input"] and "(" in r["input"]]
    assert exprs, "CRUXEval holds expression inputs such as ''.join(['A'] * 20)"
    assert all(o.ok for _, o in exprs), [(r["id"], o.reason) for r, o in exprs if not o.ok]
