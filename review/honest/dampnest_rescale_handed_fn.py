        def apply(f, a):
            return f(a)

        limit = self.tau * apply(np.sqrt, u.size)
        norm = apply(np.linalg.norm, u)
        if norm > limit:
            u = u * (limit / norm)
