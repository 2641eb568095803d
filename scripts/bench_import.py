"""Time `import_pset` (database + content-addressed storage) on a set the size of ResearchCodeBench.

Prints seconds for the pure read (the baseline, same process), the first import, and a repeated
(idempotent) import, with ratios against the baseline. Uses DATABASE_URL when set, else a fresh SQLite file.
Run: .venv/bin/python scripts/bench_import.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VAR_DIR"] = tmp
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django
        from django.core.management import call_command

        django.setup()
        from django.db import connection

        from benchmarks.models import Snippet
        from benchmarks.paper2code.pset import read_pset
        from benchmarks.services.psets import pset_import
        from scripts.bench_pset import pset_generate

        call_command("migrate", verbosity=0)
        root = Path(tmp) / "pset"
        size = pset_generate(root)

        def timed(fn):
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        baseline = timed(lambda: read_pset(root))
        first = timed(lambda: pset_import(root=root, version_name="bench"))
        again = timed(lambda: pset_import(root=root, version_name="bench"))
        print(f"database {connection.vendor}; {size / 1e6:.1f} MB, {Snippet.objects.count()} snippets")
        print(f"read_pset (baseline)  {baseline:.3f} s")
        print(f"first import          {first:.3f} s  ({first / baseline:.1f}x baseline)")
        print(f"same content again    {again:.3f} s  ({again / baseline:.1f}x baseline)")


if __name__ == "__main__":
    main()
