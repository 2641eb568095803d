"""A float32 value the reference hands back as a Python float (`.item()`), a list of them (`.tolist()`) or a
complex64 is held to float32's row of the proposed tests too (issue 33). Before, only an array or tensor's dtype
chose a row, so such values took RTOL and ATOL, the loosest of the author's assertions (2e-2 here, meant for bfloat16
code), and an epsilon nudged in a float32 function returning `.item()` passed the proposed tests. A Python float
carries no dtype: the reference's recorded value tells (exactly a float32, and no bfloat16 or float16), never the
replay's, so a wrong answer cannot choose its row."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.judging import compare
from evaluation.judging.sealed import SNAPSHOT_CAPS
from sandbox.programs import snapshot
from submissions.proposed import proposed_tolerance
from tests.submissions.test_proposed_float32 import TESTS, epsilon_mutants_checked

NAME = "layer norm's mean square"
NORM = f'''"""The mean square of a float32 layer norm's output, as a Python float."""

import numpy as np


def layer_norm(x, weight, bias):
    # <paper2code name="{NAME}">
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed = (x - mean) / np.sqrt(var + 1e-5)
    return np.square(normed * weight + bias).mean().item()
    # </paper2code name="{NAME}">
'''
# The paper's tests of the array version, on its mean square (the same 2e-2 as the bfloat16 kernel's).
ITEM_TESTS = TESTS.replace("self.assertEqual(got.dtype, np.float32)", "self.assertIs(type(got), float)").replace(
    "np.testing.assert_allclose(got, want,", "np.testing.assert_allclose(got, np.square(want).mean(),"
)
FILES = {"norm.py": NORM.encode(), "paper2code_test.py": ITEM_TESTS.encode()}
REORDERED = """    centred = x - x.mean(axis=-1, keepdims=True)
    inverse = 1.0 / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5)
    return float(np.mean(np.square(weight * (centred * inverse) + bias)))
"""


def difference(recorded, replayed, by_dtype):
    def document(value):
        data = snapshot.dumps(snapshot.snapshot_roots({"return": value}, **SNAPSHOT_CAPS))
        return compare.parse(data, max_bytes=1 << 20, max_depth=200)

    return compare.compare(document(recorded), document(replayed), rtol=2e-2, atol=2e-2, by_dtype=by_dtype)


def test_tolist_and_complex64_take_float32s_row_and_other_plain_floats_keep_the_loosest():
    table = proposed_tolerance({"tolerance": {"rtol": 2e-2, "atol": 2e-2}}).by_dtype
    no_row = {dtype: row for dtype, row in table.items() if dtype not in ("float32", "complex64")}
    values = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    nudged = values * np.float32(1 + 1e-3)  # a wrong float32 answer, well within 2e-2
    cases = [
        (values.tolist(), nudged.tolist()),
        (values.astype(np.complex64), nudged.astype(np.complex64)),
        (complex(values[0], values[1]), complex(nudged[0], nudged[1])),
    ]
    for recorded, replayed in cases:
        assert difference(recorded, replayed, no_row) is None  # with no float32 row: the loosest lets it through
        found = difference(recorded, replayed, table)
        assert found is not None and ("for float32" in found.message or "for complex64" in found.message), found
        assert difference(recorded, recorded, table) is None
    # A float64 result, a round value and a bfloat16 value's `.item()` tell no dtype: the loosest, as before.
    for value in (float(np.float64(values[0]) / 3), 0.5, 0.3125):
        assert compare.plain_dtype(value) == ""
        assert difference(value, value * (1 + 1e-3), table) is None
    # The recorded value decides: a replay that is a float32 value does not tighten a float64 recording's row.
    assert difference(float(values[0]) / 3, float(np.float32(float(values[0]) / 3 * 1.001)), table) is None


@pytest.mark.django_db
def test_a_float32_epsilon_mutant_returning_item_fails_the_proposed_tests(sandbox_cache, media_root, tmp_path):
    test = epsilon_mutants_checked(NORM, FILES, REORDERED, sandbox_cache, tmp_path)
    assert "takes the float32 row" in test  # the rule, stated where the author reads and changes the rows
