"""An agent item's turns move between queues and workers (issue 23 item 5): the model's turns run on the `llm`
queue, its tools on the `sandbox` queue, the workspace is kept in storage between tools tasks, and a worker lost
mid-item is resumed from the last stored step. Real workers, Redis, PostgreSQL and bwrap; the model is the local
OpenAI-compatible server playing a script of tool calls (read, edit, check with a command, submit)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import threading
import time

import pytest
from django.db.models import Sum

from agents.models import AgentStep, AgentTrajectory
from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, Outcome
from operations.events import Kind, events_of
from tests.conftest import DEMO_PSET, polled, sandbox_backend_or_missing
from tests.evaluation.openai_server import openai_server
from tests.outages import WATCH

# A Redis server of their own (tests/outages.py): a shared one lets other tests' workers take these messages.
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
PAPER = "trimmed-infonce"  # one paper of the demo (10 items) keeps the runs short
# The fault tests' watchdog intervals (re-dispatch 4 s after the last progress, not the default 20 s): the defaults'
# own recovery time is test_lost_work's subject, not resuming from the last stored step.
WATCHED = {**WATCH, "SANDBOX_BACKEND": "bwrap"}


@pytest.fixture
def release(media_root, tmp_path, sandbox_cache):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    pset = tmp_path / "pset"
    shutil.copytree(DEMO_PSET, pset)
    for folder in pset.iterdir():
        if folder.is_dir() and folder.name != PAPER:
            shutil.rmtree(folder)
    papers = (pset / "papers.yaml").read_text()
    (pset / "papers.yaml").write_text(papers[papers.index(f"- id: {PAPER}") :])
    return pset_import(root=pset, version_name="turns-1.0.0", publish=True).version


def _call(name: str, number: int, **arguments) -> dict:
    return {"id": f"c{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class Script:
    """The scripted agent: read the masked file, put the reference body in with edit_file, check the edit with a
    command, submit. `before(turn, snippet, body)` runs in the server before it answers (to block or meddle)."""

    def __init__(self, release, before=None):
        snippets = Snippet.objects.filter(task__versions=release)
        self.snippets = {s.name: s for s in snippets}
        self.before = before

    def __call__(self, prompt: str, body: dict) -> dict:
        messages = body["messages"]
        snippet = self.snippets[re.search(r'the block "([^"]+)"', messages[0]["content"]).group(1)]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if self.before is not None:
            self.before(turn, snippet, body)
        if turn == 0:
            return {"content": "reading", "tool_calls": [_call("read_file", 0, path=snippet.file_path)]}
        if turn == 1:
            text = next(m["content"] for m in messages if m["role"] == "tool")
            start = text.index(f'# TODO: Implement block "{snippet.name}"')
            start = text.rfind("\n", 0, start) + 1
            end = text.index("line(s) of code.", start) + len("line(s) of code.\n")
            edit = {"path": snippet.file_path, "old_string": text[start:end], "new_string": snippet.reference_code}
            return {"content": "editing", "tool_calls": [_call("edit_file", 1, **edit)]}
        if turn == 2:
            command = f"grep -q 'TODO: Implement block' {snippet.file_path} && echo EDIT-MISSING || echo EDIT-PRESENT"
            return {"content": "checking", "tool_calls": [_call("run", 2, command=command)]}
        return {"content": "done", "tool_calls": [_call("submit", 3)]}


def _model(server):
    return services.model_register(
        name="scripted", display_name="Scripted", litellm_model="openai/scripted", api_base=server.base_url, api_key="k"
    )


def _completed(run, worker, timeout=240):
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=timeout,
        worker=worker,
        what="the agent run to complete",
    )


def _all_passed_once(run) -> None:
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == run.total_items == 10
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}, list(outcomes.values_list("detail"))
    checks = AgentStep.objects.filter(trajectory__run=run, role="tool", tool_name="run")
    assert checks.count() == 10 and all("EDIT-PRESENT" in s.content for s in checks)


def _tasks_run(worker, name: str) -> int:
    return worker.output().count(f"Task evaluation.agents.tasks.{name}[") // 2  # "received" and "succeeded"


def test_an_llm_only_worker_and_a_sandbox_only_worker_finish_agent_items_together(
    release, celery_worker_factory, sandbox_cache
):
    """The turns really alternate queues: neither worker alone could finish an item. The sandbox worker kept each
    item's current workspace, so it never restored one from storage."""
    with openai_server(responder=Script(release)) as server:
        model = _model(server)
        llm = celery_worker_factory(queues="llm", SANDBOX_BACKEND="bwrap")
        sandbox = celery_worker_factory(queues="default,sandbox", SANDBOX_BACKEND="bwrap")
        run = services.run_start(model=model, version=release, mode="agent", budget={"turns": 6})
        _completed(run, sandbox)
    _all_passed_once(run)
    assert _tasks_run(llm, "agent_turn") == 40 and _tasks_run(llm, "item_agent") == 0, "4 turns an item, on llm"
    assert _tasks_run(sandbox, "agent_turn") == 0 and _tasks_run(sandbox, "item_agent") >= 40  # start, 3 tools, score
    assert "restored from storage" not in sandbox.output()
    assert len(set(Outcome.objects.filter(run=run).values_list("worker", flat=True))) == 1, "scored on sandbox"
    assert not list((sandbox_cache / "agent-workspaces").glob(f"run{run.pk}-*")), "local copies go with the item"
    trajectories = AgentTrajectory.objects.filter(run=run)
    assert set(trajectories.values_list("ended_by", "turns", "workspace_snapshot")) == {("submitted", 4, "")}


def test_a_workspace_deleted_between_turns_is_restored_with_the_earlier_edits(
    release, celery_worker_factory, sandbox_cache, media_root
):
    """As on a worker that never had the item: its local copy is gone after the edit, and the command of the next
    turn (in bwrap, as the sandbox user) still finds the edit, and the item passes on it."""
    deleted = []

    def delete_local_copy(turn, snippet, body):
        if turn == 2:  # the edit is stored; this worker's copy is removed before its check runs
            for folder in (sandbox_cache / "agent-workspaces").glob(f"run*-item{snippet.pk}-0"):
                subprocess.run(["rm", "-rf", str(folder)], check=True)
                deleted.append(folder.name)

    with openai_server(responder=Script(release, before=delete_local_copy)) as server:
        model = _model(server)
        worker = celery_worker_factory(queues="default,llm,sandbox", SANDBOX_BACKEND="bwrap")
        run = services.run_start(model=model, version=release, mode="agent", budget={"turns": 6})
        _completed(run, worker)
    assert len(deleted) == 10
    _all_passed_once(run)
    assert worker.output().count("restored from storage") == 10
    assert not list((media_root / "agent-workspaces").rglob("*.tar.gz")), "snapshots go with the item"


def test_a_worker_killed_between_turns_is_resumed_from_the_last_stored_step(
    release, celery_worker_factory, sandbox_cache
):
    """SIGKILL while a turn waits on the model: a fresh worker's watchdog re-dispatches the run, and each item goes on
    from its last stored step. Before, the item started over: its steps were deleted and its usage zeroed."""
    in_call, go_on = threading.Event(), threading.Event()
    blocked: list[dict] = []

    def block_once(turn, snippet, body):
        if turn == 2 and not blocked:
            blocked.append(body)
            in_call.set()
            go_on.wait(timeout=300)

    with openai_server(responder=Script(release, before=block_once)) as server:
        model = _model(server)
        first = celery_worker_factory(queues="default,llm,sandbox", **WATCHED)
        run = services.run_start(model=model, version=release, mode="agent", budget={"turns": 6})
        assert in_call.wait(timeout=600), first.output()[-3000:]
        first.kill(9)
        killed = time.monotonic()
        go_on.set()
        stored = {
            t.pk: (list(t.steps.values_list("pk", "index", "content")), t.turns, t.prompt_tokens)
            for t in AgentTrajectory.objects.filter(run=run)
        }
        second = celery_worker_factory(queues="default,llm,sandbox", **WATCHED)
        _completed(run, second)
        print(f"killed worker: completed {time.monotonic() - killed:.0f} s after the kill")
        requests = [r.body["messages"] for r in server.chat_requests]
    _all_passed_once(run)
    assert events_of(subject=run, kinds=[Kind.ITEMS_REDISPATCHED]).exists()
    for trajectory in AgentTrajectory.objects.filter(run=run):
        steps = list(trajectory.steps.order_by("index"))
        assert [s.index for s in steps] == list(range(len(steps))), "no step recorded twice, none missing"
        assert [s.role for s in steps].count("assistant") == trajectory.turns == 4
        before, turns_before, tokens_before = stored.get(trajectory.pk, ([], 0, 0))  # not begun at the kill
        assert [(s.pk, s.index, s.content) for s in steps[: len(before)]] == before, "earlier steps kept as they were"
        assert trajectory.turns >= turns_before and trajectory.prompt_tokens >= tokens_before
        assert trajectory.prompt_tokens == sum(s.prompt_tokens or 0 for s in steps), "every turn's usage counted"
    assert AgentTrajectory.objects.filter(run=run).aggregate(t=Sum("turns"))["t"] == 40
    assert any(turns for _, turns, _ in stored.values()), "some item was resumed with turns of the lost attempt"
    # The turn cut by the kill was asked again with exactly the conversation the lost attempt sent.
    again = [m for m in requests if m[0] == blocked[0]["messages"][0] and len(m) == len(blocked[0]["messages"])]
    assert len(again) == 2 and again[0] == again[1] == blocked[0]["messages"]
    # Every request of an item extends the one before it: the rebuilt conversation is the original's prefix.
    by_item: dict[str, list[list[dict]]] = {}
    for messages in requests:
        by_item.setdefault(messages[0]["content"], []).append(messages)
    for sent in by_item.values():
        for earlier, later in itertools.pairwise(sent):
            assert later[: len(earlier)] == earlier
