"""Proposed tests (issue 35, item 2): from a validated revision's recording (evaluation/judging/sealed.py: the real
arguments, returns and changed state of each function holding a snippet, recorded while the reference ran the
author's tests, or the example script the author names), a replay test the author downloads and keeps. The archive
holds `paper2code_replay_test.py`, a unittest file run with plain `python` from the package's folder, and beside it
`rcb_replay/`: the recorded inputs and outputs per function, and the snapshot writer, the comparison and the
attribute setter (which the recorded pickles of some objects name) that the platform's own sealed replay uses. Each
recorded call is one sub-test: the function is called on the recorded inputs and what it returned and left in its
arguments is compared with the recording, within the tolerance the file states per dtype (TOLERANCES; RTOL and ATOL
for the rest), which the author can change."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath

from benchmarks.paper2code.hidden import RECORDED_FOLDER
from benchmarks.paper2code.pset import TEST_ENTRY_POINT
from benchmarks.selectors import blob_read
from common.errors import ApplicationError
from evaluation.judging.sealed import ATOL_DEFAULT, RTOL_DEFAULT, Tolerance, judging_tolerance
from sandbox import programs
from submissions.models import Revision

TEST_FILE = "paper2code_replay_test.py"
FOLDER = RECORDED_FOLDER  # its inputs/ and outputs/ are hidden files of a package holding them

TEST_SOURCE = '''"""Replay tests proposed by the platform for {paper}: each call of a function
holding a snippet, as the reference made it while {source} ran, is replayed on the recorded inputs
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

# attributes registers the setter the recorded pickles of some objects name (an optimizer's, whose class has its own
# __getstate__): imported before any is loaded.
from rcb_replay import attributes, compare, snapshot  # noqa: E402, F401

# Floating values agree when |replayed - recorded| <= atol + rtol * |recorded|, with (rtol, atol) by the dtype an
# array or tensor is stored in. Two correct implementations agree only to the rounding of their dtype, so:
# bfloat16 and float16 keep 2 to 3 digits, so they get at least their resolution, and more if your tests allowed it;
# float32 keeps 7 digits, so it is held to at most rtol {float32_rtol:g}, atol {float32_atol:g} (numpy's allclose
# defaults), and float64 (16 digits) to at most rtol {float64_rtol:g}, atol {float64_atol:g}, however loose your tests'
# assertions were elsewhere (a tolerance meant for bfloat16 would let a float32 epsilon or scale change through).
# complex64 and complex128 take the rows of float32 and float64, the precision of their parts. A Python float carries
# no dtype, so the recorded value tells: one that is exactly a float32 and no bfloat16 or float16 (a float32 value's
# .item() or .tolist(); a float64 result is one by chance about once in 2**29) takes the float32 row, a Python complex
# whose parts are takes the complex64 row. Other floating values (other Python floats and complex numbers, other
# dtypes) take RTOL and ATOL, the loosest of your tests' assertions. Change any of them here: loosen one where
# another order of the same operations is still correct and fails (a float32 value computed from bfloat16 ones, or
# after a long reduction, or a Python float that happens to be a float32's), tighten one where a wrong answer passes.
TOLERANCES = {{
{tolerances}}}
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


def recorded(folder, target):
    return json.loads((HERE / "rcb_replay" / folder / target["recorded"]).read_text())


class ReplayTest(unittest.TestCase):
    def test_recorded_calls(self):
        for target in TARGETS:
            function = function_find(target)
            inputs, outputs = recorded("inputs", target), recorded("outputs", target)
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
                        by_dtype=TOLERANCES,
                    )
                    if difference is not None:
                        self.fail(f"{{target['qualname']}}, recorded call {{call}}, {{difference.words()}}")


if __name__ == "__main__":
    unittest.main()
'''


# The recording of an example script's run, kept in the revision's recording under this key (submissions/validation.py).
EXAMPLE_RECORDING = "example"
SOURCES = ("tests", "example")
# The example script's replay, downloaded, has its own test file and recorded files, so it unpacks beside the tests'.
EXAMPLE_TEST_FILE = "paper2code_example_replay_test.py"
EXAMPLE_PREFIX = "example--"
# The key of a revision's `source` (where its code came from) naming the example script its tests were proposed from,
# when validation made them its tests (submissions/tasks.py): kept with the revision, whatever validates it again.
TESTS_PROPOSED_FROM = "tests_proposed_from"
# The most of float32 and float64 in the proposed tests, whatever looser tolerance the author's assertions used for
# their low-precision code: float32 numpy's allclose defaults (7 digits: what the sealed replay holds float32 to when
# the paper's assertions are no looser), float64 16 digits' worth (a reordering of float64 operations stays far within).
FLOAT32_MOST = (RTOL_DEFAULT, ATOL_DEFAULT)
FLOAT64_MOST = (1e-9, 1e-12)


def dtype_tolerances(*, rtol: float, atol: float) -> dict[str, tuple[float, float]]:
    """The proposed tests' (rtol, atol) per dtype from the recording's tolerance (the loosest of the author's own
    assertions, numpy's allclose defaults at least): bfloat16 and float16 keep it but at least their resolution (as
    the sealed replay judges them), float32 and complex64 at most FLOAT32_MOST, float64 and complex128 at most
    FLOAT64_MOST (a tolerance the author's bfloat16 code needs is no measure of float32 arithmetic). The float32 and
    complex64 rows also hold the plain floats and complex numbers the recording shows to be theirs (plain_dtype)."""
    tolerances = dict(judging_tolerance(rtol, atol).by_dtype or {})
    most = {"float32": FLOAT32_MOST, "complex64": FLOAT32_MOST, "float64": FLOAT64_MOST, "complex128": FLOAT64_MOST}
    for dtype, (low, high) in most.items():
        tolerances[dtype] = (min(rtol, low), min(atol, high))
    return tolerances


def proposed_tolerance(recording: dict) -> Tolerance:
    """The tolerance the proposed tests made from `recording` compare with: its RTOL and ATOL, and the TOLERANCES
    table per dtype. The one rule for the file's table and for validation's count of what the proposed tests kill."""
    rtol, atol = float(recording["tolerance"]["rtol"]), float(recording["tolerance"]["atol"])
    return Tolerance(rtol, atol, dtype_tolerances(rtol=rtol, atol=atol))


def _recorded_name(target: dict, prefix: str) -> str:
    """The name of a recorded function's inputs and outputs files in rcb_replay/inputs/ and outputs/."""
    return prefix + target["key"].replace("/", "__").replace(":", "--") + ".json"


def _recording(revision: Revision, source: str) -> dict:
    """The recording the proposed tests of `source` come from: the tests' run, or the example script's."""
    recording = revision.recording or {}
    return (recording.get(EXAMPLE_RECORDING) or {}) if source == "example" else recording


def _sealed(recording: dict) -> list[dict]:
    return [t for t in recording.get("targets", {}).values() if t.get("sealed")]


def tests_proposed_from(*, revision: Revision) -> str:
    """The example script whose proposed tests became the revision's tests (it had none of its own), else ''."""
    return str((revision.source or {}).get(TESTS_PROPOSED_FROM) or "")


def tests_made_paths(*, revision: Revision) -> set[str]:
    """The files validation wrote into the revision (the tests it proposed from the example script, as the package had
    none): its test entry point and rcb_replay/; none when the tests are the author's."""
    if not tests_proposed_from(revision=revision):
        return set()
    return {path for path in revision.files if path == TEST_ENTRY_POINT or path.startswith(f"{FOLDER}/")}


def proposed_tests_sources(*, revision: Revision) -> list[str]:
    """The runs of the revision whose recorded calls make proposed tests: "tests", "example" or both."""
    return [source for source in SOURCES if _sealed(_recording(revision, source))]


@dataclass(frozen=True)
class ProposedTestsOffer:
    """One download of proposed tests, as the author's page offers it: what it replays, when it helps, and the
    names it comes under (the zip's, and its test file's, distinct per source so two unpack side by side)."""

    source: str  # "tests", "example", or "package": the package's own tests, which validation proposed
    label: str
    useful: str
    filename: str
    test_file: str


def _calls(recording: dict) -> list[tuple[str, str, str]]:
    """The recorded calls a recording's proposed tests replay: each sealed function's inputs and outputs."""
    return sorted((t["key"], t["inputs"], t["outputs"]) for t in _sealed(recording))


def _script_stem(script: str) -> str:
    return str(PurePosixPath(script).with_suffix("")).replace("/", "-")


def proposed_tests_offers(*, revision: Revision, author_reads: bool = True) -> list[ProposedTestsOffer]:
    """The proposed tests the revision's page offers, each once: the package's own tests when validation made them
    from the example script (the example's replay would be the same calls again); otherwise the replay of the
    tests' calls and the replay of the example script's calls, as one download when both recorded the same calls.
    Said to the author ("your tests"), or to a maintainer reviewing it ("the author's tests")."""
    your, yours = ("your", "yours") if author_reads else ("the author's", "the author's")
    paper = f"{revision.metadata.get('id') or 'paper'}-r{revision.number}"
    sources = proposed_tests_sources(revision=revision)
    script = str(_recording(revision, "example").get("script") or "")
    made_from = tests_proposed_from(revision=revision)
    if made_from:
        return [
            ProposedTestsOffer(
                source="package",
                label=f"Download the package's tests, proposed from {made_from}",
                useful=f"the {TEST_ENTRY_POINT} and {FOLDER}/ validation made from {your} example script's calls and "
                "judges every answer with: read them, change a tolerance, or add tests beside them and "
                f"submit them back in the package (then they are {yours})",
                filename=f"{paper}-{_script_stem(TEST_ENTRY_POINT)}-proposed-from-{_script_stem(made_from)}.zip",
                test_file=TEST_ENTRY_POINT,
            )
        ]
    offers = []
    same = (
        "tests" in sources
        and "example" in sources
        and _calls(_recording(revision, "tests")) == _calls(_recording(revision, "example"))
    )
    if "tests" in sources:
        offers.append(
            ProposedTestsOffer(
                source="tests",
                label=f"Download the replay of {your} tests' calls"
                + (f" ({your} example script {script} made the same calls)" if same else ""),
                useful=f"each call of a snippet's function {your} tests made, replayed on its recorded inputs and "
                f"compared with everything the reference returned and changed: useful beside {your} tests, as it "
                "checks every value of those calls where their assertions may check only some",
                filename=f"{paper}-replay-of-your-tests.zip",
                test_file=TEST_FILE,
            )
        )
    if "example" in sources and not same:
        offers.append(
            ProposedTestsOffer(
                source="example",
                label=f"Download the replay of the calls of {your} example script {script}",
                useful=f"the same, for the calls {script} made: useful where the script reaches inputs or code "
                f"{your} tests do not (the mutation score above lists what only the proposed tests kill), or as a "
                "start when there are no tests yet",
                filename=f"{paper}-replay-of-{_script_stem(script)}.zip",
                test_file=EXAMPLE_TEST_FILE,
            )
        )
    return offers


def proposed_tests_archive(*, revision: Revision, source: str = "tests") -> bytes:
    """The zip of the revision's proposed replay tests made from the recording of its tests' run, or (`source`
    "example") of its example script's, or (`source` "package") the package's own tests validation proposed;
    ApplicationError when there is none such."""
    if source == "package":
        files = _package_tests(revision=revision)
    else:
        files = _replay_files(revision=revision, source=source)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return buffer.getvalue()


def _package_tests(*, revision: Revision) -> dict[str, bytes]:
    """The test entry point and rcb_replay/ validation made for a package without tests, as the revision holds them."""
    if not tests_proposed_from(revision=revision):
        raise ApplicationError(f"revision r{revision.number} has tests of its own: validation proposed none for it")
    return {
        path: blob_read(sha256=digest)
        for path, digest in sorted(revision.files.items())
        if path == TEST_ENTRY_POINT or path.startswith(f"{FOLDER}/")
    }


def _replay_files(*, revision: Revision, source: str) -> dict[str, bytes]:
    if source not in SOURCES:
        raise ApplicationError(f"proposed tests come from {' or '.join(SOURCES)}, not {source!r}")
    recording = _recording(revision, source)
    if not _sealed(recording):
        script = recording.get("script", "")
        ran = f"its example script {script}" if source == "example" and script else f"its {source}"
        raise ApplicationError(
            f"revision r{revision.number} has no recorded calls of {ran} to replay: validation records them when "
            "that run calls a snippet's function with plain arguments"
        )
    paper = f"{revision.metadata.get('id', revision.submission.title)} (revision r{revision.number})"
    if source == "example":  # its own test file and recorded files' names: it unpacks beside the tests' replay
        return proposed_tests_files(
            recording=recording, paper=paper, test_file=EXAMPLE_TEST_FILE, recorded_prefix=EXAMPLE_PREFIX
        )
    return proposed_tests_files(recording=recording, paper=paper)


def proposed_tests_files(
    *, recording: dict, paper: str, test_file: str = TEST_FILE, recorded_prefix: str = ""
) -> dict[str, bytes]:
    """The proposed replay tests of a recording (the tests' run's, or an example script's: its "script" names it),
    as files of the package's folder: `test_file` and, beside it, the rcb_replay/ folder, its recorded files' names
    starting with `recorded_prefix`. `paper` names the package in the file's first line. Only the sealed functions
    are replayed (none: the file has no call to replay)."""
    from evaluation.judging.sealed import SNAPSHOT_CAPS

    sealed = _sealed(recording)
    script = recording.get("script", "")
    targets = [
        {"key": t["key"], "file": t["file"], "qualname": t["qualname"], "recorded": _recorded_name(t, recorded_prefix)}
        for t in sealed
    ]
    compare_source = (
        resources.files("evaluation.judging")
        .joinpath("compare.py")
        .read_text(encoding="utf-8")
        .replace("from sandbox.programs import snapshot", "from rcb_replay import snapshot")
    )
    tolerance = proposed_tolerance(recording)
    rtol, atol, tolerances = tolerance.rtol, tolerance.atol, tolerance.by_dtype or {}
    test = TEST_SOURCE.format(
        paper=paper,
        source=f"the example script {script}" if script else "its tests",
        test_file=test_file,
        rtol=rtol,
        atol=atol,
        float32_rtol=FLOAT32_MOST[0],
        float32_atol=FLOAT32_MOST[1],
        float64_rtol=FLOAT64_MOST[0],
        float64_atol=FLOAT64_MOST[1],
        tolerances="".join(f'    "{dtype}": ({low!r}, {high!r}),\n' for dtype, (low, high) in tolerances.items()),
        caps=dict(SNAPSHOT_CAPS),
        targets=targets,
    )
    files = {
        test_file: test.encode("utf-8"),
        f"{FOLDER}/__init__.py": b"",
        f"{FOLDER}/snapshot.py": resources.files(programs).joinpath("snapshot.py").read_bytes(),
        f"{FOLDER}/attributes.py": resources.files(programs).joinpath("attributes.py").read_bytes(),
        f"{FOLDER}/compare.py": compare_source.encode("utf-8"),
    }
    for target in sealed:
        name = _recorded_name(target, recorded_prefix)
        files[f"{FOLDER}/inputs/{name}"] = blob_read(sha256=target["inputs"])
        files[f"{FOLDER}/outputs/{name}"] = blob_read(sha256=target["outputs"])
    return files
