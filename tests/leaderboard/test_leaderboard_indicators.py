"""What the leaderboard's headers say (issue 37): the sort arrow and aria-sort describe the order of the values shown
("Rank ▼" said descending while rank 1 was on top), and scaled pass@1 is explained where it is shown."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db


def header(page: str, column: str) -> str:
    return re.search(rf'<th [^>]*data-column="{column}".*?</th>', page, re.S).group(0)


def ranks(page: str) -> list[str]:
    ranked = page.split('<tbody class="ranked">')[1].split("</tbody>")[0]
    return re.findall(r'<td data-column="rank"[^>]*><span title="[^"]*">(\d+)</span>', ranked)


def test_the_sort_arrow_says_the_order_of_the_values_shown(client, release):
    calibrate(release, "strong", passed=True)
    calibrate(release, "weak", passed=False)
    url = reverse("leaderboard", args=["1.0.0"])

    best_first = client.get(url).content.decode()
    assert ranks(best_first) == ["1", "2"]
    rank = header(best_first, "rank")
    assert 'aria-sort="ascending"' in rank and '<span aria-hidden="true">▲</span>' in rank, "1 on top reads ascending"

    # `dir` says the order of the numbers shown (issue 37): asc is rank 1 first, as the default, and the header
    # links to it; desc is 2 first, with the arrow down.
    assert ranks(client.get(url, {"sort": "rank", "dir": "asc"}).content.decode()) == ["1", "2"]
    assert "sort=rank&amp;dir=desc" in rank, "the current column's header flips the direction"
    worst_first = client.get(url, {"sort": "rank", "dir": "desc"}).content.decode()
    assert ranks(worst_first) == ["2", "1"]
    rank = header(worst_first, "rank")
    assert 'aria-sort="descending"' in rank and '<span aria-hidden="true">▼</span>' in rank
    assert "sort=rank&amp;dir=asc" in rank

    by_score = header(client.get(url, {"sort": "score", "dir": "desc"}).content.decode(), "scaled_pass_rate")
    assert 'aria-sort="descending"' in by_score and '<span aria-hidden="true">▼</span>' in by_score


def test_scaled_pass_at_1_is_explained_where_it_is_shown(client, release):
    run = calibrate(release, "strong", passed=True)
    help_link = 'href="/guides/leaderboard/#scaled-pass1"'
    for url in (reverse("leaderboard", args=["1.0.0"]), f"/runs/{run.pk}/", f"/models/{run.model.name}/"):
        page = client.get(url).content.decode()
        assert help_link in page and "each snippet weighted by its lines of code" in page, url
    guide = client.get("/guides/leaderboard/").content.decode()
    assert '<h3 id="scaled-pass1">Scaled pass@1</h3>' in guide
