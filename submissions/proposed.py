"""Proposed tests (issue 35, item 2): from a validated revision's recording (evaluation/judging/sealed.py: the real
arguments, returns and changed state of each function holding a snippet, recorded while the reference ran the
author's tests), a replay test the author downloads and keeps. The archive holds `paper2code_replay_test.py`, a
unittest file run with plain `python` from the package's folder, and beside it `rcb_replay/`: the recorded inputs and
outputs per function, the snapshot writer and the comparison the platform's own sealed replay uses. Each recorded
call is one sub-test: the function is called on the recorded inputs and what it returned and left in its arguments
is compared with the recording, within the tolerance the file states (RTOL, ATOL), which the author can change."""

from __future__ import annotations

import io
import zipfile
from importlib import resources

from benchmarks.selectors import blob_read
from common.errors import ApplicationError
from sandbox import programs
from submissions.models import Revision

TEST_FILE = "paper2code_replay_test.py"
FOLDER = "rcb_replay"

TEST_SOURCE = '''"""Replay tests proposed by the platform for {paper} (revision r{number}): each call of a function
holding a snippet, as the reference made it while its tests ran, is replayed on the recorded inputs
(rcb_replay/inputs/) and compared with what the reference returned and left in its arguments (rcb_replay/outputs/).

Run it from the package's folder with plain python: python {test_file}
The inputs are pickles of your own code's arguments: load them only where you would run that code.
"""

import base64
import json
import pickle
import random
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rcb_replay import compare, snapshot  # noqa: E402

# Floating values agree when |replayed - recorded| <= ATOL + RTOL * |recorded|. The recording chose these from your
# own tests' assertions (numpy's allclose defaults at least); loosen them for low-precision code (about 1e-2 for
# bfloat16, 1e-3 for float16, 1e-5 for float32), where another order of the same operations is still correct.
RTOL = {rtol!r}
ATOL = {atol!r}
CAPS = {caps!r}
TARGETS = {targets!r}


def rng_restore(state):
    random.setstate(state["random"])
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])
    if "torch" in state:
        sys.modules["torch"].set_rng_state(state["torch"])


def function_find(target):
    module = __import__(target["file"][:-3].replace("/", "."), fromlist=["_"])
    owner, parts = module, target["qualname"].split(".")
    for part in parts[:-1]:
        owner = vars(owner)[part]
    found = vars(owner)[parts[-1]]
    return found.__func__ if isinstance(found, (staticmethod, classmethod)) else found


def recorded(folder, key):
    name = key.replace("/", "__").replace(":", "--") + ".json"
    return json.loads((HERE / "rcb_replay" / folder / name).read_text())


class ReplayTest(unittest.TestCase):
    def test_recorded_calls(self):
        for target in TARGETS:
            function = function_find(target)
            inputs, outputs = recorded("inputs", target["key"]), recorded("outputs", target["key"])
            for call, (blob, expected) in enumerate(zip(inputs, outputs), 1):
                with self.subTest(function=target["qualname"], call=call):
                    positional, keyword, state = pickle.loads(base64.b64decode(blob))
                    rng_restore(state)
                    returned = function(*positional, **keyword)
                    roots = {{"return": returned, "args": positional, "kwargs": keyword}}
                    replayed = snapshot.dumps(snapshot.snapshot_roots(roots, **CAPS))
                    limit = 2 * len(expected) + len(replayed) + 65536
                    difference = compare.compare(
                        compare.parse(expected.encode("ascii"), max_bytes=limit, max_depth=200),
                        compare.parse(replayed, max_bytes=limit, max_depth=200),
                        rtol=RTOL,
                        atol=ATOL,
                    )
                    if difference is not None:
                        self.fail(f"{{target['qualname']}}, recorded call {{call}}: {{difference.message}}")


if __name__ == "__main__":
    unittest.main()
'''


def _file_key(key: str) -> str:
    return key.replace("/", "__").replace(":", "--")


def _sealed(revision: Revision) -> list[dict]:
    return [t for t in (revision.recording or {}).get("targets", {}).values() if t.get("sealed")]


def proposed_tests_available(*, revision: Revision) -> bool:
    return bool(_sealed(revision))


def proposed_tests_archive(*, revision: Revision) -> bytes:
    """The zip of the revision's proposed replay tests; ApplicationError when it has no sealed function to replay."""
    from evaluation.judging.sealed import SNAPSHOT_CAPS

    recording = revision.recording or {}
    sealed = _sealed(revision)
    if not sealed:
        raise ApplicationError(
            f"revision r{revision.number} has no recorded calls to replay: validation records them when its tests "
            "call a snippet's function with plain arguments"
        )
    targets = [{"key": t["key"], "file": t["file"], "qualname": t["qualname"]} for t in sealed]
    compare_source = (
        resources.files("evaluation.judging")
        .joinpath("compare.py")
        .read_text(encoding="utf-8")
        .replace("from sandbox.programs import snapshot", "from rcb_replay import snapshot")
    )
    test = TEST_SOURCE.format(
        paper=revision.metadata.get("id", revision.submission.title),
        number=revision.number,
        test_file=TEST_FILE,
        rtol=float(recording["tolerance"]["rtol"]),
        atol=float(recording["tolerance"]["atol"]),
        caps=dict(SNAPSHOT_CAPS),
        targets=targets,
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(TEST_FILE, test)
        archive.writestr(f"{FOLDER}/__init__.py", "")
        archive.writestr(f"{FOLDER}/snapshot.py", resources.files(programs).joinpath("snapshot.py").read_text())
        archive.writestr(f"{FOLDER}/compare.py", compare_source)
        for target in sealed:
            name = _file_key(target["key"]) + ".json"
            archive.writestr(f"{FOLDER}/inputs/{name}", blob_read(sha256=target["inputs"]))
            archive.writestr(f"{FOLDER}/outputs/{name}", blob_read(sha256=target["outputs"]))
    return buffer.getvalue()
