"""An example script (issue 35, item 2): a paper names a script that calls its code (papers.yaml `example_script`, the
form's files step), one rule refusing what cannot be one in papers.yaml, the form and at submit; validation records
the reference's run of it and proposes replay tests from those calls. The proposed tests compare each dtype within its
own tolerance: bfloat16 looser than float32, float64 tighter. (The proposed tests of the real package, Muon, whose
Newton-Schulz iterations run in bfloat16, are run end to end by scripts/measure_author_muon.py: torch's environment
takes minutes to build, too long for the suite.)"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.pset import read_pset
from evaluation.judging.compare import compare, parse
from sandbox.programs.snapshot import dumps, snapshot_roots
from submissions import services
from submissions.packages import draft_problems
from submissions.proposed import dtype_tolerances
from tests.conftest import page_text

MUON = Path(__file__).parents[1] / "evaluation" / "packages" / "muon"


def muon_copy(root: Path, script: str) -> Path:
    shutil.copytree(MUON, root)
    papers = root / "papers.yaml"
    papers.write_text(papers.read_text().replace("example_script: example.py", f"example_script: {script}"))
    return root


def test_the_real_package_names_its_example_script():
    [paper] = read_pset(MUON)
    assert paper.extra["example_script"] == "example.py" and "example.py" in paper.files


@pytest.mark.parametrize(
    "script,reason",
    [
        ("paper2code_test.py", "is the test entry point"),
        ("muon.py", "is an annotated file"),
        ("LICENSE", "is not a Python file"),
        ("absent.py", "is not a file of the paper's folder"),
        ("../outside.py", "is outside the paper folder"),
        ("[example.py]", "must be a path"),
    ],
)
def test_papers_yaml_refuses_what_cannot_be_an_example_script(tmp_path, script, reason):
    root = muon_copy(tmp_path / "set", script)
    with pytest.raises(PackageError) as refused:
        read_pset(root)
    assert "error: paper muon: example_script" in str(refused.value) and reason in str(refused.value)


@pytest.mark.django_db
def test_the_files_step_keeps_the_example_script_in_the_details_and_refuses_the_tests(client, draft, author):
    client.force_login(author)
    url = reverse("submission-step", args=[draft.pk, "files"])
    chosen = {"annotated_paths": ["optimizer.py"], "requirements": "numpy\n"}
    text = page_text(client.post(url, {**chosen, "example_script": "paper2code_test.py"}).content.decode())
    assert "paper2code_test.py is the test entry point: name a script that calls your code" in text
    draft.refresh_from_db()
    assert "example_script" not in draft.draft["metadata"]

    assert client.post(url, {**chosen, "example_script": "optimizer_ref.py"}).status_code == 302
    draft.refresh_from_db()
    assert draft.draft["metadata"]["example_script"] == "optimizer_ref.py"
    assert draft.draft["metadata"]["title"] == "Demo dampnest"  # the other details kept
    assert client.post(url, {**chosen, "example_script": ""}).status_code == 302
    draft.refresh_from_db()
    assert "example_script" not in draft.draft["metadata"]  # none: the key is dropped


@pytest.mark.django_db
def test_saving_the_details_again_keeps_the_example_script_step_4_named(client, draft, author):
    # A newcomer's walk: editing only the venue dropped the example script from the next revision, since the details
    # step replaced every detail with its own fields.
    client.force_login(author)
    chosen = {"annotated_paths": ["optimizer.py"], "requirements": "numpy\n", "example_script": "optimizer_ref.py"}
    assert client.post(reverse("submission-step", args=[draft.pk, "files"]), chosen).status_code == 302
    details = {"title": "Demo dampnest", "venue": "ICLR2026"}
    assert client.post(reverse("submission-step", args=[draft.pk, "details"]), details).status_code == 302
    draft.refresh_from_db()
    assert draft.draft["metadata"]["venue"] == "ICLR2026"
    assert draft.draft["metadata"]["example_script"] == "optimizer_ref.py"


@pytest.mark.django_db
def test_a_draft_naming_a_missing_script_is_not_submitted(draft, author):
    metadata = {**draft.draft["metadata"], "example_script": "gone.py"}
    services.draft_update(submission=draft, actor=author, values={"metadata": metadata})
    draft.refresh_from_db()
    assert "the example script gone.py is not a file of the paper's folder (step 4)" in draft_problems(draft.draft)
    with pytest.raises(services.TransitionError, match="example script gone.py"):
        services.submission_submit(submission=draft, actor=author)


def snapshot(value) -> bytes:
    return dumps(snapshot_roots({"return": value}, max_bytes=1 << 20, max_depth=20, max_items=1000))


def differs(recorded, replayed, tolerances) -> str:
    found = compare(
        parse(snapshot(recorded), max_bytes=1 << 22, max_depth=200),
        parse(snapshot(replayed), max_bytes=1 << 22, max_depth=200),
        rtol=1e-5,
        atol=1e-8,
        by_dtype=tolerances,
    )
    return found.message if found else ""


def test_each_dtype_is_compared_within_its_own_tolerance():
    tolerances = dtype_tolerances(rtol=1e-5, atol=1e-8)
    (bf16, _), (f16, _), (f32, _), (f64, _) = (tolerances[d] for d in ("bfloat16", "float16", "float32", "float64"))
    assert bf16 > f16 > f32 > f64  # the resolution of each
    # The author's looser tolerance (their tests compare bfloat16 within 2e-2) raises the low-precision ones only.
    assert dtype_tolerances(rtol=2e-2, atol=2e-2)["bfloat16"] == (2e-2, 2e-2)
    assert dtype_tolerances(rtol=2e-2, atol=2e-2)["float32"] == tolerances["float32"] == (1e-5, 1e-8)
    assert dtype_tolerances(rtol=2e-2, atol=2e-2)["float64"] == tolerances["float64"]

    one = np.linspace(1.0, 2.0, 5)
    # A float32 result off by 1e-6 relative (another order of float32 operations) passes; in float64 it fails.
    assert differs(one.astype(np.float32), (one * (1 + 1e-6)).astype(np.float32), tolerances) == ""
    message = differs(one, one * (1 + 1e-6), tolerances)
    assert "for float64" in message and "rtol 1e-09" in message
    # Off by 1e-3: a wrong float32 value, named with its dtype's tolerance.
    assert "for float32" in differs(one.astype(np.float32), (one * 1.001).astype(np.float32), tolerances)
    # Python floats take RTOL and ATOL.
    assert differs(1.0, 1.0 + 1e-6, tolerances) == "" and differs(1.0, 1.001, tolerances)


def bfloat16_tensor(values: np.ndarray) -> bytes:
    """A recorded torch bfloat16 tensor as the snapshot writes one (its bits: a float32's upper half, rounded)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    node = {"t": "tensor", "dtype": "bfloat16", "shape": list(values.shape), "requires_grad": False}
    node["b64"] = base64.b64encode(rounded.tobytes()).decode()
    return json.dumps({"v": 1, "roots": {"return": node}}).encode()


def test_a_bfloat16_result_passes_within_its_resolution_and_a_wrong_one_fails():
    tolerances = dtype_tolerances(rtol=1e-5, atol=1e-8)  # what a recording with no looser assertion proposes
    recorded = np.array([0.5, -1.25, 3.0, 0.0078125])

    def judged(replayed: np.ndarray) -> str:
        found = compare(
            parse(bfloat16_tensor(recorded), max_bytes=1 << 20, max_depth=200),
            parse(bfloat16_tensor(replayed), max_bytes=1 << 20, max_depth=200),
            rtol=1e-5,
            atol=1e-8,
            by_dtype=tolerances,
        )
        return found.message if found else ""

    assert judged(recorded) == ""
    # One unit of bfloat16's 8-bit mantissa off (another order of the same products): within its tolerance, though
    # 1e-5 (float32's, and RTOL's) would fail it.
    one_unit = recorded * (1 + 2.0**-7)
    assert judged(one_unit) == ""
    assert "rtol 1e-05" in judged_without(recorded, one_unit)
    # A wrong answer (a term's sign flipped) fails, named with the tolerance it was held to.
    message = judged(recorded * np.array([1, 1, -1, 1]))
    assert "for bfloat16" in message and "rtol 0.016" in message


def judged_without(recorded: np.ndarray, replayed: np.ndarray) -> str:
    """The comparison with no tolerance per dtype (the sealed replay's): RTOL and ATOL for every value."""
    found = compare(
        parse(bfloat16_tensor(recorded), max_bytes=1 << 20, max_depth=200),
        parse(bfloat16_tensor(replayed), max_bytes=1 << 20, max_depth=200),
        rtol=1e-5,
        atol=1e-8,
    )
    return found.message if found else ""
