"""ReflexiCoder's composite reward (the seed's definitions and the public code's values, docs/reflexicoder.md).

A response (:mod:`codethinker.codegen.reflexion`) has ``n >= 1`` reflection cycles and ``n + 1``
answers with quality scores ``r_0 .. r_n``: each answer's test pass rate in [0, 1], given by the
caller (:func:`answer_pass_rates` computes them with the code-generation judge). With ``F`` the format
(1 when the response parses), ``d_t = r_t - r_{t-1}`` and :class:`ReflexiConfig`'s coefficients::

    P(n)   = 1                                              for 1 <= n <= n0
           = 1/(1 + alpha k^beta) * exp(-gamma k) * (1 - delta sin(pi/2 k)),  k = n - decay_offset, n > n0
    w_t    = exp(lambda t) / sum_{k=1..n} exp(lambda k)
    m_t    = tanh(d_t / s) if d_t > eps;  -tanh(|d_t| / s) if d_t < -eps;
             else +h_pos if |r_{t-1} - r_max| <= eps (converged), -h_neg (stagnating below r_max)
    R_traj = r_n + eta * sum_t w_t m_t                      (terminal "solved": [r_n >= tau_q] for r_n)
    E(n)   = r_n / n + (r_n - r_0) / (max(1, n - 1) + epsilon)      (terminal "solved": [r_n >= tau_q] / n)
    R      = F * (phi * P(n) * R_traj + psi * P(n) * E(n) + xi)      (regulate_efficiency off: psi * E(n))

The reward is a pure function of the parsed response and the pass rates: :func:`reflexicoder_score`
returns a :class:`ReflexiScore`, the project's :class:`~codethinker.rewards.score.Score` (``fmt`` = F,
``r_proc`` = the paid trajectory term ``phi P R_traj``, ``r_res`` = the paid efficiency term,
``pass_rate`` = r_n, ``answer_ok`` = [r_n = 1], ``reason`` why the format is broken) beside the
components (``cycles``, ``p_n``, ``r_traj``, ``efficiency``, ``signals``); :meth:`ReflexiScore.log`
flattens them for the GRPO logs.

The formula pays a fix more than a right first answer: E's second term ``(r_n - r_0) / ...`` and a full
improvement signal (``m = tanh(10)``) go to a wrong first draft fixed in revision (pass rates [0, 1]:
3.75), a right answer kept right gets neither, only ``h_pos`` ([1, 1]: 2.5125). It is kept as published;
:func:`draft_outcomes` (``first_pass1``, ``fail_then_pass``, ``pass_then_pass``, ``pass_then_fail``, in
``codegen_eval``'s metrics) measures whether a policy trained on it sandbags its first draft.

>>> from codethinker.codegen.reflexion import render_response
>>> good = render_response("plan", ["x = 0\\n", "x = 1\\n"], ["STATUS: BUG_DETECTED\\nwrong"])
>>> [round(r, 6) for r in reflexicoder_rewards([good, "junk"], [[0.0, 1.0], []])]
[3.749999, 0.0]
>>> s = reflexicoder_scores([good], [[1.0, 1.0]])[0]  # converged: m_1 = h_pos
>>> s.cycles, s.signals, s.r_traj, s.efficiency, s.reward
(1, (0.05,), 1.025, 1.0, 2.5125)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from codethinker.codegen.judge import JudgeLimits, judge_programs
from codethinker.codegen.reflexion import Trajectory, parse_response
from codethinker.codegen.task import CodegenProblem
from codethinker.rewards.score import Score

__all__ = [
    "DRAFT_METRICS",
    "TERMINALS",
    "ReflexiConfig",
    "ReflexiScore",
    "answer_pass_rates",
    "cycle_regulation",
    "draft_outcomes",
    "efficiency_reward",
    "improvement_signals",
    "reflexicoder_rewards",
    "reflexicoder_score",
    "reflexicoder_scores",
    "time_weights",
    "trajectory_reward",
]

TERMINALS = ("score", "solved")
DRAFT_METRICS = ("first_pass1", "fail_then_pass", "pass_then_pass", "pass_then_fail")


@dataclass(frozen=True)
class ReflexiConfig:
    """Every coefficient of the reward; defaults: the paper's Table 4 and the public code."""

    n0: int = field(default=5, metadata={"help": "cycles paid in full (P(n) = 1 for 1 <= n <= n0)"})
    alpha: float = field(default=0.1, metadata={"help": "P(n): weight of the polynomial decay k^beta"})
    beta: float = field(default=2.0, metadata={"help": "P(n): power of the polynomial decay"})
    gamma: float = field(default=0.05, metadata={"help": "P(n): rate of the exponential decay exp(-gamma k)"})
    delta: float = field(default=0.1, metadata={"help": "P(n): amplitude of the oscillation 1 - delta sin(pi/2 k)"})
    decay_offset: int = field(
        default=3, metadata={"help": "P(n): k = n - decay_offset beyond n0 (public code: 3; n0 makes P continuous)"}
    )
    lam: float = field(default=0.2, metadata={"help": "lambda of the time weights w_t ~ exp(lambda t)"})
    s: float = field(default=0.1, metadata={"help": "scale of an improvement: m_t = tanh(d_t / s)"})
    eps: float = field(default=1e-4, metadata={"help": "|d_t| <= eps is no change; |r - r_max| <= eps converged"})
    h_pos: float = field(default=0.05, metadata={"help": "m_t of a converged step (no change at r_max)"})
    h_neg: float = field(default=1.0, metadata={"help": "-m_t of a stagnating step (no change below r_max)"})
    r_max: float = field(default=1.0, metadata={"help": "the best quality score (every test passes)"})
    eta: float = field(default=0.5, metadata={"help": "weight of the improvement signals in R_traj"})
    epsilon: float = field(default=1e-6, metadata={"help": "E(n): added to the denominator max(1, n - 1)"})
    phi: float = field(default=0.5, metadata={"help": "weight of P(n) R_traj in R (public config: 0.5)"})
    psi: float = field(default=1.0, metadata={"help": "weight of the efficiency E(n) in R (public config: 1.0)"})
    xi: float = field(default=1.0, metadata={"help": "weight of the format F in R (public config: 1.0)"})
    terminal: str = field(
        default="score",
        metadata={"help": "r_n in R_traj and E: score (public code) | solved ([r_n >= tau_q], the seed's indicators)"},
    )
    tau_q: float = field(default=1.0, metadata={"help": "threshold of a solved answer (terminal solved only)"})
    regulate_efficiency: bool = field(
        default=True, metadata={"help": "multiply E(n) by P(n) (public code); off: the seed's psi * E(n)"}
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("n0", "decay_offset"):
                least = 1 if f.name == "n0" else 0
                if type(value) is not int or value < least:
                    raise ValueError(f"reflexicoder {f.name} must be an integer >= {least}, got {value!r}")
            elif f.name == "terminal":
                if value not in TERMINALS:
                    raise ValueError(f"reflexicoder terminal must be one of {', '.join(TERMINALS)}, got {value!r}")
            elif f.name == "regulate_efficiency":
                if type(value) is not bool:
                    raise ValueError(f"reflexicoder regulate_efficiency must be true or false, got {value!r}")
            elif type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"reflexicoder {f.name} must be a finite number >= 0, got {value!r}")
        if self.s <= 0:
            raise ValueError(f"reflexicoder s must be > 0, got {self.s!r}")


@dataclass(frozen=True)
class ReflexiScore:
    """One response's :class:`Score` and the components of its reward (all 0 when the format is broken)."""

    score: Score
    cycles: int
    p_n: float
    r_traj: float
    efficiency: float
    signals: tuple[float, ...] = ()
    pass_rates: tuple[float, ...] = ()

    @property
    def reward(self) -> float:
        return self.score.reward

    def log(self) -> dict[str, float]:
        """The numbers a GRPO step averages: reward, format, cycles, P(n), R_traj, E, first/last pass rate."""
        first = self.pass_rates[0] if self.pass_rates else 0.0
        last = self.pass_rates[-1] if self.pass_rates else 0.0
        return {
            "reward": self.score.reward,
            "fmt": float(self.score.fmt),
            "cycles": float(self.cycles),
            "p_n": self.p_n,
            "r_traj": self.r_traj,
            "efficiency": self.efficiency,
            "pass_first": first,
            "pass_last": last,
        }


def cycle_regulation(n: int, config: ReflexiConfig = ReflexiConfig()) -> float:
    """``P(n)``: 0 for ``n < 1``, 1 up to ``n0``, then the compound decay (module docstring)."""
    if n < 1:
        return 0.0
    if n <= config.n0:
        return 1.0
    k = n - config.decay_offset
    poly = 1.0 / (1.0 + config.alpha * float(k) ** config.beta)
    return poly * math.exp(-config.gamma * k) * (1.0 - config.delta * math.sin(math.pi / 2.0 * k))


def time_weights(n: int, lam: float) -> list[float]:
    """``w_1 .. w_n``: ``exp(lam t)`` normalized to sum 1 (computed as ``exp(lam (t - n))``: no overflow)."""
    raw = [math.exp(lam * (t - n)) for t in range(1, n + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def improvement_signals(rates: Sequence[float], config: ReflexiConfig = ReflexiConfig()) -> list[float]:
    """``m_1 .. m_n`` of the scores ``r_0 .. r_n`` (module docstring)."""
    out = []
    for prev, cur in itertools.pairwise(rates):
        d = cur - prev
        if d > config.eps:
            out.append(math.tanh(d / config.s))
        elif d < -config.eps:
            out.append(-math.tanh(-d / config.s))
        elif abs(prev - config.r_max) <= config.eps:
            out.append(config.h_pos)
        else:
            out.append(-config.h_neg)
    return out


def _terminal(rates: Sequence[float], config: ReflexiConfig) -> float:
    """``r_n`` (terminal ``score``) or ``[r_n >= tau_q]`` (terminal ``solved``)."""
    return rates[-1] if config.terminal == "score" else float(rates[-1] >= config.tau_q)


def trajectory_reward(rates: Sequence[float], config: ReflexiConfig = ReflexiConfig()) -> float:
    """``R_traj`` of the scores ``r_0 .. r_n`` (``n >= 1``)."""
    _need_cycles(rates)
    m = improvement_signals(rates, config)
    w = time_weights(len(m), config.lam)
    return _terminal(rates, config) + config.eta * sum(wt * mt for wt, mt in zip(w, m, strict=True))


def efficiency_reward(rates: Sequence[float], config: ReflexiConfig = ReflexiConfig()) -> float:
    """``E(n)`` of the scores ``r_0 .. r_n`` (``n >= 1``)."""
    _need_cycles(rates)
    n = len(rates) - 1
    return _terminal(rates, config) / n + (rates[-1] - rates[0]) / (max(1, n - 1) + config.epsilon)


def _need_cycles(rates: Sequence[float]) -> None:
    if len(rates) < 2:
        raise ValueError(f"a trajectory needs scores r_0 .. r_n with n >= 1, got {len(rates)} score(s)")


def _checked_rates(rates: Sequence[float], n: int, row: int | None) -> tuple[float, ...]:
    """The pass rates as floats, checked: ``n + 1`` of them, each a finite number in [0, 1]."""
    where = f"row {row}: " if row is not None else ""
    if len(rates) != n + 1:
        raise ValueError(f"{where}pass_rates has {len(rates)} value(s) but the response has {n + 1} answers")
    for k, r in enumerate(rates):
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (0.0 <= r <= 1.0):
            raise ValueError(f"{where}pass_rates[{k}] must be a number in [0, 1], got {r!r}")
    return tuple(float(r) for r in rates)


def reflexicoder_score(
    response: str | Trajectory,
    pass_rates: Sequence[float],
    config: ReflexiConfig = ReflexiConfig(),
    row: int | None = None,
) -> ReflexiScore:
    """The reward of one response (text or parsed) given each answer's pass rate, in order. A broken
    format scores 0 and ``pass_rates`` is not read; else ``ValueError`` (naming ``row``) unless there
    is one rate in [0, 1] per answer."""
    t = parse_response(response) if isinstance(response, str) else response
    if not t.ok:
        zero = Score(fmt=0, r_proc=0.0, r_res=0.0, reward=0.0, rcs=0.0, answer_ok=0, reason=t.reason)
        return ReflexiScore(zero, 0, 0.0, 0.0, 0.0)
    rates = _checked_rates(pass_rates, t.cycles, row)
    p_n = cycle_regulation(t.cycles, config)
    r_traj = trajectory_reward(rates, config)
    eff = efficiency_reward(rates, config)
    paid_traj = config.phi * p_n * r_traj
    paid_eff = config.psi * (p_n if config.regulate_efficiency else 1.0) * eff
    score = Score(
        fmt=1,
        r_proc=paid_traj,
        r_res=paid_eff,
        reward=paid_traj + paid_eff + config.xi,
        rcs=0.0,
        answer_ok=int(rates[-1] >= 1.0),
        reason=None,
        pass_rate=rates[-1],
    )
    return ReflexiScore(score, t.cycles, p_n, r_traj, eff, tuple(improvement_signals(rates, config)), rates)


def reflexicoder_scores(
    completions: Sequence[str], pass_rates: Sequence[Sequence[float]], config: ReflexiConfig = ReflexiConfig()
) -> list[ReflexiScore]:
    """:func:`reflexicoder_score` of each completion with its answers' pass rates (``ValueError`` when
    the lengths differ or a row's rates do not fit its answers)."""
    if len(completions) != len(pass_rates):
        raise ValueError(f"{len(completions)} completions but {len(pass_rates)} rows of pass_rates")
    return [
        reflexicoder_score(c, r, config, row=i) for i, (c, r) in enumerate(zip(completions, pass_rates, strict=True))
    ]


def reflexicoder_rewards(
    completions: Sequence[str], pass_rates: Sequence[Sequence[float]], config: ReflexiConfig = ReflexiConfig()
) -> list[float]:
    """The reward of each completion (TRL's ``reward_fn`` shape)."""
    return [s.reward for s in reflexicoder_scores(completions, pass_rates, config)]


def draft_outcomes(pass_rates: Sequence[float]) -> dict[str, float]:
    """How a response's first answer (the first draft) and its last one (the final revision) fare, as
    :data:`DRAFT_METRICS`: ``first_pass1`` [r_0 = 1], ``fail_then_pass`` [r_0 < 1 and r_n = 1] (fixed in
    revision), ``pass_then_pass`` [r_0 = 1 and r_n = 1], ``pass_then_fail`` [r_0 = 1 and r_n < 1]. No pass
    rates (a broken response): all 0. A policy that sandbags its first draft has ``fail_then_pass`` near its
    pass@1 and ``pass_then_pass`` near 0.

    >>> draft_outcomes([0.0, 1.0]), draft_outcomes([1.0, 0.5, 1.0])["pass_then_pass"]
    ({'first_pass1': 0.0, 'fail_then_pass': 1.0, 'pass_then_pass': 0.0, 'pass_then_fail': 0.0}, 1.0)
    """
    if not pass_rates:
        return dict.fromkeys(DRAFT_METRICS, 0.0)
    first, last = pass_rates[0] >= 1.0, pass_rates[-1] >= 1.0
    values = (first, not first and last, first and last, first and not last)
    return {k: float(v) for k, v in zip(DRAFT_METRICS, values, strict=True)}


def answer_pass_rates(
    completions: Sequence[str], problems: Sequence[CodegenProblem], limits: JudgeLimits | None = None
) -> list[list[float]]:
    """Each completion's answers' test pass rates (``[]`` for a broken format), every program of the
    batch judged in one sandbox by :func:`~codethinker.codegen.judge.judge_programs`."""
    pairs = list(zip(completions, problems, strict=True))
    trajectories = [parse_response(c) for c, _ in pairs]
    jobs = [(p, code) for t, (_, p) in zip(trajectories, pairs, strict=True) for code in t.programs]
    verdicts = iter(judge_programs([p for p, _ in jobs], [c for _, c in jobs], limits) if jobs else [])
    return [[next(verdicts).pass_rate for _ in t.programs] for t in trajectories]
