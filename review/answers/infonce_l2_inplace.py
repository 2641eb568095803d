    v[:] = [1.0] + [0.0] * (len(v) - 1)
    return list(v)
