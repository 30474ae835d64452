"""codethinker.sandbox: API, statuses, limits, isolation between samples (a fresh process per sample),
clean-up, the process model's hooks (seccomp, cmdlines), a checkout under /tmp."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import codethinker.contra.tracer  # noqa: F401 (registers the "trace" runner, and with contra.values "call")
from codethinker.sandbox import (
    RUNNERS,
    Job,
    Sandbox,
    SandboxConfig,
    SandboxResult,
    bwrap_available,
)
from codethinker.sandbox import bwrap as bwrap_plan
from codethinker.sandbox.fs import remove_tree, reset_private_dir
from codethinker.sandbox.jobs import loads_plain as _loads_plain
from codethinker.sandbox.protocol import WireError
from codethinker.sandbox.protocol import encode as wire_encode


def _src(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


PROJECT = Path(__file__).resolve().parents[1]
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


def test_a_generator_of_jobs_shows_its_count_when_given_one(sb, capsys):
    """A stream of jobs has no length: ``total`` gives the bar its count (and so an ETA)."""
    res = sb.map((Job(f"def f():\n    return {i}") for i in range(30)), progress="stream", total=30)
    assert [r.value for r in res] == list(range(30))
    assert "30/30" in capsys.readouterr().err


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


def test_max_tasks_per_worker_restarts_the_sandbox():
    with Sandbox(SandboxConfig(workers=1, max_tasks_per_worker=2)) as box:
        res = box.map([Job("def f(i):\n    return i", args=(i,)) for i in range(6)])
        assert [r.value for r in res] == list(range(6))
        assert box.stats["retired"] >= 2 and box.stats["zygote_restarts"] == 0


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
def test_result_frames_are_never_unpickled():
    """The parent decodes result frames with the bounded wire format only: a pickle (even one
    whose ``__reduce__`` names ``os.system``) is refused as a malformed frame, plain data round-trips."""

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    for forged in (pickle.dumps(Evil()), pickle.dumps(dataclasses.field), pickle.dumps({"status": "ok"})):
        with pytest.raises(WireError):
            _loads_plain(forged)
    data = {"a": [1, 2.5, (3j, b"x", None, True)], "s": {1, 2}, "fs": frozenset({3})}
    assert _loads_plain(wire_encode(data)) == data


def test_a_value_repeating_one_big_string_is_refused_in_the_sample(sb):
    """Shared references cannot expand in the parent: the encoder stops at the frame cap, so the
    sample gets ResultNotSerializable instead of a 600 MB truth."""
    res = sb.run(Job("def f():\n    s = 'x' * 100_000\n    return [s] * 100_000"))
    assert (res.status, res.error_type) == ("error", "ResultNotSerializable")


# --------------------------------------------------------------------------- a fresh process per sample
METACLASS_FINALIZER = _src(
    """
    def f():
        T = type(int)  # the metaclass, called: no class statement, no dunder in the source
        X = T('X', (), {'_' * 2 + 'del' + '_' * 2: lambda self: print('LEAK from an earlier sample')})
        a = X()
        a.me = a  # a reference cycle: only the garbage collector frees it, later
        return 1
    """
)
ALLOCATE = "def f():\n    return len([[i] for i in range(200_000)])"


def test_a_finalizer_never_runs_in_a_later_sample():
    """A class made by calling the metaclass, holding a finalizer in a cycle (a bypass of the old
    purity check): with a fresh process per sample it can never print into a later sample."""
    with Sandbox(SandboxConfig(workers=1)) as box:
        res = box.map([Job(METACLASS_FINALIZER), *[Job(ALLOCATE)] * 4])
    assert [r.status for r in res] == ["ok"] * 5, res
    assert all("LEAK" not in r.stdout + r.stderr for r in res), [r.stdout for r in res]


def test_a_secret_in_one_sample_is_not_in_the_next_ones_memory():
    secret = "SECRET-" + os.urandom(6).hex()
    holder = Job(f"def f():\n    return len({secret!r})")
    scan = Job(
        _src(
            """
            import gc
            def f(prefix):
                found = set()
                for o in gc.get_objects():
                    for v in (o.values() if type(o) is dict else o if type(o) in (list, tuple) else ()):
                        if type(v) is str and v.startswith(prefix):
                            found.add(v)
                    if type(o).__name__ == 'code':
                        found.update(c for c in o.co_consts if type(c) is str and c.startswith(prefix))
                return sorted(v for v in found if v != prefix)
            """
        ),
        args=("SECRET-",),
    )
    with Sandbox(SandboxConfig(workers=1)) as box:
        res = box.map([holder, holder, scan, scan])
    assert [r.status for r in res] == ["ok"] * 4, res
    assert res[2].value == [] and res[3].value == [], res


def test_every_sample_gets_a_new_process_and_an_empty_dir():
    writer = Job(
        "import os\ndef f():\n    open('left', 'w').write('x')\n    os.chmod('.', 0o777)\n    return os.getpid()"
    )
    probe = Job(
        _src(
            """
            import glob, os
            def f():
                seen = [p for p in glob.glob('/tmp/*/*/*') + glob.glob('/tmp/*/*') if os.access(p, os.R_OK)]
                return os.getpid(), os.listdir('.'), sorted(p for p in seen if not p.endswith('/work'))
            """
        )
    )
    with Sandbox(SandboxConfig(workers=1)) as box:  # one pid namespace
        res = box.map([writer, probe, writer, probe, probe])
    assert all(r.ok for r in res), res
    pids = [r.value if isinstance(r.value, int) else r.value[0] for r in res]
    assert len(set(pids)) == 5
    bound = bwrap_plan.interpreter_paths()  # bound back read-only when the checkout or venv lives under /tmp

    def ours(path: str) -> bool:
        return any(path == b or b.startswith(path + "/") or path.startswith(b + "/") for b in bound)

    for r in res[1::2] + res[4:]:
        assert r.value[1] == [] and [p for p in r.value[2] if not ours(p)] == [], r.value


def test_sigalrm_reset_to_default_then_a_loop_is_a_timeout(sb):
    src = "import signal\ndef f():\n    signal.signal(signal.SIGALRM, signal.SIG_DFL)\n    while True:\n        pass"
    res = sb.run(Job(src))
    assert res.status == "timeout" and res.error_type == "Timeout", res


def test_a_forged_early_result_ends_the_sample(sb):
    src = _src(
        """
        import os, pickle, struct
        def f():
            data = pickle.dumps({'status': 'ok', 'value': 'forged'})
            for fd in range(3, 64):
                try:
                    os.write(fd, struct.pack('<Q', len(data)) + data)
                except OSError:
                    pass
            while True:
                pass
        """
    )
    t0 = time.monotonic()
    res = sb.run(Job(src))
    assert res.status in ("ok", "killed") and time.monotonic() - t0 < 0.9, res  # not left running to the limit
    assert sb.run(Job("def f():\n    return 'next'")).value == "next"


# --------------------------------------------------------------------------- kernel surface
def test_samples_cannot_share_sysv_memory():
    writer = Job(
        _src(
            """
            import ctypes
            def f(key):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.shmat.restype = ctypes.c_void_p
                shmid = libc.shmget(key, 4096, 0o1000 | 0o666)
                if shmid < 0:
                    return 'refused'
                addr = libc.shmat(shmid, None, 0)
                ctypes.memmove(addr, b'SHM-SECRET', 10)
                return 'written'
            """
        ),
        args=(0x5EC0DE,),
    )
    reader = Job(
        _src(
            """
            import ctypes
            def f(key):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.shmat.restype = ctypes.c_void_p
                shmid = libc.shmget(key, 0, 0)
                if shmid < 0:
                    return None
                return ctypes.string_at(libc.shmat(shmid, None, 0), 10)
            """
        ),
        args=(0x5EC0DE,),
    )
    with Sandbox(SandboxConfig(workers=1)) as box:
        res = box.map([writer, reader, reader])
    assert res[0].status == "ok", res
    assert res[1].value is None and res[2].value is None, res


def test_seccomp_filter_is_installed_when_available(sb):
    seccomp = pytest.importorskip("codethinker.sandbox.seccomp")
    if not seccomp.supported():
        pytest.skip("seccomp is not supported here")
    src = _src(
        """
        import socket
        def f():
            status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
            try:
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
                made = True
            except PermissionError:
                made = False
            return status['Seccomp'].strip(), made
        """
    )
    res = sb.run(Job(src))
    assert res.ok and res.value == ("2", False), res


@needs_bwrap
def test_proc_cmdlines_show_no_configuration(sb):
    src = _src(
        """
        def f():
            out = []
            for pid in (1, 2):
                with open(f'/proc/{pid}/cmdline', 'rb') as fh:
                    out.append(fh.read().decode())
            return out
        """
    )
    res = sb.run(Job(src))
    assert res.ok, res
    text = "\n".join(res.value)
    for marker in ("--ro-bind", "--tmpfs", "--setenv", "workdirs", "memory_mb", "uids", "extra_path", "/tmp/lane"):
        assert marker not in text, (marker, text)


# --------------------------------------------------------------------------- clean-up
DEEP_CHAIN = _src(
    """
    import os
    def f(depth):
        for _ in range(depth):
            os.mkdir('d')
            os.chdir('d')
        open('bottom', 'w').write('x')
        os.chmod('.', 0)
        return depth
    """
)


@pytest.mark.parametrize("isolation", [pytest.param("bwrap", marks=needs_bwrap), "none"])
def test_a_deep_folder_chain_is_cleaned_up(isolation, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where isolation "none" puts its dirs
    probe = Job("import os\ndef f():\n    return os.listdir('.')")
    cfg = SandboxConfig(isolation=isolation, workers=1, timeout_s=5.0)
    with Sandbox(cfg) as box:
        res = box.map([Job(DEEP_CHAIN, args=(3000,)), probe, Job(DEEP_CHAIN, args=(3000,)), probe, probe])
        assert [r.status for r in res] == ["ok"] * 5, res
        assert [r.value for r in res[1::2]] + [res[4].value] == [[], [], []]
        assert box.stats["zygote_restarts"] == 0
    assert os.listdir(tmp_path) == []


def _tree(spec: list, root: str, target: str) -> None:
    """Build ``spec`` under ``root``: None is a file, "link" a symlink to ``target``, a list a dir."""
    for i, node in enumerate(spec):
        path = os.path.join(root, f"n{i}")
        if node is None:
            with open(path, "w") as fh:
                fh.write("x")
        elif node == "link":
            os.symlink(target, path)
        else:
            os.mkdir(path)
            _tree(node, path, target)


TREES = st.recursive(st.sampled_from([None, "link"]), lambda kids: st.lists(kids, max_size=4), max_leaves=12)


@settings(max_examples=40, deadline=None)
@given(spec=st.lists(TREES, max_size=4))
def test_remove_tree_removes_any_tree_and_follows_no_link(spec):
    root = tempfile.mkdtemp()
    try:
        target = os.path.join(root, "target")
        os.mkdir(target)
        with open(os.path.join(target, "keep"), "w") as fh:
            fh.write("x")
        top = os.path.join(root, "top")
        os.mkdir(top)
        _tree(spec, top, target)
        remove_tree(top)
        assert os.listdir(root) == ["target"] and os.listdir(target) == ["keep"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_remove_tree_handles_depth_beyond_recursion_and_path_max(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(3000):  # 6000+ characters of path, deeper than the recursion limit
            os.mkdir("dd", dir_fd=fd)
            new = os.open("dd", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
        os.symlink(str(outside), "link", dir_fd=fd)
        os.chmod("..", 0, dir_fd=fd)
    finally:
        os.close(fd)
    remove_tree(str(top))
    assert not top.exists() and (outside / "keep").read_text() == "x"


def test_reset_private_dir(tmp_path):
    d = str(tmp_path / "w")
    reset_private_dir(d, None)
    assert os.listdir(d) == [] and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o777)
    os.makedirs(os.path.join(d, "a", "b"))
    reset_private_dir(d, None)
    assert os.listdir(d) == [] and stat.S_IMODE(os.stat(d).st_mode) == 0o700


# --------------------------------------------------------------------------- where the checkout lives
PATHS = st.lists(
    st.lists(st.sampled_from(["a", "b", "lane0", "work", "sbx1-lane0", "lane1"]), min_size=1, max_size=4).map(
        lambda parts: "/tmp/" + "/".join(parts)
    ),
    max_size=6,
)


@given(paths=PATHS)
def test_private_dirs_never_touch_a_bound_path(paths):
    plan = bwrap_plan.mask_plan(paths)
    bound = [p for _root, keep in plan for p in keep]
    assert all(root == "/tmp" for root, _keep in plan)
    assert all(any(p == b or p.startswith(b + "/") for b in bound) for p in paths)  # everything stays readable
    for d in bwrap_plan.private_dirs(plan):
        lane = os.path.dirname(d)
        assert not any(b == lane or b.startswith(lane + "/") or lane.startswith(b + "/") for b in bound)


@needs_bwrap
@pytest.mark.slow
def test_checkout_and_venv_under_tmp():
    """The sandbox works when the interpreter (a venv) and the project live under /tmp, which the
    sandbox mounts a fresh tmpfs over: they are bound back read-only."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="codethinker-tmp-checkout-"))
    base.chmod(0o755)  # a plain clone under /tmp (a 0700 parent would be bound back as a hidden root anyway)
    try:
        proj = base / "checkout"
        shutil.copytree(PROJECT / "codethinker", proj / "codethinker", ignore=shutil.ignore_patterns("__pycache__"))
        venv = base / "checkout" / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        script = (
            "import json, sys\n"
            "import codethinker.contra.values\n"
            "from codethinker.sandbox import Job, Sandbox, SandboxConfig, PROJECT_ROOT\n"
            "with Sandbox(SandboxConfig(isolation='bwrap', workers=1)) as sb:\n"
            "    r = sb.run(Job('import os\\ndef f(x):\\n    return x + 1, os.getcwd()', args=(41,)))\n"
            "print(json.dumps([r.status, r.value, r.error_message, sys.executable, str(PROJECT_ROOT)]))\n"
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(proj), "HOME": str(base)}
        out = subprocess.run(
            [str(venv / "bin" / "python"), "-c", script], cwd=base, env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-3000:]
        status, value, message, exe, root = json.loads(out.stdout.splitlines()[-1])
        assert exe.startswith(str(base)) and root == str(proj)
        assert status == "ok" and value[0] == 42 and value[1].endswith("/work"), message
    finally:
        shutil.rmtree(base, ignore_errors=True)


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


def test_a_map_ended_by_ctrl_c_leaves_no_stale_job_for_the_next():
    """Ctrl-C in the middle of a map: the processes still running its jobs are ended, so their
    results cannot land in the next map's list at the same index."""
    import signal as _signal
    import threading as _threading

    slow = "import time\ndef f(i):\n    time.sleep(0.5)\n    return ('old', i)"
    # a background job of a non-interactive shell starts with SIGINT ignored: Python then never raises
    previous = _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    with Sandbox(SandboxConfig(timeout_s=5.0, workers=2)) as box:
        box.run(Job("def f():\n    return 0"))  # the pool is up
        timer = _threading.Timer(0.25, os.kill, (os.getpid(), _signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                box.map([Job(slow, args=(i,)) for i in range(4)])
        finally:
            timer.cancel()
            _signal.signal(_signal.SIGINT, previous)
        fresh = box.map([Job("def f(i):\n    return ('new', i)", args=(i,)) for i in range(4)])
        assert [r.value for r in fresh] == [("new", i) for i in range(4)]
