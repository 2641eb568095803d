"""GPU tasks (issue 24), tested on a host without a GPU: papers.yaml declares one, its page says so, its items go to
the `gpu` queue that a worker without a GPU never consumes, the run page says why they wait instead of failing
them, and the docker backend asks the engine for the GPUs (which an engine without one refuses)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from benchmarks.models import Snippet, Task
from benchmarks.paper2code import PackageError
from benchmarks.paper2code.pset import read_pset
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from operations.broker import queues_waiting
from sandbox import Limits, SandboxError
from tests.conftest import DEMO_PSET, embedded_worker, polled, sandbox_backend_or_missing, service_missing

GPU_PAPER = "dampnest"
OTHER_PAPER = "trimmed-infonce"  # pure Python: its items are quick


def demo_with_gpu(root, value: str = "true"):
    """Two demo papers, the first declared to need a GPU."""
    root.mkdir(parents=True)
    entries = (DEMO_PSET / "papers.yaml").read_text().split("\n- id: ")
    kept = []
    for paper in (GPU_PAPER, OTHER_PAPER):
        shutil.copytree(DEMO_PSET / paper, root / paper)
        entry = "- id: " + next(e for e in entries if e.startswith(paper)).removeprefix("- id: ").rstrip() + "\n"
        kept.append(
            entry.replace(f"- id: {paper}\n", f"- id: {paper}\n  gpu: {value}\n") if paper == GPU_PAPER else entry
        )
    (root / "papers.yaml").write_text("\n".join(kept))
    return root


def test_a_gpu_value_that_is_not_true_or_false_is_refused_at_its_line(tmp_path):
    root = demo_with_gpu(tmp_path / "pset", value='"yes please"')
    with pytest.raises(PackageError) as refused:
        read_pset(root)
    line = next(n for n, text in enumerate((root / "papers.yaml").read_text().splitlines(), 1) if "gpu:" in text)
    problem = next(p for p in refused.value.problems if "gpu" in p.message)
    assert (problem.file, problem.line) == ("papers.yaml", line)
    assert problem.message == f"paper {GPU_PAPER}: gpu is 'yes please'; write true (its tests need a GPU) or false"


@pytest.mark.django_db
def test_the_paper_page_says_a_task_needs_a_gpu_and_its_items_route_to_the_gpu_queue(tmp_path, media_root, client):
    from config.celery import app

    version = pset_import(root=demo_with_gpu(tmp_path / "pset"), version_name="gpu-1.0.0", publish=True).version
    gpu_task = Task.objects.get(paper__slug=GPU_PAPER)
    assert gpu_task.needs_gpu and not Task.objects.exclude(pk=gpu_task.pk).filter(extra_metadata__gpu=True).exists()
    page = client.get(reverse("paper-detail", args=[version.name, GPU_PAPER])).content.decode()
    assert 'data-testid="needs-gpu"' in page and "Needs a GPU" in page
    other = client.get(reverse("paper-detail", args=[version.name, OTHER_PAPER])).content.decode()
    assert "Needs a GPU" not in other

    def queue_of(snippet: Snippet) -> str:
        options = app.amqp.router.route({}, "evaluation.tasks.item_evaluate", args=(1, snippet.pk, 0), kwargs={})
        return options["queue"].name

    assert {queue_of(s) for s in gpu_task.snippets.all()} == {"gpu"}
    assert {queue_of(s) for s in Snippet.objects.exclude(task=gpu_task)} == {"sandbox"}
    generate = app.amqp.router.route(
        {}, "evaluation.tasks.item_generate", args=(1, gpu_task.snippets.first().pk, 0), kwargs={}
    )
    assert generate["queue"].name == "llm"  # only the sandbox step needs the GPU


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_without_a_gpu_worker_the_items_wait_and_the_run_page_says_why(tmp_path, media_root, sandbox_cache, client):
    # The private filesystem broker of `make run`: no other test's worker on a shared Redis can take a message.
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    version = pset_import(root=demo_with_gpu(tmp_path / "pset"), version_name="gpu-1.0.0", publish=True).version
    gpu_items = Snippet.objects.filter(task__paper__slug=GPU_PAPER).count()
    with embedded_worker(
        tmp_path,
        queues="default,sandbox",
        env={
            "SANDBOX_BACKEND": "bwrap",
            "SANDBOX_CACHE_DIR": str(sandbox_cache),
            "MEDIA_ROOT": str(media_root),
            "RUN_FEED_SECONDS": "1",  # the GPU items waiting leave the slot to others: one more is fed each pass
        },
    ) as (worker, _):
        run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
        others = run.total_items - gpu_items
        polled(
            lambda: Outcome.objects.filter(run=run).count() >= others,
            timeout=300,
            worker=worker,
            what="the items that need no GPU",
        )

        assert not Outcome.objects.filter(run=run, snippet__task__paper__slug=GPU_PAPER).exists()
        assert Outcome.objects.filter(run=run, status="passed").count() == others
        assert EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.RUNNING  # waiting, not failed
        # The feeder keeps at most the run's share in flight (issue 20); the GPU items, fed last, wait in it, and
        # hold none of the sandbox worker's slots.
        polled(
            lambda: queues_waiting(("gpu",)) == {"gpu": min(gpu_items, settings.RUN_ITEMS_IN_FLIGHT)},
            timeout=60,
            worker=worker,
            what="the run's share of GPU items waiting",
        )
        page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
        progress = client.get(reverse("run-progress", args=[run.pk])).content.decode()
    assert "1 task needs a GPU; no GPU worker is registered" in page, page[:3000]
    assert 'data-testid="gpu-notice"' in progress


def test_the_docker_backend_requests_the_gpus_which_an_engine_without_one_refuses(tmp_path):
    from sandbox import backend_get

    backend = backend_get("docker", cache_dir=tmp_path / "docker-cache")
    ok, reason = backend.available()
    if not ok:
        service_missing("Docker", reason)
    assert backend.gpu
    requirements = ""
    environment = backend.environment_build(
        env_hash=hashlib.sha256(b"rcb-test-gpu\n").hexdigest(), requirements=requirements
    )
    quick = Limits(wall_seconds=30, memory_bytes=256 * 1024 * 1024, disk_bytes=32 * 1024 * 1024)
    probe = {"probe.py": b"print('ran')\n"}
    with backend.session(environment) as session:
        plain = session.run(files=probe, command=[environment.python, "probe.py"], limits=quick)
        assert plain.exit_code == 0 and "ran" in plain.stdout
        gpu = Limits(**{**quick.__dict__, "gpu": True})
        if Path("/dev/nvidia0").exists():  # a host with a GPU (and, it is assumed, NVIDIA's runtime)
            assert session.run(files=probe, command=[environment.python, "probe.py"], limits=gpu).exit_code == 0
            return
        with pytest.raises(SandboxError, match="(?i)gpu|device driver"):
            session.run(files=probe, command=[environment.python, "probe.py"], limits=gpu)
