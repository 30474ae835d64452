"""Results as they come: ``Sandbox.imap``, ``trace_iter`` and the exec_filter stage's samples, read
lazily and kept only until handed over; and a result of more values than a frame may hold."""

from __future__ import annotations

import gc
import itertools
import threading
import weakref

import pytest

import codethinker.contra.tracer  # noqa: F401 (registers the "trace" runner, and with contra.values "call")
from codethinker.contra.render import render_trace
from codethinker.contra.tracer import TraceOutcome, trace_iter, trace_many
from codethinker.data.execute import exec_filter, iter_samples
from codethinker.sandbox import Job, Sandbox, SandboxConfig
from codethinker.sandbox.protocol import MAX_ITEMS


@pytest.fixture(scope="module")
def sb():
    with Sandbox(SandboxConfig(timeout_s=2.0, workers=2)) as box:
        yield box


def square(i: int, sleep: float = 0.0) -> Job:
    return Job(f"import time\ndef f(x):\n    time.sleep({sleep})\n    return x * x", args=(i,))


def test_imap_yields_in_order_and_reads_jobs_lazily(sb, monkeypatch):
    """While job 0 runs, the other worker finishes later jobs; imap keeps at most MAX_AHEAD of their
    results and then takes no new job, so it never reads far ahead of what it has handed over."""
    monkeypatch.setattr("codethinker.sandbox.pool.MAX_AHEAD", 5)
    pulled = []

    def jobs():
        for i in range(40):
            pulled.append(i)
            yield square(i, 1.0 if i == 0 else 0.0)

    stream = sb.imap(jobs())
    try:
        first = next(stream)
        assert first.value == 0
        assert len(pulled) <= 5 + sb.n_workers + 1  # not the whole input before the first result
        rest = [r.value for r in stream]
    finally:
        stream.close()
    assert [first.value, *rest] == [i * i for i in range(40)]
    assert sb.map([square(3)])[0].value == 9  # the sandbox is free again


def test_imap_keeps_no_result_it_has_handed_over(sb):
    refs = []
    for res in sb.imap(square(i) for i in range(12)):
        refs.append(weakref.ref(res))
        del res
    gc.collect()
    assert [r() for r in refs] == [None] * 12


def test_imap_closed_early_ends_its_jobs_and_frees_the_sandbox(sb):
    stream = sb.imap([square(0), *(square(i, 1.5) for i in range(1, 6))])
    assert next(stream).value == 0
    with pytest.raises(RuntimeError, match="unfinished imap"):
        sb.map([square(2)])
    stream.close()
    assert [r.value for r in sb.map([square(2), square(3)])] == [4, 9]


def test_a_dropped_imap_frees_the_sandbox(sb):
    for res in sb.imap(square(i) for i in range(6)):
        if res.value == 1:
            break
    assert sb.run(square(5)).value == 25


def test_close_with_an_unfinished_imap_does_not_hang():
    box = Sandbox(SandboxConfig(timeout_s=2.0, workers=1))
    stream = box.imap(square(i) for i in range(5))
    assert next(stream).value == 0
    done = threading.Event()
    t = threading.Thread(target=lambda: (box.close(), done.set()), daemon=True)
    t.start()  # another thread waits for the map; this one then closes it
    assert not done.wait(0.5)
    box.close()
    assert done.wait(10)
    with pytest.raises(RuntimeError, match="closed"):
        box.map([square(1)])


def test_imap_of_nothing_starts_no_worker():
    with Sandbox(SandboxConfig(workers=1)) as box:
        assert list(box.imap(iter([]))) == [] and box.map([]) == []
        assert not box._slots


def test_a_result_of_more_values_than_a_frame_holds_is_an_error_in_the_sample():
    """The encoder counts values as the decoder does: past 2,097,152 the sample's result is
    error/ResultNotSerializable, not a frame the parent kills as a protocol error."""
    with Sandbox(SandboxConfig(timeout_s=30.0, workers=1)) as box:
        big, fits = box.map([Job(f"def f():\n    return [0] * {MAX_ITEMS}"), Job("def f():\n    return [0] * 1000")])
    assert big.status == "error" and big.error_type == "ResultNotSerializable", big
    assert "2097152 values" in big.error_message
    assert fits.ok and len(fits.value) == 1000


# --------------------------------------------------------------------------- trace_iter
PROG = "def f(x):\n    y = x + 1\n    return y\n"


def test_trace_iter_keeps_the_order_of_items_with_bad_ones_among_them(sb):
    items = [(PROG, "1", "f"), ("def g(:\n", "1", "f"), (PROG, "2", "f"), (PROG, "(", "f"), (PROG, "3", "f")]
    outs = list(trace_iter(iter(items), sandbox=sb))
    assert [o.ok for o in outs] == [True, False, True, False, True]
    assert [o.flow.output for o in outs if o.ok] == [2, 3, 4]
    assert all(isinstance(o, TraceOutcome) for o in outs)
    assert [o.ok for o in trace_many(items, sandbox=sb)] == [o.ok for o in outs]
    assert next(trace_iter([("def g(:\n", "1", "f")], sandbox=sb)).reason.startswith("bad program")


def test_trace_iter_reads_items_lazily(sb, monkeypatch):
    monkeypatch.setattr("codethinker.sandbox.pool.MAX_AHEAD", 3)
    taken = itertools.count()

    def items():
        for i in range(30):
            next(taken)
            yield (PROG, str(i), "f")

    stream = trace_iter(items(), sandbox=sb)
    assert next(stream).flow.output == 1
    assert next(taken) <= 3 + sb.n_workers + 2
    assert [o.flow.output for o in stream] == list(range(2, 31))


# --------------------------------------------------------------------------- exec_filter
class _Flow:
    def __init__(self, inp: str, out: object) -> None:
        self.input, self.output, self.output_text, self.blocks = inp, out, repr(out), [1]

    def to_json(self) -> str:
        return "{}"


def fake_tracer(log: list):
    """Outcomes one by one as items are taken (as trace_iter gives them), logging each step."""

    def tracer(items):
        for _code, inp, _entry in items:
            log.append(("item", inp))
            yield TraceOutcome(_Flow(inp, int(inp)) if inp.isdigit() else None, "error: ValueError: x")
            log.append(("outcome", inp))

    return tracer


def test_iter_samples_hands_each_sample_over_as_its_outcome_comes():
    log: list = []
    records = iter([{"task_id": f"t{k}", "entry": "f", "code": "c", "inputs": ["1", "x", "2"]} for k in range(3)])
    counts: dict = {}
    stream = iter_samples(records, tracer=fake_tracer(log), render=lambda flow: "t", counts=counts)
    first = next(stream)
    assert first["id"] == "t0/0" and log == [("item", "1")] and counts == {}
    rest = list(stream)
    assert [s["id"] for s in rest] == ["t0/2", "t1/0", "t1/2", "t2/0", "t2/2"]
    assert counts["pairs_in"] == 9 and counts["samples"] == 6 and counts["functions_in"] == 3
    assert counts["dropped"] == {"runtime_error": 3} and counts["error_types"] == {"ValueError": 3}
    samples, same = exec_filter(
        [{"task_id": "t", "entry": "f", "code": "c", "inputs": ["1"]}], tracer=fake_tracer([]), render=lambda f: "t"
    )
    assert [s["id"] for s in samples] == ["t/0"] and same["samples"] == 1


def test_iter_samples_refuses_a_tracer_that_loses_outcomes():
    def lossy(items):
        for k, _ in enumerate(items):
            if k == 0:
                yield TraceOutcome(None, "timeout")

    records = [{"task_id": "t", "entry": "f", "code": "c", "inputs": ["1", "2"]}]
    with pytest.raises(RuntimeError, match="1 outcomes for 2 items"):
        list(iter_samples(records, tracer=lossy, render=render_trace, counts={}))
