"""`make run`'s steps before it serves, in one process: migrate, load the demo problem set as a published release,
and queue the release's reference, placeholder and sample runs for the worker `make run` starts next.

One process, not three: each start of Django and the apps costs seconds on a busy machine, and a newcomer waits for
all of them before the first page (issue 37, item 8). Each step is its own command too (migrate, import_pset,
demo_populate), with the same effect when run one after the other.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandParser

from benchmarks.management.base import VersionCommand


class Command(VersionCommand):
    help = (
        "Migrate, import the demo problem set as a published release and queue its runs for a worker "
        "(migrate; import_pset --publish; demo_populate --background), in one process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--version", required=True, help="The demo release's name, e.g. demo-1.0.0.")
        parser.add_argument(
            "--pset",
            type=Path,
            default=Path(settings.BASE_DIR) / "benchmarks" / "demo",
            help="The problem set to load (default: benchmarks/demo).",
        )

    def handle(self, *args, version: str, pset: Path, **options) -> None:
        call_command("migrate", interactive=False, verbosity=options["verbosity"])
        call_command("import_pset", str(pset), version=version, publish=True)
        call_command("demo_populate", version=version, background=True)
