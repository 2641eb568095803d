"""Tests for DampNest: the annotated implementation must match the reference exactly."""

import unittest

import numpy as np

import optimizer
import optimizer_ref

SEEDS = [0, 1, 2, 7, 42]
HYPER = dict(lr=0.05, beta1=0.9, beta2=0.95, gamma=2.0, rho_max=1.0,
             tau=0.05, weight_decay=0.05, eps=1e-8)


def run_fixed_gradients(module, seed, steps=6, **overrides):
    """Feed a fixed sequence of random gradients; return every iterate and the final state."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=12)
    grads = rng.normal(size=(steps, 12)) * rng.uniform(0.1, 3.0, size=12)
    opt = module.DampNest(**dict(HYPER, **overrides))
    path = [theta]
    for g in grads:
        theta = opt.step(theta, g)
        path.append(theta)
    return np.array(path), opt


def quadratic_grad_fn(seed):
    rng = np.random.default_rng(1000 + seed)
    diag = np.logspace(-1, 2, 8)
    noise = rng.normal(size=(50, 8))
    counter = {"i": 0}

    def grad(theta):
        i = counter["i"]
        counter["i"] += 1
        return diag * theta + noise[i % len(noise)]

    return grad


class TestDampNest(unittest.TestCase):
    def test_fixed_gradient_trajectories_match_reference(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                got, opt = run_fixed_gradients(optimizer, seed)
                want, opt_ref = run_fixed_gradients(optimizer_ref, seed)
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
                self.assertEqual(opt.t, opt_ref.t)
                for key in ("m", "v", "s", "g_prev"):
                    np.testing.assert_allclose(opt.state[key], opt_ref.state[key],
                                               rtol=1e-10, atol=1e-12, err_msg=key)

    def test_loose_trust_region_and_no_damping_clip(self):
        # a different regime: trust region inactive, strong damping, no weight decay
        for seed in SEEDS:
            with self.subTest(seed=seed):
                over = dict(tau=10.0, rho_max=5.0, gamma=4.0, weight_decay=0.0)
                got, _ = run_fixed_gradients(optimizer, seed, steps=5, **over)
                want, _ = run_fixed_gradients(optimizer_ref, seed, steps=5, **over)
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

    def test_noisy_quadratic_optimisation_matches_reference(self):
        for seed in SEEDS[:3]:
            with self.subTest(seed=seed):
                theta0 = np.random.default_rng(seed).normal(size=8) * 3.0
                got = optimizer.optimise(theta0, quadratic_grad_fn(seed), 20, **HYPER)
                want = optimizer_ref.optimise(theta0, quadratic_grad_fn(seed), 20, **HYPER)
                np.testing.assert_allclose(np.array(got), np.array(want),
                                           rtol=1e-10, atol=1e-12)

    def test_first_step_is_clipped_sign_like_update(self):
        # at t=1 the gradient difference is zero, so rho=0 and u = (1-beta1) * sign(g)
        g = np.array([3.0, -0.5, 0.25, -2.0])
        opt = optimizer.DampNest(lr=1.0, beta1=0.9, tau=1.0)
        new = opt.step(np.zeros(4), g)
        np.testing.assert_allclose(new, -0.1 * np.sign(g), rtol=1e-6)


if __name__ == "__main__":
    unittest.main()
