"""Every page and API endpoint x every role x public item, held-out item and draft version: the status each role
gets, and no line of the held-out task's code or tests (nor its name) in any body a non-maintainer receives.

The URL list is read from the URLconf itself (API routes included), so a new endpoint without a row in CASES
fails `test_every_route_has_cases` until someone decides who may see it.
"""

from __future__ import annotations

import io
import json
import textwrap
import zipfile
from pathlib import Path

import pytest
from django.contrib import admin as django_admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from benchmarks.models import Snippet, VersionTask
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.outcomes import Verdict
from evaluation.selectors.items import run_snippets
from humans.services import attempt_open
from submissions.services import submission_create

pytestmark = pytest.mark.django_db

HIDDEN_SLUG = "zq-secret"
HIDDEN_TITLE = "Zqx Hidden Paper Title"
HIDDEN_CODE = """\
def secret_value(x):
    # <paper2code name="secret outer">
    zqx_hidden_alpha = x * 4242 + 17
    # <paper2code name="secret inner">
    zqx_hidden_beta = zqx_hidden_alpha - 9191
    # </paper2code name="secret inner">
    # </paper2code name="secret outer">
    return zqx_hidden_beta
"""
HIDDEN_TEST = """\
import secretmod

zqx_hidden_test_gamma = secretmod.secret_value(2)
assert zqx_hidden_test_gamma == 2 * 4242 + 17 - 9191, "zqx_hidden_test_delta"
print("zqx hidden test passed")
"""
OPEN_CODE = """\
def open_value(x):
    # <paper2code name="open double">
    doubled = x * 2
    # </paper2code name="open double">
    return doubled
"""
OPEN_TEST = "import openmod\n\nassert openmod.open_value(3) == 6\n"
# What must never reach a non-maintainer: every line of the held-out task's code and tests, and its name.
SECRETS = sorted(
    {ln.strip() for ln in (HIDDEN_CODE + HIDDEN_TEST).splitlines() if "zqx" in ln} | {HIDDEN_SLUG, HIDDEN_TITLE}
)
ROLES = ("anonymous", "author", "other", "maintainer", "admin")
NON_MAINTAINERS = ("anonymous", "author", "other")


def _write_pset(root: Path) -> Path:
    root.mkdir()
    (root / "papers.yaml").write_text(
        textwrap.dedent(f"""\
        - id: zq-open
          title: Zq Open Paper
          annotated_file_paths: openmod.py
          context_file_paths: null
        - id: {HIDDEN_SLUG}
          title: {HIDDEN_TITLE}
          annotated_file_paths: secretmod.py
          context_file_paths: null
        """)
    )
    for slug, module, code, test in (
        ("zq-open", "openmod", OPEN_CODE, OPEN_TEST),
        (HIDDEN_SLUG, "secretmod", HIDDEN_CODE, HIDDEN_TEST),
    ):
        (root / slug).mkdir()
        (root / slug / "paper2code_paper.md").write_text(f"# {slug}\n\nA paper about {module}.\n")
        (root / slug / f"{module}.py").write_text(code)
        (root / slug / "paper2code_test.py").write_text(test)
    return root


def _finish(run: EvaluationRun, *, hostile_detail: bool) -> None:
    """Outcomes for every item of the run; a held-out one carries what a hostile answer printed (the task's code
    and tests as lines ending in `Error`) in its detail and output tails."""
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    leak = "\n".join(f"{ln} Error" for ln in (HIDDEN_CODE + HIDDEN_TEST).splitlines())
    for snippet in run_snippets(run=run):
        generation = services.calibration_generation(run=run, snippet=snippet, sample=0)
        held = snippet.task.paper.slug == HIDDEN_SLUG
        verdict = Verdict("failed", "runtime", leak) if held and hostile_detail else Verdict("passed", "", "")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
        if held:
            Outcome.objects.filter(run=run, snippet=snippet).update(stdout_tail=leak, stderr_tail=leak)
    assert services.run_maybe_finish(run=run)


@pytest.fixture
def world(tmp_path, media_root, author, other_author, maintainer, admin):
    imported = pset_import(root=_write_pset(tmp_path / "set"), version_name="1.0.0")
    version = imported.version
    version_task_set(version=version, task=version.tasks.get(paper__slug=HIDDEN_SLUG), split=VersionTask.Split.HELD_OUT)
    version = version_publish(version=version, downloads_inline=True)
    draft = version_draft_create(name="1.1.0")
    held = Snippet.objects.filter(task__paper__slug=HIDDEN_SLUG).order_by("pk")
    public = Snippet.objects.get(task__paper__slug="zq-open")

    reference = services.run_start(
        model=ModelEntry.objects.get(name="reference"), version=version, user=maintainer, dispatch=False
    )
    assert reference.covers_held_out and reference.total_items == 3
    _finish(reference, hostile_detail=True)
    own = services.model_register(
        name="ada-model", display_name="Ada", litellm_model="openai/ada", owner=author, api_key="sk-ada"
    )
    own_run = services.run_start(model=own, version=version, user=author, dispatch=False)
    assert not own_run.covers_held_out and own_run.total_items == 1
    uploaded = services.run_from_upload(
        model=own,
        version=version,
        user=author,
        data=json.dumps({"id": str(public.pk), "sample": 0, "code": "    doubled = x * 2\n"}).encode(),
    )
    assert not uploaded.covers_held_out
    _finish(own_run, hostile_detail=False)
    _finish(uploaded, hostile_detail=False)
    submission = submission_create(author=author)
    attempt = attempt_open(user=author, version=version, snippet_id=public.pk)
    return {
        "attempt": attempt,
        "version": version,
        "draft": draft,
        "held": held,
        "public": public,
        "reference": reference,
        "own_run": own_run,
        "uploaded": uploaded,
        "model": own,
        "submission": submission,
        "users": {"author": author, "other": other_author, "maintainer": maintainer, "admin": admin},
    }


# Expected status per role: O open, M maintainers' page, H held-out or draft data, S signed in, A author only.
OPEN = dict.fromkeys(ROLES, 200)
MAINT = {"anonymous": 302, "author": 403, "other": 403, "maintainer": 200, "admin": 200}
MAINT_API = {"anonymous": 403, "author": 403, "other": 403, "maintainer": 200, "admin": 200}
HIDDEN = {"anonymous": 404, "author": 404, "other": 404, "maintainer": 200, "admin": 200}
HIDDEN_MAINT = {"anonymous": 403, "author": 403, "other": 403, "maintainer": 200, "admin": 200}
SIGNED_IN = {"anonymous": 302, "author": 200, "other": 200, "maintainer": 200, "admin": 200}
AUTHOR = {"anonymous": 302, "author": 200, "other": 403, "maintainer": 200, "admin": 200}
POST_ONLY = dict.fromkeys(ROLES, 405)
POST_MAINT = {"anonymous": 302, "author": 403, "other": 403, "maintainer": 405, "admin": 405}
POST_API = {"anonymous": 401, "author": 405, "other": 405, "maintainer": 405, "admin": 405}
NOT_FOUND = dict.fromkeys(ROLES, 404)
STAFF = {"anonymous": 302, "author": 302, "other": 302, "maintainer": 302, "admin": 200}
REDIRECT = dict.fromkeys(ROLES, 302)
MOVED = dict.fromkeys(ROLES, 301)
# A draft has no runs: hidden from non-maintainers, and for maintainers these runs are not on it.
HIDDEN_DRAFT_COMPARE = {**HIDDEN, "maintainer": 400, "admin": 400}


def _outcome(run_pk: int, snippet: Snippet) -> Outcome:
    return Outcome.objects.get(run_id=run_pk, snippet=snippet)


def _cases(w: dict) -> dict[str, list[tuple[str, dict, str, dict]]]:
    """URL name -> (label, kwargs, query string, expected status per role) for each kind of data."""
    v, d = w["version"].name, w["draft"].name
    held, public = w["held"], w["public"]
    held_task, public_task = held[0].task, public.task
    ref, own, up = w["reference"].pk, w["own_run"].pk, w["uploaded"].pk
    sub = w["submission"].pk
    leaderboard = [
        (f"{view} tab", {"name": v}, f"view={view}", OPEN)
        for view in ("papers", "sizes", "ablation", "contamination", "failures")
    ]
    return {
        "healthz": [("site", {}, "", OPEN)],
        "api-tokens": [("own tokens", {}, "", SIGNED_IN)],
        "account-name": [("own name", {}, "", SIGNED_IN)],
        "login": [("form", {}, "", OPEN)],
        "logout": [("form", {}, "", POST_ONLY)],
        "password_change": [("form", {}, "", SIGNED_IN)],
        "password_change_done": [("page", {}, "", SIGNED_IN)],
        "password_reset": [("form", {}, "", OPEN)],
        "password_reset_done": [("page", {}, "", OPEN)],
        "password_reset_confirm": [("bad token", {"uidb64": "x", "token": "y"}, "", OPEN)],
        "password_reset_complete": [("page", {}, "", OPEN)],
        "api-release-list": [("releases", {}, "", OPEN)],
        "api-release-detail": [("public release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        "api-release-download": [(f"{kind}", {"name": v, "kind": kind}, "", OPEN) for kind in ("pset", "items")]
        + [("draft pset", {"name": d, "kind": "pset"}, "", NOT_FOUND)],
        "api-item-list": [("release items", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        "api-item-detail": [("public item", {"name": v, "item_id": public.pk}, "", OPEN)]
        + [(f"held-out item {s.name}", {"name": v, "item_id": s.pk}, "", HIDDEN) for s in held]
        + [
            (f"held-out item {s.name} without paper", {"name": v, "item_id": s.pk}, "with_paper=false", HIDDEN)
            for s in held
        ]
        + [("draft item", {"name": d, "item_id": public.pk}, "", NOT_FOUND)],
        "api-leaderboard": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        "api-leaderboard-csv": [("release", {"name": v}, "", OPEN)],
        "api-model-list": [("models", {}, "", OPEN)],
        "api-model-detail": [
            ("author's model", {"name": w["model"].name}, "", OPEN),
            ("reference model", {"name": "reference"}, "", OPEN),
        ],
        "api-run-start": [("form", {}, "", POST_API)],
        "api-run-upload": [("form", {}, "", POST_API)],
        "api-run-harbor": [("form", {}, "", POST_API)],
        "api-run-detail": [
            (label, {"pk": pk}, "", OPEN)
            for label, pk in (("reference run", ref), ("author's run", own), ("upload", up))
        ],
        "api-run-cancel": [("reference run", {"pk": ref}, "", POST_API)],
        "api-run-resume": [("reference run", {"pk": ref}, "", POST_API)],
        "api-run-priority": [("reference run", {"pk": ref}, "", POST_API)],
        "api-run-verify": [("upload", {"pk": up}, "", POST_API)],
        "api-run-manifest": [
            (label, {"pk": pk}, "", OPEN)
            for label, pk in (("reference run", ref), ("author's run", own), ("upload", up))
        ],
        "api-run-results": [
            (label, {"pk": pk}, "", OPEN)
            for label, pk in (("reference run", ref), ("author's run", own), ("upload", up))
        ],
        "api-schema": [("schema", {}, "", OPEN)],
        "api-docs": [("swagger", {}, "", OPEN)],
        "api-docs-short": [("the guides' address of the docs", {}, "", REDIRECT)],
        "/api/v1/<catch-all>": [("unknown", {"path": "nothing/here/"}, "", NOT_FOUND)],
        "signup": [("form", {}, "", OPEN)],
        "submission-list": [("own", {}, "", SIGNED_IN)],
        "submission-new": [("form", {}, "", SIGNED_IN)],
        "submission-detail": [("author's draft", {"pk": sub}, "", AUTHOR)],
        "submission-report": [("author's draft", {"pk": sub}, "", AUTHOR)],
        # the draft has no r1: its author and maintainers are told so, anyone else is refused before that
        "submission-revision": [
            (
                "author's draft's missing r1",
                {"pk": sub, "number": 1},
                "",
                {**AUTHOR, "author": 404, "maintainer": 404, "admin": 404},
            )
        ],
        "submission-step": [
            ("author's draft", {"pk": sub, "step": "details"}, "", {**AUTHOR, "maintainer": 403, "admin": 403})
        ],
        "comment-create": [("author's draft", {"pk": sub}, "", {**POST_ONLY, "anonymous": 302})],
        "answer-try": [("author's draft", {"pk": sub}, "", {**POST_ONLY, "anonymous": 302})],
        # The tried answers' list: its author's and maintainers' (polled by the page); to anyone else no such thing.
        "tried-answers": [("author's draft", {"pk": sub}, "", {**AUTHOR, "other": 404})],
        # A draft has no revision, so no recording to propose tests from: not found, to those who may see it.
        "proposed-tests": [
            ("author's draft", {"pk": sub}, "", {**AUTHOR, "author": 404, "maintainer": 404, "admin": 404})
        ],
        "submission-action": [
            ("author's draft", {"pk": sub, "action": "withdraw"}, "", {**POST_ONLY, "anonymous": 302})
        ],
        "review-queue": [("queue", {}, "", MAINT)],
        "review-detail": [("author's draft", {"pk": sub}, "", MAINT)],
        "leaderboard-latest": [("latest", {}, "", REDIRECT)],
        # The release pages' other prefix answers a permanent redirect to /versions/, whose page then decides.
        "release-alias": [
            ("public release", {"rest": f"{v}/"}, "", MOVED),
            ("draft", {"rest": f"{d}/"}, "", MOVED),
            ("prefix alone", {"rest": ""}, "", MOVED),
        ],
        "versions-index": [("prefix alone", {}, "", MOVED)],
        "leaderboard": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)] + leaderboard,
        "model-new": [("form", {}, "", SIGNED_IN)],
        "model-edit": [("author's model", {"name": w["model"].name}, "", AUTHOR)],
        "my-models": [("page", {}, "", SIGNED_IN)],
        "my-runs": [("page", {}, "", SIGNED_IN)],
        # A GET of these POST-only forms goes to the model's page (it was a blank 405); anonymous to sign in.
        "run-new": [("author's model", {"name": w["model"].name}, "", dict.fromkeys(ROLES, 302))],
        "run-upload": [("author's model", {"name": w["model"].name}, "", dict.fromkeys(ROLES, 302))],
        "run-harbor-import": [("author's model", {"name": w["model"].name}, "", dict.fromkeys(ROLES, 302))],
        "model-parity": [
            ("release", {"name": w["model"].name, "release": v}, "", OPEN),
            ("draft", {"name": w["model"].name, "release": d}, "", HIDDEN),
        ],
        "environment-retry": [("a failed build", {"pk": 1}, "", POST_MAINT)],
        "model-detail": [
            ("author's model", {"name": w["model"].name}, "", OPEN),
            ("reference model", {"name": "reference"}, "", OPEN),
        ],
        "run-detail": [
            (label, {"pk": pk}, "", OPEN)
            for label, pk in (("reference run", ref), ("author's run", own), ("upload", up))
        ],
        "run-progress": [("reference run", {"pk": ref}, "", OPEN)],
        "run-item": [
            ("public item of the reference run", {"pk": ref, "outcome_pk": _outcome(ref, public).pk}, "", OPEN),
            ("public item of the author's run", {"pk": own, "outcome_pk": _outcome(own, public).pk}, "", OPEN),
            ("public item of the upload", {"pk": up, "outcome_pk": _outcome(up, public).pk}, "", OPEN),
        ]
        + [
            (f"held-out item {s.name} of the reference run", {"pk": ref, "outcome_pk": _outcome(ref, s).pk}, "", HIDDEN)
            for s in held
        ]
        + [("an outcome of another run", {"pk": own, "outcome_pk": _outcome(ref, held[0]).pk}, "", NOT_FOUND)],
        # Single-shot runs have no trajectory: none to anyone, in either format (an agent run's held-out trajectory:
        # test_agent_runs, test_agent_uploads).
        "run-item-trajectory": [
            ("public single-shot item", {"pk": ref, "outcome_pk": _outcome(ref, public).pk}, "", NOT_FOUND)
        ]
        + [
            (f"held-out single-shot item {s.name}", {"pk": ref, "outcome_pk": _outcome(ref, s).pk}, "", NOT_FOUND)
            for s in held
        ],
        "run-item-trajectory-atif": [
            ("public single-shot item", {"pk": ref, "outcome_pk": _outcome(ref, public).pk}, "", NOT_FOUND)
        ]
        + [
            (f"held-out single-shot item {s.name}", {"pk": ref, "outcome_pk": _outcome(ref, s).pk}, "", NOT_FOUND)
            for s in held
        ],
        "operations": [("page", {}, "", MAINT)],
        "flag-queue": [("queue", {}, "", MAINT)],
        "run-resume": [("reference run", {"pk": ref}, "", POST_MAINT)],
        "run-cancel": [("author's run", {"pk": own}, "", {**POST_ONLY, "anonymous": 302})],
        "run-pin": [("author's run", {"pk": own}, "", {**POST_ONLY, "anonymous": 302})],
        "run-resume-own": [("author's run", {"pk": own}, "", {**POST_ONLY, "anonymous": 302})],
        "run-verify": [("upload", {"pk": up}, "", POST_MAINT)],
        "run-manifest": [
            (label, {"pk": pk}, "", OPEN)
            for label, pk in (("reference run", ref), ("author's run", own), ("upload", up))
        ],
        "home": [("versions", {}, "", OPEN)],
        "guide": [(slug, {"slug": slug}, "", OPEN) for slug in ("format", "submitting", "leaderboard")],
        "guide-index": [("guides", {}, "", OPEN)],
        "guide-example": [("demo paper archive", {}, "", OPEN)],
        "release-compare": [
            ("reference and author's run", {"name": v}, f"a={ref}&b={own}", OPEN),
            ("draft", {"name": d}, f"a={ref}&b={own}", HIDDEN_DRAFT_COMPARE),
        ],
        "release-difficulty": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        # The human baseline: its figures are public; an attempt is its person's (and maintainers', to review).
        "release-humans": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        "api-release-humans": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", NOT_FOUND)],
        "human-listing": [("release", {"name": v}, "", POST_ONLY)],
        "attempt-open": [("release", {"name": v}, "", POST_ONLY)],
        "reference-show": [("public paper", {"name": v, "slug": "zq-open"}, "", POST_ONLY)],
        "attempt-detail": [
            ("the author's open attempt", {"pk": w["attempt"].pk}, "", {**AUTHOR, "other": 404}),
        ],
        **{
            name: [("the author's attempt", {"pk": w["attempt"].pk}, "", POST_ONLY)]
            for name in ("attempt-pause", "attempt-resume", "attempt-abandon", "attempt-exclude", "attempt-flag-review")
        },
        "api-attempt-open": [("release", {"name": v}, "", POST_API)],
        "api-attempt-detail": [
            ("the author's open attempt", {"pk": w["attempt"].pk}, "", {**AUTHOR, "anonymous": 401, "other": 404}),
        ],
        **{
            name: [("the author's attempt", {"pk": w["attempt"].pk}, "", POST_API)]
            for name in ("api-attempt-submit", "api-attempt-pause", "api-attempt-resume", "api-attempt-abandon")
        },
        "api-difficulty": [
            ("release", {"name": v}, "", OPEN),
            ("release as CSV", {"name": v}, "format=csv", OPEN),
            ("draft", {"name": d}, "", NOT_FOUND),
        ],
        "api-compare": [
            ("reference and author's run", {"name": v}, f"a={ref}&b={own}", OPEN),
            ("draft", {"name": d}, f"a={ref}&b={own}", NOT_FOUND),
        ],
        "outcome-review": [
            ("a reference outcome", {"pk": ref, "outcome_pk": w["reference"].outcomes.first().pk}, "", POST_MAINT)
        ],
        "version-new": [("form", {}, "", MAINT)],
        "version-detail": [("release", {"name": v}, "", OPEN), ("draft", {"name": d}, "", HIDDEN)],
        "version-download": [(kind, {"name": v, "kind": kind}, "", OPEN) for kind in ("pset", "items")],
        "version-curate": [
            ("draft", {"name": d}, "", MAINT),
            ("release", {"name": v}, "", {**MAINT, "maintainer": 404, "admin": 404}),
        ],
        "version-task-add": [("draft", {"name": d}, "", POST_ONLY)],
        "version-task-split": [("held-out task", {"name": d, "task_id": held_task.pk}, "", POST_ONLY)],
        "version-task-drop": [("public task", {"name": d, "task_id": public_task.pk}, "", POST_ONLY)],
        "version-snippet-retire": [("held-out item", {"name": d, "snippet_id": held[0].pk}, "", POST_ONLY)],
        "version-publish": [("draft", {"name": d}, "", POST_ONLY)],
        "version-settings": [("draft", {"name": d}, "", POST_ONLY)],
        "version-validate": [("draft", {"name": d}, "", POST_ONLY)],
        "version-validation": [("draft", {"name": d}, "", MAINT)],
        "version-deprecate": [("release", {"name": v}, "", POST_ONLY)],
        "version-downloads-retry": [("release", {"name": v}, "", POST_ONLY)],
        "paper-detail": [
            ("public paper", {"name": v, "slug": "zq-open"}, "", OPEN),
            ("held-out paper", {"name": v, "slug": HIDDEN_SLUG}, "", HIDDEN),
            ("draft paper", {"name": d, "slug": "zq-open"}, "", HIDDEN),
        ],
        "snippet-masked": [("public item", {"name": v, "snippet_id": public.pk}, "", HIDDEN_MAINT)]
        + [(f"held-out item {s.name}", {"name": v, "snippet_id": s.pk}, "", HIDDEN_MAINT) for s in held],
    }


def _routes(resolver=None, prefix: str = "") -> list[tuple[str, str]]:
    """(key, pattern) of every route outside the admin site: its name, or its full pattern when unnamed."""
    resolver = resolver or get_resolver()
    routes = []
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.app_name != "admin":
                routes += _routes(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            full = prefix + str(pattern.pattern)
            unnamed = "/api/v1/<catch-all>" if prefix.startswith("api/v1/") else full
            routes.append((pattern.name or unnamed, full))
    return routes


def _admin_urls(w: dict) -> list[tuple[str, str]]:
    """The admin site: its index, and the list and change page of every registered model (held-out rows first)."""
    urls = [("admin index", reverse("admin:index"))]
    for model in django_admin.site._registry:
        meta = model._meta
        urls.append((f"admin {meta.label} list", reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")))
        row = (
            w["held"][0]
            if model is Snippet
            else w["held"][0].task
            if model is w["held"][0].task.__class__
            else model.objects.first()
        )
        if row is not None:
            urls.append(
                (f"admin {meta.label} row", reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[row.pk]))
            )
    return urls


def _client(role: str, users: dict) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(users[role])
    return client


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    return [text for item in value for text in _strings(item)] if isinstance(value, list) else [str(value)]


def _text(response) -> str:
    """The body as text: a zip download member by member, JSON (and JSON lines) as its strings unescaped."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    if body[:2] == b"PK":
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            return "\n".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())
    text = body.decode("utf-8", "replace")
    if "json" in response.get("Content-Type", ""):
        for line in text.splitlines() if "ndjson" in response["Content-Type"] else [text]:
            text += "\n" + "\n".join(_strings(json.loads(line)))
    return text


def _leaks(text: str) -> list[str]:
    """The secrets a body holds: as sent, with entities resolved, or with tags dropped (highlighted code is split
    into one span per token, so a leaked line reads whole only without them)."""
    import re
    from html import unescape

    plain = unescape(text)
    untagged = unescape(re.sub(r"<[^>]+>", "", text))
    return [secret for secret in SECRETS if secret in text or secret in plain or secret in untagged]


def test_every_route_has_cases(world):
    routes = {key for key, _ in _routes()}
    cases = set(_cases(world))
    assert not routes - cases, f"routes nobody has decided visibility for: {sorted(routes - cases)}"
    assert not cases - routes, f"cases for routes that no longer exist: {sorted(cases - routes)}"


@pytest.mark.parametrize("role", ROLES)
def test_matrix(world, role):
    client = _client(role, world["users"])
    problems, requests = [], 0
    patterns = dict(_routes())
    for name, cases in _cases(world).items():
        for label, kwargs, query, expected in cases:
            url = f"/api/v1/{kwargs['path']}" if name == "/api/v1/<catch-all>" else reverse(name, kwargs=kwargs)
            response = client.get(url + (f"?{query}" if query else ""))
            requests += 1
            where = f"{name} ({label}) {url}{'?' + query if query else ''} [{patterns.get(name, '')}]"
            if response.status_code != expected[role]:
                problems.append(f"{where}: status {response.status_code}, expected {expected[role]}")
            # A 404 page may quote the address asked for: the asker's own words, not a leak.
            if role in NON_MAINTAINERS and (leaked := _leaks(_text(response).replace(url, ""))):
                problems.append(f"{where}: shows {leaked}")
    for label, url in _admin_urls(world):
        response = client.get(url)
        requests += 1
        if response.status_code != STAFF[role]:
            problems.append(f"{label} {url}: status {response.status_code}, expected {STAFF[role]}")
        if role in NON_MAINTAINERS and (leaked := _leaks(_text(response))):
            problems.append(f"{label} {url}: shows {leaked}")
    assert requests > 80
    assert not problems, "\n".join(problems)


def test_maintainers_do_see_the_held_out_items_the_matrix_hides(world):
    """The scan finds what it looks for: the same bodies, as a maintainer, hold the held-out code and outputs."""
    client = _client("maintainer", world["users"])
    v, held = world["version"].name, world["held"]
    inner = held.get(name="secret inner")
    prompt = client.get(reverse("api-item-detail", kwargs={"name": v, "item_id": inner.pk})).json()["prompt"]
    assert "zqx_hidden_alpha = x * 4242 + 17" in prompt  # the sibling's code, unmasked in the prompt
    run_page = client.get(reverse("run-detail", kwargs={"pk": world["reference"].pk})).content.decode()
    assert _leaks(run_page) and "Error" in run_page
    item = _outcome(world["reference"].pk, inner)
    item_page = client.get(reverse("run-item", kwargs={"pk": world["reference"].pk, "outcome_pk": item.pk}))
    assert "zqx_hidden_beta = zqx_hidden_alpha - 9191" in _leaks(item_page.content.decode())
    results = client.get(reverse("api-run-results", kwargs={"pk": world["reference"].pk})).json()
    assert results["count"] == 3
    anonymous = Client().get(reverse("api-run-results", kwargs={"pk": world["reference"].pk})).json()
    assert anonymous["count"] == 1 and anonymous["results"][0]["item"] == world["public"].pk


def test_scores_are_reported_per_split_and_held_out_ones_only_in_aggregate(world):
    v = world["version"].name
    detail = Client().get(reverse("api-run-detail", kwargs={"pk": world["reference"].pk})).json()
    assert detail["covers_held_out"] is True
    assert detail["split_scores"]["public"]["items"] == 1 and detail["split_scores"]["held_out"]["items"] == 2
    assert detail["split_scores"]["held_out"]["scaled_pass_rate"] == 0.0  # both held-out items failed
    own = Client().get(reverse("api-run-detail", kwargs={"pk": world["own_run"].pk})).json()
    assert own["covers_held_out"] is False and own["total_items"] == 1
    rows = {r["run"]: r for r in Client().get(reverse("api-leaderboard", kwargs={"name": v})).json()}
    reference = rows[world["reference"].pk]
    assert reference["scaled_pass_rate"] == 100.0 and reference["items"] == 1
    assert reference["held_out_scaled_pass_rate"] == 0.0 and reference["held_out_items"] == 2
    assert rows[world["uploaded"].pk]["held_out_items"] is None
    page = Client().get(reverse("run-detail", kwargs={"pk": world["reference"].pk})).content.decode()
    assert "Held-out split (aggregate only)" in page and "2 held-out items not listed" in page
    # The size tab counts only what the viewer may see item by item: all three items sit in the 1-2 lines bucket.
    sizes = {"name": v}
    anonymous = Client().get(reverse("leaderboard", kwargs=sizes), {"view": "sizes"}).content.decode()
    maintainer = (
        _client("maintainer", world["users"])
        .get(reverse("leaderboard", kwargs=sizes), {"view": "sizes"})
        .content.decode()
    )
    assert "(1/1)" in anonymous and "(1/3)" not in anonymous and "(1/3)" in maintainer


def test_an_upload_cannot_name_or_need_a_held_out_item(world):
    model, version, held = world["model"], world["version"], world["held"][0]
    public = world["public"]
    rows = [
        {"id": str(public.pk), "sample": 0, "code": "    doubled = x * 2\n"},
        {"id": str(held.pk), "sample": 0, "code": "    zqx = 1\n"},
    ]
    with pytest.raises(services.UploadError) as refused:
        services.run_from_upload(model=model, version=version, data="\n".join(map(json.dumps, rows)).encode())
    assert refused.value.problems == [f"line 2: unknown item id '{held.pk}' in release {version.name}"]


def test_only_endpoints_maintainers_trust_get_held_out_prompts(world, settings, maintainer, author):
    from evaluation.selectors.held_out import run_covers_held_out

    version = world["version"]
    cases = [
        (
            dict(name="m-own", litellm_model="openai/x", owner=maintainer, api_key="sk", api_base="http://10.0.0.9"),
            {},
            True,
        ),
        (dict(name="a-plain", litellm_model="openai/x", owner=author, api_key="sk-own"), {}, True),
        (
            dict(
                name="a-base",
                litellm_model="openai/x",
                owner=author,
                api_key="sk-own",
                api_base="https://93.184.216.34",
            ),
            {},
            False,
        ),
        (
            dict(name="a-run-params", litellm_model="openai/x", owner=author, api_key="sk-own"),
            {"metadata": {"a": 1}},
            False,
        ),
        (dict(name="a-other", litellm_model="anthropic/x", owner=author, api_key="sk-own"), {}, False),
    ]
    settings.HELD_OUT_PROVIDERS = frozenset({"openai"})
    for fields, params, expected in cases:
        model = services.model_register(display_name=fields["name"], **fields)
        assert run_covers_held_out(model=model, params=params) is expected, fields["name"]
        if params:  # model_register and run_start refuse non-sampling parameters before this rule is asked
            continue
        run = services.run_start(model=model, version=version, params=params, dispatch=False)
        assert run.covers_held_out is expected and run.total_items == (3 if expected else 1), fields["name"]
    settings.HELD_OUT_PROVIDERS = frozenset()
    assert not run_covers_held_out(model=ModelEntry.objects.get(name="a-plain"))


# What a run spent on held-out items: distinctive totals, so any sum that holds them shows in a body.
PUBLIC_USAGE = {"prompt_tokens": 31_337, "completion_tokens": 4_201, "cost": "0.271828"}
HELD_USAGE = {"prompt_tokens": 58_111, "completion_tokens": 6_113, "cost": "1.414213"}  # each of the two items


def _spend(run: EvaluationRun) -> dict[str, str]:
    """Give the run's answers known token counts and costs and store its aggregates again; the figures a body must
    not hold for a non-maintainer: every sum that includes a held-out item (overall, held-out split)."""
    from decimal import Decimal

    from evaluation.models import Generation
    from evaluation.scoring import run_scores_store

    for generation in Generation.objects.filter(run=run).select_related("snippet__task__paper"):
        usage = HELD_USAGE if generation.snippet.task.paper.slug == HIDDEN_SLUG else PUBLIC_USAGE
        Generation.objects.filter(pk=generation.pk).update(**{**usage, "cost": Decimal(usage["cost"])})
    run_scores_store(run=run)
    held_tokens = 2 * (HELD_USAGE["prompt_tokens"] + HELD_USAGE["completion_tokens"])
    all_tokens = held_tokens + PUBLIC_USAGE["prompt_tokens"] + PUBLIC_USAGE["completion_tokens"]
    held_cost, all_cost = (
        2 * Decimal(HELD_USAGE["cost"]),
        2 * Decimal(HELD_USAGE["cost"]) + Decimal(PUBLIC_USAGE["cost"]),
    )
    return {
        "held-out prompt tokens": str(2 * HELD_USAGE["prompt_tokens"]),
        "all prompt tokens": str(2 * HELD_USAGE["prompt_tokens"] + PUBLIC_USAGE["prompt_tokens"]),
        "held-out completion tokens": str(2 * HELD_USAGE["completion_tokens"]),
        "all completion tokens": str(2 * HELD_USAGE["completion_tokens"] + PUBLIC_USAGE["completion_tokens"]),
        "held-out tokens": f"{held_tokens:,}",
        "all tokens": f"{all_tokens:,}",
        "all tokens (plain)": str(all_tokens),
        "held-out cost": f"{held_cost:.2f}",
        "all cost": f"{all_cost:.2f}",
        "all cost (exact)": str(all_cost.normalize()),
    }


def _usage_bodies(client: Client, world: dict) -> dict[str, str]:
    run, v = world["reference"], world["version"].name
    return {
        "run page": _text(client.get(reverse("run-detail", kwargs={"pk": run.pk}))),
        "run API": _text(client.get(reverse("api-run-detail", kwargs={"pk": run.pk}))),
        "run manifest": _text(client.get(reverse("run-manifest", kwargs={"pk": run.pk}))),
        "leaderboard API": _text(client.get(reverse("api-leaderboard", kwargs={"name": v}))),
        "leaderboard page": _text(client.get(reverse("leaderboard", kwargs={"name": v}), {"cols": "tokens"})),
    }


@pytest.mark.parametrize("role", ["anonymous", "author"])
def test_a_run_never_tells_non_maintainers_what_its_held_out_items_spent(world, role):
    """The tokens a run spent on held-out items tell their hidden prompts' size: a non-maintainer sees the public
    split's usage only (with a note saying the rest is withheld), never a total from which it could be derived."""
    secrets = _spend(world["reference"])
    bodies = _usage_bodies(_client(role, world["users"]), world)
    leaks = {where: [label for label, value in secrets.items() if value in body] for where, body in bodies.items()}
    assert not any(leaks.values()), leaks
    public = PUBLIC_USAGE["prompt_tokens"] + PUBLIC_USAGE["completion_tokens"]
    assert f"{public:,}" in bodies["run page"] and "Held-out usage is withheld" in bodies["run page"]
    detail = _client(role, world["users"]).get(reverse("api-run-detail", kwargs={"pk": world["reference"].pk})).json()
    assert detail["split_scores"]["public"]["prompt_tokens"] == PUBLIC_USAGE["prompt_tokens"]
    assert detail["split_scores"]["held_out"]["prompt_tokens"] is None and detail["score"]["cost"] is None
    rows = _client(role, world["users"]).get(reverse("api-leaderboard", kwargs={"name": world["version"].name}))
    row = {r["run"]: r for r in rows.json()}[world["reference"].pk]
    # Money is a JSON number in the API (issue 37).
    assert row["prompt_tokens"] == PUBLIC_USAGE["prompt_tokens"] and row["cost"] == float(PUBLIC_USAGE["cost"])


def test_maintainers_see_what_a_run_spent_on_held_out_items(world):
    """The check above can fail: the same bodies, as a maintainer, hold the run's whole usage."""
    secrets = _spend(world["reference"])
    bodies = _usage_bodies(_client("maintainer", world["users"]), world)
    assert secrets["all tokens"] in bodies["run page"] and secrets["all cost"] in bodies["run page"]
    assert secrets["all prompt tokens"] in bodies["run API"] and secrets["held-out tokens"] in bodies["run page"]


def test_the_flag_queue_holds_held_out_answers_for_maintainers_only(world, maintainer, author):
    """The queue of flagged answers asks the one held-out rule (benchmarks.visibility): a maintainer's holds a
    held-out item's flagged answer, anyone else's selection only the public ones (the page itself is maintainers')."""
    from evaluation.outcomes import outcome_flag
    from evaluation.selectors.reviews import outcomes_awaiting_review

    finding = [{"kind": "hidden", "line": 1, "detail": "reads secretmod", "source": "runtime"}]
    held = _outcome(world["reference"].pk, world["held"][0])
    public = _outcome(world["own_run"].pk, world["public"])
    for outcome in (held, public):  # answers whose tests passed: a failed one's flag awaits no review
        flagged = outcome_flag(Verdict(Outcome.Status.PASSED, "", outcome.detail), finding)
        Outcome.objects.filter(pk=outcome.pk).update(
            status=flagged.status, measured_status=flagged.measured, findings=list(flagged.findings)
        )
    assert set(outcomes_awaiting_review(user=maintainer)) == {held, public}
    assert list(outcomes_awaiting_review(user=author)) == [public]
    body = _client("maintainer", world["users"]).get(reverse("flag-queue")).content.decode()
    assert f'data-flagged-outcome="{held.pk}"' in body and HIDDEN_TITLE in body
