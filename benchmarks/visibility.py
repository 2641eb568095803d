"""Who may see what: one rule per kind of data, asked by every page, API endpoint, download and run.

Held-out tasks are private: to anyone but maintainers nothing of them leaves the platform but aggregate scores
(per split), so their items, prompts, masked files, task files, answers, outputs and per-item outcomes are
maintainers' only. Everything of the public split is public, answers included: like SWE-bench and LiveCodeBench,
which publish the completions of leaderboard entries, a run's public answers and outcomes are visible to
everyone, so a score can be checked line by line.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from benchmarks.models import BenchmarkVersion, Paper, Snippet, Task, VersionTask
from benchmarks.selectors import user_is_maintainer, version_snippets, version_tasks
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore

PUBLIC = VersionTask.Split.PUBLIC
HELD_OUT = VersionTask.Split.HELD_OUT

# Call parameters a model not registered by a maintainer may carry on a held-out run: sampling only, so nothing
# can send the prompt anywhere else or ask the provider to keep it for the key's owner.
HELD_OUT_SAFE_PARAMS = frozenset({"temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "seed",
                                  "stop", "presence_penalty", "frequency_penalty", "reasoning_effort"})


def user_sees_held_out(*, user) -> bool:
    """Held-out items, files, answers and per-item outcomes: maintainers (and superusers) only."""
    return user_is_maintainer(user=user)


def _split_for(user) -> str | None:
    return None if user_sees_held_out(user=user) else PUBLIC


# Items, prompts and masked files

def items_visible(*, version: BenchmarkVersion, user) -> QuerySet[Snippet]:
    """The version's live items the user may see with their masked file and prompt."""
    return version_snippets(version=version, split=_split_for(user))


def items_public(*, version: BenchmarkVersion) -> QuerySet[Snippet]:
    """What leaves the platform in downloads and what uploads answer: the public split's items."""
    return version_snippets(version=version, split=PUBLIC)


def tasks_public(*, version: BenchmarkVersion) -> QuerySet[Task]:
    """The tasks whose files the problem-set download holds: the public split's."""
    return version_tasks(version=version).filter(memberships__version=version, memberships__split=PUBLIC)


# Task files and paper pages

def tasks_visible(*, version: BenchmarkVersion, user) -> QuerySet[Task]:
    """Tasks whose paper page, snippet tree and files the user may see."""
    tasks = version_tasks(version=version)
    split = _split_for(user)
    return tasks if split is None else tasks.filter(memberships__version=version, memberships__split=split)


def task_visible(*, version: BenchmarkVersion, task: Task, user) -> bool:
    return tasks_visible(version=version, user=user).filter(pk=task.pk).exists()


def task_sources_visible(*, version: BenchmarkVersion, task: Task, user) -> bool:
    """Whether a paper page shows the task's paper text and annotated code (reference bodies included): a public
    task's to everyone, as its download does; a held-out task's to maintainers only."""
    split = version.memberships.filter(task=task).values_list("split", flat=True).first()
    return split == PUBLIC or (split is not None and user_sees_held_out(user=user))


def papers_visible(*, version: BenchmarkVersion, user) -> QuerySet[Paper]:
    """Papers named one by one (leaderboard columns, per-paper scores); held-out ones fold into their split."""
    return Paper.objects.filter(tasks__in=tasks_visible(version=version, user=user).values("pk")).distinct()


def changelog_visible(*, version: BenchmarkVersion, user) -> dict | None:
    """The release's changelog; for non-maintainers held-out papers are counted, never named."""
    changelog = version.changelog
    if not changelog or user_sees_held_out(user=user):
        return changelog
    current = dict(version.memberships.values_list("task__paper__slug", "split"))
    previous = dict(version.previous.memberships.values_list("task__paper__slug", "split")) if version.previous else {}
    hidden = {slug for slug, split in {**previous, **current}.items() if split == HELD_OUT}
    if not hidden:
        return changelog
    shown = {
        **changelog,
        "added": [slug for slug in changelog.get("added", []) if slug not in hidden],
        "removed": [slug for slug in changelog.get("removed", []) if slug not in hidden],
        "changed": [c for c in changelog.get("changed", []) if c["paper"] not in hidden],
    }
    shown["held_out_changes"] = sum(len(changelog.get(k, [])) - len(shown[k]) for k in ("added", "removed", "changed"))
    return shown


# Runs: which items a run covers, and who sees its answers and outcomes

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
    return _endpoint_trusted_with_held_out(model=model, provider=model.provider, api_base=model.api_base,
                                           params=model.default_params)


def run_covers_held_out(*, model: ModelEntry, params: dict | None = None, uploaded: bool = False) -> bool:
    """Whether a new run evaluates held-out items too; uploads and runs of untrusted models cover the public split
    only (a run's own parameters are held to the same sampling-only rule as the model's)."""
    if uploaded:
        return False
    return _endpoint_trusted_with_held_out(model=model, provider=model.provider, api_base=model.api_base,
                                           params={**model.default_params, **(params or {})})


def run_sends_held_out(*, run: EvaluationRun) -> bool:
    """Whether a held-out prompt of `run` may leave now: asked again before each one, against the endpoint the run
    snapshot at its start (what it really calls), with today's trust (a maintainer's role, HELD_OUT_PROVIDERS)."""
    return run.covers_held_out and _endpoint_trusted_with_held_out(
        model=run.model, provider=run.provider, api_base=run.api_base, params=run.call_params)


def run_snippets(*, run: EvaluationRun) -> QuerySet[Snippet]:
    """The items a run evaluates."""
    return version_snippets(version=run.version, split=None if run.covers_held_out else PUBLIC)


def runs_visible(*, user) -> QuerySet[EvaluationRun]:
    """Runs on versions the user may see (drafts have none, but the rule is the version's)."""
    runs = EvaluationRun.objects.all()
    if user_is_maintainer(user=user):
        return runs
    return runs.exclude(version__status=BenchmarkVersion.Status.DRAFT)


def outcomes_visible(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """Per-item outcomes (status, detail, output tails) and their answers: public items for all, held-out for
    maintainers."""
    outcomes = Outcome.objects.filter(run=run)
    if user_sees_held_out(user=user):
        return outcomes
    return outcomes.filter(snippet__task__memberships__version=run.version_id,
                           snippet__task__memberships__split=PUBLIC)


def split_scores_itemized(*, runs: list[EvaluationRun], user) -> QuerySet[RunScore]:
    """The stored aggregate of each run whose finer breakdowns (e.g. by snippet size) the user may see: over every
    item for maintainers, over the public split for everyone else."""
    split = RunScore.Split.ALL if user_sees_held_out(user=user) else RunScore.Split.PUBLIC
    return RunScore.objects.filter(run__in=runs, paper__isnull=True, split=split)


def paper_scores_visible(*, run: EvaluationRun, user) -> QuerySet[RunScore]:
    """Per-paper scores of a run: a held-out paper's score is as fine-grained as its few items, so maintainers only."""
    scores = run.scores.filter(paper__isnull=False, split="").select_related("paper").order_by("paper__slug")
    if user_sees_held_out(user=user):
        return scores
    return scores.filter(paper__in=papers_visible(version=run.version, user=user))
