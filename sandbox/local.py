"""The `local` backend: no isolation at all, for development on a trusted machine only."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.base import Environment, ExecResult, Limits, SandboxBackend, Session
from sandbox.process import files_write, process_run, rlimits
from sandbox.venv import pip_package, venv_build, venv_remove

logger = logging.getLogger(__name__)


class LocalSession(Session):
    def run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        logger.warning("SANDBOX_BACKEND=local runs untrusted code WITHOUT isolation; use docker or bwrap")
        with tempfile.TemporaryDirectory(prefix="rcb-local-") as work:
            files_write(Path(work), files)
            env = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
            return process_run(
                command, cwd=Path(work), limits=limits, backend="local", env=env, preexec=rlimits(limits)
            )

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        logger.warning("SANDBOX_BACKEND=local runs agent commands WITHOUT isolation; use bwrap")
        env = {
            "PATH": f"{Path(self.environment.python).parent}:/usr/bin:/bin",
            "HOME": str(workspace),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        return process_run(
            ["/bin/sh", "-c", command], cwd=workspace, limits=limits, backend="local", env=env, preexec=rlimits(limits)
        )


class LocalBuild:
    """Build steps as plain processes: no isolation, but with an empty environment (no worker secrets)."""

    def __init__(self, backend: LocalBackend, venv: Path):
        self.backend, self.venv = backend, venv
        self.python = str(venv / "bin" / "python")
        self.interpreter = os.path.realpath(self.python)

    def inputs_at(self, inputs: Path) -> str:
        return str(inputs)

    def run(self, command: Sequence[str], *, inputs: Path, env: Mapping[str, str], limits: Limits) -> ExecResult:
        # A folder holding only the worker's pip, so the step imports nothing else of the worker.
        runner = self.backend.cache_dir / "pip-runner"
        runner.mkdir(parents=True, exist_ok=True)
        if not (runner / "pip").exists():
            (runner / "pip").symlink_to(pip_package())
        with tempfile.TemporaryDirectory(prefix="rcb-local-build-") as home:
            step_env = {
                "PATH": f"{self.venv}/bin:/usr/bin:/bin",
                "HOME": home,
                "TMPDIR": home,
                "LANG": "C.UTF-8",
                "PYTHONPATH": str(runner),
                **env,
            }
            return process_run(
                command,
                cwd=Path(home),
                limits=limits,
                backend="local",
                env=step_env,
                preexec=rlimits(limits, address_space=False),
            )


class LocalBackend(SandboxBackend):
    name = "local"
    unsafe = True

    def available(self) -> tuple[bool, str]:
        return True, "always available, but isolates nothing (development only)"

    def environment_build(self, *, env_hash: str, requirements: str) -> Environment:
        return venv_build(
            cache_dir=self.cache_dir / "venvs",
            backend=self.name,
            env_hash=env_hash,
            requirements=requirements,
            sandbox_for=lambda venv: LocalBuild(self, venv),
        )

    def environment_remove(self, *, env_hash: str) -> bool:
        return venv_remove(cache_dir=self.cache_dir / "venvs", env_hash=env_hash)

    def session_open(self, environment: Environment) -> Session:
        return LocalSession(self, environment)
