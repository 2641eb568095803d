"""Pages of benchmark versions and papers, and the maintainers' release pages (curate, publish, deprecate).

Public pages never show code of held-out tasks; the masked view is for maintainers only. Every release form is a
plain POST that redirects back (works without JavaScript); htmx swaps the page's main region in place.
"""

from functools import wraps

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from benchmarks import selectors, visibility
from benchmarks.models import BenchmarkVersion, Snippet, SnippetRetirement, Task, VersionTask
from benchmarks.pages import page_extras
from benchmarks.permissions import maintainer_required
from benchmarks.services import curation, downloads, publishing, release_settings
from common.errors import ApplicationError
from common.htmx import HtmxHttpRequest
from common.pages import refusal_redirect

# The page's and the API's; "harbor", the public split as a Harbor dataset, is added by evaluation (its tasks' export).
DOWNLOAD_TYPES = {"pset": "application/zip", "items": "application/x-ndjson", "harbor": "application/gzip"}
DOWNLOAD_BLOCK_BYTES = 256 * 1024  # FileResponse's 4 kB blocks made serving a 190 MB file twice as slow


DOWNLOADS_RETRY_AFTER = 10  # seconds a client is told to wait for downloads being prepared


def downloads_not_ready_message(*, version: BenchmarkVersion) -> str:
    """What the page and the API say about a release whose downloads do not exist yet."""
    if version.downloads_status == "failed":
        return (
            f"the downloads of {version.name} could not be built ({version.downloads_failed}); a maintainer can "
            "have them prepared again on the release's page"
        )
    return f"the downloads of {version.name} are being prepared; try again in a little while"


def download_response(*, sha256: str, filename: str, content_type: str) -> FileResponse:
    """A stored file as an attachment, streamed from storage in blocks (never read whole), with its sha256."""
    response = FileResponse(
        selectors.blob_open(sha256=sha256), as_attachment=True, filename=filename, content_type=content_type
    )
    response.block_size = DOWNLOAD_BLOCK_BYTES
    response["X-Content-SHA256"] = sha256
    return response


def home(request: HttpRequest) -> HttpResponse:
    versions = selectors.versions_visible(user=request.user).select_related("previous")
    context = {"versions": versions, **page_extras("home", user=request.user)}
    return render(request, "benchmarks/home.html", context)


def version_detail(request: HttpRequest, name: str) -> HttpResponse:
    version = selectors.version_get(name=name, user=request.user)
    every = list(selectors.version_tasks(version=version))
    selectors.tasks_as_released(version=version, tasks=every)
    visible = set(visibility.tasks_visible(version=version, user=request.user).values_list("pk", flat=True))
    held_out_ids = set(version.memberships.filter(split=VersionTask.Split.HELD_OUT).values_list("task_id", flat=True))
    tasks = [t for t in every if t.pk in visible]
    hidden = [t for t in every if t.pk not in visible]  # held-out tasks a non-maintainer sees as one count
    totals = visibility.release_totals(version=version, tasks=every)
    context = {
        "version": version,
        "tasks": tasks,
        "held_out_ids": held_out_ids,
        "totals": totals,
        # Over what the viewer may see: the public papers' share beside an all-papers share would count held-out ones.
        "sealed": selectors.tasks_sealed_share(tasks=tasks),
        "held_out": totals["held_out"] if hidden else None,  # one aggregate row for the tasks the viewer may not see
        "changelog": visibility.changelog_visible(version=version, user=request.user),
        "downloads": [{"kind": kind, **info} for kind, info in sorted(version.downloads.items())],
        "publish_freezes": publishing.PUBLISH_FREEZES,
    }
    if version.status == BenchmarkVersion.Status.DRAFT:  # only maintainers see a draft
        context["preview"] = preview = publishing.release_publish_preview(version=version)
        context["changelog"] = preview.changelog
    context.update(page_extras("version", version=version, user=request.user))
    return render(request, "benchmarks/version_detail.html", context)


def version_download(request: HttpRequest, name: str, kind: str) -> HttpResponseBase:
    version = selectors.version_get(name=name, user=request.user)
    if kind in DOWNLOAD_TYPES and version.downloads_status in ("preparing", "failed"):
        return HttpResponse(
            downloads_not_ready_message(version=version),
            status=409,
            content_type="text/plain",
            headers={"Retry-After": str(DOWNLOADS_RETRY_AFTER)},
        )
    info = version.downloads.get(kind)
    if not info or kind not in DOWNLOAD_TYPES:
        raise Http404("No such download.")
    return download_response(sha256=info["sha256"], filename=info["filename"], content_type=DOWNLOAD_TYPES[kind])


def paper_detail(request: HttpRequest, name: str, slug: str) -> HttpResponse:
    version = selectors.version_get(name=name, user=request.user)
    task = selectors.version_task_for_paper(version=version, slug=slug)
    is_maintainer = selectors.user_is_maintainer(user=request.user)
    if not visibility.task_visible(version=version, task=task, user=request.user):
        raise Http404("No such paper in this version.")  # the same answer as for a paper not in it
    held_out = version.memberships.filter(task=task, split=VersionTask.Split.HELD_OUT).exists()
    context = {
        "difficulty": None,
        "version": version,
        "task": task,
        "paper": task.paper,
        "held_out": held_out,
        "tree": selectors.snippet_tree(task=task),
        "kept_requirements": selectors.task_kept_requirements(task=task),
        "sources": (
            selectors.task_sources(task=task)
            if visibility.task_sources_visible(version=version, task=task, user=request.user)
            else None
        ),
        "is_maintainer": is_maintainer,
        **page_extras("paper", version=version, task=task, user=request.user),
    }
    return render(request, "benchmarks/paper_detail.html", context)


def snippet_masked(request: HtmxHttpRequest, name: str, snippet_id: int) -> HttpResponse:
    if not selectors.user_is_maintainer(user=request.user):
        raise PermissionDenied("Only maintainers may see masked files.")
    version = selectors.version_get(name=name, user=request.user)
    snippet = selectors.version_snippet_get(version=version, snippet_id=snippet_id)
    template = "benchmarks/_snippet_masked.html" if request.htmx else "benchmarks/snippet_masked.html"
    masked = selectors.snippet_masked_file(snippet=snippet, protocol=selectors.protocol_get(name=version.protocol_name))
    context = {"version": version, "snippet": snippet, "masked": masked}
    return render(request, template, context)


@maintainer_required
def version_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        try:
            version = curation.version_draft_create(name=name, actor=request.user)
        except ApplicationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Draft {version.name} created from the latest release.")
            return redirect("version-curate", name=version.name)
    return render(request, "benchmarks/version_new.html", {"name": request.POST.get("name", "")})


def _draft(request: HttpRequest, name: str) -> BenchmarkVersion:
    version = selectors.version_get(name=name, user=request.user)
    if version.is_frozen:
        raise Http404(f"Version {version.name} is {version.status}; only drafts are curated.")
    return version


@maintainer_required
def version_curate(request: HttpRequest, name: str) -> HttpResponse:
    version = _draft(request, name)
    retired = {r.snippet_id: r for r in version.retirements.select_related("retired_by")}
    snippets: dict[int, list[tuple[Snippet, SnippetRetirement | None]]] = {}  # by task: each with its retirement
    for snippet in Snippet.objects.filter(task__memberships__version=version).order_by("file_path", "position"):
        snippets.setdefault(snippet.task_id, []).append((snippet, retired.get(snippet.pk)))
    memberships = [
        (membership, snippets.get(membership.task_id, []))
        for membership in version.memberships.select_related("task__paper").order_by("task__paper__slug")
    ]
    candidates = (
        Task.objects.exclude(memberships__version=version).select_related("paper").order_by("paper__slug", "-revision")
    )
    context = {
        "version": version,
        "memberships": memberships,
        "candidates": candidates,
        "splits": VersionTask.Split.choices,
        "protocols": selectors.protocol_names(),
        "held_out_once_public": visibility.held_out_once_public(version=version),
    }
    return render(request, "benchmarks/version_curate.html", context)


def _release_page(request: HttpRequest, name: str, *args, **kwargs) -> str:
    """Where a maintainer's action on a version goes back to: its curation page while a draft, else its page."""
    version = BenchmarkVersion.objects.get(name=name)
    return reverse("version-curate" if not version.is_frozen else "version-detail", args=[version.name])


def _release_action(action):
    """A maintainer's POST on a version: run the service, report what it did as a message, go back to the version
    (a refusal goes back there too, as an error message: common.pages)."""

    @refusal_redirect(_release_page)
    @require_POST
    @maintainer_required
    @wraps(action)
    def wrapper(request: HttpRequest, name: str, *args, **kwargs) -> HttpResponse:
        version = selectors.version_get(name=name, user=request.user)
        try:
            done = action(request, version, *args, **kwargs)
        except (Task.DoesNotExist, Snippet.DoesNotExist) as exc:  # a task or snippet the form names, gone
            messages.error(request, str(exc))
            done = None
        if done:
            messages.success(request, done)
        return redirect(_release_page(request, version.name))

    return wrapper


@_release_action
def version_task_add(request: HttpRequest, version: BenchmarkVersion) -> str:
    chosen = request.POST.get("task") or "0"
    if not chosen.isdigit():
        raise ApplicationError(f"task: {chosen!r} is not a task id")
    task = get_object_or_404(Task.objects.select_related("paper"), pk=int(chosen))
    split = request.POST.get("split", VersionTask.Split.PUBLIC)
    curation.version_task_set(version=version, task=task, split=split, actor=request.user)
    return f"Added {task} ({split})."


@_release_action
def version_task_split(request: HttpRequest, version: BenchmarkVersion, task_id: int) -> str:
    task = get_object_or_404(version.tasks.select_related("paper"), pk=task_id)
    split = request.POST.get("split", "")
    curation.version_task_set(version=version, task=task, split=split, actor=request.user)
    return f"{task.paper.slug} is now {VersionTask.Split(split).label.lower()}."


@_release_action
def version_task_drop(request: HttpRequest, version: BenchmarkVersion, task_id: int) -> str:
    task = get_object_or_404(version.tasks.select_related("paper"), pk=task_id)
    curation.version_task_remove(version=version, task=task, actor=request.user)
    return f"Dropped {task}."


@_release_action
def version_snippet_retire(request: HttpRequest, version: BenchmarkVersion, snippet_id: int) -> str:
    snippet = selectors.version_snippet_get(version=version, snippet_id=snippet_id)
    curation.snippet_retire(version=version, snippet=snippet, reason=request.POST.get("reason", ""), actor=request.user)
    return f"Retired {snippet.name}."


def _number(request: HttpRequest, key: str, kind: type):
    """A number from the form, None when left blank; a clear refusal when it is not one."""
    text = request.POST.get(key, "").strip()
    try:
        return kind(text) if text else None
    except ValueError:
        raise ApplicationError(f"{key.replace('_', ' ')}: {text!r} is not a number") from None


@_release_action
def version_settings(request: HttpRequest, version: BenchmarkVersion) -> str:
    release_settings.version_settings_set(
        version=version,
        actor=request.user,
        protocol=request.POST.get("protocol", version.protocol_id),
        time_limit_seconds=_number(request, "time_limit_seconds", int),
        memory_mb=_number(request, "memory_mb", int),
        cpus=_number(request, "cpus", float),
        mutation_score_min=_number(request, "mutation_score_min", float),
    )
    return f"Evaluation settings of {version.name} saved."


@_release_action
def version_publish(request: HttpRequest, version: BenchmarkVersion) -> str:
    if request.POST.get("confirm") != "yes":  # the box a browser requires; a plain POST must tick it too
        raise ApplicationError(
            f"publish: confirm that {version.name} is to be frozen (tick the box above the button). "
            + publishing.PUBLISH_FREEZES
        )
    published = publishing.version_publish(version=version, actor=request.user, notes=request.POST.get("notes") or None)
    once_public = (published.changelog or {}).get("held_out_once_public", [])
    warning = "".join(f" Warning: {o['paper']} is held out but was public in {o['public_in']}." for o in once_public)
    return (
        f"Published {published.name}; manifest hash {published.manifest_hash[:12]}. Its downloads are being "
        f"prepared by a worker. Its reference lines are being computed: its page says when they are ready.{warning}"
    )


@_release_action
def version_downloads_retry(request: HttpRequest, version: BenchmarkVersion) -> str:
    downloads.release_downloads_retry(version=version, actor=request.user)
    return f"The downloads of {version.name} are being prepared again."


@_release_action
def version_deprecate(request: HttpRequest, version: BenchmarkVersion) -> str:
    note = request.POST.get("note", "").strip()
    if not note:
        raise ApplicationError("deprecating a release needs a note saying why and what to use instead")
    publishing.version_deprecate(version=version, actor=request.user, note=note)
    return f"Deprecated {version.name}."
