"""The release page gives its sealed share and the paper page says of each snippet whether it is sealed and why not
(issue 33, item 4), from the tasks' recordings."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import Task, VersionTask

pytestmark = pytest.mark.django_db


def recorded(task: Task, unsealed: dict[int, str]) -> None:
    """A recording of `task` in which the snippets at the positions of `unsealed` are unsealed for that reason."""
    snippets = {
        f"{s.file_path}#{s.position}": {
            "target": None,
            "sealed": s.position not in unsealed,
            "reason": unsealed.get(s.position, ""),
        }
        for s in task.snippets.all()
    }
    Task.objects.filter(pk=task.pk).update(recording={"v": 1, "targets": {}, "snippets": snippets, "tolerance": {}})


def test_the_release_page_gives_the_sealed_share_of_recorded_tasks(client, release):
    url = reverse("version-detail", args=[release.name])
    assert 'id="sealed-share"' not in client.get(url).content.decode(), "no recording yet: no share"
    first = Task.objects.filter(versions=release).order_by("paper__slug").first()
    recorded(first, {0: "no function holds it (module or class level code)"})
    body = client.get(url).content.decode()
    total = first.snippets.count()
    assert f"{total - 1} of {total} recorded snippets sealed" in body


def test_the_paper_page_says_which_snippets_are_sealed_and_why_not(client, release):
    task = Task.objects.filter(versions=release).order_by("paper__slug").first()
    recorded(task, {1: "its arguments cannot be recorded: PicklingError: a lambda"})
    body = client.get(reverse("paper-detail", args=[release.name, task.paper.slug])).content.decode()
    assert body.count(">sealed</span>") == task.snippets.count() - 1
    assert body.count(">unsealed</span>") == 1
    assert "its arguments cannot be recorded: PicklingError: a lambda" in body
    # A newcomer's walk: the badges said "sealed" with no word of what it means beyond a tooltip.
    assert f'href="{reverse("guide", args=["verdicts"])}#the-sealed-replay"' in body


def test_the_release_page_gives_the_sealed_share_of_what_its_viewer_may_see(client, release, maintainer):
    """A held-out paper's snippets are not in the share shown to the public: with the public papers' own sealing (their
    paper pages) one could tell how many held-out snippets are unsealed."""
    public, held = Task.objects.filter(versions=release).order_by("paper__slug")[:2]
    VersionTask.objects.filter(version=release, task=held).update(split=VersionTask.Split.HELD_OUT)
    recorded(public, {0: "no function holds it (module or class level code)"})
    recorded(held, {0: "the tests never call its function", 1: "the tests never call its function"})
    url = reverse("version-detail", args=[release.name])
    shown, total = public.snippets.count(), public.snippets.count() + held.snippets.count()
    assert f"{shown - 1} of {shown} recorded snippets sealed" in client.get(url).content.decode()
    client.force_login(maintainer)
    assert f"{total - 3} of {total} recorded snippets sealed" in client.get(url).content.decode()
