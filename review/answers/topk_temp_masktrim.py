    mask &= np.cumsum(mask, axis=1) <= k
    n_valid = mask.sum(axis=1)
    tau = tau0 + 0.0 * n_valid
