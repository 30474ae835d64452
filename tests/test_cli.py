"""The ``codethinker`` command line: ``trace`` and ``score``, in process and once as a real process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codethinker.cli import main
from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.contra.validate import validate

PROGRAM = """# two-sum, a LeetCode-style function
def f(nums, target):
    seen = {}

    for i, n in enumerate(nums):
        if target - n in seen:
            return [seen[target - n], i]
        seen[n] = i
    return []
"""
SCORE_KEYS = {"fmt", "deltas", "r_proc", "r_res", "reward", "rcs", "reason"}


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM, encoding="utf-8")
    return p


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(err: str) -> None:
    assert err.startswith("codethinker: error: "), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``trace --json`` of PROGRAM, run once for the module."""
    d = tmp_path_factory.mktemp("cli")
    code = d / "prog.py"
    code.write_text(PROGRAM, encoding="utf-8")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["trace", "--code", str(code), "--input", "nums = [2,7], target = 9", "--json"])
    assert rc == 0
    p = d / "truth.json"
    p.write_text(buf.getvalue(), encoding="utf-8")
    return p


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


# --------------------------------------------------------------------------- trace
def test_trace_prints_a_valid_trace(capsys, prog, truth):
    rc, out, err = run(capsys, "trace", "--code", prog, "--input", "nums = [2,7], target = 9")
    assert rc == 0 and err == ""
    text = out.rstrip("\n")
    assert text.startswith("[TRACE]\n[CODE]\n[LINENO 0]    def f(nums, target):\n") and text.endswith("[/TRACE]")
    assert "assert f(nums = [2,7], target = 9) == [0, 1]" in text
    assert "#" not in text  # comments and blank lines are gone
    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    assert validate(out, flow).ok
    assert text == render_trace(flow)


def test_trace_json(capsys, truth):
    d = json.loads(truth.read_text(encoding="utf-8"))
    assert d["entry"] == "f" and d["input"] == "nums = [2,7], target = 9" and d["output"] == "[0, 1]"
    assert [(b["start"], b["end"], b["weight"]) for b in d["blocks"]] == [(0, 1, 1), (2, 5, 3)]
    assert d["blocks"][-1]["locals"] == "{'nums': [2, 7], 'target': 9, 'seen': {2: 0}, 'i': 1, 'n': 7}"


def test_trace_positional_input_and_entry(capsys, tmp_path):
    code = write(tmp_path, "g.py", "def g(a, b):\n    '''doc'''\n    return a * b\n")
    rc, out, _ = run(capsys, "trace", "--code", code, "--input", "[1, 2], 3", "--entry", "g")
    assert rc == 0
    assert "assert g([1, 2], 3) == [1, 2, 1, 2, 1, 2]" in out


def test_trace_expression_input(capsys, tmp_path):
    code = write(tmp_path, "p.py", "def f(s):\n    return s.lower()\n")
    rc, out, _ = run(capsys, "trace", "--code", code, "--input", "''.join(['A'] * 3)")
    assert rc == 0 and "assert f(''.join(['A'] * 3)) == 'aaa'" in out


# --------------------------------------------------------------------------- score
def score(capsys, tmp_path, truth, rollout: str, *extra: str) -> dict:
    r = write(tmp_path, "rollout.txt", rollout)
    rc, out, err = run(capsys, "score", "--rollout", r, "--truth", truth, *extra)
    assert rc == 0, err
    assert out.count("\n") == 1  # one JSON object on one line
    return json.loads(out)


def test_score_accepts_the_trace_json(capsys, tmp_path, truth):
    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    out = score(capsys, tmp_path, truth, render_trace(flow))
    assert set(out) >= SCORE_KEYS
    assert (out["fmt"], out["deltas"], out["r_proc"], out["r_res"], out["reward"], out["rcs"], out["reason"]) == (
        1,
        [1, 1],
        2.0,
        2.0,
        4.0,
        1.0,
        None,
    )


def test_score_invalid_rollout(capsys, tmp_path, truth):
    out = score(capsys, tmp_path, truth, "no trace here")
    assert set(out) >= SCORE_KEYS
    assert (out["fmt"], out["reward"], out["reason"]) == (0, 0.0, "wrapper")


def wrong_first_block(truth: Path) -> str:
    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    return render_trace(flow).replace("{'nums': [2, 7], 'target': 9, 'seen': {}}", "{'nums': [2, 7]}", 1)


@pytest.mark.parametrize(
    ("switches", "expected"),
    [
        ((), 0.5),  # weights 1, 3; block 1 wrong: R_proc = 2 * 1 / 4, gate closed
        (("--no-prefix",), 0.5),
        (("--no-gate",), 0.5 + 2.0),
        (("--no-prm",), 2.0),
        (("--no-orm",), 0.5),
        (("--no-ccw", "--no-gate"), 2 * 1 / 2 + 2.0),
        (("--alpha", "0.5"), 0.25),
    ],
)
def test_score_switches(capsys, tmp_path, truth, switches, expected):
    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    text = render_trace(flow).replace("'seen': {2: 0}, 'i': 1", "'seen': {2: 0}, 'i': 0", 1)
    base = score(capsys, tmp_path, truth, text)
    assert base["deltas"] == [1, 0] and base["r_proc"] == pytest.approx(0.5) and base["r_res"] == 2.0
    assert score(capsys, tmp_path, truth, text, *switches)["reward"] == pytest.approx(expected)


def test_score_prefix_switch(capsys, tmp_path, truth):
    # the prefix switch matters once a wrong block is followed by a right one
    first = wrong_first_block(truth)
    assert score(capsys, tmp_path, truth, first)["reward"] == 0.0
    assert score(capsys, tmp_path, truth, first, "--no-prefix")["reward"] == pytest.approx(2 * 3 / 4)
    assert score(capsys, tmp_path, truth, first, "--no-prefix", "--no-ccw")["reward"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("reward", "rollout", "expected"),
    [
        ("orm", "[THOUGHT]\nx\n[/THOUGHT]\n[ANSWER]\nassert f(nums = [2,7], target = 9) == [0, 1]\n[/ANSWER]", 2.0),
        ("orm", "[THOUGHT]\nx\n[/THOUGHT]\n[ANSWER]\nassert f(nums = [2,7], target = 9) == [1, 0]\n[/ANSWER]", 0.0),
        (
            "whitebox",
            "[THOUGHT]\nx\n[/THOUGHT]\n[WHITEBOX]\nQ1: [2, 7]\nQ2: list\n[/WHITEBOX]\n"
            "[ANSWER]\nassert f(nums = [2,7], target = 9) == [0, 1]\n[/ANSWER]",
            None,
        ),
    ],
)
def test_score_other_rewards(capsys, tmp_path, truth, reward, rollout, expected):
    out = score(capsys, tmp_path, truth, rollout, "--reward", reward)
    assert set(out) >= SCORE_KEYS
    assert out["fmt"] == 1 and out["rcs"] == 0.0  # not a ConTra trace: no consistent block
    if expected is None:  # 2 of 6 questions right: 2 * (0.5 + 0.5 * 2/6)
        assert out["wb_acc"] == pytest.approx(2 / 6)
        expected = 2 * (0.5 + 0.5 * 2 / 6)
    assert out["reward"] == pytest.approx(expected)


def test_score_orm_on_a_contra_trace_reports_rcs(capsys, tmp_path, truth):
    out = score(capsys, tmp_path, truth, wrong_first_block(truth), "--reward", "orm")
    assert out["reward"] == 2.0 and out["rcs"] == 0.0
    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    assert score(capsys, tmp_path, truth, render_trace(flow), "--reward", "orm")["rcs"] == 1.0


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
@pytest.mark.parametrize("reward", ["crm", "orm"])
def test_score_scores_the_rollouts_bytes_as_the_library_does(capsys, tmp_path, truth, newline, reward):
    """A CRLF (or CR) rollout is scored as the string its bytes decode to, the string a policy's response is:
    the CLI's JSON equals the library's score of that string, not of a newline-translated copy."""
    from codethinker.rewards.crm import crm_score
    from codethinker.rewards.switch import reward_spec

    flow = Flow.from_json(truth.read_text(encoding="utf-8"))
    text = render_trace(flow).replace("\n", newline)
    out = score(capsys, tmp_path, truth, text.encode("utf-8"), "--reward", reward)
    library = reward_spec(reward).score(text, flow)  # the reward and its parts, rcs the ConTra consistency
    assert {k: out[k] for k in library} == json.loads(json.dumps(dict(library)))
    assert out["rcs"] == crm_score(text, flow)["rcs"]
    if reward == "crm":
        assert out["fmt"] == crm_score(text, flow).fmt == 0 and out["reward"] == 0.0


# --------------------------------------------------------------------------- bad input: exit 2, one line
def test_missing_code_file(capsys, tmp_path):
    rc, out, err = run(capsys, "trace", "--code", tmp_path / "nope.py", "--input", "1")
    assert rc == 2 and out == ""
    one_line_error(err)
    assert "not found" in err


@pytest.mark.parametrize(
    ("code", "inp", "needle"),
    [
        ("def g(x):\n    return x\n", "1", "does not define a function 'f'"),
        ("def f(x:\n", "1", "syntax error"),
        ("def f(x):\n    return x\n", "[1, 2", "cannot trace"),
        ("def f(x):\n    return x\n", "1)", "cannot trace"),
        ("def f(x):\n    return 1 / x\n", "0", "ZeroDivisionError"),
        ("def f(x):\n    return iter([x])\n", "1", "no literal form"),
        ("def f(x):\n    return x\n", "1, 2", "TypeError"),
    ],
)
def test_bad_program_or_input(capsys, tmp_path, code, inp, needle):
    p = write(tmp_path, "p.py", code)
    rc, out, err = run(capsys, "trace", "--code", p, "--input", inp)
    assert rc == 2 and out == ""
    one_line_error(err)
    assert needle in err


def test_trace_timeout(capsys, tmp_path):
    p = write(tmp_path, "p.py", "def f(x):\n    while True:\n        pass\n")
    rc, _, err = run(capsys, "trace", "--code", p, "--input", "1", "--timeout", "0.5")
    assert rc == 2
    one_line_error(err)
    assert "timeout" in err


def test_trace_bad_timeout(capsys, prog):
    rc, _, err = run(capsys, "trace", "--code", prog, "--input", "[1], 1", "--timeout", "0")
    assert rc == 2
    one_line_error(err)


def test_code_file_not_utf8(capsys, tmp_path):
    p = write(tmp_path, "p.py", b"\xff\xfe\x00def f")
    rc, _, err = run(capsys, "trace", "--code", p, "--input", "1")
    assert rc == 2
    one_line_error(err)


@pytest.mark.parametrize(
    "truth_text",
    [
        "not json",
        "",
        "[1, 2]",
        "null",
        '{"entry": "f"}',
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "output": "f(1)",'
        ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{}"}]}',
    ],
)
def test_truth_that_is_not_a_truth_json(capsys, tmp_path, truth_text):
    t = write(tmp_path, "t.json", truth_text)
    r = write(tmp_path, "r.txt", "[TRACE]\n[/TRACE]")
    rc, out, err = run(capsys, "score", "--rollout", r, "--truth", t)
    assert rc == 2 and out == ""
    one_line_error(err)


def test_truth_json_with_wrong_field_type(capsys, tmp_path):
    t = write(tmp_path, "t.json", '{"entry": "f", "input": "1", "code": 1, "output": "1", "blocks": []}')
    r = write(tmp_path, "r.txt", "[TRACE]\n[/TRACE]")
    rc, _, err = run(capsys, "score", "--rollout", r, "--truth", t)
    assert rc == 2
    one_line_error(err)


def test_missing_rollout_and_truth_files(capsys, tmp_path, truth):
    rc, _, err = run(capsys, "score", "--rollout", tmp_path / "nope.txt", "--truth", truth)
    assert rc == 2
    one_line_error(err)
    r = write(tmp_path, "r.txt", "x")
    rc, _, err = run(capsys, "score", "--rollout", r, "--truth", tmp_path / "nope.json")
    assert rc == 2
    one_line_error(err)
    rc, _, err = run(capsys, "score", "--rollout", tmp_path, "--truth", truth)  # a directory
    assert rc == 2
    one_line_error(err)


def test_usage_errors_exit_2(capsys):
    for argv in (
        [],
        ["trace"],
        ["score", "--rollout", "x"],
        ["score", "--rollout", "x", "--truth", "y", "--reward", "prm"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("codethinker: error: ")


# --------------------------------------------------------------------------- a real process
def cli_command() -> list[str]:
    exe = Path(sys.executable).parent / "codethinker"
    if exe.is_file() and os.access(exe, os.X_OK):
        return [str(exe)]
    found = shutil.which("codethinker")
    return [found] if found else [sys.executable, "-m", "codethinker.cli"]


def test_subprocess_round_trip(tmp_path, prog):
    cmd = cli_command()
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning"}
    res = subprocess.run(
        [*cmd, "trace", "--code", str(prog), "--input", "[3, 3], 6", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    t = write(tmp_path, "truth.json", res.stdout)
    flow = Flow.from_json(res.stdout)
    assert flow.output == [0, 1]
    r = write(tmp_path, "rollout.txt", render_trace(flow, ["seen starts empty.", "3 pairs with 3."]))
    res = subprocess.run(
        [*cmd, "score", "--rollout", str(r), "--truth", str(t)], capture_output=True, text=True, timeout=120, env=env
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["reward"] == 4.0
    res = subprocess.run(
        [*cmd, "trace", "--code", str(tmp_path / "missing.py"), "--input", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 2 and res.stdout == ""
    one_line_error(res.stderr)


# --------------------------------------------------------------------------- numeric options and truth files ---------
@pytest.fixture
def plain_truth(tmp_path: Path) -> tuple[Path, Path]:
    """A truth JSON and its own trace as the rollout, built without the sandbox."""
    from tests.contra.helpers import example_flow

    flow = example_flow()
    return write(tmp_path, "truth.json", flow.to_json()), write(tmp_path, "good.txt", render_trace(flow))


def strict_json(text: str) -> dict:
    def no_constant(name: str) -> None:
        raise AssertionError(f"not strict JSON: {name}")

    assert text.count("\n") == 1
    return json.loads(text, parse_constant=no_constant)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400", "-5", "-0.001", "100.5", "abc", ""])
def test_score_alpha_must_be_finite_and_in_range(capsys, plain_truth, value):
    truth, good = plain_truth
    rc, out, err = run(capsys, "score", "--rollout", good, "--truth", truth, f"--alpha={value}")
    assert rc == 2 and out == ""
    one_line_error(err)
    assert "--alpha" in err


@pytest.mark.parametrize("value", ["0", "0.5", "100"])
def test_score_alpha_in_range_prints_strict_json(capsys, plain_truth, value):
    truth, good = plain_truth
    rc, out, _ = run(capsys, "score", "--rollout", good, "--truth", truth, "--alpha", value)
    assert rc == 0
    assert strict_json(out)["reward"] == pytest.approx(float(value) * 2 + 2)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e9"])
def test_trace_timeout_must_be_finite_and_in_range(capsys, prog, value):
    rc, out, err = run(capsys, "trace", "--code", prog, "--input", "[1], 1", f"--timeout={value}")
    assert rc == 2 and out == ""
    one_line_error(err)
    assert "--timeout" in err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--temperature", "nan"),
        ("--temperature", "inf"),
        ("--runs", "1" + "0" * 400),
        ("--runs", "-1"),
        ("--seed", "x"),
    ],
)
def test_eval_numeric_options_are_checked(capsys, option, value):
    rc, out, err = run(capsys, "eval", "--model", "m", "--bench", "cruxeval", f"{option}={value}")
    assert rc == 2 and out == ""
    one_line_error(err)
    assert option in err


def test_eval_unknown_bench_lists_both_kinds(capsys):
    rc, out, err = run(capsys, "eval", "--model", "m", "--bench", "humaneval,nope")
    assert rc == 2 and out == ""
    one_line_error(err)
    assert "'nope'" in err and "cruxeval," in err and "humaneval+" in err and "gsm8k" in err


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("version"), "'version'"),
        (lambda d: d.update(version=2), "'version'"),
        (lambda d: d.update(version=0), "'version'"),
        (lambda d: d.update(version="1"), "'version'"),
        (lambda d: d.update(version=1.0), "'version'"),
        (lambda d: d.update(version=True), "'version'"),
        (lambda d: d.update(version=None), "'version'"),
        (lambda d: d["blocks"][0].update(weight="1"), "'weight'"),
        (lambda d: d["blocks"][0].update(weight=1.5), "'weight'"),
        (lambda d: d["blocks"][0].update(weight=0), "weight"),
        (lambda d: d["blocks"][0].update(locals=1), "'locals'"),
        (lambda d: d.update(entry=["f"]), "'entry'"),
        (lambda d: d.update(output="[0, 1,\u00a02]"), "truth"),
    ],
)
def test_truth_file_is_checked(capsys, plain_truth, edit, field):
    truth, good = plain_truth
    d = json.loads(truth.read_text(encoding="utf-8"))
    edit(d)
    truth.write_text(json.dumps(d), encoding="utf-8")
    rc, out, err = run(capsys, "score", "--rollout", good, "--truth", truth)
    assert rc == 2 and out == ""
    one_line_error(err)
    assert str(truth) in err and field in err


@pytest.mark.parametrize("text", ["[" * 100_000, '{"version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_deeply_nested_truth_json_is_an_error_not_a_traceback(capsys, plain_truth, text):
    truth, good = plain_truth
    truth.write_text(text, encoding="utf-8")
    rc, out, err = run(capsys, "score", "--rollout", good, "--truth", truth)
    assert rc == 2 and out == ""
    one_line_error(err)


@pytest.mark.parametrize("reward", ["crm", "orm", "whitebox"])
def test_huge_weights_score_as_strict_json(capsys, plain_truth, reward):
    """A weight of 10**400 is an int like any other: the score is exact, printed as strict JSON."""
    truth, good = plain_truth
    d = json.loads(truth.read_text(encoding="utf-8"))
    for b in d["blocks"]:
        b["weight"] = 10**400
    truth.write_text(json.dumps(d), encoding="utf-8")
    rc, out, err = run(capsys, "score", "--rollout", good, "--truth", truth, "--reward", reward)
    assert rc == 0, err
    s = strict_json(out)
    assert s["rcs"] == 1.0
    if reward == "crm":
        assert (s["r_proc"], s["reward"]) == (2.0, 4.0)


def test_alpha_bound_is_the_reward_s():
    from codethinker.rewards.crm import MAX_ALPHA, CRMConfig

    assert f"0 to {MAX_ALPHA:g}" in CRMConfig.__dataclass_fields__["alpha"].metadata["help"]
    CRMConfig(alpha=MAX_ALPHA)


# --------------------------------------------------------------------------- preflight ----------
@pytest.fixture
def models_server():
    """A real OpenAI-compatible ``GET /v1/models`` on 127.0.0.1 serving ``Qwen/Qwen3-32B``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen3-32B"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()
    thread.join()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def preflight_params(tmp_path: Path, base_url: str, backend: object = "llm") -> Path:
    """A params file whose only need is the LLM endpoint of gen_inputs (``backend`` may differ by profile)."""
    import yaml

    p = tmp_path / "params.yaml"
    data = {
        "base": {"profile": "default"},
        "gen_inputs": {"backend": backend, "llm": {"base_url": base_url, "model": "Qwen/Qwen3-32B"}},
        "sft": {"max_steps": {"default": 1000, "full": -1}},
        "grpo": {"backend": "local"},
    }
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def test_preflight_all_ready_exits_0_with_one_line_per_check(capsys, tmp_path, models_server):
    params = preflight_params(tmp_path, models_server)
    rc, out, err = run(capsys, "preflight", "--params", params)
    assert rc == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0] == f"preflight: profile default ({params})"
    assert f"✓ LLM endpoint {models_server}: serves Qwen/Qwen3-32B (gen_inputs.llm)" in lines
    assert "- GPUs: not needed: grpo.backend is local and the policy (none) is not a hub model" in lines
    assert lines[-1].endswith("; ready") and "0 failed" in lines[-1]


def test_preflight_with_a_failed_check_exits_1_and_says_what_to_do(capsys, tmp_path):
    url = closed_port_url()
    rc, out, err = run(capsys, "preflight", "--params", preflight_params(tmp_path, url))
    assert rc == 1 and err == "", err
    assert f"✗ LLM endpoint {url}: unreachable" in out and "    to do: start an OpenAI-compatible server" in out
    assert out.rstrip().endswith("NOT ready: fix the ✗ line(s) above")


@pytest.mark.parametrize("args", [["--params", "TMP"], ["--profile", "paper"]])
def test_preflight_imports_no_torch_where_no_policy_is_measured(tmp_path, args):
    """torch, transformers and accelerate load in preflight's process only to measure a policy's
    config.json (the GPU check): not for the default profile, nor for the paper profile offline with
    an empty cache (the table's fallback; torch counts the GPUs in a child process)."""
    args = [str(preflight_params(tmp_path, closed_port_url())) if a == "TMP" else a for a in args]
    code = (
        "import sys\nfrom codethinker.cli import main\n"
        "try:\n    main(['preflight', *sys.argv[1:]])\nexcept SystemExit:\n    pass\n"
        "print('heavy', sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'accelerate'}))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf-cache")}
    res = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "preflight: profile" in res.stdout and res.stdout.rstrip().endswith("heavy []"), res.stdout


def test_preflight_profile_flag_resolves_for_that_profile_and_writes_nothing(capsys, tmp_path):
    params = preflight_params(tmp_path, closed_port_url(), backend={"default": "mutate", "full": "llm"})
    before = params.read_bytes()
    rc, out, _ = run(capsys, "preflight", "--params", params)
    assert rc == 0 and "- LLM endpoint: not needed: gen_inputs.backend is mutate" in out
    for profile in ("full", "paper"):  # paper takes full's value: it names none of its own
        rc, out, _ = run(capsys, "preflight", "--params", params, "--profile", profile)
        assert rc == 1 and f"preflight: profile {profile} " in out and "✗ LLM endpoint" in out
    assert params.read_bytes() == before


def test_preflight_show_params_prints_the_resolved_values(capsys, tmp_path):
    params = preflight_params(tmp_path, "http://127.0.0.1:9/v1", backend={"default": "mutate", "full": "llm"})
    rc, out, err = run(capsys, "preflight", "--params", params, "--profile", "paper", "--show-params")
    assert rc == 0 and err == ""
    values = {k.strip(): v for k, v in (line.split(" = ", 1) for line in out.splitlines())}
    assert values["base.profile"] == '"paper"' and values["sft.max_steps"] == "-1"
    assert values["gen_inputs.backend"] == '"llm"' and values["gen_inputs.llm.base_url"] == '"http://127.0.0.1:9/v1"'


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--profile", "huge"], "invalid choice: 'huge'"),
        (["--params", "{tmp}/missing.yaml"], "params file not found"),
        (["--params", "{tmp}/bad.yaml"], "sft.steps: parameter"),
        (["--params", "{tmp}/bad.yaml", "--show-params"], "no value for profile 'default'"),
    ],
)
def test_preflight_usage_errors_exit_2(capsys, tmp_path, argv, needle):
    (tmp_path / "bad.yaml").write_text("base: {profile: default}\nsft: {steps: {full: 1}}\n", encoding="utf-8")
    rc, out, err = run(capsys, "preflight", *[a.format(tmp=tmp_path) for a in argv])
    assert rc == 2 and out == ""
    one_line_error(err)
    assert needle in err


def test_preflight_as_a_real_process_without_unicode_output(tmp_path):
    url = closed_port_url()
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONWARNINGS": "error::DeprecationWarning"}
    res = subprocess.run(
        [*cli_command(), "preflight", "--params", str(preflight_params(tmp_path, url))],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 1, res.stderr
    assert f"FAIL LLM endpoint {url}: unreachable" in res.stdout and "SKIP GPUs: not needed" in res.stdout


def test_report_finds_dvc_beside_the_interpreter_without_path(monkeypatch, tmp_path):
    """`codethinker report --exps auto` from a venv that is not activated: `dvc` is not on PATH (it
    crashed with FileNotFoundError); the one beside the interpreter is used, else a clear error."""
    from codethinker.errors import UsageError as CommandError
    from codethinker.ops.dvc_api import dvc_command

    monkeypatch.setenv("PATH", str(tmp_path))
    beside = Path(sys.executable).parent / "dvc"
    if beside.is_file():
        assert dvc_command() == str(beside)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(CommandError, match=r"no `dvc` was found \(make install\)"):
        dvc_command()


# --------------------------------------------------------------------------- check-params and plots
REPO = Path(__file__).resolve().parents[1]


def _misspelled(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "params.yaml").read_text()
    assert old in text
    out = tmp_path / "params.yaml"
    out.write_text(text.replace(old, new, 1))
    return out


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        ("  learning_rate: {default: ", "  learning_rte: {default: ", ".learning_rte: unknown key"),
        ("  profile: default ", "  profile: defualt ", "did you mean default?"),
        ("\nast_filter:\n", "\nast_filtr:\n", "did you mean ast_filter?"),
    ],
)
def test_check_params_names_a_slip_with_its_suggestion_in_one_line_under_two_seconds(tmp_path, old, new, hint):
    import time

    params = _misspelled(tmp_path, old, new)
    start = time.perf_counter()
    res = subprocess.run(
        [*cli_command(), "check-params", "--params", str(params)], capture_output=True, text=True, timeout=60
    )
    took = time.perf_counter() - start
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and hint in res.stderr and str(params) in res.stderr
    if hint.startswith(".learning_rte"):
        assert "did you mean learning_rate?" in res.stderr
    assert took < 2.0, f"check-params took {took:.2f} s"


def test_check_params_accepts_the_committed_file_without_importing_torch():
    code = (
        "import sys; from codethinker.config.check import check_params; "
        "n = check_params('params.yaml'); "
        "print(len(n), sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'vllm')))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    count, heavy = res.stdout.split(" ", 1)
    assert int(count) >= 19 and heavy.strip() == "[]"


def test_make_run_checks_the_params_before_dvc_can_remove_an_output():
    recipe = (REPO / "Makefile").read_text().split("\nrun: install\n", 1)[1].split("\n\n", 1)[0]
    commands = [line.strip() for line in recipe.splitlines()]
    assert commands[0].endswith("codethinker check-params")
    assert any(c.endswith("codethinker repro") for c in commands[1:])  # dvc repro under one MLflow parent run


def test_plots_renders_every_dvc_plot_offline_with_titled_axes(tmp_path):
    import csv

    (tmp_path / "dvc.yaml").write_text(
        "stages: {}\nplots:\n"
        "  - reward:\n      title: GRPO reward\n      x: step\n      x_label: GRPO step\n      y_label: reward\n"
        "      y:\n        plots/r.csv: [a, b]\n"
        "  - absent:\n      x: step\n      y:\n        plots/none.csv: c\n"
    )
    (tmp_path / "plots").mkdir()
    with open(tmp_path / "plots" / "r.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "a", "b"])
        w.writerows([[1, 0.5, 1.0], [2, "", 2.0], [3, 1.5, 2.5]])
    from codethinker.ops.plots import plot_specs, read_series

    spec = plot_specs(tmp_path)[0]
    assert (spec.title, spec.x_label, spec.y_label, spec.series) == (
        "GRPO reward",
        "GRPO step",
        "reward",
        (("plots/r.csv", "a"), ("plots/r.csv", "b")),
    )
    assert read_series(tmp_path / "plots" / "r.csv", "step", "a") == ([1.0, 3.0], [0.5, 1.5])  # empty cell left out
    assert main(["plots", "--root", str(tmp_path), "--out", str(tmp_path / "img")]) == 0
    made = sorted(p.name for p in (tmp_path / "img").iterdir())
    assert made == ["plots.png", "reward.png"]  # the plot whose file is missing is skipped, not drawn empty
    assert (tmp_path / "img" / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_plot_of_the_project_has_a_title_and_axis_labels():
    from codethinker.ops.plots import plot_specs

    raw = __import__("yaml").safe_load((REPO / "dvc.yaml").read_text())["plots"]
    assert all({"title", "x_label", "y_label"} <= set(d) for entry in raw for d in entry.values())
    assert len(plot_specs(REPO)) == len(raw)


def test_version(capsys):
    from codethinker import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"codethinker {__version__}"


def test_plots_draws_the_funnel_and_the_held_out_evaluation_from_their_metrics(tmp_path):
    from codethinker.ops.plots import funnel_steps

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "metrics").mkdir()
    funnel = {
        "default": {
            "steps": [
                {"step": "0 source", "count": 1890, "unit": "problems", "paper": None},
                {"step": "1 static filter", "count": 1472, "unit": "functions", "paper": 1673},
            ]
        }
    }
    (tmp_path / "metrics" / "funnel.json").write_text(json.dumps(funnel))
    row = {"reward": 0.2, "reward_ci_low": 0.1, "reward_ci_high": 0.3, "sampled_reward": 0.05}
    te = {"after_sft": {"shape_disjoint": row}, "after_grpo": {"shape_disjoint": row}}
    (tmp_path / "metrics" / "train_eval.json").write_text(json.dumps(te))
    assert funnel_steps(funnel) == [("0 source", 1890, "problems", None), ("1 static filter", 1472, "functions", 1673)]
    assert main(["plots", "--root", str(tmp_path), "--out", str(tmp_path / "img")]) == 0
    assert sorted(p.name for p in (tmp_path / "img").iterdir()) == ["funnel.png", "train_eval.png"]


def test_check_params_of_some_sections_takes_a_project_of_its_own_sections(tmp_path):
    """The flow checks only its stages' sections: a toy project's own sections are not refused, a slip in a
    selected section still is."""
    from codethinker.config.check import check_params
    from codethinker.params import ParamsError

    p = tmp_path / "params.yaml"
    p.write_text("base: {profile: default, seed: 0}\nprep: {add: 1}\nast_filter: {min_lines: 5}\n")
    assert check_params(p, only=["prep", "ast_filter"]) == ["ast_filter", "base", "model"]
    with pytest.raises(ParamsError, match="prep: unknown section"):
        check_params(p)
    p.write_text("base: {profile: default, seed: 0}\nprep: {add: 1}\nast_filter: {min_line: 5}\n")
    with pytest.raises(ParamsError, match=r"ast_filter\.min_line: unknown key.*did you mean min_lines\?"):
        check_params(p, only=["ast_filter"])
