"""Import a Harbor job folder as a self-reported agent run, every answer scored again (evaluation/harbor/imports.py)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.models import BenchmarkVersion
from common.errors import ApplicationError
from evaluation.harbor.imports import harbor_job_import
from evaluation.models import ModelEntry


class Command(BaseCommand):
    help = "Store a Harbor job (jobs/<job>) as an agent upload run of a release and queue its items for scoring."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_dir", type=Path, help="The job's folder (holding <trial>/result.json).")
        parser.add_argument("--release", required=True, help="The release the job's tasks were exported from.")
        parser.add_argument("--model", required=True, help="The registered model the agent ran (its name).")

    def handle(self, *args: object, job_dir: Path, release: str, model: str, **options: object) -> None:
        try:
            version = BenchmarkVersion.objects.get(name=release)
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"--release: no release named {release!r}") from exc
        try:
            entry = ModelEntry.objects.get(name=model)
        except ModelEntry.DoesNotExist as exc:
            raise CommandError(f"--model: no registered model named {model!r}") from exc
        try:
            run, notes = harbor_job_import(job_dir=job_dir, version=version, model=entry)
        except ApplicationError as exc:
            details = getattr(exc, "problems", None) or [str(exc)]
            raise CommandError("the job was refused, nothing stored:\n" + "\n".join(details)) from exc
        for note in notes:
            self.stdout.write(note)
        scaffold = run.params["scaffold"]
        self.stdout.write(
            f"run {run.pk}: {run.total_items} item(s) of {version.name} by {entry.name} under "
            f"{scaffold['name']} {scaffold['version']}, queued for scoring"
        )
