"""The Docker engine as both sandbox modules use it (docker.py's runs, docker_agent.py's agent containers): its
errors as SandboxError, a run container's configuration, capped output, removal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import requests
from docker.utils.socket import frames_iter

import docker
from sandbox.base import Limits, SandboxError

SANDBOX_USER = "10001:10001"
TMP_BYTES = 64 * 1024 * 1024
WORKER_LABEL = "rcb.worker"  # host:pid of the worker whose session it serves


@contextlib.contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """Turn engine and transport errors into SandboxError: they are infrastructure, never the model's doing."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(f"{what}: image missing ({exc.explanation})") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise SandboxError(f"{what}: {exc}") from exc


def container_remove(api, container: str) -> bool:
    """Remove a container; False when it was already gone or another worker is removing it (not an error)."""
    with engine_errors("removing the sandbox container"):
        try:
            api.remove_container(container, force=True)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc.explanation or exc):
                return False
            raise
    return True


class CappedOutput:
    """Demultiplexes the attach stream, keeping at most `cap` bytes per stream and discarding the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.chunks: dict[int, list[bytes]] = {1: [], 2: []}
        self.kept = {1: 0, 2: 0}
        self.truncated = False

    def read(self, stream) -> None:
        with contextlib.suppress(OSError, ValueError):
            for number, data in frames_iter(stream, tty=False):
                self.feed(number, data)

    def feed(self, number: int, data: bytes) -> None:
        if number not in self.chunks:
            return
        room = self.cap - self.kept[number]
        if len(data) > room:
            self.truncated = True
        if room > 0:
            self.chunks[number].append(data[:room])
            self.kept[number] += min(room, len(data))

    def text(self, number: int) -> str:
        return b"".join(self.chunks[number]).decode("utf-8", "replace")


def run_environment(limits: Limits) -> dict[str, str]:
    """The only variables a run sees besides the image's (PATH, HOME, LANG, PYTHON*)."""
    threads = str(max(1, int(limits.cpus)))
    # Numeric libraries start a thread per host CPU otherwise, which the process limit counts.
    return {"TMPDIR": "/tmp", "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def host_config(limits: Limits, *, work: str = "/work", tmp_bytes: int = TMP_BYTES, read_only: bool = True) -> dict:
    """A run's container (or, with the root writable for /opt/env, a build step's): no network, no capabilities."""
    return {
        "network_mode": "none",
        "read_only": read_only,
        "init": True,
        "tmpfs": {
            work: f"size={limits.disk_bytes},uid=10001,gid=10001,mode=0700,exec,nosuid,nodev",
            "/tmp": f"size={min(limits.disk_bytes, tmp_bytes)},mode=1777,exec,nosuid,nodev",
        },
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": limits.processes,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [docker.types.Ulimit(name="core", soft=0, hard=0)],
        # Output reaches the worker through the attach stream only; nothing is written to the engine's disk.
        "log_config": docker.types.LogConfig(type="none"),
        # A GPU task's run gets the host's GPUs (NVIDIA's container runtime); an engine without one refuses it.
        **({"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]} if limits.gpu else {}),
    }
