    keys = np.einsum("bnd,dk->bnk", x, w_k)
    values = np.matmul(x, w_v)
