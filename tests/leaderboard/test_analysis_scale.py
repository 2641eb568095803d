"""The analysis pages and API at 50 models x 1,000 items (bulk-created, as scripts/bench_analysis.py builds them) make
no more queries than at 5 models x 50 items: ranks, difficulty and failure categories read stored split scores."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scripts.bench_analysis import leaderboard_world, pages

pytestmark = pytest.mark.django_db


def test_queries_do_not_grow_with_models_and_items(client, django_assert_max_num_queries, maintainer):
    small = pages(leaderboard_world(name="small", models=5, items=50))
    large = pages(leaderboard_world(name="large", models=50, items=1000, seed=1))
    for viewer in ("anonymous", "maintainer"):  # a maintainer's difficulty reads held-out items too
        if viewer == "maintainer":
            client.force_login(maintainer)
        for label, url in small.items():
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200, url
            # A signed-in paper page also reads the person's attempts and seen references (the human baseline):
            # a few queries more, as many at any size.
            assert len(ctx.captured_queries) <= 30, (label, len(ctx.captured_queries))
            with django_assert_max_num_queries(len(ctx.captured_queries)):
                response = client.get(large[label])
            assert response.status_code == 200, large[label]
    ranks = [r["rank"] for r in client.get(large["API leaderboard"]).json()]
    assert len(ranks) == 50 and min(ranks) == 1 and len(set(ranks)) > 1
    assert len(client.get(large["API difficulty"]).json()) == 1000  # a maintainer sees the held-out items too
