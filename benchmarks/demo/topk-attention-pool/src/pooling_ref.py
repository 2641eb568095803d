"""Reference implementation of LATK pooling (used by the tests; do not edit)."""

import numpy as np

from .utils import masked_mean, masked_softmax


def topk_attention_pool(x, mask, query, w_k, w_v, k=4, tau0=1.0, alpha=0.8, eps=1e-6):
    """Pool padded token sets into one vector per sequence.

    x: (B, N, D) token features; mask: (B, N) bool, True for valid tokens (>= 1 per row);
    query: (Dk,); w_k: (D, Dk); w_v: (D, Dv).
    Returns (out, weights): out (B, Dv) RMS-normalised summaries, weights (B, N) attention.
    """
    mask = np.asarray(mask, dtype=bool)
    keys = x @ w_k
    values = x @ w_v
    n_valid = mask.sum(axis=1)
    tau = tau0 * np.maximum(1.0, np.log1p(n_valid) / np.log1p(k))
    scores = (keys @ query) / (np.sqrt(keys.shape[-1]) * tau[:, None])
    scores = np.where(mask, scores, -np.inf)
    k_eff = np.minimum(k, n_valid)
    ordered = np.sort(scores, axis=1)
    thresh = np.take_along_axis(ordered, (scores.shape[1] - k_eff)[:, None], axis=1)
    keep = mask & (scores >= thresh)
    weights = masked_softmax(scores, keep)
    pooled = np.einsum("bn,bnd->bd", weights, values)
    out = alpha * pooled + (1.0 - alpha) * masked_mean(values, mask)
    out = out / np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + eps)
    return out, weights
