"""A model's platform agent runs against its imported Harbor jobs on a release, as Harbor's parity_experiment.json."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.models import BenchmarkVersion
from evaluation.harbor.parity import ParityError, parity_report
from evaluation.models import ModelEntry


class Command(BaseCommand):
    help = (
        "Print (or write) the parity of a model's platform agent runs and its imported Harbor jobs on a release: "
        "each side's mean +/- sample SEM and whether the ranges overlap, in parity_experiment.json's fields."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--release", required=True, help="The release both sides ran on.")
        parser.add_argument("--model", required=True, help="The registered model (its name).")
        parser.add_argument("--without-paper", action="store_true", help="Compare the runs made without the paper.")
        parser.add_argument("--output", type=Path, help="Write the JSON here instead of printing it.")

    def handle(self, *args, release: str, model: str, without_paper: bool, output: Path | None, **options) -> None:
        try:
            version = BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT).get(name=release)
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"--release: no published release named {release!r}") from exc
        try:
            entry = ModelEntry.objects.get(name=model)
        except ModelEntry.DoesNotExist as exc:
            raise CommandError(f"--model: no registered model named {model!r}") from exc
        try:
            report = parity_report(model=entry, version=version, with_paper=not without_paper)
        except ParityError as exc:
            raise CommandError(f"no parity report: {exc}") from exc
        text = json.dumps(report, indent=2) + "\n"
        if output:
            output.write_text(text)
            self.stdout.write(f"wrote {output} ({len(report)} entr{'y' if len(report) == 1 else 'ies'})")
        else:
            self.stdout.write(text, ending="")
