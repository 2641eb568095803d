"""Small NumPy helpers shared by the pooling layer."""

import numpy as np


def masked_softmax(scores, keep, axis=-1):
    """Softmax of ``scores`` along ``axis`` restricted to entries where ``keep`` is True.

    Entries with ``keep == False`` get exactly zero weight; scores there may be -inf.
    Every slice along ``axis`` must contain at least one kept, finite score.
    """
    safe = np.where(keep, scores, -np.inf)
    top = np.max(safe, axis=axis, keepdims=True)
    e = np.where(keep, np.exp(safe - top), 0.0)
    return e / np.sum(e, axis=axis, keepdims=True)


def masked_mean(values, mask):
    """Mean of ``values`` (B, N, D) over the tokens where ``mask`` (B, N) is True -> (B, D)."""
    w = mask.astype(values.dtype)[..., None]
    return np.sum(values * w, axis=1) / np.sum(w, axis=1)
