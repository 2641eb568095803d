"""Equivalence tests of Muon: the annotated muon.py must do what the published muon_ref.py does, on the CPU.

Newton-Schulz runs in bfloat16, so outputs are compared within bfloat16's resolution (RTOL and ATOL below:
a few units of its 8-bit mantissa after five iterations), while shapes, dtypes and step counters must be equal.
Each input is made once and cloned for both sides: every function here updates its arguments in place.
"""

import unittest

import torch

import muon
import muon_ref

RTOL = 2e-2  # bfloat16 keeps 8 significant bits (2**-8 ~ 4e-3); five iterations of matrix products add a few units
ATOL = 2e-2
FLOAT_RTOL = 1e-5  # the float32 paths (momentum, Adam) only see rounding of the order of float32's epsilon
FLOAT_ATOL = 1e-7


def randn(*shape, seed, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * scale


def assert_close(test, got, want, rtol=RTOL, atol=ATOL, what=""):
    test.assertEqual(got.shape, want.shape, what)
    test.assertEqual(got.dtype, want.dtype, what)
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


class TestNewtonSchulz(unittest.TestCase):
    SHAPES = [(16, 16), (8, 24), (24, 8), (3, 12, 5), (2, 5, 12)]

    def test_matches_reference_on_square_wide_tall_and_batched_matrices(self):
        for seed, shape in enumerate(self.SHAPES):
            for steps in (1, 5):
                with self.subTest(shape=shape, steps=steps):
                    G = randn(*shape, seed=seed)
                    got = muon.zeropower_via_newtonschulz5(G.clone(), steps=steps)
                    want = muon_ref.zeropower_via_newtonschulz5(G.clone(), steps=steps)
                    self.assertEqual(got.dtype, torch.bfloat16)
                    assert_close(self, got, want, what=f"shape {shape}")

    def test_output_is_nearly_orthogonal(self):
        # US'V^T with S' roughly in [0.5, 1.5]: the singular values of the result stay in a loose band around one
        for shape in ((32, 32), (16, 48), (48, 16)):
            with self.subTest(shape=shape):
                X = muon.zeropower_via_newtonschulz5(randn(*shape, seed=7), steps=5).float()
                singular = torch.linalg.svdvals(X)
                self.assertGreater(singular.min().item(), 0.3)
                self.assertLess(singular.max().item(), 1.6)

    def test_tiny_matrices_keep_the_normalizing_epsilon(self):
        # at a Frobenius norm of the order of 1e-7 the epsilon decides the scale of the first iterate
        for scale in (3e-8, 1e-7, 4e-7):
            with self.subTest(scale=scale):
                G = randn(6, 10, seed=3, scale=scale)
                for steps in (0, 1, 2):
                    got = muon.zeropower_via_newtonschulz5(G.clone(), steps=steps)
                    want = muon_ref.zeropower_via_newtonschulz5(G.clone(), steps=steps)
                    assert_close(self, got, want, what=f"steps {steps}")

    def test_input_is_left_unchanged(self):
        G = randn(12, 7, seed=11)
        before = G.clone()
        muon.zeropower_via_newtonschulz5(G, steps=5)
        torch.testing.assert_close(G, before, rtol=0, atol=0)


class TestMuonUpdate(unittest.TestCase):
    def run_both(self, shape, seed, steps=3, **kwargs):
        """A few updates of the same momentum buffer by each side; returns (side, updates, grads, momentum)."""
        grads = [randn(*shape, seed=seed + i) for i in range(steps)]
        results = {}
        for name, module in (("got", muon), ("want", muon_ref)):
            momentum = torch.zeros(shape)
            updates, seen = [], []
            for grad in grads:
                grad = grad.clone()
                updates.append(module.muon_update(grad, momentum, **kwargs))
                seen.append(grad)  # Nesterov interpolates into the gradient in place
            results[name] = (updates, seen, momentum)
        return results["got"], results["want"]

    def check(self, got, want):
        for i, (a, b) in enumerate(zip(got[0], want[0])):
            assert_close(self, a, b, what=f"update {i}")
        for i, (a, b) in enumerate(zip(got[1], want[1])):
            assert_close(self, a, b, rtol=FLOAT_RTOL, atol=FLOAT_ATOL, what=f"gradient {i} after the call")
        assert_close(self, got[2], want[2], rtol=FLOAT_RTOL, atol=FLOAT_ATOL, what="momentum buffer")

    def test_matrices(self):
        for seed, shape in enumerate([(16, 16), (8, 32), (32, 8), (48, 12)]):
            with self.subTest(shape=shape):
                self.check(*self.run_both(shape, seed=10 * seed))

    def test_convolution_filters_are_flattened(self):
        # a 4-D filter bank is orthogonalized as (out, in*kh*kw); its scale factor uses the last two sizes (kh, kw)
        for shape in ((8, 3, 3, 3), (6, 2, 5, 2), (4, 2, 6, 3)):
            with self.subTest(shape=shape):
                got, want = self.run_both(shape, seed=5)
                self.assertEqual(got[0][0].shape, (shape[0], shape[1] * shape[2] * shape[3]))
                self.check(got, want)

    def test_plain_momentum_and_other_beta(self):
        for kwargs in (dict(nesterov=False), dict(beta=0.8), dict(beta=0.5, nesterov=False), dict(ns_steps=2)):
            with self.subTest(**kwargs):
                self.check(*self.run_both((12, 20), seed=3, **kwargs))


class TestAdamUpdate(unittest.TestCase):
    def run_both(self, shape, seed, steps=4, betas=(0.9, 0.95), eps=1e-10, scale=1.0):
        grads = [randn(*shape, seed=seed + i, scale=scale) for i in range(steps)]
        out = []
        for module in (muon, muon_ref):
            buf1, buf2 = torch.zeros(shape), torch.zeros(shape)
            updates = [module.adam_update(g.clone(), buf1, buf2, step, betas, eps) for step, g in enumerate(grads, 1)]
            out.append((updates, buf1, buf2))
        return out

    def check(self, got, want):
        for i, (a, b) in enumerate(zip(got[0], want[0])):
            assert_close(self, a, b, rtol=1e-4, atol=1e-6, what=f"direction at step {i + 1}")
        assert_close(self, got[1], want[1], rtol=FLOAT_RTOL, atol=FLOAT_ATOL, what="first moment")
        assert_close(self, got[2], want[2], rtol=FLOAT_RTOL, atol=FLOAT_ATOL, what="second moment")

    def test_matches_reference(self):
        for betas in ((0.9, 0.95), (0.8, 0.99), (0.5, 0.7)):
            with self.subTest(betas=betas):
                self.check(*self.run_both((7, 5), seed=21, betas=betas))

    def test_epsilon_counts_for_small_gradients(self):
        for eps in (1e-3, 1e-8):
            with self.subTest(eps=eps):
                self.check(*self.run_both((9,), seed=2, eps=eps, scale=1e-3))

    def test_first_step_is_a_sign_like_step(self):
        # bias correction makes the first direction g / (|g| + eps): about +-1 per coordinate
        g = torch.tensor([3.0, -0.5, 0.25, -2.0])
        direction = muon.adam_update(g, torch.zeros(4), torch.zeros(4), 1, (0.9, 0.95), 1e-10)
        torch.testing.assert_close(direction, torch.sign(g), rtol=1e-5, atol=1e-6)


def small_network(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(6 * 4 * 4, 24),
        torch.nn.ReLU(),
        torch.nn.Linear(24, 5),
    )


def train(module, optimizer_name, steps=4, **group_options):
    """Train a fixed small network on fixed data with the module's optimizer; every parameter and state at the end."""
    net = small_network(0)
    # muon-optimizer 0.1.0 applies a filter bank's flattened update to the 4-D weight itself, which fails: as its
    # README says for the first convolution, the filters go to Adam here, and only the 2-D hidden weights to Muon
    hidden = [p for p in net.parameters() if p.ndim == 2]
    other = [p for p in net.parameters() if p.ndim != 2]
    if optimizer_name == "SingleDeviceMuon":
        optimizer = module.SingleDeviceMuon(hidden, **group_options.get("muon", {}))
    else:
        groups = [
            dict(params=hidden, use_muon=True, **group_options.get("muon", {})),
            dict(params=other, use_muon=False, **group_options.get("adam", {})),
        ]
        optimizer = module.SingleDeviceMuonWithAuxAdam(groups)
    inputs, targets = randn(8, 3, 4, 4, seed=100), torch.arange(8) % 5
    for _ in range(steps):
        net.zero_grad()
        torch.nn.functional.cross_entropy(net(inputs), targets).backward()
        optimizer.step()
    states = [optimizer.state[p] for p in net.parameters()]
    return list(net.parameters()), states


class TestOptimizers(unittest.TestCase):
    def check(self, optimizer_name, **group_options):
        got_params, got_states = train(muon, optimizer_name, **group_options)
        want_params, want_states = train(muon_ref, optimizer_name, **group_options)
        for i, (a, b) in enumerate(zip(got_params, want_params)):
            assert_close(self, a.detach(), b.detach(), rtol=1e-3, atol=1e-4, what=f"parameter {i}")
        for i, (a, b) in enumerate(zip(got_states, want_states)):
            self.assertEqual(sorted(a), sorted(b), f"state keys of parameter {i}")
            for key in b:
                if isinstance(b[key], torch.Tensor):
                    assert_close(self, a[key], b[key], rtol=1e-3, atol=1e-4, what=f"state {key} of parameter {i}")
                else:
                    self.assertEqual(a[key], b[key], f"state {key} of parameter {i}")

    def test_muon_with_auxiliary_adam(self):
        self.check("SingleDeviceMuonWithAuxAdam")

    def test_weight_decay_and_other_hyperparameters(self):
        self.check(
            "SingleDeviceMuonWithAuxAdam",
            muon=dict(lr=0.05, momentum=0.9, weight_decay=0.1),
            adam=dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05),
        )

    def test_single_device_muon(self):
        self.check("SingleDeviceMuon", muon=dict(lr=0.03, weight_decay=0.02))

    def test_adam_step_counter_counts_steps(self):
        _, states = train(muon, "SingleDeviceMuonWithAuxAdam", steps=3)
        counters = [state["step"] for state in states if "step" in state]
        self.assertTrue(counters)
        self.assertEqual(set(counters), {3})


if __name__ == "__main__":
    unittest.main()
