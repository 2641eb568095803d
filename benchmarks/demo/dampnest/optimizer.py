"""DampNest: curvature-damped momentum optimiser (NumPy implementation)."""

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
        # <paper2code name="initialise optimiser state on first step">
        if self.state is None:
            self.state = {
                "m": np.zeros_like(theta),
                "v": np.zeros_like(theta),
                "s": np.zeros_like(theta),
                "g_prev": g.copy(),
            }
        # </paper2code name="initialise optimiser state on first step">
        st = self.state
        # <paper2code name="dampnest update rule">
        self.t += 1
        # <paper2code name="update gradient and gradient-difference moments">
        # <paper2code name="second moment of gradients">
        st["v"] = b2 * st["v"] + (1.0 - b2) * g * g
        # </paper2code name="second moment of gradients">
        diff = g - st["g_prev"]
        st["s"] = b2 * st["s"] + (1.0 - b2) * diff * diff
        # </paper2code name="update gradient and gradient-difference moments">
        # <paper2code name="bias-correct both moments">
        bias = 1.0 - b2 ** self.t
        v_hat = st["v"] / bias
        s_hat = st["s"] / bias
        # </paper2code name="bias-correct both moments">
        # <paper2code name="damping ratio and damped momentum coefficient">
        rho = np.sqrt(s_hat) / (np.sqrt(v_hat) + eps)
        # <paper2code name="clip damping ratio at rho_max">
        rho = np.minimum(rho, self.rho_max)
        # </paper2code name="clip damping ratio at rho_max">
        beta1_t = self.beta1 / (1.0 + self.gamma * rho)
        # </paper2code name="damping ratio and damped momentum coefficient">
        # <paper2code name="damped momentum buffer update">
        st["m"] = beta1_t * st["m"] + (1.0 - beta1_t) * g
        # </paper2code name="damped momentum buffer update">
        # <paper2code name="preconditioned direction with rms trust region">
        u = st["m"] / (np.sqrt(v_hat) + eps)
        # <paper2code name="rescale update exceeding trust radius">
        limit = self.tau * np.sqrt(u.size)
        norm = np.linalg.norm(u)
        if norm > limit:
            u = u * (limit / norm)
        # </paper2code name="rescale update exceeding trust radius">
        # </paper2code name="preconditioned direction with rms trust region">
        # <paper2code name="parameter step with decoupled weight decay">
        new_theta = theta - self.lr * (u + self.weight_decay * theta)
        # </paper2code name="parameter step with decoupled weight decay">
        # <paper2code name="remember gradient for next step">
        st["g_prev"] = g.copy()
        # </paper2code name="remember gradient for next step">
        # </paper2code name="dampnest update rule">
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
