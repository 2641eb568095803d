"""Export a published release as Harbor tasks (evaluation/harbor/export.py); held-out items only by this command."""

from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from benchmarks.management.base import VersionCommand
from benchmarks.models import BenchmarkVersion
from evaluation.harbor.export import SPLITS, ExportError, release_export


class Command(VersionCommand):
    help = "Write one Harbor task per item of a release's split (a maintainer's command: held_out and all included)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Folder to create (must not exist or be empty).")
        parser.add_argument("--version", required=True, help="The release's name.")
        parser.add_argument("--split", choices=SPLITS, default="public")
        parser.add_argument("--without-paper", action="store_true", help="The ablation: no paper in the workspace.")
        parser.add_argument(
            "--base-image", default="", help="The image every task builds from (default: the sandbox base)."
        )

    def handle(
        self,
        *args: object,
        path: Path,
        version: str,
        split: str,
        without_paper: bool,
        base_image: str,
        **options: object,
    ) -> None:
        try:
            release = BenchmarkVersion.objects.get(name=version)
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"--version: no release named {version!r}") from exc
        try:
            names = release_export(
                version=release, root=path, split=split, with_paper=not without_paper, base_image=base_image
            )
        except ExportError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"wrote {len(names)} Harbor task(s) of release {release.name} ({split}) to {path}")
