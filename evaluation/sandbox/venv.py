"""Environments as virtualenvs, built once per requirements hash and reused (local and bwrap backends)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from evaluation.sandbox.base import Environment, EnvironmentBuildError

BUILD_TIMEOUT = 900


def venv_build(*, cache_dir: Path, backend: str, env_hash: str, requirements: str) -> Environment:
    """The venv for `env_hash`, built under a lock so concurrent workers build it once."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / env_hash
    with open(cache_dir / f"{env_hash}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        log_path = cache_dir / f"{env_hash}.log"
        if not (target / "bin" / "python").exists():
            _build(target, requirements, log_path)
    return Environment(hash=env_hash, backend=backend, location=str(target), python=str(target / "bin" / "python"),
                       build_log=log_path.read_text() if log_path.exists() else "")


def venv_remove(*, cache_dir: Path, env_hash: str) -> bool:
    """Delete the venv of `env_hash` and its log, under the build lock (a build of it waits, then rebuilds)."""
    if not (cache_dir / env_hash).exists():
        return True
    with open(cache_dir / f"{env_hash}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(cache_dir / env_hash, ignore_errors=True)
        (cache_dir / f"{env_hash}.log").unlink(missing_ok=True)
    return True


def _build(target: Path, requirements: str, log_path: Path) -> None:
    staging = target.with_name(target.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(staging)
    log = f"python {sys.version.split()[0]}; requirements:\n{requirements}\n"
    lines = [ln for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if lines:
        (staging / "requirements.txt").write_text(requirements)
        # The builder's own pip installs into the venv, so venvs need no pip of their own.
        command = [sys.executable, "-m", "pip", "--python", str(staging / "bin" / "python"), "install",
                   "--no-input", "--disable-pip-version-check", "-r", str(staging / "requirements.txt")]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            log_path.write_text(log + f"\npip timed out after {BUILD_TIMEOUT} s")
            raise EnvironmentBuildError(f"installing requirements timed out after {BUILD_TIMEOUT} s", log) from exc
        log += proc.stdout + proc.stderr
        if proc.returncode != 0:
            log_path.write_text(log)
            shutil.rmtree(staging, ignore_errors=True)
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise EnvironmentBuildError(f"installing requirements failed: {last}", log)
    log_path.write_text(log)
    staging.rename(target)
