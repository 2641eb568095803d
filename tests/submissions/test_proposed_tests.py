"""Proposed tests (issue 35, item 2): a validated revision's recording becomes a replay test file its author downloads
and runs with plain python beside the package; it passes on the reference and fails on a wrong body. The same holds
for the replay tests made from the example script the package names, which the same validation runs and records."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from submissions import services
from submissions.models import ValidationReport
from submissions.proposed import EXAMPLE_TEST_FILE, TEST_FILE
from submissions.tasks import revision_validate
from tests.evaluation.corpus.tasks import task

pytestmark = pytest.mark.django_db

# Wrong: forgets to square the gradient.
WRONG_SECOND = 'st["v"] = b2 * st["v"] + (1.0 - b2) * g\n'
# An example script as an author without tests would write one: it calls the code and asserts nothing.
EXAMPLE = b"""import numpy as np

import optimizer

theta = np.linspace(-1.0, 1.0, 6)
opt = optimizer.DampNest(lr=0.05, weight_decay=0.05)
for step in range(4):
    theta = opt.step(theta, 2.0 * theta - 0.3 * step)
print(theta)
"""


def run_plain(folder: Path, test_file: str = TEST_FILE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, test_file],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_the_proposed_replay_tests_run_with_plain_python_and_catch_a_wrong_body(
    draft, author, other_author, sandbox, tmp_path
):
    files = {**draft.draft["files"], **services.draft_files_store({"example.py": EXAMPLE})}
    metadata = {**draft.draft["metadata"], "example_script": "example.py"}
    services.draft_update(submission=draft, actor=author, values={"files": files, "metadata": metadata})
    revision = services.submission_submit(submission=draft, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    report = ValidationReport.objects.get(pk=revision.report.pk)
    assert report.status == "passed"
    example = report.checks.get(key="example")
    assert example.status == "passed" and example.result["recorded"] == ["DampNest.step"], example.detail

    client = Client()
    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[draft.pk])).content.decode()
    assert 'data-testid="proposed-tests-tests"' in page and 'data-testid="proposed-tests-example"' in page
    response = client.get(reverse("proposed-tests", args=[draft.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert "-r1-replay-of-your-tests.zip" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    names = archive.namelist()
    assert TEST_FILE in names and "rcb_replay/compare.py" in names
    assert any(name.startswith("rcb_replay/inputs/") for name in names)
    test_source = archive.read(TEST_FILE).decode()
    assert "RTOL = " in test_source and "ATOL = " in test_source  # the tolerance it states, for the author to change

    # Beside the package's own files (the author's folder), with plain python: it passes on the reference...
    dampnest = task("dampnest")
    folder = tmp_path / "package"
    for path, data in dampnest.files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    (folder / "paper2code_test.py").unlink()  # the replay needs none of the author's tests
    archive.extractall(folder)
    done = run_plain(folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Ran 1 test" in done.stderr and "OK" in done.stderr

    # ...and fails on a wrong body of a snippet, naming the call, where its result differs and by how much.
    name = "second moment of gradients"
    (folder / "optimizer.py").write_bytes(dampnest.spliced(name, dampnest.indented(name, WRONG_SECOND))["optimizer.py"])
    done = run_plain(folder)
    said = re.search(r"AssertionError: (DampNest\.step, recorded call \d+, at \S+: .*)", done.stderr)
    assert done.returncode != 0 and said, done.stderr[-3000:]
    assert re.search(r"\(largest error \S+ absolute, \S+ relative", said[1]), said[1]

    # The replay tests made from the example script: 4 calls of DampNest.step, none of the author's tests'.
    response = client.get(reverse("proposed-tests", args=[draft.pk]), {"from": "example"})
    assert response.status_code == 200 and "-r1-replay-of-example.zip" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert "while the example script example.py ran" in archive.read(EXAMPLE_TEST_FILE).decode()
    (folder / "optimizer.py").write_bytes(dampnest.files["optimizer.py"])
    archive.extractall(folder)  # beside the tests' replay, which it leaves whole
    done, tests_replay = run_plain(folder, EXAMPLE_TEST_FILE), run_plain(folder)
    assert done.returncode == 0 and "OK" in done.stderr, done.stderr[-3000:]
    assert tests_replay.returncode == 0 and "OK" in tests_replay.stderr, tests_replay.stderr[-3000:]
    (folder / "optimizer.py").write_bytes(dampnest.spliced(name, dampnest.indented(name, WRONG_SECOND))["optimizer.py"])
    done = run_plain(folder, EXAMPLE_TEST_FILE)
    assert done.returncode != 0 and "DampNest.step, recorded call" in done.stderr, done.stderr[-3000:]

    # A stranger gets nothing.
    stranger = Client()
    stranger.force_login(other_author)
    assert stranger.get(reverse("proposed-tests", args=[draft.pk])).status_code == 403


# A method of a class with its own __getstate__ (as torch's Optimizer has): the recorder pickles its object with the
# sealed replay's attribute setter (sandbox/programs/attributes.py), which the pickle names by the module it registers.
COUNTER = b"""class Counter:
    def __init__(self):
        self.n = 0

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.n = -1

    def bump(self, by):
        self.n += by
        return self.n
"""


def test_a_replayed_objects_attribute_setter_ships_with_the_proposed_tests(tmp_path, monkeypatch):
    """Muon's optimizers' steps are recorded so: their proposed tests failed the reference with plain python, the
    pickles naming a module (rcb_sealed_attributes) only the sandbox's programs registered."""
    import base64
    import copyreg
    import importlib.util
    import json
    import pickle

    from evaluation.judging.sealed import SNAPSHOT_CAPS
    from sandbox.programs import snapshot
    from sandbox.programs.attributes import attributes_set
    from submissions import proposed

    spec = importlib.util.spec_from_loader("counter", loader=None)
    counter = importlib.util.module_from_spec(spec)
    exec(COUNTER, vars(counter))
    monkeypatch.setitem(sys.modules, "counter", counter)
    obj = counter.Counter()
    obj.n = 5
    reduced = (copyreg.__newobj__, (counter.Counter,), dict(vars(obj)), None, None, attributes_set)

    class RecorderPickler(pickle.Pickler):  # as the recorder reduces such an object (sandbox/programs/recorder.py)
        def reducer_override(self, value):
            return reduced if value is obj else NotImplemented

    buffer = io.BytesIO()
    RecorderPickler(buffer, protocol=4).dump(((obj, 2), {}, {"random": __import__("random").getstate()}))
    returned = obj.bump(2)
    expected = snapshot.dumps(
        snapshot.snapshot_roots({"return": returned, "args": (obj, 2), "kwargs": {}}, **SNAPSHOT_CAPS)
    )
    blobs = {
        "in": json.dumps([base64.b64encode(buffer.getvalue()).decode()]).encode(),
        "out": json.dumps([expected.decode("ascii")]).encode(),
    }
    monkeypatch.setattr(proposed, "blob_read", lambda sha256: blobs[sha256])
    target = {"key": "counter.py:Counter.bump", "file": "counter.py", "qualname": "Counter.bump"}
    recording = {
        "tolerance": {"rtol": 1e-5, "atol": 1e-8},
        "targets": {target["key"]: {**target, "sealed": True, "inputs": "in", "outputs": "out"}},
    }
    for path, data in {"counter.py": COUNTER, **proposed.proposed_tests_files(recording=recording, paper="x")}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    run = run_plain(tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Ran 1 test" in run.stderr and "OK" in run.stderr
