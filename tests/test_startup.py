"""What every process of the platform pays at start (issue 37, item 8: a first page within a minute): setting Django
up imports no model client. litellm alone took up to 15 s to import on a busy two-core machine, and `make run` paid
it in each of migrate, import_pset, the web server (twice, with its reloader) and the worker."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SETUP = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.urls import resolve
resolve("/")  # every app's URLs and views imported, as the web server's first request does
import evaluation.tasks, evaluation.llm  # the worker's tasks, and the model client's module itself
print(sorted(m for m in sys.modules if m.split(".")[0] == "litellm")[:3])
"""


def test_setting_django_up_imports_no_model_client(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SETUP],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "VAR_DIR": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"litellm is imported at start: {result.stdout}"


def test_workers_start_without_gossip_mingle_and_heartbeat_events():
    """The platform uses none of them, and after a broker restart a worker logged `Error on restarting Gossip` while
    the watchdog's re-dispatch took 45 s rather than 21 s: every way this repository starts a worker leaves them off."""
    flags = ("--without-gossip", "--without-mingle", "--without-heartbeat")
    for path in ("docker/app/entrypoint.sh", "scripts/run.sh"):
        # A command continued over lines (a backslash at the end) read as one line.
        lines = (REPO / path).read_text().replace("\\\n", " ").splitlines()
        starts = [line for line in lines if "-A config worker" in line]
        assert starts, f"{path} starts no worker any more: update this test"
        assert all(flag in line for line in starts for flag in flags), (path, starts)
