"""Try an answer's body at any indentation (walk 4, item 3): an author pastes a snippet's lines as their editor copied
them (at the file's indentation, at column 0, tab-indented, or begun mid-line so only the first line is at column 0,
with a browser's CRLF line ends), and the body spliced in for judging is the one they meant: placed at the snippet's
own indentation as an uploaded body is. A body whose indentation Python cannot read is refused, saying where, and
nothing is tried or counted."""

from __future__ import annotations

import ast
import textwrap

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.paper2code import splice
from benchmarks.selectors import package_load
from submissions import services
from submissions.models import TriedAnswer
from submissions.selectors import revision_snippet_choices
from tests.conftest import page_text

pytestmark = pytest.mark.django_db

# Two blocks of DampNest.step, a dict over several lines and an if with its body: relative indentation matters.
NAMES = ("initialise optimiser state on first step", "rescale update exceeding trust radius")


def pasted(reference: str) -> dict[str, str]:
    """The reference body as an author's editor may hand it over."""
    at_zero = textwrap.dedent(reference)
    lines = reference.splitlines(keepends=True)
    return {
        "as in the file": reference,
        "at column 0": at_zero,
        "tab-indented, CRLF": "".join(
            "\t" * ((len(line) - len(line.lstrip(" "))) // 4) + line.lstrip(" ") for line in at_zero.splitlines(True)
        ).replace("\n", "\r\n"),
        "copy begun mid-line": lines[0].lstrip() + "".join(lines[1:]),
    }


@pytest.fixture
def revision(draft, author):
    revision = services.submission_submit(submission=draft, actor=author)
    revision.test_manifest = {"runner": "unittest", "tests": {}}  # as if its reference passed validation
    revision.save(update_fields=["test_manifest"])
    return revision


def tried(client: Client, draft, revision, name: str, code: str) -> str:
    value = next(v for v, label in revision_snippet_choices(revision=revision) if label.endswith(name))
    response = client.post(
        reverse("answer-try", args=[draft.pk]), {"try-snippet": value, "try-code": code}, follow=True
    )
    return page_text(response.content.decode())


def test_a_body_pasted_at_any_indentation_is_spliced_as_the_author_meant(client, draft, author, revision, settings):
    settings.RUNS_ACTIVE_PER_USER = 100
    client.force_login(author)
    annotated = package_load(revision).annotated["optimizer.py"]
    original = ast.dump(ast.parse(annotated.text))
    for name in NAMES:
        snippet = next(s for s in annotated.snippets if s.name == name)
        for how, code in pasted(snippet.code).items():
            page = tried(client, draft, revision, name, code)
            answer = TriedAnswer.objects.latest("pk")
            assert answer.snippet_name == name and f'Trying your answer for "{name}"' in page, (how, page[-600:])
            spliced = splice(annotated, snippet, answer.code)
            assert ast.dump(ast.parse(spliced)) == original, (name, how, answer.code)  # the reference's own code
            if how == "as in the file":
                assert answer.code == snippet.code and "were moved" not in page
            else:
                columns = f"the snippet's indentation ({len(snippet.code_indent)} columns)."
                # Begun mid-line, the if block reads as Python reads it (its first line opens the block); the other
                # has its first line alone at column 0, a statement before the deeper ones, moved back beside them.
                apart = how == "copy begun mid-line" and name == NAMES[1]
                said = "were moved together to" if apart else "Its lines were moved to"
                assert f"{said} {columns}" in page, (how, page[-800:])


def test_a_body_whose_indentation_python_cannot_read_is_refused_saying_where(client, draft, author, revision):
    client.force_login(author)
    page = tried(client, draft, revision, NAMES[1], "        u = u * 2\n          u = u + 1\n")
    said = "Not tried: the body's indentation does not make blocks Python can read (line 2: unexpected indent)"
    assert said in page, page
    assert not TriedAnswer.objects.exists()


def test_a_body_holding_a_form_feed_or_a_lone_carriage_return_is_refused_not_placed():
    """Python resets a line's indentation to column 0 at a form feed and breaks a line at a lone CR: placed, such a
    body's line would run outside its function (the independent attacker's route); a browser's CRLF is fine."""
    from common.errors import ApplicationError
    from submissions.answers import answer_body_place

    for body, named in (
        ("x = 1\n\x0c\x0cprint('module level')\nreturn x\n", "line 2 of the body holds a form feed"),
        ("x = 1\rprint('module level')\nreturn x\n", "line 1 of the body holds a carriage return"),
    ):
        with pytest.raises(ApplicationError, match=named):
            answer_body_place(body=body, indent="    ")
    placed, _ = answer_body_place(body="x = 1\r\nreturn x\r\n", indent="    ")
    assert placed == "    x = 1\n    return x\n"
