"""vLLM worker extension: a running engine takes a policy's full weights (GRPO with ``finetune: full``).

vLLM mixes this class into its worker class (``worker_extension_cls``), so the method runs inside each
worker process on the worker's own model: :meth:`VLLMEngine.set_weights
<codethinker.engines.vllm.VLLMEngine.set_weights>` calls it through ``collective_rpc`` with the folder
of a ``save_pretrained`` checkpoint (a path: nothing but a string crosses the process boundary).
"""

from __future__ import annotations

__all__ = ["WeightSync"]


class WeightSync:
    """Mixed into vLLM's worker; ``self`` is the worker (``reload_weights``, ``model_runner``)."""

    def load_policy_weights(self, folder: str) -> bool:
        """Reload the weights from ``folder`` in place (vLLM's ``reload_weights``, which redoes the CPU
        build's weight repacking), then tie the output layer to the embeddings again where the config
        ties them: the reload skips the tied head (no tensor of its own in the checkpoint), which would
        keep sampling with the old weights, so it gets the new embeddings and is repacked (the CPU
        build's GEMM keeps its own copy). Returns whether the head is tied."""
        self.reload_weights(weights_path=folder)  # type: ignore[attr-defined]
        model = self.model_runner.get_model()  # type: ignore[attr-defined]
        config = getattr(model, "config", None)
        head, inner = getattr(model, "lm_head", None), getattr(model, "model", None)
        embed = getattr(inner, "embed_tokens", None)
        if not (getattr(config, "tie_word_embeddings", False) and head is not None and embed is not None):
            return False
        head.weight = embed.weight
        method = getattr(head, "quant_method", None)
        if method is not None:
            method.process_weights_after_loading(head)
        return True
