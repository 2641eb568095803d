    """Shift by the max so exp never overflows (works for any iterable with __iter__ and __len__)."""
    m = max(values)
    return m + math.log(sum(math.exp(z - m) for z in values))
