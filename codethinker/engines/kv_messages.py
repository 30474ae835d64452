"""The messages of a KV cache the machine cannot give, in terms of the params (:class:`KVParamNames`).

:func:`shortfall_message` and :func:`too_small_message` say what to change;
:func:`parse_vllm_kv_error` reads the numbers out of vLLM's own error text (:class:`KVShortfall`);
:func:`exception_text` joins an exception and its causes (vLLM wraps its worker's error). Sizing the
cache, and deciding which message applies, is :mod:`codethinker.engines.kv_cache`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "KVParamNames",
    "KVShortfall",
    "exception_text",
    "parse_vllm_kv_error",
    "shortfall_message",
    "too_small_message",
]


@dataclass(frozen=True)
class KVParamNames:
    """The params a KV-cache message names: the size, and the knobs whose lowering shrinks it."""

    size: str = "kv_cache_gib"
    lower: tuple[str, ...] = ("max_num_seqs", "max_model_len")
    max_model_len: str = "max_model_len"

    @classmethod
    def under(cls, section: str) -> KVParamNames:
        """Names of one engine section: ``under("evaluate.engine")`` -> ``evaluate.engine.kv_cache_gib``, ..."""
        return cls(
            f"{section}.kv_cache_gib",
            (f"{section}.max_num_seqs", f"{section}.max_model_len"),
            f"{section}.max_model_len",
        )


@dataclass(frozen=True)
class KVShortfall:
    """Numbers of a vLLM CPU memory error (GiB; ``requested`` < 0: the share did not cover the model)."""

    node: int
    available_gib: float
    total_gib: float
    requested_gib: float
    kind: str  # "kv" (allocation of the KV cache) | "startup" (the share, checked at start) | "max_len"
    text: str  # the sentence of vLLM's message it was read from


_NUM = r"(-?\d+(?:\.\d+)?)"
_NODE_ERROR = re.compile(
    rf"Available memory on node (\d+) \({_NUM}/{_NUM} GiB\) on (kv cache allocation|startup) is less than "
    rf"(?:requested memory for kv \((?:{_NUM}/)?{_NUM} GiB\)|desired CPU memory utilization \([^,]*, {_NUM} GiB\))"
)
_MAX_LEN_ERROR = re.compile(
    rf"To serve at least one request with the model's max seq len \((\d+)\), \({_NUM} GiB KV cache is needed, "
    rf"which is larger than the available KV cache memory \({_NUM} GiB\)"
)


def parse_vllm_kv_error(text: str) -> KVShortfall | None:
    """The last KV-memory error of vLLM's CPU build in ``text`` (an exception, a log), or None.

    >>> s = parse_vllm_kv_error("ValueError: Available memory on node 0 (11.46/13.96 GiB) on kv cache "
    ...                         "allocation is less than requested memory for kv (-0.37/0.7 GiB).")
    >>> (s.node, s.available_gib, s.total_gib, s.requested_gib, s.kind)
    (0, 11.46, 13.96, -0.37, 'kv')
    """
    found: list[tuple[int, KVShortfall]] = []
    for m in _NODE_ERROR.finditer(text):
        node, avail, total, where, kv_part, kv_total, share_total = m.groups()
        if where == "startup":
            requested, kind = float(share_total), "startup"
        else:
            requested, kind = float(kv_part if kv_part is not None else kv_total), "kv"
        found.append((m.start(), KVShortfall(int(node), float(avail), float(total), requested, kind, m.group(0))))
    for m in _MAX_LEN_ERROR.finditer(text):
        _, needed, available = m.groups()
        found.append(
            (m.start(), KVShortfall(-1, float(available), float(available), float(needed), "max_len", m.group(0)))
        )
    return max(found, key=lambda x: x[0])[1] if found else None


def _gib(x: float) -> str:
    return f"{x:.2f}"


def _setting(names: KVParamNames, setting: float | str | None, requested_gib: float | None) -> str:
    if setting == "auto" and requested_gib is not None:
        return f"{names.size}=auto ({_gib(requested_gib)} GiB)"
    return f"{names.size}={'null' if setting is None else setting}"


def shortfall_message(
    names: KVParamNames,
    setting: float | str | None,
    requested_gib: float | None,
    *,
    node: int,
    available_gib: float,
    total_gib: float,
    vllm_text: str | None = None,
    gpu_memory_utilization: float | None = None,
    weights_gib: float = 0.0,
) -> str:
    """What to change when the machine cannot give the KV cache (or vLLM's share came out too small).

    >>> shortfall_message(KVParamNames.under("evaluate.engine"), "auto", 2.5, node=0, available_gib=1.2,
    ...                   total_gib=13.96)  # doctest: +NORMALIZE_WHITESPACE
    'evaluate.engine.kv_cache_gib=auto (2.50 GiB) needs 2.50 GiB of KV cache, the machine has 1.20 GiB free
    (of 13.96 GiB) on NUMA node 0; lower evaluate.engine.max_num_seqs or evaluate.engine.max_model_len,
    or set evaluate.engine.kv_cache_gib to fewer GiB, or free memory on that node.'
    """
    lower = " or ".join(names.lower)
    where = f"on NUMA node {node}" if node >= 0 else "for vLLM"
    if setting is None:  # vLLM sized it as a share of the node's memory
        share = "" if gpu_memory_utilization is None else f"gpu_memory_utilization={gpu_memory_utilization} "
        msg = (
            f"{names.size}=null leaves the KV cache to vLLM's {share}share of the node's memory, which came to "
            f"{_gib(requested_gib or 0.0)} GiB for the KV cache; the machine has {_gib(available_gib)} GiB free "
            f"(of {_gib(total_gib)} GiB) {where}; set {names.size} to auto or a number of GiB."
        )
    else:
        weights = f" (and {_gib(weights_gib)} GiB for the weights)" if weights_gib > 0 else ""
        msg = (
            f"{_setting(names, setting, requested_gib)} needs {_gib(requested_gib or 0.0)} GiB of KV cache{weights}, "
            f"the machine has {_gib(available_gib)} GiB free (of {_gib(total_gib)} GiB) {where}; lower {lower}, "
            f"or set {names.size} to fewer GiB, or free memory on that node."
        )
    return msg + (f" (vLLM: {vllm_text})" if vllm_text else "")


def too_small_message(
    names: KVParamNames, setting: float | str | None, requested_gib: float, needed_gib: float, max_model_len: int
) -> str:
    """A KV cache too small for one sequence of ``max_model_len`` tokens (vLLM refuses to start).

    >>> names = KVParamNames.under("evaluate.engine")
    >>> too_small_message(names, 0.01, 0.01, 0.5, 4096)  # doctest: +NORMALIZE_WHITESPACE
    'evaluate.engine.kv_cache_gib=0.01 is less than one sequence of evaluate.engine.max_model_len=4096 tokens
    needs (0.50 GiB); raise evaluate.engine.kv_cache_gib or lower evaluate.engine.max_model_len.'
    """
    return (
        f"{_setting(names, setting, requested_gib)} is less than one sequence of {names.max_model_len}="
        f"{max_model_len} tokens needs ({_gib(needed_gib)} GiB); raise {names.size} or lower {names.max_model_len}."
    )


def exception_text(exc: BaseException) -> str:
    """An exception and its causes, one per line (vLLM wraps the worker's error)."""
    parts, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return "\n".join(parts)
