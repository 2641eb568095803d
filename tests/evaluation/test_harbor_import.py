"""Harbor jobs brought back (evaluation/harbor/imports.py): each trial an item of an agent upload run, its answer
read by the platform's own region rule and scored again, Harbor's reward only kept beside it; hostile jobs refused
whole with nothing stored.

The jobs here have Harbor 0.26's layout (`<trial>/result.json`, `artifacts/sandbox/<file>`, `verifier/`,
`agent/trajectory.json`), written by the test: the round trip through Harbor itself is test_harbor_roundtrip.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.urls import reverse

from agents import tasks as agent_tasks
from benchmarks import visibility
from benchmarks.models import VersionTask
from benchmarks.paper2code import body_reindent, code_indent
from benchmarks.paper2code.metrics import ItemResult, score
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.harbor import imports
from evaluation.harbor.export import harbor_task_name
from evaluation.harbor.imports import _masked, harbor_job_import
from evaluation.models import EvaluationRun, Generation, Outcome
from evaluation.services.uploads import UploadError
from tests.conftest import DEMO_PSET, page_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


@pytest.fixture
def model(author):
    return services.model_register(name="harbor-agent", display_name="Harbor agent", kind="uploaded", owner=author)


def _oracle_file(snippet, version) -> str:
    masked = _masked(snippet, version)
    return masked.prefix + snippet.reference_code + masked.suffix


def job_write(root: Path, version, *, final=_oracle_file, reward: float = 1, agent=("oracle", "1.0.0")) -> Path:
    """A job of one trial per public item, as Harbor writes it; `final(snippet, version)` the agent's last file."""
    for snippet in visibility.items_public(version=version):
        name = harbor_task_name(snippet)
        trial = root / f"{name.split('/')[1]}__t"
        (trial / "artifacts" / "sandbox" / snippet.file_path).parent.mkdir(parents=True)
        (trial / "artifacts" / "sandbox" / snippet.file_path).write_text(final(snippet, version))
        (trial / "verifier").mkdir()
        (trial / "verifier" / "reward.txt").write_text(f"{reward}\n")
        (trial / "result.json").write_text(
            json.dumps(
                {
                    "task_name": name,
                    "trial_name": trial.name,
                    "agent_info": {"name": agent[0], "version": agent[1], "model_info": None},
                    "verifier_result": {"rewards": {"reward": reward}},
                    "exception_info": None,
                }
            )
        )
    (root / "result.json").write_text("{}")
    return root


def _trial(job: Path, snippet) -> Path:
    return job / f"{harbor_task_name(snippet).split('/')[1]}__t"


def _nothing_stored():
    assert not EvaluationRun.objects.exists() and not Generation.objects.exists()


def test_a_job_becomes_an_agent_upload_run_with_its_scaffold_and_harbors_rewards_beside(tmp_path, version, model):
    job = job_write(tmp_path / "job", version)
    run, notes = harbor_job_import(job_dir=job, version=version, model=model)
    items = list(visibility.items_public(version=version))
    assert notes == [] and run.mode == "agent" and run.provenance == EvaluationRun.Provenance.SELF_REPORTED
    assert run.params["scaffold"] == {"name": "oracle", "version": "1.0.0"}
    assert set(run.params["harbor"]["rewards"].values()) == {1}
    codes = {g.snippet_id: g.extracted_code for g in run.generations.all()}
    assert len(codes) == len(items) == 33
    assert all(codes[s.pk] == body_reindent(s.reference_code, code_indent(s.reference_code)) for s in items)


def test_foreign_and_missing_tasks_are_listed_and_nothing_is_stored(tmp_path, version, model):
    job = job_write(tmp_path / "job", version)
    first, second = list(visibility.items_public(version=version))[:2]
    result = _trial(job, first) / "result.json"
    result.write_text(result.read_text().replace(harbor_task_name(first), "researchcodebench/elsewhere.x.0"))
    shutil.rmtree(_trial(job, second))
    with pytest.raises(UploadError) as refused:
        harbor_job_import(job_dir=job, version=version, model=model)
    problems = refused.value.problems
    assert any("'researchcodebench/elsewhere.x.0' is not a public item" in p for p in problems)
    assert f"task {harbor_task_name(first)} has no trial in the job" in problems
    assert f"task {harbor_task_name(second)} has no trial in the job" in problems
    _nothing_stored()


def test_held_out_tasks_named_by_a_job_are_refused_as_unknown(tmp_path, media_root, maintainer, model):
    first = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    held = draft.tasks.get(paper__slug="trimmed-infonce")
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    release = version_publish(version=draft, actor=maintainer)
    job = job_write(tmp_path / "job", first)  # every item of 1.0.0, where trimmed-infonce was public
    with pytest.raises(UploadError) as refused:
        harbor_job_import(job_dir=job, version=release, model=model)
    named = [p for p in refused.value.problems if "trimmed-infonce" in p]
    assert named and all("is not a public item of release 1.1.0" in p for p in named)
    assert not Generation.objects.exists()


def test_a_symbolic_link_out_of_the_job_is_refused(tmp_path, version, model):
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 1\n")
    job = job_write(tmp_path / "job", version)
    snippet = visibility.items_public(version=version).first()
    collected = _trial(job, snippet) / "artifacts" / "sandbox" / snippet.file_path
    collected.unlink()
    collected.symlink_to(secret)
    assert collected.read_text() == "SECRET = 1\n"  # unguarded, a plain read follows it out of the job
    with pytest.raises(UploadError) as refused:
        harbor_job_import(job_dir=job, version=version, model=model)
    assert any("a symbolic link" in p and snippet.file_path in p for p in refused.value.problems)
    _nothing_stored()


def test_an_oversized_job_is_refused_before_anything_is_read(tmp_path, version, model, monkeypatch):
    job = job_write(tmp_path / "job", version)
    total = sum(p.stat().st_size for p in job.rglob("*") if p.is_file())
    monkeypatch.setattr(imports, "JOB_BYTES_MAX", total // 2)
    with pytest.raises(UploadError, match="the job is over"):
        harbor_job_import(job_dir=job, version=version, model=model)
    _nothing_stored()


def test_forged_usage_in_a_trajectory_is_refused(tmp_path, version, model):
    job = job_write(tmp_path / "job", version)
    snippet = visibility.items_public(version=version).first()
    atif = {
        "schema_version": "ATIF-v1.4",
        "session_id": "s",
        "agent": {"name": "terminus", "version": "2"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "implement it"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "done",
                "metrics": {"prompt_tokens": 10, "completion_tokens": 5},
            },
        ],
        "final_metrics": {"total_prompt_tokens": 10, "total_completion_tokens": 5},
    }
    (_trial(job, snippet) / "agent").mkdir()
    trajectory = _trial(job, snippet) / "agent" / "trajectory.json"
    trajectory.write_text(json.dumps(atif))
    honest, _ = harbor_job_import(job_dir=job, version=version, model=model)  # what its steps add up to: taken
    EvaluationRun.objects.filter(pk=honest.pk).delete()
    atif["final_metrics"]["total_prompt_tokens"] = 1  # far cheaper than its steps say
    trajectory.write_text(json.dumps(atif))
    with pytest.raises(UploadError, match="trajectory.usage.prompt_tokens"):
        harbor_job_import(job_dir=job, version=version, model=model)
    _nothing_stored()


def test_a_trial_that_errored_counts_as_not_passed_with_harbors_reward_beside(tmp_path, version, model, client):
    job = job_write(tmp_path / "job", version)
    errored, ran = list(visibility.items_public(version=version))[:2]
    result_path = _trial(job, errored) / "result.json"
    result = json.loads(result_path.read_text())
    result["verifier_result"] = None  # Harbor's verifier never ran
    result["exception_info"] = {
        "exception_type": "AgentTimeoutError",
        "exception_message": "Agent execution timed out after 600.0 seconds",
        "exception_traceback": "Traceback ...",
        "occurred_at": "2026-12-06T09:00:00",
    }
    result_path.write_text(json.dumps(result))
    run, notes = harbor_job_import(job_dir=job, version=version, model=model)
    assert any("AgentTimeoutError" in note and "not passed" in note for note in notes)
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    agent_tasks.item_agent.apply(args=(run.pk, errored.pk, 0), throw=True)  # no test runs for it: no sandbox
    outcome = Outcome.objects.get(run=run, snippet=errored)
    # The job's own word: were it an error, the job's failed items would leave its score (errors are never rated).
    as_error = score([ItemResult("errored", 10, 0, "error"), ItemResult("ran", 10, 0, "passed")])
    assert as_error.pass_rate == 100.0, "unguarded: a job that marks its failures errored scores what it passed"
    assert outcome.status == Outcome.Status.FAILED and outcome.category == Outcome.Category.REPORTED_ERROR
    assert "AgentTimeoutError: Agent execution timed out after 600.0 seconds" in outcome.detail
    as_recorded = score([ItemResult("errored", 10, 0, outcome.status), ItemResult("ran", 10, 0, "passed")])
    assert as_recorded.pass_rate == 50.0
    assert not Generation.objects.filter(run=run, snippet=ran).exclude(error="").exists()  # only its own trial
    page = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()
    reward = page_text(page.split('data-testid="harbor-reward">')[1].split("</dd>")[0])
    assert reward.startswith("none") and "never used" in reward  # the verifier gave none; the platform says error


@pytest.mark.slow
def test_rewards_are_never_trusted_a_failing_answer_and_an_edit_outside_the_region_fail(
    tmp_path, version, model, sandbox, client
):
    items = list(visibility.items_public(version=version))
    placeholder, edited = items[0], items[1]

    def final(snippet, version):
        if snippet == placeholder:  # the TODO left as it was, reward 1 claimed all the same
            return _masked(snippet, version).text
        if snippet == edited:  # the reference body, and a line changed above the region
            return "import os\n" + _oracle_file(snippet, version)
        return _oracle_file(snippet, version)

    job = job_write(tmp_path / "job", version, final=final, reward=1)
    run, notes = harbor_job_import(job_dir=job, version=version, model=model)
    assert any("was changed above the TODO block" in note for note in notes)
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    for snippet in (placeholder, edited, items[2]):
        agent_tasks.item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)
    outcomes = {o.snippet_id: o for o in Outcome.objects.filter(run=run)}
    assert outcomes[placeholder.pk].status == "failed" and outcomes[edited.pk].status == "failed"
    assert outcomes[items[2].pk].status == "passed"  # the same path passes an honest answer
    assert run.params["harbor"]["rewards"][f"{placeholder.pk}/0"] == 1  # Harbor's word, kept beside, not used
    page = client.get(reverse("run-item", args=[run.pk, outcomes[placeholder.pk].pk])).content.decode()
    assert page_text(page.split('data-testid="harbor-reward">')[1]).startswith("1 ")  # shown beside...
    assert 'class="badge failed"' in page  # ...the platform's own verdict
