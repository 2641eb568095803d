"""Give a fresh demo site something to show: completed calibration runs and a sample upload on the demo release.

`make run` calls it with `--background` after loading the demo release: the runs are queued for the worker it
starts next, so the first page answers at once and says they are scoring (home.html) until the leaderboard, the run
pages and the item pages have their content. Without `--background` they are scored in this process. It changes
nothing where a model already has a completed run on the release.
"""

from __future__ import annotations

import json
import sys

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from benchmarks import visibility
from benchmarks.management.base import VersionCommand
from benchmarks.models import BenchmarkVersion
from benchmarks.paper2code import body_reindent
from evaluation import services, tasks
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.selectors.items import run_items_missing

SAMPLE_MODEL = "sample-upload"


def sample_upload_lines(*, version: BenchmarkVersion) -> bytes:
    """A sample upload as a newcomer writes one: `code` bodies without indentation (re-indented on upload), the
    reference for every paper but the last, whose snippets get a body that runs and returns nothing useful."""
    snippets = list(visibility.items_public(version=version).select_related("task__paper").order_by("pk"))
    papers = sorted({s.task.paper.slug for s in snippets})
    lines = []
    for snippet in snippets:
        right = snippet.task.paper.slug != papers[-1] or len(papers) == 1
        body = body_reindent(snippet.reference_code, "") if right else "pass\n"
        lines.append(json.dumps({"id": str(snippet.pk), "sample": 0, "code": body}))
    return ("\n".join(lines) + "\n").encode()


class Command(VersionCommand):
    help = (
        "Complete the reference and placeholder runs and one sample upload on a published release, scored in "
        "this process (or by a worker, with --background); a model with a completed run there is left alone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--version", required=True, help="Published release, e.g. demo-1.0.0.")
        parser.add_argument(
            "--background",
            action="store_true",
            help="Queue the runs for a Celery worker instead of scoring them here (`make run` starts one next).",
        )

    def handle(self, *args, version: str, background: bool = False, **options) -> None:
        self.background = background
        try:
            release = BenchmarkVersion.objects.get(name=version, status=BenchmarkVersion.Status.PUBLISHED)
        except BenchmarkVersion.DoesNotExist as exc:
            raise CommandError(f"no published release named {version!r}") from exc
        if not background:
            self._sandbox_choose()
        for kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
            for model in ModelEntry.objects.filter(kind=kind, owner__isnull=True):
                if self._has_run(model, release):
                    continue
                self._score(services.run_start(model=model, version=release, dispatch=background), queued=background)
        sample, _ = ModelEntry.objects.get_or_create(
            name=SAMPLE_MODEL,
            defaults={"display_name": "Sample upload (demo)", "organization": "Demo", "kind": ModelEntry.Kind.UPLOADED},
        )
        if not self._has_run(sample, release):
            self._score(
                services.run_from_upload(model=sample, version=release, data=sample_upload_lines(version=release)),
                queued=True,  # the upload queues its own dispatch
            )

    def _has_run(self, model: ModelEntry, release: BenchmarkVersion) -> bool:
        """A completed run (nothing to do) or an active one (a worker, or an earlier interrupted call, finishes it:
        this call scores what it left)."""
        run = (
            model.runs.filter(version=release)
            .exclude(status=EvaluationRun.Status.CANCELLED)
            .order_by("-created_at")
            .first()
        )
        if run is None:
            return False
        if run.status != EvaluationRun.Status.COMPLETED:
            self._score(run)
        else:
            self.stdout.write(f"{model.name}: run {run.pk} on {release.name} already completed")
        return True

    def _sandbox_choose(self) -> None:
        """The configured sandbox; without one (`auto` finds none), `local`: the code scored here is the
        repository's own (reference code, placeholder lines, the demo's tests), never a user's."""
        from sandbox import NoSandboxError, backend_get

        try:
            backend_get()
        except NoSandboxError:
            self.stderr.write(
                "no sandbox works here: the demo's own reference code is scored with SANDBOX_BACKEND="
                "local (no isolation), as `make run` does"
            )
            settings.SANDBOX_BACKEND = "local"

    def _score(self, run: EvaluationRun, *, queued: bool = False) -> None:
        """Score the run here, or with --background leave it to the worker: a run just started is queued already
        (`queued`); an earlier start's unfinished run is fed again from its first missing item (what the broker
        still holds of it is dropped), so an interrupted `make run` resumes."""
        if self.background:
            if not queued:
                services.run_dispatch(run=run)
            self.stdout.write(f"{run.model.name}: run {run.pk} on {run.version.name} queued for the worker")
            return
        EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
        self.stdout.write(f"{run.model.name}: scoring run {run.pk} on {run.version.name}")
        for snippet_id, sample in tqdm(run_items_missing(run), unit="item", file=sys.stderr):
            tasks.item_evaluate.apply(args=(run.pk, snippet_id, sample), throw=True)
        run.refresh_from_db()
        if run.status != EvaluationRun.Status.COMPLETED:
            raise CommandError(f"run {run.pk} of {run.model.name} ended {run.status}")
