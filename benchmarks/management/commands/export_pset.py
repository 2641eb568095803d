"""Export a benchmark version as a problem set in the FORMAT.md layout."""

from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from benchmarks.management.base import VersionCommand
from benchmarks.models import BenchmarkVersion
from benchmarks.services.psets import version_export


class Command(VersionCommand):
    help = "Write a benchmark version's tasks as papers.yaml plus one folder per paper."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Folder to create (must not exist or be empty).")
        parser.add_argument("--version", required=True)

    def handle(self, *args: object, path: Path, version: str, **options: object) -> None:
        try:
            benchmark_version = BenchmarkVersion.objects.get(name=version)
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"no benchmark version named {version!r}") from exc
        try:
            packages = version_export(version=benchmark_version, root=path)
        except ValueError as exc:
            raise CommandError(f"{path}: {exc}") from exc
        self.stdout.write(f"wrote {len(packages)} paper(s) of version {benchmark_version.name} to {path}")
