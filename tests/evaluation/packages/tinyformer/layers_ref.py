"""A tiny transformer block in numpy, written the way research code is (a torch-like Module, helpers, configs)."""

from __future__ import annotations

import logging
import math
import warnings
from collections import defaultdict, namedtuple
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

logger = logging.getLogger(__name__)
Shape = namedtuple("Shape", "batch tokens width")


@dataclass
class BlockConfig:
    width: int = 8
    heads: int = 2
    dropout: float = 0.0
    eps: float = 1e-5
    extra: dict = field(default_factory=dict)


class Module:
    """The torch.nn.Module calling convention, enough for the block below."""

    def __init__(self):
        self.training = False
        self._buffers: dict[str, np.ndarray] = {}

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def register_buffer(self, name: str, value: np.ndarray) -> None:
        self._buffers[name] = value
        setattr(self, name, value)


@lru_cache(maxsize=8)
def causal_mask(tokens: int) -> np.ndarray:
    return np.triu(np.ones((tokens, tokens), dtype=bool), k=1)


class LayerNorm(Module):
    def __init__(self, width: int, eps: float = 1e-5):
        super().__init__()
        self.weight = np.ones(width)
        self.bias = np.zeros(width)
        self.eps = eps

    def forward(self, x: np.ndarray) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        normed = (x - mean) / np.sqrt(var + self.eps)
        return normed * self.weight + self.bias


class Attention(Module):
    def __init__(self, config: BlockConfig, rng: np.random.Generator):
        super().__init__()
        self.config = config
        scale = 1.0 / math.sqrt(config.width)
        self.w_qkv = rng.normal(scale=scale, size=(config.width, 3 * config.width))
        self.w_out = rng.normal(scale=scale, size=(config.width, config.width))
        self.register_buffer("mask", causal_mask(16))

    def split_heads(self, x: np.ndarray) -> np.ndarray:
        shape = Shape(*x.shape)
        head = shape.width // self.config.heads
        return x.reshape(shape.batch, shape.tokens, self.config.heads, head).transpose(0, 2, 1, 3)

    def forward(self, x: np.ndarray) -> np.ndarray:
        batch, tokens, width = x.shape
        if tokens > self.mask.shape[0]:
            warnings.warn(f"sequence of {tokens} tokens is longer than the mask; recomputing", stacklevel=2)
        q, k, v = (self.split_heads(part) for part in np.split(x @ self.w_qkv, 3, axis=-1))
        scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        mask = causal_mask(tokens)
        scores = np.where(mask[None, None], -np.inf, scores)
        scores = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        logger.debug("attention entropy %.3f", float(-(weights * np.log(weights + 1e-12)).sum(-1).mean()))
        out = np.einsum("bhqk,bhkd->bhqd", weights, v).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        return out @ self.w_out


class Block(Module):
    def __init__(self, config: BlockConfig, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.config = config
        self.norm1, self.norm2 = LayerNorm(config.width, config.eps), LayerNorm(config.width, config.eps)
        self.attn = Attention(config, rng)
        self.w1 = rng.normal(scale=0.3, size=(config.width, 4 * config.width))
        self.w2 = rng.normal(scale=0.3, size=(4 * config.width, config.width))
        self.stats: defaultdict[str, list[float]] = defaultdict(list)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = x + self.attn(self.norm1(x))
        hidden = self.norm2(x) @ self.w1
        hidden = 0.5 * hidden * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        for name, value in {"residual": float(np.abs(x).mean()), "hidden": float(hidden.std())}.items():
            self.stats[name].append(value)
        summary = ", ".join(f"{name}={values[-1]:.3f}" for name, values in sorted(self.stats.items()))
        logger.info("block stats: %s", summary)
        try:
            out = x + hidden @ self.w2
        except ValueError as exc:
            raise ValueError(f"shape mismatch in the feed-forward: {exc}") from exc
        return out


def top_tokens(logits: np.ndarray, k: int = 3) -> list[list[int]]:
    order = np.argsort(-logits, axis=-1, kind="stable")
    picked = [[int(i) for i in row[:k] if np.isfinite(logits[r, i])] for r, row in enumerate(order)]
    return list(map(lambda ids: list(ids), picked))
