"""Walk 38 (a newcomer revising a submission in Chromium): what the submission form kept and offered."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.urls import reverse

from submissions.packages import draft_requirements
from tests.conftest import page_text
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db
TYPED = "numpy\nscipy>=1.10\n"


def _archive(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    buffer.seek(0)
    buffer.name = "code-r2.zip"
    return buffer


def _code_upload(client, submission, files: dict[str, bytes]):
    return client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": _archive(files)}
    )


def test_new_code_without_a_requirements_file_keeps_the_typed_requirements_and_says_so(client, draft, author):
    draft = fill_draft(draft, author, requirements=TYPED)
    client.force_login(author)
    code = {p: d for p, d in demo_files().items() if p != "paper2code_requirements.txt"}
    response = _code_upload(client, draft, code)
    assert response.status_code == 302, page_text(response.content.decode())[-1500:]
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == TYPED
    page = client.get(reverse("submission-step", args=[draft.pk, "files"])).content.decode()
    box = re.search(r'<textarea name="requirements"[^>]*>(.*?)</textarea>', page, re.S)
    assert box and "scipy&gt;=1.10" in box.group(1), box
    assert "kept from before: the new code has no requirements file" in page_text(page), page_text(page)[-2000:]


def test_new_code_with_its_own_requirements_file_wins_and_says_what_it_replaced(client, draft, author):
    draft = fill_draft(draft, author, requirements=TYPED)
    client.force_login(author)
    code = {**demo_files(), "paper2code_requirements.txt": b"numpy>=1.26\n"}
    assert _code_upload(client, draft, code).status_code == 302
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == "numpy>=1.26\n"
    text = page_text(client.get(reverse("submission-step", args=[draft.pk, "files"])).content.decode())
    assert "from paper2code_requirements.txt in the new code, replacing the requirements held before" in text, text
    assert "scipy>=1.10" in text  # what was replaced is named
