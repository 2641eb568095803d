"""The contract of `sandbox.SandboxBackend`, held by every backend (bwrap, docker and local, cold and through the fork
server where it has one): environments built once and reused, a fresh work folder per run with its files, the exit
code and both streams reported, the wall clock and the output cap enforced, agent workspaces kept between commands,
and an environment removed and built again. What an isolating backend must also refuse (network, the host's files and
secrets, resources) is the attack suite's (test_sandbox_attacks.py, on `ISOLATING_BACKENDS`); local isolates nothing
and says so."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from benchmarks.services.blobs import environment_hash
from sandbox import Limits, SandboxBackend, backend_class
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS

QUICK = Limits(wall_seconds=20, memory_bytes=512 * 1024 * 1024, disk_bytes=32 * 1024 * 1024)
# A warm start needs an environment whose preloads load ctypes (numpy), as real tests have; without it a run is cold.
WARM_PRELUDE = "import numpy\n"


@pytest.fixture(scope="module", params=[*ISOLATING_BACKENDS, *(f"{name}-fork" for name in ISOLATING_BACKENDS), "local"])
def session(request, sandbox_cache):
    name, _, fork = request.param.partition("-")
    backend = sandbox_backend_or_missing(name, sandbox_cache)
    backend.forkserver = bool(fork)
    requirements = "numpy" if fork else ""
    env_hash = environment_hash(requirements) if fork else hashlib.sha256(b"").hexdigest()
    environment = backend.environment_build(env_hash=env_hash, requirements=requirements)
    with backend.session(environment) as session:
        yield session


def run_python(session, source: str, limits: Limits = QUICK, **files: bytes):
    prelude = WARM_PRELUDE if session.backend.forkserver else ""
    return session.run(
        files={"probe.py": (prelude + source).encode(), **files},
        command=[session.environment.python, "-B", "probe.py"],
        limits=limits,
    )


def test_every_backend_implements_the_contract():
    for name in (*ISOLATING_BACKENDS, "local"):
        backend = backend_class(name)
        assert issubclass(backend, SandboxBackend) and backend.name == name
        for method in ("available", "environment_build", "environment_remove", "session_open"):
            assert getattr(backend, method) is not getattr(SandboxBackend, method), (name, method)
        assert backend.unsafe == (name not in ISOLATING_BACKENDS), name


def test_a_built_environment_is_reused(session):
    backend, environment = session.backend, session.environment

    again = backend.environment_build(env_hash=environment.hash, requirements="numpy" if backend.forkserver else "")

    assert (again.location, again.python, again.backend) == (environment.location, environment.python, backend.name)
    backend.environment_used(env_hash=environment.hash)
    assert backend.environment_kept(env_hash=environment.hash)


def test_a_run_reports_its_exit_code_and_both_streams(session):
    result = run_python(
        session,
        "import sys\nprint(open('data.txt').read())\nprint('to stderr', file=sys.stderr)\nraise SystemExit(3)\n",
        **{"data.txt": b"the run's own file"},
    )

    assert result.exit_code == 3 and not result.timed_out, result.stderr[-2000:]
    assert result.stdout.strip() == "the run's own file"
    assert "to stderr" in result.stderr
    assert result.backend == session.backend.name


def test_each_run_gets_a_fresh_work_folder(session):
    run_python(session, "open('left-behind', 'w').write('x')")

    result = run_python(session, "import os\nprint(sorted(os.listdir('.')))")

    assert result.stdout.strip() == "['probe.py']", result.stderr[-2000:]


def test_the_wall_clock_ends_a_run(session):
    result = run_python(session, "while True:\n    pass\n", Limits(wall_seconds=1))

    assert result.timed_out and result.exit_code is None


def test_output_beyond_the_cap_is_dropped_and_said(session):
    result = run_python(session, "print('x' * 200_000)", Limits(wall_seconds=20, output_bytes=10_000))

    assert result.output_truncated
    assert 10_000 <= len(result.stdout) < 20_000


def test_an_agents_workspace_is_kept_between_its_commands(session, tmp_path: Path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "given.txt").write_text("from the task\n")
    try:
        wrote = session.command_run(workspace=workspace, command="cat given.txt > copied.txt", limits=QUICK)
        read = session.command_run(workspace=workspace, command="cat copied.txt; exit 4", limits=QUICK)
    finally:
        session.workspace_close(workspace=workspace)

    assert wrote.exit_code == 0, wrote.stderr[-2000:]
    assert (read.exit_code, read.stdout) == (4, "from the task\n")
    assert (workspace / "copied.txt").read_text() == "from the task\n"


@pytest.mark.parametrize("name", [*ISOLATING_BACKENDS, "local"])
def test_a_removed_environment_is_built_again_on_demand(name, sandbox_cache):
    """A throwaway environment of its own hash, so no other test's environment goes away."""
    backend = sandbox_backend_or_missing(name, sandbox_cache)
    backend.forkserver = False
    env_hash = hashlib.sha256(b"rcb-conformance-removed").hexdigest()

    built = backend.environment_build(env_hash=env_hash, requirements="")
    assert backend.environment_remove(env_hash=env_hash)
    again = backend.environment_build(env_hash=env_hash, requirements="")

    assert again.location == built.location
    with backend.session(again) as session:
        assert run_python(session, "print('ok')").stdout.strip() == "ok"
    backend.environment_remove(env_hash=env_hash)


def test_orphans_of_a_live_worker_are_left_alone(session):
    assert session.backend.orphans_remove(older_than=24 * 3600) == 0
