"""What the sandbox reads of its host's settings, without knowing its host: the host passes in an object holding
them as attributes (the evaluation app passes Django's settings in its AppConfig.ready), read at each use so that a
changed setting applies at once; a setting the host does not have, or no host at all, gives the default below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "SANDBOX_BACKEND": "auto",
    "SANDBOX_CACHE_DIR": Path("var/sandbox"),
    "SANDBOX_FORKSERVER": False,
    "SANDBOX_DOCKER_BASE_IMAGE": "rcb-sandbox-base:bookworm",
    "SANDBOX_BUILD_SECONDS": 1800,
    "SANDBOX_MEMORY_MB": 4096,
    "SANDBOX_PROCESSES": 256,
    "SANDBOX_DISK_MB": 1024,
    "SANDBOX_FETCH_MB": 4096,
    "SANDBOX_CPU_WHEEL_INDEXES": {},
    "AGENT_WORKSPACE_FILES": 100_000,
}
_source: Any = None


def settings_use(source: Any) -> None:
    """Read the settings from `source` (any object with them as attributes) from now on; None: the defaults."""
    global _source
    _source = source


def setting(name: str) -> Any:
    """The host's value of `name`, else its default."""
    if _source is not None and hasattr(_source, name):
        return getattr(_source, name)
    return DEFAULTS[name]
