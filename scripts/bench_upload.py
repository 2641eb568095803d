"""Time an upload of 20 samples x 1,000 items (the API's maximum) on a generated release, and reads of its results.

Runs on its own SQLite database, media folder and filesystem broker in a temporary folder (nothing shared is
touched): `python scripts/bench_upload.py [items] [samples]`. Prints the request time, how long storing took, how
long queueing every item took (in the background task after this change, inside the request before it), and the
time and size of a results page and of the run page.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
SAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 else 20
PAPERS = 20
PAPER_TEXT_BYTES = 290_000


def pset_generate(root: Path) -> None:
    import yaml

    paragraph = "We propose a method whose update rule is $x_{t+1} = x_t - \\eta \\nabla f(x_t)$. " * 12 + "\n\n"
    filler = "".join(f"CONSTANT_{i} = {i}  # keeps the file realistically long\n" for i in range(1500))
    entries = []
    for paper in range(PAPERS):
        count = ITEMS // PAPERS + (1 if paper < ITEMS % PAPERS else 0)
        blocks = "".join(
            f'    def step_{n}(self, x):\n        # <paper2code name="step {n}">\n'
            f'        y = x * 2 + {n}\n        return y\n        # </paper2code name="step {n}">\n\n'
            for n in range(count)
        )
        files = {
            "paper2code_paper.tex": paragraph * (PAPER_TEXT_BYTES // len(paragraph)),
            "paper2code_test.py": "import model\nprint('ok')\n",
            "model.py": f"{filler}\n\nclass Model:\n{blocks}",
            "requirements.txt": "",
        }
        for path, text in files.items():
            (root / f"paper-{paper:02d}" / path).parent.mkdir(parents=True, exist_ok=True)
            (root / f"paper-{paper:02d}" / path).write_text(text, encoding="utf-8")
        entries.append(
            {
                "id": f"paper-{paper:02d}",
                "title": f"Paper {paper}",
                "arxiv_date": "2025-01-01",
                "annotated_file_paths": "model.py",
            }
        )
    (root / "papers.yaml").write_text(yaml.safe_dump(entries, sort_keys=False), encoding="utf-8")


def main() -> None:
    from scripts.bench_django import django_fresh

    tmp = django_fresh("bench-upload-")
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.db import connection
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from benchmarks.selectors import version_snippets
    from benchmarks.services.psets import pset_import
    from evaluation import services
    from evaluation.models import EvaluationRun, Generation, Outcome

    pset_generate(tmp / "pset")
    version = pset_import(root=tmp / "pset", version_name="1.0.0", publish=True).version
    snippets = list(version_snippets(version=version))
    user = get_user_model().objects.create_user(username="bench", password="x", email="bench@example.org")
    services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=user)
    content = "".join(
        json.dumps({"id": str(s.pk), "sample": k, "answer": f"```python\n{s.reference_code}```"}) + "\n"
        for k in range(SAMPLES)
        for s in snippets
    ).encode()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    print(f"release: {len(snippets)} items in {PAPERS} papers; upload: {SAMPLES} samples, {len(content) / 1e6:.1f} MB")

    start = time.perf_counter()
    response = client.post(
        "/api/v1/runs/upload/",
        {"file": SimpleUploadedFile("a.jsonl", content), "model": "uploader", "release": "1.0.0"},
        format="multipart",
    )
    request = time.perf_counter() - start
    assert response.status_code in (201, 202), response.content[:1000]
    run = EvaluationRun.objects.get(pk=response.json()["id"])
    print(
        f"upload request: {request:.2f} s (HTTP {response.status_code}), "
        f"{Generation.objects.filter(run=run).count()} generations stored, run {run.status}"
    )
    queued = list((tmp / "broker" / "queue").iterdir())
    print(f"messages queued by the request: {len(queued)}")
    if run.status == EvaluationRun.Status.QUEUED:  # dispatch is a background task: time it here
        start = time.perf_counter()
        services.run_dispatch(run=run)
        print(f"background dispatch of {run.total_items} items: {time.perf_counter() - start:.2f} s")

    # Results of a finished run: every item passed (recorded directly, no sandbox here).
    Outcome.objects.bulk_create(
        [
            Outcome(
                run=run,
                snippet=g.snippet,
                sample=g.sample,
                generation=g,
                status=Outcome.Status.PASSED,
                category=Outcome.Category.NONE,
                detail="",
                duration=0.1,
            )
            for g in Generation.objects.filter(run=run).select_related("snippet")
        ],
        batch_size=2000,
    )
    for label, url in (
        ("results API, first page", f"/api/v1/runs/{run.pk}/results/"),
        ("results API, last page", f"/api/v1/runs/{run.pk}/results/?page=400"),
        ("run page", f"/runs/{run.pk}/"),
    ):
        connection.queries_log.clear()
        start = time.perf_counter()
        page = client.get(url)
        elapsed = time.perf_counter() - start
        print(f"{label}: HTTP {page.status_code}, {len(page.content) / 1e6:.2f} MB in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
