"""A snippet's mutation score in words (templates/submissions/_mutation.html). Where the package's tests are the
replay tests proposed from its example script, they are one set of tests: the score says so once, not "3 by replaying
the recorded calls, 0 by the tests" beside "The proposed replay tests kill 3 of 3", which read as if the tests killed
nothing (walk 3, item 6)."""

from __future__ import annotations

from django.template.loader import render_to_string

from tests.conftest import page_text

# As submissions/mutants.py's mutation_result and proposed_kills make it: 3 mutants, each told apart by the replay.
RESULT = {
    "generated": 3,
    "counted": 3,
    "killed": 3,
    "survived": 0,
    "score": 1.0,
    "survivors": [],
    "timeouts": [],
    "equivalent": 0,
    "equivalents": [],
    "killed_by": {"replay": 3, "tests": 0},
    "proposed": {"killed": 3, "score": 1.0, "only_tests": [], "only_proposed": []},
}


def test_the_proposed_tests_that_are_the_packages_tests_are_said_to_kill_what_they_kill():
    text = page_text(
        render_to_string("submissions/_mutation.html", {"mutation": RESULT, "tests_proposed_from": "ex.py"})
    )
    assert (
        "Mutation score 100%: the package's tests, which are the replay tests proposed from ex.py (they replay its "
        "recorded calls), kill 3 of 3 wrong bodies." in text
    ), text
    assert "0 by the tests" not in text and "The proposed replay tests kill" not in text
    # Where the proposed tests' own tolerances judge otherwise than the platform's replay, the other count is said.
    other = {**RESULT, "proposed": {**RESULT["proposed"], "killed": 2, "score": 2 / 3}}
    text = page_text(
        render_to_string("submissions/_mutation.html", {"mutation": other, "tests_proposed_from": "ex.py"})
    )
    assert (
        "Within the tolerances their file states per dtype (the platform's replay judges with its own), they "
        "kill 2 of 3" in text
    )


def test_the_authors_own_tests_keep_the_count_of_each_and_the_proposed_tests_apart():
    text = page_text(render_to_string("submissions/_mutation.html", {"mutation": RESULT}))
    # The replay's kills come before the tests run: said so, not as if the author's tests caught nothing (walk 5).
    assert (
        "3 of 3 wrong bodies caught: 3 by the sealed replay of recorded calls (before the tests ran), 0 needed the "
        "tests." in text
    ), text
    assert "The proposed replay tests kill 3 of 3 (100%)" in text


def test_the_words_suit_every_reader_of_the_score_not_only_its_author():
    """The same partial shows on the review page, the paper page and the draft's validation: "shows inputs your tests
    miss" and "Only your tests kill" spoke to a maintainer or a visitor as if they had written the tests."""
    result = {
        **RESULT,
        "equivalents": ["line 3: x > 0 -> x >= 0"],
        "equivalent": 1,
        "proposed": {"killed": 2, "score": 2 / 3, "only_tests": ["line 1: a + b -> a - b"], "only_proposed": []},
    }
    text = page_text(render_to_string("submissions/_mutation.html", {"mutation": result}))
    assert "your tests" not in text, text
    assert "shows inputs the tests miss" in text and "Only the package's own tests kill" in text, text
