    candidates = [j for j, s in enumerate(row) if j != i and s > row[i] - margin_logits]
    trimmed = set(sorted(candidates, key=row.__getitem__, reverse=True)[:max_trim])
    return [j for j in range(len(row)) if j != i and j not in trimmed]
