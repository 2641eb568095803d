"""Agent runs on bwrap and docker: the calibration agents through a real Celery worker score 100% and 0%, and an
agent's attacks from its commands are contained, the item scored only on its answer (issue 23)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from agents.budget import Budget
from agents.loop import agent_loop, trajectory_start
from agents.models import AgentStep, AgentTrajectory
from agents.workspace import Workspace
from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.llm import ToolTurn
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from sandbox import Environment, Limits, docker_agent
from sandbox.docker_agent import COPY_SECONDS
from sandbox.docker_engine import WORKER_LABEL
from tests.conftest import DEMO_PSET, client_for, demo_papers, polled, sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS

MB = 1024 * 1024
LIMITS = Limits(
    wall_seconds=20, memory_bytes=512 * MB, processes=64, cpus=1.0, output_bytes=64 * 1024, disk_bytes=64 * MB
)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
# It runs beside other tests on both backends: it looks only at its worker's own cache, and on docker at the agent
# containers of its worker's processes (it ran alone once, as it looked at every agent container of the engine: 39 s
# on docker, with the other xdist worker idle).
@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_calibration_agents_score_100_and_0_through_a_worker(
    backend, media_root, celery_worker_factory, sandbox_cache, maintainer, tmp_path
):
    """On bwrap the calibration agents take every item of the demo; on docker, what differs is the backend, not the
    items: one paper of the demo, topk-attention-pool (11 items, with requirements to install)."""
    sandbox_backend_or_missing(backend, sandbox_cache)
    root = DEMO_PSET if backend == "bwrap" else demo_papers(tmp_path, "topk-attention-pool")
    items = 33 if backend == "bwrap" else 11
    demo = pset_import(root=root, version_name="agents-1.0.0", publish=True).version
    worker = celery_worker_factory(queues="llm,sandbox", SANDBOX_BACKEND=backend)  # turns on llm, tools on sandbox
    runs = {}
    for name in ("reference", "placeholder"):
        run = services.run_start(
            model=ModelEntry.objects.get(name=name), version=demo, mode="agent", budget={"turns": 6}
        )
        polled(
            lambda run=run: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=1200,
            worker=worker,
            what=f"the {name} agent run to complete",
        )
        runs[name] = run
    full = RunScore.objects.get(run=runs["reference"], paper=None, split="")
    assert (full.items, full.passed, full.errors, full.flagged, full.scaled_pass_rate) == (items, items, 0, 0, 100.0)
    zero = RunScore.objects.get(run=runs["placeholder"], paper=None, split="")
    assert (zero.items, zero.passed, zero.failed, zero.errors, zero.scaled_pass_rate) == (items, 0, items, 0, 0.0)
    assert set(Outcome.objects.filter(run__in=runs.values()).values_list("sandbox_backend", flat=True)) == {backend}
    assert all(o.detail.startswith("the agent submitted") for o in Outcome.objects.filter(run__in=runs.values()))
    # Every step was stored: the reference agent read, edited, ran one command (in the sandbox) and submitted.
    reference = AgentTrajectory.objects.filter(run=runs["reference"])
    assert reference.count() == items and set(reference.values_list("ended_by", "turns")) == {("submitted", 4)}
    commands = AgentStep.objects.filter(trajectory__run=runs["reference"], role="tool", tool_name="run")
    assert commands.count() == items and all("parsed" in s.content and "exit code 0" in s.content for s in commands)
    assert set(AgentTrajectory.objects.filter(run=runs["placeholder"]).values_list("turns", flat=True)) == {1}
    # The item page shows the transcript, and the trajectory downloads as JSON.
    outcome = Outcome.objects.filter(run=runs["reference"]).first()
    client = client_for(maintainer)
    page = client.get(reverse("run-item", args=[outcome.run_id, outcome.pk])).content.decode()
    assert "The agent's trajectory" in page and "edit_file" in page and "Ended: <strong>submitted" in page
    document = client.get(reverse("run-item-trajectory", args=[outcome.run_id, outcome.pk])).json()
    assert document["format"] == "rcb-agent-trajectory/1" and document["ended_by"] == "submitted"
    assert [s["role"] for s in document["steps"]][:4] == ["system", "user", "assistant", "tool"]
    assert not list(Path(sandbox_cache, "agent-workspaces").iterdir()), "workspaces are removed after their item"
    if backend == "docker":
        assert not _agent_containers(of=worker), "each item's container is removed when its item ends"


def _agent_containers(*, of) -> list[str]:
    """The agent containers of the Celery worker `of` (a live one): those whose worker label names a process of its
    process group, its main process or its pool's, so that another test's agents running meanwhile are not counted."""
    import docker

    client = docker.from_env()
    try:
        containers = client.containers.list(all=True, filters={"label": "rcb.agent=1"})
        return [c.id for c in containers if _in_group(c.labels.get(WORKER_LABEL, ""), of.process.pid)]
    finally:
        client.close()


def _in_group(label: str, group: int) -> bool:
    host, _, pid = label.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        return os.getpgid(int(pid)) == group
    except ProcessLookupError:
        return False


# Attacks from an agent's commands, on bwrap and docker. Each is a scripted agent whose tool calls run through the
# real loop, workspace and session; each first runs its attack unguarded (`_unguarded`: the command as a plain
# process of the worker, in the workspace) and shows it succeeds there, or the docstring says why it would.


@pytest.fixture(scope="module", params=ISOLATING_BACKENDS)
def agent_session(request, sandbox_cache):
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    backend.forkserver = False
    environment = backend.environment_build(env_hash=hashlib.sha256(b"").hexdigest(), requirements="")
    session = backend.session_open(environment)
    yield session
    session.close()


@pytest.fixture
def item(media_root, settings, tmp_path):
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    run = EvaluationRun.objects.create(model=ModelEntry.objects.get(name="reference"), version=version, mode="agent")
    snippet = Snippet.objects.filter(task__versions=version).select_related("task").order_by("pk").first()
    return run, snippet


def _commands(*commands: str):
    """A policy running `commands` one per turn, then submitting."""

    def turn(messages, seconds_left):
        done = sum(1 for m in messages if m["role"] == "assistant")
        name, args = ("run", {"command": commands[done]}) if done < len(commands) else ("submit", {})
        return ToolTurn(
            message={
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"c{done}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            },
            prompt_tokens=1,
            completion_tokens=1,
            latency=0.0,
            cost=0.0,
            attempts=1,
        )

    return turn


def _unguarded(command: str, cwd: Path, seconds: float = 20) -> str:
    """The attack with no guard: the command as a plain process of the worker (its user, environment and network)."""
    proc = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=seconds)
    return proc.stdout + proc.stderr


def _stdout(output: str) -> str:
    return output.split("[stdout]\n", 1)[1].split("\n[stderr]", 1)[0]


def _agent(
    item, session, *commands: str, files: dict[str, bytes] | None = None, sample: int = 0, limits: Limits = LIMITS
) -> tuple[list[str], Workspace]:
    run, snippet = item
    budget = Budget(turns=len(commands) + 2, tokens=10**6, seconds=120, cost=1)
    workspace = Workspace.create(name="attack", files=files or {"model.py": b"x = 1\n"})
    trajectory = trajectory_start(run=run, snippet=snippet, sample=sample, budget=budget)
    try:
        end = agent_loop(
            trajectory=trajectory,
            policy=_commands(*commands),
            system="s",
            prompt="p",
            workspace=workspace,
            session=session,
            limits=limits,
            budget=budget,
        )
    except BaseException:
        # An attack shown to work unguarded may end the loop with an error: its docker container goes, as an item's
        # would with its task (a container left behind fails the engine-wide checks of later tests).
        session.workspace_close(workspace=workspace.root)
        raise
    assert end.ended_by == "submitted"
    outputs = list(
        AgentStep.objects.filter(trajectory=trajectory, role="tool", tool_name="run").values_list("content", flat=True)
    )
    return outputs, workspace


@pytest.mark.django_db
def test_an_agent_cannot_read_the_hidden_test_by_any_absolute_path(item, agent_session):
    """Unguarded (a command run on the worker as the worker's user) `cat` of the test entry point in the checkout or
    of its blob in the worker's cache prints the hidden tests. In the sandbox only the environment, the system and the
    workspace are there, so neither path exists, and the workspace never holds the hidden file."""
    _, snippet = item
    task = snippet.task
    blob = (
        Path(settings.SANDBOX_CACHE_DIR)
        / "blobs"
        / task.files[task.test_entry_point][:2]
        / task.files[task.test_entry_point]
    )
    checkout = DEMO_PSET / task.paper.slug / task.test_entry_point
    assert checkout.exists(), "the hidden file is on this host: the attack has something to find"
    outputs, _ = _agent(
        item,
        agent_session,
        f"cat {checkout}",
        f"cat {blob}",
        f"find / -name '{Path(task.test_entry_point).name}' -not -path '/proc/*' 2>/dev/null; echo end",
    )
    assert "No such file" in outputs[0] and "No such file" in outputs[1]
    assert outputs[2].split("[stdout]\n")[1].split("\n[stderr]")[0].strip() == "end"
    hidden_text = checkout.read_text()
    assert all(hidden_text[:200] not in output for output in outputs)


@pytest.mark.django_db
def test_an_agent_cannot_reach_the_network_or_the_workers_redis(item, agent_session, tcp_open):
    """Unguarded, a command on the worker connects to Redis at 127.0.0.1:6379 (the broker: it could queue or drop
    any task) and answers PONG. bwrap's network namespace and docker's `none`
    network have only their own loopback, with nothing listening."""
    if not tcp_open("127.0.0.1", 6379):
        pytest.skip("no Redis on this host's loopback: the attack would have nothing to reach")
    probe = (
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', 6379), timeout=3); "
        "s.sendall(b'PING\\r\\n'); print('GOT', s.recv(64))\"; "
        "python3 -c \"import socket; socket.create_connection(('93.184.216.34', 80), timeout=3); print('OUT')\""
    )
    outputs, _ = _agent(item, agent_session, probe)
    assert "GOT" not in outputs[0] and "OUT" not in outputs[0]
    assert "Connection refused" in outputs[0] and "Network is unreachable" in outputs[0]


@pytest.mark.django_db
def test_a_process_left_running_dies_with_its_command(item, agent_session):
    """Unguarded, `(sleep 2; touch late) &` outlives its shell and writes into the workspace later (between turns,
    where no check expects it). bwrap's pid namespace ends with its command's shell; docker kills every process of
    the sandbox user at the command's end."""
    outputs, workspace = _agent(
        item, agent_session, "(sleep 2; touch late) > /dev/null 2>&1 & echo started", "sleep 4; ls"
    )
    assert "started" in outputs[0] and "late" not in outputs[1]
    assert not (workspace.root / "late").exists()


@pytest.mark.django_db
def test_an_agent_writes_nowhere_but_its_workspace(item, agent_session, tmp_path):
    """Unguarded, a command writes wherever the worker's user may: /tmp (seen by the next item or the scoring run),
    the environment, the host. In the sandbox /tmp is empty at each command (bwrap: a fresh tmpfs; docker: emptied
    at the command's end), / and the environment are read-only, and the file tools refuse a symbolic link out of
    the workspace (os.path.realpath is checked before each use; docker does not even copy such a link back)."""
    marker = f"planted-{tmp_path.name}"
    venv = str(Path(agent_session.environment.python).parent.parent)  # the venv, or the image's /opt/env
    outputs, workspace = _agent(
        item,
        agent_session,
        f"echo x > /tmp/{marker}; echo x > /{marker}; echo x > {venv}/{marker}; echo x > ../{marker}; "
        f"ln -s /etc/passwd passwd-link; echo done",
        f"ls /tmp; cat /tmp/{marker}",
    )
    assert "done" in outputs[0] and ("Read-only file system" in outputs[0] or "Permission denied" in outputs[0])
    assert marker not in outputs[1].split("[stderr]")[0], "a later command does not see the planted file"
    for path in (Path("/tmp") / marker, Path("/") / marker, Path(venv) / marker, workspace.root.parent / marker):
        assert not path.exists(), path
    if (workspace.root / "passwd-link").is_symlink():
        with pytest.raises(ValueError, match="leaves the workspace"):
            workspace.read("passwd-link")
    else:
        assert "not kept in the workspace" in outputs[0] and "passwd-link" in outputs[0]


@pytest.mark.django_db
def test_the_item_is_scored_only_on_its_answer_whatever_else_the_agent_planted(
    media_root, sandbox_cache, settings, tmp_path, celery_inline
):
    """An agent that writes a passing test under the hidden test's name, breaks the package's other files and plants
    a sitecustomize, then submits the placeholder: unguarded (the workspace tested as it stands) its own test runs
    and passes. Scoring takes only the TODO region's text into the original files in a fresh sandbox: it fails on
    the task's real tests. A second agent changes a line above the block: no answer, failed, with the reason."""
    from agents.tasks import item_agent
    from evaluation import executor

    sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.SANDBOX_BACKEND, settings.SANDBOX_CACHE_DIR = "bwrap", sandbox_cache
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    executor.sessions_close()
    executor.backend_use(None)
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    snippet = Snippet.objects.filter(task__versions=version).select_related("task").order_by("pk").first()
    task = snippet.task
    fake_test = (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n"
    )
    others = [p for p in task.files if p.endswith(".py") and p not in (snippet.file_path, task.test_entry_point)]

    def script(prompt, body):
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        calls = [
            ("write_file", {"path": task.test_entry_point, "content": fake_test}),
            ("write_file", {"path": "sitecustomize.py", "content": "import os; os._exit(0)\n"}),
            *[("write_file", {"path": p, "content": "raise SystemExit(0)\n"}) for p in others],
            ("run", {"command": f"python {task.test_entry_point} && echo OWN-TEST-PASSED"}),
            ("submit", {}),
        ]
        name, args = calls[min(done, len(calls) - 1)]
        return {
            "content": "",
            "tool_calls": [
                {"id": f"c{done}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }

    from tests.evaluation.openai_server import openai_server

    try:
        with openai_server(responder=script) as server:
            model = services.model_register(
                name="planter",
                display_name="Planter",
                litellm_model="openai/planter",
                api_base=server.base_url,
                api_key="sk-test",
            )
            run = services.run_start(model=model, version=version, mode="agent", dispatch=False)
            item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)
        outcome = Outcome.objects.get(run=run, snippet=snippet)
        steps = AgentStep.objects.filter(trajectory__run=run, role="tool", tool_name="run")
        assert "OWN-TEST-PASSED" in steps.get().content, "in its workspace the planted test passed"
        assert outcome.status == "failed" and outcome.detail.startswith("the agent submitted;"), outcome.detail
        assert outcome.sandbox_backend == "bwrap" and outcome.tests and not all(t["passed"] for t in outcome.tests)
        assert outcome.generation.extracted_code.lstrip().startswith("# TODO: Implement block")

        def edits_above(prompt, body):
            done = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if done == 0:
                return {
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "e",
                            "type": "function",
                            "function": {
                                "name": "write_file",
                                "arguments": json.dumps({"path": snippet.file_path, "content": "x = 1\n"}),
                            },
                        }
                    ],
                }
            return {
                "content": "",
                "tool_calls": [{"id": "s", "type": "function", "function": {"name": "submit", "arguments": "{}"}}],
            }

        with openai_server(responder=edits_above) as server:
            model.api_base = server.base_url
            model.save()
            second = services.run_start(model=model, version=version, mode="agent", dispatch=False)
            item_agent.apply(args=(second.pk, snippet.pk, 0), throw=True)
        failed = Outcome.objects.get(run=second, snippet=snippet)
        assert (failed.status, failed.category) == ("failed", "wrong_result")
        assert "no answer:" in failed.detail and "changed above the TODO block" in failed.detail

        # The turn budget ends an agent that never submits; its workspace as it stands is scored (here it passes).
        def writes_then_dawdles(prompt, body):
            done = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if done == 0:
                call = ("read_file", {"path": snippet.file_path})
            elif done == 1:
                text = next(m["content"] for m in body["messages"] if m["role"] == "tool")
                start = text.index(f'# TODO: Implement block "{snippet.name}"')
                start = text.rfind("\n", 0, start) + 1
                end = text.index("line(s) of code.", start) + len("line(s) of code.\n")
                call = (
                    "edit_file",
                    {"path": snippet.file_path, "old_string": text[start:end], "new_string": snippet.reference_code},
                )
            else:
                call = ("run", {"command": "sleep 1000 & echo still working"})
            return {
                "content": "",
                "tool_calls": [
                    {
                        "id": f"d{done}",
                        "type": "function",
                        "function": {"name": call[0], "arguments": json.dumps(call[1])},
                    }
                ],
            }

        with openai_server(responder=writes_then_dawdles) as server:
            model.api_base = server.base_url
            model.save()
            third = services.run_start(model=model, version=version, mode="agent", budget={"turns": 3}, dispatch=False)
            item_agent.apply(args=(third.pk, snippet.pk, 0), throw=True)
        budgeted = Outcome.objects.get(run=third, snippet=snippet)
        assert budgeted.status == "passed", budgeted.detail
        assert budgeted.detail.startswith("the turn budget ran out (3 of 3 turns)")
        assert AgentTrajectory.objects.get(run=third).ended_by == "turns"
    finally:
        executor.sessions_close()
        executor.backend_use(None)


@pytest.mark.django_db
def test_a_process_that_escapes_its_group_or_outlives_its_deadline_is_killed(item, agent_session, settings, tmp_path):
    """Unguarded, a `setsid` child and a double fork leave the command's process group (killing the group misses
    them) and write later. In the sandbox every process of the command dies when it ends or at its deadline: the
    first command's escapees would write 2 s after it ended, the second's 2 s after its deadline (past the kill's
    own latency, an engine call under load), and the third command, within its limit, looks after both."""

    def escape(seconds: int) -> str:
        return (
            f"setsid sh -c 'sleep {seconds}; touch late-setsid' >/dev/null 2>&1 & "
            f"( (sleep {seconds}; touch late-fork) & ) >/dev/null"
        )

    _unguarded(escape(2), tmp_path)
    time.sleep(3)
    assert (tmp_path / "late-setsid").exists() and (tmp_path / "late-fork").exists(), "unguarded, both survive"
    settings.AGENT_COMMAND_SECONDS = 4
    outputs, workspace = _agent(
        item, agent_session, f"{escape(2)}; echo started", f"{escape(6)}; sleep 60", "sleep 3; ls; echo looked"
    )
    assert "started" in outputs[0] and "killed at its time limit of 4 s" in outputs[1]
    assert _stdout(outputs[2]).split() == ["model.py", "looked"]
    assert not list(workspace.root.glob("late-*"))


@pytest.mark.django_db
def test_processes_memory_and_output_are_capped(item, agent_session, tmp_path):
    """Unguarded, a command starts as many processes as it likes (here 100), holds 700 MB and prints 4 MB. The
    sandbox caps processes (64), memory (512 MB) and the output the model reads (AGENT_OUTPUT_BYTES, the cut said);
    a real fork bomb ends with its command and the next command works."""
    spawn = "for i in $(seq 100); do sleep 3 & echo $i > started; done; wait; echo all 100 started"
    hog = "python3 -c \"b = bytearray(700 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('HELD')\""
    flood = "head -c 4000000 /dev/zero | tr '\\0' a"
    assert "all 100 started" in _unguarded(spawn, tmp_path) and "HELD" in _unguarded(hog, tmp_path)
    assert len(_unguarded(flood, tmp_path)) == 4_000_000
    outputs, _ = _agent(item, agent_session, spawn, "sleep 3; cat started", hog, flood, ":(){ :|:& };:", "echo alive")
    started = _stdout(outputs[1]).strip()
    assert "all 100 started" not in outputs[0] and started.isdigit() and int(started) < 64, outputs[:2]
    outputs = outputs[1:]
    assert "HELD" not in outputs[1] and ("out of memory" in outputs[1] or "MemoryError" in outputs[1]), outputs[1]
    cap = settings.AGENT_OUTPUT_BYTES
    assert f"[output cut at {cap} bytes per stream]" in outputs[2] and len(outputs[2]) < 2 * cap + 1000
    assert "alive" in _stdout(outputs[4])


@pytest.mark.exclusive  # its end step waits, on a deadline, for docker-init to reap the 64 killed sleepers
@pytest.mark.django_db
def test_a_command_holding_every_process_slot_past_its_deadline_keeps_its_workspace(
    item, agent_session, tmp_path, settings
):
    """A command that fills the process cap with sleepers and is killed at its time limit: what it wrote stays in the
    workspace. On docker the killed hold their slots until docker-init reaps them; an end step that went on before
    that could not fork and came back with an empty archive, and the agent lost its workspace."""
    # The shell, turned into the last sleeper by exec, and its sleepers: the release's process cap exactly.
    fill = f"echo kept > kept; i=1; while [ $i -lt {LIMITS.processes} ]; do sleep 99 & i=$((i+1)); done; exec sleep 99"
    settings.AGENT_COMMAND_SECONDS = 3
    outputs, workspace = _agent(item, agent_session, fill, "cat kept; echo alive")
    assert "killed at its time limit of 3 s" in outputs[0] and "not copied back" not in outputs[0], outputs[0]
    assert _stdout(outputs[1]).split() == ["kept", "alive"], outputs[1]
    assert (workspace.root / "kept").read_text() == "kept\n"


# A process the command leaves behind that stops (SIGSTOP) and traces (PTRACE_ATTACH) every process that appears
# after it, as fast as it can list /proc; it writes its heartbeat into the workspace.
STOPPER = """import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
before = set(os.listdir("/proc"))
open("/sandbox/armed", "w").close()
beat = 0
while True:
    for name in os.listdir("/proc"):
        if name.isdigit() and name not in before:
            try:
                os.kill(int(name), signal.SIGSTOP)
            except OSError:
                pass
            libc.ptrace(16, int(name), 0, 0)
    beat += 1
    if beat % 200 == 0:
        with open("/sandbox/beat", "w") as f:
            f.write(str(beat))
"""
# The command starts no process after it (it would be stopped too): the wait is the shell's builtins.
LEAVE_STOPPER = (
    f"echo kept > kept; cat > /tmp/stopper.py <<'EOF'\n{STOPPER}EOF\n"
    "setsid python3 /tmp/stopper.py >/dev/null 2>&1 & while [ ! -e armed ]; do :; done; echo armed"
)
BEATING = 'a=$(cat beat); sleep 1; b=$(cat beat); [ "$a" = "$b" ] && echo still || echo beating'


@pytest.mark.django_db
def test_a_process_left_behind_cannot_stop_or_trace_the_end_step(item, agent_session, monkeypatch, settings):
    """A command leaves a process that stops and traces every process started after it. Unguarded (docker's end
    step as the command's own uid, as it was), it catches the end step before its kill: the end step hangs to the
    deadline, the container is removed and the command's workspace is lost. The end step is born root: the process
    can neither stop nor trace it, it is killed, and the workspace comes back. On bwrap the command's pid namespace
    ends with it."""
    settings.AGENT_COMMAND_SECONDS = 4
    if agent_session.backend.name == "docker":
        with monkeypatch.context() as unguarded:
            unguarded.setattr(docker_agent, "COPY_SECONDS", 2.0)
            # The end step's own `docker exec` took milliseconds between its switch to the command's uid and its
            # kill, which the stopper used; a fork from the command server takes well under one, so the unguarded
            # end step waits that moment first (its `sleep` is a new process of the command's uid, as the exec was).
            unguarded.setattr(docker_agent, "END", "sleep 0.5; kill -9 -1; " + docker_agent.END_REST)
            unguarded.setattr(docker_agent, "END_USER", docker_agent.SANDBOX_USER)
            outputs, _ = _agent(item, agent_session, LEAVE_STOPPER, "ls")
        assert "not copied back" in outputs[0] and "4 s for the command, 2 s for the copy" in outputs[0], outputs[0]
        assert "kept" not in _stdout(outputs[1]), outputs[1]
    caps = "grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status; python3 -c 'import os; os.setresuid(0, 0, 0)' 2>&1"
    outputs, workspace = _agent(item, agent_session, LEAVE_STOPPER, BEATING, "cat kept", caps, sample=1)
    assert "armed" in _stdout(outputs[0]) and "not copied back" not in outputs[0], outputs[0]
    assert _stdout(outputs[1]).split() == ["still"], outputs[1]
    assert _stdout(outputs[2]).split() == ["kept"], outputs[2]
    # The container's SETUID and SETGID (for the end step's switch) reach no command.
    assert re.findall(r"^Cap(?:Inh|Prm|Eff|Amb):\s*(\w+)", _stdout(outputs[3]), re.M) == ["0" * 16] * 4, outputs[3]
    assert "PermissionError" in outputs[3], outputs[3]
    assert (workspace.root / "kept").read_text() == "kept\n"


# A process the command leaves behind that, until it is killed, tries to take the copy-back pipe (fd 9) of the
# command's grandparent (bwrap's end step, which holds it from the start) by pidfd_getfd, through /proc/PID/fd and by
# ptrace (PTRACE_SEIZE: no stop; a tracer writes the tracee's memory); with the pipe it writes a copy-back of its own
# making, a workspace of one file.
TAKER = """import ctypes, io, os, sys, tarfile
libc = ctypes.CDLL(None, use_errno=True)
holder, reported = int(sys.argv[1]), False
while True:
    took, fd = [], -1
    try:
        pidfd = os.pidfd_open(holder)
        fd = libc.syscall(438, pidfd, 9, 0)
        os.close(pidfd)
        if fd >= 0:
            took.append("pidfd_getfd")
    except OSError:
        pass
    try:  # the pipe is root's (the worker made it): its link is read, and reopened only where allowed
        if os.readlink(f"/proc/{holder}/fd/9").startswith("pipe:"):
            took.append("proc-fd")
        fd = os.open(f"/proc/{holder}/fd/9", os.O_WRONLY) if fd < 0 else fd
    except OSError:
        pass
    if libc.ptrace(0x4206, holder, None, None) == 0:
        took.append("ptrace")
    if fd >= 0:
        forged, data = io.BytesIO(), b"forged\\n"
        with tarfile.open(fileobj=forged, mode="w") as tar:
            info = tarfile.TarInfo("./forged")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        os.write(fd, b"rcb-copy kept\\n" + forged.getvalue())
    if not reported:
        with open("/tmp/took.part", "w") as f:
            f.write(" ".join(took) or "nothing")
        os.rename("/tmp/took.part", "/tmp/took")
        reported = True
    if fd >= 0:
        break
"""
LEAVE_TAKER = (
    f"echo kept > kept; cat > /tmp/taker.py <<'EOF'\n{TAKER}EOF\n"
    "holder=$(awk '/^PPid/ {print $2}' /proc/$PPID/status); "
    "setsid python3 /tmp/taker.py $holder >/dev/null 2>&1 & "
    "while [ ! -e /tmp/took ]; do sleep 0.05; done; echo took: $(cat /tmp/took)"
)


@pytest.mark.django_db
def test_a_process_left_behind_cannot_take_the_copy_back_pipe(item, agent_session, monkeypatch):
    """On bwrap the end step holds the copy-back pipe from the command's start. Unguarded (the end step as the
    command's own uid, as it was), a process the command leaves takes the pipe by pidfd_getfd or /proc/PID/fd,
    traces the end step, and writes a copy-back of its own: the workspace becomes what it forged. The end step is
    root until every process of the command is dead (it takes the command's uid only for its tar): the process gets
    the pipe by no route, is killed, and the workspace is the command's."""
    if agent_session.backend.name != "bwrap":
        pytest.skip("bwrap's end step (docker's is born root: test_a_process_left_behind_cannot_stop_or_trace...)")
    from sandbox import bwrap

    with monkeypatch.context() as unguarded:
        unguarded.setattr(bwrap, "END_STEP_ROOT", False)
        outputs, workspace = _agent(item, agent_session, LEAVE_TAKER)
    assert {"pidfd_getfd", "proc-fd", "ptrace"} <= set(_stdout(outputs[0]).split()), outputs[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["forged"], outputs[0]
    outputs, workspace = _agent(item, agent_session, LEAVE_TAKER, "ls; grep ^Uid /proc/self/status", sample=1)
    assert _stdout(outputs[0]).split() == ["took:", "nothing"], outputs[0]
    # The command's real, effective, saved and file uids are all the sandbox user's: it cannot become root again.
    assert _stdout(outputs[1]).split() == ["kept", "model.py", "Uid:", *["65534"] * 4], outputs[1]
    assert (workspace.root / "kept").read_text() == "kept\n"


@pytest.mark.django_db
def test_no_variable_of_the_worker_reaches_a_command(item, agent_session, tmp_path, monkeypatch):
    """Unguarded, `env` prints the worker's variables (the database URL, keys). A command sees only the sandbox's."""
    monkeypatch.setenv("RCB_PROBE_SECRET", "s3cret-probe")
    assert "s3cret-probe" in _unguarded("env", tmp_path)
    outputs, _ = _agent(item, agent_session, "env")
    names = {line.split("=", 1)[0] for line in _stdout(outputs[0]).splitlines()}
    assert "PATH" in names and "s3cret-probe" not in outputs[0]
    assert not names & {"RCB_PROBE_SECRET", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CELERY_BROKER_URL"}


@pytest.mark.django_db
def test_a_command_reaches_nothing_of_the_worker_by_dotdot_absolute_path_or_link(item, agent_session, settings):
    """Unguarded, `cat ../secret`, its absolute path and a link to it read a file beside the workspace. In the
    sandbox none of them exist; a link left in the workspace is never followed by the worker's file tools."""
    secret = Path(settings.AGENT_WORKSPACE_DIR) / "secret"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("worker-only\n")
    probe = f"cat ../secret; cat {secret}; ln -s {secret} link; cat link; echo end"
    scratch = secret.parent / "scratch"
    scratch.mkdir()
    assert _unguarded(probe, scratch).count("worker-only") == 3
    outputs, workspace = _agent(item, agent_session, probe)
    assert "worker-only" not in outputs[0] and "end" in outputs[0]
    if (workspace.root / "link").is_symlink():
        with pytest.raises(ValueError, match="leaves the workspace"):
            workspace.read("link")


@pytest.mark.django_db
def test_copies_back_only_plain_files_and_links_inside(item, agent_session, tmp_path):
    """The workspace comes back from the sandbox (docker's container, bwrap's tmpfs) through Python's `data` tar
    filter. Unguarded (the tar unpacked as it comes, as root), a setuid file, a FIFO, a link out of the workspace and
    a `..` name would land on the worker's disk; filtered, the file keeps no setuid or group/other write bit, the
    rest is dropped and said. A device node cannot even be made (no capabilities)."""
    outputs, workspace = _agent(
        item,
        agent_session,
        "echo hi > f; chmod 6777 f; mkfifo pipe; ln -s /etc/shadow out; ln -s ../../x up; ln -s f in; "
        "mknod dev c 1 3 || echo no-mknod",
    )
    assert "no-mknod" in outputs[0] and "not kept in the workspace" in outputs[0]
    mode = (workspace.root / "f").stat().st_mode
    assert not mode & 0o7000 and not mode & 0o022, oct(mode)
    assert sorted(p.name for p in workspace.root.iterdir()) == ["f", "in", "model.py"]
    assert (workspace.root / "f").stat().st_uid == os.geteuid()


def _seconds(output: str) -> float:
    """The whole call's time the tool output states ("[exit code 0, 6.6 s]")."""
    return float(re.match(r"\[[^\]]*, ([0-9.]+) s\]", output).group(1))  # type: ignore[union-attr]


MANY = (
    "mkdir m && python3 -c \"import time\nt = time.monotonic()\nfor i in range(20000): open('m/f%05d' % i, 'w').close()"
    "\nprint('made in %.1f s' % (time.monotonic() - t))\""
)


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_copy_back_of_many_files_is_refused_at_once(item, agent_session, settings):
    """Unguarded (the attack-review script, 100k empty files): the command reported 6.6 s, the call took 109 s and
    every file landed on the worker's disk, packed again at each later command. Here, with no entry cap, 20k files
    all land on the worker's disk and the copy costs seconds the command's own time does not show. Guarded (a cap
    of 5000 entries, as AGENT_WORKSPACE_FILES caps the workspace), the end step counts before its tar: refused at
    once, said, and the workspace stays as it was."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's copy-back")
    settings.AGENT_WORKSPACE_FILES = 10**9
    begun = time.monotonic()
    outputs, workspace = _agent(item, agent_session, MANY)
    unguarded = time.monotonic() - begun
    assert "made" in outputs[0] and len(list((workspace.root / "m").iterdir())) == 20000
    print(f"unguarded: {_stdout(outputs[0]).strip()}, call {_seconds(outputs[0])} s, {unguarded:.1f} s")
    workspace.remove()

    settings.AGENT_WORKSPACE_FILES = 5000
    begun = time.monotonic()
    outputs, workspace = _agent(item, agent_session, MANY, "ls", sample=1)
    guarded = time.monotonic() - begun
    assert "made" in outputs[0], outputs[0]
    assert "not copied back: it holds more than 5000 files and folders" in outputs[0], outputs[0]
    assert "stays as it was before this command" in outputs[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["model.py"]
    assert _stdout(outputs[1]).split() == ["model.py"]  # the next command gets the workspace as it was
    assert _seconds(outputs[0]) < 15 < settings.AGENT_COMMAND_SECONDS + COPY_SECONDS
    print(f"guarded: call {_seconds(outputs[0])} s, agent {guarded:.1f} s")


# Many small processes, each smaller than the command server, that together hold more than the container's memory:
# the out-of-memory killer takes the largest, the server, and so the command's channel.
HOGS = (
    "for i in $(seq 90); do python3 -c 'import time; x = bytearray(1500000); x[::4096] = bytes(len(x[::4096])); "
    "time.sleep(30)' & done; sleep 8"
)


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_a_command_that_runs_its_container_out_of_memory_is_its_own_failure(item, agent_session):
    """A command's output is cut at output_bytes in the container's command server before anything of it is held
    (a gigabyte written at full speed leaves the server as it was), so only the command's own processes can take the
    container's memory; when they push the out-of-memory killer onto the server itself (many processes, each smaller
    than it), the command is told it was killed for memory, its changes are not kept, and the item goes on in a new
    container: the agent's command failed, not the platform (no infrastructure error). Before, the kill went
    unseen (the count was read after the container's removal) and the command read "exit code None"."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's command server")
    small = replace(LIMITS, memory_bytes=128 * MB, processes=128)
    outputs, workspace = _agent(
        item,
        agent_session,
        "head -c 1000000000 /dev/zero; echo flooded >&2",
        f"echo kept > mine; {HOGS}",
        "ls",
        limits=small,
    )
    assert outputs[0].startswith("[exit code 0,") and "flooded" in outputs[0], outputs[0][:300]
    assert outputs[1].startswith("[killed: out of memory,"), outputs[1][-600:]
    assert "the container ran out of memory" in outputs[1], outputs[1][-600:]
    assert "stays as it was before this command" in outputs[1]
    assert outputs[2].startswith("[exit code 0,") and _stdout(outputs[2]).split() == ["model.py"], outputs[2]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["model.py"]
    agent_session.workspace_close(workspace=workspace.root)


@pytest.mark.django_db
def test_copy_back_refuses_a_sparse_file_at_once(item, agent_session, tmp_path):
    """Unguarded (the attack-review script, on docker): `truncate -s 50G big` reported 0.1 s and the call took
    60.6 s, the end step's tar streaming 50 GB of zeros until the cap and a 60 s join timeout. The cost shown here:
    a 1 GB sparse file holds nothing on disk but its plain tar is 1 GB. Guarded, the end step counts apparent sizes
    against disk_bytes before its tar: refused at once, said, the workspace as it was."""
    _unguarded("truncate -s 1G big", tmp_path)
    assert (tmp_path / "big").stat().st_blocks == 0
    assert int(_unguarded("tar -c -f - big | wc -c", tmp_path)) > 1 << 30
    begun = time.monotonic()
    outputs, workspace = _agent(item, agent_session, "truncate -s 50G big && echo made")
    if agent_session.backend.name == "bwrap":  # its file size rlimit (the disk limit) stops the truncate itself
        assert "File size limit exceeded" in outputs[0] and "made" not in outputs[0], outputs[0]
        assert (workspace.root / "big").stat().st_size == 0  # made, never grown
        (workspace.root / "big").unlink()
    else:
        assert "made" in outputs[0], outputs[0]
        assert f"not copied back: its files hold more than {LIMITS.disk_bytes} bytes" in outputs[0], outputs[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["model.py"]
    assert _seconds(outputs[0]) < 15 and time.monotonic() - begun < 30, outputs[0]


FILL = "head -c {size} /dev/zero > big; echo status=$?"


def _disk_bytes(folder: Path) -> int:
    """What a folder takes on the worker's disk (allocated blocks, sparse files counted as they are)."""
    return (
        sum(entry.stat(follow_symlinks=False).st_blocks * 512 for entry in folder.rglob("*")) if folder.exists() else 0
    )


@pytest.mark.django_db
def test_a_command_cannot_fill_the_workers_disk_past_the_release_limit(item, agent_session, tmp_path):
    """Unguarded (a command writing in a folder of the worker's disk, as bwrap's bound workspace was), 96 MB of zeros
    land on the worker's disk whatever the release's disk limit (64 MB here): one command could fill the disk. Both
    backends run the command on a tmpfs of the limit: the write stops with ENOSPC, the output says the workspace is
    full (bwrap says why), and the worker holds no more than the limit of it."""
    over = LIMITS.disk_bytes + 32 * MB
    output = _unguarded(FILL.format(size=over), tmp_path)
    assert "status=0" in output and _disk_bytes(tmp_path) >= over

    outputs, workspace = _agent(item, agent_session, FILL.format(size=over), "ls -l big; echo listed")
    assert "No space left on device" in outputs[0] and "status=1" in outputs[0], outputs[0]
    if agent_session.backend.name == "bwrap":
        assert f"[the workspace is full: a command's files may hold at most {LIMITS.disk_bytes} bytes" in outputs[0]
    assert "listed" in outputs[1], "the next command runs in the same workspace"
    # The limit of the files' bytes, allocated on the worker's own filesystem: up to a block more per entry (the copy
    # back's extent metadata took one more 4 KB block than the tmpfs in a CI run), never the 32 MB past it.
    entries = sum(1 for _ in workspace.root.rglob("*"))
    assert _disk_bytes(workspace.root) <= LIMITS.disk_bytes + entries * os.statvfs(workspace.root).f_bsize


@pytest.mark.django_db
def test_tmp_and_shm_are_empty_at_each_command_even_after_an_unreadable_folder(item, agent_session):
    """In the attack review a folder the command made unreadable (mode 000) survived docker's cleanup of /tmp and
    /dev/shm (a `find -delete` of the command's uid cannot enter it), and the next command read what it held. Each
    command starts with both empty (bwrap: fresh per command; docker: the folders are opened before the delete)."""
    hide = (
        "mkdir -p /tmp/k/d /dev/shm/k/d && echo s > /tmp/k/d/f && echo s > /dev/shm/k/d/f; chmod 000 /tmp/k /dev/shm/k"
    )
    outputs, _ = _agent(item, agent_session, hide, "ls -A /tmp /dev/shm; echo listed")
    assert "k" not in _stdout(outputs[1]).split() and "listed" in outputs[1], outputs[1]


@pytest.mark.django_db
def test_a_folder_made_unreadable_in_the_workspace_does_not_wedge_the_next_command(item, agent_session):
    """In the second attack review a folder of the workspace made unreadable (mode 000) kept docker's next command
    from starting (its `find -delete` of the command's uid could not enter it), so every later command raised an
    infrastructure error and the item left the score: the owner opens every folder before the delete."""
    outputs, _ = _agent(item, agent_session, "mkdir -p d/e && touch d/e/f && chmod 0 d", "echo second")
    assert "second" in _stdout(outputs[1]), outputs[1]


# An `sh`, `setpriv` and `cat` an environment's requirements could install into /opt/env/bin (first on the image's
# PATH, written as uid 10001 at build): each says when it runs as root, then runs the real one.
PLANTED = {
    name: f'#!/bin/dash\n[ "$(/usr/bin/id -u)" = 0 ] && {{ echo PLANTED-ROOT >&2; echo "$0" >> /tmp/planted-root; }}\n'
    f'exec {real} "$@"\n'
    for name, real in (("sh", "/bin/sh"), ("setpriv", "/usr/bin/setpriv"), ("cat", "/bin/cat"))
}


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_runs_nothing_of_the_environment_as_root(item, agent_session):
    """Unguarded, a root exec that names `sh` (as the end step did in the attack review) runs the environment's
    planted /opt/env/bin/sh as root. The keeper and the end step name their programs by absolute paths and the end
    step's PATH leaves /opt/env out: across commands and end steps nothing planted runs as root, and no
    root-owned file is left in /tmp."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's root end step")
    import docker

    client = docker.from_env()
    plant = "; ".join(
        f"printf '%s' {shlex.quote(text)} > /opt/env/bin/{name} && chmod 755 /opt/env/bin/{name}"
        for name, text in PLANTED.items()
    )
    container = client.containers.create(
        # As root: the empty environment is the base image, whose /opt/env a build with requirements hands to 10001.
        agent_session.environment.location,
        ["/bin/sh", "-c", plant],
        user="0:0",
        network_disabled=True,
    )
    tag = f"rcb-test-planted:{os.getpid()}"
    try:
        container.start()
        assert container.wait()["StatusCode"] == 0, container.logs()
        container.commit(repository=tag.split(":")[0], tag=tag.split(":")[1])
        unguarded = client.containers.run(tag, ["sh", "-c", "true"], user="0:0", remove=True, stderr=True)
        assert b"PLANTED-ROOT" in unguarded
        planted = Environment(
            hash=hashlib.sha256(b"planted").hexdigest(), backend="docker", location=tag, python="/opt/env/bin/python"
        )
        session = agent_session.backend.session_open(planted)
        try:
            outputs, workspace = _agent(item, session, "echo hi > f", "ls -a /tmp; cat f")
        finally:
            session.close()
        assert "PLANTED-ROOT" not in "".join(outputs), outputs
        assert _stdout(outputs[1]).split() == [".", "..", "hi"], outputs[1]
    finally:
        container.remove(force=True)
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag, force=True)
        client.close()


# Each probe of one process: stop it, list its open files, read its variables, trace it, kill it.
REACH = (
    "for pid in $own $server $spare; do "
    'kill -STOP $pid 2>/dev/null && echo "stopped $pid"; kill -CONT $pid 2>/dev/null; '
    'ls /proc/$pid/fd >/dev/null 2>&1 && echo "files $pid"; '
    'cat /proc/$pid/environ >/dev/null 2>&1 && echo "variables $pid"; '
    'python3 -c "import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, $pid, 0, 0) != 0)" && '
    'echo "traced $pid"; '
    'kill -9 $pid 2>/dev/null && echo "killed $pid"; done'
)


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_command_server_is_out_of_a_commands_reach(item, agent_session):
    """The command server (root in the container, the parent of each command's shell) spawns every job, and its
    spare becomes the next end step. Unguarded, a process of the command's own uid (a `sleep` it started, as the
    server would be if it ran as the command's user) is stopped, its open files and variables read, traced and
    killed. The server and its spare have root's real and saved uids: each probe is refused, and the next command
    runs over the same channel."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's command server")
    find = (
        "sleep 30 & own=$!; server=$(awk '/^PPid/ {print $2}' /proc/$$/status); spare=; "
        'for p in /proc/[0-9]*; do [ "$(awk \'/^PPid/ {print $2}\' $p/status 2>/dev/null)" = "$server" ] && '
        '[ "${p#/proc/}" != $$ ] && spare=${p#/proc/}; done; echo "own $own server $server spare $spare"; '
    )
    _, workspace = _agent(item, agent_session, "true")
    container = agent_session._agents[workspace.root]
    channel = container.channel
    outputs, workspace = _agent(item, agent_session, find + REACH, "echo alive", sample=1)
    found = re.search(r"own (\d+) server (\d+) spare (\d+)", outputs[0])
    assert found, outputs[0]
    own, server, spare = found.groups()
    assert server == str(channel.server_pid), outputs[0]
    probes = ("stopped", "files", "variables", "traced", "killed")
    assert all(f"{probe} {own}" in outputs[0] for probe in probes), outputs[0]
    assert not any(f"{probe} {pid}" in outputs[0] for probe in probes for pid in (server, spare)), outputs[0]
    assert _stdout(outputs[1]).split() == ["alive"], outputs[1]
    assert agent_session._agents[workspace.root] is container and container.channel is channel and channel.alive()


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_command_channel_outlives_a_flood_and_a_hang(item, agent_session, settings):
    """A command that floods its output until its deadline and one that hangs past it end as they did with an exec
    each (cut at the cap, killed at the limit), and the next command runs over the same channel, never restarted."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's command channel")
    settings.AGENT_COMMAND_SECONDS = 2
    _, workspace = _agent(item, agent_session, "true")
    container = agent_session._agents[workspace.root]
    channel, restarts = container.channel, agent_session.agent_restarts
    outputs, workspace = _agent(item, agent_session, "yes", "sleep 60", "echo alive", sample=1)
    cap = settings.AGENT_OUTPUT_BYTES
    assert f"[output cut at {cap} bytes per stream]" in outputs[0] and "killed at its time limit of 2 s" in outputs[0]
    assert "killed at its time limit of 2 s" in outputs[1], outputs[1]
    assert _stdout(outputs[2]).split() == ["alive"], outputs[2]
    assert agent_session._agents[workspace.root] is container and container.channel is channel and channel.alive()
    assert agent_session.agent_restarts == restarts


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_a_lost_command_channel_is_replaced_and_counted(item, agent_session):
    """A command server that dies (the container's out-of-memory killer may pick it) closes its channel: the next
    command gets a new container, and the session counts the restart."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's command channel")
    import docker

    _, workspace = _agent(item, agent_session, "true")
    container = agent_session._agents[workspace.root]
    restarts = agent_session.agent_restarts
    client = docker.from_env()
    try:
        killed = client.containers.get(container.container).exec_run(
            ["/bin/sh", "-c", f"kill -9 {container.channel.server_pid}"], user="0:0"
        )
    finally:
        client.close()
    assert killed.exit_code == 0, killed.output
    polled(lambda: not container.alive(), timeout=10, what="the channel to close")
    outputs, workspace = _agent(item, agent_session, "echo alive", sample=1)
    assert _stdout(outputs[0]).split() == ["alive"], outputs[0]
    assert agent_session._agents[workspace.root] is not container
    assert agent_session.agent_restarts == restarts + 1


# Fills /tmp and /dev/shm (tmpfs pages, charged to the container's memory) with what they take.
FILL_SCRATCH = (
    "echo kept > kept; head -c 100M /dev/zero > /tmp/f; head -c 100M /dev/zero > /dev/shm/f; "
    "df -k /tmp /dev/shm | tail -n 2; echo filled"
)
# Then holds what memory is left, in one process: the container's out-of-memory killer has to pick.
HOG = "; python3 -c \"b = bytearray(120 << 20); b[::4096] = b'x' * len(b[::4096]); print('HELD')\""


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_a_command_filling_tmp_and_shm_leaves_the_server_its_memory(item, agent_session, monkeypatch):
    """In the second attack review, under a release's small memory limit, a command filling /tmp and /dev/shm (64 MB
    each, charged to the container's memory) got the root command server killed by the container's out-of-memory
    killer: its end step never ran, the workspace was not copied back and the container was replaced. Unguarded
    (the tmpfs sizes as they were) the same fill loses the end step. The workspace, /tmp and /dev/shm now hold at
    most the release's memory together: the fill stops at their sizes, a process then holding the memory left is
    the one killed, the end step runs and the next command runs on the same channel."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's command server")
    small = replace(LIMITS, memory_bytes=96 * MB)  # /tmp and /dev/shm took 128 MB
    with monkeypatch.context() as unguarded:
        unguarded.setattr(docker_agent, "SERVER_MEMORY_KEPT", False)
        outputs, workspace = _agent(item, agent_session, FILL_SCRATCH, limits=small)
    assert "the container ran out of memory (its command server was killed)" in outputs[0], outputs[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["model.py"], outputs[0]

    scratch, work = docker_agent.tmpfs_sizes(small)
    assert 2 * scratch + work <= small.memory_bytes and work == small.disk_bytes
    restarts = agent_session.agent_restarts
    outputs, workspace = _agent(item, agent_session, FILL_SCRATCH + HOG, "cat kept; echo alive", limits=small, sample=1)
    assert "filled" in outputs[0] and "No space left on device" in outputs[0], outputs[0]
    assert re.findall(r"^(?:tmpfs|shm) +(\d+)", _stdout(outputs[0]), re.M) == [str(scratch >> 10)] * 2, outputs[0]
    assert "HELD" not in outputs[0] and "not copied back" not in outputs[0], outputs[0]
    assert _stdout(outputs[1]).split() == ["kept", "alive"], outputs[1]
    container = agent_session._agents[workspace.root]
    assert container.alive() and agent_session.agent_restarts == restarts
    assert (workspace.root / "kept").read_text() == "kept\n"


@pytest.mark.docker
@pytest.mark.django_db
def test_docker_copy_back_stops_at_its_deadline(item, agent_session, settings, monkeypatch):
    """Unguarded, the copy-back had no deadline of its own (a 60 s join, then an unbounded unpack: the first test
    shows 20k files copied back whatever it costs). With the allowance cut to 1 s, the same copy is stopped at
    the command's time limit plus 1 s: the container (its tar) removed, the half-unpacked folder deleted, the workspace
    as it was, and the output says why; the stated time is the whole call's."""
    if agent_session.backend.name != "docker":
        pytest.skip("docker's copy-back")
    monkeypatch.setattr(docker_agent, "COPY_SECONDS", 1.0)
    settings.AGENT_WORKSPACE_FILES = 10**9
    settings.AGENT_COMMAND_SECONDS = 15
    begun = time.monotonic()
    outputs, workspace = _agent(item, agent_session, f"{MANY}; sleep 14", "ls")  # killed at 15 s: 1 s to copy
    assert "made" in outputs[0], outputs[0]
    assert "not copied back" in outputs[0] and "15 s for the command, 1 s for the copy" in outputs[0], outputs[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["model.py"]
    assert not list(workspace.root.parent.glob("*.rcb-new"))
    assert _stdout(outputs[1]).split() == ["model.py"]
    assert _seconds(outputs[0]) < 15 + 1 + 5, outputs[0]
    print(f"stopped: call {_seconds(outputs[0])} s, agent {time.monotonic() - begun:.1f} s")


@pytest.mark.django_db
def test_a_cancel_stops_the_rest_of_a_turns_commands(item, agent_session, tmp_path):
    """A hostile model answers one turn with many long commands (up to AGENT_TOOL_CALLS_PER_TURN of up to
    AGENT_COMMAND_SECONDS each): unguarded, a cancel freed the sandbox slot only after all of them. Each command now
    runs only while its run is active; the cancel here lands while the model thinks, as an operator's would."""
    run, snippet = item
    commands = ["echo one > one", "echo two > two", "echo three > three"]
    assert "one" in _unguarded("; ".join(f"{c}; cat {c.split()[-1]}" for c in commands), tmp_path)

    def turn(messages, seconds_left):
        done = sum(1 for m in messages if m["role"] == "assistant")
        if done == 0:
            EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.CANCELLED)
        calls = [("run", {"command": c}) for c in commands] if done == 0 else [("submit", {})]
        return ToolTurn(
            message={
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"c{done}-{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, (n, a) in enumerate(calls)
                ],
            },
            prompt_tokens=1,
            completion_tokens=1,
            latency=0.0,
            cost=0.0,
            attempts=1,
        )

    budget = Budget(turns=3, tokens=10**6, seconds=120, cost=1)
    workspace = Workspace.create(name="cancelled", files={"model.py": b"x = 1\n"})
    trajectory = trajectory_start(run=run, snippet=snippet, sample=0, budget=budget)
    agent_loop(
        trajectory=trajectory,
        policy=turn,
        system="s",
        prompt="p",
        workspace=workspace,
        session=agent_session,
        limits=LIMITS,
        budget=budget,
    )
    outputs = list(
        AgentStep.objects.filter(trajectory=trajectory, role="tool", tool_name="run").values_list("content", flat=True)
    )
    assert outputs == ["not run: the run was cancelled"] * 3
    assert not any((workspace.root / name).exists() for name in ("one", "two", "three"))


@pytest.mark.django_db
def test_files_stamped_in_the_future_do_not_wedge_the_next_command(item, agent_session, monkeypatch):
    """In the third attack review files with time stamps in the future made the copy-in's tar print a warning per
    file before the start line, past the output cap: every later command raised an infrastructure error (never
    scored), so an agent could take any item it was failing out of its score. Unguarded (tar's warnings kept) the
    next command does not start; guarded it runs, and the files keep their time stamps."""
    from sandbox import SandboxError, bwrap

    stamp = 'n=$(printf "x%.0s" $(seq 60)); for i in $(seq 400); do touch -d 2099-01-01 "f$i-$n"; done'
    small = replace(LIMITS, output_bytes=8192)
    warned = {
        "bwrap": ("COMMAND", bwrap.COMMAND.replace(" -f - 2>/dev/null && printf", " -f - && printf")),
        "docker": (
            "START",
            docker_agent.START.replace(f"{docker_agent.WORK_DIR} 2>/dev/null &&", f"{docker_agent.WORK_DIR} &&"),
        ),
    }[agent_session.backend.name]
    module = bwrap if agent_session.backend.name == "bwrap" else docker_agent
    assert getattr(module, warned[0]) != warned[1], "the unguarded command differs from the guarded one"
    monkeypatch.setattr(module, warned[0], warned[1])
    with pytest.raises(SandboxError, match="did not start"):
        _agent(item, agent_session, stamp, "echo second", limits=small)
    monkeypatch.undo()

    outputs, _ = _agent(
        item, agent_session, stamp, "echo second; ls -l --time-style=+%Y f1-* | cut -c1-60", sample=1, limits=small
    )
    assert "second" in _stdout(outputs[1]) and "2099" in _stdout(outputs[1]), outputs[1]
