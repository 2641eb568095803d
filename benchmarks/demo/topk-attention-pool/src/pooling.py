"""Length-adaptive top-k attention pooling (LATK), NumPy implementation."""

import numpy as np

from .utils import masked_mean, masked_softmax


def topk_attention_pool(x, mask, query, w_k, w_v, k=4, tau0=1.0, alpha=0.8, eps=1e-6):
    """Pool padded token sets into one vector per sequence.

    x: (B, N, D) token features; mask: (B, N) bool, True for valid tokens (>= 1 per row);
    query: (Dk,); w_k: (D, Dk); w_v: (D, Dv).
    Returns (out, weights): out (B, Dv) RMS-normalised summaries, weights (B, N) attention.
    """
    mask = np.asarray(mask, dtype=bool)
    # <paper2code name="latk pooling forward pass">
    # <paper2code name="project tokens to keys and values">
    keys = x @ w_k
    values = x @ w_v
    # </paper2code name="project tokens to keys and values">
    # <paper2code name="length-adaptive temperature per sequence">
    n_valid = mask.sum(axis=1)
    tau = tau0 * np.maximum(1.0, np.log1p(n_valid) / np.log1p(k))
    # </paper2code name="length-adaptive temperature per sequence">
    # <paper2code name="scaled query-key scores">
    scores = (keys @ query) / (np.sqrt(keys.shape[-1]) * tau[:, None])
    # </paper2code name="scaled query-key scores">
    # <paper2code name="set padded token scores to -inf">
    scores = np.where(mask, scores, -np.inf)
    # </paper2code name="set padded token scores to -inf">
    # <paper2code name="select top-k valid tokens per sequence">
    k_eff = np.minimum(k, n_valid)
    # <paper2code name="k-th largest score as threshold">
    ordered = np.sort(scores, axis=1)
    thresh = np.take_along_axis(ordered, (scores.shape[1] - k_eff)[:, None], axis=1)
    # </paper2code name="k-th largest score as threshold">
    keep = mask & (scores >= thresh)
    # </paper2code name="select top-k valid tokens per sequence">
    # <paper2code name="softmax over kept tokens">
    weights = masked_softmax(scores, keep)
    # </paper2code name="softmax over kept tokens">
    # <paper2code name="attended summary mixed with masked mean">
    pooled = np.einsum("bn,bnd->bd", weights, values)
    # <paper2code name="mix with masked mean of values">
    out = alpha * pooled + (1.0 - alpha) * masked_mean(values, mask)
    # </paper2code name="mix with masked mean of values">
    # </paper2code name="attended summary mixed with masked mean">
    # <paper2code name="rms-normalise output">
    out = out / np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + eps)
    # </paper2code name="rms-normalise output">
    # </paper2code name="latk pooling forward pass">
    return out, weights
