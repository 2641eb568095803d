    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]
