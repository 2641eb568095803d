"""Evaluate a model on a published benchmark version, with a progress bar and a summary table."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import InterfaceError, OperationalError
from tqdm import tqdm

from benchmarks.management.base import VersionCommand
from benchmarks.models import BenchmarkVersion
from benchmarks.selectors import version_settings_text
from evaluation import services, tasks
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from evaluation.run_modes import run_mode_get
from evaluation.selectors.items import run_items_missing, run_progress
from operations.enqueue import task_named
from operations.watchdog import database_wait


class Command(VersionCommand):
    help = "Evaluate a registered model on a published version through the Celery workers (or --inline)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="Registered model name, e.g. reference.")
        parser.add_argument("--version", required=True, help="Published benchmark version name.")
        parser.add_argument("--without-paper", action="store_true", help="The ablation: no paper in the prompt.")
        parser.add_argument("--samples", type=int, default=1, help="Answers per snippet (pass@k when > 1).")
        parser.add_argument("--protocol", help="A prompt protocol's name (default: the release's).")
        parser.add_argument(
            "--mode",
            choices=["single", "agent"],
            default="single",
            help="agent: the model works in a sandbox over many turns within a budget per item.",
        )
        parser.add_argument(
            "--budget",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="An agent run's per-item budget, e.g. --budget turns=20 (turns, tokens, seconds, "
            "cost); default: the release's maximums.",
        )
        parser.add_argument(
            "--repeat",
            type=int,
            default=1,
            help="Runs of this setting to start together; the leaderboard shows them as one row with the mean "
            "and standard error across the runs.",
        )
        parser.add_argument("--inline", action="store_true", help="Run every item in this process, no worker.")
        parser.add_argument("--timeout", type=float, default=24 * 3600, help="Seconds to wait for the workers.")

    def handle(
        self,
        *args,
        model: str,
        version: str,
        without_paper: bool,
        samples: int,
        protocol: str | None,
        inline: bool,
        timeout: float,
        mode: str = "single",
        budget: list[str] | None = None,
        repeat: int = 1,
        **options,
    ) -> None:
        try:
            budgets = {name: float(value) for name, _, value in (pair.partition("=") for pair in budget or [])}
        except ValueError as exc:
            raise CommandError(f"--budget takes NAME=NUMBER: {exc}") from exc
        try:
            model_entry = ModelEntry.objects.get(name=model)
            benchmark = BenchmarkVersion.objects.get(name=version)
            runs = services.runs_start(
                repeat=repeat,
                model=model_entry,
                version=benchmark,
                with_paper=not without_paper,
                samples=samples,
                protocol=protocol,
                dispatch=not inline,
                mode=mode,
                budget=budgets or None,
            )
        except ModelEntry.DoesNotExist as exc:
            raise CommandError(f"no registered model named {model!r}") from exc
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"no benchmark version named {version!r}") from exc
        except services.EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        for n, run in enumerate(runs, 1):
            self.stdout.write(
                f"run {run.pk}: {model_entry} on {benchmark}, {run.total_items} item(s) in protocol "
                f"{run.protocol}, mode {run.mode}"
                f"{f' (budget per item: {run.agent_budget})' if run.agent_budget else ''}"
                f"{f' (repeat {n} of {len(runs)})' if len(runs) > 1 else ''}; "
                f"release settings: {version_settings_text(version=benchmark)}"
            )
        for run in runs:
            if inline:
                self._run_inline(run)
            else:
                self._through_outages(run, partial(self._follow, run, timeout))
            self._through_outages(run, partial(self._summary, run))

    def _through_outages(self, run: EvaluationRun, step: Callable[[], object]) -> None:
        """Run `step`; while the database is away (the run goes on in the workers, which wait for it too), say so and
        wait for it, up to DATABASE_OUTAGE_WAIT_SECONDS, then take the step again."""
        while True:
            try:
                step()
                return
            except (OperationalError, InterfaceError) as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                wait = settings.DATABASE_OUTAGE_WAIT_SECONDS
                self.stderr.write(
                    f"the database does not answer ({reason}); run {run.pk} goes on in the workers, which wait for "
                    f"it too: waiting up to {wait} s for it"
                )
                if not database_wait(timeout=wait):
                    raise CommandError(
                        f"the database did not answer for {wait} s; run {run.pk} goes on in the workers once it "
                        "does: its page says how it ended"
                    ) from None
                self.stderr.write("the database answers again")

    def _run_inline(self, run: EvaluationRun) -> None:
        EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
        calls_model = run.model.kind == ModelEntry.Kind.LITELLM
        for snippet_id, sample in tqdm(run_items_missing(run), unit="item", file=sys.stderr):
            if (mode := run_mode_get(run.mode)) is not None:
                task_named(mode.item_task).apply(args=(run.pk, snippet_id, sample), throw=True)
                continue
            if calls_model:
                tasks.item_generate.apply(args=(run.pk, snippet_id, sample), throw=True)
            tasks.item_evaluate.apply(args=(run.pk, snippet_id, sample), throw=True)

    def _follow(self, run: EvaluationRun, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with tqdm(total=run.total_items, unit="item", file=sys.stderr) as bar:
            while time.monotonic() < deadline:
                run.refresh_from_db()
                progress = run_progress(run)
                bar.update(progress.done - bar.n)
                bar.set_postfix(
                    passed=progress.passed, failed=progress.failed, errors=progress.errors, flagged=progress.flagged
                )
                if not run.is_active:
                    return
                time.sleep(0.5)
        raise CommandError(f"run {run.pk} did not finish within {timeout:.0f} s; it goes on in the workers")

    def _summary(self, run: EvaluationRun) -> None:
        run.refresh_from_db()
        if run.status != EvaluationRun.Status.COMPLETED:
            raise CommandError(f"run {run.pk} ended {run.status}")
        rows = list(RunScore.objects.filter(run=run).select_related("paper").order_by("paper__slug"))
        rows.sort(key=lambda r: (r.paper is not None, r.split != "", r.split))
        header = (
            f"{'paper':<28} {'items':>5} {'pass':>5} {'fail':>5} {'err':>4} {'flag':>4} {'pass@1':>7} "
            f"{'scaled':>7}  95% CI"
        )
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        for row in rows:
            name = (
                row.paper.slug
                if row.paper
                else {"": "ALL", "public": "ALL public", "held_out": "ALL held out"}[row.split]
            )
            self.stdout.write(
                f"{name[:28]:<28} {row.items:>5} {row.passed:>5} {row.failed:>5} {row.errors:>4} {row.flagged:>4} "
                f"{row.pass_rate:>6.1f}% {row.scaled_pass_rate:>6.1f}%  "
                f"[{row.scaled_ci_low:.1f}, {row.scaled_ci_high:.1f}]"
            )
