"""SANDBOX_BACKEND=auto: docker, else bwrap, else a refusal that says why; `local` only when named, and `make run`
still starts on a machine with neither (explicitly local, loudly)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import NoSandboxError, backend_get
from tests.conftest import REPO, free_port, service_missing


def _no_sandbox_env(tmp_path: Path) -> dict[str, str]:
    """What a machine without Docker and bubblewrap looks like: no engine at DOCKER_HOST, and a PATH holding every
    program of this one but bwrap."""
    programs = tmp_path / "bin"
    if not programs.exists():
        programs.mkdir()
        for folder in reversed(os.environ.get("PATH", "").split(os.pathsep)):
            if os.path.isdir(folder):
                for name in os.listdir(folder):
                    if name != "bwrap":
                        (programs / name).unlink(missing_ok=True)
                        (programs / name).symlink_to(Path(folder, name))
    return {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock", "PATH": str(programs)}


def test_auto_with_no_working_sandbox_refuses_and_says_why(tmp_path, monkeypatch):
    for name, value in _no_sandbox_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(NoSandboxError) as refused:
        backend_get("auto", cache_dir=tmp_path / "cache")
    message = str(refused.value)
    assert "untrusted code never runs without one" in message
    assert "docker: the Docker engine does not answer" in message and "bwrap: " in message
    assert "set SANDBOX_BACKEND=local explicitly" in message


def test_auto_picks_a_real_sandbox_never_local(sandbox_cache):
    try:
        backend = backend_get("auto", cache_dir=sandbox_cache)
    except NoSandboxError as exc:
        service_missing("a sandbox backend (docker or bwrap)", str(exc))
    assert backend.name in ("docker", "bwrap") and not backend.unsafe


def _sandbox_check(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "sandbox_check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_sandbox_check_exits_3_when_auto_finds_nothing_and_1_when_the_named_backend_fails(tmp_path):
    env = {**_no_sandbox_env(tmp_path), "SANDBOX_CACHE_DIR": str(tmp_path / "cache")}
    auto = _sandbox_check({**env, "SANDBOX_BACKEND": "auto"})
    assert auto.returncode == 3, auto.stdout + auto.stderr
    assert "SANDBOX_BACKEND=auto selects: none (SANDBOX_BACKEND=auto found no sandbox" in auto.stdout
    assert "local   works" in auto.stdout  # listed, never picked
    named = _sandbox_check({**env, "SANDBOX_BACKEND": "docker"})
    assert named.returncode == 1 and "selects: docker, which does not work here" in named.stdout
    local = _sandbox_check({**env, "SANDBOX_BACKEND": "local"})
    assert local.returncode == 0 and "selects: local - NO ISOLATION" in local.stdout


def test_make_run_starts_without_docker_or_bwrap_and_warns_that_nothing_is_isolated(tmp_path):
    venv = Path(sys.executable).parent.parent
    port = free_port()
    env = {
        **os.environ,
        **_no_sandbox_env(tmp_path),
        "VENV": str(venv),
        "HOST": f"127.0.0.1:{port}",
        "VAR_DIR": str(tmp_path / "var"),
        "SANDBOX_CACHE_DIR": str(tmp_path / "cache"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_BROKER_URL": "filesystem://",
    }
    env.pop("SANDBOX_BACKEND", None)
    log = tmp_path / "run.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["/bin/sh", "scripts/run.sh"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        # The server starts first; the sandbox check (and its warning) follows its first answer (scripts/run.sh).
        while time.monotonic() < deadline and not (
            "Quit the server with" in log.read_text() and "WITHOUT ANY ISOLATION" in log.read_text()
        ):
            assert process.poll() is None, log.read_text()
            time.sleep(0.5)
        output = log.read_text()
        assert "Quit the server with" in output, output
        assert "sets SANDBOX_BACKEND=local" in output and "WITHOUT ANY ISOLATION" in output
        assert "SANDBOX_BACKEND=auto selects: none" in output
        while time.monotonic() < deadline and " ready." not in log.read_text():  # the worker and its pool are up
            assert process.poll() is None, log.read_text()
            time.sleep(0.5)
        assert " ready." in log.read_text(), log.read_text()
        worker = _worker_pids(process.pid)
        assert len(worker) >= 2, "the worker's main process and its pool"
        # Stopping `make run` (a terminal's Ctrl-C or a TERM to its group) stops everything promptly: the worker's
        # main process once hung in "Warm shutdown" for over 30 s after its pool died, deaf to TERM and QUIT. A
        # stopped main process is as deaf (its signals wait, but for SIGKILL): the script must not wait for it.
        os.kill(worker[0], signal.SIGSTOP)
        stopped = time.monotonic()
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        while time.monotonic() - stopped < 30 and any(Path(f"/proc/{pid}").exists() for pid in worker):
            time.sleep(0.1)
        left = [pid for pid in worker if Path(f"/proc/{pid}").exists()]
        assert left == [] and time.monotonic() - stopped < 12, (left, time.monotonic() - stopped, log.read_text())
    finally:
        for group in {process.pid, *(os.getpgid(pid) for pid in _worker_pids(process.pid))}:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)  # whatever a failed stop left
        process.wait()


def _worker_pids(script: int) -> list[int]:
    """The Celery processes `run.sh` (pid `script`) started: its worker and the worker's pool, alive."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(children.get(script, []))
    while todo:
        pid = todo.pop(0)  # breadth first: the main process before its pool
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"celery" in command:
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found
