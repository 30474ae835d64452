"""codethinker.sandbox: API, statuses, limits, isolation between samples, the purity check."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import textwrap
import time

import pytest

from codethinker import _sandbox_worker as worker
from codethinker.sandbox import (
    RUNNERS,
    Job,
    Sandbox,
    SandboxConfig,
    SandboxResult,
    _loads_plain,
    bwrap_available,
)


def _src(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (bwrap) is not available here")


@pytest.fixture(scope="module")
def sb():
    cfg = SandboxConfig(timeout_s=1.0, grace_s=1.0, memory_mb=256, workers=2)
    with Sandbox(cfg) as box:
        yield box


# --------------------------------------------------------------------------- API
def test_config_defaults_and_help():
    cfg = SandboxConfig()
    assert (cfg.timeout_s, cfg.memory_mb, cfg.workers, cfg.output_limit) == (2.0, 1024, None, 65536)
    assert (cfg.isolation, cfg.max_tasks_per_worker) == ("auto", None)
    for f in dataclasses.fields(SandboxConfig):
        assert f.metadata.get("help"), f"{f.name} has no help text"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.timeout_s = 3.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs", [{"timeout_s": 0}, {"workers": 0}, {"isolation": "docker"}, {"max_tasks_per_worker": 0}]
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        SandboxConfig(**kwargs)


def test_job_and_result_defaults():
    job = Job("def f(): pass")
    assert (job.args, job.kwargs, job.entry, job.runner, job.options) == ((), {}, "f", "call", {})
    assert Job("x").kwargs is not Job("y").kwargs
    assert SandboxResult("ok", 1).ok and not SandboxResult("error").ok
    assert set(RUNNERS) >= {"call", "trace"}
    assert RUNNERS["trace"] == "codethinker.contra.tracer:trace_runner"


# --------------------------------------------------------------------------- statuses
def test_ok_value_is_canonical(sb):
    src = _src(
        """
        from collections import Counter, deque
        def f(s, n=1):
            return Counter(s), deque([n, 2]), {1}, (b'x', 1.5, 2j)
        """
    )
    res = sb.run(Job(src, args=("aab",), kwargs={"n": 7}))
    assert res.status == "ok", res
    assert res.value == ({"a": 2, "b": 1}, [7, 2], {1}, (b"x", 1.5, 2j))
    assert type(res.value[0]) is dict and type(res.value[1]) is list
    assert res.error_type is None and res.duration_s > 0


def test_stdout_and_stderr_are_captured_and_capped():
    with Sandbox(SandboxConfig(output_limit=100, workers=1)) as box:
        res = box.run(
            Job("import sys\ndef f():\n    print('x' * 1000)\n    print('err', file=sys.stderr)\n    return 1")
        )
    assert res.ok, res
    assert res.stdout.startswith("x" * 100) and "dropped" in res.stdout and len(res.stdout) < 200
    assert res.stderr == "err\n"


@pytest.mark.parametrize(
    ("src", "etype"),
    [
        ("def f():\n    raise ValueError('bad ' * 5000)", "ValueError"),
        ("def f(:\n    pass", "SyntaxError"),
        ("def g():\n    return 1", "EntryNotFound"),
        ("def f():\n    return lambda: 1", "NoLiteral"),
        ("def f():\n    return float('nan')", "NoLiteral"),
        ("import sys\ndef f():\n    sys.exit(2)", "SystemExit"),
        ("def f():\n    raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("def f():\n    return f()", "RecursionError"),
        ("def f():\n    return input()", "EOFError"),
        ("def f(x):\n    return x", "TypeError"),
    ],
)
def test_errors(sb, src, etype):
    res = sb.run(Job(src))
    assert res.status == "error" and res.error_type == etype, res
    assert res.value is None and len(res.error_message or "") <= 2000


def test_timeout_in_worker_and_hard_kill(sb):
    loop = Job("def f():\n    while True:\n        pass")
    deaf = Job(
        "import signal\ndef f():\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while True:\n        pass"
    )
    before = sb.stats["hard_kills"]
    a, b, c = sb.map([loop, deaf, Job("def f():\n    return 'after'")])
    assert a.status == "timeout" and b.status == "timeout", (a, b)
    assert sb.stats["hard_kills"] >= before + 1  # the deaf loop needed the parent-side SIGKILL
    assert c.ok and c.value == "after"


def test_memory(sb):
    res = sb.run(Job("def f():\n    return len(bytearray(10**11))"))
    assert res.status == "memory", res


def test_killed_worker_is_replaced_and_batch_continues(sb):
    jobs = [Job("def f(i):\n    return i * i", args=(i,)) for i in range(20)]
    jobs[5] = Job("import os\ndef f(i):\n    os._exit(1)", args=(5,))
    jobs[12] = Job("import os, signal\ndef f(i):\n    os.kill(os.getpid(), signal.SIGKILL)", args=(12,))
    res = sb.map(jobs)
    assert [r.status for r in res].count("killed") == 2
    assert res[5].status == "killed" and res[12].status == "killed"
    assert [r.value for i, r in enumerate(res) if i not in (5, 12)] == [i * i for i in range(20) if i not in (5, 12)]


def test_map_keeps_order_and_shows_progress(sb, capsys):
    jobs = [Job(f"def f():\n    return {i}") for i in range(200)]
    res = sb.map(jobs, progress="testing")
    assert [r.value for r in res] == list(range(200))
    assert "testing" in capsys.readouterr().err
    assert sb.map([]) == []


def test_refused_jobs(sb):
    assert sb.run(Job("def f(): pass", runner="nope")).error_type == "UnknownRunner"
    assert sb.run(Job("def f(x): pass", args=(lambda: 1,))).error_type == "BadJob"


def test_trace_runner_is_tolerant(sb):
    res = sb.run(Job("def f(x):\n    y = x + 1\n    return y", args=(1,), runner="trace", options={"starts": [0, 1]}))
    assert res.status in ("ok", "error"), res
    if res.status == "error":
        assert res.error_type in ("RunnerUnavailable", "KeyError", "TypeError"), res
    else:
        assert res.value["value"] == 2


# --------------------------------------------------------------------------- isolation
def test_worker_is_unprivileged_with_scrubbed_env(sb, monkeypatch):
    res = sb.run(Job("import os\ndef f():\n    return os.getuid(), os.geteuid(), sorted(os.environ), os.getcwd()"))
    assert res.ok, res
    uid, euid, env, cwd = res.value
    if os.geteuid() == 0:
        assert uid != 0 and euid != 0
    assert env == ["HOME", "LANG", "PATH", "TMPDIR"]
    assert cwd.endswith("work")


def test_no_new_processes_bounded(sb):
    src = (
        "import os\ndef f():\n    n = 0\n    for _ in range(50):\n        try:\n            pid = os.fork()\n"
        "        except OSError:\n            continue\n        if pid == 0:\n            os._exit(0)\n"
        "        n += 1\n        os.waitpid(pid, 0)\n    return n"
    )
    res = sb.run(Job(src))
    assert res.ok and res.value == 0, res


def test_pure_samples_share_a_worker_impure_ones_retire_it():
    with Sandbox(SandboxConfig(workers=1)) as box:
        box.run(Job("def f():\n    return 0"))
        forks = box.stats["forks"]
        res = box.map([Job(f"import math\ndef f():\n    return math.isqrt({i})") for i in range(30)])
        assert all(r.ok for r in res)
        assert box.stats["forks"] == forks  # no recycling for pure samples
        box.map([Job("import os\ndef f():\n    return 1")] * 3)
        assert box.stats["forks"] == forks + 3


def test_max_tasks_per_worker():
    with Sandbox(SandboxConfig(workers=1, max_tasks_per_worker=2)) as box:
        box.run(Job("def f():\n    return 0"))
        forks = box.stats["forks"]
        box.map([Job("def f():\n    return 0")] * 6)
        assert box.stats["forks"] - forks >= 3


def test_state_does_not_leak_between_samples(sb):
    """Impure samples that patch builtins, modules and the random seed; then clean probes."""
    attacks = [
        Job("import builtins\ndef f():\n    builtins.len = lambda x: -1\n    return 0"),
        Job("import math\ndef f():\n    math.pi = 3\n    return 0"),
        Job("import random\ndef f():\n    random.seed(0)\n    return 0"),
    ]
    probe = Job(
        "import math, random\ndef f():\n    return len([1, 2]), math.pi, random.random() == random.Random(0).random()"
    )
    res = sb.map([x for a in attacks for x in (a, probe)])
    for r in res[1::2]:
        assert r.ok and r.value == (2, 3.141592653589793, False), r


FORK_ONCE = _src(
    """
    import os
    def f():
        try:
            os.fork()
            return 'forked'
        except OSError:
            return 'refused'
    """
)

NET_AND_WRITE = _src(
    """
    import socket
    def f(p):
        out = []
        try:
            socket.create_connection(('127.0.0.1', 22), 0.5)
            out.append('net')
        except OSError:
            pass
        try:
            open(p, 'w').write('x')
            out.append('write')
        except OSError:
            pass
        return out
    """
)


def test_isolation_none_warns_and_works(caplog):
    with caplog.at_level(logging.WARNING, logger="codethinker.sandbox"):
        box = Sandbox(SandboxConfig(isolation="none", workers=1, timeout_s=1.0, grace_s=1.0))
    assert any("NOT isolated" in r.message for r in caplog.records)
    with box:
        secret = "none-mode-" + os.urandom(4).hex()
        os.environ["CODETHINKER_NONE_SECRET"] = secret
        try:
            a, b, c = box.map(
                [
                    Job("def f(x):\n    return x + 1", args=(1,)),
                    Job("import os\ndef f():\n    return dict(os.environ), os.getuid()"),
                    Job(FORK_ONCE),
                ]
            )
        finally:
            os.environ.pop("CODETHINKER_NONE_SECRET")
    assert a.value == 2
    assert secret not in repr(b) and (os.geteuid() != 0 or b.value[1] != 0)
    assert c.value == "refused"


@needs_bwrap
def test_bwrap_blocks_network_and_writes(tmp_path):
    with Sandbox(SandboxConfig(isolation="bwrap", workers=1)) as box:
        res = box.run(Job(NET_AND_WRITE, args=("/var/tmp/codethinker-should-not-exist",)))
    assert res.ok and res.value == [], res
    assert not os.path.exists("/var/tmp/codethinker-should-not-exist")


def test_closed_sandbox_refuses_work():
    box = Sandbox(SandboxConfig(workers=1))
    box.close()
    box.close()
    with pytest.raises(RuntimeError):
        box.run(Job("def f(): pass"))


# --------------------------------------------------------------------------- parent-side safety
def test_restricted_unpickler_refuses_globals():
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    with pytest.raises(pickle.UnpicklingError):
        _loads_plain(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError):
        _loads_plain(pickle.dumps(dataclasses.field))
    data = {"a": [1, 2.5, (3j, b"x", None, True)], "s": {1, 2}, "fs": frozenset({3})}
    assert _loads_plain(pickle.dumps(data, protocol=5)) == data


# --------------------------------------------------------------------------- the purity check
@pytest.fixture(scope="module")
def scanned():
    worker._scan_modules()


PURE = [
    "def f(x):\n    return sorted(x)[::-1]",
    "import math\nfrom collections import Counter\ndef f(x):\n    return math.gcd(*x), Counter(x)",
    "def f(s):\n    for _ in range(2):\n        s = s.replace('a', 'b')\n    return s",
    "class P:\n    def __init__(self, x):\n        self.x = x\ndef f():\n    return P(1).x",
    "def f():\n    return type(1) == int",
    "def f():\n    def g():\n        yield 1\n    return list(g())",
    "def f(:",
]
IMPURE = [
    "import os\ndef f(): pass",
    "import math as m\ndef f():\n    m.pi = 3",
    "def f():\n    return ().__class__",
    "def f():\n    return eval('1')",
    "def f():\n    return getattr(1, 'real')",
    "def f():\n    return __builtins__",
    "import operator\ndef f():\n    return operator.attrgetter('x')",
    "import typing\ndef f():\n    return typing.sys",
    "import copy\ndef f():\n    return copy.dispatch_table",
    "class A:\n    def __del__(self):\n        pass\ndef f(): pass",
    "def f():\n    def g():\n        try:\n            yield 1\n        finally:\n            pass\n    return 1",
    "def f():\n    return type('X', (), {})",
    "def f():\n    t = type\n    return t",
    "def f():\n    return '__del__'",
    "async def f():\n    pass",
    "def f(g):\n    return g.gi_frame",
    "from functools import wraps\ndef f(): pass",
    "def f():\n    return locals()",
    "class A(metaclass=type):\n    pass\ndef f(): pass",
]


@pytest.mark.parametrize("src", PURE)
def test_analyze_pure(scanned, src):
    pure, reason, _mods, _code = worker.analyze(src)
    assert pure, reason


@pytest.mark.parametrize("src", IMPURE)
def test_analyze_impure(scanned, src):
    pure, reason, _mods, _code = worker.analyze(src)
    assert not pure and reason


def test_set_order_is_reproducible_across_sandboxes(sb):
    job = Job("def f():\n    return list({'alpha', 'beta', 'gamma', 'delta', 'eps'})")
    first = sb.run(job).value
    with Sandbox(SandboxConfig(workers=1)) as other:
        assert other.run(job).value == first


def test_dead_worker_sandbox_is_restarted():
    with Sandbox(SandboxConfig(workers=1)) as box:
        assert box.run(Job("def f():\n    return 1")).value == 1
        proc = box._slots[0].proc
        proc.kill()  # the whole worker sandbox (zygote and child) dies
        proc.wait(timeout=30)
        time.sleep(0.5)  # --die-with-parent takes the sandbox's pid namespace down
        res = box.map([Job("def f(i):\n    return i", args=(i,)) for i in range(5)])
        # jobs that reached the dying sandbox are "killed"; the rest run in the new one
        assert all(r.status in ("ok", "killed") for r in res) and sum(r.ok for r in res) >= 3
        assert all(r.value == i for i, r in enumerate(res) if r.ok)
        assert box.stats["zygote_restarts"] == 1
        assert [r.value for r in box.map([Job("def f(i):\n    return i", args=(i,)) for i in range(3)])] == [0, 1, 2]
