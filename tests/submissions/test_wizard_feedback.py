"""The submission wizard says what happened: what an archive gave each step and why the problem-set shortcut did
(not) apply, malformed marker lines named themselves, a commit that is not a full hash refused at once, the
reviewer's reason on top of the author's page, and an explicit confirmation before acceptance replaces a paper id
the draft release already holds."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from submissions import services
from submissions.forms import CodeForm
from submissions.models import Submission
from submissions.packages import draft_problems
from tests.conftest import page_text
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db
MALFORMED = b'def f(x):\n    # <paper2code name="broken>\n    y = 1\n    # </paper2code name="broken">\n    return y\n'


def _zip(files: dict[str, bytes], top: str = "dampnest-main/") -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(top + path, data)
    buffer.seek(0)
    buffer.name = "code.zip"
    return buffer


def _upload(client, submission, archive) -> str:
    response = client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": archive}
    )
    assert response.status_code == 302, _words(response.content.decode())[-2000:]
    return _words(client.get(response["Location"]).content.decode())


def _words(html: str) -> str:
    """The page's words, one space between any two (tags count as spaces)."""
    from html import unescape

    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.fixture
def fresh(client, author, media_root):
    client.force_login(author)
    return services.submission_create(author=author, values={"metadata": {"title": "Damp", "id": "dampnest"}})


def test_plain_code_says_what_it_gave_and_why_it_was_not_a_problem_set(client, fresh):
    files = demo_files("dampnest")
    text = _upload(client, fresh, _zip(files))
    assert f"code.zip : {len(files)} files found. Not a problem set: it has no papers.yaml" in text
    assert "Paper text from paper2code_paper.md in the code" in text
    assert "Test entry point paper2code_test.py found" in text
    snippets = Submission.objects.get(pk=fresh.pk).draft["intake"]["markers"]
    assert [m["path"] for m in snippets] == ["optimizer.py"] and snippets[0]["snippets"] > 1
    assert "optimizer.py : " in text and "preselected below as an annotated file" in text
    # Every Python file is offered, so the heading says what the list is, not that each holds markers (issue 37).
    assert "Annotated files (holding snippet markers)" not in text
    assert "those holding snippet markers are preselected" in text
    draft = Submission.objects.get(pk=fresh.pk).draft
    assert draft["annotated_paths"] == ["optimizer.py"] and draft["paper_path"] == "paper2code_paper.md"


def test_a_problem_set_says_every_step_came_from_papers_yaml(client, fresh):
    from tests.conftest import DEMO_PSET

    entry = (DEMO_PSET / "papers.yaml").read_text().split("\n- id:")[1]
    files = {
        "papers.yaml": ("- id:" + entry).encode(),
        **{f"dampnest/{path}": data for path, data in demo_files("dampnest").items()},
    }
    text = _upload(client, fresh, _zip(files, top=""))
    assert "Taken as a one-paper problem set: its papers.yaml lists one paper, dampnest: every step was filled" in text
    assert "Paper text from paper2code_paper.md" in text and "Annotated files from papers.yaml: optimizer.py" in text


def test_a_problem_sets_summary_counts_every_entry_of_the_archive(client, fresh):
    """Walk 4: an archive of 6 entries (papers.yaml and the paper's 5 files, all used) was summed up as "5 files
    found": papers.yaml filled step 1 but was not counted. Every entry is counted and said where it went; an entry
    outside the paper's folder is named as left out."""
    from tests.conftest import DEMO_PSET

    entry = (DEMO_PSET / "papers.yaml").read_text().split("\n- id:")[1]
    paper = {f"dampnest/{path}": data for path, data in demo_files("dampnest").items()}
    files = {"papers.yaml": ("- id:" + entry).encode(), **paper}
    text = _upload(client, fresh, _zip(files, top=""))
    assert (
        f"code.zip : {len(files)} files found ( papers.yaml , which fills the paper details, and the {len(paper)} "
        "files of the paper's folder dampnest/ ). Taken as a one-paper problem set" in text
    ), text[:600]
    assert f"All {len(paper)} files" in text
    text = _upload(client, fresh, _zip({**files, "README.md": b"# notes\n"}, top=""))
    assert f"{len(files) + 1} files found" in text and "left out, outside that folder: README.md )" in text


def test_a_nested_papers_yaml_is_named_as_the_reason(client, fresh):
    files = {"set/papers.yaml": b"[]\n", "set/dampnest/optimizer.py": demo_files()["optimizer.py"], "other.txt": b"x"}
    text = _upload(client, fresh, _zip(files, top=""))
    assert "its papers.yaml is at set/papers.yaml, not at the archive's top" in text


def test_a_malformed_marker_line_is_pointed_out_itself(client, fresh):
    text = _upload(client, fresh, _zip({"mod.py": MALFORMED, "paper2code_test.py": b"import mod\n"}))
    assert "line 2: warning: looks like a snippet marker but is not one (the name's closing quote is missing)" in text
    assert (
        'line 4: error: end marker for "broken" has no matching start marker; line 2 looks like its start marker '
        "but is malformed (the name's closing quote is missing)"
    ) in text


@pytest.mark.parametrize(
    "commit,message",
    [
        ("abc1234", "Give the full commit hash: 40 hexadecimal characters; this one has 7."),
        ("main", "Give the full hash, not a branch or tag name"),
        ("a" * 41, "this one has 41"),
        ("", "Give the commit's full hash"),
    ],
)
def test_a_commit_that_is_not_a_full_hash_is_refused_at_once(commit, message):
    form = CodeForm({"source": "git", "git_url": "", "commit": commit})
    assert not form.is_valid()
    assert any(message in error for error in form.errors["commit"]), form.errors["commit"]
    assert (
        "commit" not in CodeForm({"source": "git", "git_url": "", "commit": "0123456789abcdef" * 2 + "01234567"}).errors
    )


def test_the_reviewers_reason_sits_on_top_of_the_authors_page(client, draft, author, maintainer):
    services.submission_submit(submission=draft, actor=author)
    Submission.objects.filter(pk=draft.pk).update(state=Submission.State.AWAITING_REVIEW)
    services.submission_request_changes(submission=draft, actor=maintainer, reason="Cover the bias correction.")
    client.force_login(author)
    body = client.get(reverse("submission-detail", args=[draft.pk])).content.decode()
    top = body[: body.index('<div class="actions">')]
    assert 'data-testid="changes-requested"' in top and "Cover the bias correction." in top


def _awaiting(author, media_root, title: str) -> Submission:
    submission = fill_draft(services.submission_create(author=author), author)
    services.draft_update(
        submission=submission, actor=author, values={"metadata": {**submission.draft["metadata"], "title": title}}
    )
    services.submission_submit(submission=submission, actor=author)
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.AWAITING_REVIEW)
    return Submission.objects.get(pk=submission.pk)


def test_accepting_a_paper_id_the_draft_holds_asks_for_confirmation(client, author, maintainer, media_root):
    first = _awaiting(author, media_root, "DampNest")
    services.submission_accept(submission=first, actor=maintainer, reason="good")
    second = _awaiting(author, media_root, "Another paper entirely")
    client.force_login(maintainer)
    url = reverse("review-detail", args=[second.pk])
    page = client.get(url).content.decode()
    draft = BenchmarkVersion.objects.get(status="draft")
    assert f"Paper id dampnest is already in draft {draft.name}" in page_text(page)
    assert "is it the same paper?" in page_text(page) and 'name="replace_confirmed"' in page
    response = client.post(url, {"decision": "accept", "reason": "fine"})
    assert "paper id dampnest is already in draft" in page_text(response.content.decode())
    assert Submission.objects.get(pk=second.pk).state == Submission.State.AWAITING_REVIEW
    with pytest.raises(services.TransitionError, match="confirm the replacement"):
        services.submission_accept(submission=second, actor=maintainer, reason="fine")
    # the same files as the first: one paper once (test_one_paper_once.py) asks why it is not a duplicate
    client.post(url, {"decision": "accept", "reason": "fine", "replace_confirmed": "on", "duplicate_reason": "a copy"})
    second.refresh_from_db()
    assert second.state == Submission.State.ACCEPTED
    assert list(draft.memberships.values_list("task_id", flat=True)) == [second.task_id]


def test_a_new_paper_id_needs_no_confirmation_and_drafts_carry_no_placeholder_notes(
    client, author, maintainer, media_root
):
    first = _awaiting(author, media_root, "DampNest")
    client.force_login(maintainer)
    page = client.get(reverse("review-detail", args=[first.pk])).content.decode()
    assert 'name="replace_confirmed"' not in page and "already in draft" not in page
    services.submission_accept(submission=first, actor=maintainer, reason="good")
    assert BenchmarkVersion.objects.get(status="draft").notes == ""


def test_an_empty_paper_step_says_so_at_the_top(client, fresh):
    response = client.post(reverse("submission-step", args=[fresh.pk, "paper"]), {"text": "", "text_format": "md"})
    body = response.content.decode()
    assert response.status_code == 200 and '<div class="errors" role="alert">' in body
    assert "This step is empty: upload the paper&#x27;s text (.tex or .md) or paste it" in body
    assert body.index("This step is empty") < body.index('name="upload"')  # above the fields, seen after the click
    assert not Submission.objects.get(pk=fresh.pk).draft.get("paper_path")


def test_a_problem_set_archive_fills_step_1_and_says_what_it_replaced(client, author, media_root):
    """Step 1 asks for a title before any code is there: the archive's papers.yaml then replaces it (and the id
    made from it), and the summary names what it replaced; what papers.yaml leaves empty keeps what was typed."""
    from tests.conftest import DEMO_PSET

    client.force_login(author)
    typed = services.submission_create(
        author=author, values={"metadata": {"title": "My own title", "id": "my-paper", "venue": "", "arxiv_abs": None}}
    )
    entry = (DEMO_PSET / "papers.yaml").read_text().split("\n- id:")[1]
    entry = entry.replace("first_commit_date: 2025-01-20", "first_commit_date:")  # one detail the archive leaves empty
    services.draft_update(
        submission=typed,
        actor=author,
        values={"metadata": {**typed.draft["metadata"], "first_commit_date": "2024-12-01"}},
    )
    files = {
        "papers.yaml": ("- id:" + entry).encode(),
        **{f"dampnest/{path}": data for path, data in demo_files("dampnest").items()},
    }
    text = _upload(client, typed, _zip(files, top=""))
    metadata = Submission.objects.get(pk=typed.pk).draft["metadata"]
    archive_title = entry.split("title:")[1].split("\n")[0].strip().strip("\"'")
    assert (metadata["title"], metadata["id"]) == (archive_title, "dampnest")
    assert metadata["venue"] == "DEMO2025" and metadata["first_commit_date"] == "2024-12-01"
    assert Submission.objects.get(pk=typed.pk).title == archive_title
    assert "every step was filled from it" in text
    assert f"replaced what step 1 held: id 'my-paper' by 'dampnest', title 'My own title' by {archive_title!r}" in text
    assert "kept from step 1 (papers.yaml leaves them empty): first_commit_date" in text


def test_the_paper_step_can_be_skipped_saying_what_is_skipped_and_the_code_brings_the_text(client, fresh):
    """Step 2 has nothing the code cannot bring: an archive holding paper2code_paper.md gives the paper text, so the
    step offers a skip that says what it leaves, and nothing is missing once the code is in."""
    page = client.get(reverse("submission-step", args=[fresh.pk, "paper"])).content.decode()
    skip = re.search(r'<p data-testid="step-skip"><a href="([^"]+)">([^<]+)</a>', page)
    assert skip is not None, _words(page)[-1500:]
    url, words = skip.group(1), _words(skip.group(2))
    assert url == reverse("submission-step", args=[fresh.pk, "code"])
    assert "add the paper text with the code instead, as paper2code_paper.tex or paper2code_paper.md" in words
    assert "Without it, the submission cannot be submitted" in words
    assert client.get(url).status_code == 200 and not Submission.objects.get(pk=fresh.pk).draft.get("paper_path")

    files = demo_files()
    assert "paper2code_paper.md" in files
    _upload(client, fresh, _zip(files))
    fresh.refresh_from_db()
    assert fresh.draft["paper_path"] == "paper2code_paper.md"
    assert not [p for p in draft_problems(fresh.draft) if "step 2" in p], draft_problems(fresh.draft)
    # Once a text is saved, skipping keeps it, and says so.
    page = client.get(reverse("submission-step", args=[fresh.pk, "paper"])).content.decode()
    assert "Skip this step and keep the paper text saved before (paper2code_paper.md)." in _words(page)


def test_the_other_steps_offer_no_skip(client, fresh):
    for step in ("details", "code", "files"):
        page = client.get(reverse("submission-step", args=[fresh.pk, step])).content.decode()
        assert 'data-testid="step-skip"' not in page, step


def test_a_refused_repository_url_is_told_why_once_not_asked_for_again():
    """A newcomer's walk: an http:// (or unresolvable) URL got its reason and then "Give the repository's https://
    URL." under it, as if the field were empty."""
    errors = CodeForm({"source": "git", "git_url": "http://example.org/x.git", "commit": "a" * 40}).errors["git_url"]
    assert errors == ["git URL must use https:// (not http://)"], errors
    assert CodeForm({"source": "git", "git_url": "", "commit": "a" * 40}).errors["git_url"] == [
        "Give the repository's https:// URL."
    ]
