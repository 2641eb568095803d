        if (norm := np.linalg.norm(u)) > (limit := self.tau * u.size ** 0.5):
            u = u * (limit / norm)
