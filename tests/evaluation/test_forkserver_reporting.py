"""What the fork server did, said: per item warm or cold, each start with its reason, and where it went cold for good,
from a real bwrap session through the executor to the run's manifest, the operations page and (for maintainers
only) a warning on the run page naming the environment."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.urls import reverse

from benchmarks.services.blobs import environment_hash
from benchmarks.services.psets import pset_import
from evaluation import executor, services
from evaluation.models import ModelEntry
from evaluation.reproducibility import run_manifest
from sandbox import forkserver
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing
from tests.evaluation.test_forkserver_papers import paper_files
from tests.evaluation.test_sandbox_attacks import LIMITS

pytestmark = pytest.mark.django_db


def test_starts_and_cold_items_reach_the_manifest_the_operations_page_and_the_run_page(
    sandbox_cache, media_root, client, maintainer, author, monkeypatch
):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = True
    monkeypatch.setattr(forkserver, "ZYGOTE_RESTARTS", 0)  # the first restart not caused by new imports turns it off
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    with backend.session(environment) as session:
        runs = [
            executor.harness_run(
                session=session, files=paper_files("fractions"), test_entry_point="paper2code_test.py", limits=LIMITS
            )
        ]
        runs.append(
            executor.harness_run(
                session=session, files=paper_files("decimal"), test_entry_point="paper2code_test.py", limits=LIMITS
            )
        )
        other_limits = replace(LIMITS, memory_bytes=LIMITS.memory_bytes + (64 << 20))
        runs.append(
            executor.harness_run(
                session=session,
                files=paper_files("decimal"),
                test_entry_point="paper2code_test.py",
                limits=other_limits,
            )
        )
    assert [r.forked for r in runs] == [True, True, False]
    assert [[s.reason for s in r.fork_starts] for r in runs] == [["first"], ["new imports"], []]
    assert "decimal" in runs[1].fork_starts[0].detail
    assert "had to start again 1 times" in runs[2].fork_cold and "other limits" in runs[2].fork_cold

    version = pset_import(root=DEMO_PSET, version_name="fork-1.0.0", publish=True).version
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, dispatch=False)
    for snippet, item in zip(version.tasks.order_by("pk").first().snippets.order_by("pk"), runs, strict=False):
        services.outcome_record(
            run=run,
            snippet=snippet,
            sample=0,
            verdict=item.verdict,
            result=item.result,
            backend=item.backend,
            worker="w1@host",
            forked=item.forked,
        )
        services.forkserver_events_record(
            run=run,
            worker="w1@host",
            environment_hash=environment.hash,
            backend=item.backend,
            starts=item.fork_starts,
            cold=item.fork_cold,
        )

    manifest = run_manifest(run=run, user=maintainer)["fork_server"]
    assert (manifest["items_warm"], manifest["items_cold"]) == (2, 1)
    assert manifest["start_reasons"] == {"first": 1, "new imports": 1}
    assert "decimal" in manifest["starts"][1]["detail"] and "other limits" in manifest["cold"][0]["detail"]
    # Nothing of this run is withheld from an author, yet a start's detail can name a held-out task's imports (a
    # worker preloads the release's every task) and its environment confirm a held-out task's requirements.
    public = run_manifest(run=run, user=author)["fork_server"]
    assert public["start_reasons"] == {"first": 1, "new imports": 1}
    assert all(set(event) == {"reason", "at"} for event in public["starts"]), public["starts"]
    assert all(set(event) <= {"reason", "at"} for event in public["cold"]) and len(public["cold"]) == 1

    client.force_login(maintainer)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "data-forkserver-cold" in page and f"environment {environment.hash[:12]} (bwrap)" in page
    assert "2 items started warm (forked from a preloaded interpreter), 1 started cold" in page
    assert "the fork server started 2 times:" in page and "start(s)" not in page
    operations = client.get("/operations/").content.decode()
    row = operations[operations.index(f'data-forkserver-run="{run.pk}"') :]
    assert "first 1, new imports 1" in row[:2000] and "other limits" in row[:2000]
    client.force_login(author)
    assert "data-forkserver-cold" not in client.get(reverse("run-detail", args=[run.pk])).content.decode()


def test_a_start_whose_preloads_load_no_ctypes_says_its_items_start_cold(sandbox_cache):
    """Such a fork server is closed at once and the item runs cold (test_forkserver_forgery.py says why): the start
    recorded says so, so that the run's page and manifest explain its cold items instead of showing a bare start."""
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash(""), requirements="")
    files = {"paper2code_test.py": b"import fractions\nimport model\n", "model.py": b"VALUE = 1\n"}
    with backend.session(environment) as session:
        run = executor.harness_run(session=session, files=files, test_entry_point="paper2code_test.py", limits=LIMITS)
    assert run.forked is False and [s.reason for s in run.fork_starts] == ["first"]
    assert forkserver.NO_CTYPES in run.fork_starts[0].detail
