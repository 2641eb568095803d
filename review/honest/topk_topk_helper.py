    k_eff = np.minimum(k, n_valid)
    kth = lambda row, kk: np.sort(row)[row.shape[0] - kk]
    thresh = np.array([kth(r, kk) for r, kk in zip(scores, k_eff)])[:, None]
    keep = mask & (scores >= thresh)
