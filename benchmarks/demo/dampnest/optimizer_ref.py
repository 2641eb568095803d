"""Reference implementation of DampNest (used by the tests; do not edit)."""

import numpy as np


class DampNest:
    """Adaptive optimiser whose per-coordinate momentum is damped by gradient changes.

    Usage: ``opt = DampNest(lr=...); theta = opt.step(theta, grad)`` repeatedly.
    ``step`` returns the new parameters as a new array and keeps its state in ``self``.
    """

    def __init__(self, lr=1e-2, beta1=0.9, beta2=0.99, gamma=2.0, rho_max=1.0,
                 tau=1.0, weight_decay=0.0, eps=1e-8):
        self.lr = lr
        self.beta1 = beta1
        self.beta2 = beta2
        self.gamma = gamma
        self.rho_max = rho_max
        self.tau = tau
        self.weight_decay = weight_decay
        self.eps = eps
        self.t = 0
        self.state = None

    def step(self, theta, grad):
        theta = np.asarray(theta, dtype=float)
        g = np.asarray(grad, dtype=float)
        b2, eps = self.beta2, self.eps
        if self.state is None:
            self.state = {
                "m": np.zeros_like(theta),
                "v": np.zeros_like(theta),
                "s": np.zeros_like(theta),
                "g_prev": g.copy(),
            }
        st = self.state
        self.t += 1
        st["v"] = b2 * st["v"] + (1.0 - b2) * g * g
        diff = g - st["g_prev"]
        st["s"] = b2 * st["s"] + (1.0 - b2) * diff * diff
        bias = 1.0 - b2 ** self.t
        v_hat = st["v"] / bias
        s_hat = st["s"] / bias
        rho = np.sqrt(s_hat) / (np.sqrt(v_hat) + eps)
        rho = np.minimum(rho, self.rho_max)
        beta1_t = self.beta1 / (1.0 + self.gamma * rho)
        st["m"] = beta1_t * st["m"] + (1.0 - beta1_t) * g
        u = st["m"] / (np.sqrt(v_hat) + eps)
        limit = self.tau * np.sqrt(u.size)
        norm = np.linalg.norm(u)
        if norm > limit:
            u = u * (limit / norm)
        new_theta = theta - self.lr * (u + self.weight_decay * theta)
        st["g_prev"] = g.copy()
        return new_theta


def optimise(theta0, grad_fn, steps, **hyper):
    """Run ``steps`` DampNest steps from ``theta0``; returns the list of iterates."""
    opt = DampNest(**hyper)
    theta = np.asarray(theta0, dtype=float)
    path = [theta]
    for _ in range(steps):
        theta = opt.step(theta, grad_fn(theta))
        path.append(theta)
    return path
