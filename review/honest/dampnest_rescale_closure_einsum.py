        def rms_cap(vec, radius):
            length = np.sqrt(np.einsum("i,i->", vec, vec))
            return vec * (radius / length) if length > radius else vec

        u = rms_cap(u, self.tau * np.sqrt(u.size))
