"""Tests for LATK pooling: the annotated layer must match the reference layer."""

import unittest

import numpy as np

from src import pooling, pooling_ref

SEEDS = [0, 3, 11, 2024]
LENGTHS = [1, 2, 3, 6, 9, 12]  # some shorter than k=4, some much longer


def make_inputs(seed, n_tokens=12, d=5, dk=4, dv=6):
    rng = np.random.default_rng(seed)
    b = len(LENGTHS)
    x = rng.normal(size=(b, n_tokens, d))
    mask = np.zeros((b, n_tokens), dtype=bool)
    for row, n in enumerate(LENGTHS):
        valid = rng.permutation(n_tokens)[:n]  # valid tokens are scattered, not a prefix
        mask[row, valid] = True
    # padded positions hold large garbage that would dominate if not masked out
    x = np.where(mask[..., None], x, 4.0 * rng.normal(size=x.shape) + 1.0)
    query = rng.normal(size=dk) * 2.0
    w_k = rng.normal(size=(d, dk))
    w_v = rng.normal(size=(d, dv)) + 0.3
    return x, mask, query, w_k, w_v


class TestTopKAttentionPool(unittest.TestCase):
    def check(self, **kwargs):
        for seed in SEEDS:
            with self.subTest(seed=seed, **kwargs):
                args = make_inputs(seed)
                out, w = pooling.topk_attention_pool(*args, **kwargs)
                out_ref, w_ref = pooling_ref.topk_attention_pool(*args, **kwargs)
                np.testing.assert_allclose(w, w_ref, rtol=1e-9, atol=1e-12)
                np.testing.assert_allclose(out, out_ref, rtol=1e-9, atol=1e-12)

    def test_default_hyperparameters(self):
        self.check()

    def test_sharp_temperature_and_strong_mixing(self):
        self.check(k=3, tau0=0.5, alpha=0.6)

    def test_k_larger_than_every_sequence(self):
        self.check(k=20, tau0=2.0, alpha=0.9)

    def test_weights_are_a_distribution_over_top_k_valid_tokens(self):
        x, mask, query, w_k, w_v = make_inputs(5)
        out, w = pooling.topk_attention_pool(x, mask, query, w_k, w_v, k=4)
        self.assertEqual(out.shape, (len(LENGTHS), w_v.shape[1]))
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)
        self.assertTrue(np.all(w[~mask] == 0.0))
        np.testing.assert_array_equal((w > 0).sum(axis=1), np.minimum(4, LENGTHS))
        np.testing.assert_allclose(np.sqrt(np.mean(out ** 2, axis=1)), 1.0, rtol=1e-5)


if __name__ == "__main__":
    unittest.main()
