"""The fork server across a set's papers, on bwrap and docker: items of papers with different imports interleaved on
one session start the zygote again at most once per import set it has not seen (and not at all when the release's
imports were announced), never turning the environment cold for good; a helper the test calls has its lazy imports
warmed, found from the test's own code."""

from __future__ import annotations

import json

import pytest

from benchmarks.services.blobs import environment_hash
from sandbox.forkserver import ZYGOTE_RESTARTS, helper_calls, preload_modules
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS
from tests.evaluation.test_sandbox_attacks import LIMITS

# One paper per stdlib module beside numpy (real tests import numpy, whose ctypes a fork needs): ten import sets,
# more than ZYGOTE_RESTARTS restarts would allow under the old rule (one restart per new set, cold after 8).
PAPER_IMPORTS = [
    "fractions",
    "decimal",
    "statistics",
    "difflib",
    "csv",
    "fnmatch",
    "colorsys",
    "bisect",
    "shlex",
    "calendar",
]


def paper_files(module: str, body: str = "") -> dict[str, bytes]:
    entry = (
        f"import json, sys\nimport numpy\nimport {module}\nimport model\n"
        "found = {'pydoc_loaded': 'pydoc' in sys.modules}\n" + body + "print('REPORT ' + json.dumps(found))\n"
    )
    return {"paper2code_test.py": entry.encode(), "model.py": b"VALUE = 1\n"}


def report(session, files) -> tuple[dict, bool]:
    result = session.run(files=files, command=[session.environment.python, "-B", "paper2code_test.py"], limits=LIMITS)
    assert result.exit_code == 0, result.stderr[-2000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT ")), result.forked


@pytest.fixture(params=ISOLATING_BACKENDS)
def backend(request, sandbox_cache):
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    backend.forkserver = True
    return backend


def session_of(backend):
    return backend.session(backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy"))


def test_papers_interleaved_restart_once_per_new_import_set_and_stay_warm(backend):
    with session_of(backend) as session:
        rounds = []
        for _ in range(2):
            for module in PAPER_IMPORTS:
                assert report(session, paper_files(module))[1], session.starts
            rounds.append(list(session.starts))
        assert session.forking and not session.cold_reason
        assert len(session.starts) == len(PAPER_IMPORTS) > ZYGOTE_RESTARTS + 1  # the old rule: cold after the 9th
        assert rounds[0] == rounds[1]  # every set seen: the second round starts nothing
        assert [s.reason for s in session.starts] == ["first"] + ["new imports"] * (len(PAPER_IMPORTS) - 1)
        assert "calendar" in session.starts[-1].detail
        assert (session.items_warm, session.items_cold) == (2 * len(PAPER_IMPORTS), 0)


def test_imports_announced_at_the_start_need_no_restart(backend):
    with session_of(backend) as session:
        sets = [paper_files(module) for module in PAPER_IMPORTS]
        session.preload_expect(modules=[m for files in sets for m in preload_modules(files)])
        for files in sets:
            assert report(session, files)[1]
        assert [s.reason for s in session.starts] == ["first"]


def test_a_helper_the_test_calls_has_its_lazy_imports_warmed(backend):
    """numpy.info imports pydoc on its first call: a test calling it finds pydoc loaded in its fork; one that does
    not call it, in a session of its own, does not."""
    calling = paper_files("fractions", "import io\nnumpy.info(numpy.zeros, output=io.StringIO())\n")
    assert "numpy.info" in helper_calls(calling, "paper2code_test.py")
    with session_of(backend) as session:
        found, forked = report(session, calling)
        assert forked and found["pydoc_loaded"]
        assert "pydoc" in session._forkserver.warmed
    with session_of(backend) as session:
        found, forked = report(session, paper_files("fractions"))
        assert forked and not found["pydoc_loaded"]


def test_release_imports_leave_out_every_snippet_body_and_helpers_come_from_the_test():
    files = {
        "paper2code_test.py": b"import numpy as np\nfrom torch.testing import assert_close\nimport model\n"
        b"assert_close(model.f(), 1)\nnp.testing.assert_allclose(1, 1)\nmodel.f()\n",
        "model.py": b'import scipy.linalg\n\ndef f():\n    # <paper2code name="x">\n    import jax\n'
        b'    return 1\n    # </paper2code name="x">\n',
    }
    assert preload_modules(files) == ["numpy", "torch.testing", "torch.testing.assert_close", "scipy.linalg", "jax"]
    assert preload_modules(files, skipped=[("model.py", 4, 7)]) == [
        "numpy",
        "torch.testing",
        "torch.testing.assert_close",
        "scipy.linalg",
    ]
    assert helper_calls(files, "paper2code_test.py") == ["torch.testing.assert_close", "numpy.testing.assert_allclose"]


def test_a_from_import_never_replaces_an_attribute_for_other_papers(backend):
    """`from curses import has_key` takes curses's builtin function; the module curses/has_key.py of the same name,
    preloaded, would replace it in every fork, so another paper's `curses.has_key` would be a module. An attribute
    is found absent and left alone."""
    with session_of(backend) as session:
        taker, _ = report(
            session, paper_files("numpy", "from curses import has_key\nfound['kind'] = type(has_key).__name__\n")
        )
        other, forked = report(session, paper_files("curses", "found['kind'] = type(curses.has_key).__name__\n"))
        assert forked and "curses.has_key" in session._forkserver.absent
    assert taker["kind"] == other["kind"] == "builtin_function_or_method"


@pytest.fixture
def site_module(sandbox_cache):
    """`site_module(name, source)` puts a module in the bwrap numpy environment's site-packages (as a package the
    task's requirements installed would be), removed again after the test."""
    import shutil
    import uuid
    from pathlib import Path

    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    site = next(Path(environment.location).glob("lib/python3*/site-packages"))
    made: list[Path] = []

    def put(source: str, package: bool = False) -> str:
        name = f"rcb_site_{uuid.uuid4().hex[:8]}"
        path = site / name / "__init__.py" if package else site / f"{name}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(source)
        made.append(path.parent if package else path)
        return name

    yield put
    for path in made:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_a_package_that_starts_a_thread_costs_one_start_for_all_its_from_imports(sandbox_cache, site_module):
    """`from pkg import a, b, ...` lists pkg.a, pkg.b, ...; each imports pkg, whose import starts a thread: found
    once, for pkg and everything in it, not one start per name."""
    package = site_module(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n", package=True
    )
    names = ", ".join(f"n{i}" for i in range(12))
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = True
    with session_of(backend) as session:
        report(
            session, paper_files("numpy", f"try:\n    from {package} import {names}\nexcept ImportError:\n    pass\n")
        )
        assert [start.reason for start in session.starts] == ["threads", "first"]


def test_a_sparse_mapping_of_a_preload_is_not_made_resident(sandbox_cache, site_module):
    """The zygote collapses its memory into 2 MB pages only where it is resident already: a preload that maps
    400 MB and touches one byte per 2 MB (a reserved arena) stays under a megabyte, not 400 MB of the zygote's
    memory limit."""
    sparse = site_module(
        "import mmap\nARENA = mmap.mmap(-1, 400 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "for offset in range(0, 400 << 20, 2 << 20):\n    ARENA[offset] = 1\n"
    )
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = True
    with session_of(backend) as session:
        _, forked = report(session, paper_files(sparse))
        server = session._forkserver
        memory = server.zygote.cgroups.folders["memory"]
        used = next(
            int((memory / f).read_text()) for f in ("memory.current", "memory.usage_in_bytes") if (memory / f).exists()
        )
    assert forked
    assert server.huge_pages < 64 << 20 and used < 300 << 20, (server.huge_pages >> 20, used >> 20)
