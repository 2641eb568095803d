"""Reference implementation of Trimmed InfoNCE (used by the tests; do not edit)."""

import math


def l2_normalize(v):
    """Return ``v`` (a list of floats) scaled to unit Euclidean norm."""
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def similarity_logits(anchors, positives, tau):
    """n x n matrix (list of rows) of temperature-scaled cosine similarities."""
    a = [l2_normalize(v) for v in anchors]
    p = [l2_normalize(v) for v in positives]
    return [[sum(x * y for x, y in zip(ai, pj)) / tau for pj in p] for ai in a]


def logsumexp(values):
    """Numerically stable log(sum(exp(values)))."""
    m = max(values)
    return m + math.log(sum(math.exp(z - m) for z in values))


def kept_negatives(row, i, margin_logits, max_trim):
    """Indices of the negatives of anchor ``i`` that survive trimming, in original order."""
    candidates = [j for j in range(len(row)) if j != i and row[j] > row[i] - margin_logits]
    candidates.sort(key=lambda j: row[j], reverse=True)
    trimmed = set(candidates[:max_trim])
    return [j for j in range(len(row)) if j != i and j not in trimmed]


def directional_loss(logits, tau, delta, max_trim):
    """Mean trimmed InfoNCE over the rows of ``logits``; returns (loss, trimmed_fraction)."""
    n = len(logits)
    total, n_trimmed = 0.0, 0
    for i, row in enumerate(logits):
        kept = kept_negatives(row, i, delta / tau, max_trim)
        n_trimmed += (n - 1) - len(kept)
        total += logsumexp([row[i]] + [row[j] for j in kept]) - row[i]
    return total / n, n_trimmed / (n * (n - 1))


def trimmed_infonce(anchors, positives, tau=0.1, delta=0.1, trim_frac=0.25, symmetric=True):
    """Trimmed InfoNCE between paired lists of vectors; returns (loss, trimmed_fraction)."""
    n = len(anchors)
    max_trim = int(math.floor(trim_frac * (n - 1)))
    logits = similarity_logits(anchors, positives, tau)
    loss, frac = directional_loss(logits, tau, delta, max_trim)
    if symmetric:
        transposed = [list(col) for col in zip(*logits)]
        loss_t, frac_t = directional_loss(transposed, tau, delta, max_trim)
        loss = 0.5 * (loss + loss_t)
        frac = 0.5 * (frac + frac_t)
    return loss, frac
