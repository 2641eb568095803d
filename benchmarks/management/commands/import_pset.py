"""Import a problem set in the FORMAT.md layout into a benchmark version."""

from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from benchmarks.management.base import VersionCommand
from benchmarks.paper2code import PackageError
from benchmarks.selectors import version_settings_text
from benchmarks.services.psets import pset_import


class Command(VersionCommand):
    help = "Import a problem set (papers.yaml + one folder per paper) into a benchmark version, atomically."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Folder holding papers.yaml.")
        parser.add_argument("--version", required=True, help="Benchmark version name.")
        parser.add_argument("--requirements", type=Path, help="Requirements shared by every task of the set.")
        parser.add_argument(
            "--environment",
            type=Path,
            help="Build every task in this one environment (a legacy set's shared requirements) "
            "instead of its own; the tasks' own requirement files are kept as files.",
        )
        parser.add_argument("--publish", action="store_true", help="Publish (freeze) the version afterwards.")
        parser.add_argument(
            "--no-prepare",
            dest="prepare",
            action="store_false",
            help="Queue no preparation of the tasks' test manifests and recordings on the workers "
            "(the first run then makes them).",
        )
        parser.add_argument("--protocol", help="The release's default prompt protocol (default rcb-v1).")
        parser.add_argument(
            "--time-limit",
            type=int,
            metavar="SECONDS",
            help="Wall-clock limit of one test run on this release (the original harness: 60).",
        )
        parser.add_argument("--memory", type=int, metavar="MB", help="Memory limit of one test run, in MB.")
        parser.add_argument("--cpus", type=float, help="CPU limit of one test run.")
        parser.add_argument(
            "--duplicate-reason",
            default="",
            help="Import papers that match another paper of a release (docs/SUBMITTING.md, one paper once) anyway, "
            "for this reason, which the release's changelog keeps; without it such a set is refused.",
        )

    def handle(
        self,
        *args: object,
        path: Path,
        version: str,
        requirements: Path | None,
        environment: Path | None,
        publish: bool,
        protocol: str | None,
        time_limit: int | None,
        memory: int | None,
        cpus: float | None,
        prepare: bool = True,
        duplicate_reason: str = "",
        **options: object,
    ) -> None:
        shared = ""
        if requirements is not None:
            try:
                shared = Path(requirements).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{requirements}: cannot read requirements: {exc}") from exc
        if environment is not None and requirements is not None:
            raise CommandError(
                "give --environment (one environment for every task) or --requirements "
                "(lines added to each task's own), not both"
            )
        shared_environment = None
        if environment is not None:
            try:
                shared_environment = Path(environment).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{environment}: cannot read the environment: {exc}") from exc
        try:
            given = {"protocol": protocol, "time_limit_seconds": time_limit, "memory_mb": memory, "cpus": cpus}
            result = pset_import(
                root=path,
                version_name=version,
                shared_requirements=shared,
                publish=publish,
                environment=shared_environment,
                environment_file=Path(environment).name if environment else "",
                release_settings={k: v for k, v in given.items() if v is not None},
                prepare=prepare,
                duplicate_reason=duplicate_reason,
            )
        except PackageError as exc:
            raise CommandError(f"nothing imported; {len(exc.problems)} problem(s):\n{exc}") from exc
        for warning in result.warnings:
            self.stderr.write(str(warning))
        self.stdout.write(f"settings: {version_settings_text(version=result.version)}")
        tasks = result.tasks_created + result.tasks_unchanged
        snippets = sum(t.snippets.count() for t in tasks)
        self.stdout.write(
            f"release {result.version.name} ({result.version.status}): {len(tasks)} paper(s), {snippets} snippet(s); "
            f"{len(result.tasks_created)} new task revision(s), {len(result.tasks_unchanged)} unchanged"
        )
