"""The fair share of the workers' slots (services.shares_plan), as a policy: each owner (a person, maintainers and
the platform included; calibration apart) gets a slot before any gets a second, the owner with the least left to do
first, and within an owner its run with the least left to do. Simulated over time with items of one tick, so that a
small run's time behind any load is checked against its time alone without a worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from evaluation.services.runs import RunLoad, shares_plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def load(pk: int, owner: str, *, in_flight: int = 0, unfed: int = 10, remaining: int | None = None, **extra) -> RunLoad:
    return RunLoad(
        pk=pk,
        owner=owner,
        in_flight=in_flight,
        unfed=unfed,
        remaining=in_flight + unfed if remaining is None else remaining,
        cap=extra.pop("cap", 8),
        created_at=extra.pop("created_at", T0 + timedelta(seconds=pk)),
        **extra,
    )


def finish_tick(runs: dict[int, tuple[str, int, int]], *, slots: int, of: int, ticks: int = 10**6) -> int:
    """Each run (pk -> owner, items, tick it arrives) fed by shares_plan into `slots` slots, every item one tick;
    returns the tick run `of`'s last item ends (or `ticks`, and `runs` left with what each has left then)."""
    left = {pk: items for pk, (_, items, _) in runs.items()}
    fed = dict.fromkeys(runs, 0)
    flight: list[int] = []
    tick = 0
    while True:
        for pk in flight:
            left[pk] -= 1
        if not left[of] or tick == ticks:
            runs.update({pk: (owner, left[pk], arrives) for pk, (owner, _, arrives) in runs.items()})
            return tick
        loads = [
            load(pk, owner, in_flight=0, unfed=items - fed[pk], remaining=left[pk], cap=10**6, done=items - left[pk])
            for pk, (owner, items, arrives) in runs.items()
            if arrives <= tick and left[pk]
        ]
        flight = []
        for pk, count in shares_plan(loads, slots=slots).items():
            fed[pk] += count
            flight += [pk] * count
        tick += 1


SMALL = 33


def small_ratio(big: dict[int, tuple[str, int, int]], *, slots: int) -> float:
    """The small run's time behind `big` (it arrives at tick 50, the big runs at 0) over its time alone."""
    alone = finish_tick({0: ("user:small", SMALL, 0)}, slots=slots, of=0)
    behind = finish_tick({**big, 0: ("user:small", SMALL, 50)}, slots=slots, of=0) - 50
    return behind / alone


def test_a_small_run_finishes_within_twice_its_time_alone_behind_31_runs_of_one_maintainer():
    big = {pk: ("user:maintainer", 660, 0) for pk in range(1, 32)}  # 20,460 answers
    assert [small_ratio(big, slots=slots) <= 2.0 for slots in (1, 2, 3, 4, 8, 16)] == [True] * 6


def test_a_small_run_finishes_within_twice_its_time_alone_behind_33_runs_of_11_users():
    big = {pk: (f"user:{pk % 11}", 660, 0) for pk in range(1, 34)}  # 21,780 answers
    assert [small_ratio(big, slots=slots) <= 2.0 for slots in (1, 2, 3, 4, 8, 16)] == [True] * 6


def test_owners_with_loads_alike_share_the_slots_the_shortest_ahead():
    runs = {pk: (f"user:{pk % 11}", 660, 0) for pk in range(33)}
    finish_tick(runs, slots=4, of=0, ticks=300)
    done = {owner: 0 for owner, _, _ in runs.values()}
    for owner, left, _ in runs.values():
        done[owner] += 660 - left
    shares = sorted(done.values())
    assert sum(shares) == 4 * 300 and shares[0] > 0, "no owner waits while others go on"
    assert shares[-1] == 2 * 300, "the one with the least left to do: half the slots"
    assert max(shares[:-1]) - min(shares[:-1]) <= 1, f"the others share the other half evenly: {shares}"


def test_the_platforms_runs_and_calibration_are_owners_of_their_own():
    big = {
        **{pk: ("platform", 660, 0) for pk in range(1, 11)},
        **{pk: ("calibration", 660, 0) for pk in range(11, 21)},
    }
    assert small_ratio(big, slots=2) <= 2.0


def test_an_owner_with_much_less_left_to_do_than_any_other_takes_every_slot_its_runs_shares_allow():
    runs = [load(1, "user:a", unfed=30, cap=6), load(2, "user:b", unfed=60), load(3, "user:c", unfed=500)]
    assert shares_plan(runs, slots=4) == {1: 4}
    assert shares_plan(runs, slots=9) == {1: 6, 2: 3}, "a's one run keeps within its share; b, next, up to half"


def test_an_owner_with_the_least_left_to_do_among_alike_takes_up_to_half_the_slots_the_others_share_the_rest():
    runs = [load(1, "user:a", unfed=300), load(2, "user:b", unfed=500), load(3, "user:c", unfed=500)]
    assert shares_plan(runs, slots=4) == {1: 2, 2: 1, 3: 1}
    assert shares_plan(runs, slots=7) == {1: 4, 2: 2, 3: 1}, "half of 7 is 4; b and c even, b the older"


def test_past_half_the_slots_the_owner_with_the_fewest_in_flight_goes_first():
    runs = [
        load(1, "user:a", in_flight=2, unfed=300),
        load(2, "user:b", in_flight=1, unfed=500),
        load(3, "platform", in_flight=0, unfed=900),
    ]
    assert shares_plan(runs, slots=4) == {3: 1}


def test_an_owners_slots_go_to_its_run_with_the_least_left_to_do():
    runs = [load(1, "user:a", unfed=500), load(2, "user:a", unfed=40), load(3, "user:a", unfed=3)]
    assert shares_plan(runs, slots=5) == {3: 3, 2: 2}, "the shortest first, and the next once it is all fed"


def test_the_least_left_to_do_counts_all_of_an_owners_runs():
    runs = [load(1, "user:a", unfed=500), load(2, "user:b", unfed=30), load(3, "user:b", unfed=30)]
    assert shares_plan(runs, slots=1) == {2: 1}, "b has 60 left to do over its runs, a 500"
    runs = [load(1, "user:a", unfed=50), *[load(pk, "user:b", unfed=30) for pk in (2, 3)]]
    assert shares_plan(runs, slots=1) == {1: 1}, "b's two runs are 60 together"


def test_a_runs_share_bounds_it_and_priority_weighs_its_owners_in_flight():
    assert shares_plan([load(1, "user:a", in_flight=8, cap=8)], slots=12) == {}, "a run keeps within its share"
    runs = [load(1, "user:a", in_flight=2, unfed=900, priority=1, cap=16), load(2, "user:b", in_flight=1, unfed=1000)]
    assert shares_plan(runs, slots=4) == {1: 1}, "priority 1: two shares, so a's 2 in flight weigh as b's 1"
    unweighted = [load(1, "user:a", in_flight=2, unfed=900), runs[1]]
    assert shares_plan(unweighted, slots=4) == {2: 1}


def test_nothing_is_planned_without_a_free_slot_or_an_item_to_feed():
    assert shares_plan([load(1, "user:a", in_flight=1)], slots=1) == {}
    assert shares_plan([load(1, "user:a", unfed=0, remaining=3)], slots=3) == {}
    assert shares_plan([load(1, "user:a", unfed=2)], slots=5) == {1: 2}


def test_a_run_starved_by_a_stream_of_small_runs_gets_a_slot_once_it_waited_long_enough():
    """Small runs of new people arriving without end each have much less left than the big run, so shortest first
    alone gives them every slot for ever; after `starved_after` seconds with nothing in flight the big run gets one."""

    def big_progress(starved_after: float | None) -> int:
        big = load(1, "user:big", unfed=600, created_at=T0, last_progress_at=T0)
        done = 0
        for tick in range(1, 301):
            now = T0 + timedelta(seconds=tick)
            small = [load(100 + tick + k, f"user:new{tick}-{k}", unfed=5, created_at=now) for k in range(2)]
            plan = shares_plan([big, *small], slots=2, now=now, starved_after=starved_after)
            if plan.get(1):
                done += plan[1]
                big = load(1, "user:big", unfed=600 - done, created_at=T0, last_progress_at=now)
        return done

    assert big_progress(None) == 0, "unaged, the big run never gets a slot"
    assert big_progress(60) == 5, "aged: one slot each time it waited 60 s (at 60, 120, 180, 240 and 300 s)"


def test_a_run_with_items_in_flight_or_recent_progress_is_not_starved():
    now = T0 + timedelta(seconds=1000)
    small = load(2, "user:small", unfed=5, created_at=now)
    recent = load(1, "user:big", unfed=600, created_at=T0, last_progress_at=now - timedelta(seconds=30))
    assert shares_plan([recent, small], slots=2, now=now, starved_after=60) == {2: 2}
    busy = load(1, "user:big", in_flight=1, unfed=600, created_at=T0, last_progress_at=T0)
    assert shares_plan([busy, small], slots=3, now=now, starved_after=60) == {2: 2}
    waited = load(1, "user:big", unfed=600, created_at=T0, last_progress_at=T0)
    assert shares_plan([waited, small], slots=2, now=now, starved_after=60) == {1: 1, 2: 1}
