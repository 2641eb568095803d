        st["v"] *= b2
        st["v"] += (1.0 - b2) * np.square(g)
        diff = np.subtract(g, st["g_prev"])
        st["s"] = b2 * st["s"] + (1.0 - b2) * diff ** 2
