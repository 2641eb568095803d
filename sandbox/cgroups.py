"""A run's cgroup v1 folders (pids, memory, cpu): nested under a process's own cgroup, limits set, removed afterwards.

bwrap runs nest under the worker's own cgroup; the items of a docker fork server nest under its container's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from pathlib import Path

from sandbox.base import Limits

logger = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
# bwrap's monitor and the pid-1 reaper of the new pid namespace count against the run's pids cgroup.
BWRAP_OWN_PROCESSES = 2


class RunCgroups:
    """One run's cgroup v1 folders (pids, memory, cpu), nested under the cgroup of process `pid` (the worker's own by
    default) and removed afterwards."""

    def __init__(self, limits: Limits, own: int = BWRAP_OWN_PROCESSES, *, pid: int | None = None):
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.folders: dict[str, Path] = {}
        settings = {
            "pids": [("pids.max", str(limits.processes + own))],
            # memsw after the plain limit (it may never be below it); without swap accounting it is absent.
            "memory": [
                ("memory.limit_in_bytes", str(limits.memory_bytes)),
                ("memory.memsw.limit_in_bytes", str(limits.memory_bytes)),
            ],
            "cpu": [("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", str(max(1000, int(limits.cpus * 100000))))],
        }
        for controller, values in settings.items():
            folder = _cgroup_create(controller, name, pid)
            if folder is None:
                continue
            try:
                for file, value in values:
                    if (folder / file).exists():
                        (folder / file).write_text(value)
            except OSError as exc:
                logger.warning("cgroup %s: cannot set limits (%s); running without it", folder, exc)
                _cgroup_remove(folder)
                continue
            self.folders[controller] = folder

    def attach(self) -> None:
        """Move the calling process into every folder (run in the child between fork and exec)."""
        pid = str(os.getpid()).encode()
        for folder in self.folders.values():
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def oom_killed(self) -> bool:
        memory = self.folders.get("memory")
        if memory is None:
            return False
        try:
            lines = (memory / "memory.oom_control").read_text().splitlines()
        except OSError:
            return False
        counters = dict(line.split() for line in lines if len(line.split()) == 2)
        return int(counters.get("oom_kill", "0")) > 0

    def remove(self) -> None:
        for folder in self.folders.values():
            _cgroup_remove(folder)
            # An empty `rcb` would keep whoever owns the worker's cgroup from removing it; a busy one stays.
            with contextlib.suppress(OSError):
                folder.parent.rmdir()
        self.folders.clear()


def _cgroup_create(controller: str, name: str, pid: int | None = None) -> Path | None:
    """`<mount>/<cgroup of pid>/rcb/<name>`, or None when this v1 controller is not mounted or not writable."""
    mount = CGROUP_MOUNT / controller
    own = ""
    try:
        for line in Path(f"/proc/{pid or 'self'}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                own = path.lstrip("/")
    except OSError:
        return None
    # Inside a container the mount may already be rooted at our own cgroup; another process's must be found as is.
    base = mount / own if (mount / own).is_dir() or pid else mount
    if not (base / "cgroup.procs").exists():
        return None
    folder = base / "rcb" / name
    try:
        folder.parent.mkdir(exist_ok=True)
        folder.mkdir()
    except OSError:
        return None
    return folder


def _cgroup_remove(folder: Path) -> None:
    """Kill whatever is left in the folder, then remove it (rmdir is refused while a task is still exiting)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            pids = (folder / "cgroup.procs").read_text().split()
        except FileNotFoundError:
            return
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                logger.warning("cgroup %s could not be removed: %s", folder, exc)
                return
            time.sleep(0.02)
