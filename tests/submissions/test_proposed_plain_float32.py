"""A float32 value the reference hands back as a Python float (`.item()`), a list of them (`.tolist()`) or a
complex64 is held to float32's row of the proposed tests too (issue 33). Before, only an array or tensor's dtype
chose a row, so such values took RTOL and ATOL, the loosest of the author's assertions (2e-2 here, meant for bfloat16
code), and an epsilon nudged in a float32 function returning `.item()` passed the proposed tests. A Python float
carries no dtype: the reference's recorded value tells (exactly a float32, and no bfloat16 or float16), never the
replay's, so a wrong answer cannot choose its row."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks.paper2code import parse, splice
from benchmarks.paper2code.mutation import mutants_generate
from benchmarks.selectors import blob_read
from benchmarks.services.blobs import blob_store, environment_hash
from evaluation.judging import compare
from evaluation.judging.sealed import SNAPSHOT_CAPS, SnippetSpan, answer_replay, recording_make, snippet_key
from sandbox.harness import answer_span
from sandbox.programs import snapshot
from submissions.proposed import TEST_FILE, proposed_tests_files, proposed_tolerance
from tests.conftest import sandbox_backend_or_missing
from tests.submissions.test_proposed_float32 import LIMITS, TESTS, run_file

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
    annotated = parse(NORM, "norm.py")
    [snippet] = annotated.snippets
    key = snippet_key("norm.py", snippet.index)
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    hidden = ["paper2code_test.py"]
    epsilons = [
        m for m in mutants_generate(snippet.code, limit=100) if m.operator == "constant" and "var + 1e-5)  ->" in m.diff
    ]
    assert len(epsilons) == 2, [m.diff for m in epsilons]

    with backend.session(environment) as session:
        recording = recording_make(
            session=session,
            files=FILES,
            test_entry_point="paper2code_test.py",
            hidden=hidden,
            snippets=[SnippetSpan(key, "norm.py", snippet.start_line, snippet.end_line)],
            limits=LIMITS,
            store=lambda content: blob_store(content=content).sha256,
        )
        assert recording["snippets"][key]["sealed"], recording["snippets"][key]
        assert recording["tolerance"]["rtol"] == 2e-2

        def replayed(body: str):
            return answer_replay(
                session=session,
                files={**FILES, "norm.py": splice(annotated, snippet, body).encode()},
                hidden=hidden,
                recording=recording,
                key=key,
                limits=LIMITS,
                load=lambda digest: blob_read(sha256=digest),
                answer=answer_span(snippet.start_line, body),
                also=proposed_tolerance(recording),
            )

        for mutant in epsilons:
            replay = replayed(mutant.body)
            assert replay.agrees, replay.difference  # scoring keeps the paper's 2e-2, as the author's tests do
            assert replay.also_difference and "for float32" in replay.also_difference, replay.also_difference
        reordering = replayed(REORDERED)
        assert reordering.agrees and reordering.also_difference == "", reordering.also_difference

    proposed = proposed_tests_files(recording=recording, paper="norm")
    test = proposed[TEST_FILE].decode()
    assert "takes the float32 row" in test  # the rule, stated where the author reads and changes the rows
    row = re.search(r'^    "float32": \((.+)\),$', test, re.MULTILINE)
    assert row is not None and row.group(1) == "1e-05, 1e-08", test[:3000]
    loosest = recording["tolerance"]
    # No float32 row for plain floats (the file before): the mutants pass, as the author's own tests let them.
    before = {
        **proposed,
        TEST_FILE: test.replace(row.group(0), f'    "float32": ({loosest["rtol"]!r}, 0.02),').encode(),
    }
    for number, mutant in enumerate(epsilons):
        spliced = {**FILES, "norm.py": splice(annotated, snippet, mutant.body).encode()}
        then = run_file(tmp_path / f"before-{number}", {**spliced, **before})
        assert then.returncode == 0, (mutant.diff, then.stderr[-2000:])
        theirs = run_file(tmp_path / f"before-{number}", {}, "paper2code_test.py")
        assert theirs.returncode == 0, theirs.stderr[-2000:]
        now = run_file(tmp_path / f"now-{number}", {**spliced, **proposed})
        assert now.returncode != 0 and "for float32" in now.stderr, (mutant.diff, now.stderr[-2000:])
    reordered = {**FILES, "norm.py": splice(annotated, snippet, REORDERED).encode()}
    done = run_file(tmp_path / "reordered", {**reordered, **proposed})
    assert done.returncode == 0 and "OK" in done.stderr, done.stderr[-2000:]
