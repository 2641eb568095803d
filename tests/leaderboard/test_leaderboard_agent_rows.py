"""Single-shot and agent rows of one model side by side (issue 23): the mode filter, the cost column ("unavailable",
never 0), repeated runs grouped as one row with the mean and standard error, the cost-against-score view, the run
page's agent summary, one money format and correct plurals."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents.models import AgentStep, AgentTrajectory
from benchmarks.models import Snippet, VersionTask
from common.money import usd
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from leaderboard import charts
from leaderboard.selectors import table as table_selectors
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db


def agent(run: EvaluationRun, **fields) -> EvaluationRun:
    """The run as an agent run (the leaderboard reads the stored mode; the loop itself is tested elsewhere)."""
    EvaluationRun.objects.filter(pk=run.pk).update(mode="agent", **fields)
    run.refresh_from_db()
    return run


def table_rows(body: str) -> list[str]:
    ranked = body.split('<tbody class="ranked">')[1].split("</tbody>")[0]
    return ranked.split("</tr>")[:-1]


def test_the_mode_filter_keeps_one_mode_in_the_page_its_url_and_the_api(client, release):
    coder = model("coder", display_name="Coder")
    single = evaluate(release, coder, lambda s: False)
    agent_run = agent(evaluate(release, coder, lambda s: True))
    reference = agent(evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True))
    url = reverse("leaderboard", args=["1.0.0"])

    both = client.get(url).content.decode()
    assert 'id="id_mode"' in both and '<option value="agent" >agent</option>' in both
    assert reverse("run-detail", args=[single.pk]) in both and reverse("run-detail", args=[agent_run.pk]) in both
    # Was ">agent, with paper<" in the Model cell; the Mode column names the mode now (the cell the paper setting).
    assert '<span class="badge mode agent">agent</span>' in both and ">with paper<" in both, "two modes side by side"

    agents = client.get(url, {"mode": "agent"}).content.decode()
    assert reverse("run-detail", args=[agent_run.pk]) in agents
    assert reverse("run-detail", args=[single.pk]) not in agents
    assert reverse("run-detail", args=[reference.pk]) in agents, "a reference line of the mode stays"
    assert '<option value="agent" selected>' in agents and "mode=agent" in agents, "kept in the links to share"

    singles = client.get(url, {"mode": "single"}, headers={"HX-Request": "true", "HX-Target": "leaderboard-table"})
    partial = singles.content.decode()
    assert "<html" not in partial and reverse("run-detail", args=[single.pk]) in partial
    assert reverse("run-detail", args=[agent_run.pk]) not in partial
    assert reverse("run-detail", args=[reference.pk]) not in partial, "an agent reference line is no single-shot one"

    api = client.get(reverse("api-leaderboard", args=["1.0.0"]), {"mode": "agent"}).json()
    assert {(r["run"], r["mode"]) for r in api} == {(agent_run.pk, "agent"), (reference.pk, "agent")}
    assert client.get(url, {"mode": "nonsense"}).status_code == 200


def test_the_cost_column_gives_the_runs_total_and_per_item_cost(client, release):
    items = Snippet.objects.filter(task__versions=release).count()
    run = evaluate(release, model("paid", display_name="Paid"), lambda s: True, cost=Decimal("0.002"))
    free = evaluate(release, model("free", display_name="Free"), lambda s: False, cost=Decimal(0))
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    paid_row = next(r for r in table_rows(body) if reverse("run-detail", args=[run.pk]) in r)
    total = Decimal("0.002") * items
    assert f'{usd(total)} <span class="muted per-item">($0.002/item)</span>' in paid_row
    free_row = next(r for r in table_rows(body) if reverse("run-detail", args=[free.pk]) in r)
    assert "$0.00 <span" in free_row, "a known zero cost is $0.00, not unavailable"
    record = next(r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json() if r["run"] == run.pk)
    # Numbers as numbers (issue 37: cost was a string, "0.066000", in JSON where every other quantity is a number).
    assert isinstance(record["cost"], float) and isinstance(record["cost_per_item"], float)
    assert record["cost"] == pytest.approx(float(total)) and record["cost_per_item"] == pytest.approx(0.002)
    csv_text = client.get(reverse("api-leaderboard-csv", args=["1.0.0"])).content.decode()
    assert "cost_per_item" in csv_text.splitlines()[0]


def test_one_unknown_item_cost_makes_the_runs_cost_unavailable(client, release):
    run = evaluate(release, model("partly", display_name="Partly"), lambda s: True, cost=Decimal("0.01"))
    first = run.generations.order_by("pk").first()
    type(first).objects.filter(pk=first.pk).update(cost=None)
    from evaluation.scoring import run_scores_store

    run_scores_store(run=run)
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    row = next(r for r in table_rows(body) if reverse("run-detail", args=[run.pk]) in r)
    assert ">unavailable</span>" in row and "$" not in row.split('class="num score"')[1].split("provenance")[0]
    rows = table_selectors.leaderboard_rows(version=release)
    assert next(r for r in rows if r.run.pk == run.pk).cost_per_item is None


def test_repeated_runs_are_one_row_with_the_mean_and_standard_error(client, release):
    """Three runs started together: all items pass, none pass, all pass. By hand: mean (100 + 0 + 100) / 3 =
    66.7; sample standard deviation sqrt(((100-66.67)^2 * 2 + (0-66.67)^2) / 2) = 57.74; standard error
    57.74 / sqrt(3) = 33.3."""
    repeater = model("repeater", display_name="Repeater")
    runs = [evaluate(release, repeater, passes) for passes in (lambda s: True, lambda s: False, lambda s: True)]
    EvaluationRun.objects.filter(pk__in=[r.pk for r in runs]).update(
        repeat_group="00000000-0000-0000-0000-000000000023"
    )
    evaluate(release, model("alone", display_name="Alone"), lambda s: True)

    rows = {r.run.model.name: r for r in table_selectors.leaderboard_rows(version=release)}
    row = rows["repeater"]
    assert row.run.pk == runs[-1].pk, "the row is still the latest run (the leaderboard's rule)"
    mean = (100 + 0 + 100) / 3
    se = math.sqrt(((100 - mean) ** 2 * 2 + (0 - mean) ** 2) / 2) / math.sqrt(3)
    assert row.runs_count == 3
    assert row.scaled_mean == pytest.approx(mean) and row.scaled_se == pytest.approx(se)
    assert row.pass_mean == pytest.approx(mean) and row.pass_se == pytest.approx(se)
    assert rows["alone"].runs_count == 1 and rows["alone"].scaled_se is None

    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    cells = next(r for r in table_rows(body) if reverse("run-detail", args=[runs[-1].pk]) in r)
    # Was "± 33.3 (3 runs)", unkeyed under a header naming a 95% interval: now keyed as a mean ± SE.
    assert "<strong>66.7%</strong>" in cells and '<span class="ci">± 33.3</span>' in cells
    assert '<abbr title="the mean across the 3 runs started together (repeat) ± the standard error' in cells
    assert ">mean ± SE</abbr> over 3 runs)" in cells and 'id="repeat-key"' in body, "the legend says it too"
    links = [f'<a href="{reverse("run-detail", args=[run.pk])}">#{run.pk}</a>' for run in runs]
    assert ", ".join(links) in cells, "each run reachable from the row, oldest first"
    assert "(mean over 3 runs)" in cells and "mean $" not in cells, "the cost keyed the same way as the score"

    page = client.get(reverse("run-detail", args=[runs[1].pk])).content.decode()
    group = page.split('id="repeat-group">')[1].split("</dd>")[0]
    assert group.startswith("Run 2 of 3 identical runs started together")
    assert f"<strong>#{runs[1].pk} (this run)</strong>" in group
    assert links[0] in group and links[2] in group
    alone = client.get(reverse("run-detail", args=[rows["alone"].run.pk])).content.decode()
    assert 'id="repeat-group"' not in alone
    record = next(r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json() if r["run"] == runs[-1].pk)
    assert record["runs"] == 3 and round(record["scaled_pass_rate_se"], 6) == round(se, 6)
    assert record["scaled_pass_rate"] == 100.0, "the row's own run's score stays in its column"


def test_repeat_starts_runs_of_one_setting_together_from_the_service_command_api_and_page(client, release, maintainer):
    reference = ModelEntry.objects.get(name="reference")
    runs = services.runs_start(repeat=3, model=reference, version=release, dispatch=False)
    assert len({r.repeat_group for r in runs}) == 1 and runs[0].repeat_group is not None
    assert services.runs_start(model=reference, version=release, dispatch=False)[0].repeat_group is None
    with pytest.raises(services.EvaluationError, match="repeat must be between 1"):
        services.runs_start(repeat=services.MAX_REPEAT + 1, model=reference, version=release, dispatch=False)

    client.force_login(maintainer)
    started = client.post(
        reverse("api-run-start"),
        {"model": "reference", "release": "1.0.0", "repeat": 2},
        content_type="application/json",
    )
    assert started.status_code == 201, started.content
    assert len(started.json()["repeat_runs"]) == 2 and started.json()["repeat_group"]
    page = client.post(reverse("run-new", args=["reference"]), {"release": "1.0.0", "samples": 1, "repeat": 2})
    assert page.status_code == 302
    assert EvaluationRun.objects.filter(repeat_group__isnull=False).values("repeat_group").distinct().count() == 3


def test_evaluate_repeat_starts_that_many_runs(release):
    call_command("evaluate", model="reference", version="1.0.0", repeat=2, inline=True)
    runs = EvaluationRun.objects.filter(model__name="reference").order_by("pk")
    assert len(runs) == 2 and runs[0].repeat_group == runs[1].repeat_group is not None
    assert all(r.status == EvaluationRun.Status.COMPLETED for r in runs)


def test_the_cost_against_score_view_labels_each_point_and_marks_the_pareto_front(client, release):
    cheap = evaluate(release, model("cheap", display_name="Cheap"), lambda s: s.loc > 4, cost=Decimal("0.001"))
    best = agent(evaluate(release, model("best", display_name="Best"), lambda s: True, cost=Decimal("0.5")))
    waste = evaluate(release, model("waste", display_name="Waste"), lambda s: False, cost=Decimal("0.9"))
    unknown = evaluate(release, model("unknown", display_name="Unknown"), lambda s: True, cost=None)
    scatter = charts.leaderboard_cost_scatter(rows=table_selectors.leaderboard_rows(version=release))
    front = {p.row.run.pk for p in scatter["points"] if p.pareto}
    assert front == {cheap.pk, best.pk} and scatter["unavailable"] == 1 and scatter["log"]
    assert unknown.pk not in {p.row.run.pk for p in scatter["points"]}
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    figure = body.split('id="cost-scatter"')[1].split("</figure>")[0]
    assert "<svg" in figure and 'role="img"' in figure and "1 row with an unavailable cost not drawn" in figure
    assert ">Best (agent, with paper)</text>" in figure and ">Waste (with paper)</text>" in figure
    assert f'data-run="{waste.pk}"' in figure and "on the Pareto front</title>" in figure
    table = figure.split("<table>")[1]  # the fallback: the same numbers as a table
    assert '<th scope="row">Best (agent, with paper)</th><td class="num">$0.50</td><td class="num">100.0%' in table


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "unavailable"),
        ("", "unavailable"),
        (0, "$0.00"),
        (Decimal("12.5"), "$12.50"),
        (1234.5, "$1,234.50"),
        (Decimal("0.0123"), "$0.0123"),
        (0.002, "$0.002"),  # was "$0.0020": below $1 four significant digits, trailing zeros dropped to cents
        (0.5, "$0.50"),  # was "$0.5000"
        (Decimal("0.123456"), "$0.1235"),
        (5, "$5.00"),
        (Decimal("0.000012"), "$0.000012"),
    ],
)
def test_one_money_format(value, text):
    assert usd(value) == text


def _agent_item(run: EvaluationRun, snippet: Snippet, *, turns: int, ended_by: str, cost) -> Outcome:
    generation = services.generation_record(
        run=run,
        snippet=snippet,
        sample=0,
        prompt="p",
        raw_answer="```python\nx = 1\n```",
        prompt_tokens=1,
        completion_tokens=0,
        cost=cost,
    )
    outcome = Outcome.objects.create(run=run, snippet=snippet, status="passed", generation=generation)
    trajectory = AgentTrajectory.objects.create(
        run=run,
        snippet=snippet,
        budget={"turns": 1, "tokens": 1, "seconds": 60, "cost": 0.5},
        ended_by=ended_by,
        turns=turns,
        prompt_tokens=1,
        completion_tokens=0,
        cost=cost,
        seconds=2.0,
    )
    AgentStep.objects.create(
        trajectory=trajectory, index=0, role="assistant", content="done", budget_left={"turns": 1, "tokens": 1}
    )
    return outcome


def test_the_run_page_sums_an_agent_run_and_the_item_page_shows_the_trajectory_first(client, release):
    run = EvaluationRun.objects.create(
        model=ModelEntry.objects.get(name="reference"),
        version=release,
        mode="agent",
        agent_budget={"turns": 1, "tokens": 1, "seconds": 60, "cost": 0.5},
        status="completed",
    )
    first, second, third = Snippet.objects.filter(task__versions=release).order_by("pk")[:3]
    outcome = _agent_item(run, first, turns=1, ended_by="submitted", cost=Decimal("0.25"))
    _agent_item(run, second, turns=1, ended_by="turns", cost=Decimal("0.5"))
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    summary = page.split('id="agent-summary-heading"')[1].split("</section>")[0]
    assert "1 turn, 1 token, 60 s, $0.50" in summary, "singular, and the one money format"
    assert "submitted: 1 item; turn budget: 1 item" in summary
    assert "2 turns in total" in summary and "$0.75" in summary
    _agent_item(run, third, turns=3, ended_by="turns", cost=None)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    summary = page.split('id="agent-summary-heading"')[1].split("</section>")[0]
    assert "turn budget: 2 items" in summary and "<dd>unavailable</dd>" in summary, "never 0 when unknown"

    item = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()
    assert "after 1 turn," in item and "1 turns" not in item and "left: 1 turn, 1 token" in item
    assert item.index("The agent's trajectory") < item.index('id="answer-heading"'), "before the long code panels"
    assert "cost $0.25" in item

    single = EvaluationRun.objects.create(model=run.model, version=release, status="completed")
    assert 'id="agent-summary-heading"' not in client.get(reverse("run-detail", args=[single.pk])).content.decode()


def test_the_run_form_shows_each_releases_maximum_beside_the_budget(client, maintainer, release, settings):
    client.force_login(maintainer)
    page = client.get(reverse("model-detail", args=["reference"])).content.decode()
    budget = page.split("data-agent-budget>")[1].split("</fieldset>")[0]
    maximums = settings.AGENT_BUDGET_MAXIMUMS
    assert f"Blank: the release's maximum, {maximums['turns']:g} turns." in budget
    assert f"Blank: the release's maximum, {usd(maximums['cost'])}." in budget
    assert 'name="repeat"' in page
    assert '<label for="id_repeat">Repeat runs</label>' in page and "Start N identical runs" in page


def test_every_row_names_its_mode_and_a_filtered_view_ranks_among_its_own_rows(client, release):
    """The newcomer's view: `?mode=agent` showed two rows ranked 1 and 3 (ranked among every entry of the release,
    single-shot ones included) and read "My agent agent, with paper". Now a Mode column names each row's mode, the
    Model cell its paper setting, and the ranks (with their marks) are those of the rows the filters keep."""
    evaluate(release, model("top", display_name="Top"), lambda s: True)
    good = agent(evaluate(release, model("good", display_name="My agent"), lambda s: True))
    bad = agent(evaluate(release, model("bad", display_name="Bad agent"), lambda s: False))
    url = reverse("leaderboard", args=["1.0.0"])
    everything = {r["model"]: r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json()}
    assert everything["bad"]["rank"] == 3, "among all rows two entries beat it"

    page = client.get(url).content.decode()
    assert 'data-column="mode"' in page
    for row in table_rows(page):
        assert '<span class="badge mode single">single-shot</span>' in row or (
            '<span class="badge mode agent">agent</span>' in row
        ), "every row says its mode"
    assert "agent, with paper" not in "".join(table_rows(page)), "the Model cell no longer repeats the mode"

    agents = client.get(url, {"mode": "agent"}).content.decode()
    rows = table_rows(agents)
    assert len(rows) == 2 and reverse("run-detail", args=[good.pk]) in rows[0]
    assert '<span title="no entry is significantly better">1</span>' in rows[0]
    assert '<span title="1 + the entries significantly better">2</span>' in rows[1], "ranked among the agent rows"
    api = {
        r["model"]: r["rank"] for r in client.get(reverse("api-leaderboard", args=["1.0.0"]), {"mode": "agent"}).json()
    }
    assert api == {"good": 1, "bad": 2, "reference": None} or api == {"good": 1, "bad": 2}
    csv_body = client.get(reverse("api-leaderboard-csv", args=["1.0.0"]), {"mode": "agent"}).content.decode()
    assert "mode" in csv_body.splitlines()[0].split(",") and ",agent," in csv_body

    searched = client.get(url, {"mode": "agent", "q": "bad"}).content.decode()
    assert [reverse("run-detail", args=[bad.pk]) in row for row in table_rows(searched)] == [True]
    assert ">2</span>" in table_rows(searched)[0], "the name search finds a row and keeps its rank in the view"


def test_my_runs_and_the_compare_page_name_each_runs_mode(client, release, author):
    entry = model("mine", owner=author, display_name="Mine")
    single = evaluate(release, entry, lambda s: True)
    agent_run = agent(evaluate(release, entry, lambda s: False, with_paper=False))
    EvaluationRun.objects.filter(pk__in=[single.pk, agent_run.pk]).update(created_by=author)
    client.force_login(author)
    mine = client.get(reverse("my-runs")).content.decode()
    assert '<th scope="col" class="fold">Mode</th>' in mine  # folded behind "All columns" on a phone
    assert '<span class="badge mode agent">agent</span> <span class="muted">without paper</span>' in mine
    assert '<span class="badge mode single">single-shot</span> <span class="muted">with paper</span>' in mine
    compare = client.get(reverse("release-compare", args=["1.0.0"]), {"a": agent_run.pk, "b": single.pk})
    body = compare.content.decode()
    assert f"run #{agent_run.pk}</a> (agent, without paper)" in body
    assert f"run #{single.pk}</a> (single-shot, with paper)" in body


def test_the_run_form_bounds_each_number_and_shows_every_refused_budget_beside_its_field(
    client, maintainer, release, settings
):
    """The newcomer saw one budget error at a time at the top of the form, and no bounds on the number inputs."""
    settings.AGENT_BUDGET_MAXIMUMS = {"turns": 50, "tokens": 100000, "seconds": 600, "cost": 2}
    client.force_login(maintainer)
    page = client.get(reverse("model-detail", args=["reference"])).content.decode()
    for name, top in (("turns", "50"), ("tokens", "100000"), ("seconds", "600"), ("cost", "2")):
        tag = page.split(f'id="id_budget_{name}"')[0].rsplit("<input", 1)[1] + page.split(f'id="id_budget_{name}"')[1]
        tag = tag.split(">")[0]
        assert f'max="{top}"' in tag and 'min="' in tag, name
    assert f'max="{services.MAX_SAMPLES}"' in page and f'max="{services.MAX_REPEAT}"' in page

    refused = client.post(
        reverse("run-new", args=["reference"]),
        {"release": "1.0.0", "samples": 1, "mode": "agent", "budget_turns": 51, "budget_cost": 3, "repeat": 1},
    )
    assert refused.status_code == 400
    body = refused.content.decode()
    turns = body.split('id="id_budget_turns_error">')[1].split("</p>")[0]
    cost = body.split('id="id_budget_cost_error">')[1].split("</p>")[0]
    assert turns == "Turns: at most 50 per item in this release (asked for 51)"
    assert cost == "Cost: at most 2 USD per item in this release (asked for 3)"
    assert 'class="errors" role="alert"' not in body.split("data-run-form")[1].split("</form>")[0], "none on top"
    assert not EvaluationRun.objects.exists()


def test_a_get_of_the_post_only_run_and_upload_addresses_goes_to_the_model_page(client, maintainer, release):
    client.force_login(maintainer)
    for name, anchor in (("run-new", "#start-run"), ("run-upload", "#upload")):
        answer = client.get(reverse(name, args=["reference"]))
        assert answer.status_code == 302 and answer["Location"] == reverse("model-detail", args=["reference"]) + anchor
    assert client.get(reverse("run-new", args=["no-such-model"])).status_code == 404


def _trajectories(run: EvaluationRun, usage: list[tuple[int, int, float]], snippets=None) -> None:
    """One trajectory per item of `run` (turns, tokens, seconds), as the loop leaves them."""
    snippets = snippets or Snippet.objects.filter(task__versions=run.version).order_by("pk")
    for snippet, (turns, tokens, seconds) in zip(snippets, usage, strict=False):
        AgentTrajectory.objects.create(
            run=run,
            snippet=snippet,
            budget={"turns": 30, "tokens": 10**6, "seconds": 600, "cost": 1},
            ended_by="submitted",
            turns=turns,
            prompt_tokens=tokens - tokens // 4,
            completion_tokens=tokens // 4,
            seconds=seconds,
        )


def test_agent_rows_show_turns_tokens_and_seconds_per_item_beside_the_cost(client, release):
    """By hand: items of (4 turns, 1,000 tokens, 10 s) and (8, 3,000, 30 s) are 6 turns, 2,000 tokens and 20 s per
    item; a repeat group pools its runs' items: with a second run of (2, 500, 5 s) twice, turns (4 + 8 + 2 + 2) / 4 =
    4, tokens (1,000 + 3,000 + 500 + 500) / 4 = 1,250, seconds (10 + 30 + 5 + 5) / 4 = 12.5."""
    coder = model("coder", display_name="Coder")
    single = evaluate(release, coder, lambda s: True)
    url = reverse("leaderboard", args=["1.0.0"])

    first = agent(evaluate(release, coder, lambda s: True))
    _trajectories(first, [(4, 1000, 10.0), (8, 3000, 30.0)])
    # A held-out item's usage is not told apart: the means are over the public split, as the rank is.
    opening = Snippet.objects.filter(task__versions=release).order_by("pk").first()
    held = release.memberships.exclude(task=opening.task).first()
    VersionTask.objects.filter(pk=held.pk).update(split=VersionTask.Split.HELD_OUT)
    _trajectories(first, [(40, 90000, 300.0)], snippets=list(Snippet.objects.filter(task=held.task)[:1]))
    # Both modes side by side: the key columns fit a 1366 px screen, so the agent column is one to toggle on.
    both = client.get(url).content.decode()
    assert 'data-column="turns_per_item"' not in both and 'name="cols" value="turns_per_item"' in both
    body = client.get(url, {"cols": "turns_per_item"}).content.decode()
    assert 'data-column="turns_per_item"' in body
    single_row = next(r for r in table_rows(body) if reverse("run-detail", args=[single.pk]) in r)
    assert 'title="single-shot: one prompt, one answer">—</span>' in single_row
    # The agent view shows it without asking, every ranked row being an agent's.
    body = client.get(url, {"mode": "agent"}).content.decode()
    agent_row = next(r for r in table_rows(body) if reverse("run-detail", args=[first.pk]) in r)
    assert '6 <span class="muted">turns ·<br>2,000 tokens · 20 s</span>' in agent_row
    record = next(r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json() if r["run"] == first.pk)
    assert (record["turns_per_item"], record["tokens_per_item"], record["seconds_per_item"]) == (6.0, 2000.0, 20.0)
    plain = next(r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json() if r["run"] == single.pk)
    assert plain["turns_per_item"] is None and plain["seconds_per_item"] is None

    second = agent(evaluate(release, coder, lambda s: True))
    _trajectories(second, [(2, 500, 5.0), (2, 500, 5.0)])
    EvaluationRun.objects.filter(pk__in=[first.pk, second.pk]).update(
        repeat_group="00000000-0000-0000-0000-000000000231"
    )
    row = next(r for r in table_selectors.leaderboard_rows(version=release) if r.run.mode == "agent")
    assert row.runs_count == 2
    assert (row.agent.turns, row.agent.tokens, row.agent.seconds) == (4.0, 1250.0, 12.5)
    by_turns = client.get(url, {"sort": "agent_turns", "dir": "desc", "cols": "turns_per_item"}).content.decode()
    assert reverse("run-detail", args=[second.pk]) in table_rows(by_turns)[0], "sorted by turns, agent rows first"

    # An agent upload without trajectories: an agent row whose usage is unknown, not a single-shot one.
    uploaded = agent(evaluate(release, model("byo", display_name="Byo"), lambda s: True), params={"uploaded": True})
    only = client.get(url, {"q": "Byo", "mode": "agent"}).content.decode()
    row = next(r for r in table_rows(only) if reverse("run-detail", args=[uploaded.pk]) in r)
    assert 'title="uploaded without trajectories: unknown">—</span>' in row
