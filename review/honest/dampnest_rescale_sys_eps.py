        import sys
        limit = self.tau * np.sqrt(u.size)
        norm = np.linalg.norm(u)
        if norm > limit + sys.float_info.epsilon * 0:
            u = u * (limit / norm)
