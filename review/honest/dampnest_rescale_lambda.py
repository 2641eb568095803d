        shrink = lambda n, l: l / n if n > l else 1.0
        u = u * shrink(np.linalg.norm(u), self.tau * np.sqrt(u.size))
