"""Dynamic Beam Sampling (DBS), the project's reading of the paper (SPEC §5).

Engine-agnostic: it needs only ``engine.continue_prefixes(prefixes, n, stop=..., max_tokens=...)``
(:mod:`codethinker.engines.base`) and a prefix scorer ``score(response_so_far) -> float`` per prompt
(ground truth bound in, e.g. ``functools.partial(prefix_score, flow=flow)``; a broken format must
score lowest).

1. Start with one empty prefix holding the whole budget ``B``.
2. Each live prefix with budget ``b`` draws ``b`` continuations, each stopped at the end of the next
   block (``[/LOCALS]``), at ``[/TRACE]``, at EOS, or at the trajectory's length limit.
3. A finished continuation (``[/TRACE]``, EOS or length limit) is final and keeps its unit.
4. Every unfinished continuation is scored; the budget of all unfinished continuations (one unit
   each) goes to those with the highest score, split evenly, the remainder to the first ones; the
   rest are dropped.
5. Repeat until ``B`` final trajectories exist. Invariant: ``finals + sum(live budgets) == B``.

All prompts of a batch advance in lockstep, so each round is a few batched engine calls, or one on an engine
that batches several calls (``continue_requests``: vLLM's and transformers'; each prefix keeps its own budget
and token limit).
Tokens generated and tokens dropped (on segments that are no prefix of any final trajectory) are
counted: DBS's extra cost is part of the result.

>>> res = dbs_sample(engine, [prompt], [scorer], DBSConfig(budget=4))  # doctest: +SKIP
>>> [c.text for c in res[0].completions], res[0].tokens_generated, res[0].tokens_dropped
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from codethinker.contra.render import LOCALS_CLOSE, TRACE_CLOSE
from codethinker.engines.base import Completion, Engine, Program, run_programs

__all__ = ["BLOCK_STOP", "FINAL_STOP", "DBSConfig", "DBSResult", "DBSRun", "allocate", "dbs_sample", "dbs_sample_async"]

Scorer = Callable[[str], float]
BLOCK_STOP = (LOCALS_CLOSE,)  # the end of one ConTra block
FINAL_STOP = (TRACE_CLOSE,)  # the end of a ConTra trace


@dataclass
class DBSConfig:
    budget: int = field(default=4, metadata={"help": "final trajectories per prompt (the paper's 4)"})
    max_tokens: int = field(default=512, metadata={"help": "length limit of a whole trajectory, in tokens"})
    block_stop: list[str] = field(
        default_factory=lambda: list(BLOCK_STOP), metadata={"help": "stop strings that end one block"}
    )
    final_stop: list[str] = field(
        default_factory=lambda: list(FINAL_STOP), metadata={"help": "stop strings that end a trajectory"}
    )
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    max_rounds: int = field(
        default=64, metadata={"help": "after this many block rounds, run the live prefixes to the end"}
    )
    seed: int | None = field(default=None, metadata={"help": "base seed for engine calls (None: random)"})


@dataclass
class DBSResult:
    completions: list[Completion]  # B final trajectories (whole responses; n_tokens over the path)
    tokens_generated: int = 0
    tokens_dropped: int = 0
    rounds: int = 0
    scores: list[list[float]] = field(default_factory=list)  # scores of unfinished continuations per round


@dataclass
class _Node:
    text: str
    n_tokens: int  # along the path from the root
    seg_tokens: int
    parent: int | None
    finish: str = "stop"


def allocate(scores: Sequence[float], units: int) -> list[int]:
    """Budget per candidate: ``units`` split evenly over the top-scoring ones, remainder to the first.

    >>> allocate([2.0, 1.0, 2.0], 3)
    [2, 0, 1]
    """
    if not scores:
        return []
    top = max(scores)
    winners = [i for i, s in enumerate(scores) if math.isclose(s, top, rel_tol=1e-9, abs_tol=1e-12)]
    base, rem = divmod(units, len(winners))
    out = [0] * len(scores)
    for k, i in enumerate(winners):
        out[i] = base + (1 if k < rem else 0)
    return out


def _is_final(c: Completion, cfg: DBSConfig, total: int) -> bool:
    if c.finish_reason == "length" or total >= cfg.max_tokens:
        return True
    text = c.text.rstrip()
    if any(text.endswith(s) for s in cfg.final_stop):
        return True
    # stopped without a block stop string: EOS, the trajectory is over (a whitespace stop such as code's
    # blank line "\n\n" is looked for before the strip)
    return not any(text.endswith(s) or c.text.endswith(s) for s in cfg.block_stop)


@dataclass
class Request:
    """One engine call of a DBS round: ``n`` continuations of each prefix."""

    members: list[tuple[int, int]]  # (prompt index, node id) per prefix
    prefixes: list[str]
    n: int
    stop: list[str]
    max_tokens: int
    temperature: float
    seed: int | None


class DBSRun:
    """DBS as a state machine: :meth:`requests` -> run them on any engine -> :meth:`feed`, until
    :attr:`done`. :func:`dbs_sample` (sync engines) and :func:`dbs_sample_async` (async ones, e.g.
    verl's rollout servers) drive it; the algorithm lives only here."""

    def __init__(self, prompts: Sequence[str], scorers: Sequence[Scorer], cfg: DBSConfig | None = None):
        self.cfg = cfg = cfg or DBSConfig()
        if len(prompts) != len(scorers):
            raise ValueError("one scorer per prompt")
        if cfg.budget < 1:
            raise ValueError("budget must be >= 1")
        self.prompts, self.scorers = list(prompts), list(scorers)
        self.trees: list[list[_Node]] = [[_Node("", 0, 0, None)] for _ in prompts]
        self.live: list[list[tuple[int, int]]] = [[(0, cfg.budget)] for _ in prompts]  # (node id, budget)
        self.finals: list[list[int]] = [[] for _ in prompts]
        self.out = [DBSResult(completions=[]) for _ in prompts]
        self.round = 0
        self._pending: list[Request] | None = None

    @property
    def done(self) -> bool:
        return not any(self.live)

    def requests(self) -> list[Request]:
        """This round's engine calls, grouped by (n, max_tokens): ``continue_prefixes`` takes one of each; an engine
        with ``continue_requests`` runs them all as one batch (:func:`codethinker.engines.base.continue_requests`)."""
        cfg, last = self.cfg, self.round >= self.cfg.max_rounds
        stop = list(cfg.final_stop) if last else [*cfg.block_stop, *cfg.final_stop]
        groups: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for p, items in enumerate(self.live):
            for node_id, b in items:
                remaining = cfg.max_tokens - self.trees[p][node_id].n_tokens
                groups[(b, max(remaining, 1))].append((p, node_id))
        reqs = []
        for g, ((b, max_tok), members) in enumerate(sorted(groups.items())):
            seed = None if cfg.seed is None else cfg.seed + 7919 * self.round + g
            prefixes = [self.prompts[p] + self.trees[p][nid].text for p, nid in members]
            reqs.append(Request(members, prefixes, b, stop, max_tok, cfg.temperature, seed))
        self._pending = reqs
        return reqs

    def feed(self, outputs: Sequence[Sequence[Sequence[Completion]]]) -> None:
        """Continuations for :meth:`requests`' calls, in order: score, reallocate, drop."""
        reqs, self._pending = self._pending, None
        if reqs is None or len(outputs) != len(reqs):
            raise RuntimeError("feed() needs the outputs of the last requests(), one per request")
        cfg, last = self.cfg, self.round >= self.cfg.max_rounds
        drawn: dict[int, list[tuple[int, Completion]]] = defaultdict(list)  # prompt -> (parent, completion)
        for req, outs in zip(reqs, outputs, strict=True):
            for (p, nid), conts in zip(req.members, outs, strict=True):
                if len(conts) != req.n:
                    raise RuntimeError(f"engine returned {len(conts)} continuations, asked for {req.n}")
                drawn[p].extend((nid, c) for c in conts)
        for p, items in enumerate(self.live):
            if not items:
                continue
            tree, res = self.trees[p], self.out[p]
            order = {nid: k for k, (nid, _) in enumerate(items)}  # "first" = order of the live list
            unfinished: list[int] = []
            for parent, c in sorted(drawn[p], key=lambda t: order[t[0]]):
                node = _Node(
                    tree[parent].text + c.text, tree[parent].n_tokens + c.n_tokens, c.n_tokens, parent, c.finish_reason
                )
                tree.append(node)
                res.tokens_generated += c.n_tokens
                if last or _is_final(c, cfg, node.n_tokens):
                    self.finals[p].append(len(tree) - 1)
                else:
                    unfinished.append(len(tree) - 1)
            scores = [float(self.scorers[p](tree[i].text)) for i in unfinished]
            res.scores.append(scores)
            budgets = allocate(scores, len(unfinished))
            self.live[p] = [(i, b) for i, b in zip(unfinished, budgets, strict=True) if b > 0]
            assert len(self.finals[p]) + sum(b for _, b in self.live[p]) == cfg.budget
        self.round += 1

    def program(self) -> Program:
        """DBS as a sampling program (:func:`codethinker.engines.base.run_programs`): yields each round's
        requests, is fed their continuations, returns :meth:`results`."""
        while not self.done:
            self.feed((yield self.requests()))
        return self.results()

    def results(self) -> list[DBSResult]:
        for p, res in enumerate(self.out):
            tree = self.trees[p]
            kept: set[int] = set()
            for i in self.finals[p]:
                j: int | None = i
                while j is not None and j not in kept:
                    kept.add(j)
                    j = tree[j].parent
            res.tokens_dropped = sum(n.seg_tokens for k, n in enumerate(tree) if k not in kept)
            res.rounds = self.round
            res.completions = [
                Completion(
                    text=tree[i].text,
                    n_tokens=tree[i].n_tokens,
                    finish_reason="length" if tree[i].finish == "length" else "stop",
                )
                for i in self.finals[p]
            ]
        return self.out


def dbs_sample(
    engine: Engine,
    prompts: Sequence[str],
    scorers: Sequence[Scorer],
    cfg: DBSConfig | None = None,
) -> list[DBSResult]:
    """Run DBS for every prompt (chat template applied); one :class:`DBSResult` per prompt."""
    run = DBSRun(prompts, scorers, cfg)
    return run_programs(engine, [run.program()])[0]


async def dbs_sample_async(
    continue_fn: Callable[..., Awaitable[list[list[Completion]]]],
    prompts: Sequence[str],
    scorers: Sequence[Scorer],
    cfg: DBSConfig | None = None,
) -> list[DBSResult]:
    """:func:`dbs_sample` for an async ``continue_fn`` with ``continue_prefixes``' signature;
    a round's calls run concurrently."""
    import asyncio

    run = DBSRun(prompts, scorers, cfg)
    while not run.done:
        reqs = run.requests()
        run.feed(
            await asyncio.gather(
                *(
                    continue_fn(
                        r.prefixes, r.n, stop=r.stop, max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed
                    )
                    for r in reqs
                )
            )
        )
    return run.results()
