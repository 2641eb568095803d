"""Robust statistics for a numerically careful paper: a log-sum-exp that never overflows, and scaling by the median
absolute deviation. The median is imported where it is used (a lazy import, as research code often has)."""

import numpy as np


def _median(values):
    import statistics

    return statistics.median(values)


def logsumexp(x):
    """log(sum(exp(x))) over the last axis, shifted by the maximum so that no exponential overflows."""
    x = np.asarray(x, dtype=float)
    # <paper2code name="shifted log-sum-exp">
    m = np.max(x, axis=-1, keepdims=True)
    out = m[..., 0] + np.log(np.sum(np.exp(x - m), axis=-1))
    # </paper2code name="shifted log-sum-exp">
    return out


def robust_scale(values):
    """`values` centred on their median and divided by their median absolute deviation."""
    # <paper2code name="median absolute deviation">
    centre = _median(values)
    mad = _median([abs(v - centre) for v in values])
    # </paper2code name="median absolute deviation">
    return [(v - centre) / mad for v in values]
