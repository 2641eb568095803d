"""Environments as virtualenvs, built once per requirements hash and reused (local and bwrap backends).

The venv is made in place (its scripts name their real path) and counts as built once BUILT exists in it.
Requirements are installed by install.py through the backend's build sandbox, with the worker's own pip
(its package alone on the step's PYTHONPATH), so the venv needs no pip of its own.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import venv
from collections.abc import Callable
from pathlib import Path

from sandbox.base import Environment, EnvironmentBuildError
from sandbox.install import BuildSandbox, requirements_install

BUILT = ".rcb-built"


def pip_package() -> Path:
    """The worker's pip package folder (trusted code, read-only in build sandboxes)."""
    spec = importlib.util.find_spec("pip")
    if spec is None or spec.origin is None:
        raise RuntimeError("pip is not installed in the worker's environment")
    return Path(spec.origin).parent


def venv_build(
    *,
    cache_dir: Path,
    backend: str,
    env_hash: str,
    requirements: str,
    sandbox_for: Callable[[Path], BuildSandbox],
    build_uid: int | None = None,
) -> Environment:
    """The venv for `env_hash`, built under a lock so concurrent workers build it once.

    `sandbox_for(venv)` gives the build sandbox; `build_uid` (the sandbox user) owns the venv while it is built.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / env_hash
    log_path = cache_dir / f"{env_hash}.log"
    with open(cache_dir / f"{env_hash}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / BUILT).exists():
            _build(target, requirements, log_path, sandbox_for, build_uid, dists=cache_dir.parent / "dists")
    return Environment(
        hash=env_hash,
        backend=backend,
        location=str(target),
        python=str(target / "bin" / "python"),
        build_log=log_path.read_text() if log_path.exists() else "",
    )


def venv_remove(*, cache_dir: Path, env_hash: str) -> bool:
    """Delete the venv of `env_hash` and its log, under the build lock (a build of it waits, then rebuilds)."""
    if not (cache_dir / env_hash).exists():
        return True
    with open(cache_dir / f"{env_hash}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(cache_dir / env_hash, ignore_errors=True)
        (cache_dir / f"{env_hash}.log").unlink(missing_ok=True)
    return True


def _build(
    target: Path,
    requirements: str,
    log_path: Path,
    sandbox_for: Callable[[Path], BuildSandbox],
    build_uid: int | None,
    *,
    dists: Path,
) -> None:
    shutil.rmtree(target, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    try:
        if build_uid is not None:
            _chown_tree(target, build_uid)
        try:
            log = requirements_install(
                requirements=requirements,
                sandbox=sandbox_for(target),
                work=target.with_name(target.name + ".inputs"),
                dists=dists,
            )
        finally:
            if build_uid is not None:
                _chown_tree(target, 0)
    except EnvironmentBuildError as exc:
        log_path.write_text(exc.log)
        shutil.rmtree(target, ignore_errors=True)
        raise
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    log_path.write_text(log)
    (target / BUILT).touch()


def _chown_tree(root: Path, uid: int) -> None:
    """Hand the venv to the build user, or back to root (never following a link the build made)."""
    os.chown(root, uid, uid)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
