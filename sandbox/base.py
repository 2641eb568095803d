"""The one sandbox interface every backend implements: build an environment once, then run many tests in it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


class SandboxError(Exception):
    """An infrastructure failure (engine gone, image missing, build failed): retried, never scored."""


class EnvironmentBuildError(SandboxError):
    """A task's requirements could not be installed; `log` holds the build output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Limits:
    """Hard limits of one run; output beyond `output_bytes` per stream is dropped."""

    wall_seconds: float = 120.0
    memory_bytes: int = 1024 * 1024 * 1024
    processes: int = 64
    cpus: float = 1.0
    output_bytes: int = 1024 * 1024
    disk_bytes: int = 256 * 1024 * 1024
    gpu: bool = False  # the task's tests need a GPU: only a backend with `gpu` serves it (docker's device requests)


@dataclass(frozen=True)
class Environment:
    """A built environment: `location` is a venv folder (local, bwrap) or an image tag (docker)."""

    hash: str
    backend: str
    location: str
    python: str
    build_log: str = ""


@dataclass(frozen=True)
class ExecResult:
    """What one run did; `exit_code` is None when it was killed (timeout, memory)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    backend: str
    oom_killed: bool = False
    output_truncated: bool = False
    forked: bool = False  # run in a fork of the warm fork server (a warm start), not started cold


class Session:
    """Runs commands in fresh work folders of one environment; a backend may keep it warm between runs."""

    def __init__(self, backend: SandboxBackend, environment: Environment):
        self.backend = backend
        self.environment = environment

    def run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        """Copy `files` into a fresh writable work folder and run `command` there under `limits`."""
        raise NotImplementedError

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        """Run an agent's shell `command` in `workspace`, a folder kept between its commands (the agents app)."""
        raise SandboxError(f"the {self.backend.name} backend cannot run agent commands")

    def workspace_close(self, *, workspace: Path) -> None:
        """The agent item of `workspace` ended: release what its commands kept (docker keeps a container per item)."""

    def close(self) -> None:
        """Release whatever the session holds; runs never leave anything behind themselves."""


class SandboxBackend:
    """The contract of a way to run untrusted code: subclasses set `name` and implement `available`,
    `environment_build`, `environment_remove` and `session_open`. Every backend passes the conformance suite
    (tests/evaluation/test_backend_conformance.py); the isolating ones also the attack suite
    (test_sandbox_attacks.py)."""

    name: ClassVar[str]
    # True for backends that isolate nothing; they warn on every use.
    unsafe: ClassVar[bool] = False
    # True for backends that can hand a run the host's GPUs (Limits.gpu).
    gpu: ClassVar[bool] = False

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)

    def available(self) -> tuple[bool, str]:
        """Whether this backend works on this machine, and why not."""
        raise NotImplementedError

    def environment_build(self, *, env_hash: str, requirements: str) -> Environment:
        """Build (once per hash, reused afterwards) the environment with these requirements installed."""
        raise NotImplementedError

    def environment_remove(self, *, env_hash: str) -> bool:
        """Delete the built environment of `env_hash` from this host (rebuilt if needed again); False if it is in
        use and stays."""
        raise NotImplementedError

    def environment_used(self, *, env_hash: str) -> None:
        """Note that a run used `env_hash` now (its marker's time is its last use)."""
        marker = self.cache_dir / "used" / env_hash
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def environment_kept(self, *, env_hash: str) -> bool:
        """False once `environments_prune` removed it (a warm session of it must then be reopened)."""
        return (self.cache_dir / "used" / env_hash).exists()

    def environments_prune(self, *, unused_seconds: float) -> list[str]:
        """Remove the environments no run used for `unused_seconds`; their hashes."""
        folder, removed = self.cache_dir / "used", []
        cutoff = time.time() - unused_seconds
        for marker in sorted(folder.iterdir()) if folder.is_dir() else []:
            if marker.stat().st_mtime < cutoff and self.environment_remove(env_hash=marker.name):
                marker.unlink(missing_ok=True)
                removed.append(marker.name)
        return removed

    def orphans_remove(self, *, older_than: float) -> int:
        """Remove sandboxes left by a killed worker (older than any run may last); returns how many."""
        return 0

    def session_open(self, environment: Environment) -> Session:
        raise NotImplementedError

    def environment_lock(self, environment: Environment) -> dict:
        """What the built environment holds, for reproducibility records; here: a venv's installed distributions."""
        from sandbox.lock import venv_lock

        return venv_lock(Path(environment.location))

    @contextlib.contextmanager
    def session(self, environment: Environment) -> Iterator[Session]:
        session = self.session_open(environment)
        try:
            yield session
        finally:
            session.close()
