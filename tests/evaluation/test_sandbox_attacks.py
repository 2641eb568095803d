"""Hostile answers against the real sandboxes: each attack is contained, never passes, and the sandbox keeps working.

Every attack is a `model.py` imported by a small test entry point and run through the harness exactly as
production runs an answer. Where an attack has something to gain, its `answer()` returns 42 (a pass) only if
it escaped, so "did not pass" and "was contained" are the same assertion.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from benchmarks.paper2code import passes
from benchmarks.services.blobs import environment_hash
from sandbox import ExecResult, Limits, Session
from sandbox.harness import HarnessVerdict, harness_command, harness_files, harness_verdict, nonce_new
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS

MB = 1024 * 1024
LIMITS = Limits(wall_seconds=10, memory_bytes=512 * MB, processes=64, cpus=1.0, output_bytes=1 * MB, disk_bytes=64 * MB)

ENTRY_POINT = """
import unittest

import model


class TestAnswer(unittest.TestCase):
    def test_answer(self):
        self.assertEqual(model.answer(), 42)


if __name__ == "__main__":
    unittest.main()
"""
HONEST = "def answer():\n    return 42\n"


@dataclass(frozen=True)
class Run:
    result: ExecResult
    verdict: HarnessVerdict
    seconds: float

    @property
    def passed(self) -> bool:
        result = self.result
        return (
            passes(
                exit_code=result.exit_code, stdout=self.verdict.stdout, stderr=result.stderr, timed_out=result.timed_out
            )
            and self.verdict.completed
        )

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr


def run(session: Session, model: str, *, limits: Limits = LIMITS, entry_point: str = ENTRY_POINT) -> Run:
    nonce = nonce_new()
    files = {"paper2code_test.py": entry_point.encode(), "model.py": model.encode(), **harness_files(nonce)}
    start = time.monotonic()
    result = session.run(
        files=files, command=harness_command(session.environment.python, "paper2code_test.py"), limits=limits
    )
    return Run(result, harness_verdict(result.stdout, nonce), time.monotonic() - start)


def assert_contained(attack: Run, session: Session) -> None:
    """The attack did not pass, and an honest answer still passes in the same session right after it."""
    assert not attack.passed, attack.output[-3000:]
    honest = run(session, HONEST)
    assert honest.passed, honest.output[-3000:]


def processes_with(marker: str) -> list[int]:
    """Host processes whose command line contains `marker` (read from /proc, no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def assert_no_process_with(marker: str) -> None:
    deadline = time.monotonic() + 5
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes outlived the run: {left}"


class Forking(Session):
    """A session whose items also import numpy, as real tests do, so each runs in a fork of its fork server; it
    fails an attack that made the fork server give way to cold starts."""

    def __init__(self, session: Session):
        super().__init__(session.backend, session.environment)
        self.session = session

    def run(self, *, files, command, limits) -> ExecResult:
        result = self.session.run(
            files={**files, "imports_numpy.py": b"import numpy\n"}, command=command, limits=limits
        )
        assert self.session.forking, "the fork server gave way to cold starts"
        return result


@pytest.fixture(scope="session", params=[*ISOLATING_BACKENDS, *(f"{name}-fork" for name in ISOLATING_BACKENDS)])
def sandbox(request, sandbox_cache) -> Session:
    """One session per backend for the whole test session: cold (an environment without requirements, whose items
    start a fresh sandbox each) and in forks of the fork server (numpy)."""
    name, _, fork = request.param.partition("-")
    backend = sandbox_backend_or_missing(name, sandbox_cache)
    backend.forkserver = bool(fork)
    requirements = "numpy" if fork else ""
    env_hash = environment_hash(requirements) if fork else hashlib.sha256(b"").hexdigest()
    environment = backend.environment_build(env_hash=env_hash, requirements=requirements)
    with backend.session(environment) as session:
        yield Forking(session) if fork else session


def test_an_honest_answer_passes(sandbox):
    # Without this, every "did not pass" below would also hold for a sandbox that runs nothing.
    honest = run(sandbox, HONEST)
    assert honest.passed, honest.output
    wrong = run(sandbox, "def answer():\n    return 41\n")
    assert not wrong.passed and wrong.verdict.completed


def test_tcp_connection_to_the_host_fails(sandbox):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    accepted: list[object] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, peer = server.accept()
            except TimeoutError:
                continue
            accepted.append(peer)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    attack = f"""
import socket

def answer():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        return 42
    except OSError as exc:
        print("no connection:", exc)
        return 0
"""
    try:
        outcome = run(sandbox, attack)
        time.sleep(0.2)
    finally:
        done.set()
        thread.join()
        server.close()
    assert accepted == []
    assert "no connection" in outcome.output
    assert_contained(outcome, sandbox)


def test_dns_lookup_fails(sandbox):
    attack = """
import socket

def answer():
    try:
        print("resolved:", socket.getaddrinfo("example.com", 443))
        return 42
    except OSError as exc:
        print("no lookup:", exc)
        return 0
"""
    outcome = run(sandbox, attack)
    assert "no lookup" in outcome.output and "resolved" not in outcome.output
    assert_contained(outcome, sandbox)


def test_fork_bomb_stops_at_the_process_limit(sandbox):
    marker = f"rcb-forkbomb-{uuid.uuid4().hex}"
    attack = f'''
import os

def answer():
    forked = 0
    for _ in range(2000):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            # Every child is a shell fork bomb carrying the marker in its command line.
            os.execv("/bin/sh", ["sh", "-c", "f() {{ f | f & }}; f", "{marker}"])
        forked += 1
    print("forked", forked, flush=True)
    return 42 if forked > {LIMITS.processes} else 0
'''
    outcome = run(sandbox, attack)
    assert outcome.seconds < LIMITS.wall_seconds + 5
    forked = re.search(r"forked (\d+)", outcome.result.stdout)
    assert forked and int(forked.group(1)) <= LIMITS.processes, outcome.output[-2000:]
    assert_no_process_with(marker)
    assert_contained(outcome, sandbox)


def test_memory_bomb_stops_at_the_memory_limit(sandbox):
    attack = """
def answer():
    block = bytearray(4 * 1024 ** 3)  # zero-filled, so every page is touched
    return 42 if len(block) else 0
"""
    outcome = run(sandbox, attack)
    assert not outcome.result.timed_out
    assert outcome.result.oom_killed or "MemoryError" in outcome.output, outcome.output[-2000:]
    assert_contained(outcome, sandbox)


def test_filling_the_disk_stops_at_the_disk_limit(sandbox):
    free_before = shutil.disk_usage("/tmp").free
    attack = """
def answer():
    chunk = b"x" * (1024 * 1024)
    total = 0
    for path in ("fill.bin", "/tmp/fill.bin"):
        written = 0
        try:
            with open(path, "wb") as handle:
                for _ in range(2048):
                    handle.write(chunk)
                    handle.flush()
                    written += 1
        except OSError as exc:
            print("stopped", path, exc)
        print("wrote", written, "MB to", path, flush=True)
        total += written
    return 42 if total >= 2048 else 0
"""
    outcome = run(sandbox, attack)
    amounts = [int(mb) for mb in re.findall(r"wrote (\d+) MB", outcome.result.stdout)]
    assert len(amounts) == 2, outcome.output[-2000:]
    assert all(mb <= LIMITS.disk_bytes // MB for mb in amounts), amounts
    assert free_before - shutil.disk_usage("/tmp").free < 1024 * MB
    assert_contained(outcome, sandbox)


def test_writing_outside_the_work_folder_leaves_the_host_untouched(sandbox, tmp_path):
    unique = f"rcb-escape-{uuid.uuid4().hex}"
    targets = [f"/tmp/{unique}", f"/etc/{unique}", f"/root/{unique}", str(tmp_path / unique)]
    if Path(sandbox.environment.location).is_dir():
        targets.append(str(Path(sandbox.environment.location) / unique))
    null_mode = os.stat("/dev/null").st_mode
    attack = f"""
import os

def answer():
    written = []
    for path in {targets!r}:
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            written.append(path)
        except OSError as exc:
            print("refused", path, type(exc).__name__)
    try:
        os.chmod("/dev/null", 0o600)
    except OSError as exc:
        print("refused chmod /dev/null", type(exc).__name__)
    return 42 if len(written) == {len(targets)} else 0
"""
    try:
        outcome = run(sandbox, attack)
        assert [path for path in targets if os.path.lexists(path)] == []
        assert os.stat("/dev/null").st_mode == null_mode
    finally:
        for path in targets:
            if os.path.lexists(path):
                os.remove(path)
        if os.stat("/dev/null").st_mode != null_mode:
            os.chmod("/dev/null", stat.S_IMODE(null_mode))
    assert_contained(outcome, sandbox)


def test_host_secrets_stay_unreadable(sandbox, tmp_path, monkeypatch):
    secret = f"rcb-secret-{uuid.uuid4().hex}"
    in_tmp = tmp_path / "credentials.txt"
    in_root = Path(f"/root/rcb-credentials-{uuid.uuid4().hex}.txt")
    in_tmp.write_text(secret)
    in_root.write_text(secret)
    monkeypatch.setenv("RCB_WORKER_SECRET", secret)
    attack = f"""
import glob
import os

def answer():
    paths = [{str(in_tmp)!r}, {str(in_root)!r}, "/proc/1/environ", "/proc/self/environ"]
    paths += glob.glob("/root/*") + glob.glob({str(tmp_path / "*")!r})
    for path in paths:
        try:
            with open(path, "rb") as handle:
                print("read", path, handle.read())
        except OSError as exc:
            print("refused", path, type(exc).__name__)
    print("environment", dict(os.environ))
    return 0
"""
    try:
        outcome = run(sandbox, attack)
    finally:
        in_root.unlink()
    assert secret not in outcome.output
    assert_contained(outcome, sandbox)


@pytest.mark.parametrize(
    "kill",
    [
        "os.killpg(os.getpgid(0), signal.SIGKILL)",
        "os.kill(os.getppid(), signal.SIGKILL)",
        "os.kill(-1, signal.SIGKILL)",
    ],
    ids=["process-group", "parent", "everything"],
)
def test_killing_the_supervisor_fails_and_spares_the_host(sandbox, kill):
    bystander = subprocess.Popen(["sleep", "60"])
    attack = f"""
import os
import signal

try:
    {kill}
except OSError as exc:
    print("refused:", exc)

def answer():
    return 0
"""
    try:
        outcome = run(sandbox, attack)
        assert bystander.poll() is None, "a host process was killed"
    finally:
        bystander.kill()
        bystander.wait()
    assert_contained(outcome, sandbox)


def test_endless_loop_hits_the_wall_clock_and_leaves_nothing_behind(sandbox):
    marker = f"rcb-orphan-{uuid.uuid4().hex}"
    attack = f'''
import os

def answer():
    # A detached grandchild in its own session, which killing the process group alone would miss.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sh", ["sh", "-c", "while :; do :; done", "{marker}"])
        os._exit(0)
    while True:
        pass
'''
    outcome = run(sandbox, attack, limits=replace(LIMITS, wall_seconds=3))
    assert outcome.result.timed_out and outcome.result.exit_code is None
    assert outcome.seconds < 10
    assert_no_process_with(marker)
    assert_contained(outcome, sandbox)


def test_flooding_the_output_is_capped(sandbox):
    attack = """
import sys

def answer():
    line = "x" * 1023 + "\\n"
    for _ in range(200 * 1024):
        sys.stdout.write(line)
    sys.stdout.flush()
    return 0
"""
    outcome = run(sandbox, attack)
    assert outcome.result.output_truncated
    assert len(outcome.result.stdout.encode()) <= LIMITS.output_bytes
    assert outcome.seconds < LIMITS.wall_seconds + 5
    assert_contained(outcome, sandbox)


@pytest.mark.parametrize("exit_call", ["os._exit(0)", "sys.exit(0)"])
def test_exiting_cleanly_at_import_is_not_a_pass(sandbox, exit_call):
    outcome = run(sandbox, f"import os\nimport sys\n{exit_call}\n\ndef answer():\n    return 0\n")
    assert not outcome.verdict.completed
    assert_contained(outcome, sandbox)


def test_rewriting_the_test_file_does_not_change_the_running_test(sandbox):
    always_passes = "import unittest\\nif __name__ == '__main__':\\n    unittest.main()\\n"
    attack = f'''
with open("paper2code_test.py", "w") as handle:
    handle.write("{always_passes}")

def answer():
    return 0
'''
    outcome = run(sandbox, attack)
    assert "AssertionError: 0 != 42" in outcome.result.stderr, outcome.output[-2000:]
    assert_contained(outcome, sandbox)
