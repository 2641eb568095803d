"""The leaderboard guide's examples run as written against a site loaded as `make run` loads it (the demo release
demo-1.0.0, its calibration runs and sample upload), with a real worker scoring in bwrap: a newcomer following it
registers a model, starts a run, downloads the items, rebuilds their prompts and uploads correct answers written
without indentation, which score 100%."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from benchmarks.models import BenchmarkVersion
from benchmarks.paper2code import code_indent, extract_code
from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from tests.conftest import REPO, client_for, polled, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

GUIDE = REPO / "docs" / "LEADERBOARD.md"


def guide_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)


def test_the_guides_json_examples_say_what_an_upload_does_with_them(media_root):
    """Section 4's lines, on a real item indented 8 spaces: the correct ones splice at the item's indentation with
    no warning, the wrong one is taken unchanged with a warning naming its line."""
    from benchmarks.services.psets import pset_import
    from tests.conftest import DEMO_PSET

    version = pset_import(root=DEMO_PSET, version_name="demo-1.0.0", publish=True).version
    snippet = next(s for s in version_snippets(version=version) if code_indent(s.reference_code) == " " * 8)
    examples = [line for block in guide_blocks("json") for line in block.splitlines() if line.strip()]
    assert len(examples) == 4
    snippets = {str(snippet.pk): snippet}
    parsed = [
        services.upload_line_parse(
            json.loads(line.replace('"1234"', f'"{snippet.pk}"')), snippets=snippets, version=version, protocol="rcb-v1"
        )
        for line in examples
    ]
    for right in parsed[:3]:
        code = right.code if right.code is not None else extract_code(right.answer)
        assert code == "        scale = x.abs().max()\n        return x / scale\n" and right.warning == ""
    assert "indented less than the snippet (8 columns) on its line(s) 1, 2" in parsed[3].warning


def test_the_leaderboard_guide_runs_as_written_on_a_make_run_site(
    live_server, author, media_root, sandbox_cache, celery_worker_factory, tmp_path, settings
):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    worker = celery_worker_factory(queues="default,sandbox", SANDBOX_BACKEND="bwrap")
    settings.SANDBOX_BACKEND, settings.SANDBOX_CACHE_DIR = "bwrap", str(sandbox_cache)
    # As `make run` loads the site (Makefile): the demo release, then its calibration runs and sample upload.
    call_command("import_pset", "benchmarks/demo", version="demo-1.0.0", publish=True)
    call_command("demo_populate", version="demo-1.0.0")
    call_command("demo_populate", version="demo-1.0.0")  # idempotent: a second start adds nothing
    assert EvaluationRun.objects.count() == 3
    assert set(EvaluationRun.objects.values_list("status", flat=True)) == {"completed"}
    board = client_for(None).get("/leaderboard/", follow=True).content.decode()
    assert "Sample upload (demo)" in board and "Reference" in board
    version = BenchmarkVersion.objects.get(name="demo-1.0.0")
    polled(
        lambda: BenchmarkVersion.objects.get(pk=version.pk).downloads_status == "ready",
        timeout=300,
        what="the release's downloads build",
        worker=worker,
    )

    # The guide's shell blocks, in order, with the site's address and a token; curl fails on an error status.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".curlrc").write_text("fail-with-body\nsilent\nshow-error\n")
    env = {**os.environ, "HOME": str(home), "RCB_TOKEN": Token.objects.create(user=author).key}
    shell = [block.replace("https://<site>", live_server.url) for block in guide_blocks("sh")]
    assert len(shell) == 6 and all("<" not in block for block in shell), shell
    outputs = []
    for block in shell:
        if "answers.jsonl" in block and "-F file=" in block:
            _answers_write(tmp_path, version)
        done = subprocess.run(
            ["sh", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    assert ModelEntry.objects.get(name="my-model").kind == "uploaded"
    assert ModelEntry.objects.get(name="my-gpt").api_key_get() == "sk-..."
    started = json.loads(outputs[3])
    assert started["status"] in ("queued", "running") and started["model"] == "my-gpt"

    upload = json.loads(outputs[5])
    assert upload["warnings"] == [] and upload["follow"]["page"].endswith(f"/runs/{upload['id']}/")
    run = polled(
        lambda: EvaluationRun.objects.filter(pk=upload["id"], status="completed").first(),
        timeout=300,
        what="the upload's scoring",
        worker=worker,
    )
    assert RunScore.objects.get(run=run, paper=None, split="").scaled_pass_rate == 100.0


def _answers_write(folder, version) -> None:
    """What a newcomer does between the guide's blocks: rebuild the prompts with its Python example, then answer
    each prompt with a correct body written without indentation, as a model's code block often is."""
    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        [python] = guide_blocks("python")
        exec(python, namespace)  # noqa: S102 - the guide's own example, run as a reader would
    finally:
        os.chdir(cwd)
    prompts = namespace["prompts"]
    snippets = {str(s.pk): s for s in version_snippets(version=version)}
    some = next(iter(prompts))
    assert prompts[some] == client_for(None).get(f"/api/v1/releases/{version.name}/items/{some}/").json()["prompt"]
    lines = []
    for item in prompts:
        body = textwrap.dedent(snippets[item].reference_code)
        assert any(line and not line[0].isspace() for line in body.splitlines())  # really unindented
        lines.append(json.dumps({"id": item, "sample": 0, "code": body}))
    (folder / "answers.jsonl").write_text("\n".join(lines) + "\n")
