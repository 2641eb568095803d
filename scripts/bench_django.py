"""One set-up for the benchmarks that run the platform in-process: a fresh temporary folder with SQLite and the
embedded broker (whatever the shell's environment names), Django set up and migrated."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def django_fresh(prefix: str, *, test_environment: bool = True) -> Path:
    """The temporary folder the platform now runs in (`test_environment`: Django's test client settings too)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update({"VAR_DIR": str(tmp), "DJANGO_SETTINGS_MODULE": "config.settings"})
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MEDIA_ROOT"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    if test_environment:
        from django.test.utils import setup_test_environment

        setup_test_environment()
    call_command("migrate", verbosity=0)
    return tmp
