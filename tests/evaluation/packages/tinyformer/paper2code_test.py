"""Tests of the tiny transformer block: every layer must match the reference implementation."""

import unittest

import numpy as np
from numpy.testing import assert_allclose

import layers
import layers_ref


class TestTinyFormer(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(3).normal(size=(2, 5, 8))

    def test_layer_norm(self):
        got = layers.LayerNorm(8)(self.x)
        want = layers_ref.LayerNorm(8)(self.x)
        assert_allclose(got, want, rtol=1e-10)
        np.testing.assert_allclose(got.mean(-1), 0.0, atol=1e-10)

    def test_attention_matches_reference(self):
        config = layers.BlockConfig()
        got = layers.Attention(config, np.random.default_rng(0))(self.x)
        want = layers_ref.Attention(layers_ref.BlockConfig(), np.random.default_rng(0))(self.x)
        assert_allclose(got, want, rtol=1e-9, atol=1e-12)

    def test_block_matches_reference(self):
        got = layers.Block(layers.BlockConfig(), seed=1)(self.x)
        want = layers_ref.Block(layers_ref.BlockConfig(), seed=1)(self.x)
        self.assertEqual(got.shape, want.shape)
        assert_allclose(got, want, rtol=1e-9, atol=1e-12)

    def test_top_tokens(self):
        logits = np.array([[0.1, 2.0, -np.inf, 1.0], [3.0, 3.0, 0.0, -1.0]])
        self.assertEqual(layers.top_tokens(logits, k=3), layers_ref.top_tokens(logits, k=3))
        self.assertEqual(layers.top_tokens(logits, k=3), [[1, 3, 0], [0, 1, 2]])


if __name__ == "__main__":
    unittest.main()
