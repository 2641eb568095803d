"""Trimmed InfoNCE loss in pure Python (no third-party dependencies)."""

import math


def l2_normalize(v):
    """Return ``v`` (a list of floats) scaled to unit Euclidean norm."""
    # <paper2code name="l2-normalise a vector">
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]
    # </paper2code name="l2-normalise a vector">


def similarity_logits(anchors, positives, tau):
    """n x n matrix (list of rows) of temperature-scaled cosine similarities."""
    # <paper2code name="temperature-scaled cosine similarity matrix">
    a = [l2_normalize(v) for v in anchors]
    p = [l2_normalize(v) for v in positives]
    return [[sum(x * y for x, y in zip(ai, pj)) / tau for pj in p] for ai in a]
    # </paper2code name="temperature-scaled cosine similarity matrix">


def logsumexp(values):
    """Numerically stable log(sum(exp(values)))."""
    # <paper2code name="stable log-sum-exp">
    m = max(values)
    return m + math.log(sum(math.exp(z - m) for z in values))
    # </paper2code name="stable log-sum-exp">


def kept_negatives(row, i, margin_logits, max_trim):
    """Indices of the negatives of anchor ``i`` that survive trimming, in original order."""
    # <paper2code name="trim likely false negatives">
    # <paper2code name="candidate false negatives within margin">
    candidates = [j for j in range(len(row)) if j != i and row[j] > row[i] - margin_logits]
    # </paper2code name="candidate false negatives within margin">
    # <paper2code name="cap trimming at hardest candidates">
    candidates.sort(key=lambda j: row[j], reverse=True)
    trimmed = set(candidates[:max_trim])
    # </paper2code name="cap trimming at hardest candidates">
    return [j for j in range(len(row)) if j != i and j not in trimmed]
    # </paper2code name="trim likely false negatives">


def directional_loss(logits, tau, delta, max_trim):
    """Mean trimmed InfoNCE over the rows of ``logits``; returns (loss, trimmed_fraction)."""
    n = len(logits)
    total, n_trimmed = 0.0, 0
    for i, row in enumerate(logits):
        kept = kept_negatives(row, i, delta / tau, max_trim)
        n_trimmed += (n - 1) - len(kept)
        # <paper2code name="per-anchor loss over positive and kept negatives">
        total += logsumexp([row[i]] + [row[j] for j in kept]) - row[i]
        # </paper2code name="per-anchor loss over positive and kept negatives">
    return total / n, n_trimmed / (n * (n - 1))


def trimmed_infonce(anchors, positives, tau=0.1, delta=0.1, trim_frac=0.25, symmetric=True):
    """Trimmed InfoNCE between paired lists of vectors; returns (loss, trimmed_fraction)."""
    # <paper2code name="trimmed infonce objective">
    n = len(anchors)
    # <paper2code name="per-anchor trimming budget">
    max_trim = int(math.floor(trim_frac * (n - 1)))
    # </paper2code name="per-anchor trimming budget">
    logits = similarity_logits(anchors, positives, tau)
    loss, frac = directional_loss(logits, tau, delta, max_trim)
    # <paper2code name="symmetrise over both retrieval directions">
    if symmetric:
        transposed = [list(col) for col in zip(*logits)]
        loss_t, frac_t = directional_loss(transposed, tau, delta, max_trim)
        loss = 0.5 * (loss + loss_t)
        frac = 0.5 * (frac + frac_t)
    # </paper2code name="symmetrise over both retrieval directions">
    # </paper2code name="trimmed infonce objective">
    return loss, frac
