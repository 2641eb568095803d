"""An agent's hostile answer, put in its file with edit_file, is judged by the same sealed verdict as any answer
(issue 33): the hidden reference called from a thread pool fools the paper's tests when run with plain python, and
through the agent loop, the workspace and the single judging step on bwrap it is never passed."""

from __future__ import annotations

import json
import sys

import pytest

from agents.budget import Budget
from agents.loop import agent_loop, system_prompt, trajectory_start
from agents.policies import model_policy
from agents.workspace import Workspace
from benchmarks.models import Snippet
from benchmarks.selectors import protocol_get
from evaluation import services
from evaluation.item_files import answer_read, workspace_files
from evaluation.judging.step import item_judge
from evaluation.judging.verdict import REPLAY_DISAGREES
from evaluation.llm import ModelCall
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.taskfiles import task_files, task_hidden_files
from sandbox import Environment, Limits
from sandbox.local import LocalBackend, LocalSession
from tests.evaluation.corpus.tasks import entries, task, unguarded_run
from tests.evaluation.openai_server import openai_server
from tests.evaluation.test_sealed import CORPUS

pytestmark = pytest.mark.django_db
ENTRY = next(e for e in entries(CORPUS / "hostile_sealed.yaml") if e.name == "thread-pool-reference")


def _call(number: int, name: str, **arguments) -> dict:
    return {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_the_attack_passes_unguarded():
    passed, output = unguarded_run(task(ENTRY.task).spliced(ENTRY.snippet, ENTRY.code))
    assert passed, output


def test_an_agents_hostile_edit_is_not_passed(release, sandbox, settings, tmp_path):
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    snippet = Snippet.objects.select_related("task").get(
        task__versions=release, task__paper__slug=ENTRY.task, name=ENTRY.snippet
    )
    model = ModelEntry.objects.create(name="sly", display_name="Sly", litellm_model="openai/sly")
    run = EvaluationRun.objects.create(model=model, version=release, mode="agent", litellm_model=model.litellm_model)
    start, masked = workspace_files(
        snippet=snippet,
        files=task_files(snippet.task),
        hidden=task_hidden_files(snippet.task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    script = [
        [_call(0, "edit_file", path=snippet.file_path, old_string=masked.placeholder, new_string=ENTRY.code)],
        [_call(1, "submit")],
    ]

    def responder(prompt, body):
        return {"content": "", "tool_calls": script[sum(1 for m in body["messages"] if m["role"] == "assistant")]}

    budget = Budget(turns=4, tokens=100000, seconds=120, cost=1)
    workspace = Workspace.create(name="item", files=start)
    with openai_server(responder=responder) as server:
        end = agent_loop(
            trajectory=trajectory_start(run=run, snippet=snippet, sample=0, budget=budget),
            policy=model_policy(
                ModelCall(model="openai/sly", api_base=server.base_url, api_key="k", private_addresses=True)
            ),
            system=system_prompt(
                path=snippet.file_path,
                name=snippet.name,
                loc=snippet.loc,
                budget=budget,
                command_seconds=60,
                output_bytes=16384,
            ),
            prompt="the task",
            workspace=workspace,
            session=LocalSession(
                LocalBackend(tmp_path / "cache"),
                Environment(hash="t", backend="local", location=str(tmp_path), python=sys.executable),
            ),
            limits=Limits(wall_seconds=30),
            budget=budget,
        )
    assert end.ended_by == "submitted"
    body, problem = answer_read(final=workspace.read_text(snippet.file_path), masked=masked)
    assert body == ENTRY.code and not problem
    generation = services.generation_record(
        run=run, snippet=snippet, sample=0, prompt="the task", raw_answer=body, code=body
    )
    outcome = item_judge(run=run, snippet=snippet, sample=0, generation=generation, worker="test", ended="submitted")
    assert outcome.status in ("failed", "flagged"), (outcome.status, outcome.detail)
    if outcome.measured_status == "passed":
        assert any(f["kind"] == REPLAY_DISAGREES for f in outcome.findings), outcome.findings
