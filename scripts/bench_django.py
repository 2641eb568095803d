"""What the benchmark scripts share: a fresh temporary folder with SQLite and the embedded broker (whatever the
shell's environment names), Django set up and migrated, for those that run the platform in-process; and the naive
baseline of the heavy sets (a fresh copy and interpreter per item, no sandbox)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# What a heavy set's test prints: the time of its own body, without interpreter start and imports.
OWN = re.compile(r"RCB-OWN ([0-9.]+)")
THREADS_ONE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


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


def naive(python: str, items: Sequence[tuple[str, Mapping[str, bytes]]]) -> tuple[float, list[float]]:
    """(wall, own time per item) of running each item's entry point sequentially, in a fresh copy of its files in a
    temporary folder and a fresh interpreter, no sandbox, no platform."""
    own, start = [], time.monotonic()
    env = {**os.environ, **THREADS_ONE}
    for entry, files in items:
        with tempfile.TemporaryDirectory(prefix="bench-naive-") as folder:
            for name, data in files.items():
                Path(folder, name).parent.mkdir(parents=True, exist_ok=True)
                Path(folder, name).write_bytes(data)
            done = subprocess.run([python, "-B", entry], cwd=folder, env=env, capture_output=True, text=True)
            found = OWN.search(done.stdout)
            if done.returncode != 0 or not found:
                sys.exit(f"the naive run of an item failed ({done.returncode}):\n{done.stderr[-2000:]}")
            own.append(float(found.group(1)))
    return time.monotonic() - start, own
