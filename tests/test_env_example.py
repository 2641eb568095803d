""".env.example lists every setting the platform and its compose stack read, and nothing they do not."""

from __future__ import annotations

import re

from tests.conftest import REPO

# Set by the images or by docker-compose.yml itself, so they are not the operator's to choose in .env.
SET_BY_THE_STACK = {
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "SANDBOX_BACKEND",
    "VAR_DIR",
    "MEDIA_ROOT",
    "STATIC_ROOT",
    "STATICFILES_BACKEND",
    "SANDBOX_CACHE_DIR",
}
READERS = {
    "config/settings.py": r'env(?:\.\w+)?\("([A-Z0-9_]+)"',
    "benchmarks/management/commands/site_init.py": r'os\.environ\.get\("([A-Z0-9_]+)"',
    "docker-compose.yml": r"\$\{([A-Z][A-Z0-9_]*)",
    "docker/app/entrypoint.sh": r"\$\{([A-Z][A-Z0-9_]*)",
}


def _read() -> set[str]:
    names = set()
    for path, pattern in READERS.items():
        names |= set(re.findall(pattern, (REPO / path).read_text()))
    return names


def _documented() -> set[str]:
    text = (REPO / ".env.example").read_text()
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]+)=", text, re.M))


def test_every_setting_read_is_in_env_example():
    missing = _read() - SET_BY_THE_STACK - _documented()
    assert not missing, f"read but not listed in .env.example: {sorted(missing)}"


def test_env_example_names_nothing_that_is_not_read():
    # Provider keys are read by litellm, not by our code.
    unknown = _documented() - _read() - {"OPENAI_API_KEY"}
    assert not unknown, f"listed in .env.example but read nowhere: {sorted(unknown)}"
