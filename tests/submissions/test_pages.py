"""Author and maintainer pages: a permission matrix over every page and action, the form in steps, errors by fields."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.urls import reverse

from config.celery import app as celery_app
from submissions.models import Submission
from submissions.packages import draft_problems
from tests.submissions.conftest import demo_files

pytestmark = pytest.mark.django_db
State = Submission.State


def zip_of(files: dict[str, bytes], top: str = "dampnest-main") -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(f"{top}/{path}", data)
    buffer.seek(0)
    buffer.name = "dampnest.zip"
    return buffer


@pytest.fixture
def people(author, other_author, maintainer, admin):
    return {"anonymous": None, "author": author, "other author": other_author, "maintainer": maintainer, "admin": admin}


def as_(client, user):
    client.logout()
    if user is not None:
        client.force_login(user)
    return client


PAGES = [
    # (name, method, url args -> kwargs, {role: expected status})
    (
        "submission-list",
        "get",
        {},
        {"anonymous": 302, "author": 200, "other author": 200, "maintainer": 200, "admin": 200},
    ),
    (
        "submission-detail",
        "get",
        {"pk": True},
        {"anonymous": 302, "author": 200, "other author": 403, "maintainer": 200, "admin": 200},
    ),
    (
        "submission-report",
        "get",
        {"pk": True},
        {"anonymous": 302, "author": 200, "other author": 403, "maintainer": 200, "admin": 200},
    ),
    (
        "submission-step",
        "get",
        {"pk": True, "step": "details"},
        {"anonymous": 302, "author": 200, "other author": 403, "maintainer": 403, "admin": 403},
    ),
    (
        "review-queue",
        "get",
        {},
        {"anonymous": 302, "author": 403, "other author": 403, "maintainer": 200, "admin": 200},
    ),
    (
        "review-detail",
        "get",
        {"pk": True},
        {"anonymous": 302, "author": 403, "other author": 403, "maintainer": 200, "admin": 200},
    ),
]


@pytest.mark.parametrize("name,method,kwargs,expected", PAGES, ids=[p[0] for p in PAGES])
def test_page_permissions(client, people, draft, name, method, kwargs, expected):
    url = reverse(name, kwargs={k: (draft.pk if v is True else v) for k, v in kwargs.items()})
    for role, user in people.items():
        response = getattr(as_(client, user), method)(url)
        assert response.status_code == expected[role], f"{role} on {name}: {response.status_code}"


ACTIONS = [
    # (action, state before, {role: allowed})
    ("withdraw", State.AWAITING_REVIEW, {"author": True}),
    ("edit", State.INVALID, {"author": True}),
    ("submit", State.AWAITING_REVIEW, {}),
]


@pytest.mark.parametrize("action,state,allowed", ACTIONS)
def test_action_permissions(client, people, draft, action, state, allowed):
    for role, user in people.items():
        Submission.objects.filter(pk=draft.pk).update(state=state)
        response = as_(client, user).post(reverse("submission-action", args=[draft.pk, action]))
        after = Submission.objects.get(pk=draft.pk).state
        if allowed.get(role):
            assert after != state, f"{role} should be able to {action}"
        else:
            assert after == state, f"{role} must not {action}"
            assert response.status_code in (302, 403)


def test_decisions_only_by_maintainers_who_are_not_the_author(client, people, draft):
    for role, user in people.items():
        Submission.objects.filter(pk=draft.pk).update(state=State.AWAITING_REVIEW)
        as_(client, user).post(
            reverse("review-detail", args=[draft.pk]), {"decision": "reject", "reason": "out of scope"}
        )
        rejected = Submission.objects.get(pk=draft.pk).state == State.REJECTED
        assert rejected == (role in ("maintainer", "admin")), role


def test_comments_by_author_and_maintainers_only(client, people, draft):
    for role, user in people.items():
        as_(client, user).post(reverse("comment-create", args=[draft.pk]), {"body": f"from {role}"})
    assert sorted(draft.comments.values_list("body", flat=True)) == ["from admin", "from author", "from maintainer"]


def test_signup_logs_in_and_lists_submissions(client):
    response = client.post(
        reverse("signup"),
        {
            "username": "newbie",
            "email": "n@example.org",
            "password1": "a-long-pass-phrase-9",
            "password2": "a-long-pass-phrase-9",
        },
    )
    assert response.status_code == 302 and response["Location"] == reverse("submission-list")
    landed = client.get(reverse("submission-list")).content.decode()
    assert "Submit a paper here" in landed and "register a model under My models" in landed, "both kinds of user"


def test_the_signup_page_speaks_to_authors_and_model_developers(client):
    page = client.get(reverse("signup")).content.decode()
    assert "submit papers and follow their review" in page
    assert "register models, start runs" in page and "upload results" in page
    assert f'href="{reverse("guide", args=["leaderboard"])}"' in page


def test_every_help_text_is_the_one_its_field_names_for_screen_readers(client, author):
    """Django names a field's help text in aria-describedby as <id>_helptext; the shared field template gave it the
    id <id>_help, so a screen reader read no help text on any form (the sign-up page, the paper form, the models')."""
    pages = [client.get(reverse("signup")).content.decode()]
    client.force_login(author)
    pages.append(client.get(reverse("submission-new")).content.decode())
    for page in pages:
        described = re.findall(r'aria-describedby="([^"]+)"', page)
        assert described, "the page has fields with help texts"
        for ids in described:
            for target in ids.split():
                assert f'id="{target}"' in page, target


def test_an_author_gives_the_name_the_site_credits_at_sign_up_and_changes_it_later(client):
    """A newcomer's walk: the paper page credits an author by full name, else username, yet nothing let anyone give
    a name, so every author was credited by username."""
    from django.contrib.auth.models import User

    from submissions.selectors import user_display_name

    signup = client.get(reverse("signup")).content.decode()
    assert 'name="first_name"' in signup and "credits its author by name" in signup
    client.post(
        reverse("signup"),
        {
            "username": "ada_researcher",
            "first_name": "Ada",
            "last_name": "Lovelace",
            "email": "ada@example.org",
            "password1": "a-long-pass-phrase-9",
            "password2": "a-long-pass-phrase-9",
        },
    )
    user = User.objects.get(username="ada_researcher")
    assert user_display_name(user=user) == "Ada Lovelace"
    assert f'href="{reverse("account-name")}"' in client.get(reverse("submission-list")).content.decode()
    response = client.post(reverse("account-name"), {"first_name": "Augusta Ada", "last_name": "King"}, follow=True)
    assert "the site credits you as Augusta Ada King" in response.content.decode()
    user.refresh_from_db()
    assert user_display_name(user=user) == "Augusta Ada King"


def test_password_reset_sends_a_mail(client, author, mailoutbox):
    client.post(reverse("password_reset"), {"email": author.email})
    assert len(mailoutbox) == 1 and "/accounts/reset/" in mailoutbox[0].body


@pytest.fixture
def eager():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def test_the_form_in_steps_from_an_archive_to_validation(
    client, author, media_root, sandbox, eager, django_capture_on_commit_callbacks
):
    client.force_login(author)
    client.post(reverse("submission-new"), {"title": "DampNest"})
    submission = Submission.objects.get(author=author)
    step = lambda name: reverse("submission-step", args=[submission.pk, name])  # noqa: E731

    response = client.post(
        step("details"), {"title": "DampNest", "venue": "DEMO2025", "first_commit_date": "2025-01-20"}
    )
    assert response.status_code == 302 and response.url == step("paper")  # the first step again: saved the same
    files = demo_files()
    paper = io.BytesIO(files.pop("paper2code_paper.md"))
    paper.name = "paper.md"
    assert client.post(step("paper"), {"upload": paper, "text_format": "md"}).url == step("code")
    response = client.post(step("code"), {"source": "archive", "archive": zip_of(files)})
    assert response.status_code == 302, response.content.decode()
    assert response.url == step("files")
    page = client.get(step("files")).content.decode()
    assert 'value="optimizer.py"' in page
    response = client.post(step("files"), {"annotated_paths": ["optimizer.py"], "requirements": "numpy\n"})
    assert response.url == reverse("submission-detail", args=[submission.pk])
    submission.refresh_from_db()
    assert submission.draft["metadata"]["id"] == "dampnest"

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("submission-action", args=[submission.pk, "submit"]))

    submission.refresh_from_db()
    assert submission.state == State.AWAITING_REVIEW, submission.history.last().reason
    report = client.get(reverse("submission-report", args=[submission.pk])).content.decode()
    assert "every 2s" not in report, "polling stops when validation is done"
    assert report.count('class="badge passed"') >= 28


def test_a_whole_problem_set_archive_fills_every_step(client, author, media_root):
    from tests.conftest import DEMO_PSET

    client.force_login(author)
    client.post(reverse("submission-new"), {"title": "DampNest"})
    submission = Submission.objects.get(author=author)
    papers = (DEMO_PSET / "papers.yaml").read_text()
    entry = "- id: dampnest" + papers.split("- id: dampnest")[1].split("\n- id:")[0]
    files = {"papers.yaml": entry.encode(), **{f"dampnest/{p}": d for p, d in demo_files().items()}}
    response = client.post(
        reverse("submission-step", args=[submission.pk, "code"]),
        {"source": "archive", "archive": zip_of(files, top="set")},
    )
    assert response.status_code == 302
    submission.refresh_from_db()
    assert submission.draft["annotated_paths"] == ["optimizer.py"]
    assert submission.draft["metadata"]["title"].startswith("DampNest")
    assert draft_problems(submission.draft) == []


def test_the_files_step_refuses_code_without_the_fixed_entry_point(client, draft, author):
    from submissions import services

    files = {("run_tests.py" if p == "paper2code_test.py" else p): h for p, h in draft.draft["files"].items()}
    services.draft_update(submission=draft, actor=author, values={"files": files})
    client.force_login(author)
    body = client.post(
        reverse("submission-step", args=[draft.pk, "files"]), {"annotated_paths": ["optimizer.py"]}
    ).content.decode()
    assert "The code has no tests: missing test entry point paper2code_test.py" in body


def test_the_files_step_takes_code_without_tests_when_an_example_script_is_named(client, draft, author):
    """The walk found step 4 refusing what the guide and the summary offer: no paper2code_test.py but an example
    script, whose proposed tests become the package's tests at validation."""
    from submissions import services

    files = {p: h for p, h in draft.draft["files"].items() if p != "paper2code_test.py"}
    files["example.py"] = next(iter(files.values()))
    services.draft_update(submission=draft, actor=author, values={"files": files})
    client.force_login(author)
    step = reverse("submission-step", args=[draft.pk, "files"])
    assert "your code has none, so name an example script" in client.get(step).content.decode()

    response = client.post(step, {"annotated_paths": ["optimizer.py"], "example_script": "example.py"})

    assert response.status_code == 302, response.content.decode()[-3000:]
    draft.refresh_from_db()
    assert draft.draft["metadata"]["example_script"] == "example.py"


@pytest.mark.parametrize(
    "case,files,message",
    [
        ("path traversal", {"../evil.py": b"x"}, ".."),
        ("not an archive", None, "zip"),
    ],
)
def test_bad_archives_are_refused_next_to_the_field(client, draft, author, case, files, message):
    client.force_login(author)
    upload = zip_of(files, top="") if files else io.BytesIO(b"just text, not an archive")
    upload.name = "code.zip"
    response = client.post(
        reverse("submission-step", args=[draft.pk, "code"]),
        {"source": "archive", "archive": upload},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body, "htmx gets the step back with the error"
    assert 'id="id_archive_error"' in body and message in body.lower()
    draft.refresh_from_db()
    assert "optimizer.py" in draft.draft["files"], "a refused upload loses nothing already in the draft"


def test_empty_paper_upload_is_refused_by_the_field(client, draft, author):
    client.force_login(author)
    empty = io.BytesIO(b"")
    empty.name = "paper.md"
    body = client.post(reverse("submission-step", args=[draft.pk, "paper"]), {"upload": empty}).content.decode()
    assert "The submitted file is empty" in body or "is empty" in body


def test_forbidden_git_url_is_refused_by_the_field(client, draft, author):
    client.force_login(author)
    body = client.post(
        reverse("submission-step", args=[draft.pk, "code"]),
        {"source": "git", "git_url": "file:///etc", "commit": "a" * 40},
    ).content.decode()
    assert 'id="id_git_url_error"' in body and "https" in body


def test_maintainer_add_command(author, capsys):
    from django.core.management import CommandError, call_command

    from benchmarks.selectors import user_is_maintainer

    call_command("maintainer_add", "ada")
    assert user_is_maintainer(user=author) and "now a maintainer" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no account named 'zed'"):
        call_command("maintainer_add", "zed")


def test_the_decision_form_comes_before_the_long_review_material(client, people, draft, author):
    """Issue 37: the decision form sat below a 7,200 px page of report, code and diff; it now leads the page, its
    fields labelled."""
    from submissions import services

    services.submission_submit(submission=draft, actor=author)
    Submission.objects.filter(pk=draft.pk).update(state=State.AWAITING_REVIEW)
    page = as_(client, people["maintainer"]).get(reverse("review-detail", args=[draft.pk])).content.decode()
    decision = page.index('id="decision"')
    assert decision < page.index('id="report"') and decision < page.index("Snippets with their code")
    form = page[decision : page.index("</form>", decision)]
    assert 'aria-labelledby="decision-title"' in page[decision - 80 : decision + 80]
    assert 'for="id_reason"' in form and 'id="id_reason"' in form
    assert form.count('name="decision"') == 3 and "<legend" in form, "the choices are a labelled group"


def test_the_review_page_labels_the_paper_details_as_the_submission_form_does(client, people, draft, author):
    """Issue 37: the review page showed raw field names (arxiv_v1_date, github_url); it uses the details step's
    labels, read from the form."""
    from submissions import services
    from submissions.forms import MetadataForm

    services.submission_submit(submission=draft, actor=author)
    page = as_(client, people["maintainer"]).get(reverse("review-detail", args=[draft.pk])).content.decode()
    details = page[page.index('<dl class="meta">') : page.index("</dl>", page.index('<dl class="meta">'))]
    terms = re.findall(r"<dt>([^<]*)</dt>", details)
    for key in ("title", "arxiv_abs", "arxiv_v1_date", "github_url", "first_commit_date"):
        assert key not in terms
    label = MetadataForm.base_fields["arxiv_v1_date"].label
    assert label == "Date of the paper's first version" and "Date of the paper&#x27;s first version" in terms
    assert "Official code repository" in terms and "Title" in terms
