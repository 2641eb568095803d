"""Import a benchmark's published per-snippet results (overall_stats.json) as reported runs, one per model."""

from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from benchmarks.management.base import VersionCommand
from benchmarks.models import BenchmarkVersion
from evaluation.reported import ReportedResultsError, reported_results_import
from evaluation.services import EvaluationError


class Command(VersionCommand):
    help = (
        'Import published results (results[paper id]["results"][model]["results"][snippet name] = completions '
        'with "passed" and "snippet_code_line_count") as reported runs on a published release.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="The results file, e.g. overall_stats.json.")
        parser.add_argument("--version", required=True, help="The release the results were measured on.")
        parser.add_argument(
            "--source",
            default="",
            help="Where the results were published (shown on the leaderboard), e.g. the paper's table or a URL.",
        )

    def handle(self, *args, file: Path, version: str, source: str, **options) -> None:
        release = BenchmarkVersion.objects.filter(name=version).first()
        if release is None:
            raise CommandError(f"no release named {version!r}")
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"{file}: cannot read: {exc}") from exc
        try:
            runs = reported_results_import(version=release, data=data, source=source)
        except ReportedResultsError as exc:
            raise CommandError(
                f"{file}: nothing imported, {len(exc.problems)} problem(s):\n"
                + "\n".join(f"  {p}" for p in exc.problems)
            ) from exc
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        for run in runs:
            score = run.scores.get(paper__isnull=True, split="")
            self.stdout.write(
                f"run {run.pk}: {run.model.display_name} (reported) scaled pass@1 "
                f"{score.scaled_pass_rate:.1f}%, pass@1 {score.pass_rate:.1f}% over {score.items} "
                "snippets"
            )
