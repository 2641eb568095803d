"""A run's item on its own page: the outcome and its detail, the model's code highlighted beside the reference, and
the diff between them (hand-checked); hostile answers stay text; held-out items follow the visibility matrix
(tests/test_visibility_matrix.py covers this route for every role)."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.urls import reverse

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from common.highlight import MAX_HIGHLIGHT_CHARS, answer_diff, code_html, style_css
from evaluation import services
from evaluation.models import Outcome
from evaluation.outcomes import Verdict
from tests.conftest import DEMO_PSET, REPO

pytestmark = pytest.mark.django_db


def test_the_diff_of_an_answer_against_the_reference_by_hand():
    reference = "        a = x + 1\n        b = a * 2\n        return b\n"
    answer = "        a = x + 1\n        b = a * 3\n        return b\n"  # one line changed
    assert answer_diff(reference=reference, answer=answer) == (
        "--- reference\n+++ model's answer\n@@ -1,3 +1,3 @@\n         a = x + 1\n-        b = a * 2\n"
        "+        b = a * 3\n         return b\n"
    )
    assert answer_diff(reference=reference, answer=reference + "\n") == ""
    # The splice takes an answer's lines unchanged: a dedented answer is a difference, the cause of its failure.
    dedented = answer_diff(reference=reference, answer=reference.replace("        ", ""))
    assert "-        a = x + 1\n" in dedented and "+a = x + 1\n" in dedented
    assert answer_diff(reference=reference, answer="").startswith("--- reference\n+++ model's answer\n@@ -1,3 +0,0 @@")


def test_highlighting_escapes_hostile_text_and_gives_up_on_huge_text():
    hostile = 'x = "</code></pre><script>alert(1)</script>"\n'
    html = str(code_html(hostile))
    assert "<script>" not in html and "&lt;script&gt;" in html and '<span class="n">x</span>' in html
    huge = "y = 1\n" * (MAX_HIGHLIGHT_CHARS // 6 + 1) + "<b>"
    plain = str(code_html(huge))
    assert '<span class="n">' not in plain and plain.endswith("&lt;b&gt;</code></pre></div>")


def test_the_stylesheet_is_what_pygments_makes():
    text = (REPO / "static" / "css" / "pygments.css").read_text()
    assert text.split("\n", 1)[1] == style_css(), "regenerate static/css/pygments.css from common.highlight"


@pytest.fixture
def scored(media_root, author):
    """An upload on the demo release answering one snippet with a changed line and a hostile string, one with a
    re-indented reference, and the rest with the reference; outcomes recorded by hand."""
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    snippets = list(Snippet.objects.filter(task__versions=version).order_by("pk"))
    changed, same = snippets[0], snippets[1]
    kept, last = changed.reference_code.rstrip("\n").rsplit("\n", 1)
    indent = last[: len(last) - len(last.lstrip())]
    hostile = f"{kept}\n{indent}zz = '</code><script>alert(1)</script>'\n"
    lines = []
    for snippet in snippets:
        code = (
            hostile
            if snippet == changed
            else (
                "\n".join("  " + ln for ln in same.reference_code.splitlines()) + "\n"
                if snippet == same
                else snippet.reference_code
            )
        )
        lines.append(json.dumps({"id": str(snippet.pk), "sample": 0, "code": code}))
    model = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    run = services.run_from_upload(model=model, version=version, data="\n".join(lines).encode(), user=author)
    for generation in run.generations.select_related("snippet__task"):
        verdict = (
            Verdict("failed", "runtime", "NameError: name 'zz' is not defined")
            if generation.snippet == changed
            else Verdict("passed", "", "")
        )
        services.outcome_record(run=run, snippet=generation.snippet, sample=0, verdict=verdict, generation=generation)
    return {"run": run, "changed": changed, "same": same, "last": last}


def _page(client, run, snippet):
    outcome = Outcome.objects.get(run=run, snippet=snippet)
    response = client.get(reverse("run-item", args=[run.pk, outcome.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_a_public_item_shows_the_answer_beside_the_reference_with_their_diff(client, scored):
    run, changed = scored["run"], scored["changed"]
    body = _page(client, run, changed)
    assert "Runtime error" in body and "NameError: name &#x27;zz&#x27; is not defined" in body
    assert body.count('<div class="highlight">') >= 3  # answer, reference, diff
    side = body[body.index('class="side-by-side"') : body.index("<h2>Difference</h2>")]
    assert "The model's code" in side and "Reference" in side
    diff = _text(body[body.index('<div class="diff">') :])
    assert "--- reference" in diff and "+++ model's answer" in diff
    reference = changed.reference_code.rstrip().splitlines()
    # Only the last line differs: it goes, the hostile line comes (indented as in the file, shown as text).
    assert [ln for ln in diff.splitlines() if ln[:1] and ln[0] in "+-" and ln[:3] not in ("---", "+++")] == [
        f"-{reference[-1]}",
        f"+{reference[-1][: len(reference[-1]) - len(reference[-1].lstrip())]}zz = '</code><script>alert(1)</script>'",
    ]
    assert "<script>alert(1)</script>" not in body
    assert '<span class="gi">' in body and '<span class="gd">' in body


def test_a_code_body_indented_deeper_is_re_indented_so_it_has_no_diff(client, scored):
    body = _page(client, scored["run"], scored["same"])
    assert "The model's code is the reference code." in body
    assert '<div class="diff">' not in body


def test_the_run_page_highlights_answers_and_links_each_item(client, scored):
    run = scored["run"]
    body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    for outcome in Outcome.objects.filter(run=run):
        assert reverse("run-item", args=[run.pk, outcome.pk]) in body
    assert '<div class="highlight">' in body and "<script>alert(1)</script>" not in body


def test_an_outcome_of_another_run_or_none_is_not_found(client, scored, author):
    run = scored["run"]
    outcome = Outcome.objects.filter(run=run).first()
    other = services.run_from_upload(
        model=run.model,
        version=run.version,
        user=author,
        data="\n".join(
            json.dumps({"id": str(g.snippet_id), "sample": 0, "code": g.extracted_code}) for g in run.generations.all()
        ).encode(),
    )
    assert client.get(reverse("run-item", args=[other.pk, outcome.pk])).status_code == 404
    assert client.get(reverse("run-item", args=[run.pk, 999999])).status_code == 404


def test_the_item_page_and_the_api_give_the_harness_s_count_of_the_tests(client, scored):
    from evaluation.outcomes import test_rows
    from sandbox.harness import CountedTest, HarnessVerdict

    run, changed = scored["run"], scored["changed"]
    counted = HarnessVerdict(
        True,
        "",
        "",
        (),
        (
            CountedTest("__main__.T.test_shape", "passed", True),
            CountedTest("__main__.T.test_values", "failed", False, detail="Traceback ...\nAssertionError: 1 != 2"),
            CountedTest("__main__.T.test_grad", "skipped", False, detail="skipped: no GPU"),
            CountedTest("__main__.T.test_norm", "passed", True),
        ),
        1,
    )
    manifest = {
        "runner": "unittest",
        "runs": 1,
        "tests": {f"__main__.T.test_{n}": "passed" for n in ("shape", "values", "grad", "norm")},
    }
    Outcome.objects.filter(run=run, snippet=changed).update(tests=test_rows(harness=counted, manifest=manifest))
    body = _page(client, run, changed)
    table = _text(body[body.index('id="tests-heading"') : body.index("</table>")])
    assert "2 of 4 tests passed" in table
    assert "__main__.T.test_values" in table and "AssertionError: 1 != 2" in table
    assert "was skipped (no GPU); the reference runs it" in table
    results = client.get(reverse("api-run-results", args=[run.pk])).json()["results"]
    row = next(r for r in results if r["item"] == changed.pk)
    assert row["tests_summary"] == "2 of 4 tests passed"
    assert [(t["id"], t["passed"]) for t in row["tests"]] == [
        ("__main__.T.test_shape", True),
        ("__main__.T.test_values", False),
        ("__main__.T.test_grad", False),
        ("__main__.T.test_norm", True),
    ]
    assert "AssertionError: 1 != 2" in row["tests"][1]["detail"]
    # Outcomes recorded before the harness counted tests have no table.
    assert 'id="tests-heading"' not in _page(client, run, scored["same"])


def test_a_failed_public_item_shows_the_tests_traceback_and_output_tail(client, scored, author):
    """The cause of a failure is on the item page: the traceback's last lines and the output's, to anyone who may
    see the task (a public item here); a passed item shows none."""
    run, changed = scored["run"], scored["changed"]
    printed = "".join(f"step {n}\n" for n in range(100))
    traceback = (
        'Traceback (most recent call last):\n  File "optimizer.py", line 12, in step\n'
        "    zz = '</code>'\nNameError: name 'zz' is not defined\n"
    )
    Outcome.objects.filter(run=run, snippet=changed).update(stdout_tail=printed, stderr_tail="warming up\n" + traceback)
    body = _page(client, run, changed)
    shown = unescape(body[body.index("data-traceback>") + len("data-traceback>") :])
    assert shown.startswith(traceback) and "warming up" not in shown.split("</pre>")[0]
    output = unescape(body[body.index("data-output>") + len("data-output>") :].split("</pre>")[0])
    assert output.startswith("…\n") and "step 99\n" in output and "step 50\n" not in output
    assert "NameError: name 'zz' is not defined" in output
    assert "What the test printed" not in _page(client, run, scored["same"])


def test_a_traceback_shows_paths_relative_to_the_papers_folder(client, scored):
    """Issue 37: tracebacks showed the host's and the harness's folders. The paper's files read relative to its
    folder, installed packages under <env>/, the standard library under <python>/, the harness as <harness>/."""
    run, changed = scored["run"], scored["changed"]
    folder = "/home/runner/var/cache/sandbox/work-7f3a/task"
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/unittest/case.py", line 57, in testPartExecutor\n'
        '  File "<string>", line 802, in called_body\n'
        f'  File "{folder}/paper2code_test.py", line 30, in test_step\n'
        '  File "/tmp/rcb-harness-x1/child.py", line 40, in call\n'
        '  File "<string>", line 3, in answer_helper\n'
        f'  File "{folder}/{changed.file_path}", line 12, in step\n'
        '  File "/srv/envs/3f2a/lib/python3.11/site-packages/numpy/core/fromnumeric.py", line 3, in sum\n'
        "NameError: name 'zz' is not defined\n"
    )
    Outcome.objects.filter(run=run, snippet=changed).update(stderr_tail=traceback)
    body = _page(client, run, changed)
    shown = unescape(body[body.index("data-traceback>") + len("data-traceback>") :].split("</pre>")[0])
    assert 'File "<python>/unittest/case.py", line 57' in shown
    assert 'File "paper2code_test.py", line 30' in shown and f'File "{changed.file_path}", line 12' in shown
    assert 'File "<harness>/child.py", line 40' in shown
    assert 'File "<env>/numpy/core/fromnumeric.py", line 3' in shown
    assert "/home/runner" not in body and "/tmp/rcb-harness" not in body and "/srv/envs" not in body
    # The harness's test process runs compiled from a string: its frames are left out, a string's of the test kept.
    assert "called_body" not in body and 'File "<string>", line 3, in answer_helper' in shown
    api = client.get(f"/api/v1/runs/{run.pk}/results/").json()
    item = next(r for r in (api.get("results") or api) if r["item"] == changed.pk)
    assert item["traceback"].startswith("Traceback") and folder not in item["traceback"]
    assert "called_body" not in item["traceback"]
    assert item["error_line"] == 12, "the snippet's line is still found in the relative path"


def test_nested_snippets_markers_are_no_difference():
    """A parent snippet's reference carries its children's markers (comments); an answer without them is the same
    code, and the diff shows only what differs."""
    from types import SimpleNamespace

    from evaluation.selectors.item_pages import RunItem

    reference = '    # <paper2code name="inner">\n    y = x + 1\n    # </paper2code name="inner">\n    return y * 2\n'
    outcome = SimpleNamespace(
        snippet=SimpleNamespace(reference_code=reference),
        generation=SimpleNamespace(extracted_code="    y = x + 1\n    return y * 2\n"),
    )
    assert RunItem(outcome=outcome, show_reference=True).diff == ""
    outcome.generation.extracted_code = "    y = x + 1\n    return y * 3\n"
    changed = [
        line
        for line in RunItem(outcome=outcome, show_reference=True).diff.splitlines()
        if line[:1] in "+-" and line[:3] not in ("---", "+++")
    ]
    assert changed == ["-    return y * 2", "+    return y * 3"]


def test_the_item_page_never_shows_the_harness_s_status_line(client, scored):
    """The harness ends the test's output with its own line (a nonce, the status and its encoded records, the guard's
    evidence among them): outcomes stored before it was taken out at the source hold it, and the page shows the
    verdict's words and what the test printed, never that line."""
    import base64

    run, changed = scored["run"], scored["changed"]
    evidence = base64.b64encode(b"tampering\tsetattr\t12\tnumpy.testing.assert_allclose replaced").decode()
    status = f"rcb-done-{'ab' * 16} completed 1 {len(evidence)} {evidence} 8 cnVucwkx"
    Outcome.objects.filter(run=run, snippet=changed).update(stdout_tail=f"step 1\n{status}\n", stderr_tail="")
    text = _text(_page(client, run, changed))
    assert "step 1" in text and "NameError: name 'zz' is not defined" in text  # the test's output, the verdict
    assert "rcb-done-" not in text and evidence not in text


def test_a_run_under_the_harness_keeps_only_what_the_test_printed(sandbox):
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import limits_default, package_test

    files = {"paper2code_test.py": b"print('the test speaks')\nraise SystemExit(3)\n"}
    run = package_test(
        files=files,
        test_entry_point="paper2code_test.py",
        environment_hash=environment_hash(""),
        requirements="",
        limits=limits_default(),
    )
    assert run.verdict.status == "failed" and "the test speaks" in run.result.stdout
    assert "rcb-done-" not in run.result.stdout, run.result.stdout


def test_a_flagged_item_says_why_to_its_owner_and_only_the_rule_to_others(client, scored, author, other_author):
    """Everyone who may see a flagged item reads that it counts as not passed until reviewed; the run's owner reads
    what was found: a static finding's rule and line, a runtime guard's or replay's kind, never their evidence."""
    run, same = scored["run"], scored["same"]
    outcome = Outcome.objects.get(run=run, snippet=same)
    outcome.status, outcome.measured_status = Outcome.Status.FLAGGED, "passed"
    outcome.findings = [
        {"kind": "tampering", "line": 26, "detail": "imports unittest", "source": "static", "rule": "test-framework"},
        {"kind": "tampering", "line": None, "detail": "SECRET-GUARD-RECORD", "source": "runtime"},
        {"kind": "sealed-replay", "line": None, "detail": "SECRET-REPLAY-VALUE", "source": "replay"},
    ]
    outcome.save()
    url = reverse("run-item", args=[run.pk, outcome.pk])

    def said(user):
        client.logout()
        if user:
            client.force_login(user)
        return _text(client.get(url).content.decode())

    for user in (None, other_author):
        text = said(user)
        assert "counts as not passed until a maintainer reviews it" in text
        assert "test-framework" not in text and "line 26" not in text
    text = said(author)
    assert "counts as not passed until a maintainer reviews it" in text
    assert "(rule test-framework), line 26 of" in text and "imports unittest" in text
    assert "runtime guard caught" in text and "sealed-replay" in text
    assert "SECRET" not in text
    run_page = _text(client.get(reverse("run-detail", args=[run.pk])).content.decode())
    assert "1 item awaiting review: a flagged item counts as not passed until a maintainer reviews it" in run_page


def recording_seal(snippet: Snippet, *, sealed: bool, reason: str = "") -> None:
    """The snippet's entry in its task's recording, as judging/sealed.py makes it (sealed, or the reason why not)."""
    task = snippet.task
    key = f"{snippet.file_path}#{snippet.position}"
    task.recording = {**(task.recording or {}), "snippets": {key: {"sealed": sealed, "reason": reason}}}
    task.save(update_fields=["recording"])


def test_an_item_says_whether_its_snippet_isrecording_sealed_and_what_the_replay_said(
    client, scored, author, other_author, maintainer
):
    """Whoever may see the task reads whether the snippet is sealed (as its paper page says); the run's owner and
    maintainers read what the replay said (it agreed, it disagreed, or why it did not run); its difference, which
    can quote recorded values, only maintainers."""
    run, same, changed = scored["run"], scored["same"], scored["changed"]
    recording_seal(same, sealed=True)
    passed = Outcome.objects.get(run=run, snippet=same)

    def said(user, outcome):
        client.logout()
        if user:
            client.force_login(user)
        return _text(client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode())

    for user in (None, other_author):
        text = said(user, passed)
        assert "Sealed replay" in text and "sealed: a pass needs the tests to pass" in text
        assert "ran and agreed" not in text
    assert "ran and agreed with the reference on every recorded call" in said(author, passed)

    passed.status, passed.measured_status = Outcome.Status.FLAGGED, "passed"
    passed.findings = [{"kind": "sealed-replay", "line": None, "detail": "SECRET-REPLAY-VALUE", "source": "replay"}]
    passed.save()
    text = said(author, passed)
    assert "ran and disagreed with the reference, although the tests passed" in text
    assert "SECRET" not in text
    assert "SECRET-REPLAY-VALUE" in said(maintainer, passed)
    assert "SECRET" not in said(None, passed) and "disagreed" not in said(None, passed)

    # The answer whose tests failed was never replayed; an unsealed snippet's reason is said.
    recording_seal(changed, sealed=False, reason="arguments that cannot be recorded")
    failed = Outcome.objects.get(run=run, snippet=changed)
    text = said(author, failed)
    assert "unsealed (arguments that cannot be recorded)" in text
    assert "not run: the paper's tests did not pass" in text


def test_an_item_of_a_task_with_no_recording_says_so(client, scored):
    run, same = scored["run"], scored["same"]
    text = _page(client, run, same)
    assert "no recording yet: the verdict is the tests' and the guard's" in _text(text)
