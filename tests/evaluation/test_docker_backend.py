"""The docker sandbox backend against a real engine: the demo paper passes, environments are built once, and runs
have no network, no root, no writable root filesystem, and leave no container behind."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import socketserver
import threading
import time
import uuid

import pytest

import docker
from benchmarks.paper2code import passes
from sandbox import EnvironmentBuildError, Limits, backend_get
from sandbox.harness import harness_command, harness_files, harness_verdict, nonce_new
from tests.conftest import DEMO_PSET, service_missing

DAMPNEST = DEMO_PSET / "dampnest"
REQUIREMENTS = (DAMPNEST / "paper2code_requirements.txt").read_text()
ENV_HASH = hashlib.sha256(f"rcb-test-docker\n{REQUIREMENTS}".encode()).hexdigest()
QUICK = Limits(wall_seconds=20, memory_bytes=256 * 1024 * 1024, disk_bytes=32 * 1024 * 1024)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    backend = backend_get("docker", cache_dir=tmp_path_factory.mktemp("docker-cache"))
    ok, reason = backend.available()
    if not ok:
        service_missing("Docker", reason)
    return backend


@pytest.fixture(scope="module")
def environment(backend):
    return backend.environment_build(env_hash=ENV_HASH, requirements=REQUIREMENTS)


@pytest.fixture
def session(backend, environment):
    with backend.session(environment) as session:
        yield session


def run_python(session, source: str, limits: Limits = QUICK):
    return session.run(
        files={"probe.py": source.encode()}, command=[session.environment.python, "probe.py"], limits=limits
    )


def sandbox_containers(env_hash: str) -> list:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": ["rcb.sandbox=1", f"rcb.env={env_hash}"]})
    finally:
        client.close()


def host_addresses() -> list[str]:
    """Loopback and, if the host has a route out, its outward address: a server on either must be out of reach."""
    addresses = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # sends nothing; only picks the outward interface
            addresses.append(probe.getsockname()[0])
        except OSError:
            pass
    return addresses


def test_the_demo_paper_passes_its_tests_through_the_harness(session):
    files = {path.name: path.read_bytes() for path in DAMPNEST.iterdir() if path.is_file()}
    nonce = nonce_new()

    result = session.run(
        files=files | harness_files(nonce),
        command=harness_command(session.environment.python, "paper2code_test.py"),
        limits=Limits(),
    )

    verdict = harness_verdict(result.stdout, nonce)
    assert verdict.completed, (verdict.reason, result.stderr[-2000:])
    assert passes(exit_code=result.exit_code, stdout=verdict.stdout, stderr=result.stderr, timed_out=result.timed_out)
    assert result.backend == "docker"


def test_the_environment_image_is_built_once_and_reused(backend, environment):
    start = time.monotonic()
    again = backend.environment_build(env_hash=ENV_HASH, requirements=REQUIREMENTS)

    assert time.monotonic() - start < 5
    assert again.location == environment.location == f"rcb-env:{ENV_HASH[:20]}"
    assert again.python == "/opt/env/bin/python"


def test_empty_requirements_still_give_a_tagged_environment(backend):
    env_hash = hashlib.sha256(b"rcb-test-docker-empty").hexdigest()
    environment = backend.environment_build(env_hash=env_hash, requirements="# nothing to install\n")

    assert environment.location == f"rcb-env:{env_hash[:20]}"
    with backend.session(environment) as empty:
        assert run_python(empty, "import sys; print(sys.prefix)").stdout.strip() == "/opt/env"


def test_a_run_has_no_network(session):
    class Reply(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(b"host\n")

    with socketserver.ThreadingTCPServer(("0.0.0.0", 0), Reply) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        try:
            result = run_python(
                session,
                f"""
import socket
for host in {host_addresses()!r}:
    try:
        socket.create_connection((host, {port}), timeout=3).recv(5)
        print("connected", host)
    except OSError as exc:
        print("blocked", host, exc)
try:
    socket.getaddrinfo("example.org", 443)
    print("resolved")
except OSError as exc:
    print("no dns", exc)
""",
            )
        finally:
            server.shutdown()

    assert result.exit_code == 0, result.stderr
    assert "connected" not in result.stdout and "resolved" not in result.stdout
    assert result.stdout.count("blocked") == len(host_addresses()) and "no dns" in result.stdout


def test_a_run_is_not_root_and_cannot_write_outside_its_work_folder(session):
    result = run_python(
        session,
        """
import os
print("uid", os.getuid(), os.getgid())
for path in ("/probe", "/etc/probe", "/opt/env/probe", "/usr/lib/probe"):
    try:
        open(path, "w").close()
        print("wrote", path)
    except OSError as exc:
        print("refused", path, exc.strerror)
open("written-here", "w").write("ok")
print("work", open("written-here").read(), os.getcwd())
""",
    )

    assert result.exit_code == 0, result.stderr
    assert "uid 10001 10001" in result.stdout
    assert "wrote" not in result.stdout and result.stdout.count("Read-only file system") == 4
    assert "work ok /work" in result.stdout


def test_each_run_gets_a_fresh_work_folder(session):
    run_python(session, "open('left-behind', 'w').write('x'); open('/tmp/left-behind', 'w').write('x')")

    result = run_python(session, "import os; print(sorted(os.listdir('.')), os.listdir('/tmp'))")

    assert result.stdout.strip() == "['probe.py'] []"


def test_a_failing_requirement_raises_with_pips_error(backend):
    env_hash = hashlib.sha256(f"rcb-test-docker-broken-{uuid.uuid4()}".encode()).hexdigest()

    with pytest.raises(EnvironmentBuildError) as failure:
        backend.environment_build(env_hash=env_hash, requirements="this-package-does-not-exist-rcb==1.0\n")

    message = str(failure.value)
    assert "this-package-does-not-exist-rcb==1.0" in message
    assert "No matching distribution" in message
    assert "this-package-does-not-exist-rcb" in (backend.cache_dir / "images" / f"{env_hash}.log").read_text()


def test_no_container_is_left_after_runs_that_end_finish_fail_or_time_out(session):
    run_python(session, "print('fine')")
    run_python(session, "raise SystemExit(3)")
    timed = run_python(session, "while True: pass", Limits(wall_seconds=1))

    assert timed.timed_out and timed.exit_code is None
    assert sandbox_containers(session.environment.hash) == []


@pytest.mark.exclusive  # it removes every sandbox container older than a second: another test's runs too
def test_orphaned_sandboxes_are_removed_and_nothing_else(backend):
    """Containers of a worker killed mid-run stay on the engine; the next worker process removes the ones older
    than any run may last, and leaves younger sandboxes (another worker's live runs) and other containers alone."""
    client = docker.from_env()
    base = backend.base_image
    orphan = client.containers.run(
        base, ["sleep", "300"], detach=True, network_disabled=True, labels={"rcb.sandbox": "1"}
    )
    other = client.containers.run(base, ["sleep", "300"], detach=True, network_disabled=True)
    try:
        assert backend.orphans_remove(older_than=3600) == 0  # a live run of another worker: kept
        orphan.reload()
        time.sleep(1.1)
        assert backend.orphans_remove(older_than=1) == 1
        with pytest.raises(docker.errors.NotFound):
            orphan.reload()
        other.reload()
        assert other.status == "running"
    finally:
        for container in (orphan, other):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        client.close()
