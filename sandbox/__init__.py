"""Sandbox backends behind one interface (base.py); `backend_get` picks one by name or, for `auto`, by what works.

`auto` never picks `local` (no isolation): where neither docker nor bwrap works it refuses, saying why each
does not; `local` runs only when named, and warns on every run.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from sandbox.base import (
    Environment,
    EnvironmentBuildError,
    ExecResult,
    Limits,
    SandboxBackend,
    SandboxError,
    Session,
)

BACKENDS = {
    "docker": "sandbox.docker.DockerBackend",
    "bwrap": "sandbox.bwrap.BwrapBackend",
    "local": "sandbox.local.LocalBackend",
}
AUTO_ORDER: tuple[str, ...] = ("docker", "bwrap")


def backend_class(name: str) -> type[SandboxBackend]:
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)} or auto")
    module, _, cls = BACKENDS[name].rpartition(".")
    return getattr(import_module(module), cls)


def backend_get(name: str | None = None, *, cache_dir: Path | None = None) -> SandboxBackend:
    """The backend named (default: the SANDBOX_BACKEND setting); `auto` is docker, else bwrap, else a refusal."""
    from sandbox.config import setting

    name = name or setting("SANDBOX_BACKEND")
    cache_dir = Path(cache_dir or setting("SANDBOX_CACHE_DIR"))
    if name != "auto":
        return backend_class(name)(cache_dir)
    reasons = []
    for candidate in AUTO_ORDER:
        try:
            backend = backend_class(candidate)(cache_dir)
        except ImportError as exc:  # e.g. the docker SDK missing on a light install
            reasons.append(f"{candidate}: cannot load ({exc})")
            continue
        ok, reason = backend.available()
        if ok:
            return backend
        reasons.append(f"{candidate}: {reason}")
    raise NoSandboxError(
        "SANDBOX_BACKEND=auto found no sandbox, and untrusted code never runs without one ("
        + "; ".join(reasons)
        + "). Install Docker or bubblewrap, or on a trusted development machine set "
        "SANDBOX_BACKEND=local explicitly (no isolation at all)."
    )


class NoSandboxError(SandboxError):
    """`auto` found neither docker nor bwrap working."""


__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "SandboxBackend",
    "Environment",
    "EnvironmentBuildError",
    "ExecResult",
    "Limits",
    "NoSandboxError",
    "SandboxError",
    "Session",
    "backend_class",
    "backend_get",
]
