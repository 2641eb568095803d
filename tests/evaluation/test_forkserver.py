"""The fork server, on bwrap and docker: items fork from a warm zygote, yet each is as isolated as a cold start,
from the zygote and from every other item (what one leaves behind, the next never sees)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.services.blobs import environment_hash
from sandbox.forkserver import preload_modules
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS
from tests.evaluation.test_sandbox_attacks import LIMITS, Run

# These run the entry point directly (the isolation of a fork does not depend on the harness; the harness under the
# fork server is tested in test_forkserver_harness.py).


def run(session, model: str, *, limits=LIMITS, entry_point: str) -> Run:
    import time

    from sandbox.harness import HarnessVerdict

    start = time.monotonic()
    # numpy, as real tests import it: environments whose preloads load no ctypes run cold (ForkingSession._zygote).
    result = session.run(
        files={"paper2code_test.py": ("import numpy\n" + entry_point).encode(), "model.py": model.encode()},
        command=[session.environment.python, "-B", "paper2code_test.py"],
        limits=limits,
    )
    return Run(result, HarnessVerdict(result.exit_code == 0, result.stdout, ""), time.monotonic() - start)


SANDBOX_UID = {"bwrap": 65534, "docker": 10001}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=ISOLATING_BACKENDS)
def session(request, sandbox_cache):
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    with backend.session(environment) as session:
        yield session


def report(entry_body: str) -> str:
    """An entry point that runs `entry_body` (which sets `found`) and prints it as one JSON line."""
    return "import json, os, sys\nfound = {}\n" + entry_body + "\nprint('REPORT ' + json.dumps(found))\n"


def found_in(attack) -> dict:
    assert attack.verdict.completed, attack.output[-3000:]
    line = next(line for line in attack.verdict.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT "))


def test_preload_is_the_imports_minus_the_tasks_own_modules():
    files = {
        "paper2code_test.py": b"import numpy as np\nfrom torch.nn import functional\nimport model\nfrom . import x\n",
        "model.py": b"import scipy.linalg\nimport helpers\n",
        "helpers/__init__.py": b"",
        "data.csv": b"a",
    }
    # `from torch.nn import functional` may import the submodule torch.nn.functional: it is tried too.
    assert preload_modules(files) == ["numpy", "torch.nn", "torch.nn.functional", "scipy.linalg"]


def test_items_run_in_forks_with_the_imports_preloaded_and_a_fresh_random_state(session):
    entry = report(
        "found['warm'] = 'fractions' in sys.modules\nimport fractions, random\n"
        "found['random'] = random.random()\nfound['pid'] = os.getpid()"
    )
    first, second = found_in(run(session, "", entry_point=entry)), found_in(run(session, "", entry_point=entry))
    assert session.forking
    assert first["warm"] and second["warm"]
    assert first["pid"] == second["pid"] == 2  # under its own reaper in its own pid namespace, as bwrap does
    assert first["random"] != second["random"]  # reseeded per item, not the zygote's one state for all


def test_an_item_finds_submodules_of_from_imports_loaded_and_the_preloads_in_huge_pages(session):
    """`from xml.dom import minidom` loads a submodule the package itself does not: the zygote preloads it (an
    attribute, `from numpy import array`, is found absent, not failed). The zygote's memory is in 2 MB pages (Linux
    6.1 and later), so that each of an item's forks copies few page-table entries."""
    entry = report("found['minidom'] = 'xml.dom.minidom' in sys.modules")
    found = found_in(run(session, "from xml.dom import minidom\nfrom numpy import array\n", entry_point=entry))
    assert session.forking and found["minidom"]
    assert "numpy.array" in session._forkserver.absent and not session._forkserver.failed
    if tuple(int(part) for part in os.uname().release.split(".")[:2]) >= (6, 1):  # MADV_COLLAPSE
        assert session._forkserver.huge_pages >= 2 << 20


def test_an_item_runs_unprivileged_with_no_capabilities(session):
    status = found_in(
        run(
            session,
            "",
            entry_point=report(
                "found.update(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines()"
                " if ':\\t' in line)"
                "\nfound['uid'] = os.getuid()"
            ),
        )
    )
    assert status["uid"] == SANDBOX_UID[session.backend.name]
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"].strip() == "1"


LEAVE_BEHIND = report("""
import subprocess
subprocess.Popen(["/bin/sh", "-c", "sleep 300 # rcb-leftover-marker"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        import time
        time.sleep(300)
    os._exit(0)
for folder in ("/tmp", "/dev/shm", os.environ["HOME"], "."):
    open(os.path.join(folder, "rcb-leftover"), "w").write("x")
# Every folder another process of the sandbox has open (its cwd, its root), and the message queues (docker has them).
me = os.readlink("/proc/self")
for pid in os.listdir("/proc"):
    for kind in ("cwd", "root"):
        try:
            if pid.isdigit() and pid != me:
                open(f"/proc/{pid}/{kind}/rcb-leftover", "w").write("x")
        except OSError:
            pass
if os.path.isdir("/dev/mqueue"):
    os.close(os.open("/dev/mqueue/rcb-leftover", os.O_CREAT | os.O_RDWR, 0o600))
os.environ["RCB_LEFTOVER"] = "1"
os.putenv("RCB_LEFTOVER_PUT", "1")
found["left"] = True
""")

LOOK_FOR_LEFTOVERS = report("""
me = os.readlink("/proc/self")
held = [f"/proc/{pid}/{kind}" for pid in os.listdir("/proc") if pid.isdigit() and pid != me for kind in ("cwd", "root")]
found["files"] = [f for f in ("/tmp", "/dev/shm", os.environ["HOME"], ".", "/dev/mqueue", *held)
                  if os.path.exists(os.path.join(f, "rcb-leftover"))]
found["env"] = [k for k in os.environ if k.startswith("RCB_")]
# /proc is the fork server's pid namespace: its reaper, the zygote, and this item's fork, reaper and itself.
found["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
found["leftover_cmdlines"] = []
for pid in os.listdir("/proc"):
    try:
        if pid.isdigit() and b"rcb-leftover-marker" in open(f"/proc/{pid}/cmdline", "rb").read():
            found["leftover_cmdlines"].append(pid)
    except OSError:
        pass
""")


def test_nothing_an_item_leaves_reaches_the_next_one(session):
    from tests.evaluation.test_sandbox_attacks import assert_no_process_with

    assert found_in(run(session, "", entry_point=LEAVE_BEHIND))["left"]
    assert_no_process_with("rcb-leftover-marker")
    seen = found_in(run(session, "", entry_point=LOOK_FOR_LEFTOVERS))
    assert session.forking
    assert seen == {"files": [], "env": [], "processes": 5, "leftover_cmdlines": []}


ATTACK_THE_ZYGOTE = report("""
import ctypes, signal
libc = ctypes.CDLL(None, use_errno=True)
def parent(pid):
    return next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("PPid:"))


# /proc shows the fork server's pid namespace: this item, its reaper, the fork that set it up, the zygote.
reaper = parent(os.readlink("/proc/self"))
helper = parent(reaper)
zygote = parent(helper)
targets = [reaper, helper, zygote]
found["targets"] = [b"recv_fds" in open(f"/proc/{pid}/cmdline", "rb").read() for pid in targets]
found["got"] = []
for pid in targets:
    for what in ("environ", "mem", "maps", "fd/0"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                if what == "mem":
                    f.seek(int(open(f"/proc/{pid}/maps").read().split("-")[0], 16))
                f.read(16)
            found["got"].append(f"read {what}")
        except OSError:
            pass
    try:
        if pid == reaper:
            raise OSError("its own reaper is the item's to end (as an exit would)")
        fd = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
        if libc.syscall(424, fd, signal.SIGKILL, None, 0) == 0:  # pidfd_send_signal through /proc/<pid>
            found["got"].append("signalled through /proc")
    except OSError:
        pass
    if libc.ptrace(16, int(pid), None, None) == 0:  # PTRACE_ATTACH by the pid /proc shows
        found["got"].append("ptrace attach")
""")


def test_an_item_cannot_read_signal_or_trace_the_fork_server(session):
    run(session, "", entry_point=ATTACK_THE_ZYGOTE)  # the zygote now has the attack's imports: it stays
    zygote = session._forkserver
    seen = found_in(run(session, "", entry_point=ATTACK_THE_ZYGOTE))
    assert seen["targets"] == [True, True, True]  # all are visible in /proc, and that is all
    assert seen["got"] == []
    assert zygote.alive() and session._forkserver is zygote and session.forking
    after = found_in(run(session, "", entry_point=report("found['ok'] = True")))
    assert after["ok"]


MAKE_NAMESPACES = report("""
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]
found["made"] = []
for name, flag in (("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000), ("pid", 0x20000000)):
    if libc.unshare(flag) == 0:
        found["made"].append(f"unshare {name}")
    pid = libc.syscall(CLONE, flag | 17, 0, 0, 0, 0)  # clone(flags | SIGCHLD), as fork does
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
        found["made"].append(f"clone {name}")
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
    found["made"].append("mount")
child = os.fork()
if child == 0:
    os._exit(0)
found["plain fork"] = os.waitpid(child, 0)[1] == 0
""")


def test_an_item_can_make_no_namespace_and_mount_nothing(session):
    # The fork needed these to build the item's sandbox; Docker's default profile refuses them to a cold start.
    seen = found_in(run(session, "", entry_point=MAKE_NAMESPACES))
    assert seen == {"made": [], "plain fork": True}
    assert session.forking


def test_a_worker_killed_mid_item_takes_its_fork_server_and_the_item_along(sandbox_cache, tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from tests.evaluation.test_sandbox_attacks import assert_no_process_with, processes_with

    marker = f"rcb-orphan-{os.getpid()}-{time.monotonic_ns()}"
    script = tmp_path / "worker.py"
    script.write_text(f"""
import django, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
django.setup()
from benchmarks.services.blobs import environment_hash
from sandbox import Limits, backend_get
backend = backend_get(sys.argv[1], cache_dir=sys.argv[2])
backend.forkserver = True
environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
session = backend.session_open(environment)
entry = "import numpy, subprocess, time\\nsubprocess.run(['/bin/sh', '-c', 'sleep 300 # {marker}'])\\n"
print("started", flush=True)
session.run(files={{"paper2code_test.py": entry.encode()}}, command=[environment.python, "-B", "paper2code_test.py"],
            limits=Limits(wall_seconds=600))
""")
    for backend in ("bwrap", "docker"):
        sandbox_backend_or_missing(backend, sandbox_cache)
        started = time.time()
        worker = subprocess.Popen(
            [sys.executable, str(script), backend, str(sandbox_cache)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert worker.stdout.readline() == "started\n"
            deadline = time.monotonic() + 60
            while not processes_with(marker) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert processes_with(marker), f"{backend}: the item never started"
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        assert_no_process_with(marker)
        if backend == "docker":
            import docker
            from sandbox.docker_engine import WORKER_LABEL

            client, label = docker.from_env(), f"{WORKER_LABEL}={socket.gethostname()}:{worker.pid}"
            deadline = time.monotonic() + 10
            while client.containers.list(all=True, filters={"label": label}) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert client.containers.list(all=True, filters={"label": label}) == []
            # What the killed worker had: its fork server container, found through the engine's event log.
            events = client.events(
                since=started, until=time.time(), decode=True, filters={"label": label, "event": "destroy"}
            )
            assert [event["Actor"]["Attributes"][WORKER_LABEL] for event in events] == [label.split("=")[1]]


def test_an_item_cannot_pass_itself_off_as_a_failed_fork(session):
    # A fork whose sandbox could not be set up is run again cold; an item that says so of itself is only an exit.
    done = run(
        session,
        "",
        entry_point="import os, sys\nprint('rcb-fork: set-up failed', file=sys.stderr)\n"
        "sys.stderr.flush()\nos._exit(125)\n",
    )
    assert done.result.exit_code == 125 and "rcb-fork:" in done.result.stderr
    assert session.forking


def test_limits_hold_in_a_fork(session):
    from dataclasses import replace

    slow = run(session, "", entry_point="import time\ntime.sleep(30)\n", limits=replace(LIMITS, wall_seconds=2))
    assert slow.result.timed_out and slow.seconds < 10
    hungry = run(session, "", entry_point="x = bytearray(900 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])\n")
    assert not hungry.verdict.completed and (hungry.result.oom_killed or hungry.result.exit_code != 0)
    bomb = run(
        session,
        "",
        entry_point=report(
            "n = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n"
            "            import time; time.sleep(5); os._exit(0)\n"
            "        n += 1\nexcept OSError:\n    pass\nfound['n'] = n"
        ),
    )
    assert found_in(bomb)["n"] < LIMITS.processes
    assert session.forking


def test_an_item_has_no_network(session):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        seen = found_in(
            run(
                session,
                "",
                entry_point=report(f"""
import socket
found["interfaces"] = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
found["reached"] = []
for host in ("127.0.0.1", "localhost"):
    try:
        socket.create_connection((host, {port}), timeout=1).close()
        found["reached"].append(host)
    except OSError:
        pass
"""),
            )
        )
    finally:
        listener.close()
    assert seen["reached"] == [] and set(seen["interfaces"]) <= {"lo"}
    assert session.forking


def test_what_an_item_prints_before_sys_exit_reaches_the_worker(session):
    # unittest.main() ends with sys.exit: a fork that ended with os._exit before flushing lost the test's output.
    done = run(session, "", entry_point="import sys\nprint('printed before exit')\nsys.exit(3)\n")
    assert (done.result.exit_code, done.result.stdout) == (3, "printed before exit\n")
    assert session.forking
