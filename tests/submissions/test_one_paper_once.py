"""One paper once (issue 37, item 2): the submission guide's example archive is the demo's own paper; submitted
again it is named as a match to its author and to the maintainer, accepting it needs a reason why it is not a
duplicate, and the changelog of the release it joins keeps that reason. A near copy is matched too, a different
real paper is not, and `import_pset` refuses a matching paper unless given a reason. The similarity itself is
tested without a database in tests/paper2code/test_likeness.py; validation is taken as passed here (it is tested
elsewhere), since a match is found from the submitted revision whatever its checks say."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.duplicates import fingerprints_of
from benchmarks.models import BenchmarkVersion, PackageFingerprint, Task
from benchmarks.paper2code import PackageError
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from config.guides import example_archive
from submissions import duplicates, services
from submissions.models import Submission
from tests.conftest import DEMO_PSET, REPO, page_text
from tests.paper2code.test_likeness import near_copy_code
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db
State = Submission.State
DAMPNEST_TITLE = "DampNest: Curvature-Damped Momentum for Noisy Stochastic Optimisation"


def _awaiting(submission) -> Submission:
    """Its validation taken as passed: a match is found from the revision, whatever its checks say."""
    Submission.objects.filter(pk=submission.pk).update(state=State.AWAITING_REVIEW)
    return Submission.objects.get(pk=submission.pk)


def _example_submitted(client, author) -> tuple[Submission, str]:
    """The guide's example archive uploaded in step 3 as the guide says, under a paper id of the author's own, and
    submitted from its page; with the words of the message submitting gave."""
    client.force_login(author)
    submission = services.submission_create(author=author, values={"metadata": {"title": "x", "id": "x"}})
    archive = io.BytesIO(example_archive())
    archive.name = "example-dampnest.zip"
    response = client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": archive}
    )
    assert response.status_code == 302
    submission.refresh_from_db()
    services.draft_update(
        submission=submission,
        actor=author,
        values={"metadata": {**submission.draft["metadata"], "id": "my-optimiser"}},
    )
    response = client.post(reverse("submission-action", args=[submission.pk, "submit"]), follow=True)
    submission.refresh_from_db()
    assert submission.state == State.VALIDATING, page_text(response.content.decode())[-3000:]
    message = page_text(response.content.decode()).split("validation has started.")[1].split(" A maintainer accepts")[0]
    return submission, message.strip()


def test_the_demo_paper_submitted_again_is_named_to_its_author_and_the_maintainer_and_needs_a_reason(
    client, release, author, maintainer
):
    submission, message = _example_submitted(client, author)
    assert message.startswith(
        f'This paper matches dampnest ("{DAMPNEST_TITLE}", task r1 in release 1.0.0): title identical'
    )
    message = page_text(client.get(reverse("submission-detail", args=[submission.pk])).content.decode())
    # at submission, to the author: which paper, which release, what matched
    box = message[message.index("This paper matches 1 other paper") :]
    assert f"dampnest “{DAMPNEST_TITLE}”, task r1 in release 1.0.0" in box
    assert "title identical; 100% of its paper text; 100% of its code (3 of its 3 code files identical)" in box
    assert "11 of its 11 comparable snippet bodies identical (1 too short to compare)" in box

    submission = _awaiting(submission)
    client.force_login(maintainer)
    url = reverse("review-detail", args=[submission.pk])
    page = client.get(url).content.decode()
    assert 'data-testid="paper-matches"' in page and 'name="duplicate_reason"' in page
    assert page.index('data-testid="paper-matches"') < page.index('id="decision"')  # seen before the decision
    assert f"dampnest “{DAMPNEST_TITLE}”, task r1 in release 1.0.0" in page_text(page)

    refused = page_text(client.post(url, {"decision": "accept", "reason": "fine"}).content.decode())
    assert f'submission {submission.pk} matches dampnest ("{DAMPNEST_TITLE}", task r1 in release 1.0.0)' in refused
    assert "Accept it only with a reason why it is not a duplicate" in refused
    assert Submission.objects.get(pk=submission.pk).state == State.AWAITING_REVIEW
    with pytest.raises(services.TransitionError, match="only with a reason why it is not a duplicate"):
        services.submission_accept(submission=submission, actor=maintainer, reason="fine", duplicate_reason=" ")

    why = "A teaching copy of DampNest, kept on purpose for the tutorial track."
    client.post(url, {"decision": "accept", "reason": "fine", "duplicate_reason": why})
    submission.refresh_from_db()
    assert submission.state == State.ACCEPTED
    # Decided: the advice for a pending decision gives way to what was decided and why, on both pages.
    for viewer, page_name in ((maintainer, "review-detail"), (author, "submission-detail")):
        client.force_login(viewer)
        box = page_text(client.get(reverse(page_name, args=[submission.pk])).content.decode())
        box = box[box.index("This paper matches 1 other paper") :]
        assert f"Accepted by {maintainer.username} on " in box and f"as no duplicate: {why}" in box, box
        assert "Accepting it needs a reason" not in box and "accepts it only with a reason" not in box
    client.force_login(maintainer)
    draft = BenchmarkVersion.objects.get(status="draft")
    published = version_publish(version=draft, actor=maintainer, notes="with a duplicate")
    [entry] = published.changelog["duplicates"]
    assert (entry["paper"], entry["reason"], entry["accepted_by"]) == ("my-optimiser", why, maintainer.username)
    assert entry["source"] == f"submission {submission.pk}" and entry["matches"][0]["paper"] == "dampnest"
    page = page_text(client.get(reverse("version-detail", args=[published.name])).content.decode())
    assert f"my-optimiser (r1) matches dampnest “{DAMPNEST_TITLE}”" in page and why in page


def test_a_near_copy_is_matched_and_a_submission_under_review_is_named(client, release, author, other_author):
    """Variables renamed, comments and layout changed, another title and paper text: its code still matches; and a
    second author's copy of it names the first submission under review."""
    files = demo_files("dampnest")
    files["optimizer.py"] = near_copy_code(files["optimizer.py"].decode()).encode()
    files["paper2code_paper.md"] = b"# Calm steps\n\n" + b"We propose a new optimiser for noisy gradients. " * 60
    first = fill_draft(services.submission_create(author=author), author, files=services.draft_files_store(files))
    services.draft_update(
        submission=first, actor=author, values={"metadata": {**first.draft["metadata"], "id": "calm", "title": "Calm"}}
    )
    services.submission_submit(submission=first, actor=author)
    [match] = duplicates.submission_matches(submission=first)
    assert (match.paper, match.where) == ("dampnest", "task r1 in release 1.0.0")
    assert (
        "100% of its code" in match.what
        and "11 of its 11 comparable snippet bodies" in match.what
        and "(1 too short to compare)" in match.what
    )

    second = fill_draft(services.submission_create(author=other_author), other_author, files=first.draft["files"])
    services.draft_update(
        submission=second,
        actor=other_author,
        values={"metadata": {**second.draft["metadata"], "id": "calm2", "title": "Calm again"}},
    )
    services.submission_submit(submission=second, actor=other_author)
    names = [(m.paper, m.where) for m in duplicates.submission_matches(submission=second)]
    assert ("calm", f"submission {first.pk} r1 (validating)") in names


def test_a_different_real_paper_is_not_matched_and_is_accepted_without_a_question(client, release, author, maintainer):
    muon = REPO / "tests/evaluation/packages/muon/muon"
    files = {p.name: p.read_bytes() for p in muon.iterdir() if p.is_file()}
    submission = fill_draft(
        services.submission_create(author=author),
        author,
        files=services.draft_files_store(files),
        annotated_paths=["muon.py"],
        metadata={"id": "muon", "title": "Muon: An optimizer for hidden layers in neural networks"},
    )
    services.submission_submit(submission=submission, actor=author)
    assert duplicates.submission_matches(submission=submission) == []
    client.force_login(author)
    assert (
        'data-testid="paper-matches"'
        not in client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    )
    services.submission_accept(submission=_awaiting(submission), actor=maintainer, reason="good")


def test_import_pset_refuses_a_matching_paper_unless_given_a_reason(release, tmp_path, maintainer):
    root = tmp_path / "pset"
    shutil.copytree(DEMO_PSET / "dampnest", root / "dampnest-copy", ignore=shutil.ignore_patterns("__pycache__"))
    entry = (DEMO_PSET / "papers.yaml").read_text().split("\n- id: ")[1].split("\n\n")[0]
    (root / "papers.yaml").write_text("- id: " + entry.replace("dampnest\n", "dampnest-copy\n", 1) + "\n")
    with pytest.raises(PackageError, match=r"paper dampnest-copy matches dampnest \(.*task r1 in release 1.0.0\)"):
        pset_import(root=root, version_name="1.1.0")
    with pytest.raises(CommandError, match="--duplicate-reason"):
        call_command("import_pset", str(root), "--version", "1.1.0", stdout=io.StringIO())
    assert not BenchmarkVersion.objects.filter(name="1.1.0").exists()  # nothing imported
    call_command(
        "import_pset",
        str(root),
        "--version",
        "1.1.0",
        "--publish",
        "--duplicate-reason",
        "a test copy",
        stdout=io.StringIO(),
    )
    [entry] = BenchmarkVersion.objects.get(name="1.1.0").changelog["duplicates"]
    assert (entry["paper"], entry["reason"], entry["source"]) == ("dampnest-copy", "a test copy", "import_pset")
    pset_import(root=DEMO_PSET, version_name="1.2.0")  # the same papers again: new revisions, never duplicates


def test_a_held_out_paper_is_named_to_maintainers_only(client, release, author, maintainer):
    """The attack: a held-out paper's title and a guessed snippet body told the author "title identical; 1 of 12
    snippet bodies identical", an oracle for the secret title and each held-out body. An author is told only that a
    maintainer will look at a possible match: not which, nor how alike."""
    release.memberships.filter(task__paper__slug="dampnest").update(split="held_out")
    submission, message = _example_submitted(client, author)
    assert message == "A maintainer will look at a possible match."  # on submitting
    submission = _awaiting(submission)
    author_page = page_text(client.get(reverse("submission-detail", args=[submission.pk])).content.decode())
    box = author_page[author_page.index("This paper matches") :][:600]
    assert "A maintainer will look at a possible match." in box
    for secret in ("dampnest", "DampNest", "release 1.0.0", "identical", "%", "snippet bodies"):
        assert secret not in box, secret
    client.force_login(maintainer)
    review = page_text(client.get(reverse("review-detail", args=[submission.pk])).content.decode())
    assert f"dampnest “{DAMPNEST_TITLE}”, task r1 in release 1.0.0: title identical" in review


def test_another_authors_submission_is_named_to_maintainers_only_and_never_in_the_public_changelog(
    client, release, author, other_author, maintainer
):
    """The attack: an author was shown another author's private submission (id, title, number, state, how alike),
    and once the match was accepted and published, anonymous visitors saw it in the release's changelog; and its
    frozen `where` still said "draft" after the draft was published."""
    secret = fill_draft(services.submission_create(author=other_author), other_author)
    services.draft_update(
        submission=secret,
        actor=other_author,
        values={"metadata": {**secret.draft["metadata"], "id": "alice-secret", "title": "Alice unpublished"}},
    )
    services.submission_submit(submission=secret, actor=other_author)
    release.memberships.filter(task__paper__slug="dampnest").delete()  # the match is the other submission alone
    submission, message = _example_submitted(client, author)
    assert message == "This paper matches another submission under review."
    page = page_text(client.get(reverse("submission-detail", args=[submission.pk])).content.decode())
    box = page[page.index("This paper matches") :][:600]
    assert "Another submission under review." in box
    for named in ("alice-secret", "Alice unpublished", f"submission {secret.pk}", "%", "validating"):
        assert named not in box, named

    submission = _awaiting(submission)
    client.force_login(maintainer)
    url = reverse("review-detail", args=[submission.pk])
    assert f"alice-secret “Alice unpublished”, submission {secret.pk} r1" in page_text(client.get(url).content.decode())
    client.post(url, {"decision": "accept", "reason": "fine", "duplicate_reason": "Ours came first."})
    assert Submission.objects.get(pk=submission.pk).state == State.ACCEPTED
    draft = BenchmarkVersion.objects.get(status="draft")
    published = version_publish(version=draft, actor=maintainer, notes="with a duplicate")
    assert published.changelog["duplicates"][0]["matches"][0]["paper"] == "alice-secret"  # kept for maintainers
    client.logout()
    public_page = page_text(client.get(reverse("version-detail", args=[published.name])).content.decode())
    response = client.get(f"/api/v1/releases/{published.name}/")
    assert response.status_code == 200 and "Ours came first." in (api := response.content.decode())
    for shown in (public_page, api):
        assert (
            "alice-secret" not in shown and "Alice unpublished" not in shown and f"submission {secret.pk}" not in shown
        )
    assert "my-optimiser (r1) matches another submission under review. Accepted" in public_page


def test_a_match_frozen_in_a_draft_names_the_release_once_published(release, maintainer, client):
    """A match kept while the release it names was a draft says "release" once that draft is published."""
    from benchmarks.visibility import changelog_visible

    release.changelog = {
        **(release.changelog or {}),
        "duplicates": [
            {
                "paper": "muon",
                "revision": 1,
                "matches": [
                    {"paper": "dampnest", "title": "D", "where": "task r1 in draft 1.0.0, draft 9.9.9", "what": "x"}
                ],
                "reason": "r",
                "accepted_by": "",
                "source": "s",
            }
        ],
    }
    [entry] = changelog_visible(version=release, user=maintainer)["duplicates"]
    assert entry["matches"][0]["where"] == "task r1 in release 1.0.0, draft 9.9.9"


def test_a_pathological_file_is_submitted_quickly(release, author):
    """The attack: a file of 150k empty strings kept the submit request fingerprinting for minutes (killed by the
    server's timeout, the submission lost). It is fingerprinted in part, quickly, and the submission is kept."""
    import time

    files = demo_files("dampnest")
    files["_table.py"] = b"X = [" + b'"",' * 150_000 + b"]\n"
    submission = fill_draft(services.submission_create(author=author), author, files=services.draft_files_store(files))
    started = time.monotonic()
    revision = services.submission_submit(submission=submission, actor=author)
    assert time.monotonic() - started < 10
    assert duplicates.revision_fingerprint(revision=revision)["partial"]
    assert Submission.objects.get(pk=submission.pk).state == State.VALIDATING


def test_a_stored_packages_fingerprint_is_the_one_made_when_it_was_imported(release):
    """Import makes each task's fingerprint from the package in memory; a package stored before fingerprints were
    has it made from its stored files: the two are one."""
    tasks = list(Task.objects.filter(memberships__version=release))
    assert PackageFingerprint.objects.count() == 3  # stored by the import itself
    made_at_import = fingerprints_of(tasks)
    PackageFingerprint.objects.all().delete()
    assert fingerprints_of(tasks) == made_at_import and PackageFingerprint.objects.count() == len(tasks) == 3


WALK_TITLE = "DampNest (walk3 revision): Curvature-Damped Momentum"


def _same_id_submitted(author) -> Submission:
    """The walk of issue 37: another author submits the demo's paper under its own id `dampnest`, retitled and its
    paper text edited (a new task revision)."""
    files = demo_files("dampnest")
    files["paper2code_paper.md"] += b"\nA walk's edit.\n"
    submission = fill_draft(services.submission_create(author=author), author, files=services.draft_files_store(files))
    services.draft_update(
        submission=submission, actor=author, values={"metadata": {**submission.draft["metadata"], "title": WALK_TITLE}}
    )
    services.submission_submit(submission=submission, actor=author)
    return _awaiting(submission)


def _same_id_accepted(author, maintainer) -> Submission:
    """The walk's submission accepted, the replacement confirmed and a duplicate reason given."""
    submission = _same_id_submitted(author)
    services.submission_accept(
        submission=submission, actor=maintainer, reason="fine", replace_confirmed=True, duplicate_reason="a walk's copy"
    )
    submission.refresh_from_db()
    assert submission.state == State.ACCEPTED and submission.task.revision == 2
    return submission


def test_accepting_a_paper_id_of_a_published_release_asks_and_the_changelog_says_replaced(
    client, release, author, maintainer
):
    submission = _same_id_submitted(author)
    client.force_login(maintainer)
    url = reverse("review-detail", args=[submission.pk])
    page = page_text(client.get(url).content.decode())
    # a fresh submission of a paper id a published release holds is no revision: the maintainer is asked
    assert "Paper id dampnest is already in release 1.0.0" in page and "not a proposed revision of it" in page
    refused = client.post(url, {"decision": "accept", "reason": "fine", "duplicate_reason": "a walk's copy"})
    assert "paper id dampnest is already in release 1.0.0" in page_text(refused.content.decode())
    assert Submission.objects.get(pk=submission.pk).state == State.AWAITING_REVIEW
    client.post(
        url, {"decision": "accept", "reason": "fine", "replace_confirmed": "on", "duplicate_reason": "a walk's copy"}
    )
    submission.refresh_from_db()
    assert submission.state == State.ACCEPTED
    published = version_publish(version=BenchmarkVersion.objects.get(status="draft"), actor=maintainer)
    page = page_text(client.get(reverse("version-detail", args=[published.name])).content.decode())
    assert f"replaced dampnest by submission {submission.pk} (another author): r1 → r2" in page
    assert "new revision" not in page
    # once accepted, the review page's banner never matches the submission with the task it became
    review = page_text(client.get(reverse("review-detail", args=[submission.pk])).content.decode())
    assert f"dampnest “{DAMPNEST_TITLE}”, task r1 in release 1.0.0" in review
    assert f"dampnest “{WALK_TITLE}”" not in review


def test_a_drafts_changelog_preview_has_what_publishing_adds(client, release, author, maintainer):
    _same_id_accepted(author, maintainer)
    client.force_login(maintainer)
    draft = BenchmarkVersion.objects.get(status="draft")
    preview = page_text(client.get(reverse("version-detail", args=[draft.name])).content.decode())
    assert "accepted as not a duplicate dampnest (r2) matches dampnest" in preview and "a walk's copy" in preview
    published = version_publish(version=draft, actor=maintainer)
    page = page_text(client.get(reverse("version-detail", args=[published.name])).content.decode())
    assert preview[preview.index("Changes since") :].count("a walk's copy") == page.count("a walk's copy") == 1


def test_a_published_release_shows_its_papers_as_it_froze_them(client, release, author, maintainer):
    _same_id_accepted(author, maintainer)
    draft = BenchmarkVersion.objects.get(status="draft")
    assert draft.tasks.get(paper__slug="dampnest").paper.title == WALK_TITLE  # the paper's row moved on
    for url in (
        reverse("paper-detail", args=[release.name, "dampnest"]),
        reverse("version-detail", args=[release.name]),
    ):
        page = page_text(client.get(url).content.decode())
        assert DAMPNEST_TITLE in page and WALK_TITLE not in page, url
    # the leaderboard's per-paper tooltips and an item's paper, read by the same rule
    from benchmarks.selectors import version_snippet_get
    from leaderboard.selectors.breakdowns import leaderboard_paper_heatmap

    heatmap = leaderboard_paper_heatmap(version=release, rows=[], user=maintainer)
    assert [p.title for p in heatmap.papers if p.slug == "dampnest"] == [DAMPNEST_TITLE]
    snippet = release.tasks.get(paper__slug="dampnest").snippets.first()
    assert version_snippet_get(version=release, snippet_id=snippet.pk).task.paper.title == DAMPNEST_TITLE
    client.force_login(maintainer)
    page = page_text(client.get(reverse("paper-detail", args=[draft.name, "dampnest"])).content.decode())
    assert WALK_TITLE in page  # a draft shows the paper's latest fields
