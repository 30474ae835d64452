"""The code-generation judge under attack (tests/codegen/judge_hostile.py: programs written to be paid
without solving the task) on real LeetCodeDataset problems: none earns a pass, more tests passed than an
honest wrong answer, or a higher reward; one hostile frame in a batch of honest programs changes none of
their verdicts. The previous judge paid 13 of these programs in full (each ran the test's assert, expected
value included, in the candidate's process), and the big-int frame made it raise for the whole batch."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from codethinker.codegen.judge import JudgeLimits, judge_programs
from codethinker.rewards.codegen import outcome_score
from tests.codegen.conftest import fenced
from tests.codegen.judge_hostile import HOSTILE, HOSTILE_OTHER, WRONG

LIMITS = JudgeLimits(test_timeout_s=1.0, setup_timeout_s=3.0, memory_mb=512, workers=2)
pytestmark = pytest.mark.needs_shared


@pytest.fixture(scope="module")
def problems(leetcode_problems):
    return {p.id: p for p in leetcode_problems}


@pytest.fixture(scope="module")
def answers_elsewhere(data_mirror):
    """A copy of ``two-sum``'s record outside the checkout and the configured mirror, where a host may keep
    one (``/var/tmp/<name>/leetcodedataset``; CI's checkout saw the machine's own mirror at another path):
    no list of folders to hide can name every copy, so the judge's sandbox shows only the system's folders."""
    try:
        root = Path(tempfile.mkdtemp(prefix="codethinker-answers-", dir="/var/tmp"))
    except OSError:
        yield None
        return
    src = data_mirror / "leetcodedataset" / "LeetCodeDataset-v0.1.0-train.jsonl.gz"
    with gzip.open(src, "rt") as f:
        record = next(line for line in f if json.loads(line)["task_id"] == "two-sum")
    (root / "leetcodedataset").mkdir()
    with gzip.open(root / "leetcodedataset" / "copy-train.jsonl.gz", "wt") as f:
        f.write(record)
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def verdicts(problems, answers_elsewhere):
    """Every hostile program and the wrong answer, judged in one batch (as a GRPO reward step would)."""
    pairs = [(problems["two-sum"], c) for c in HOSTILE.values()]
    pairs += [(problems[pid], c) for pid, c in HOSTILE_OTHER.values()]
    pairs.append((problems["two-sum"], WRONG))
    js = judge_programs([p for p, _ in pairs], [c for _, c in pairs], LIMITS)
    return dict(zip([*HOSTILE, *HOSTILE_OTHER, "wrong"], zip(js, (p for p, _ in pairs), strict=True), strict=True))


@pytest.mark.parametrize("name", sorted([*HOSTILE, *HOSTILE_OTHER]))
def test_no_hostile_program_is_paid(verdicts, name):
    (j, problem), (wrong, _) = verdicts[name], verdicts["wrong"]
    assert not j.ok and j.status != "pass", (name, j)
    assert j.passed <= wrong.passed == 0, (name, j)
    code = HOSTILE.get(name) or HOSTILE_OTHER[name][1]
    assert outcome_score(fenced(code), problem, j).reward == 0.0
    assert outcome_score(fenced(code), problem, j).pass_rate <= outcome_score(fenced(WRONG), problem, wrong).pass_rate


def test_at_least_twenty_programs():
    assert len(HOSTILE) + len(HOSTILE_OTHER) >= 20


def test_the_checkout_and_the_mirror_are_hidden(verdicts):
    j, _ = verdicts["read_the_checkout"]
    assert "['.venv', 'codethinker']" in j.detail or "['codethinker']" in j.detail, j.detail  # the interpreter only
    assert "FileNotFoundError: no mirror" in verdicts["read_the_mirror"][0].detail


@pytest.mark.slow
def test_one_hostile_frame_among_64_honest_programs(leetcode_problems, problems):
    """64 references and wrong answers with a forged frame (a status that is a 5,000-digit int) in the
    middle: 64 verdicts, each the same as when the program is judged without it."""
    honest = leetcode_problems[:32]
    wrong = [p.reference.replace("return ", "return None and ", 1) for p in honest]
    pairs = [(p, p.reference) for p in honest] + list(zip(honest, wrong, strict=True))
    alone = judge_programs([p for p, _ in pairs], [c for _, c in pairs], LIMITS)
    hostile = HOSTILE["forged_keyed_frame_bigint_status"]
    mixed = [*pairs[:40], (problems["two-sum"], hostile), *pairs[40:]]
    js = judge_programs([p for p, _ in mixed], [c for _, c in mixed], LIMITS)
    assert len(js) == 65 and js[:40] + js[41:] == alone
    assert js[40].status != "pass" and js[40].passed == 0
    assert sum(j.ok for j in alone[:32]) == 32
