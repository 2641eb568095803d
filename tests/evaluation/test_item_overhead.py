"""What an item and an agent's command cost was cut without loosening what holds them (issue 19, issue 23 item 5):
a fork unpacks with tar spawned, not a fork of the zygote, and sees the files a cold start sees; the zygote compiles
the harness once, and only an item whose harness file is that very text runs it; an agent's command starts without
a fork of the worker yet in its own cgroups and under the run's rlimits, and never runs when it cannot join them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandbox import SandboxError
from sandbox.cgroups import RunCgroups
from sandbox.harness import CHILD_SOURCE, HARNESS_FILE, HARNESS_SOURCE, harness_command, nonce_new
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.test_forkserver_harness import NUMPY_ENTRY_POINT, session_of
from tests.evaluation.test_sandbox_attacks import HONEST, LIMITS, run

# Files of every shape an archive carries: nested folders, a name outside ASCII, an empty file, a binary one.
FILES = {
    "pkg/__init__.py": b"",
    "pkg/sub/data.txt": b"rows\n" * 1000,
    "donn\u00e9es/\u00e9t\u00e9.txt": "\u00e9t\u00e9\n".encode(),
    "blob.bin": bytes(range(256)) * 800,
    "listing.py": b"""
import json, os
try:
    import numpy  # the fork server forks only environments whose preloads load ctypes
except ImportError:
    pass
seen = {}
for folder, _, names in os.walk("."):
    for name in names:
        path = os.path.join(folder, name)
        info = os.stat(path)
        seen[path] = [info.st_size, oct(info.st_mode), info.st_uid, open(path, "rb").read(64).hex()]
print("LISTING " + json.dumps(seen, sort_keys=True))
""",
}


def listing(result) -> dict:
    line = next(line for line in result.stdout.splitlines() if line.startswith("LISTING "))
    return json.loads(line.removeprefix("LISTING "))


def test_a_fork_unpacks_exactly_the_files_a_cold_start_sees(sandbox_cache, backend_name):
    with session_of(sandbox_cache, backend_name, warm=True) as session:
        python = session.environment.python
        warm = session.run(files=FILES, command=[python, "-B", "listing.py"], limits=LIMITS)
        # `-S` first: not the harness's command shape, so the same session starts it cold.
        cold = session.run(files=FILES, command=[python, "-S", "-B", "listing.py"], limits=LIMITS)
    assert warm.forked and not cold.forked, (warm.stderr[-2000:], cold.stderr[-2000:])
    assert listing(warm) == listing(cold)
    assert {"./pkg/sub/data.txt", "./donn\u00e9es/\u00e9t\u00e9.txt", "./blob.bin"} <= set(listing(warm))


def test_a_broken_archive_is_a_failed_set_up_not_an_item_result(sandbox_cache, backend_name):
    """tar's failure ends the fork before it says it is ready: the worker sees a set-up failure (and runs the item
    cold), never an exit code an item could have chosen."""
    from sandbox.forkserver import ForkRefused

    with session_of(sandbox_cache, backend_name, warm=True) as session:
        python = session.environment.python
        files = {"paper2code_test.py": NUMPY_ENTRY_POINT.encode(), "model.py": HONEST.encode()}
        assert session.run(files=files, command=[python, "-B", "paper2code_test.py"], limits=LIMITS).forked
        server = session._forkserver
        assert server is not None
        # An archive tar cannot read (the interpreter's binary, not a tar file): the unpacker fails.
        with open("/proc/self/exe", "rb") as not_a_tar, pytest.raises(ForkRefused, match="could not set up"):
            server.run(
                archive=not_a_tar.fileno(),
                work=session.work_dir,
                argv=["paper2code_test.py"],
                limits=LIMITS,
                rlimits={},
            )
        # The zygote serves the next item as before.
        assert session.run(files=files, command=[python, "-B", "paper2code_test.py"], limits=LIMITS).forked


def test_a_harness_file_other_than_the_compiled_one_runs_as_its_own_text(sandbox_cache, backend_name):
    """The zygote runs its compiled harness only for an item whose harness file is byte for byte the one it
    compiled: an altered one (another version of the harness, as bench_harness_cost's baseline) runs as written."""
    altered_child = 'print("rcb-altered-child")\n' + CHILD_SOURCE
    altered = HARNESS_SOURCE.replace(f"CHILD = {CHILD_SOURCE!r}", f"CHILD = {altered_child!r}", 1)
    assert altered != HARNESS_SOURCE
    with session_of(sandbox_cache, backend_name, warm=True) as session:
        honest = run(session, HONEST, entry_point=NUMPY_ENTRY_POINT)
        assert honest.passed and honest.result.forked, honest.output[-2000:]
        assert session._forkserver is not None and session._forkserver.harness_sent
        assert "rcb-altered-child" not in honest.result.stdout
        nonce = nonce_new()
        files = {
            "paper2code_test.py": NUMPY_ENTRY_POINT.encode(),
            "model.py": HONEST.encode(),
            ".rcb-nonce": nonce.encode(),
            HARNESS_FILE: altered.encode(),
        }
        result = session.run(
            files=files, command=harness_command(session.environment.python, "paper2code_test.py"), limits=LIMITS
        )
        assert result.forked and "rcb-altered-child" in result.stdout, result.stderr[-2000:]
        again = run(session, HONEST, entry_point=NUMPY_ENTRY_POINT)
        assert again.passed and "rcb-altered-child" not in again.result.stdout


def test_a_platform_program_is_compiled_once_and_runs_only_as_its_own_text(sandbox_cache, backend_name):
    """The zygote compiles a platform program (the sealed replay's replayer) when the worker first sends it, and
    runs that code only for an item whose program file is that text byte for byte; an altered file runs as written
    (by run_path, which compiles the file and imports pkgutil to read it: the compiled code imports nothing)."""
    program_file = ".rcb-program.py"
    program = 'import sys\nprint("rcb-program", "pkgutil" in sys.modules)\n'
    altered = program.replace("rcb-program", "rcb-altered")
    files = {"model.py": b"import numpy\n", program_file: program.encode()}
    with session_of(sandbox_cache, backend_name, warm=True) as session:
        command = [session.environment.python, "-B", program_file, "{}"]
        first = session.run(files=files, command=command, limits=LIMITS)
        assert first.forked and "rcb-program False" in first.stdout, first.stderr[-2000:]
        server = session._forkserver
        assert server is not None and server.programs_sent == {program_file: program}
        again = session.run(files=files, command=command, limits=LIMITS)
        assert again.forked and "rcb-program False" in again.stdout, again.stderr[-2000:]
        # The worker says the program is the compiled text, but the item's file is another: it runs as written.
        with session._archive({**files, program_file: altered.encode()}) as archive:
            result, _ = server.run(
                archive=archive.fileno(),
                work=session.work_dir,
                argv=[program_file, "{}"],
                limits=LIMITS,
                rlimits={},
                program=(program_file, program),
            )
        assert "rcb-altered True" in result.stdout, result.stderr[-2000:]


@pytest.fixture(scope="module")
def bwrap_commands(sandbox_cache):
    import hashlib

    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = False
    environment = backend.environment_build(env_hash=hashlib.sha256(b"").hexdigest(), requirements="")
    session = backend.session_open(environment)
    yield session
    session.close()


def test_an_agent_command_runs_in_its_own_cgroups_under_the_runs_rlimits(bwrap_commands, tmp_path):
    from sandbox import bwrap

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    result = bwrap_commands.command_run(workspace=workspace, command="cat /proc/self/limits; id -u", limits=LIMITS)
    assert result.exit_code == 0, result.stderr
    limits = {line[:26].strip(): line[26:].split() for line in result.stdout.splitlines() if line.startswith("Max ")}
    assert limits["Max file size"][:2] == [str(LIMITS.disk_bytes)] * 2
    assert limits["Max core file size"][:2] == ["0", "0"]
    # The command's wall limit and the workspace's copy in and back (bwrap.COPY_SECONDS), as its deadline.
    assert limits["Max cpu time"][:2] == [str(int(LIMITS.wall_seconds + bwrap.COPY_SECONDS) + 5)] * 2
    assert result.stdout.splitlines()[-1] == "65534"
    # The pids cgroup holds (RLIMIT_NPROC is only its fall-back, unset here): 150 processes at once are refused.
    assert limits["Max processes"][0] == "unlimited" or int(limits["Max processes"][0]) > 150
    many = bwrap_commands.command_run(
        workspace=workspace,
        command="i=0; while [ $i -lt 150 ]; do sleep 5 & i=$((i + 1)); done; echo spawned",
        limits=LIMITS,
    )
    assert "fork" in many.stderr.lower() and "spawned" not in many.stdout, (many.stdout, many.stderr[-500:])
    # The memory cgroup holds: 600 MB in one process under a 512 MB limit is killed, and said to be.
    hungry = bwrap_commands.command_run(
        workspace=workspace, command="head -c 629145600 /dev/zero | tail > /dev/null", limits=LIMITS
    )
    assert hungry.oom_killed, (hungry.exit_code, hungry.stderr[-500:])


def test_a_command_that_cannot_join_its_cgroups_never_runs(bwrap_commands, tmp_path):
    """Joining the cgroups is what holds a command to the pids and memory limits. Shown first without the guard:
    bwrap started with no cgroup to join runs the command (the marker file appears, outside any run's pids cgroup);
    with a cgroup that cannot be joined (removed under it) the start fails and the command never runs."""
    from sandbox import bwrap
    from sandbox.process import process_run

    session = bwrap_commands
    argv = []

    def capture(command, **kwargs):
        argv[:] = command
        return process_run(command, **kwargs)

    # What a command's sandbox starts (a cold item's and an agent command's start the same way), with a script
    # whose effect shows outside: it prints.
    script = f'printf "%s\\n" {bwrap.STARTED} >&2; echo ran'
    original = bwrap.process_run
    bwrap.process_run = capture
    try:
        with open(os.devnull, "rb") as devnull:
            session._sandboxed(script=script, name="rcb-test", args=[], limits=LIMITS, stdin_fd=devnull.fileno())
    finally:
        bwrap.process_run = original
    command = argv[argv.index(bwrap._bwrap() or "bwrap") :]
    unguarded = process_run(
        command, cwd=Path("/"), limits=LIMITS, backend="bwrap", env={"PATH": "/usr/bin:/bin"}, preexec=None
    )
    assert unguarded.exit_code == 0 and unguarded.stdout == "ran\n", unguarded.stderr

    cgroups = RunCgroups(LIMITS)
    try:
        assert {"pids", "memory"} <= set(cgroups.folders)
        gone = cgroups.folders["pids"]
        gone.rmdir()
        limited = bwrap._limited(command, LIMITS, cgroups)
        assert limited is not None
        result = process_run(
            limited, cwd=Path("/"), limits=LIMITS, backend="bwrap", env={"PATH": "/usr/bin:/bin"}, preexec=None
        )
    finally:
        cgroups.remove()
    assert result.exit_code != 0 and "ran" not in result.stdout, result.stderr
    with pytest.raises(SandboxError, match="did not start"):
        bwrap._started(result, False)
