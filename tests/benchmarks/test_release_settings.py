"""A release pins its evaluation settings (protocol, time, memory and CPU limits): set while draft, frozen at
publish (in the manifest), shown on its pages, and used by every run on it instead of the worker's settings."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from benchmarks.models import BenchmarkVersion
from benchmarks.services.curation import version_draft_create
from benchmarks.services.publishing import version_publish
from benchmarks.services.release_settings import version_settings_set
from benchmarks.templatetags.release_settings import MUTATION_THRESHOLD_WORDS
from evaluation import executor, services
from evaluation.models import ModelEntry, Outcome
from evaluation.tasks import item_evaluate
from tests.conftest import sandbox_backend_or_missing

pytestmark = pytest.mark.django_db


def sleepy_pset(root: Path, seconds: float = 3) -> Path:
    """One paper whose test takes `seconds` before it checks the one snippet."""
    paper = root / "sleepy"
    paper.mkdir(parents=True)
    (root / "papers.yaml").write_text(
        "- id: sleepy\n  title: A slow test\n  annotated_file_paths: model.py\n", encoding="utf-8"
    )
    (paper / "model.py").write_text(
        'def f(x):\n    # <paper2code name="add one">\n    return x + 1\n    # </paper2code name="add one">\n',
        encoding="utf-8",
    )
    (paper / "paper2code_paper.md").write_text("We add one, slowly.\n", encoding="utf-8")
    (paper / "paper2code_test.py").write_text(
        f"import time\nimport model\ntime.sleep({seconds})\nassert model.f(1) == 2\nprint('ok')\n", encoding="utf-8"
    )
    return root


def import_pset(root: Path, version: str, **options) -> str:
    out = StringIO()
    call_command("import_pset", str(root), version=version, stdout=out, **options)
    return out.getvalue()


def test_import_pset_pins_the_settings_in_the_manifest(tmp_path, media_root):
    out = import_pset(sleepy_pset(tmp_path), "1.0.0", time_limit=60, memory=2048, cpus=2, publish=True)
    assert "settings: protocol rcb-v1, time limit per test 60 s, memory 2048 MB, CPUs 2" in out
    release = BenchmarkVersion.objects.get(name="1.0.0")
    assert (release.time_limit_seconds, release.memory_mb, release.cpus) == (60, 2048, 2.0)
    assert release.manifest["settings"] == {
        "protocol": "rcb-v1",
        "time_limit_seconds": 60,
        "memory_mb": 2048,
        "cpus": 2.0,
    }
    other = import_pset(tmp_path, "1.0.1", time_limit=61, memory=2048, cpus=2, publish=True)
    assert "61 s" in other
    assert BenchmarkVersion.objects.get(name="1.0.1").manifest_hash != release.manifest_hash


def test_publish_fills_blank_limits_from_this_sites_settings(tmp_path, media_root, settings):
    settings.SANDBOX_WALL_SECONDS, settings.SANDBOX_MEMORY_MB, settings.SANDBOX_CPUS = 122.5, 3000, 1.5
    import_pset(sleepy_pset(tmp_path), "1.0.0", publish=True)
    release = BenchmarkVersion.objects.get(name="1.0.0")
    assert (release.protocol_id, release.time_limit_seconds, release.memory_mb, release.cpus) == (
        "rcb-v1",
        123,
        3000,
        1.5,
    )


def test_settings_of_a_release_never_change(tmp_path, media_root):
    import_pset(sleepy_pset(tmp_path), "1.0.0", time_limit=60, publish=True)
    release = BenchmarkVersion.objects.get(name="1.0.0")
    with pytest.raises(ValueError, match="release 1.0.0 is published and frozen"):
        version_settings_set(version=release, time_limit_seconds=300)
    with pytest.raises(
        CommandError,
        match="release 1.0.0 is published with time_limit_seconds 60; its settings are "
        "frozen: import into a new version name instead",
    ):
        import_pset(tmp_path, "1.0.0", time_limit=300)
    assert "unchanged" in import_pset(tmp_path, "1.0.0", time_limit=60)  # the same settings are no change
    release.refresh_from_db()
    assert release.time_limit_seconds == 60


@pytest.mark.parametrize(
    "options, message",
    [
        ({"time_limit": 0}, "time_limit_seconds: Ensure this value is greater than or equal to 1."),
        ({"memory": 10}, "memory_mb: Ensure this value is greater than or equal to 64."),
        ({"protocol": "rcb-v7"}, "unknown prompt protocol 'rcb-v7'; known: rcb-v1"),
    ],
)
def test_bad_settings_import_nothing(tmp_path, media_root, options, message):
    with pytest.raises(CommandError, match=message):
        import_pset(sleepy_pset(tmp_path), "1.0.0", **options)
    assert not BenchmarkVersion.objects.filter(name="1.0.0").exists()


def test_a_new_draft_keeps_the_settings_and_the_changelog_names_a_change(tmp_path, media_root):
    import_pset(sleepy_pset(tmp_path), "1.0.0", time_limit=60, memory=2048, cpus=1, publish=True)
    draft = version_draft_create(name="1.1.0")
    assert (draft.protocol_id, draft.time_limit_seconds, draft.memory_mb, draft.cpus) == ("rcb-v1", 60, 2048, 1.0)
    version_settings_set(version=draft, time_limit_seconds=90)
    published = version_publish(version=draft)
    assert published.changelog["settings"] == [{"setting": "time_limit_seconds", "from": 60, "to": 90}]
    page = Client().get("/versions/1.1.0/").content.decode()
    assert "time limit: 60 s → 90 s" in page


def test_release_and_leaderboard_pages_and_api_show_the_settings(tmp_path, media_root):
    import_pset(sleepy_pset(tmp_path), "1.0.0", time_limit=60, memory=2048, cpus=0.5, publish=True)
    client = Client()
    for url in ("/versions/1.0.0/", "/versions/1.0.0/leaderboard/"):
        page = client.get(url).content.decode()
        assert "Evaluation settings" in page and "<code>rcb-v1</code>" in page, url
        assert "60 s" in page and "2048 MB" in page and "<dd>0.5</dd>" in page, url
        # said as a number, and as the release's own since publish (issue 35's walk: it read as a site setting)
        assert "60%, kept since publish: a warning threshold: validation warns below it" in page, url
    body = client.get("/api/v1/releases/1.0.0/").json()
    assert body["settings"] == {"protocol": "rcb-v1", "time_limit_seconds": 60, "memory_mb": 2048, "cpus": 0.5}


def test_maintainers_set_a_drafts_settings_on_its_curate_page(tmp_path, media_root, maintainer, author):
    import_pset(sleepy_pset(tmp_path), "1.0.0")
    client = Client()
    client.force_login(maintainer)
    assert 'name="time_limit_seconds"' in client.get("/versions/1.0.0/curate/").content.decode()
    form = {"protocol": "rcb-v1", "time_limit_seconds": "45", "memory_mb": "", "cpus": "2"}
    client.post("/versions/1.0.0/curate/settings/", form)
    draft = BenchmarkVersion.objects.get(name="1.0.0")
    assert (draft.time_limit_seconds, draft.memory_mb, draft.cpus) == (45, None, 2.0)
    refused = client.post("/versions/1.0.0/curate/settings/", {**form, "cpus": "many"}, follow=True)
    assert "cpus: &#x27;many&#x27; is not a number" in refused.content.decode()
    client.force_login(author)
    assert client.post("/versions/1.0.0/curate/settings/", {**form, "time_limit_seconds": "1"}).status_code == 403
    assert BenchmarkVersion.objects.get(name="1.0.0").time_limit_seconds == 45


def test_the_curate_pages_help_is_read_with_its_fields_not_inside_their_labels(tmp_path, media_root, maintainer):
    """Last session's walk: the minimum mutation score's label held its help ("0-1; a warning threshold: ..."), so a
    screen reader announced all of it as the field's name. The label names the field; the help is its own element,
    named by the field's aria-describedby, as is the note on blank limits for every limit."""
    import_pset(sleepy_pset(tmp_path), "1.0.0")
    client = Client()
    client.force_login(maintainer)
    page = client.get("/versions/1.0.0/curate/").content.decode()
    labels = re.findall(r"<label\b[^>]*>(.*?)</label>", page, flags=re.S)
    assert "Minimum mutation score" in labels
    assert not [label for label in labels if "warning threshold" in label or "0-1" in label], labels
    described = {
        name: ids.split() for name, ids in re.findall(r'<input[^>]*name="(\w+)"[^>]*aria-describedby="([^"]+)"', page)
    }
    assert described["mutation_score_min"] == ["id_mutation_score_min_help", "settings-blank-help"]
    for name in ("time_limit_seconds", "memory_mb", "cpus"):
        assert described[name] == ["settings-blank-help"], name
    helps = dict(re.findall(r'<(?:small|p)\b[^>]*id="([^"]+)"[^>]*>(.*?)</(?:small|p)>', page, flags=re.S))
    assert helps["id_mutation_score_min_help"] == f"0-1; {MUTATION_THRESHOLD_WORDS}"
    assert helps["settings-blank-help"].startswith("Blank limits take this site's settings")


def test_limits_for_release_override_the_workers(tmp_path, media_root, settings):
    settings.SANDBOX_WALL_SECONDS, settings.SANDBOX_MEMORY_MB, settings.SANDBOX_CPUS = 300.0, 4096, 1.0
    import_pset(sleepy_pset(tmp_path), "1.0.0", time_limit=60, memory=512, cpus=2, publish=True)
    limits = executor.limits_for_release(BenchmarkVersion.objects.get(name="1.0.0"))
    assert (limits.wall_seconds, limits.memory_bytes, limits.cpus) == (60.0, 512 * 1024 * 1024, 2.0)
    assert limits.processes == settings.SANDBOX_PROCESSES


@pytest.fixture
def bwrap(sandbox_cache, executor_backend):
    executor_backend(sandbox_backend_or_missing("bwrap", sandbox_cache))
    yield


def test_runs_use_the_releases_time_limit_not_the_workers(tmp_path, media_root, settings, bwrap):
    settings.SANDBOX_WALL_SECONDS = 300.0
    root = sleepy_pset(tmp_path, seconds=3)
    import_pset(root, "1.0.0", time_limit=1, publish=True)
    import_pset(root, "1.1.0", time_limit=60, publish=True)
    outcomes = {}
    for name in ("1.0.0", "1.1.0"):
        run = services.run_start(
            model=ModelEntry.objects.get(name="reference"),
            version=BenchmarkVersion.objects.get(name=name),
            dispatch=False,
        )
        snippet = run.version.tasks.get().snippets.get()
        type(run).objects.filter(pk=run.pk).update(status="running")
        item_evaluate.apply(args=(run.pk, snippet.pk, 0), throw=True)
        outcomes[name] = Outcome.objects.get(run=run)
    assert (outcomes["1.0.0"].status, outcomes["1.0.0"].category) == ("failed", "timeout")
    assert "time limit" in outcomes["1.0.0"].detail
    assert outcomes["1.1.0"].status == "passed"
    assert [outcomes[name].limits["wall_seconds"] for name in ("1.0.0", "1.1.0")] == [1.0, 60.0]
