    a = list(map(l2_normalize, anchors))
    p = list(map(l2_normalize, positives))
    return [[sum(x * y for x, y in zip(ai, pj)) / tau for pj in p] for ai in a]
