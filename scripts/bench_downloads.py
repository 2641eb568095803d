"""Size, peak memory and time of building and serving the downloads of a generated 1,000-item release, old paths vs new.

Runs on its own SQLite database and media folder in a temporary folder (nothing shared is touched):
`python scripts/bench_downloads.py [items]`. The release is the upload benchmark's (20 papers of about 290 kB of
text each). "old" is the code before this change, kept below as the baseline: each file built whole in memory (the
items JSONL repeating its paper's text in every prompt, every task's files held until the end) and served by reading
the whole blob into the response. "new" is the live code: written to a temporary file a file and a line at a time
(each paper's text and prompt template once, each masked file once) and streamed from storage in blocks.
"prompt_parts" is the streamed writer before the prompt template moved into the paper line: each item line held
its masked file twice (`masked_code` and inside `prompt_parts`) and the paper's context files again. Serving is timed
on the response objects both views return (the whole body iterated, as a WSGI server does), without the rest of
Django's request handling. Peak memory is traced Python allocation (tracemalloc), in a second pass so the times are
not slowed by the tracing.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
import tracemalloc
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000


# The baseline: the code of benchmarks/services.py and benchmarks/views.py before this change.


def old_items_jsonl(*, version, protocol) -> bytes:
    from benchmarks.selectors import blob_read, snippet_masked, snippet_prompt
    from benchmarks.visibility import items_public

    lines = []
    files_by_task: dict[int, dict[str, bytes]] = {}
    for snippet in items_public(version=version):
        if snippet.task_id not in files_by_task:
            files_by_task[snippet.task_id] = {p: blob_read(sha256=d) for p, d in snippet.task.files.items()}
        files = files_by_task[snippet.task_id]
        lines.append(
            json.dumps(
                {
                    "id": str(snippet.pk),
                    "paper": snippet.task.paper.slug,
                    "file": snippet.file_path,
                    "snippet": snippet.name,
                    "loc": snippet.loc,
                    "protocol": protocol.name,
                    "masked_code": snippet_masked(snippet=snippet, files=files, protocol=protocol),
                    "prompt": snippet_prompt(snippet=snippet, files=files, with_paper=True, protocol=protocol),
                },
                ensure_ascii=False,
            )
        )
    return ("\n".join(lines) + "\n").encode()


def prompt_parts_items_write(*, version, protocol, out) -> None:
    from benchmarks.paper2code import parse
    from benchmarks.paper2code.prompt import _template_parts, code_part
    from benchmarks.selectors import blob_read, snippet_masked
    from benchmarks.visibility import items_public

    def line(record: dict) -> None:
        out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")

    task_id, files, annotated = None, {}, {}
    for snippet in items_public(version=version).iterator(chunk_size=500):
        task = snippet.task
        if task.pk != task_id:
            task_id = task.pk
            files = {p: blob_read(sha256=d) for p, d in task.files.items()}
            annotated = {p: parse(files[p].decode("utf-8"), p) for p in task.annotated_paths}
            line({"type": "paper", "paper": task.paper.slug, "paper_text": files[task.paper_path].decode("utf-8")})
        masked = snippet_masked(snippet=snippet, files=files, protocol=protocol, annotated=annotated[snippet.file_path])
        code = code_part(
            protocol, [(p, files[p].decode("utf-8")) for p in task.context_paths], snippet.file_path, masked
        )
        parts = _template_parts(protocol.template, code=code, name=snippet.name, loc=str(snippet.loc))
        line(
            {
                "type": "item",
                "id": str(snippet.pk),
                "paper": task.paper.slug,
                "file": snippet.file_path,
                "snippet": snippet.name,
                "loc": snippet.loc,
                "protocol": protocol.name,
                "masked_code": masked,
                "prompt_parts": parts,
            }
        )


def old_pset_zip(*, version) -> bytes:
    from benchmarks.paper2code.pset import write_pset
    from benchmarks.selectors import package_load
    from benchmarks.visibility import tasks_public

    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        write_pset(Path(tmp) / version.name, [package_load(t) for t in tasks_public(version=version)])
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted((Path(tmp) / version.name).rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo(str(path.relative_to(tmp)), date_time=(2000, 1, 1, 0, 0, 0))
                    archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def old_serve(sha256: str) -> int:
    from django.http import HttpResponse

    from benchmarks.selectors import blob_read

    response = HttpResponse(blob_read(sha256=sha256), content_type="application/jsonl")
    return sum(len(chunk) for chunk in response)


def new_serve(sha256: str) -> int:
    from benchmarks.views import download_response

    response = download_response(sha256=sha256, filename="items.jsonl", content_type="application/x-ndjson")
    served = sum(len(chunk) for chunk in response)
    response.close()
    return served


def measure(label: str, work, results: dict) -> None:
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    results[label] = (seconds, peak)


def main() -> None:
    from scripts.bench_django import django_fresh

    tmp = django_fresh("bench-downloads-")
    from django.test import Client
    from django.urls import reverse

    from benchmarks.selectors import protocol_get
    from benchmarks.services.blobs import blob_store, blob_store_file
    from benchmarks.services.downloads import release_items_write, release_pset_zip_write
    from benchmarks.services.psets import pset_import
    from benchmarks.services.publishing import version_publish
    from scripts import bench_upload

    bench_upload.ITEMS = ITEMS
    bench_upload.pset_generate(tmp / "pset")
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("bench", "bench@example.org", "x")
    version = version_publish(version=pset_import(root=tmp / "pset", version_name="1.0.0").version, actor=admin)
    protocol = protocol_get(name=version.protocol_name)
    stored: dict[str, str] = {}

    def new_items() -> None:
        with tempfile.TemporaryFile() as out:
            release_items_write(version=version, protocol=protocol, out=out)
            stored["new_items"] = blob_store_file(file=out).sha256

    def new_zip() -> None:
        with tempfile.TemporaryFile() as out:
            release_pset_zip_write(version=version, out=out)
            blob_store_file(file=out)

    def prompt_parts_items() -> None:
        with tempfile.TemporaryFile() as out:
            prompt_parts_items_write(version=version, protocol=protocol, out=out)
            stored["prompt_parts_items"] = blob_store_file(file=out).sha256

    def old_items() -> None:
        stored["old_items"] = blob_store(content=old_items_jsonl(version=version, protocol=protocol)).sha256

    results: dict[str, tuple[float, int]] = {}
    measure("build items JSONL, old", old_items, results)
    measure("build items JSONL, prompt_parts", prompt_parts_items, results)
    measure("build items JSONL, new", new_items, results)
    measure("build problem-set zip, old", lambda: blob_store(content=old_pset_zip(version=version)), results)
    measure("build problem-set zip, new", new_zip, results)
    measure("serve items JSONL, old", lambda: old_serve(stored["old_items"]), results)
    measure("serve items JSONL, new", lambda: new_serve(stored["new_items"]), results)
    response = Client().get(reverse("version-download", args=["1.0.0", "items"]))  # the view serves that response
    assert response.streaming and response["X-Content-SHA256"] == version.downloads["items"]["sha256"]
    response.close()

    from benchmarks.models import Blob
    from benchmarks.paper2code import items_read
    from benchmarks.selectors import blob_read

    sizes = {k: Blob.objects.get(sha256=stored[k]).size for k in ("old_items", "prompt_parts_items", "new_items")}
    prompts = [item["prompt"] for item in items_read(blob_read(sha256=stored["new_items"]).decode().splitlines())]
    assert prompts == [
        item["prompt"] for item in items_read(blob_read(sha256=stored["prompt_parts_items"]).decode().splitlines())
    ]
    print(
        f"release: {len((version.manifest or {}).get('tasks', []))} papers, {len(prompts)} items; items JSONL "
        f"{sizes['old_items'] / 1e6:.1f} MB old, {sizes['prompt_parts_items'] / 1e6:.1f} MB prompt_parts, "
        f"{sizes['new_items'] / 1e6:.1f} MB new ({sizes['prompt_parts_items'] / sizes['new_items']:.1f}x smaller "
        f"than prompt_parts, {sizes['old_items'] / sizes['new_items']:.1f}x than old); the same prompts read back"
    )
    print(f"{'':32} {'seconds':>9} {'peak MB':>9}")
    for label, (seconds, peak) in results.items():
        print(f"{label:32} {seconds:9.2f} {peak / 1e6:9.1f}")
    for what in ("build items JSONL", "build problem-set zip", "serve items JSONL"):
        (old_s, old_m), (new_s, new_m) = results[f"{what}, old"], results[f"{what}, new"]
        print(f"{what}: time old/new {old_s / new_s:.2f}x, peak memory old/new {old_m / max(new_m, 1):.1f}x")
    (parts_s, parts_m), (new_s, new_m) = results["build items JSONL, prompt_parts"], results["build items JSONL, new"]
    print(
        f"build items JSONL: time prompt_parts/new {parts_s / new_s:.2f}x, "
        f"peak memory prompt_parts/new {parts_m / max(new_m, 1):.1f}x"
    )


if __name__ == "__main__":
    main()
