"""Prompt protocols as data: protocol_add, the items API and JSONL in any protocol, runs recording theirs.

The expected masked files and prompts are written out by hand from issue 11 item 4, never computed by the code.
"""

from __future__ import annotations

import hashlib
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from benchmarks.models import BenchmarkVersion, PromptProtocol
from evaluation.models import EvaluationRun, Generation, ModelEntry
from evaluation.selectors.items import item_prompt
from evaluation.services import EvaluationError, run_start
from tests.conftest import download_body, items_read, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db

NESTED = (
    b"import torch\n\n\nclass Model:\n    def forward(self, x):\n        h = x\n"
    b'        # <paper2code name="outer">\n        y = h + 1\n        # <paper2code name="inner">\n'
    b'        z = y * 2  # double\n        # </paper2code name="inner">\n        out = z.sum()\n'
    b'        # </paper2code name="outer">\n        return out\n'
)
TAIL = b'def f(x):\n    # <paper2code name="last">\n    return x + 1\n    # </paper2code name="last">\n'
TAIL_NO_NEWLINE = b'def g(x):\n    # <paper2code name="final">\n    return x - 1\n    # </paper2code name="final">'
UTILS = b"A = 1\nB = 2\n"
TEMPLATE = 'Paper:\n$paper\nCode:\n$code\nWrite "$name" ($loc lines), $$0.\n'

MASKED_ORIGINAL = {
    ("model.py", "outer"): (
        b"import torch\n\n\nclass Model:\n    def forward(self, x):\n        h = x\n"
        b'        # TODO: Implement block "outer"\n\n        # Approximately 3 line(s) of code.\n\n'
        b"        return out"
    ),
    ("model.py", "inner"): (
        b"import torch\n\n\nclass Model:\n    def forward(self, x):\n        h = x\n"
        b'        y = h + 1\n        # TODO: Implement block "inner"\n\n'
        b"        # Approximately 1 line(s) of code.\n\n        out = z.sum()\n        return out"
    ),
    ("tail.py", "last"): b'def f(x):\n    # TODO: Implement block "last"\n\n    # Approximately 1 line(s) of code.\n',
    ("tail_nonl.py", "final"): (
        b'def g(x):\n    # TODO: Implement block "final"\n\n    # Approximately 1 line(s) of code.\n'
    ),
}
PROMPT_LAST = (
    b"Paper:\nWe add one.\n\nCode:\n## utils.py\n\nA = 1B = 2\n\n"
    b'def f(x):\n    # TODO: Implement block "last"\n\n    # Approximately 1 line(s) of code.\n'
    b'\nWrite "last" (1 lines), $0.\n'
)
PROMPT_LAST_WITHOUT_PAPER = (
    b"Paper:\n(The paper's text is not given for this task: infer what the block computes from the code and the name "
    b"of the TODO block.)\nCode:\n## utils.py\n\nA = 1B = 2\n\n"
    b'def f(x):\n    # TODO: Implement block "last"\n\n    # Approximately 1 line(s) of code.\n'
    b'\nWrite "last" (1 lines), $0.\n'
)


def legacy_pset(root: Path) -> Path:
    paper = root / "legacy"
    paper.mkdir(parents=True)
    (root / "papers.yaml").write_text(
        "- id: legacy\n  title: A legacy paper\n  annotated_file_paths: [model.py, tail.py, tail_nonl.py]\n"
        "  context_file_paths: [utils.py]\n",
        encoding="utf-8",
    )
    for name, data in (
        ("model.py", NESTED),
        ("tail.py", TAIL),
        ("tail_nonl.py", TAIL_NO_NEWLINE),
        ("utils.py", UTILS),
        ("paper2code_paper.md", b"We add one.\n"),
        ("paper2code_test.py", b"import tail, tail_nonl\nassert tail.f(1) == 2 and tail_nonl.g(1) == 0\n"),
    ):
        (paper / name).write_bytes(data)
    return root


@pytest.fixture
def original(tmp_path: Path, media_root) -> BenchmarkVersion:
    """The legacy set published as 1.0.0 (default protocol rcb-v1) and the protocol rcb-original added."""
    template = tmp_path / "template.txt"
    template.write_text(TEMPLATE, encoding="utf-8")
    out = StringIO()
    call_command(
        "protocol_add",
        "rcb-original",
        template=str(template),
        masking="original",
        context_join="original",
        no_masked_header=True,
        stdout=out,
    )
    assert "masking original, context join original, masked file without a path header" in out.getvalue()
    call_command("import_pset", str(legacy_pset(tmp_path / "pset")), version="1.0.0", publish=True, stdout=StringIO())
    return BenchmarkVersion.objects.get(name="1.0.0")


def test_protocol_add_stores_the_template_and_layout(original):
    row = PromptProtocol.objects.get(name="rcb-original")
    assert (row.template, row.masking, row.context_join, row.masked_header) == (TEMPLATE, "original", "original", False)
    assert set(PromptProtocol.objects.values_list("name", flat=True)) == {"rcb-v1", "rcb-original"}


def test_items_api_masks_in_the_original_style(original):
    body = APIClient().get("/api/v1/releases/1.0.0/items/?protocol=rcb-original").json()
    masked = {(item["file"], item["snippet"]): item["masked_code"].encode() for item in body["results"]}
    assert masked == MASKED_ORIGINAL


def test_items_api_prompt_follows_the_protocol_with_and_without_paper(original):
    client = APIClient()
    items = client.get("/api/v1/releases/1.0.0/items/").json()["results"]
    last = next(item for item in items if item["snippet"] == "last")
    url = f"/api/v1/releases/1.0.0/items/{last['id']}/"
    detail = client.get(url, {"protocol": "rcb-original"}).json()
    assert detail["protocol"] == "rcb-original" and detail["prompt"].encode() == PROMPT_LAST
    ablation = client.get(url, {"protocol": "rcb-original", "with_paper": "false"}).json()
    assert ablation["prompt"].encode() == PROMPT_LAST_WITHOUT_PAPER
    default = client.get(url).json()
    assert default["protocol"] == "rcb-v1" and "## tail.py\n\ndef f(x):\n" in default["prompt"]
    assert (
        last["masked_code"] == 'def f(x):\n    # TODO: Implement block "last"\n    # Approximately 1 line(s) of code.\n'
    )


def test_unknown_protocol_is_a_400_naming_the_known_ones(original):
    client = APIClient()
    for url in (
        "/api/v1/releases/1.0.0/items/?protocol=rcb-v9",
        "/api/v1/releases/1.0.0/downloads/items/?protocol=rcb-v9",
    ):
        response = client.get(url)
        assert response.status_code == 400, url
        assert response.json()["error"] == {
            "code": "unknown_protocol",
            "message": "unknown prompt protocol 'rcb-v9'; known: rcb-original, rcb-v1",
            "details": None,
        }
    for hostile in ("rcb-v1\x00", "rcb-v1'; --", "x" * 5000):
        response = client.get("/api/v1/releases/1.0.0/items/", {"protocol": hostile})
        assert response.status_code == 400 and "known: rcb-original, rcb-v1" in response.json()["error"]["message"]


def test_items_jsonl_in_another_protocol(original):
    client = APIClient()
    stored = client.get("/api/v1/releases/1.0.0/downloads/items/")
    assert stored["X-Content-SHA256"] == original.downloads["items"]["sha256"]
    assert {item["protocol"] for item in items_read(download_body(stored))} == {"rcb-v1"}
    response = client.get("/api/v1/releases/1.0.0/downloads/items/?protocol=rcb-original")
    assert response.status_code == 200 and "1.0.0-items-rcb-original.jsonl" in response["Content-Disposition"]
    body = download_body(response)
    assert response["X-Content-SHA256"] == hashlib.sha256(body).hexdigest()
    assert download_body(client.get("/api/v1/releases/1.0.0/downloads/items/?protocol=rcb-original")) == body
    rows = items_read(body)
    assert {(r["file"], r["snippet"]): r["masked_code"].encode() for r in rows} == MASKED_ORIGINAL
    assert next(r for r in rows if r["snippet"] == "last")["prompt"].encode() == PROMPT_LAST


def test_runs_record_the_protocol_and_prompt_in_it(original):
    reference = ModelEntry.objects.get(name="reference")
    default = run_start(model=reference, version=original, dispatch=False)
    chosen = run_start(model=reference, version=original, protocol="rcb-original", with_paper=False, dispatch=False)
    assert (default.protocol, chosen.protocol) == ("rcb-v1", "rcb-original")
    last = original.tasks.get().snippets.get(name="last")
    assert item_prompt(last, with_paper=False, protocol=chosen.protocol).encode() == PROMPT_LAST_WITHOUT_PAPER
    with pytest.raises(EvaluationError, match="unknown prompt protocol 'nope'; known: rcb-original, rcb-v1"):
        run_start(model=reference, version=original, protocol="nope", dispatch=False)


def test_a_release_with_another_default_protocol(tmp_path, original):
    call_command(
        "import_pset", str(tmp_path / "pset"), version="2.0.0", protocol="rcb-original", publish=True, stdout=StringIO()
    )
    release = BenchmarkVersion.objects.get(name="2.0.0")
    rows = items_read(download_body(APIClient().get("/api/v1/releases/2.0.0/downloads/items/")))
    assert {(r["file"], r["snippet"]): r["masked_code"].encode() for r in rows} == MASKED_ORIGINAL
    run = run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    assert run.protocol == "rcb-original"


def test_api_run_start_takes_a_protocol(original, maintainer):
    from rest_framework.authtoken.models import Token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=maintainer)[0].key}")
    started = client.post(
        "/api/v1/runs/", {"model": "reference", "release": "1.0.0", "protocol": "rcb-original"}, format="json"
    )
    assert started.status_code == 201 and started.json()["protocol"] == "rcb-original"
    refused = client.post("/api/v1/runs/", {"model": "reference", "release": "1.0.0", "protocol": "x"}, format="json")
    assert refused.status_code == 400 and "known: rcb-original, rcb-v1" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    "template, message",
    [
        ("$paper $code costs $5", 'line 1: a lone "$"'),
        ("$paper\n$snippet_name\n$code", "line 2: unknown placeholder $snippet_name"),
        ("$paper only", "$code is missing"),
    ],
)
def test_protocol_add_refuses_a_bad_template(tmp_path, template, message):
    path = tmp_path / "t.txt"
    path.write_text(template, encoding="utf-8")
    with pytest.raises(CommandError, match=message.replace("$", r"\$")):
        call_command("protocol_add", "bad", template=str(path))
    assert not PromptProtocol.objects.filter(name="bad").exists()


def test_protocol_add_never_changes_an_existing_protocol(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("$paper $code", encoding="utf-8")
    with pytest.raises(CommandError, match="'rcb-v1' exists already; protocols never change"):
        call_command("protocol_add", "rcb-v1", template=str(path))
    with pytest.raises(CommandError, match="name: lower-case letters"):
        call_command("protocol_add", "Has Space", template=str(path))
    with pytest.raises(CommandError, match="cannot read the template"):
        call_command("protocol_add", "missing", template=str(tmp_path / "nope.txt"))


@pytest.fixture
def bwrap(sandbox_cache, executor_backend):
    executor_backend(sandbox_backend_or_missing("bwrap", sandbox_cache))
    yield


def test_evaluate_runs_in_the_named_protocol(original, bwrap):
    out = StringIO()
    call_command(
        "evaluate",
        model="reference",
        version="1.0.0",
        protocol="rcb-original",
        without_paper=True,
        inline=True,
        stdout=out,
    )
    run = EvaluationRun.objects.get()
    assert run.protocol == "rcb-original" and not run.with_paper and "in protocol rcb-original" in out.getvalue()
    assert run.scores.get(paper=None, split="").scaled_pass_rate == 100.0
    last = Generation.objects.get(run=run, snippet__name="last")
    assert last.prompt_hash == hashlib.sha256(PROMPT_LAST_WITHOUT_PAPER).hexdigest()
