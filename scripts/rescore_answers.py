"""Re-score train_eval's stored answers through the task contract and compare every part with the stored one.

    python scripts/rescore_answers.py --answers data/train_eval/answers.jsonl.gz \
        --data data/contra_sft/grpo_eval.parquet [--task output_prediction] [--reward crm]

Each answer of ``data/train_eval/answers.jsonl.gz`` (prompt id, model, pass, text, score parts) is scored again
with the task's reward (``codethinker.tasks``) against the truth of its row in ``--data``; the script prints how
many answers were compared and, per part (fmt, r_proc, r_res, reward, rcs, answer_ok), how many differ, and
exits 1 when any does (2, with one line naming the file, row and field, on an answer it cannot read or whose
id is not a held-out row). A change to the reward code that moves no stored score leaves every count at 0.

With ``--reasons`` it also prints, per model, pass and held-out set, how many answers are valid and, for the
rest, the first format rule each breaks (the score's ``reason``: ``code`` a code line written otherwise than
the source's, ``return`` the call in RETURN not the given one, ...), most frequent first.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from codethinker.data.io import RecordError, read_jsonl

PARTS = ("fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok")
KEYS = {"id": str, "text": str} | {k: (int, float) for k in PARTS}  # what a stored answer must hold


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True, help="the held-out rows the answers are to")
    ap.add_argument("--task", default="output_prediction")
    ap.add_argument("--reward", default="crm")
    ap.add_argument("--reasons", action="store_true", help="count the first broken format rule per model/pass/set")
    a = ap.parse_args(argv)
    from codethinker.tasks import get_task

    task = get_task(a.task)
    spec = task.reward_spec(a.reward, {})
    try:
        answers = read_jsonl(a.answers, KEYS)
        truths = {r["id"]: r["truth"] for r in task.rows(a.data, "heldout")}
        for row, x in enumerate(answers, 1):
            if x["id"] not in truths:
                raise RecordError(a.answers, row, "id", f"{x['id']!r} is not a row of {a.data}")
    except ValueError as exc:  # a RecordError, or the task's line naming the held-out file and row
        print(exc, file=sys.stderr)
        return 2
    judged = task.score(spec, [x["text"] for x in answers], [truths[x["id"]] for x in answers])
    differ: Counter[str] = Counter()
    for x, j in zip(answers, judged, strict=True):
        differ.update(k for k in PARTS if float(j.score[k]) != float(x[k]))
    print(
        f"{len(answers)} answers re-scored ({a.task}, {a.reward}); parts that differ: "
        + ", ".join(f"{k} {differ[k]}" for k in PARTS)
    )
    if a.reasons:
        print(reasons(answers, [j.score for j in judged]))
    return 1 if differ else 0


def reasons(answers: list[dict], scores: list) -> str:
    """Per model, pass and set: the answers, the valid ones, then each first broken rule by count.

    >>> a = [{"model": "sft", "pass": "greedy", "set": "s"}] * 3
    >>> scores = [{"fmt": 1, "reason": None}, {"fmt": 0, "reason": "code"}, {"fmt": 0, "reason": "code"}]
    >>> print(reasons(a, scores))
    sft greedy s (3): valid 1, code 2
    """
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for x, s in zip(answers, scores, strict=True):
        key = (x.get("model", ""), x.get("pass", ""), x.get("set", ""))
        counts.setdefault(key, Counter())["valid" if s["fmt"] else s["reason"] or "invalid"] += 1
    lines = []
    for key, c in counts.items():
        valid = c.pop("valid", 0)
        rest = ", ".join(f"{k} {n}" for k, n in c.most_common())
        lines.append(f"{' '.join(key)} ({valid + sum(c.values())}): valid {valid}" + (f", {rest}" if rest else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
