"""Bring your own agent: an upload of mode `agent` gives per item the final snippet body and optionally a trajectory
in the documented schema; it is checked strictly (a bad line named with its field, nothing stored), scored on the same
path as every answer, and its trajectories are shown on the item pages marked self-reported. Every attack test first
shows its attack getting through where the guard is off, then the guard containing it."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError, transaction
from django.db.models.signals import pre_save
from django.template import Context, Template
from django.urls import reverse

from agents import uploads
from agents.budget import release_maximums
from agents.models import AgentStep, AgentTrajectory
from benchmarks import visibility
from benchmarks.models import Snippet, VersionTask
from benchmarks.selectors import version_snippets
from benchmarks.services.curation import version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.models import EvaluationRun, Generation, Outcome
from operations.apps import text_fields_storable
from tests.conftest import DEMO_PSET, client_for, demo_papers, sandbox_backend_or_missing


@pytest.fixture
def version(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


@pytest.fixture
def model(author):
    return services.model_register(name="byo-agent", display_name="BYO agent", kind="uploaded", owner=author)


def _trajectory(**changes) -> dict:
    document = {
        "format": "rcb-agent-trajectory/1",
        "budget": {"turns": 10, "tokens": 100000, "seconds": 600.0, "cost": 1.0},
        "ended_by": "submitted",
        "steps": [
            {"index": 0, "role": "system", "content": "you implement a block"},
            {"index": 1, "role": "user", "content": "the paper and the masked file"},
            {
                "index": 2,
                "role": "assistant",
                "content": "let me look",
                "tool_calls": [{"id": "c1", "name": "run", "arguments": '{"command": "ls"}'}],
                "prompt_tokens": 120,
                "completion_tokens": 8,
                "cost": 0.0012,
                "duration": 1.5,
                "budget_left": {"turns": 9, "tokens": 99872, "seconds": 598.5, "cost": 0.9988},
            },
            {"index": 3, "role": "tool", "content": "model.py\n", "tool_call_id": "c1", "tool_name": "run"},
        ],
    }
    document.update(changes)
    return document


def _rows(version, *, trajectory: dict | None = None, first: dict | None = None) -> list[dict]:
    """A line per item of the version with its reference body as `code`; the first line carries `trajectory`."""
    rows = [{"id": str(s.pk), "sample": 0, "code": s.reference_code} for s in visibility.items_public(version=version)]
    if trajectory is not None:
        rows[0]["trajectory"] = trajectory
    rows[0].update(first or {})
    return rows


def _encode(rows: list) -> bytes:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows).encode()


def _upload(user, version, content: bytes, *, mode: str = "agent", model: str = "byo-agent"):
    form = {"file": SimpleUploadedFile("agent.jsonl", content), "model": model, "release": version.name, "mode": mode}
    return client_for(user).post("/api/v1/runs/upload/", form, format="multipart")


def _stored() -> tuple[int, int, int, int]:
    return (
        EvaluationRun.objects.count(),
        Generation.objects.count(),
        AgentTrajectory.objects.count(),
        AgentStep.objects.count(),
    )


def _refused(response, before: tuple, *expected: str) -> list[str]:
    assert response.status_code == 400, response.content[:500]
    error = response.json()["error"]
    assert error["code"] == "invalid_upload" and "nothing was stored" in error["message"]
    for problem in expected:
        assert any(problem in detail for detail in error["details"]), error["details"]
    assert _stored() == before, "a refused upload stores nothing"
    return error["details"]


def _outcome(run, snippet) -> Outcome:
    return Outcome.objects.create(run=run, snippet=snippet, status="passed", detail="an uploaded agent answer")


@pytest.mark.django_db
def test_an_agent_upload_is_a_self_reported_agent_run_showing_its_trajectory(version, model, author, client):
    steps = _trajectory()["steps"]
    steps[3]["content"] = "model.py\x00\ud800\n"  # NUL and a lone surrogate: cleaned as the live loop cleans them
    response = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(steps=steps))))
    assert response.status_code == 201, response.content[:500]
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    assert (run.mode, run.provenance, run.params) == ("agent", "self_reported", {"uploaded": True})
    assert Generation.objects.filter(run=run).count() == run.total_items == version_snippets(version=version).count()
    trajectory = AgentTrajectory.objects.get(run=run)
    stored = list(trajectory.steps.order_by("index"))
    assert [s.role for s in stored] == ["system", "user", "assistant", "tool"]
    assert stored[3].content == "model.py\ufffd\ufffd\n"
    # no "usage" given: summed from the steps (one turn, its tokens and cost, the durations)
    assert (trajectory.turns, trajectory.prompt_tokens, trajectory.completion_tokens) == (1, 120, 8)
    assert float(trajectory.cost) == 0.0012 and trajectory.seconds == 1.5 and trajectory.ended_by == "submitted"

    outcome = _outcome(run, trajectory.snippet)
    page = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()
    assert "The agent's trajectory" in page and "Uploaded (self-reported)" in page
    document = client.get(reverse("run-item-trajectory", args=[run.pk, outcome.pk])).json()
    assert document["uploaded"] is True and len(document["steps"]) == 4
    atif = client.get(reverse("run-item-trajectory-atif", args=[run.pk, outcome.pk])).json()
    assert atif["agent"]["name"] == "uploaded-agent" and atif["extra"]["provenance"] == "self_reported"
    # an item uploaded without a trajectory has none to show
    bare = _outcome(run, Snippet.objects.get(pk=_rows(version)[1]["id"]))
    assert "The agent's trajectory" not in client.get(reverse("run-item", args=[run.pk, bare.pk])).content.decode()


@pytest.mark.django_db
def test_a_downloaded_trajectory_uploads_as_it_is_less_its_run(version, model, author):
    document = {**_trajectory(), "uploaded": False, "snippet": int(_rows(version)[0]["id"]), "sample": 0}
    document["usage"] = {"turns": 1, "prompt_tokens": 120, "completion_tokens": 8, "cost": 0.0012, "seconds": 2.0}
    document["answer_problem"] = ""
    for step in document["steps"]:
        step["created_at"] = "2026-12-02T06:20:00+00:00"
    response = _upload(author, version, _encode(_rows(version, trajectory=document)))
    assert response.status_code == 201, response.content[:500]
    trajectory = AgentTrajectory.objects.get(run_id=response.json()["id"])
    # the wall time covers more than the steps' durations (1.5 s): the usage given is the usage stored
    assert (trajectory.cost, trajectory.seconds) == (Decimal("0.0012"), 2.0)


@pytest.mark.django_db
def test_an_agent_line_gives_the_snippet_body_and_a_single_upload_takes_no_trajectory(version, model, author):
    before = _stored()
    answer = {"answer": "```python\nx = 1\n```"}
    rows = _rows(version)
    del rows[0]["code"]
    rows[0].update(answer)
    _refused(_upload(author, version, _encode(rows)), before, "line 1: an agent upload gives the final snippet body")
    single = _upload(author, version, _encode(_rows(version, trajectory=_trajectory())), mode="single")
    _refused(single, before, 'line 1: a "trajectory" is taken in mode "agent" only')


@pytest.mark.django_db
def test_the_upload_form_takes_agent_mode_and_names_the_line_and_field(version, model, author, client):
    client.force_login(author)
    url = reverse("run-upload", args=[model.name])
    bad = _trajectory()
    bad["steps"][2]["prompt_tokens"] = "lots"
    before = _stored()
    content = _encode(_rows(version, trajectory=bad))
    page = client.post(url, {"file": SimpleUploadedFile("a.jsonl", content), "release": version.name, "mode": "agent"})
    body = page.content.decode()
    assert page.status_code == 400 and "line 1: trajectory.steps[2].prompt_tokens: must be an integer" in body
    assert _stored() == before
    good = _encode(_rows(version, trajectory=_trajectory()))
    done = client.post(url, {"file": SimpleUploadedFile("a.jsonl", good), "release": version.name, "mode": "agent"})
    assert done.status_code == 302
    run = EvaluationRun.objects.get()
    assert run.mode == "agent" and AgentTrajectory.objects.filter(run=run).count() == 1


@pytest.mark.django_db
def test_an_oversized_trajectory_is_refused(version, model, author, settings):
    """Without the cap (AGENT_TRAJECTORY_BYTES out of reach) a trajectory far over a live item's cap is stored."""
    steps = _trajectory()["steps"] + [{"role": "user", "content": "x" * 20_000} for _ in range(5)]
    content = _encode(_rows(version, trajectory=_trajectory(steps=steps)))
    settings.AGENT_TRAJECTORY_BYTES = 10**12
    assert _upload(author, version, content).status_code == 201
    assert AgentStep.objects.filter(content__startswith="xxx").count() == 5

    settings.AGENT_TRAJECTORY_BYTES = 50_000
    _refused(
        _upload(author, version, content), _stored(), "line 1: trajectory.steps: over 50000 bytes of text by step 6"
    )


@pytest.mark.django_db
def test_a_huge_step_count_is_refused(version, model, author, monkeypatch):
    """Without the step cap a trajectory of more steps than a live item can store is stored."""
    most = uploads.max_steps(version)
    steps = [{"role": "user", "content": ""} for _ in range(most + 1)]
    content = _encode(_rows(version, trajectory=_trajectory(steps=steps)))
    with monkeypatch.context() as unguarded:
        unguarded.setattr(uploads, "max_steps", lambda version: 10**9)
        assert _upload(author, version, content).status_code == 201
    assert AgentStep.objects.count() == most + 1

    _refused(
        _upload(author, version, content), _stored(), f"line 1: trajectory.steps: {most + 1} steps; at most {most}"
    )


@pytest.mark.django_db
def test_deeply_nested_json_is_a_line_problem_not_a_crash(version, model, author):
    """Unguarded, Python's parser gives up on the line with a RecursionError (a server error for the uploader)."""
    row = json.dumps(_rows(version)[0])
    deep = row[:-1] + ', "trajectory": ' + "[" * 200_000 + "]" * 200_000 + "}"
    with pytest.raises(RecursionError):
        json.loads(deep)
    before = _stored()
    _refused(_upload(author, version, _encode([deep, *_rows(version)[1:]])), before, "line 1: nested too deeply")
    # nested within what the parser reads: a wrong type where the schema has a number
    nested = _trajectory()
    nested["steps"][2]["budget_left"]["turns"] = json.loads("[" * 500 + "]" * 500)
    _refused(
        _upload(author, version, _encode(_rows(version, trajectory=nested))),
        before,
        "line 1: trajectory.steps[2].budget_left.turns: must be an integer",
    )


WRONG_TYPES = [
    # (step, field, a hostile value, the problem named, what the database does with it unguarded)
    (2, "prompt_tokens", -5, "trajectory.steps[2].prompt_tokens: must be an integer from 0", "raises"),
    # PostgreSQL's integer column refuses 2**40 (SQLite stores it, and a string longer than its column, as it is).
    pytest.param(
        2,
        "prompt_tokens",
        2**40,
        "trajectory.steps[2].prompt_tokens: must be an integer from 0",
        "raises",
        marks=pytest.mark.postgres,
    ),
    (2, "tool_calls", {"id": "c1"}, "trajectory.steps[2].tool_calls: must be a list", "stored"),
    (
        2,
        "tool_calls",
        [{"id": 1, "name": "run", "arguments": "{}"}],
        "trajectory.steps[2].tool_calls[0].id: must be a string",
        "stored",
    ),
    (2, "content", ["not", "text"], "trajectory.steps[2].content: must be a string", "stored"),
    (2, "budget_left", {"turns": "nine"}, "trajectory.steps[2].budget_left.turns: must be an integer", "stored"),
    (2, "cost", float("inf"), "trajectory.steps[2].cost: must be a finite number", "raises"),
    pytest.param(
        3,
        "tool_name",
        "x" * 51,
        "trajectory.steps[3].tool_name: is 51 characters",
        "raises",
        marks=pytest.mark.postgres,
    ),
    (3, "duration", "slow", "trajectory.steps[3].duration: must be a finite number", "raises"),
    (3, "role", "root", "trajectory.steps[3].role: must be one of", "stored"),
    (3, "index", 3.0, "trajectory.steps[3].index: must be 3", "stored"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("index", "field", "value", "problem", "unguarded"), WRONG_TYPES)
def test_a_field_of_the_wrong_type_or_size_is_refused_by_name(
    version, model, author, index, field, value, problem, unguarded
):
    """Unguarded, the value goes to the database as it is: it fails the insert (a server error) or is stored as
    something other than the documented type, for the page and downloads to trip on."""
    trajectory = AgentTrajectory.objects.create(
        run=EvaluationRun.objects.create(model=model, version=version, mode="agent"),
        snippet=version_snippets(version=version).first(),
    )
    try:
        with transaction.atomic():
            AgentStep.objects.create(trajectory=trajectory, **{"index": 0, "role": "tool", field: value})
        outcome = "stored"
    except Exception:
        outcome = "raises"
    assert outcome == unguarded
    before = _stored()
    bad = _trajectory()
    bad["steps"][index][field] = value
    _refused(_upload(author, version, _encode(_rows(version, trajectory=bad))), before, f"line 1: {problem}")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param("\x00", marks=pytest.mark.postgres, id="NUL"),  # SQLite stores a NUL in text as it is
        pytest.param("\ud800", id="lone surrogate"),
    ],
)
def test_nul_bytes_and_lone_surrogates_are_cleaned_not_crashed_on(version, model, author, hostile):
    """Unguarded, PostgreSQL refuses a NUL in text and UTF-8 a lone surrogate: the insert fails."""
    trajectory = AgentTrajectory.objects.create(
        run=EvaluationRun.objects.create(model=model, version=version, mode="agent"),
        snippet=version_snippets(version=version).first(),
    )
    pre_save.disconnect(dispatch_uid="text_fields_storable")  # every save's own cleaning (operations.apps), off
    try:
        with pytest.raises((DataError, UnicodeEncodeError)), transaction.atomic():
            AgentStep.objects.create(trajectory=trajectory, index=0, role="tool", content=f"out{hostile}put")
    finally:
        pre_save.connect(text_fields_storable, dispatch_uid="text_fields_storable")
    steps = _trajectory()["steps"]
    steps[2]["tool_calls"][0]["arguments"] = '{"command": "cat ' + hostile + " " + hostile + '"}'
    steps[2]["content"] = hostile * 10
    response = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(steps=steps))))
    assert response.status_code == 201, response.content[:500]
    stored = AgentStep.objects.get(trajectory__run_id=response.json()["id"], index=2)
    assert stored.content == "\ufffd" * 10 and stored.tool_calls[0]["arguments"] == '{"command": "cat \ufffd \ufffd"}'


@pytest.mark.django_db
def test_html_in_an_uploaded_tool_output_is_shown_escaped(version, model, author, client):
    """Unguarded (autoescape off), the uploaded output would be a live script on the item page."""
    script = "<script>alert('owned')</script><img src=x onerror=alert(1)>"
    raw = Template("{% autoescape off %}{{ content }}{% endautoescape %}").render(Context({"content": script}))
    assert "<script>alert('owned')</script>" in raw
    steps = _trajectory()["steps"]
    steps[3]["content"] = script
    steps[2]["tool_calls"][0]["arguments"] = json.dumps({"command": script})
    steps[2]["tool_calls"][0]["name"] = "<b>run</b>"
    response = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(steps=steps))))
    assert response.status_code == 201, response.content[:500]
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    page = client.get(reverse("run-item", args=[run.pk, _outcome(run, run.trajectories.get().snippet).pk]))
    body = page.content.decode()
    assert "<script>alert(" not in body and "<img src=x" not in body and "<b>run</b>" not in body
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in body and "&lt;b&gt;run&lt;/b&gt;" in body


@pytest.mark.django_db
def test_an_upload_cannot_reach_another_users_run_or_model(version, model, author, other_author, client):
    """Unguarded (a store that honoured the document's `run`), the uploader's steps land on the victim's item page."""
    victims = services.model_register(name="victim", display_name="Victim", kind="uploaded", owner=other_author)
    victim_run = EvaluationRun.objects.create(model=victims, version=version, mode="agent", status="completed")
    snippet = version_snippets(version=version).first()
    outcome = _outcome(victim_run, snippet)
    planted = AgentTrajectory.objects.create(run=victim_run, snippet=snippet, ended_by="submitted")
    AgentStep.objects.create(trajectory=planted, index=0, role="assistant", content="planted by the attacker")
    assert (
        "planted by the attacker" in client.get(reverse("run-item", args=[victim_run.pk, outcome.pk])).content.decode()
    )
    planted.delete()

    before = _stored()
    aimed = _trajectory(run=victim_run.pk)
    _refused(_upload(author, version, _encode(_rows(version, trajectory=aimed))), before, "line 1: trajectory.run: ")
    other_sample = _trajectory(sample=1)
    _refused(_upload(author, version, _encode(_rows(version, trajectory=other_sample))), before, "trajectory.sample")
    as_victim = _upload(author, version, _encode(_rows(version, trajectory=_trajectory())), model="victim")
    assert as_victim.status_code == 403 and _stored() == before
    assert not AgentTrajectory.objects.filter(run=victim_run).exists()


@pytest.mark.django_db
def test_a_held_out_item_is_as_unknown_on_the_line_as_in_its_trajectory(media_root, model, author):
    """Unguarded (the release's every item taken as the upload's), a held-out item's line is accepted."""
    draft = pset_import(root=DEMO_PSET, version_name="held-1.0.0").version
    held_task = draft.tasks.order_by("paper__slug").first()
    version_task_set(version=draft, task=held_task, split=VersionTask.Split.HELD_OUT)
    version = version_publish(version=draft, downloads_inline=True)
    held = Snippet.objects.filter(task=held_task).order_by("pk").first()
    line = {"id": str(held.pk), "sample": 0, "code": held.reference_code, "trajectory": _trajectory()}
    every_item = {str(s.pk): s for s in version_snippets(version=version)}
    unguarded = uploads.agent_line_parse(
        line,
        parse=services.upload_line_parse,
        snippets=every_item,
        version=version,
        protocol="rcb-v1",
        steps_max=900,
        maximums=release_maximums(version),
    )
    assert not isinstance(unguarded, str) and unguarded.snippet == held

    public = _rows(version)
    assert held.pk not in {int(row["id"]) for row in public}
    before = _stored()
    _refused(_upload(author, version, _encode([*public, line])), before, f"unknown item id '{held.pk}'")
    # a public line whose trajectory names the held-out item: the same answer as for an id that does not exist
    problems = []
    for named in (held.pk, 10**9):
        rows = _rows(version, trajectory=_trajectory(snippet=named))
        problems += _refused(_upload(author, version, _encode(rows)), before, "line 1: trajectory.snippet")
    # Not in the problem itself (its "line 1: " prefix may hold the digits of a small id, as on a fresh SQLite).
    assert problems[0] == problems[1] and str(held.pk) not in problems[0].removeprefix("line 1: ")


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_uploaded_agent_run_is_scored_on_the_same_path_by_a_real_worker(
    media_root, author, celery_worker_factory, sandbox_cache, tmp_path
):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    # One paper's 11 items (the demo's fastest to prepare): the path an uploaded answer takes, whatever their number.
    version = pset_import(root=demo_papers(tmp_path, "topk-attention-pool"), version_name="1.0.0", publish=True).version
    services.model_register(name="byo-agent", display_name="BYO agent", kind="uploaded", owner=author)
    worker = celery_worker_factory(queues="default,sandbox", SANDBOX_BACKEND="bwrap")  # no llm consumer at all
    rows = _rows(version, trajectory=_trajectory())
    rows[1]["code"] = "pass"  # a wrong body fails its tests like any answer
    response = _upload(author, version, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    run_id = response.json()["id"]
    deadline = time.monotonic() + 600
    while EvaluationRun.objects.get(pk=run_id).status != EvaluationRun.Status.COMPLETED:
        assert time.monotonic() < deadline, worker.output()[-6000:]
        time.sleep(0.5)
    outcomes = {str(o.snippet_id): o for o in Outcome.objects.filter(run_id=run_id)}
    assert len(outcomes) == len(rows)
    assert outcomes[rows[1]["id"]].status != "passed"
    assert {o.status for key, o in outcomes.items() if key != rows[1]["id"]} == {"passed"}
    first = outcomes[rows[0]["id"]]
    assert first.detail.startswith("an uploaded agent answer (self-reported: the agent submitted after 1 turn)")
    assert outcomes[rows[2]["id"]].detail.startswith("an uploaded agent answer without a trajectory (self-reported)")


# ATIF-v1.4's fields per object (Harbor's RFC 0001): an export holds no other, as Harbor's models forbid extras.
ATIF_ROOT = {"schema_version", "session_id", "agent", "steps", "notes", "final_metrics", "extra"}
ATIF_AGENT = {"name", "version", "model_name", "extra"}
ATIF_STEP = {
    "step_id",
    "timestamp",
    "source",
    "model_name",
    "reasoning_effort",
    "message",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
    "extra",
}
ATIF_CALL = {"tool_call_id", "function_name", "arguments"}
ATIF_METRICS = {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "extra"}
ATIF_RESULT = {"source_call_id", "content", "subagent_trajectory_ref"}
ATIF_FINAL = {
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cached_tokens",
    "total_cost_usd",
    "total_steps",
    "extra",
}


def _atif_fields_check(document: dict) -> None:
    assert set(document) <= ATIF_ROOT and set(document["agent"]) <= ATIF_AGENT
    assert set(document["final_metrics"]) <= ATIF_FINAL
    assert [step["step_id"] for step in document["steps"]] == list(range(1, len(document["steps"]) + 1))
    for step in document["steps"]:
        assert set(step) <= ATIF_STEP and step["source"] in ("system", "user", "agent")
        assert isinstance(step["message"], str)
        if step["source"] != "agent":  # agent-only fields
            assert not {"model_name", "tool_calls", "metrics"} & set(step)
        calls = {call["tool_call_id"] for call in step.get("tool_calls", [])}
        for call in step.get("tool_calls", []):
            assert set(call) == ATIF_CALL and isinstance(call["arguments"], dict)
        assert set(step.get("metrics", {})) <= ATIF_METRICS
        for result in step.get("observation", {"results": []})["results"]:
            assert set(result) <= ATIF_RESULT
            assert result["source_call_id"] is None or result["source_call_id"] in calls  # Harbor checks this too


@pytest.mark.django_db
def test_a_trajectory_exports_to_atif_with_tool_outputs_as_observations(version, model, author, maintainer, client):
    steps = _trajectory()["steps"]
    steps[2]["tool_calls"].append({"id": "c2", "name": "read_file", "arguments": "not json"})
    steps += [
        {"role": "tool", "content": "def f(): ...", "tool_call_id": "c2", "tool_name": "read_file", "duration": 0.01},
        {"role": "tool", "content": "an output no call asked for", "tool_call_id": "zz", "tool_name": "run"},
        {"role": "user", "content": "9 turns left"},
        {"role": "assistant", "content": "done", "tool_calls": [{"id": "c3", "name": "submit", "arguments": "{}"}]},
    ]
    steps[-1]["cost"] = 0.0008  # known for every turn: the total is known too
    response = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(steps=steps))))
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    outcome = _outcome(run, run.trajectories.get().snippet)
    document = client.get(reverse("run-item-trajectory-atif", args=[run.pk, outcome.pk])).json()
    _atif_fields_check(document)
    assert document["schema_version"] == "ATIF-v1.4" and document["agent"]["version"] == "rcb-agent-trajectory/1"
    sources = [step["source"] for step in document["steps"]]
    assert sources == ["system", "user", "agent", "system", "user", "agent"]
    turn = document["steps"][2]
    assert turn["tool_calls"][0]["arguments"] == {"command": "ls"}
    assert turn["tool_calls"][1]["arguments"] == {"_raw": "not json"}  # not a JSON object: the string kept whole
    assert turn["observation"]["results"] == [
        {"source_call_id": "c1", "content": "model.py\n"},
        {"source_call_id": "c2", "content": "def f(): ..."},
    ]
    assert turn["metrics"] == {"prompt_tokens": 120, "completion_tokens": 8, "cost_usd": 0.0012}
    assert turn["extra"]["budget_left"]["turns"] == 9 and turn["extra"]["tool_durations"]["c2"] == 0.01
    orphan = document["steps"][3]
    assert orphan["observation"]["results"] == [{"source_call_id": None, "content": "an output no call asked for"}]
    assert orphan["extra"]["tool_call_id"] == "zz"
    assert document["steps"][5]["metrics"] == {"cost_usd": 0.0008}, "no tokens given: none said, never zeros"
    final = document["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_steps"], final["total_cost_usd"]) == (120, 6, 0.002)


@pytest.mark.django_db
def test_the_atif_export_follows_the_items_visibility(media_root, maintainer, client):
    """A held-out item's trajectory: none to a visitor in either format, the maintainer gets both."""
    draft = pset_import(root=DEMO_PSET, version_name="held-1.0.0").version
    held_task = draft.tasks.order_by("paper__slug").first()
    version_task_set(version=draft, task=held_task, split=VersionTask.Split.HELD_OUT)
    version = version_publish(version=draft, downloads_inline=True)
    from evaluation.models import ModelEntry

    run = EvaluationRun.objects.create(
        model=ModelEntry.objects.get(name="reference"),
        version=version,
        mode="agent",
        covers_held_out=True,
        status="completed",
    )
    secret = Snippet.objects.filter(task=held_task).order_by("pk").first()
    trajectory = AgentTrajectory.objects.create(run=run, snippet=secret, ended_by="submitted", cost=None)
    AgentStep.objects.create(trajectory=trajectory, index=0, role="tool", content="held-out output")
    outcome = _outcome(run, secret)
    for name in ("run-item-trajectory", "run-item-trajectory-atif"):
        assert client.get(reverse(name, args=[run.pk, outcome.pk])).status_code == 404
    client.force_login(maintainer)
    document = client.get(reverse("run-item-trajectory-atif", args=[run.pk, outcome.pk])).json()
    _atif_fields_check(document)
    assert document["steps"][0]["observation"]["results"][0]["content"] == "held-out output"
    assert "total_cost_usd" not in document["final_metrics"], "an unknown cost is left out, never 0"


@pytest.mark.django_db
def test_the_guides_example_lines_upload_as_written(version, model, author):
    import re

    from tests.conftest import REPO

    guide = (REPO / "docs" / "AGENT_RUNS.md").read_text()
    section = guide.split("## Bring your own agent (uploads)")[1]
    example = [json.loads(line) for line in re.findall(r"```json\n(.*?)```", section, re.S)[0].splitlines()]
    rows = _rows(version)
    for row, line in zip(rows, example, strict=False):  # the guide's ids stand for the release's first items
        row.update({key: value for key, value in line.items() if key != "id"})
    response = _upload(author, version, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    assert AgentStep.objects.filter(trajectory__run_id=response.json()["id"]).count() == 4


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["single", "agent"])
def test_a_number_past_the_parsers_digit_limit_is_a_line_problem(version, model, author, client, mode):
    """Unguarded (only the JSON decoder's own error caught, as before), Python's int-string limit makes json.loads
    raise a plain ValueError: the upload was a server error, on the API and on the page, in either mode."""
    huge = '{"id": ' + "1" * 5000 + ', "sample": 0, "code": "x = 1"}'
    with pytest.raises(ValueError, match="Exceeds the limit") as raised:
        json.loads(huge)
    assert not isinstance(raised.value, json.JSONDecodeError), "the old `except json.JSONDecodeError` misses it"

    rows = _rows(version)
    content = _encode([*rows[1:], huge])
    problem = f"line {len(rows)}: a number of more than 4300 digits"
    before = _stored()
    _refused(_upload(author, version, content, mode=mode), before, problem)
    client.force_login(author)
    form = {"file": SimpleUploadedFile("a.jsonl", content), "release": version.name, "mode": mode}
    page = client.post(reverse("run-upload", args=[model.name]), form)
    assert page.status_code == 400 and problem in page.content.decode()
    assert _stored() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        # PostgreSQL's numeric(12,6) refuses the sum; SQLite stores any number.
        pytest.param(
            "cost",
            999999,
            "their cost add up to 1999998.000000; a trajectory's is at most 999999.999999",
            marks=pytest.mark.postgres,
        ),
        ("duration", 10**7, "their seconds add up to 20000000.0; a trajectory's is at most 10000000"),
    ],
)
def test_steps_that_add_up_past_the_trajectorys_columns_are_refused(
    version, model, author, monkeypatch, field, value, problem
):
    """Each step is within its own column, but a trajectory without "usage" stores their sum. Unguarded (the sums
    unchecked), two steps of 999999 USD add up past numeric(12,6), which fails the insert: a server error; two of
    10^7 s store a wall time no item of any release could have."""
    steps = [{"role": "assistant", "content": "hi", field: value} for _ in range(2)]
    content = _encode(_rows(version, trajectory=_trajectory(steps=steps)))
    with monkeypatch.context() as unguarded:
        unguarded.setitem(uploads.USAGE_MAX, "cost", Decimal(10**9))
        unguarded.setitem(uploads.USAGE_MAX, "seconds", 10**9)
        if field == "cost":
            with pytest.raises(DataError):
                _upload(author, version, content)
        else:
            assert _upload(author, version, content).status_code == 201
            assert AgentTrajectory.objects.get().seconds == 2 * 10**7
    _refused(_upload(author, version, content), _stored(), f"line 1: trajectory.steps: {problem}")


def _turns(count: int = 3, **step) -> list[dict]:
    """Assistant turns of a million tokens each way at 50 USD, 2 s each."""
    turn = {"role": "assistant", "content": "", "prompt_tokens": 10**6, "completion_tokens": 10**6, "cost": 50}
    return [{**turn, "duration": 2.0, **step} for _ in range(count)]


HONEST_USAGE = {"turns": 3, "prompt_tokens": 3 * 10**6, "completion_tokens": 3 * 10**6, "cost": 150, "seconds": 6.5}
FORGED_USAGE = [
    ({"turns": 0}, "trajectory.usage.turns: is 0; the steps' assistant turns make 3"),
    ({"prompt_tokens": 0}, "trajectory.usage.prompt_tokens: is 0; the steps' assistant turns make 3000000"),
    ({"completion_tokens": 5}, "trajectory.usage.completion_tokens: is 5; the steps' assistant turns make 3000000"),
    ({"cost": 0}, "trajectory.usage.cost: is 0.000000; the steps' assistant turns make 150.000000"),
    ({"cost": None}, "trajectory.usage.cost: is unknown (null); the steps' assistant turns make 150.000000"),
    ({"seconds": 0}, "trajectory.usage.seconds: is 0; less than the steps' durations, 6"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("forged", "problem"), FORGED_USAGE)
def test_a_usage_the_steps_contradict_is_refused_by_field(version, model, author, client, monkeypatch, forged, problem):
    """Unguarded (the usage taken as given), 3 turns of a million tokens at 50 USD each are stored, and shown on the
    item page and in the ATIF export, as whatever totals the uploader wrote."""
    usage = {**HONEST_USAGE, **forged}
    content = _encode(_rows(version, trajectory=_trajectory(steps=_turns(), usage=usage)))
    with monkeypatch.context() as unguarded:
        unguarded.setattr(uploads, "_usage_disagreement", lambda given, summed: None)
        response = _upload(author, version, content)
    assert response.status_code == 201, response.content[:500]
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    outcome = _outcome(run, run.trajectories.get().snippet)
    atif = client.get(reverse("run-item-trajectory-atif", args=[run.pk, outcome.pk])).json()
    shown = {**atif["final_metrics"], **atif["final_metrics"]["extra"]}
    name = next(iter(forged))
    atif_name = {"prompt_tokens": "total_prompt_tokens", "completion_tokens": "total_completion_tokens"}
    atif_name.update(cost="total_cost_usd")
    assert shown.get(atif_name.get(name, name)) == forged[name], "the forged total is what everyone is shown"

    _refused(_upload(author, version, content), _stored(), f"line 1: {problem} (leave usage out to have it summed)")
    honest = _upload(
        author, version, _encode(_rows(version, trajectory=_trajectory(steps=_turns(), usage=HONEST_USAGE)))
    )
    assert honest.status_code == 201, honest.content[:500]
    stored = AgentTrajectory.objects.get(run_id=honest.json()["id"])
    assert (stored.turns, stored.tokens, stored.cost, stored.seconds) == (3, 6 * 10**6, Decimal(150), 6.5)


@pytest.mark.django_db
def test_a_live_trajectorys_usage_uploads_as_the_loop_counted_it(version, model, author):
    """What the live loop stores and the steps differ in two ways a download keeps: each turn's cost is rounded to
    the micro-dollar in its step but not in the total, and a model call the wall-time budget cut short is stored
    as an assistant step that was no turn."""
    steps = _turns(3, cost=0.0000004) + [{"role": "assistant", "content": "[the wall-time budget ran out]"}]
    usage = {**HONEST_USAGE, "cost": 0.000001}  # 3 x 0.0000004 rounded once; each step's rounds to 0
    document = _trajectory(steps=steps, usage=usage, ended_by="seconds")
    response = _upload(author, version, _encode(_rows(version, trajectory=document)))
    assert response.status_code == 201, response.content[:500]
    stored = AgentTrajectory.objects.get(run_id=response.json()["id"])
    assert (stored.turns, stored.cost, stored.steps.count()) == (3, Decimal("0.000001"), 4)
    # ended by anything else, that fourth assistant step was a turn the usage leaves out
    other = _upload(author, version, _encode(_rows(version, trajectory={**document, "ended_by": "turns"})))
    _refused(other, _stored(), "line 1: trajectory.usage.turns: is 3; the steps' assistant turns make 4")


@pytest.mark.django_db
def test_a_budget_above_the_releases_maximums_is_refused(version, model, author, monkeypatch):
    """Unguarded (a budget held to the column sizes only), an item claims 10^15 turns, tokens, seconds and USD, and
    the item page and downloads show it as the budget it ran under."""
    forged = {"turns": 10**15, "tokens": 10**15, "seconds": 1e15, "cost": 1e15}
    content = _encode(_rows(version, trajectory=_trajectory(budget=forged)))
    with monkeypatch.context() as unguarded:
        unguarded.setattr(uploads, "_budget_allowed", lambda budget, maximums: budget)
        assert _upload(author, version, content).status_code == 201
    assert AgentTrajectory.objects.get().budget == forged

    most = release_maximums(version)
    _refused(
        _upload(author, version, content),
        _stored(),
        f"line 1: trajectory.budget.turns: 1e+15 is above the release's maximum of {most.turns} turns per item",
    )
    over_cost = _trajectory(budget={**most.as_dict(), "cost": most.cost + 0.01})
    _refused(_upload(author, version, _encode(_rows(version, trajectory=over_cost))), _stored(), "budget.cost: ")
    at_most = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(budget=most.as_dict()))))
    assert at_most.status_code == 201, at_most.content[:500]


@pytest.mark.django_db
def test_bad_lines_are_named_up_to_a_bound_and_the_rest_only_counted(version, model, author, monkeypatch):
    """Unguarded (no bound), every bad line is parsed and kept as a message before the file is refused: 2 MiB of
    "x" lines made a million messages (111 MB at peak), the 64 MiB cap some 3.5 GB in one request."""
    lines = 100_000
    content = b"x\n" * lines
    with monkeypatch.context() as unguarded:
        unguarded.setattr(services.uploads, "UPLOAD_PROBLEMS_MAX", 10**9)
        with pytest.raises(services.UploadError) as everything:
            services.run_from_upload(model=model, version=version, data=content, user=author, mode="agent")
    assert len(everything.value.problems) == lines

    before = _stored()
    with pytest.raises(services.UploadError) as bounded:
        services.run_from_upload(model=model, version=version, data=content, user=author, mode="agent")
    problems = bounded.value.problems
    assert len(problems) == 101 and problems[99] == "line 100: not JSON (Expecting value)"
    assert problems[100] == f"and {lines - 100} more line(s) not checked: the file is refused at 100 bad lines"
    # a good line among them is no bad line; blank ones are none either; \r\n ends a line as \n does
    mixed = "\r\n".join([json.dumps(_rows(version)[0]), "", *["x"] * 150]).encode()
    details = _refused(_upload(author, version, mixed), before, "line 102: not JSON")
    assert details[0].startswith("line 3: ") and details[-1].startswith("and 50 more line(s) not checked")


@pytest.mark.django_db
def test_a_line_separator_inside_a_string_ends_no_line(version, model, author):
    """Unguarded (str.splitlines(), as before), a U+2028 that json.dumps(ensure_ascii=False) leaves raw inside a
    string split its line in two, and the upload was refused as two lines that are not JSON."""
    rows = _rows(version)
    rows[0]["code"] += "# a comment\u2028with a line separator\n"
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    assert len(text.splitlines()) == len(rows) + 1
    response = _upload(author, version, text.encode())
    assert response.status_code == 201, response.content[:500]


@pytest.mark.django_db
def test_deeply_nested_tool_arguments_export_to_atif_as_their_text(version, model, author, client):
    """Unguarded (json.loads of the arguments catching ValueError only), a call's arguments nested 5000 deep raise
    RecursionError: the item's ATIF download was a server error for everyone who could see the item. Nested within
    what the parser reads, they came back as an object as deep for the export's encoder."""
    nested = '{"a":' * 5000 + "1" + "}" * 5000
    with pytest.raises(RecursionError):
        json.loads(nested)
    readable = '{"a":' * 500 + "1" + "}" * 500
    assert isinstance(json.loads(readable), dict)
    huge = '{"n": ' + "1" * 5000 + "}"
    steps = _trajectory()["steps"]
    steps[2]["tool_calls"] += [
        {"id": "c2", "name": "run", "arguments": nested},
        {"id": "c3", "name": "run", "arguments": readable},
        {"id": "c4", "name": "run", "arguments": huge},
        {"id": "c5", "name": "run", "arguments": '{"a": {"b": [1, {"c": 2}]}}'},
    ]
    response = _upload(author, version, _encode(_rows(version, trajectory=_trajectory(steps=steps))))
    assert response.status_code == 201, response.content[:500]
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    outcome = _outcome(run, run.trajectories.get().snippet)
    download = client.get(reverse("run-item-trajectory-atif", args=[run.pk, outcome.pk]))
    assert download.status_code == 200
    document = download.json()
    _atif_fields_check(document)
    arguments = [call["arguments"] for call in document["steps"][2]["tool_calls"]]
    assert arguments == [
        {"command": "ls"},
        {"_raw": nested},
        {"_raw": readable},
        {"_raw": huge},
        {"a": {"b": [1, {"c": 2}]}},
    ]
