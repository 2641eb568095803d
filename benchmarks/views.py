"""Public pages of benchmark versions and papers; the masked view is for maintainers only."""

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from benchmarks import selectors


def home(request: HttpRequest) -> HttpResponse:
    versions = selectors.versions_visible(user=request.user)
    return render(request, "benchmarks/home.html", {"versions": versions})


def version_detail(request: HttpRequest, name: str) -> HttpResponse:
    version = selectors.version_get(name=name, user=request.user)
    tasks = selectors.version_tasks(version=version)
    totals = {"snippets": sum(t.snippet_count for t in tasks), "loc": sum(t.total_loc or 0 for t in tasks)}
    return render(request, "benchmarks/version_detail.html", {"version": version, "tasks": tasks, "totals": totals})


def paper_detail(request: HttpRequest, name: str, slug: str) -> HttpResponse:
    version = selectors.version_get(name=name, user=request.user)
    task = selectors.version_task_for_paper(version=version, slug=slug)
    context = {
        "version": version,
        "task": task,
        "paper": task.paper,
        "tree": selectors.snippet_tree(task=task),
        "is_maintainer": selectors.user_is_maintainer(user=request.user),
    }
    return render(request, "benchmarks/paper_detail.html", context)


def snippet_masked(request: HttpRequest, name: str, snippet_id: int) -> HttpResponse:
    if not selectors.user_is_maintainer(user=request.user):
        raise PermissionDenied("Only maintainers may see masked files.")
    version = selectors.version_get(name=name, user=request.user)
    snippet = selectors.version_snippet_get(version=version, snippet_id=snippet_id)
    template = "benchmarks/_snippet_masked.html" if request.htmx else "benchmarks/snippet_masked.html"
    context = {"version": version, "snippet": snippet, "masked": selectors.snippet_masked_file(snippet=snippet)}
    return render(request, template, context)
