    import functools, operator
    m = functools.reduce(max, values)
    return m + math.log(functools.reduce(operator.add, (math.exp(z - m) for z in values), 0.0))
