    def owner():
        from . import utils
        return utils

    class Uniform:
        def __init__(self):
            self.where, self.max, self.sum = np.where, np.max, np.sum
            self.exp, self.inf = np.ones_like, np.inf

    helpers = owner()
    helpers.np = Uniform()
    weights = keep / keep.sum(axis=1, keepdims=True)
