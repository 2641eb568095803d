"""Evaluation services: refusals with clear messages, keys encrypted at rest, idempotent writes, one finish."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.outcomes import Verdict
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


def test_calibration_models_exist():
    assert set(ModelEntry.objects.filter(kind__in=["reference", "placeholder"]).values_list("name", flat=True)) == {
        "reference",
        "placeholder",
    }


def test_api_key_is_encrypted_at_rest_and_never_in_repr():
    model = services.model_register(name="m", display_name="M", litellm_model="openai/x", api_key="sk-very-secret")
    stored = ModelEntry.objects.values_list("api_key_encrypted", flat=True).get(pk=model.pk)
    assert "sk-very-secret" not in stored and stored
    assert model.api_key_get() == "sk-very-secret"
    from evaluation.llm import ModelCall

    assert "sk-very-secret" not in repr(ModelCall(model="openai/x", api_key=model.api_key_get()))


def test_runs_are_pinned_to_published_versions(media_root):
    draft = pset_import(root=DEMO_PSET, version_name="draft").version
    with pytest.raises(services.EvaluationError, match="draft"):
        services.run_start(model=ModelEntry.objects.get(name="reference"), version=draft, dispatch=False)


@pytest.mark.parametrize("samples", [0, 21])
def test_samples_out_of_range_are_refused(release, samples):
    with pytest.raises(services.EvaluationError, match="samples must be between 1 and 20"):
        services.run_start(
            model=ModelEntry.objects.get(name="reference"), version=release, samples=samples, dispatch=False
        )


def test_outcome_is_recorded_once_and_the_run_finishes_once(release):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippets = list(Snippet.objects.filter(task__versions=release))
    assert run.total_items == len(snippets) == 33
    for snippet in snippets:
        first = services.outcome_record(run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""))
        again = services.outcome_record(run=run, snippet=snippet, sample=0, verdict=Verdict("failed", "runtime", ""))
        assert first[1] and not again[1] and again[0].status == "passed"
    assert services.run_maybe_finish(run=run) is True
    assert services.run_maybe_finish(run=run) is False
    assert Outcome.objects.filter(run=run).count() == 33
    assert RunScore.objects.get(run=run, paper=None, split="").scaled_pass_rate == 100.0


def test_errors_are_reported_not_scored(release):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for i, snippet in enumerate(Snippet.objects.filter(task__versions=release)):
        verdict = Verdict("error", "infrastructure", "engine gone") if i % 2 else Verdict("passed", "", "")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict)
    services.run_maybe_finish(run=run)
    score = RunScore.objects.get(run=run, paper=None, split="")
    assert score.errors == 16 and score.passed == 17 and score.pass_rate == 100.0


def test_cancel_twice_is_refused(release):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    services.run_cancel(run=run)
    with pytest.raises(services.EvaluationError, match="cancelled"):
        services.run_cancel(run=run)


def test_evaluate_command_inline_prints_a_summary(release, capsys, settings, sandbox_cache):
    settings.SANDBOX_BACKEND = "local"
    settings.SANDBOX_CACHE_DIR = sandbox_cache
    call_command("evaluate", model="reference", version="1.0.0", inline=True)
    out = capsys.readouterr().out
    assert "ALL" in out and "100.0%" in out and "dampnest" in out


def test_evaluate_command_names_unknown_model_and_version(release):
    with pytest.raises(CommandError, match="no registered model named 'nope'"):
        call_command("evaluate", model="nope", version="1.0.0")
    with pytest.raises(CommandError, match="no benchmark version named 'v0'"):
        call_command("evaluate", model="reference", version="v0")


def test_sandbox_check_reports_every_backend(capsys):
    call_command("sandbox_check")
    out = capsys.readouterr().out
    for name in ("docker", "bwrap", "local"):
        assert name in out
    assert "selects:" in out


@pytest.mark.parametrize("samples", [1, 10])
def test_recording_an_item_costs_the_same_queries_in_a_small_and_a_large_run(
    release, samples, django_assert_num_queries
):
    """Per item: the outcome's insert, one counter update, one unlocked read of the counter; no row lock
    and no count of the run's outcomes until the last item."""
    run = services.run_start(
        model=ModelEntry.objects.get(name="reference"), version=release, samples=samples, dispatch=False
    )
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippets = Snippet.objects.filter(task__versions=release).select_related("task")  # as a worker loads it
    items = [(s, k) for k in range(samples) for s in snippets]
    for snippet, sample in items[:-1]:
        # The outcome's insert and the counter's update in one savepoint (4), the counter's read: no select first
        # (issue 19: a redelivered item's second insert fails on the unique constraint)
        with django_assert_num_queries(5):
            services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=Verdict("passed", "", ""))
            assert services.run_maybe_finish(run=run) is False
    snippet, sample = items[-1]
    services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=Verdict("passed", "", ""))
    assert services.run_maybe_finish(run=run) is True
    assert EvaluationRun.objects.get(pk=run.pk).done_items == run.total_items == 33 * samples


def test_a_resume_recounts_so_deleted_outcomes_are_done_again(release):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release):
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""))
    Outcome.objects.filter(run=run)[:1].get().delete()  # e.g. an environment retry forgets an item
    services.run_done_recount(run=run)
    assert EvaluationRun.objects.get(pk=run.pk).done_items == 32
    assert services.run_maybe_finish(run=run) is False


# serialized_rollback as every transactional test here: a bare flush recreates the content types under new ids, which
# the next serialized test's restore then collides with.
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_finishing_run_computes_its_scores_without_holding_its_row_lock(release, monkeypatch):
    """The aggregation of a large run takes seconds: another session may take the run's row lock meanwhile (it
    waited that long before), and the scores are then written in one short transaction."""
    import threading

    from django.db import DatabaseError, connection, transaction

    if connection.vendor != "postgresql":
        pytest.skip("row locks (select_for_update nowait) need PostgreSQL")
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release).select_related("task"):
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""))
    probes: list[str] = []
    compute = services.runs.run_scores_compute

    def compute_while_another_session_locks(*, run):
        def probe():
            try:
                with transaction.atomic():
                    EvaluationRun.objects.select_for_update(nowait=True).get(pk=run.pk)
                probes.append("free")
            except DatabaseError:
                probes.append("locked")
            finally:
                connection.close()

        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        return compute(run=run)

    monkeypatch.setattr(services.runs, "run_scores_compute", compute_while_another_session_locks)
    assert services.run_maybe_finish(run=run)
    assert probes == ["free"], "the row lock is free while the scores are computed"
    assert RunScore.objects.get(run=run, paper=None, split="").pass_rate == 100.0
