"""Model profiles: the architecture numbers that set FLOPs, weight bytes and KV bytes per token.

Values come from each model's public ``config.json`` on the Hugging Face Hub (parameter counts
from the model cards). Weights are BF16 (2 bytes per parameter) unless stated.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODELS", "ModelProfile", "get_model"]


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A decoder-only transformer, as much of it as the roofline needs.

    Attributes:
        name: Registry key and the served model name.
        params: Parameter count.
        num_layers: Transformer blocks.
        hidden_size: Model width.
        num_kv_heads: Key/value heads (grouped-query attention).
        head_dim: Per-head dimension.
        num_attention_heads: Query heads.
        dtype_bytes: Bytes per weight and per KV element.
        max_position_embeddings: Longest context the model supports.
    """

    name: str
    params: float
    num_layers: int
    hidden_size: int
    num_kv_heads: int
    head_dim: int
    num_attention_heads: int
    dtype_bytes: int = 2
    max_position_embeddings: int = 131072

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights read by every forward pass (all chips together)."""
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes of one token across all layers: 2 (K and V) x layers x kv_heads x dim."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes

    def attention_flops(self, query_tokens: float, context_tokens: float) -> float:
        """FLOPs of attention scores and weighted sum: 4 x layers x heads x dim x q x ctx."""
        return (
            4.0
            * self.num_layers
            * self.num_attention_heads
            * self.head_dim
            * query_tokens
            * context_tokens
        )


MODELS: dict[str, ModelProfile] = {
    # meta-llama/Llama-3.1-8B-Instruct config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads,
    # head_dim 128; 8.03B parameters (model card).
    "llama-3.1-8b": ModelProfile(
        name="llama-3.1-8b",
        params=8.03e9,
        num_layers=32,
        hidden_size=4096,
        num_kv_heads=8,
        head_dim=128,
        num_attention_heads=32,
    ),
    # Qwen/Qwen2.5-32B-Instruct config.json: 64 layers, hidden 5120, 40 heads, 8 KV heads,
    # head_dim 128; 32.8B parameters (model card).
    "qwen2.5-32b": ModelProfile(
        name="qwen2.5-32b",
        params=32.8e9,
        num_layers=64,
        hidden_size=5120,
        num_kv_heads=8,
        head_dim=128,
        num_attention_heads=40,
        max_position_embeddings=32768,
    ),
    # meta-llama/Llama-3.1-70B-Instruct config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    # head_dim 128; 70.6B parameters (model card).
    "llama-3.1-70b": ModelProfile(
        name="llama-3.1-70b",
        params=70.6e9,
        num_layers=80,
        hidden_size=8192,
        num_kv_heads=8,
        head_dim=128,
        num_attention_heads=64,
    ),
}


def get_model(name: str) -> ModelProfile:
    """Return the profile registered as ``name``.

    Raises:
        KeyError: No such profile (the message lists the known ones).
    """
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None
