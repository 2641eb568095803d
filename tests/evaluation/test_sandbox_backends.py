"""The backends run real tasks: the demo papers' reference passes on bwrap, a masked snippet fails, local warns."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest

from benchmarks.paper2code import mask, passes
from benchmarks.paper2code.pset import PaperPackage, read_pset
from sandbox import Environment, Limits, SandboxError, Session, backend_get
from sandbox.harness import harness_command, harness_files, harness_verdict, nonce_new
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

PAPERS = {paper.id: paper for paper in read_pset(DEMO_PSET)}
LIMITS = Limits(
    wall_seconds=60,
    memory_bytes=1024 * 1024 * 1024,
    processes=64,
    output_bytes=1024 * 1024,
    disk_bytes=64 * 1024 * 1024,
)


def run_passes(session: Session, files: dict[str, bytes], entry_point: str = "paper2code_test.py") -> tuple[bool, str]:
    """Run `files` through the harness as production does: whether it passed, and the output to explain why not."""
    nonce = nonce_new()
    result = session.run(
        files={**files, **harness_files(nonce)},
        command=harness_command(session.environment.python, entry_point),
        limits=LIMITS,
    )
    verdict = harness_verdict(result.stdout, nonce)
    passed = (
        passes(exit_code=result.exit_code, stdout=verdict.stdout, stderr=result.stderr, timed_out=result.timed_out)
        and verdict.completed
    )
    return passed, (verdict.stdout + result.stderr)[-3000:]


def environment_of(backend, requirements: str) -> Environment:
    env_hash = hashlib.sha256(requirements.encode()).hexdigest()
    return backend.environment_build(env_hash=env_hash, requirements=requirements)


@pytest.fixture(scope="session")
def bwrap(sandbox_cache):
    return sandbox_backend_or_missing("bwrap", sandbox_cache)


@pytest.fixture(scope="session")
def paper_session(bwrap):
    """The session of a paper's environment, built from its requirements once per distinct requirements."""
    sessions: dict[str, Session] = {}

    def session_for(paper: PaperPackage) -> Session:
        if paper.requirements not in sessions:
            sessions[paper.requirements] = bwrap.session_open(environment_of(bwrap, paper.requirements))
        return sessions[paper.requirements]

    yield session_for
    for session in sessions.values():
        session.close()


@pytest.mark.parametrize("paper_id", sorted(PAPERS))
def test_demo_reference_passes_on_bwrap(paper_session, paper_id):
    paper = PAPERS[paper_id]
    passed, output = run_passes(paper_session(paper), dict(paper.files))
    assert passed, output


@pytest.mark.parametrize("paper_id", sorted(PAPERS))
def test_demo_masked_snippet_fails_on_bwrap(paper_session, paper_id):
    paper = PAPERS[paper_id]
    path, annotated = next(iter(paper.annotated.items()))
    files = dict(paper.files)
    files[path] = mask(annotated, annotated.snippets[0]).encode()
    passed, output = run_passes(paper_session(paper), files)
    assert not passed, output


def test_bwrap_runs_as_nobody_without_network_on_a_read_only_root(paper_session):
    session = paper_session(PAPERS["trimmed-infonce"])
    probe = """
import json, os, socket
def writable(path):
    try:
        with open(os.path.join(path, "probe"), "w"):
            return True
    except OSError:
        return False
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(),
                  "interfaces": [name for _, name in socket.if_nameindex()],
                  "writable": {path: writable(path) for path in (".", "/tmp", "/", "/etc", "/usr", "/root")},
                  "environment": sorted(os.environ)}))
"""
    nonce = nonce_new()
    result = session.run(
        files={"paper2code_test.py": probe.encode(), **harness_files(nonce)},
        command=harness_command(session.environment.python, "paper2code_test.py"),
        limits=LIMITS,
    )
    seen = json.loads(harness_verdict(result.stdout, nonce).stdout)
    assert (seen["uid"], seen["gid"]) == (65534, 65534)
    assert seen["interfaces"] == ["lo"]
    assert seen["writable"] == {".": True, "/tmp": True, "/": False, "/etc": False, "/usr": False, "/root": False}
    assert "DJANGO_SETTINGS_MODULE" not in seen["environment"]


def test_bwrap_removes_its_cgroups(bwrap):
    paper = PAPERS["trimmed-infonce"]
    before = set(run_cgroups_left())  # the fork servers of other open sessions
    session = bwrap.session_open(environment_of(bwrap, paper.requirements))
    try:
        passed, output = run_passes(session, dict(paper.files))
        assert passed, output
        # Every run's own are gone; only the warm fork server's stay while the session lives.
        zygote = session._forkserver
        assert set(run_cgroups_left()) - before == set(zygote.cgroups.folders.values() if zygote else [])
    finally:
        session.close()
    assert set(run_cgroups_left()) == before


def run_cgroups_left() -> list[Path]:
    """This worker's run cgroups, wherever the backend may have made them (`rcb/<pid>-...`)."""
    left: list[Path] = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, own = line.split(":", 2)
        for controller in filter(None, controllers.split(",")):
            mount = Path("/sys/fs/cgroup") / controller
            for base in {mount, mount / own.lstrip("/")}:
                left += (base / "rcb").glob(f"{os.getpid()}-*")
    return left


def test_bwrap_reports_a_broken_environment_as_infrastructure(bwrap, tmp_path):
    missing = tmp_path / "no-such-venv"
    broken = Environment(hash="missing", backend="bwrap", location=str(missing), python=str(missing / "bin/python"))
    with pytest.raises(SandboxError):
        bwrap.session_open(broken).run(
            files={"paper2code_test.py": b""}, command=[broken.python, "-c", "pass"], limits=LIMITS
        )


def test_local_backend_warns_on_every_use(tmp_path, caplog):
    backend = backend_get("local", cache_dir=tmp_path)
    paper = PAPERS["trimmed-infonce"]
    with (
        caplog.at_level(logging.WARNING, logger="sandbox.local"),
        backend.session(environment_of(backend, paper.requirements)) as session,
    ):
        for _ in range(2):
            passed, output = run_passes(session, dict(paper.files))
            assert passed, output
    warnings = [record for record in caplog.records if "WITHOUT isolation" in record.getMessage()]
    assert len(warnings) == 2
