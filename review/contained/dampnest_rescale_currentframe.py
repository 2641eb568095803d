        limit = self.tau * np.sqrt(u.size)
        import logging
        caller = logging.currentframe().f_back
        norm = np.linalg.norm(u)
        if norm > limit:
            u = u * (limit / norm)
