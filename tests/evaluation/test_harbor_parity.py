"""The parity of a model run both ways (evaluation/harbor/parity.py): its platform agent runs and its imported Harbor
jobs on one release, each side's mean ± sample SEM and whether the ranges overlap, in parity_experiment.json's fields,
through `manage.py parity_report` and the model's parity page.

The runs are made by the services: the platform's agent runs recorded as its pipeline records them, the Harbor jobs
imported by harbor_job_import and every answer scored by the platform's own scorer in the sandbox (one public paper,
so the sandbox scores few items). The expected numbers are computed here from the runs' stored scores."""

from __future__ import annotations

import io
import json
import math
import statistics

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from agents import tasks as agent_tasks
from benchmarks import visibility
from benchmarks.models import Snippet, VersionTask
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.harbor.imports import _masked, harbor_job_import
from evaluation.harbor.parity import ParityError, parity_report
from evaluation.models import EvaluationRun, RunScore
from evaluation.outcomes import Verdict
from tests.conftest import DEMO_PSET, page_text
from tests.evaluation.test_harbor_import import _oracle_file, job_write
from tests.leaderboard.test_leaderboard import model as model_entry

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(media_root, maintainer):
    """The demo with only trimmed-infonce public: a Harbor job answers the public split only."""
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    for task in draft.tasks.exclude(paper__slug="trimmed-infonce"):
        version_task_set(version=draft, task=task, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    return version_publish(version=draft, actor=maintainer)


def platform_agent_run(release, model, passes) -> EvaluationRun:
    """A completed run of the platform's own agent loop, its items recorded as the pipeline records them."""
    run = services.run_start(model=model, version=release, mode="agent", dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for n, snippet in enumerate(Snippet.objects.filter(task__versions=release).order_by("pk")):
        generation = services.generation_record(
            run=run, snippet=snippet, sample=0, prompt="p", code=snippet.reference_code, prompt_tokens=1
        )
        verdict = Verdict("passed", "", "") if passes(n) else Verdict("failed", "wrong_result", "assert")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    run.refresh_from_db()
    return run


def harbor_job_run(tmp_path, release, model, answers, name: str) -> EvaluationRun:
    """A Harbor job of terminus-2 imported and scored by the platform in the sandbox; `answers(n)` says which
    items the agent solved (the reference) and which it left as they were (the TODO)."""
    public = list(visibility.items_public(version=release).order_by("pk"))

    def final(snippet, version):
        return _oracle_file(snippet, version) if answers(public.index(snippet)) else _masked(snippet, version).text

    job = job_write(tmp_path / name, release, final=final, agent=("terminus-2", "2.0.1"))
    run, _ = harbor_job_import(job_dir=job, version=release, model=model)
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    for snippet in public:
        agent_tasks.item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.COMPLETED
    return run


def _public(run, field: str) -> float:
    return getattr(RunScore.objects.get(run=run, paper=None, split="public"), field)


def _side(runs, field):
    values = [_public(run, field) for run in runs]
    return values, f"{statistics.fmean(values):.2f}% +/- {statistics.stdev(values) / math.sqrt(len(values)):.2f}%"


@pytest.mark.slow
def test_a_model_run_both_ways_reports_each_sides_mean_and_sem_and_whether_the_ranges_overlap(
    tmp_path, release, sandbox, client
):
    coder = model_entry("coder", litellm_model="openai/gpt-4o-mini")
    first = platform_agent_run(release, coder, lambda n: n % 2 == 0)
    with pytest.raises(ParityError, match="the platform's agent runs of coder on 1.1.0 with the paper: 1 completed"):
        parity_report(model=coder, version=release)
    platform = [first, platform_agent_run(release, coder, lambda n: n % 3 != 0)]
    harbor = [
        harbor_job_run(tmp_path, release, coder, lambda n: n % 2 == 0, "a"),
        harbor_job_run(tmp_path, release, coder, lambda n: n >= 2, "b"),
    ]
    [entry] = parity_report(model=coder, version=release)
    assert (entry["agent"], entry["model"], entry["number_of_runs"]) == ("terminus-2@2.0.1", "openai/gpt-4o-mini", 2)
    assert entry["adapted_benchmark_size"] == visibility.items_public(version=release).count()
    template_fields = {  # Harbor 0.26's harbor/cli/template-adapter/parity_experiment.json
        "adapter_name", "agent", "model", "date", "adapted_benchmark_size", "parity_benchmark_size",
        "number_of_runs", "notes", "original_parity_repo", "adapter_pr", "dataset_pr", "parity_pr", "metrics",
    }  # fmt: skip
    assert set(entry) == template_fields
    for metric, field in (("scaled pass@1", "scaled_pass_rate"), ("pass@1", "pass_rate")):
        [row] = [m for m in entry["metrics"] if m["metric"] == metric]
        original_runs, original = _side(platform, field)
        harbor_runs, imported = _side(harbor, field)
        assert (row["original"], row["harbor"]) == (original, imported)
        assert row["original_runs"] == pytest.approx(original_runs, abs=1e-4)
        assert row["harbor_runs"] == pytest.approx(harbor_runs, abs=1e-4)
        overlap = min(original_runs) <= max(harbor_runs) and min(harbor_runs) <= max(original_runs)
        assert row["ranges_overlap"] is overlap
    assert len(set(entry["metrics"][0]["harbor_runs"])) == 2  # the two jobs scored differently by the platform
    out = io.StringIO()
    call_command("parity_report", "--release", "1.1.0", "--model", "coder", stdout=out)
    assert json.loads(out.getvalue()) == [entry]  # the command prints the service's report
    page = client.get(reverse("model-parity", args=["coder", "1.1.0"])).content.decode()
    table = page_text(page.split('data-testid="parity-table"')[1].split("</table>")[0])
    assert all(m["original"] in table and m["harbor"] in table for m in entry["metrics"])
    assert client.get(reverse("model-parity", args=["coder", "1.1.0"]), {"format": "json"}).json() == [entry]
    detail = client.get(reverse("model-detail", args=["coder"])).content.decode()
    assert reverse("model-parity", args=["coder", "1.1.0"]) in detail


def test_without_two_runs_a_side_the_command_and_page_say_what_is_missing(release, client):
    coder = model_entry("coder", litellm_model="openai/gpt-4o-mini")
    platform_agent_run(release, coder, lambda n: True)
    with pytest.raises(CommandError) as refused:
        call_command("parity_report", "--release", "1.1.0", "--model", "coder")
    assert "1 completed run(s)" in str(refused.value) and "no imported Harbor job of coder" in str(refused.value)
    page = client.get(reverse("model-parity", args=["coder", "1.1.0"])).content.decode()
    assert "no imported Harbor job of coder on 1.1.0" in page_text(page.split('data-testid="parity-missing"')[1])
    as_json = client.get(reverse("model-parity", args=["coder", "1.1.0"]), {"format": "json"})
    assert as_json.status_code == 404 and "no imported Harbor job" in as_json.json()["error"]["message"]
