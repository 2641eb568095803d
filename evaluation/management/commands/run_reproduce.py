"""Execute every item of a recorded run again, in this process's sandbox, and print whether each verdict agrees."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.executor import backend_current, sessions_close
from evaluation.models import EvaluationRun
from evaluation.reproducibility import run_reproduce


class Command(BaseCommand):
    help = (
        "Re-execute every item of run RUN_ID with its stored code (inline, in this process's sandbox backend) "
        "and print per item whether the new verdict agrees with the stored one, then a summary. Stores nothing; "
        "exits with an error when any item disagrees."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int, help="The run to reproduce.")

    def handle(self, *args, run_id: int, **options) -> None:
        run = EvaluationRun.objects.select_related("model", "version").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        self.stdout.write(
            f"run {run.pk}: {run.model} on {run.version}, protocol {run.protocol}, sandbox {backend_current().name}"
        )
        total = agreed = environment_changed = skipped = 0
        try:
            for agreement in run_reproduce(run=run):
                outcome = agreement.outcome
                total += 1
                if agreement.skipped:
                    skipped += 1
                    self.stdout.write(
                        f"skipped  item {outcome.snippet_id} sample {outcome.sample}: "
                        f"{agreement.detail} (stored {outcome.status})"
                    )
                    continue
                agreed += agreement.agrees
                environment_changed += agreement.same_environment is False
                stored = f"{outcome.status}{'/' + outcome.category if outcome.category else ''}"
                now = f"{agreement.status}{'/' + agreement.category if agreement.category else ''}"
                mark = "agree   " if agreement.agrees else "DISAGREE"
                note = " (environment differs from the recorded one)" if agreement.same_environment is False else ""
                self.stdout.write(
                    f"{mark} item {outcome.snippet_id} sample {outcome.sample} "
                    f"{outcome.snippet.task.paper.slug}:{outcome.snippet.name}: "
                    f"stored {stored}, now {now}{note}"
                )
        finally:
            sessions_close()
        if not total:
            raise CommandError(f"run {run.pk} has no recorded item to reproduce")
        executed = total - skipped
        self.stdout.write(
            f"summary: {agreed} of {executed} item(s) agree "
            f"({100.0 * agreed / executed if executed else 100.0:.1f}%), {executed - agreed} disagree, "
            f"{skipped} skipped (no answer recorded); "
            f"{environment_changed} ran in a different environment"
        )
        if agreed < executed:
            raise CommandError(f"{executed - agreed} of {executed} item(s) of run {run.pk} disagree with the record")
