"""Tests for Trimmed InfoNCE (pure Python): annotated code must match the reference."""

import math
import random
import unittest

import contrastive
import contrastive_ref

SEEDS = [0, 1, 5, 17, 99]


def clustered_batch(seed, n=10, d=4, n_clusters=2, noise=0.35, pos_noise=0.1):
    """Anchors from a few clusters (so same-cluster negatives are likely false negatives)."""
    rng = random.Random(seed)
    centres = [[rng.gauss(0.0, 1.0) for _ in range(d)] for _ in range(n_clusters)]
    anchors, positives = [], []
    for i in range(n):
        c = centres[i % n_clusters]
        a = [x + rng.gauss(0.0, noise) for x in c]
        anchors.append([x * rng.uniform(0.5, 3.0) for x in a])  # arbitrary norms
        positives.append([x + rng.gauss(0.0, pos_noise) for x in a])
    return anchors, positives


class TestTrimmedInfoNCE(unittest.TestCase):
    def compare(self, **kwargs):
        for seed in SEEDS:
            with self.subTest(seed=seed, **kwargs):
                anchors, positives = clustered_batch(seed)
                got = contrastive.trimmed_infonce(anchors, positives, **kwargs)
                want = contrastive_ref.trimmed_infonce(anchors, positives, **kwargs)
                self.assertEqual(len(got), 2)
                self.assertAlmostEqual(got[0], want[0], places=10)
                self.assertAlmostEqual(got[1], want[1], places=12)

    def test_default_symmetric_loss(self):
        self.compare()

    def test_wide_margin_where_budget_binds(self):
        self.compare(tau=0.2, delta=0.5, trim_frac=0.25)

    def test_one_direction_larger_budget(self):
        self.compare(tau=0.05, delta=0.3, trim_frac=0.5, symmetric=False)

    def test_budget_binds_and_trimming_happens(self):
        anchors, positives = clustered_batch(3)
        loss, frac = contrastive.trimmed_infonce(anchors, positives, tau=0.2, delta=0.5)
        # budget is floor(0.25 * 9) = 2 of 9 negatives per anchor and it is reached
        self.assertAlmostEqual(frac, 2.0 / 9.0, places=12)
        self.assertTrue(math.isfinite(loss) and loss > 0.0)

    def test_matrix_helpers_match_reference(self):
        for seed in SEEDS:
            anchors, positives = clustered_batch(seed, n=6)
            got = contrastive.similarity_logits(anchors, positives, 0.07)
            want = contrastive_ref.similarity_logits(anchors, positives, 0.07)
            for rg, rw in zip(got, want):
                for x, y in zip(rg, rw):
                    self.assertAlmostEqual(x, y, places=9)
            v = anchors[0]
            for x, y in zip(contrastive.l2_normalize(v), contrastive_ref.l2_normalize(v)):
                self.assertAlmostEqual(x, y, places=12)
        big = [1000.0, 999.0, 998.5]
        self.assertAlmostEqual(contrastive.logsumexp(big), contrastive_ref.logsumexp(big), places=9)

    def test_hardest_candidates_are_trimmed(self):
        row = [2.0, 1.9, 0.0, 1.95, 1.5, 1.8]  # anchor 0; candidates 1, 3, 4, 5 (margin 1)
        self.assertEqual(contrastive.kept_negatives(row, 0, 1.0, 2), [2, 4, 5])
        self.assertEqual(contrastive.kept_negatives(row, 0, 1.0, 10), [2])
        self.assertEqual(contrastive.kept_negatives(row, 0, 0.15, 10), [2, 4, 5])


if __name__ == "__main__":
    unittest.main()
