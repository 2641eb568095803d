    norm = math.sqrt(math.fsum(map(lambda x: x * x, v)))
    return list(map(lambda x: x / norm, v))
