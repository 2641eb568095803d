"""A snippet's mutants judged (issue 36 item 1, issue 37 item 6): replay first, the paper's tests only when the
replay cannot tell.

A mutant of a sealed snippet (judging/sealed.py) is first replayed alone on the recorded calls of its snippet's
function, as an answer would be: a difference from the recording kills it with no test run. Only a mutant the
replay cannot tell apart (it agrees on every recorded call, or its snippet is unsealed) runs the paper's tests,
which stop at the first failing test. A mutant that agrees on every recorded call and passes the tests computes
what the reference computes wherever the tests look: it is "equivalent on the recorded inputs" (arguments of a
symmetric function swapped, a sign flipped before squaring, `>` for `>=` where the two sides never meet), reported
apart and never counted in the score. A mutant of an unsealed snippet that passes the tests is a survivor, since
nothing showed it computes the same; so is one of a snippet whose body replaced by a no-op agrees with the
recording too, whose recorded calls show nothing of the body's work (a side effect, a branch never taken).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from benchmarks.paper2code import splice
from benchmarks.paper2code.markers import AnnotatedFile
from benchmarks.paper2code.mutation import Mutant
from evaluation.executor import ItemRun
from evaluation.judging.replay_batch import BatchAnswer, BatchStats, answers_replay
from evaluation.judging.sealed import Replay, answer_replay, snippet_key, snippet_sealing
from evaluation.taskfiles import blob_cached
from sandbox.harness import answer_span
from submissions.proposed import proposed_tolerance

KILLED, SURVIVED, EQUIVALENT = "killed", "survived", "equivalent"
BY_REPLAY, BY_TESTS = "replay", "tests"
# How a mutant's line reads in a report, by outcome and by what killed it.
OUTCOME_WORDS = {
    (KILLED, BY_REPLAY): "killed by the replay",
    (KILLED, BY_TESTS): "killed by the tests",
    (SURVIVED, ""): "survived",
    (EQUIVALENT, ""): "equivalent on the recorded inputs",
}


@dataclass(frozen=True)
class MutantOutcome:
    """What became of one mutant: killed (by the replay or by the tests), survived, or equivalent on the recorded
    inputs; `detail` says how it was told apart (the replay's first difference, the tests' failure category)."""

    mutant: Mutant
    outcome: str
    by: str = ""  # BY_REPLAY or BY_TESTS when killed
    detail: str = ""
    timed_out: bool = False  # its replay or its tests ran past the mutant's time limit
    tested: bool = False  # the paper's tests ran for it
    proposed: bool | None = None  # the proposed replay tests (their per-dtype tolerances) kill it; None: not replayed

    def as_dict(self) -> dict:
        return {
            **self.mutant.as_dict(),
            "outcome": self.outcome,
            "by": self.by,
            "detail": self.detail[:300],
            "timed_out": self.timed_out,
            "proposed": self.proposed,
        }


def mutant_judge(mutant: Mutant, *, replayed: Replay | None, test: Callable[[Mutant], ItemRun]) -> MutantOutcome:
    """Judge one mutant: `replayed` is its replay on its snippet's recorded calls (None: the snippet has no
    recording), `test` runs the paper's tests with it spliced in, stopping at the first failure."""
    proposed = None if replayed is None or replayed.also_difference is None else bool(replayed.also_difference)
    if replayed is not None and replayed.sealed and replayed.difference:
        return MutantOutcome(
            mutant, KILLED, BY_REPLAY, replayed.difference, timed_out=replayed.timed_out, proposed=proposed
        )
    agrees = replayed is not None and replayed.agrees
    run = test(mutant)
    if run.verdict.status != "passed":
        timed_out = run.verdict.category == "timeout"
        return MutantOutcome(
            mutant, KILLED, BY_TESTS, run.verdict.category, timed_out=timed_out, tested=True, proposed=proposed
        )
    if agrees:
        detail = "agrees on every recorded call; the tests pass"
        return MutantOutcome(mutant, EQUIVALENT, detail=detail, tested=True, proposed=proposed)
    return MutantOutcome(mutant, SURVIVED, tested=True, proposed=proposed)


def mutants_judge(
    mutants: Iterable[Mutant],
    *,
    replay: MutantReplayer | None,
    test: Callable[[Mutant], ItemRun],
    noop_body: str,
) -> Iterator[MutantOutcome]:
    """Judge a snippet's mutants: all of them replayed first (in one sandboxed process: `replay.many`), then each in
    turn. A mutant is equivalent only where the recorded calls show the body's work: when the body replaced by a
    no-op (`noop_body`) agrees with the recording too (its calls never reach the body, or its work is a side effect
    no output holds), agreeing says nothing, and a mutant the tests let through is a survivor. That no-op is
    replayed once, the first time a mutant agrees and passes."""
    mutants = list(mutants)
    replays: list[Replay | None] = list(replay.many(mutants)) if replay is not None else [None] * len(mutants)
    shows_work: bool | None = None
    for mutant, replayed in zip(mutants, replays, strict=True):
        outcome = mutant_judge(mutant, replayed=replayed, test=test)
        if outcome.outcome == EQUIVALENT and replay is not None:
            if shows_work is None:
                shows_work = bool(replay(Mutant("noop", noop_body, 1, "the body replaced by a no-op")).difference)
            if not shows_work:
                outcome = replace(
                    outcome,
                    outcome=SURVIVED,
                    detail="agrees on every recorded call, as the body replaced by a no-op does: the recorded calls "
                    "do not show this body's work",
                )
        yield outcome


def mutation_result(outcomes: Iterable[MutantOutcome], **settings) -> dict:
    """A snippet's mutation score from its mutants' outcomes: killed over the mutants that are not equivalent (None
    when there is none), with the survivors, the equivalent ones and each mutant's outcome; `settings` (seed, limit,
    time limit) are kept beside it."""
    outcomes = list(outcomes)
    killed = [o for o in outcomes if o.outcome == KILLED]
    survivors = [o.mutant.diff for o in outcomes if o.outcome == SURVIVED]
    equivalent = [o.mutant.diff for o in outcomes if o.outcome == EQUIVALENT]
    counted = len(outcomes) - len(equivalent)
    return {
        "generated": len(outcomes),
        "counted": counted,
        "killed": len(killed),
        "survived": len(survivors),
        "equivalent": len(equivalent),
        "score": len(killed) / counted if counted else None,
        "survivors": survivors,
        "equivalents": equivalent,
        "timeouts": [o.mutant.diff for o in killed if o.timed_out],
        "killed_by": {by: sum(o.by == by for o in killed) for by in (BY_REPLAY, BY_TESTS)},
        "test_runs": sum(o.tested for o in outcomes),
        "mutants": [o.as_dict() for o in outcomes],
        **settings,
    }


def proposed_kills(result: dict, *, sealed: bool) -> dict | None:
    """What the proposed replay tests (submissions/proposed.py) kill of a snippet's counted mutants: those whose
    replay differs within the proposed tests' own tolerances (their per-dtype table, `proposed_tolerance`), beside
    the mutants only the author's tests kill and those only the proposed tests kill. A mutant the replay kills never
    runs the tests, so which of those the tests would also kill is not known. None: unsealed."""
    if not sealed:
        return None
    counted = [m for m in result["mutants"] if m["outcome"] != EQUIVALENT]
    killed = sum(bool(m.get("proposed")) for m in counted)
    return {
        "killed": killed,
        "score": killed / result["counted"] if result["counted"] else None,
        "only_tests": [m["diff"] for m in counted if m["outcome"] == KILLED and not m.get("proposed")],
        "only_proposed": [m["diff"] for m in counted if m["outcome"] != KILLED and m.get("proposed")],
    }


class MutantReplayer:
    """How a sealed snippet's mutants are replayed on its recorded calls, as answers would be: one alone
    (`replayer(mutant)`), or many in one sandboxed process, each in a fork of its own (`many`; judging/replay_batch.py,
    with the same verdicts). `batched=False` replays each alone (the way before batches, for comparison); `warm=False`
    has a batch import nothing for its answers (the way before `inputs_warm`, for comparison)."""

    def __init__(
        self,
        *,
        session,
        files: Mapping[str, bytes],
        hidden: Iterable[str],
        recording: dict,
        annotated: AnnotatedFile,
        position: int,
        limits,
        load: Callable[[str], bytes],
        batched: bool = True,
        stats: BatchStats | None = None,
        warm: bool = True,
    ):
        self.session, self.files, self.hidden, self.recording = session, files, sorted(hidden), recording
        self.annotated, self.marked, self.limits, self.load = annotated, annotated.snippets[position], limits, load
        self.key = snippet_key(annotated.path, position)
        self.batched, self.stats, self.warm = batched, stats, warm
        self.also = proposed_tolerance(recording)  # the proposed tests' per-dtype table judges each replay too

    def _answer(self, mutant: Mutant) -> BatchAnswer:
        text = splice(self.annotated, self.marked, mutant.body)
        return BatchAnswer(self.annotated.path, text, answer_span(self.marked.start_line, mutant.body))

    def __call__(self, mutant: Mutant) -> Replay:
        answer = self._answer(mutant)
        return answer_replay(
            session=self.session,
            files={**self.files, answer.path: answer.text.encode("utf-8")},
            hidden=self.hidden,
            recording=self.recording,
            key=self.key,
            limits=self.limits,
            load=self.load,
            answer=answer.answer,
            also=self.also,
        )

    def many(self, mutants: Sequence[Mutant]) -> list[Replay]:
        if not self.batched:
            return [self(mutant) for mutant in mutants]
        return answers_replay(
            session=self.session,
            files=self.files,
            hidden=self.hidden,
            recording=self.recording,
            key=self.key,
            limits=self.limits,
            load=self.load,
            answers=[self._answer(mutant) for mutant in mutants],
            stats=self.stats,
            also=self.also,
            warm=self.warm,
        )


def mutant_replayer(
    *,
    session,
    files: Mapping[str, bytes],
    hidden: Iterable[str],
    recording: dict | None,
    annotated: AnnotatedFile,
    position: int,
    limits,
    load: Callable[[str], bytes] = blob_cached,
    batched: bool = True,
    stats: BatchStats | None = None,
    warm: bool = True,
) -> MutantReplayer | None:
    """How the mutants of the snippet at `position` are replayed on its recorded calls, as answers would be; None
    when the snippet is not sealed (no recording to judge it by, so only the tests can)."""
    if not snippet_sealing(recording, snippet_key(annotated.path, position))[0]:
        return None
    assert recording is not None
    return MutantReplayer(
        session=session,
        files=files,
        hidden=hidden,
        recording=recording,
        annotated=annotated,
        position=position,
        limits=limits,
        load=load,
        batched=batched,
        stats=stats,
        warm=warm,
    )
