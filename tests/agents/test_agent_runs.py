"""Agent runs (issue 23): the mode at run start, budgets, the workspace and its answer, and real agent loops driven
through the local OpenAI-compatible server with scripted tool calls (commands on the local backend here; bwrap in
test_agent_sandbox.py)."""

from __future__ import annotations

import contextlib
import json
import sys

import pytest
from django.urls import reverse

from agents.budget import Budget, budget_for_run
from agents.loop import agent_loop, system_prompt, trajectory_start
from agents.models import AgentStep, AgentTrajectory
from agents.policies import model_policy
from agents.workspace import Workspace
from benchmarks.models import Snippet
from benchmarks.selectors import protocol_get
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.item_files import answer_read, masked_split, workspace_files
from evaluation.llm import ModelCall, litellm_load
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.taskfiles import task_files, task_hidden_files
from sandbox import Environment, Limits
from sandbox.local import LocalBackend, LocalSession
from tests.conftest import DEMO_PSET, client_for
from tests.evaluation.openai_server import openai_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


@pytest.fixture
def workspace_dir(settings, tmp_path):
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    return settings.AGENT_WORKSPACE_DIR


def _snippet(version) -> Snippet:
    return Snippet.objects.filter(task__versions=version).select_related("task", "task__paper").order_by("pk").first()


def _local_session(tmp_path) -> LocalSession:
    backend = LocalBackend(tmp_path / "cache")
    return LocalSession(
        backend, Environment(hash="test", backend="local", location=str(tmp_path), python=sys.executable)
    )


def _call(number: int, name: str, **arguments) -> dict:
    return {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


# The mode at run start


def test_an_agent_run_records_its_mode_and_budget_within_the_releases_maximums(version, settings):
    settings.AGENT_BUDGET_MAXIMUMS = {"turns": 30, "tokens": 100000, "seconds": 600, "cost": 2}
    version.agent_budget_max = {"turns": 20}
    version.save()
    reference = ModelEntry.objects.get(name="reference")
    run = services.run_start(model=reference, version=version, mode="agent", budget={"turns": 5}, dispatch=False)
    assert (run.mode, run.agent_budget) == ("agent", {"turns": 5, "tokens": 100000, "seconds": 600.0, "cost": 2.0})
    default = services.run_start(model=reference, version=version, mode="agent", dispatch=False)
    assert default.agent_budget["turns"] == 20, "unset: the release's maximum"
    with pytest.raises(services.EvaluationError, match=r"Turns: at most 20 per item in this release \(asked for 21\)"):
        services.run_start(model=reference, version=version, mode="agent", budget={"turns": 21}, dispatch=False)
    with pytest.raises(services.EvaluationError, match="unknown budget steps"):
        services.run_start(model=reference, version=version, mode="agent", budget={"steps": 1}, dispatch=False)
    single = services.run_start(model=reference, version=version, dispatch=False)
    assert (single.mode, single.agent_budget) == ("single", {})


def test_agent_mode_is_refused_at_start_for_a_model_without_tool_calling(version, maintainer):
    model = ModelEntry.objects.create(name="old-llama", display_name="Old llama", litellm_model="ollama/llama2")
    with pytest.raises(services.EvaluationError, match="cannot call tools as litellm knows it"):
        services.run_start(model=model, version=version, mode="agent", user=maintainer, dispatch=False)
    assert not EvaluationRun.objects.filter(model=model).exists()
    local = ModelEntry.objects.create(
        name="own-server", display_name="Own", litellm_model="openai/mine", api_base="http://127.0.0.1:9/v1"
    )
    started = services.run_start(model=local, version=version, mode="agent", user=maintainer, dispatch=False)
    assert started.mode == "agent"


def test_the_api_and_the_manifest_say_the_mode(version, maintainer):
    api = client_for(maintainer)
    started = api.post(
        "/api/v1/runs/",
        {"model": "reference", "release": version.name, "mode": "agent", "budget": {"turns": 4}},
        format="json",
    )
    assert started.status_code == 201, started.content
    body = started.json()
    assert body["mode"] == "agent" and body["agent_budget"]["turns"] == 4
    refused = api.post(
        "/api/v1/runs/",
        {"model": "reference", "release": version.name, "mode": "agent", "budget": {"turns": 10**6}},
        format="json",
    )
    assert refused.status_code == 400 and "at most" in refused.json()["error"]["details"]["turns"]
    run = EvaluationRun.objects.get(pk=body["id"])
    manifest = json.loads(
        b"".join(client_for(maintainer).get(reverse("run-manifest", args=[run.pk])).streaming_content)
    )
    assert (manifest["run"]["mode"], manifest["run"]["agent_budget"]["turns"]) == ("agent", 4)
    page = client_for(maintainer).get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Agent run" in page and "4 turns" in page


def test_budgets_are_checked_and_default_to_the_maximums(version, settings):
    settings.AGENT_BUDGET_MAXIMUMS = {"turns": 3, "tokens": 10, "seconds": 5, "cost": 1}
    assert budget_for_run(version=version, requested=None) == Budget(3, 10, 5.0, 1.0)
    with pytest.raises(ValueError, match="positive number"):
        budget_for_run(version=version, requested={"cost": 0})


# The workspace and the answer


def test_the_workspace_holds_the_public_package_masked_and_never_a_hidden_file(version):
    snippet = _snippet(version)
    task = snippet.task
    hidden = task_hidden_files(task)
    start, masked = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=hidden,
        protocol=protocol_get(name=version.protocol_id),
        with_paper=True,
    )
    assert task.test_entry_point in hidden and not hidden & set(start)
    assert set(start) == set(task_files(task)) - hidden
    assert start[snippet.file_path].decode() == masked.text
    assert masked.placeholder.lstrip().startswith(f'# TODO: Implement block "{snippet.name}"')
    assert "paper2code" not in "".join(
        data.decode("utf-8", "replace") for path, data in start.items() if path.endswith(".py")
    ), "no marker line in any file"
    assert snippet.reference_code.strip() not in start[snippet.file_path].decode()
    ablation, _ = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=hidden,
        protocol=protocol_get(name=version.protocol_id),
        with_paper=False,
    )
    assert task.paper_path in start and task.paper_path not in ablation


def test_the_answer_is_the_text_between_the_unchanged_lines_around_the_placeholder():
    masked = masked_split(
        'import x\n\ndef f(a):\n    # TODO: Implement block "f"\n'
        "    # Approximately 2 line(s) of code.\n    return b\n",
        name="f",
        loc=2,
        path="m.py",
    )
    assert masked.placeholder == '    # TODO: Implement block "f"\n    # Approximately 2 line(s) of code.\n'
    body = "    b = a + 1\n    b *= 2\n"
    assert answer_read(final=masked.prefix + body + masked.suffix, masked=masked) == (body, "")
    assert answer_read(final=masked.text, masked=masked) == (masked.placeholder, "")
    assert answer_read(final=masked.prefix + masked.suffix, masked=masked) == ("", "")
    above, why = answer_read(final="import y\n" + masked.text[9:], masked=masked)
    assert above is None and "changed above the TODO block" in why
    below, why = answer_read(final=masked.prefix + body + "    return c\n", masked=masked)
    assert below is None and "changed below the TODO block" in why
    assert answer_read(final=None, masked=masked) == (None, "m.py is missing from the workspace at the end")


def test_file_tools_stay_inside_the_workspace(workspace_dir, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    workspace = Workspace.create(name="w", files={"a/b.py": b"x = 1\n"})
    (workspace.root / "link").symlink_to(outside)
    for path in ("../secret.txt", str(outside), "link", "/sandbox/../secret.txt"):
        with pytest.raises(ValueError, match="leaves the workspace|inside the workspace"):
            workspace.read(path)
    with pytest.raises(ValueError):
        workspace.write("link", b"overwritten")
    (workspace.root / "a" / ".b.py.rcb-tmp").symlink_to(outside)  # planted where a write stages its bytes
    workspace.write("a/b.py", b"x = 2\n")
    assert outside.read_text() == "secret" and workspace.read("a/b.py") == b"x = 2\n"
    assert workspace.listing() == ["a/b.py", "link"]


def test_file_tools_refuse_a_chain_of_links_past_path_max(workspace_dir, tmp_path):
    """CVE-2025-4517's chain (a link whose resolution passes PATH_MAX, where realpath stops following): unguarded,
    `escape/secret.txt` opened by the worker reads the file beside the workspace. The file tools never reach it
    (realpath's answer is checked inside the workspace, and no link may remain on it)."""
    workspace = Workspace.create(name="w", files={})
    (workspace.root.parent / "secret.txt").write_text("secret")
    component = "d" * ((4096 - len(str(workspace.root)) - 1) // 17)
    folder = workspace.root
    for step in "abcdefghijklmnop":
        (folder / component).mkdir()
        (folder / step).symlink_to(component)
        folder = folder / component
    link = "/".join("abcdefghijklmnop") + "/" + "l" * 254
    (workspace.root / link).symlink_to("/".join([".."] * 16))
    (workspace.root / "escape").symlink_to(link + "/..")
    assert (workspace.root / "escape" / "secret.txt").read_text() == "secret"  # unguarded
    for path in ("escape/secret.txt", "escape/../secret.txt", link + "/../secret.txt"):
        with pytest.raises(ValueError):
            workspace.read(path)
    with contextlib.suppress(ValueError):  # realpath stopped at an inside folder: written there, if anywhere
        workspace.write("escape/secret.txt", b"overwritten")
    assert (workspace.root.parent / "secret.txt").read_text() == "secret"


# Real loops through the OpenAI-compatible server


def _item_run(version, *, budget: dict) -> tuple[EvaluationRun, Snippet]:
    model = ModelEntry.objects.create(
        name="tooler", display_name="Tooler", litellm_model="openai/tooler", api_base="http://127.0.0.1:9/v1"
    )
    run = EvaluationRun.objects.create(
        model=model,
        version=version,
        mode="agent",
        agent_budget=budget,
        litellm_model=model.litellm_model,
        api_base=model.api_base,
    )
    return run, _snippet(version)


def _loop(run, snippet, server, tmp_path, budget: Budget):
    task = snippet.task
    start, masked = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    workspace = Workspace.create(name="item", files=start)
    trajectory = trajectory_start(run=run, snippet=snippet, sample=0, budget=budget)
    call = ModelCall(
        model="openai/tooler", api_base=server.base_url, api_key="sk-test", private_addresses=True, max_retries=0
    )
    system = system_prompt(
        path=snippet.file_path,
        name=snippet.name,
        loc=snippet.loc,
        budget=budget,
        command_seconds=60,
        output_bytes=16384,
    )
    end = agent_loop(
        trajectory=trajectory,
        policy=model_policy(call),
        system=system,
        prompt="the task",
        workspace=workspace,
        session=_local_session(tmp_path),
        limits=Limits(wall_seconds=30, output_bytes=16384),
        budget=budget,
    )
    return end, workspace, masked, trajectory


def test_a_scripted_model_edits_runs_and_submits_and_every_step_is_stored(version, workspace_dir, tmp_path):
    budget = Budget(turns=10, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    task = snippet.task
    _, masked = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    script = [
        [_call(0, "list_files")],
        [_call(1, "read_file", path=snippet.file_path)],
        [
            _call(
                2, "edit_file", path=snippet.file_path, old_string=masked.placeholder, new_string=snippet.reference_code
            )
        ],
        [_call(3, "run", command="echo hello; python -c 'print(6*7)'; yes | head -c 40000")],
        [_call(4, "submit")],
    ]

    def responder(prompt, body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        assert body["tools"] and {t["function"]["name"] for t in body["tools"]} == {
            "run",
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "submit",
        }
        return {"content": f"turn {turn}", "tool_calls": script[turn]}

    with openai_server(responder=responder) as server:
        end, workspace, masked, trajectory = _loop(run, snippet, server, tmp_path, budget)
        requests = server.chat_requests
    assert end.ended_by == "submitted" and end.usage.turns == 5
    body, problem = answer_read(final=workspace.read_text(snippet.file_path), masked=masked)
    assert (body, problem) == (snippet.reference_code, "")
    steps = list(AgentStep.objects.filter(trajectory=trajectory))
    assert [s.role for s in steps[:4]] == ["system", "user", "assistant", "tool"]
    assert "10 turns" in steps[0].content and "100,000 tokens" in steps[0].content and "$1.00" in steps[0].content
    tool_outputs = {s.tool_name: s.content for s in steps if s.role == "tool"}
    assert snippet.file_path in tool_outputs["list_files"] and task.test_entry_point not in tool_outputs["list_files"]
    assert "TODO: Implement block" in tool_outputs["read_file"]
    assert "hello\n42\n" in tool_outputs["run"] and "exit code 0" in tool_outputs["run"]
    assert "[output cut at 16384 bytes per stream]" in tool_outputs["run"]
    # What is left is said after each turn, and stored with every step.
    notes = [s.content for s in steps if s.role == "user"][1:]
    assert notes[0].startswith("Budget left: 9 turns, ") and notes[-1].startswith("Budget left: 6 turns, ")
    assert [s.budget_left["turns"] for s in steps if s.role == "assistant"] == [9, 8, 7, 6, 5]
    sent = requests[1].body["messages"]  # the model is told what is left, after the tool's output
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[-1]["content"].startswith("Budget left: 9 turns, ") and sent[3]["tool_call_id"] == "call_0"
    trajectory.refresh_from_db()
    assert (trajectory.ended_by, trajectory.turns) == ("submitted", 5)
    assert trajectory.prompt_tokens > 0 and trajectory.completion_tokens == 10  # "turn N": two words a turn


def test_the_turn_budget_ends_an_agent_that_never_submits(version, workspace_dir, tmp_path):
    budget = Budget(turns=3, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    with openai_server(
        responder=lambda prompt, body: {
            "content": "thinking",
            "tool_calls": [_call(len(body["messages"]), "run", command="true")],
        }
    ) as server:
        end, *_ = _loop(run, snippet, server, tmp_path, budget)
        assert len(server.chat_requests) == 3
    assert (end.ended_by, end.usage.turns) == ("turns", 3)


def test_the_token_budget_ends_the_item_before_the_overspending_turns_tools(version, workspace_dir, tmp_path):
    budget = Budget(turns=10, tokens=50, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    with openai_server(
        responder=lambda prompt, body: {
            "content": "word " * 60,
            "tool_calls": [_call(0, "write_file", path="never.txt", content="x")],
        }
    ) as server:
        end, workspace, *_ = _loop(run, snippet, server, tmp_path, budget)
    assert end.ended_by == "tokens" and not (workspace.root / "never.txt").exists()


def test_the_wall_time_budget_kills_a_running_command(version, workspace_dir, tmp_path):
    budget = Budget(turns=10, tokens=100000, seconds=3, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    with openai_server(
        responder=lambda prompt, body: {"content": "", "tool_calls": [_call(0, "run", command="sleep 30")]}
    ) as server:
        end, *_ = _loop(run, snippet, server, tmp_path, budget)
    assert end.ended_by == "seconds" and end.usage.seconds < 10
    output = AgentStep.objects.filter(role="tool").first().content
    assert "killed at its time limit" in output


def test_a_trajectory_begun_by_a_lost_worker_is_resumed_with_its_steps_and_usage_kept(version):
    """Before issue 23 item 5 a lost worker's trajectory was erased (steps deleted, usage zeroed: the model spend of
    the lost attempt was gone); now it is taken up as it stands."""
    run, snippet = _item_run(version, budget=Budget(3, 10, 5, 1).as_dict())
    first = trajectory_start(run=run, snippet=snippet, sample=0, budget=Budget(3, 10, 5, 1))
    AgentStep.objects.create(trajectory=first, index=0, role="system", content="old")
    AgentTrajectory.objects.filter(pk=first.pk).update(turns=2, prompt_tokens=7, cost=0.5)
    again = trajectory_start(run=run, snippet=snippet, sample=0, budget=Budget(3, 10, 5, 1))
    assert again.pk == first.pk and list(again.steps.values_list("content", flat=True)) == ["old"]
    assert (again.turns, again.prompt_tokens, float(again.cost)) == (2, 7, 0.5)


def test_the_run_form_starts_an_agent_run_with_its_budget(version, maintainer, client):
    client.force_login(maintainer)
    page = client.post(
        reverse("run-new", args=["reference"]),
        {"release": version.name, "with_paper": "on", "samples": 1, "mode": "agent", "budget_turns": 7, "repeat": 1},
    )
    assert page.status_code == 302, page.content.decode()[-2000:]
    run = EvaluationRun.objects.get(model__name="reference", mode="agent")
    assert run.agent_budget["turns"] == 7
    # A budget left filled in before switching the form back to single-shot is ignored, not refused (the page
    # hides it in that mode); the API still refuses a budget sent with mode single.
    single = client.post(
        reverse("run-new", args=["reference"]), {"release": version.name, "samples": 1, "budget_turns": 7, "repeat": 1}
    )
    assert single.status_code == 302, single.content.decode()[-2000:]
    assert EvaluationRun.objects.get(model__name="reference", mode="single").agent_budget == {}


def test_a_releases_agent_budget_maximums_are_a_release_setting_pinned_in_its_manifest(media_root, maintainer):
    from benchmarks.services.publishing import version_publish
    from benchmarks.services.release_settings import version_settings_set

    draft = pset_import(root=DEMO_PSET, version_name="2.0.0").version
    with pytest.raises(ValueError, match="unknown agent budget 'steps'"):
        version_settings_set(version=draft, actor=maintainer, agent_budget_max={"steps": 3})
    version_settings_set(version=draft, actor=maintainer, agent_budget_max={"turns": 12, "cost": 0.5})
    release = version_publish(version=draft, actor=maintainer)
    assert release.manifest["settings"]["agent_budget_max"] == {"turns": 12, "cost": 0.5}
    run = services.run_start(
        model=ModelEntry.objects.get(name="reference"), version=release, mode="agent", dispatch=False
    )
    assert (run.agent_budget["turns"], run.agent_budget["cost"]) == (12, 0.5)


def _stored_item(run, snippet, *, content: str):
    from evaluation.models import Outcome

    outcome = Outcome.objects.create(
        run=run,
        snippet=snippet,
        status="failed",
        category="wrong_result",
        detail="the turn budget ran out (2 of 2 turns); 1 of 4 tests passed",
    )
    trajectory = AgentTrajectory.objects.create(
        run=run,
        snippet=snippet,
        budget=Budget(2, 100, 60, 1).as_dict(),
        ended_by="turns",
        turns=2,
        prompt_tokens=40,
        completion_tokens=9,
        cost=None,
        seconds=3.5,
    )
    for index, (role, text) in enumerate([("system", "sys"), ("user", "prompt"), ("assistant", ""), ("tool", content)]):
        AgentStep.objects.create(
            trajectory=trajectory,
            index=index,
            role=role,
            content=text,
            tool_calls=[{"id": "c0", "name": "run", "arguments": '{"command": "ls"}'}] if role == "assistant" else [],
            tool_name="run" if role == "tool" else "",
            budget_left={"turns": 1, "tokens": 51, "seconds": 56.5, "cost": None},
        )
    return outcome


def test_the_item_page_shows_the_transcript_and_downloads_it_only_where_the_item_is_visible(
    media_root, maintainer, author, client
):
    from benchmarks.models import VersionTask
    from benchmarks.services.curation import version_task_set
    from benchmarks.services.publishing import version_publish

    draft = pset_import(root=DEMO_PSET, version_name="held-1.0.0").version
    held = draft.tasks.order_by("paper__slug").first()
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT)
    version = version_publish(version=draft, downloads_inline=True)
    run = EvaluationRun.objects.create(
        model=ModelEntry.objects.get(name="reference"),
        version=version,
        mode="agent",
        agent_budget=Budget(2, 100, 60, 1).as_dict(),
        covers_held_out=True,
        status="completed",
    )
    public = Snippet.objects.filter(task__versions=version).exclude(task=held).order_by("pk").first()
    secret = Snippet.objects.filter(task=held).order_by("pk").first()
    shown = _stored_item(run, public, content="line\n" * 1000)
    hidden = _stored_item(run, secret, content="held-out output")

    page = client.get(reverse("run-item", args=[run.pk, shown.pk])).content.decode()
    assert "The agent's trajectory" in page and "Ended: <strong>turn budget</strong>" in page
    assert "cost unavailable" in page, "an unknown cost is said, never 0"
    assert "5,000 characters (show)" in page, "a long output is folded"
    document = client.get(reverse("run-item-trajectory", args=[run.pk, shown.pk])).json()
    assert (document["ended_by"], document["usage"]["cost"], len(document["steps"])) == ("turns", None, 4)
    assert document["steps"][2]["tool_calls"][0]["name"] == "run"
    assert client.get(reverse("run-item-trajectory", args=[run.pk, hidden.pk])).status_code == 404
    assert client.get(reverse("run-item", args=[run.pk, hidden.pk])).status_code == 404
    client.force_login(maintainer)
    maintainers = client.get(reverse("run-item-trajectory", args=[run.pk, hidden.pk]))
    assert maintainers.status_code == 200 and maintainers.json()["steps"][3]["content"] == "held-out output"


def test_evaluate_takes_the_mode_and_budget(version):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="Turns: at most .* per item in this release"):
        call_command("evaluate", model="reference", version=version.name, mode="agent", budget=["turns=100000"])
    with pytest.raises(CommandError, match="--budget takes NAME=NUMBER"):
        call_command("evaluate", model="reference", version=version.name, mode="agent", budget=["turns=many"])
    assert not EvaluationRun.objects.exists()


def test_a_held_out_item_is_not_sent_to_an_endpoint_no_longer_trusted(media_root, author, celery_inline):
    from agents.tasks import item_agent
    from benchmarks.models import VersionTask
    from benchmarks.services.curation import version_task_set
    from benchmarks.services.publishing import version_publish
    from evaluation.models import Outcome

    draft = pset_import(root=DEMO_PSET, version_name="held-2.0.0").version
    held = draft.tasks.order_by("paper__slug").first()
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT)
    version = version_publish(version=draft, downloads_inline=True)
    with openai_server(responder=lambda prompt, body: {"content": "", "tool_calls": [_call(0, "submit")]}) as server:
        model = ModelEntry.objects.create(
            name="untrusted", display_name="U", litellm_model="openai/u", api_base=server.base_url, owner=author
        )
        run = EvaluationRun.objects.create(
            model=model,
            version=version,
            mode="agent",
            covers_held_out=True,
            litellm_model="openai/u",
            api_base=server.base_url,
            agent_budget=Budget(2, 100, 60, 1).as_dict(),
        )
        snippet = Snippet.objects.filter(task=held).order_by("pk").first()
        item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)
        assert not server.chat_requests
    outcome = Outcome.objects.get(run=run, snippet=snippet)
    assert outcome.status == "error" and "no longer trusted with held-out prompts" in outcome.detail
    assert not AgentTrajectory.objects.filter(run=run).exists()


# An agent cannot crash its item (attack review 1, finding 1)


def _scripted_loop(run, snippet, tmp_path, budget: Budget, turns: list[dict]):
    """The loop with a policy that plays `turns` (assistant messages) in order, the last one repeated."""
    from evaluation.llm import ToolTurn

    task = snippet.task
    start, masked = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    workspace = Workspace.create(name="item", files=start)
    trajectory = trajectory_start(run=run, snippet=snippet, sample=0, budget=budget)

    def policy(messages, seconds_left):
        done = sum(1 for m in messages if m["role"] == "assistant")
        return ToolTurn(
            message={"role": "assistant", **turns[min(done, len(turns) - 1)]},
            prompt_tokens=1,
            completion_tokens=1,
            latency=0.0,
            cost=0.0,
            attempts=1,
        )

    end = agent_loop(
        trajectory=trajectory,
        policy=policy,
        system="system",
        prompt="the task",
        workspace=workspace,
        session=_local_session(tmp_path),
        limits=Limits(wall_seconds=30, output_bytes=16384),
        budget=budget,
    )
    return end, workspace, trajectory


def _raw_call(number: int, name, arguments) -> dict:
    return {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_nul_bytes_undecodable_text_and_malformed_tool_calls_are_errors_the_model_reads(
    version, workspace_dir, tmp_path
):
    """Each of these raised out of the loop (a DataError on NUL in text, UnicodeDecodeError, ValueError on a NUL in
    a path, UnicodeEncodeError on a lone surrogate, TypeError on a null tool name): the item had no outcome and was
    re-delivered forever. Each is now an error the model reads, every step is stored, and the agent goes on."""
    budget = Budget(turns=20, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    turns = [
        {"content": "", "tool_calls": [_call(0, "run", command="printf 'a\\000b'")]},
        {"content": "", "tool_calls": [_call(1, "write_file", path="bin.dat", content="x")]},
        {"content": "", "tool_calls": [_call(2, "run", command="printf 'nul\\000\\377\\376' > bin.dat")]},
        {"content": "", "tool_calls": [_call(3, "read_file", path="bin.dat")]},
        {"content": "", "tool_calls": [_call(4, "edit_file", path="bin.dat", old_string="nul", new_string="x")]},
        {"content": "", "tool_calls": [_call(5, "read_file", path="a\u0000b")]},
        {"content": "", "tool_calls": [_call(6, "write_file", path="s.txt", content="lone \ud800 surrogate")]},
        {"content": "text with a NUL \u0000 and a lone \udc80", "tool_calls": [_call(7, "list_files")]},
        {"content": "", "tool_calls": [_raw_call(8, None, "{}")]},
        {"content": "", "tool_calls": [{"id": 9, "function": "run"}]},
        {"content": "", "tool_calls": "not a list"},
        {"content": "", "tool_calls": [_raw_call(11, "run", {"command": "true"})]},
        {"content": "", "tool_calls": [_call(12, "submit")]},
    ]
    end, _, trajectory = _scripted_loop(run, snippet, tmp_path, budget, turns)
    assert end.ended_by == "submitted" and end.usage.turns == len(turns)
    steps = list(AgentStep.objects.filter(trajectory=trajectory))
    text = "\n".join(s.content for s in steps) + json.dumps([s.tool_calls for s in steps])
    assert "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    tools = [s.content for s in steps if s.role == "tool"]
    assert "a\ufffdb" in tools[0]
    assert "\ufffd" in tools[3] and "error:" in tools[4] and "error:" in tools[5] and "error:" in tools[6]
    assert "text with a NUL \ufffd" in next(s.content for s in steps if s.role == "assistant" and "NUL" in s.content)
    refused = [s.content for s in steps if s.role == "user" and "malformed" in s.content]
    assert len(refused) == 4, [s.content for s in steps if s.role == "user"]


def test_tool_call_arguments_that_are_not_a_json_object_are_refused_at_their_turn(version, workspace_dir, tmp_path):
    """A call kept with arguments that are not a JSON object (a truncated call, a bare string) went back to the
    provider in every later request, and litellm's conversion for anthropic/ and gemini/ fails on it before any
    request: the item ended an unscored model error on a turn the model wrote (issue 33, attack7). Each is now a
    malformed turn the model is told about, kept as text only, so no later request carries it."""
    from agents.loop import messages_rebuilt

    budget = Budget(turns=20, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    turns = [
        {"content": "", "tool_calls": [_raw_call(0, "run", '{"command": "ls')]},
        {"content": "", "tool_calls": [_raw_call(1, "run", '"ls"')]},
        {"content": "", "tool_calls": [_call(2, "list_files"), _raw_call(3, "run", "[1]")]},
        {"content": "", "tool_calls": [_call(4, "submit")]},
    ]
    end, _, trajectory = _scripted_loop(run, snippet, tmp_path, budget, turns)
    assert end.ended_by == "submitted" and end.usage.turns == len(turns)
    steps = list(AgentStep.objects.filter(trajectory=trajectory).order_by("index"))
    refused = [s.content for s in steps if s.role == "user" and "malformed" in s.content]
    assert len(refused) == 3, [s.content for s in steps if s.role == "user"]
    assert "not valid JSON" in refused[0] and "a JSON str" in refused[1] and "a JSON list" in refused[2]
    assert [s.tool_call_id for s in steps if s.role == "tool"] == ["call_4"], "a refused turn runs none of its calls"
    sent = [c["function"]["arguments"] for m in messages_rebuilt(steps) for c in m.get("tool_calls", [])]
    assert sent == ["{}"], "only the submit goes back to the provider"


def test_tool_arguments_nested_too_deeply_are_an_error_the_model_reads(workspace_dir, tmp_path):
    """Unguarded, the parser's RecursionError escaped the tool call (the live twin of the ATIF export's finding)."""
    from agents.tools import tool_call
    from agents.workspace import Workspace

    arguments = '{"command": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(RecursionError):
        json.loads(arguments)
    workspace = Workspace.create(name="deep-args", files={"model.py": b"x = 1\n"})
    result = tool_call(
        name="run",
        arguments=arguments,
        workspace=workspace,
        session=_local_session(tmp_path),
        limits=Limits(wall_seconds=30, output_bytes=16384),
        seconds_left=60,
    )
    assert result.output == "error: arguments are nested too deeply"


def test_an_exception_inside_an_agent_item_ends_it_as_an_error_with_the_reason(version, workspace_dir, monkeypatch):
    """Unguarded, any exception escaping the loop left the item without an outcome (the run never finished)."""
    from agents import tasks
    from evaluation.models import Outcome

    def broken(**kwargs):
        raise RuntimeError("something the agent did")

    monkeypatch.setattr(tasks, "tools_carry", broken)
    run = services.run_start(
        model=ModelEntry.objects.get(name="reference"), version=version, mode="agent", dispatch=False
    )
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippet = _snippet(version)
    tasks.item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)  # the first two steps
    tasks.agent_turn.apply(args=(run.pk, snippet.pk, 0, None, 2), throw=True)  # the reference agent reads its file
    tasks.item_agent.apply(args=(run.pk, snippet.pk, 0, None, 3), throw=True)  # its tools: broken
    outcome = Outcome.objects.get(run=run, snippet=snippet)
    assert outcome.status == "error" and "RuntimeError: something the agent did" in outcome.detail
    assert AgentTrajectory.objects.get(run=run).ended_by == "error"
    assert not any(workspace_dir.iterdir())


def _deep_tree(root, depth: int = 1500) -> None:
    import subprocess

    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import os\nfor _ in range({depth}): os.mkdir('d'); os.chdir('d')\nopen('leaf.txt', 'w').write('x')",
        ],
        cwd=root,
        check=True,
    )


def test_a_deep_folder_tree_neither_crashes_the_tools_nor_outlives_the_workspace(workspace_dir):
    """Unguarded, a 1500-deep tree raised RecursionError in owned_by_sandbox, listing and remove (the workspace
    stayed), and again in Workspace.create at re-delivery: the item was stuck."""
    import subprocess

    try:
        workspace = Workspace.create(name="deep", files={"a.py": b"x = 1\n"})
        _deep_tree(workspace.root)
        workspace.owned_by_sandbox()
        assert "a.py" in workspace.listing()
        workspace.remove()
        assert not workspace.root.exists()
        stale = Workspace.create(name="stale", files={"a.py": b"x = 1\n"})
        _deep_tree(stale.root)
        again = Workspace.create(name="stale", files={"b.py": b"y = 2\n"})  # re-delivery: the stale one goes
        assert again.listing() == ["b.py"]
    finally:  # pytest's own clean-up of tmp_path would recurse into a tree left by a failure
        subprocess.run(["rm", "-rf", str(workspace_dir)], check=False)


def test_tool_outputs_listings_calls_per_turn_and_the_stored_trajectory_are_capped(
    version, workspace_dir, tmp_path, settings
):
    """Unguarded: list_files over many files and read_file of 2 MB went back whole, one turn's calls were
    unlimited (300 MB of steps in one turn), and the stored trajectory had no size bound."""
    settings.AGENT_OUTPUT_BYTES, settings.AGENT_LIST_ENTRIES = 4000, 50
    settings.AGENT_TOOL_CALLS_PER_TURN, settings.AGENT_TRAJECTORY_BYTES = 3, 60_000
    budget = Budget(turns=50, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    turns = [
        {
            "content": "",
            "tool_calls": [
                _call(
                    0,
                    "run",
                    command="mkdir many && cd many && seq 500 | xargs touch; "
                    "head -c 100000 /dev/zero | tr '\\0' x > ../big.txt",
                )
            ],
        },
        {"content": "", "tool_calls": [_call(1, "list_files", path="many")]},
        {"content": "", "tool_calls": [_call(10 + n, "read_file", path="big.txt") for n in range(40)]},
    ]
    end, _, trajectory = _scripted_loop(run, snippet, tmp_path, budget, turns)
    steps = list(AgentStep.objects.filter(trajectory=trajectory))
    tools = [s for s in steps if s.role == "tool"]
    listing = tools[1].content
    assert len(listing.splitlines()) <= 51 and "listing stops at 50 files" in listing
    read = tools[2].content
    assert len(read.encode()) <= 4100 and "[output cut at 4000 bytes" in read
    first_reads = tools[2:42]  # the first turn of 40 reads
    assert [s.content.startswith("not run: at most 3 tool calls per turn") for s in first_reads] == [False] * 3 + [
        True
    ] * 37
    assert end.ended_by == "storage"
    assert sum(len(s.content.encode()) for s in steps) <= 60_000 + 5000


def test_the_without_paper_ablation_gives_no_copy_of_the_paper_in_any_format(version):
    """Unguarded, only task.paper_path was left out: a package with both the .tex and the .md kept the other."""
    snippet = _snippet(version)
    task = snippet.task
    files = {
        **task_files(task),
        "paper2code_paper.tex": b"\\section{x}",
        "paper2code_paper.md": b"# x",
        "paper2code_paper.pdf": b"%PDF",
    }
    start, _ = workspace_files(
        snippet=snippet,
        files=files,
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=version.protocol_id),
        with_paper=False,
    )
    assert not [p for p in start if p.rsplit("/", 1)[-1].startswith("paper2code_paper.")]
    with_paper, _ = workspace_files(
        snippet=snippet,
        files=files,
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=version.protocol_id),
        with_paper=True,
    )
    assert {"paper2code_paper.tex", "paper2code_paper.md"} <= set(with_paper)


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_a_budget_that_is_not_a_finite_number_is_refused_everywhere(version, number):
    """Unguarded, NaN passed every check (every comparison with it is false) and inf was a budget without end."""
    from django.core.exceptions import ValidationError
    from django.core.management import CommandError, call_command

    from benchmarks.validators import agent_budget_max_validate

    with pytest.raises(ValueError, match="positive number"):
        budget_for_run(version=version, requested={"seconds": number})
    with pytest.raises(ValidationError, match="positive number"):
        agent_budget_max_validate({"seconds": number})
    with pytest.raises(CommandError, match="positive number"):
        call_command("evaluate", model="reference", version=version.name, mode="agent", budget=[f"seconds={number}"])
    assert not EvaluationRun.objects.exists()


@pytest.mark.exclusive  # it measures its own time
def test_model_call_retries_never_outlast_the_wall_time_budget(version, workspace_dir, tmp_path):
    """Unguarded, every retry had the remaining time and each back-off slept whatever Retry-After said: a 2 s budget
    against an endpoint answering 429 (Retry-After 3) took about 15 s."""
    import time

    budget = Budget(turns=10, tokens=100000, seconds=2, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    task = snippet.task
    start, _ = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    with openai_server(failures=[429] * 20, retry_after=3) as server:
        call = ModelCall(
            model="openai/tooler", api_base=server.base_url, api_key="sk-test", private_addresses=True, max_retries=5
        )
        litellm_load()  # its first import (14 s on a busy 2-core machine) is not the retries' time
        begun = time.monotonic()
        end = agent_loop(
            trajectory=trajectory_start(run=run, snippet=snippet, sample=0, budget=budget),
            policy=model_policy(call),
            system="system",
            prompt="the task",
            workspace=Workspace.create(name="item", files=start),
            session=_local_session(tmp_path),
            limits=Limits(wall_seconds=30, output_bytes=16384),
            budget=budget,
        )
        took = time.monotonic() - begun
    assert took < 4, took
    assert end.ended_by == "seconds"
    assert "wall-time budget" in AgentStep.objects.filter(role="assistant").last().content


def test_an_agent_budget_of_seconds_stays_well_below_the_brokers_visibility_timeout(version, settings):
    """Unguarded, a release could allow any seconds: an item running past the visibility timeout is redelivered
    while it still runs (and the second delivery deletes the trajectory under the first)."""
    from django.core.exceptions import ValidationError

    from benchmarks.validators import agent_budget_max_validate

    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 1000}
    agent_budget_max_validate({"seconds": 500})
    with pytest.raises(ValidationError, match="above 500 s, half the broker's visibility timeout"):
        agent_budget_max_validate({"seconds": 501})
    version.agent_budget_max = {"seconds": 900}
    version.save()
    with pytest.raises(ValueError, match="above 500 s, half the broker's visibility timeout"):
        budget_for_run(version=version, requested=None)
    assert budget_for_run(version=version, requested={"seconds": 400}).seconds == 400


@pytest.mark.parametrize(
    "command", ["head -c 3000000 /dev/urandom > big.bin", "mkdir m && cd m && seq 300 | xargs touch"]
)
def test_a_workspace_over_its_disk_or_file_limit_ends_the_item(version, workspace_dir, tmp_path, settings, command):
    """Unguarded, nothing bounded a workspace's size (a bind mount of a worker folder; RLIMIT_FSIZE is per file):
    six 15 MB files under a 16 MB limit. The workspace is measured after every command and write."""
    from evaluation.llm import ToolTurn

    settings.AGENT_WORKSPACE_FILES = 200
    budget = Budget(turns=10, tokens=100000, seconds=60, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    task = snippet.task
    start, _ = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=True,
    )
    turns = [
        [_call(0, "run", command=command), _call(1, "write_file", path="never.txt", content="x")],
        [_call(2, "write_file", path="later.txt", content="x")],
    ]

    def policy(messages, seconds_left):
        done = sum(1 for m in messages if m["role"] == "assistant")
        return ToolTurn(
            message={"role": "assistant", "content": "", "tool_calls": turns[min(done, 1)]},
            prompt_tokens=1,
            completion_tokens=1,
            latency=0.0,
            cost=0.0,
            attempts=1,
        )

    workspace = Workspace.create(name="item", files=start)
    end = agent_loop(
        trajectory=trajectory_start(run=run, snippet=snippet, sample=0, budget=budget),
        policy=policy,
        system="system",
        prompt="the task",
        workspace=workspace,
        session=_local_session(tmp_path),
        limits=Limits(wall_seconds=30, output_bytes=16384, disk_bytes=1024 * 1024),
        budget=budget,
    )
    assert end.ended_by == "disk" and end.usage.turns == 1
    tools = [s.content for s in AgentStep.objects.filter(role="tool")]
    assert "over the workspace's limit" in tools[0] and tools[1].startswith("not run")
    assert not (workspace.root / "never.txt").exists()


def test_a_near_copy_of_the_reference_in_any_text_file_is_hidden(media_root, tmp_path):
    """Unguarded, only a .py file with an exact copy was hidden: the reference with CRLF line ends, or in a .txt
    note, stayed in the workspace (an attacker's agent read it, spliced it and passed)."""
    import shutil

    from evaluation.taskfiles import task_hidden_files as hidden_files

    snippet = _snippet(pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version)
    shutil.copytree(DEMO_PSET, tmp_path / "pset")
    task_folder = next(
        p.parent
        for p in (tmp_path / "pset").rglob(snippet.file_path)
        if (p.parent / snippet.task.test_entry_point).exists()
    )
    reference = snippet.reference_code
    (task_folder / "ref_crlf.py").write_bytes(("# kept\n" + reference).replace("\n", "\r\n").encode())
    (task_folder / "notes").mkdir()
    (task_folder / "notes" / "impl.txt").write_text(
        "notes:\n" + "\n".join("  " + line.strip() + "  " for line in reference.splitlines())
    )
    (task_folder / "innocent.txt").write_text("nothing here\n")
    version = pset_import(root=tmp_path / "pset", version_name="2.0.0", publish=True).version
    task = version.tasks.get(paper__slug=snippet.task.paper.slug)
    hidden = hidden_files(task)
    assert {"ref_crlf.py", "notes/impl.txt"} <= hidden and "innocent.txt" not in hidden


def test_a_failed_first_model_call_leaves_the_items_cost_unknown_never_zero(version, workspace_dir, tmp_path, client):
    """The endpoint refuses the first call (a 400, not retried): no call was priced, so the trajectory's cost is
    unknown and every page says "unavailable". Before, the loop kept the Decimal(0) it starts with and the item page
    said "cost $0.00" while the run said "unavailable"."""
    budget = Budget(turns=10, tokens=100000, seconds=120, cost=1)
    run, snippet = _item_run(version, budget=budget.as_dict())
    with openai_server(failures=[400]) as server:
        end, _, _, trajectory = _loop(run, snippet, server, tmp_path, budget)
    trajectory.refresh_from_db()
    assert (end.ended_by, trajectory.turns, trajectory.cost) == ("model_error", 0, None)
    failed = trajectory.steps.get(role="assistant")
    assert failed.content.startswith("[the model call failed") and failed.cost is None

    generation = services.generation_record(
        run=run, snippet=snippet, sample=0, prompt="p", raw_answer="", prompt_tokens=None, completion_tokens=None
    )
    outcome = Outcome.objects.create(run=run, snippet=snippet, status="failed", generation=generation)
    EvaluationRun.objects.filter(pk=run.pk).update(status="completed")
    page = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()
    head = page.split('id="trajectory-heading"')[1].split("</p>")[0]
    assert "cost unavailable" in head and "$0.00" not in head
    assert "· cost unavailable" in page.split('class="step step-assistant"')[1].split("</li>")[0]
