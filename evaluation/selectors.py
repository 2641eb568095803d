"""Reads for evaluation: the items of a run, what is missing, prompts, progress."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code.markers import is_marker, split_lines
from benchmarks.paper2code.pset import TEST_ENTRY_POINT
from benchmarks.selectors import (
    papers_as_released,
    protocol_get,
    snippet_prompt,
    tasks_as_released,
    user_is_maintainer,
    version_snippets,
)
from common.highlight import answer_diff
from evaluation.harbor.rewards import NO_REWARD, harbor_reward
from evaluation.models import (
    HUMAN_MODE,
    EvaluationRun,
    Generation,
    ModelEntry,
    Outcome,
    RunScore,
    TaskPreparation,
)
from evaluation.taskfiles import task_annotated, task_files
from operations.broker import queue_consumers
from operations.events import Kind, events_of
from sandbox.harness import CHILD_SOURCE, status_lines_removed

# Runs: which items a run covers, and who sees its answers and outcomes (the visibility rules of evaluation's own data;
# benchmarks.visibility holds those of releases, tasks and items).

# Call parameters a model not registered by a maintainer may carry on a held-out run: sampling only, so nothing
# can send the prompt anywhere else or ask the provider to keep it for the key's owner.
HELD_OUT_SAFE_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
    }
)


def _maintainer_owned(model: ModelEntry) -> bool:
    return model.owner is not None and user_is_maintainer(user=model.owner)


def _endpoint_trusted_with_held_out(*, model: ModelEntry, provider: str, api_base: str, params: dict) -> bool:
    """Whether held-out prompts may go to `model` called with this provider, api_base and parameters.

    Calibration models never leave the platform; a model registered by a maintainer is the maintainers' call;
    any other model only on a provider of HELD_OUT_PROVIDERS, at the provider's own address (never the owner's
    api_base) and with sampling parameters only (nothing like `store` that asks the provider to keep the prompt for
    the key's owner).
    """
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        return True
    if model.kind != ModelEntry.Kind.LITELLM:
        return False
    if _maintainer_owned(model):
        return True
    return provider in settings.HELD_OUT_PROVIDERS and not api_base and set(params) <= HELD_OUT_SAFE_PARAMS


def model_trusted_with_held_out(*, model: ModelEntry) -> bool:
    """Whether held-out prompts may go to this model as it is set up now: only endpoints maintainers trust."""
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params=model.default_params
    )


def run_covers_held_out(*, model: ModelEntry, params: dict | None = None, uploaded: bool = False) -> bool:
    """Whether a new run evaluates held-out items too; uploads and runs of untrusted models cover the public split
    only (a run's own parameters are held to the same sampling-only rule as the model's)."""
    if uploaded:
        return False
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params={**model.default_params, **(params or {})}
    )


def run_sends_held_out(*, run: EvaluationRun) -> bool:
    """Whether a held-out prompt of `run` may leave now: asked again before each one, against the endpoint the run
    snapshot at its start (what it really calls), with today's trust (a maintainer's role, HELD_OUT_PROVIDERS)."""
    return run.covers_held_out and _endpoint_trusted_with_held_out(
        model=run.model, provider=run.provider, api_base=run.api_base, params=run.call_params
    )


def run_snippets(*, run: EvaluationRun) -> QuerySet[Snippet]:
    """The items a run evaluates (all splits when it covers held-out ones, the public split else), in item order; a
    person's attempt (mode human) evaluates the one item it answers."""
    if run.mode == HUMAN_MODE:
        return version_snippets(version=run.version, split=visibility.PUBLIC).filter(
            pk__in=Generation.objects.filter(run=run).values("snippet_id")
        )
    return version_snippets(version=run.version, split=None if run.covers_held_out else visibility.PUBLIC).order_by(
        "pk"
    )


def runs_visible(*, user) -> QuerySet[EvaluationRun]:
    """Runs on versions the user may see (drafts have none, but the rule is the version's). A person's attempt's run
    is theirs alone: its result is shown on the attempt's page (humans/), never as a run."""
    runs = EvaluationRun.objects.exclude(mode=HUMAN_MODE)
    if user_is_maintainer(user=user):
        return runs
    return runs.exclude(version__status=BenchmarkVersion.Status.DRAFT)


def outcomes_visible(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """Per-item outcomes (status, detail, output tails) and their answers: public items for all, held-out for
    maintainers."""
    outcomes = Outcome.objects.filter(run=run)
    if visibility.user_sees_held_out(user=user):
        return outcomes
    return outcomes.filter(
        snippet__task__memberships__version=run.version_id, snippet__task__memberships__split=visibility.PUBLIC
    )


def split_scores_itemized(*, runs: list[EvaluationRun], user) -> QuerySet[RunScore]:
    """The stored aggregate of each run whose finer breakdowns (e.g. by snippet size) the user may see: over every
    item for maintainers, over the public split for everyone else."""
    split = RunScore.Split.ALL if visibility.user_sees_held_out(user=user) else RunScore.Split.PUBLIC
    return RunScore.objects.filter(run__in=runs, paper__isnull=True, split=split)


def paper_scores_visible(*, run: EvaluationRun, user) -> list[RunScore]:
    """Per-paper scores of a run, each paper as its release froze it: a held-out paper's score is as fine-grained as
    its few items, so maintainers only."""
    scores = run.scores.filter(paper__isnull=False, split="").select_related("paper").order_by("paper__slug")
    if not visibility.user_sees_held_out(user=user):
        scores = scores.filter(paper__in=visibility.papers_visible(version=run.version, user=user))
    shown = list(scores)
    for score, paper in zip(
        shown, papers_as_released(version=run.version, papers=[s.paper for s in shown if s.paper]), strict=True
    ):
        score.paper = paper
    return shown


def run_gpu_notice(*, run: EvaluationRun) -> str | None:
    """Why items of an active run wait: tasks that need a GPU while no worker consuming `gpu` answers (None: none
    waits for a GPU, or a GPU worker is there)."""
    from evaluation.routing import GPU_QUEUE

    if not run.is_active:
        return None
    waiting = (
        run_snippets(run=run)
        .filter(task__extra_metadata__gpu=True)
        .exclude(pk__in=Outcome.objects.filter(run=run).values("snippet_id"))
    )
    tasks = waiting.values("task_id").distinct().count()
    if not tasks:
        return None
    workers = queue_consumers(GPU_QUEUE)
    need = f"{tasks} task{'s' if tasks != 1 else ''} need{'s' if tasks == 1 else ''} a GPU"
    if workers is None:
        return f"{need}; whether a GPU worker is registered cannot be told (the workers do not answer)"
    if not workers:
        return f"{need}; no GPU worker is registered: their items wait on the `gpu` queue until one starts"
    return None


def run_items(run: EvaluationRun) -> list[tuple[int, int]]:
    """Every (snippet id, sample) of the run."""
    ids = list(run_snippets(run=run).values_list("pk", flat=True))
    return [(snippet_id, sample) for snippet_id in ids for sample in range(run.samples)]


def run_feed_order(run: EvaluationRun, start: int = 0, count: int | None = None) -> list[tuple[int, int]]:
    """Every (snippet id, sample) of the run in the order the feeder queues them: grouped by environment, then
    paper and file, each snippet's samples together, so a worker's fork server sees few import sets at a time. Items
    of tasks that need a GPU come last: they wait on the `gpu` queue, and fed first they would hold the run's whole
    share in flight while no GPU worker takes them.

    `start` and `count`: only that window of the order, read as such from the database (the feeder tops a run up by
    an item or two after each item ends; reading the whole order each time grew with the run's size)."""
    needs_gpu = Case(When(task__extra_metadata__gpu=True, then=Value(1)), default=Value(0))
    ids = (
        run_snippets(run=run)
        .order_by(needs_gpu, "task__environment_hash", "task__paper__slug", "file_path", "pk")
        .values_list("pk", flat=True)
    )
    first = start // run.samples
    ids = ids[first:] if count is None else ids[first : -(-(start + count) // run.samples)]
    items = [(snippet_id, sample) for snippet_id in ids for sample in range(run.samples)]
    skip = start - first * run.samples
    return items[skip:] if count is None else items[skip : skip + count]


def run_items_missing(run: EvaluationRun) -> list[tuple[int, int]]:
    """Items without an outcome yet: what a resume dispatches."""
    done = set(Outcome.objects.filter(run=run).values_list("snippet_id", "sample"))
    return [item for item in run_items(run) if item not in done]


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    passed: int
    failed: int
    errors: int
    generated: int  # answers the model gave (a failed call is no answer)
    flagged: int = 0
    call_failures: int = 0

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


def run_progress(run: EvaluationRun) -> Progress:
    # Polled every few seconds while a run goes: count in the database, not row by row here.
    counts = {s: 0 for s in Outcome.Status.values}
    counts.update(Outcome.objects.filter(run=run).values_list("status").annotate(n=Count("id")).order_by())
    return Progress(
        total=run.total_items,
        done=sum(counts.values()),
        passed=counts["passed"],
        failed=counts["failed"],
        errors=counts["error"],
        flagged=counts["flagged"],
        **Generation.objects.filter(run=run).aggregate(
            generated=Count("id", filter=Q(error="")), call_failures=Count("id", filter=~Q(error=""))
        ),
    )


def item_prompt(snippet: Snippet, *, with_paper: bool, protocol: str) -> str:
    """The prompt for one item in the named protocol, from the worker's cached task files."""
    return snippet_prompt(
        snippet=snippet,
        files=task_files(snippet.task),
        with_paper=with_paper,
        protocol=protocol_get(name=protocol),
        annotated=task_annotated(snippet.task, snippet.file_path),
    )


_NEVER = datetime.min.replace(tzinfo=UTC)  # a run's date when it has none

# Which run is a model's row, as the leaderboard, the hardest-snippets page and the model page say it.
LEADERBOARD_RUN_RULE = "the run its owner pinned, else the latest completed run"


def leaderboard_choose(runs: Iterable[EvaluationRun]) -> dict[tuple[int, int, str, bool, str], EvaluationRun]:
    """The one rule for a model's leaderboard row per (release, model, mode, with/without paper, scaffold): of the
    completed
    runs,
    the one its owner pinned, else the latest finished. So a new run or upload never replaces a pinned row; the
    model page lists every run with its score, and its owner moves the pin."""
    chosen: dict[tuple[int, int, str, bool, str], EvaluationRun] = {}
    for run in runs:
        if run.status != EvaluationRun.Status.COMPLETED:
            continue
        # An agent run is another setting of the model, never a newer row of its single-shot self; so is an agent
        # run under another scaffold (the platform's loop, a Harbor agent).
        key = (run.version_id, run.model_id, run.mode, run.with_paper, run.scaffold)
        held = chosen.get(key)
        if held is None or _preference(run) > _preference(held):
            chosen[key] = run
    return chosen


def _preference(run: EvaluationRun) -> tuple[bool, datetime, int]:
    return run.pinned_at is not None, run.finished_at or _NEVER, run.pk


def repeat_runs(*, run: EvaluationRun) -> list[int]:
    """The ids of the runs started together with `run` (its repeat group), oldest first; [] for a run started
    alone."""
    if run.repeat_group is None:
        return []
    return list(EvaluationRun.objects.filter(repeat_group=run.repeat_group).order_by("pk").values_list("pk", flat=True))


CALIBRATION_KINDS = (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER)


def calibration_models() -> QuerySet[ModelEntry]:
    """The built-in calibration models whose runs are every release's reference lines (made by a migration)."""
    return ModelEntry.objects.filter(kind__in=CALIBRATION_KINDS, owner__isnull=True).order_by("kind", "name")


@dataclass
class ModelRun:
    """One run of a model as its page lists it: the overall score, and whether it is the model's leaderboard row in
    its release and setting."""

    run: EvaluationRun
    score: RunScore | None
    on_leaderboard: bool


def model_runs(*, model: ModelEntry) -> list[ModelRun]:
    """A model's runs on visible (published or deprecated) versions, newest first, with the overall score and
    which of them are its leaderboard rows (the rule of leaderboard_choose)."""
    runs = list(
        model.runs.exclude(version__status=BenchmarkVersion.Status.DRAFT)
        .exclude(mode=HUMAN_MODE)  # a person's results are theirs (humans/)
        .select_related("version", "model")
    )
    scores = {s.run_id: s for s in RunScore.objects.filter(run__in=runs, paper__isnull=True, split="")}
    chosen = {run.pk for run in leaderboard_choose(runs).values()}
    return [ModelRun(run=run, score=scores.get(run.pk), on_leaderboard=run.pk in chosen) for run in runs]


def models_owned(*, user) -> QuerySet[ModelEntry]:
    """The models a user registered, with how many runs each has, newest first."""
    return ModelEntry.objects.filter(owner=user).annotate(run_count=Count("runs")).order_by("-pk")


def runs_started(*, user) -> list[tuple[EvaluationRun, RunScore | None]]:
    """The runs a user started or uploaded, newest first, with the overall score of those completed."""
    runs = list(EvaluationRun.objects.filter(created_by=user).select_related("model", "version"))
    scores = {s.run_id: s for s in RunScore.objects.filter(run__in=runs, paper__isnull=True, split="")}
    return [(run, scores.get(run.pk)) for run in runs]


def run_split_scores(*, run: EvaluationRun, user) -> list[RunScore]:
    """A run's aggregates per split (public, held out) and overall; aggregates are public, but what the held-out
    ones spent (tokens, cost) only where the user may see it (`usage_withheld` marks a row whose usage is blanked)."""
    order = {"public": 0, "held_out": 1, "": 2}
    return withhold_usage(
        run=run, scores=sorted(run.scores.filter(paper__isnull=True), key=lambda s: order[s.split]), user=user
    )


def withhold_usage(*, run: EvaluationRun, scores: list[RunScore], user) -> list[RunScore]:
    """The scores with the tokens and cost blanked (None, never 0) of those over held-out items (the held-out split's
    and the overall one) where visibility.usage_withheld says so; the public split's and its papers' stay."""
    if not visibility.usage_withheld(run=run, user=user):
        return scores
    for score in scores:
        if score.paper_id is None and score.split != RunScore.Split.PUBLIC:
            score.prompt_tokens = score.completion_tokens = score.cost = None
            score.usage_withheld = True  # type: ignore[attr-defined]
    return scores


def outcome_tests(*, outcome: Outcome, task_visible: bool) -> list[dict]:
    """The tests the harness counted for a visible outcome: id, outcome, passed, why not; each failing test's
    traceback tail only where the viewer may see the task's files (it quotes them), as for the reference code."""
    return [
        {
            "id": row.get("id", ""),
            "outcome": row.get("outcome", ""),
            "passed": bool(row.get("passed")),
            "problem": row.get("problem", ""),
            "subtests": dict(zip(("passed", "run"), row.get("subtests", [0, 0]), strict=True)),
            "detail": row.get("detail", "") if task_visible else "",
        }
        for row in outcome.tests
    ]


_FRAME_PATH = re.compile(r'File "(/[^"]+)"')
# The harness's test process runs compiled from a string (sandbox/programs/child.py): its frames read
# `File "<string>", line N, in called_body`, the harness's own wrapping and nothing of the answer's or the paper's.
_HARNESS_FUNCTIONS = frozenset(re.findall(r"^\s*(?:async\s+)?def (\w+)", CHILD_SOURCE, re.MULTILINE))
_STRING_FRAME = re.compile(r'^ *File "<string>", line \d+, in (\w+)\n', re.MULTILINE)
# Installed packages and the standard library, wherever the environment or the interpreter lives.
_PACKAGES = re.compile(r'"/[^"]*/(?:site|dist)-packages/')
_STDLIB = re.compile(r'"/[^"]*/lib/python3\.\d+/')


def paths_shown(text: str, *, file_path: str) -> str:
    """A traceback as a reader of the paper's code needs it: the paper's files relative to its folder, installed
    packages under <env>/, the standard library under <python>/ and anything else (the harness, the sandbox's and
    the host's folders) as <harness>/ and its file name: where the platform keeps things is nobody's business. The
    frames of the harness's test process, compiled from a string, are left out: they are none of the test's."""
    own = tuple("/" + name.lstrip("/") for name in (file_path, TEST_ENTRY_POINT))
    roots = {path[: -len(end)] for path in _FRAME_PATH.findall(text) for end in own if path.endswith(end)}
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(root + "/", "")
    text = _STDLIB.sub('"<python>/', _PACKAGES.sub('"<env>/', text))
    text = _STRING_FRAME.sub(lambda m: "" if m[1] in _HARNESS_FUNCTIONS else m[0], text)
    return _FRAME_PATH.sub(lambda m: f'File "<harness>/{m[1].rsplit("/", 1)[-1]}"', text)


@dataclass
class RunItem:
    outcome: Outcome
    show_reference: bool
    answer_label: str = "model's answer"  # whose code the diff's "+++" side is: a person's attempt names its person

    @property
    def tests(self) -> list[dict]:
        tests = outcome_tests(outcome=self.outcome, task_visible=self.show_reference)
        return [{**test, "detail": self._paths(test["detail"])} for test in tests]

    def _paths(self, text: str) -> str:
        return paths_shown(text, file_path=self.outcome.snippet.file_path)

    @property
    def harbor_reward(self) -> dict | None:
        """An imported Harbor trial's own reward ({"value": a number or None}), to show beside the platform's
        verdict (never used for it); None for any other run."""
        value = harbor_reward(
            params=self.outcome.run.params, snippet_id=self.outcome.snippet_id, sample=self.outcome.sample
        )
        return None if value is NO_REWARD else {"value": value}

    @property
    def code(self) -> str | None:
        """The code the test ran: extracted from the answer, or uploaded as is (None without a stored answer)."""
        return self.outcome.generation.extracted_code if self.outcome.generation else None

    @property
    def diff(self) -> str:
        """Reference to the answer's code, for a viewer who may see the reference; "" otherwise or when equal."""
        if not self.show_reference or self.code is None:
            return ""
        # Nested snippets' markers are comments the reference carries and an answer need not: not a difference.
        reference, answer = (
            ("".join(line for line in split_lines(text) if not is_marker(line)))
            for text in (self.outcome.snippet.reference_code, self.code)
        )
        return answer_diff(reference=reference, answer=answer, labels=("reference", self.answer_label))

    @property
    def traceback_tail(self) -> str:
        """The last traceback the test printed (stderr, else stdout), for a viewer who may see the task's tests;
        "" when none or when the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        for text in (self.outcome.stderr_tail, status_lines_removed(self.outcome.stdout_tail)):
            if (start := text.rfind("Traceback (most recent call last)")) >= 0:
                return _last_lines(self._paths(text[start:]), OUTPUT_TAIL_LINES)
        return ""

    @property
    def error_line(self) -> int | None:
        """The line of the snippet's file the last traceback frame in it names (a syntax error's line too), for a
        viewer who may see the traceback; None when there is none."""
        path = "/" + self.outcome.snippet.file_path.lstrip("/")
        lines = [
            int(line)
            for file, line in re.findall(r'File "([^"]+)", line (\d+)', self.traceback_tail or self.output_tail)
            if ("/" + file.lstrip("/")).endswith(path)
        ]
        return lines[-1] if lines else None

    @property
    def output_tail(self) -> str:
        """The last lines of what the test printed (stdout and stderr), for a viewer who may see the task's tests;
        "" when it printed nothing or the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        printed = (status_lines_removed(self.outcome.stdout_tail), self.outcome.stderr_tail)
        parts = [text.rstrip() for text in printed if text.strip()]
        return _last_lines(self._paths("\n".join(parts)), OUTPUT_TAIL_LINES)


OUTPUT_TAIL_LINES = 40


def _last_lines(text: str, count: int) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join((["…"] if len(lines) > count else []) + lines[-count:]) + "\n"


RUN_PAGE_ITEMS = 100


def run_outcomes_ordered(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """The run's outcomes the user may see, in item order, read along the (run, snippet, sample) unique index: a
    page costs its own rows, not a sort of the whole run (snippet ids follow the order items were imported in)."""
    return outcomes_visible(run=run, user=user).order_by("snippet_id", "sample")


def run_item_page(*, run: EvaluationRun, user, page: str | int | None) -> Page:
    """One page of the items the user may see with the model's answer, and reference code where the user may see
    the task."""
    visible_tasks = set(visibility.tasks_visible(version=run.version, user=user).values_list("pk", flat=True))
    outcomes = run_outcomes_ordered(run=run, user=user).select_related("snippet__task__paper", "generation")
    current = Paginator(outcomes, RUN_PAGE_ITEMS).get_page(page)
    # The ignore: the page keeps its paginator's counts of outcomes and shows each one as a RunItem.
    current.object_list = [
        RunItem(outcome=o, show_reference=o.snippet.task_id in visible_tasks)  # type: ignore[misc]
        for o in current.object_list
    ]
    return current


def run_item(*, run: EvaluationRun, outcome_pk: int, user) -> RunItem | None:
    """One item of a run with its answer (and the reference where the user may see the task), or None when the
    user may not see that outcome: the same rule as the run page's list."""
    outcome = (
        outcomes_visible(run=run, user=user)
        .filter(pk=outcome_pk)
        .select_related("snippet__task__paper", "generation")
        .first()
    )
    if outcome is None:
        return None
    tasks_as_released(version=run.version, tasks=[outcome.snippet.task])
    return RunItem(
        outcome=outcome,
        show_reference=visibility.task_visible(version=run.version, task=outcome.snippet.task, user=user),
    )


def run_flags(*, run: EvaluationRun) -> list[Outcome]:
    """Outcomes of the run the audit flagged, awaiting review or reviewed, with their evidence (for maintainers)."""
    return list(
        Outcome.objects.filter(Q(status=Outcome.Status.FLAGGED) | ~Q(review=""), run=run)
        .select_related("snippet__task__paper", "generation", "reviewed_by")
        .order_by("snippet__task__paper__slug", "snippet__file_path", "snippet__position", "sample")
    )


@dataclass(frozen=True)
class RunForkServer:
    """What the fork server did for a run: items warm and cold, each start with its reason, and where it went cold."""

    items_warm: int
    items_cold: int
    starts: list[dict]
    cold: list[dict]

    @property
    def start_reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for start in self.starts:
            counts[start["reason"]] = counts.get(start["reason"], 0) + 1
        return counts

    def as_dict(self, *, details: bool) -> dict:
        """For the manifest; without `details`, only each event's reason and time: its detail can name a held-out
        task's imports, and its environment hash confirm a guess at a held-out task's requirements."""

        def shown(event: dict) -> dict:
            return event if details else {k: v for k, v in event.items() if k in ("reason", "at")}

        return {
            "items_warm": self.items_warm,
            "items_cold": self.items_cold,
            "start_reasons": self.start_reasons,
            "starts": [shown(s) for s in self.starts],
            "cold": [shown(c) for c in self.cold],
        }


def run_forkserver(*, run: EvaluationRun) -> RunForkServer:
    counts = dict(run.outcomes.exclude(forked=None).values_list("forked").annotate(n=Count("pk")))
    events = events_of(subject=run, kinds=[Kind.FORKSERVER_STARTED, Kind.FORKSERVER_COLD]).order_by("created_at", "pk")
    starts, cold = [], []
    for event in events:
        where, _, what = event.detail.partition(": ")
        if event.kind == Kind.FORKSERVER_STARTED:
            starts.append(
                {
                    "worker": event.worker,
                    "environment": where,
                    "reason": what.split(":", 1)[0],
                    "detail": what,
                    "at": event.created_at.isoformat(),
                }
            )
        else:
            cold.append(
                {"worker": event.worker, "environment": where, "detail": what, "at": event.created_at.isoformat()}
            )
    return RunForkServer(items_warm=counts.get(True, 0), items_cold=counts.get(False, 0), starts=starts, cold=cold)


def runs_forkserver_recent(*, limit: int = 10) -> list[tuple[EvaluationRun, RunForkServer]]:
    """The latest runs whose items went through a fork server, with what it did, for the operations page."""
    runs = (
        EvaluationRun.objects.filter(outcomes__forked__isnull=False)
        .distinct()
        .select_related("model", "version")
        .order_by("-pk")[:limit]
    )
    return [(run, run_forkserver(run=run)) for run in runs]


def runs_stalled(*, seconds: int | None = None) -> QuerySet[EvaluationRun]:
    """Running runs with no new result for longer than RUN_STALL_SECONDS."""
    limit = timezone.now() - timedelta(seconds=seconds if seconds is not None else settings.RUN_STALL_SECONDS)
    return (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, last_progress_at__lt=limit)
        .select_related("model", "version")
        .order_by("last_progress_at")
    )


PREPARING = (TaskPreparation.Status.QUEUED, TaskPreparation.Status.RUNNING)


@dataclass(frozen=True)
class ReleasePreparation:
    """How far a release's tasks are prepared, for its page."""

    tasks: int
    prepared: int
    pending: int  # queued or running
    failed: list[tuple[str, str]]  # (paper, why), for maintainers

    @property
    def done(self) -> bool:
        return self.pending == 0


def release_preparation(*, version: BenchmarkVersion) -> ReleasePreparation | None:
    """The release's preparation; None when none was ever asked for (RELEASE_PREPARE off, or before it existed)."""
    preparations = TaskPreparation.objects.filter(task__memberships__version=version)
    if not preparations.exists():
        return None
    ready = {"test_manifest__isnull": False, "recording__isnull": False}
    failed = (
        preparations.filter(status=TaskPreparation.Status.FAILED)
        .exclude(**{f"task__{k}": v for k, v in ready.items()})
        .order_by("task__paper__slug")
        .values_list("task__paper__slug", "detail")
    )
    return ReleasePreparation(
        tasks=version.tasks.count(),
        prepared=version.tasks.filter(**ready).count(),
        pending=preparations.filter(status__in=PREPARING).count(),
        failed=list(failed),
    )
