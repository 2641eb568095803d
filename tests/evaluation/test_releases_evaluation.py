"""Publishing queues continuously evaluated models and reuses unchanged answers; uploads score like own runs."""

from __future__ import annotations

import json

import pytest

from benchmarks.selectors import version_snippets
from benchmarks.services.curation import version_draft_create
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry, RunScore
from evaluation.tasks import item_evaluate, item_generate
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db


@pytest.fixture
def bwrap(sandbox_cache, executor_backend):
    executor_backend(sandbox_backend_or_missing("bwrap", sandbox_cache))
    yield


def run_inline(run: EvaluationRun) -> RunScore:
    """Every item through the same Celery task functions a worker runs, in this process."""
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    calls_model = run.model.kind == ModelEntry.Kind.LITELLM
    for snippet in version_snippets(version=run.version):
        for sample in range(run.samples):
            if calls_model and not Generation.objects.filter(run=run, snippet=snippet, sample=sample).exists():
                item_generate.apply(args=(run.pk, snippet.pk, sample), throw=True)
            item_evaluate.apply(args=(run.pk, snippet.pk, sample), throw=True)
    return RunScore.objects.get(run=run, paper=None, split="")


def test_an_upload_of_the_reference_answers_scores_like_the_reference_model(media_root, bwrap, author):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    own = run_inline(
        services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, dispatch=False)
    )
    lines = [
        json.dumps({"id": str(s.pk), "sample": 0, "answer": f"```python\n{s.reference_code}```"})
        for s in version_snippets(version=version)
    ]
    uploader = ModelEntry.objects.create(name="uploaded-ref", display_name="Uploaded", kind="uploaded", owner=author)
    uploaded_run = services.run_from_upload(
        model=uploader, version=version, data="\n".join(lines).encode(), user=author
    )
    uploaded = run_inline(uploaded_run)
    fields = ("items", "passed", "failed", "errors", "pass_rate", "scaled_pass_rate", "scaled_ci_low", "scaled_ci_high")
    assert [getattr(uploaded, f) for f in fields[:6]] == [getattr(own, f) for f in fields[:6]]
    assert uploaded.scaled_pass_rate == 100.0


@pytest.mark.parametrize(
    "content,message",
    [
        (b'{"id": "999999", "sample": 0, "answer": "x"}', "unknown item id '999999'"),
        (b"\xff\xfe not utf-8", "not UTF-8"),
        (b"not json at all", "line 1: not JSON"),
    ],
)
def test_bad_uploads_store_nothing(media_root, author, content, message):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    model = ModelEntry.objects.create(name="up", display_name="Up", kind="uploaded", owner=author)
    with pytest.raises(services.UploadError, match=message):
        services.run_from_upload(model=model, version=version, data=content, user=author)
    assert not EvaluationRun.objects.filter(model=model).exists()


def test_duplicate_and_overlong_answers_are_named_by_line(media_root, author):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    item = str(version_snippets(version=version).first().pk)
    lines = [
        json.dumps({"id": item, "sample": 0, "answer": "```python\na\n```"}),
        json.dumps({"id": item, "sample": 0, "answer": "```python\nb\n```"}),
        json.dumps({"id": item, "sample": 1, "answer": "x" * 300_000}),
    ]
    model = ModelEntry.objects.create(name="up", display_name="Up", kind="uploaded", owner=author)
    with pytest.raises(services.UploadError) as error:
        services.run_from_upload(model=model, version=version, data="\n".join(lines).encode(), user=author)
    assert any(p.startswith("line 2:") and "twice" in p for p in error.value.problems)
    assert any(p.startswith("line 3:") and "300000 characters" in p for p in error.value.problems)


def test_publishing_queues_continuous_models_and_reuses_unchanged_answers(
    media_root, bwrap, maintainer, django_capture_on_commit_callbacks
):
    from tests.evaluation.openai_server import openai_server

    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    references = {s.name: s.reference_code for s in version_snippets(version=version)}

    def answer(prompt: str, body: dict) -> str:
        import re

        name = re.findall(r'# TODO: Implement block "([^"]+)"', prompt)[0]
        return f"```python\n{references[name]}```"

    with openai_server(responder=answer) as server:
        model = services.model_register(
            name="cont",
            display_name="Continuous",
            litellm_model="openai/rcb-cont",
            api_base=server.base_url,
            api_key="sk-x",
        )
        ModelEntry.objects.filter(pk=model.pk).update(continuous=True)
        first = run_inline(services.run_start(model=model, version=version, dispatch=False))
        calls_after_first = len(server.chat_requests)

        draft = version_draft_create(name="1.1.0", actor=maintainer)
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            version_publish(version=draft, actor=maintainer)
        assert len(callbacks) == 2, "publishing queues its downloads' build and announces the release, once committed"
        # The announcement (the last) has its receiver queue the continuous model (its dispatch waits for a commit
        # that a test transaction never makes, so the items are run inline below).
        callbacks[-1]()
        queued = EvaluationRun.objects.filter(
            version__name="1.1.0", model__kind=ModelEntry.Kind.LITELLM
        )  # beside the reference lines
        assert [r.model for r in queued] == [model]
        second = run_inline(EvaluationRun.objects.get(pk=queued[0].pk))
        assert len(server.chat_requests) == calls_after_first, "unchanged items reuse the earlier answers"
    assert first.scaled_pass_rate == second.scaled_pass_rate == 100.0
    assert calls_after_first == 33
