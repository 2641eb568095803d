"""Sandbox backends behind one interface (base.py); `backend_get` picks one by name or, for `auto`, by what works."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from evaluation.sandbox.base import (
    Backend, Environment, EnvironmentBuildError, ExecResult, Limits, SandboxError, Session,
)

BACKENDS = {
    "docker": "evaluation.sandbox.docker.DockerBackend",
    "bwrap": "evaluation.sandbox.bwrap.BwrapBackend",
    "local": "evaluation.sandbox.local.LocalBackend",
}
AUTO_ORDER: tuple[str, ...] = ("docker", "bwrap", "local")


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)} or auto")
    module, _, cls = BACKENDS[name].rpartition(".")
    return getattr(import_module(module), cls)


def backend_get(name: str | None = None, *, cache_dir: Path | None = None) -> Backend:
    """The backend named (default: settings.SANDBOX_BACKEND); `auto` is docker, else bwrap, else local."""
    from django.conf import settings

    name = name or settings.SANDBOX_BACKEND
    cache_dir = Path(cache_dir or settings.SANDBOX_CACHE_DIR)
    if name != "auto":
        return backend_class(name)(cache_dir)
    for candidate in AUTO_ORDER:
        try:
            backend = backend_class(candidate)(cache_dir)
        except ImportError:  # e.g. the docker SDK missing on a light install
            continue
        if backend.available()[0]:
            return backend
    raise SandboxError("no sandbox backend is available")


__all__ = [
    "AUTO_ORDER", "BACKENDS", "Backend", "Environment", "EnvironmentBuildError", "ExecResult", "Limits", "SandboxError",
    "Session", "backend_class", "backend_get",
]
