"""An outside author's afternoon on the real package (tests/evaluation/packages/muon, issue 35): what the platform
gives them, measured end to end, in-process on its own SQLite database, media folder and broker (nothing shared).

1. **Upload to a validated revision**: the set is zipped as an author would upload it (papers.yaml beside the muon
   folder, which names its example script), read as the form's code step reads an archive, submitted, and validated
   by the validation task itself (`revision_validate`, in this process: every check, the example script's recording
   included, with `--mutants` mutants per snippet). Printed: the time from the upload to the validated revision, each
   check that did not pass, and each snippet's sealing.
2. **Mutation scores**: per snippet, up to `--mutants` mutants of its reference body (validation's own generator and
   seed), each judged by the author's tests (the harness, as validation runs them) and by the two proposed replay
   test files (submissions/proposed.py: from the tests' recording and from the example script's), each run with the
   package's python beside the package's visible files. Printed: the kills of each, and the mutants only one kills.
3. **Try an answer**: three correct alternative bodies and two wrong ones tried on the validated revision and judged
   by the try-an-answer task's own code (`tried_answer_judge_run`, in this process): each verdict; and a fourth
   correct one that the package's own tests reject, their tolerance being finer than its rounding (OVER_STRICT).
4. **The release's calibration**: a maintainer accepts the validated revision and publishes the draft release it
   lands in (the services the review and publish pages call; publishing starts the calibration runs), and the
   reference model's run is judged item by item by the evaluation task itself (`item_evaluate`, in this process), on
   bwrap as the release's limits say, in four passes: a fresh fork server (the publish's own run), the same one warm
   (a second run), a fresh one that preloaded torch._dynamo (announced, as a release with a task importing it would),
   and no fork server at all (every item a cold start). Printed per pass: the pass rate, the flags, whether an item
   forked after the pass starts with torch._dynamo loaded, and each item's verdict.

Run: .venv/bin/python scripts/measure_author_muon.py [--mutants 3] [--cache DIR]
[--only-calibration|--only-validation|--only-answers|--no-calibration]
(`--cache`: the sandbox's environment cache; a cache that holds the package's environment saves building it.
`--only-calibration`: steps 1 and 4 only; `--only-validation`: step 1 only; `--only-answers`: steps 1 and 3 only;
`--no-calibration`: steps 1 to 3.)
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import zipfile
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from submissions.models import TriedAnswer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MUON = REPO / "tests" / "evaluation" / "packages" / "muon"

# (snippet, what it changes, body): alternatives a reader of the writeup could write, each computing what the
# reference does another way.
CORRECT = [
    (
        "Adam moment updates",
        "mul_ and add_ instead of lerp_",
        "    buf1.mul_(betas[0]).add_(grad, alpha=1 - betas[0])\n"
        "    buf2.mul_(betas[1]).add_(grad.square(), alpha=1 - betas[1])\n",
    ),
    (
        "transpose back and return",
        "transpose(-2, -1) instead of .mT",
        "    if G.size(-2) > G.size(-1):\n        X = X.transpose(-2, -1)\n    return X\n",
    ),
    (
        "flatten convolution filters to matrices",
        "flatten(1) instead of view(len(update), -1)",
        "    if update.ndim == 4:\n        update = update.flatten(1)\n",
    ),
]
# Correct, yet failed by the package's own tests: the bias corrections folded into one step size (as PyTorch's Adam
# writes them) round the Adam-trained layers' float32 weights differently in the last bits; four training steps later
# the Muon-trained hidden weight they feed differs by about one bfloat16 unit of its Newton-Schulz update times the
# learning rate (2.5e-4 where TestOptimizers.test_muon_with_auxiliary_adam allows 1e-4 + 1e-3 * |w|), on one thread
# as the sandbox runs it (on two the test passes). A finding for the author, a tolerance finer than bfloat16 resolves
# there, not a fault of the alternative: reported, expected to fail, and counted neither correct nor wrong. The three
# CORRECT ones either compute bit for bit what the reference does (flatten, transpose) or round alike here.
OVER_STRICT = [
    (
        "bias-corrected Adam direction",
        "the bias corrections folded into one step size",
        "    step_size = (1 - betas[1]**step) ** 0.5 / (1 - betas[0]**step)\n"
        "    return step_size * buf1 / (buf2.sqrt() + eps * (1 - betas[1]**step) ** 0.5)\n",
    ),
]
WRONG = [
    (
        "quintic Newton-Schulz iterations",
        "a wrong sign on the cubic term",
        "    for _ in range(steps):\n        A = X @ X.mT\n        B = b * A + c * A @ A\n        X = a * X - B @ X\n",
    ),
    (
        "orthogonalize and scale by the aspect ratio",
        "the aspect ratio upside down",
        "    update = zeropower_via_newtonschulz5(update, steps=ns_steps)\n"
        "    update *= max(1, grad.size(-1) / grad.size(-2))**0.5\n    return update\n",
    ),
]


def set_archive() -> bytes:
    """The set as an author zips it: papers.yaml beside the paper's folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(MUON.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.name != "README.md":
                archive.write(path, str(path.relative_to(MUON)))
    return buffer.getvalue()


def upload_to_validated(mutants: int):
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from common.intake import archive_files, limits_default
    from submissions import services
    from submissions.models import ValidationReport
    from submissions.tasks import revision_validate

    settings.SUBMISSION_MUTANTS = mutants
    author = get_user_model().objects.create_user(username="author", password="x", email="author@example.org")
    started = time.monotonic()
    submission = services.submission_create(author=author, values={"metadata": {"title": "Muon"}})
    files = archive_files(set_archive(), filename="muon.zip", limits=limits_default())
    submission = services.draft_code_save(
        submission=submission, actor=author, files=files, source={"kind": "archive", "name": "muon.zip"}
    )
    revision = services.submission_submit(submission=submission, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    elapsed = time.monotonic() - started
    report = ValidationReport.objects.get(pk=revision.report.pk)
    revision.refresh_from_db()
    return author, revision, report, elapsed


def splice_body(package, name: str, body: str) -> dict[str, bytes]:
    from benchmarks.paper2code import splice

    parsed = package.annotated["muon.py"]
    snippet = next(s for s in parsed.snippets if s.name == name)
    return {**package.files, "muon.py": splice(parsed, snippet, body).encode()}


def mutation_scores(revision, mutants: int) -> None:
    from django.conf import settings

    from benchmarks.paper2code import splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.selectors import package_load
    from benchmarks.services.blobs import environment_hash
    from evaluation.environments import build_failures
    from evaluation.executor import limits_default, package_test, session_for
    from sandbox.harness import GuardSpec
    from submissions.proposed import EXAMPLE_TEST_FILE, TEST_FILE, proposed_tests_archive, proposed_tests_sources
    from submissions.validation import package_hidden

    package = package_load(revision)
    files, annotated = dict(package.files), package.annotated
    env_hash = environment_hash(package.requirements)
    session = session_for(env_hash, package.requirements, failures=build_failures)
    limits = replace(limits_default(), wall_seconds=60)
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point=package.test_entry_point)
    sources = proposed_tests_sources(revision=revision)
    replays = {}
    for source in sources:
        archive = zipfile.ZipFile(io.BytesIO(proposed_tests_archive(revision=revision, source=source)))
        replays[source] = {name: archive.read(name) for name in archive.namelist()}
    print(f"\nproposed replay tests made from: {', '.join(sources) or 'nothing'}")

    def proposed_run(source: str, spliced: dict[str, bytes]):
        visible = {p: d for p, d in spliced.items() if p not in hidden}
        return session.run(
            files={**visible, **replays[source]},
            command=[session.environment.python, "-B", EXAMPLE_TEST_FILE if source == "example" else TEST_FILE],
            limits=limits,
        )

    def proposed_kills(source: str, spliced: dict[str, bytes]) -> bool:
        return proposed_run(source, spliced).exit_code != 0

    def tests_kill(spliced: dict[str, bytes]) -> bool:
        run = package_test(
            files=spliced,
            test_entry_point=package.test_entry_point,
            environment_hash=env_hash,
            requirements=package.requirements,
            limits=limits,
            failures=build_failures,
            guard=GuardSpec(failfast=True),
        )
        return run.verdict.status != "passed"

    for source in list(sources):  # a proposed file judges mutants only if it passes the reference itself
        run = proposed_run(source, files)
        if run.exit_code != 0:
            sources.remove(source)
            said = "timed out" if run.timed_out else f"exit code {run.exit_code}"
            print(
                f"the proposed tests from {source} FAIL the reference ({said}, {run.duration:.1f} s), no judge here\n"
                f"{(run.stdout + run.stderr)[-1500:]}"
            )
    judges = ["author's tests", *(f"proposed ({source})" for source in sources)]
    totals = dict.fromkeys(["mutants", *judges], 0)
    only: list[str] = []
    parsed = annotated["muon.py"]
    print(f"{'snippet':<50} {'mutants':>7} " + " ".join(f"{j:>20}" for j in judges))
    for snippet in parsed.snippets:
        found = mutants_generate(snippet.code, limit=mutants, seed=settings.MUTATION_SEED)
        row = dict.fromkeys(["mutants", *judges], 0)
        row["mutants"] = len(found)
        for mutant in found:
            spliced = {**files, "muon.py": splice(parsed, snippet, mutant.body).encode()}
            killed = dict(
                zip(judges, [tests_kill(spliced), *(proposed_kills(s, spliced) for s in sources)], strict=True)
            )
            for judge, kill in killed.items():
                row[judge] += kill
            killers = [judge for judge, kill in killed.items() if kill]
            if killers and len(killers) < len(judges):
                only.append(f"  {snippet.name}: {mutant.diff[:90]}  killed by {', '.join(killers)} only")
        for key in totals:
            totals[key] += row[key]
        print(f"{snippet.name[:50]:<50} {row['mutants']:>7} " + " ".join(f"{row[j]:>20}" for j in judges))
    print(f"{'total':<50} {totals['mutants']:>7} " + " ".join(f"{totals[j]:>20}" for j in judges))
    for judge in judges:
        share = totals[judge] / totals["mutants"] if totals["mutants"] else 0.0
        print(f"mutation score, {judge}: {totals[judge]}/{totals['mutants']} ({share:.0%})")
    print("mutants some but not all of them kill:" if only else "every mutant killed by all of them or by none")
    print("\n".join(only))


def try_answers(author, revision) -> dict[str, TriedAnswer]:
    """Each alternative of CORRECT, WRONG and OVER_STRICT tried on `revision` and judged by the try-an-answer task's
    own code, in this process; returns each one's TriedAnswer by its note."""
    from benchmarks.selectors import package_load
    from submissions import answers
    from submissions.models import TriedAnswer

    parsed = package_load(revision).annotated["muon.py"]
    print("\ntry an answer (judged as a model's answer is):")
    tried_by_note: dict[str, TriedAnswer] = {}
    results = []
    kinds = (
        ("passed", "correct", CORRECT),
        ("failed", "wrong", WRONG),
        ("failed", "correct, too fine a tolerance for the package's tests", OVER_STRICT),
    )
    for expected, kind, entries in kinds:
        for name, note, body in entries:
            snippet = next(s for s in parsed.snippets if s.name == name)
            started = time.monotonic()
            tried = answers.answer_try(
                revision=revision,
                actor=author,
                snippet_file="muon.py",
                snippet_index=snippet.index,
                code=body,
                note=note,
            )
            answers.tried_answer_judge_run(tried=tried)
            tried = tried_by_note[note] = TriedAnswer.objects.get(pk=tried.pk)
            results.append(tried.status == expected)
            failing = [t["id"] for t in tried.tests if not t.get("passed")]
            print(
                f"  {tried.status:<8} (expected {expected}; {kind}) {name}: {note} "
                f"[{time.monotonic() - started:.1f} s]"
                + (f"; failed: {', '.join(failing[:3])}" if failing else "")
                + (f"; {tried.detail[:300]}" if tried.status != expected else "")
            )
    print(f"{sum(results)} of {len(results)} as expected")
    return tried_by_note


# The module whose import-time rebinding of torch.manual_seed flagged the reference: loaded by the first optimizer
# built, so an item loads it during its test unless its fork server preloaded it.
DYNAMO = "torch._dynamo"
PROBE = "probe.py"


def release_accepted(revision):
    """A maintainer accepts the validated revision and publishes the draft release it lands in; returns the
    maintainer and the published release (whose publishing started its calibration runs)."""
    from benchmarks.services.maintainers import maintainer_ensure
    from benchmarks.services.publishing import version_publish
    from submissions import services

    maintainer, _ = maintainer_ensure(username="maintainer", email="maintainer@example.org", password="x")
    task = services.submission_accept(
        submission=revision.submission, actor=maintainer, reason="validated; the mutation scores are shown"
    )
    draft = task.versions.get()
    version = version_publish(version=draft, actor=maintainer, notes="Muon, accepted from a submission")
    return maintainer, version


def fork_loads(session, module: str, limits) -> bool | None:
    """Whether an item forked now starts with `module` loaded (a probe run in a fork, as an item runs), None when the
    session runs its items cold."""
    from sandbox.forkserver import ForkingSession

    if not isinstance(session, ForkingSession) or not session.forkserver_wanted:
        return None
    # No import statement: the fork server starts again for an item that imports what it has not preloaded.
    probe = f"print({module!r} in __import__('sys').modules)\n".encode()
    run = session.run(files={PROBE: probe}, command=[session.environment.python, "-B", PROBE], limits=limits)
    return run.stdout.strip().endswith("True") if run.forked else None


def calibration_judge(run, only: Collection[str] | None = None) -> None:
    """Every item of `run` (or those of the snippets named in `only`) judged by the evaluation task, in this process,
    as a sandbox worker runs it."""
    from evaluation.models import EvaluationRun
    from evaluation.selectors.items import run_snippets
    from evaluation.tasks import item_evaluate

    run = EvaluationRun.objects.get(pk=run.pk)
    for snippet in run_snippets(run=run):
        if only is None or snippet.name in only:
            item_evaluate.apply(args=(run.pk, snippet.pk, 0, run.feed_epoch), throw=True)


def calibration_report(run, label: str, *, dynamo: bool | None, elapsed: float) -> tuple[float, int]:
    from evaluation.models import EvaluationRun, Outcome, RunScore

    run = EvaluationRun.objects.get(pk=run.pk)
    total = RunScore.objects.filter(run=run, paper=None, split="").first()
    outcomes = Outcome.objects.filter(run=run).select_related("snippet").order_by("snippet__position")
    loaded = {None: "no fork server", True: f"forks start with {DYNAMO}", False: f"forks start without {DYNAMO}"}
    rate = total.scaled_pass_rate if total else 0.0
    flagged = sum(o.status == Outcome.Status.FLAGGED for o in outcomes)
    print(
        f"\ncalibration, {label} ({loaded[dynamo]}): run {run.pk} {run.status}, "
        f"{sum(o.status == 'passed' for o in outcomes)} of {outcomes.count()} passed, scaled pass rate {rate:.1f}%, "
        f"{flagged} flagged (the run's score: {total.flagged if total else '?'}) [{elapsed:.1f} s]"
    )
    for o in outcomes:
        forked = {True: "fork", False: "cold", None: "-"}[o.forked]
        # A passed item's findings are notes (a sealed replay agreed): shown, never counted as flags.
        findings = "; ".join(
            f"{'note' if f.get('note') else 'FLAG'} {f.get('rule') or f.get('kind')}: {str(f.get('detail', ''))[:80]}"
            for f in o.findings
        )
        print(
            f"  {o.status:<8} {o.snippet.name[:48]:<48} {o.tests_summary:<20} {forked:<5} {o.duration or 0:5.1f} s"
            + (f"; {findings}" if findings else "")
            + (f"; {o.detail[:300]}" if o.status != "passed" else "")
        )
    return rate, flagged


# The calibration's passes: how the items' sandboxes start (fresh and dynamo restart the fork server, cold has none).
PASSES = {
    "fresh": "a fresh fork server",
    "warm": "the same fork server, warm",
    "dynamo": f"a fresh fork server that preloaded {DYNAMO}",
    "cold": "no fork server",
}


def backend_forkserver_set(on: bool) -> None:
    """Whether the sessions this process opens next run their items in forks of a fork server (bwrap, the release's
    backend here)."""
    from evaluation import executor
    from sandbox.bwrap import BwrapBackend

    backend = executor.backend_current()
    if not isinstance(backend, BwrapBackend):
        sys.exit(f"the calibration's passes run on bwrap, the release's backend here, not on {backend.name}")
    backend.forkserver = on


def calibration_pass(*, version, maintainer, mode: str, run=None, only: Collection[str] | None = None):
    """One pass of the release's reference calibration on this process's backend (PASSES[mode]): `run`, or a new run
    of the reference model a maintainer starts, judged item by item (only the items of the snippets named in `only`,
    when given: the run then stays unfinished). Returns the run and whether an item forked after it starts with
    torch._dynamo loaded (None: no fork server)."""
    from evaluation import executor, services
    from evaluation.models import ModelEntry
    from sandbox.forkserver import ForkingSession

    task = version.memberships.get().task
    backend_forkserver_set(mode != "cold")
    if mode != "warm":
        executor.sessions_close()
    if run is None:
        run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, user=maintainer)
    session = executor.session_for(task.environment_hash, task.requirements)
    if mode == "dynamo" and isinstance(session, ForkingSession):
        session.preload_expect(modules=[DYNAMO])
    calibration_judge(run, only)
    return run, fork_loads(session, DYNAMO, replace(executor.limits_for_release(version), gpu=False))


def release_calibration(revision) -> bool:
    """Accept, publish, and judge the release's reference run in the four PASSES (the first is the run publishing
    started); True when every pass scored 100% with no flag."""
    from evaluation import executor
    from evaluation.selectors.runs import calibration_models

    executor.sessions_close()  # the validation's session: the release's calibration starts a fork server of its own
    maintainer, version = release_accepted(revision)
    started = {m.name: m.runs.get(version=version) for m in calibration_models() if m.runs.filter(version=version)}
    print(
        f"\naccepted and published release {version.name} ({version.memberships.count()} task); calibration runs "
        f"started by publishing: {', '.join(started) or 'none'}"
    )
    results = []
    for mode, label in PASSES.items():
        clock = time.monotonic()
        run, dynamo = calibration_pass(
            version=version, maintainer=maintainer, mode=mode, run=started.get("reference") if mode == "fresh" else None
        )
        results.append(calibration_report(run, label, dynamo=dynamo, elapsed=time.monotonic() - clock))
    backend_forkserver_set(True)
    executor.sessions_close()
    ok = all(rate == 100.0 and flagged == 0 for rate, flagged in results)
    print(f"\nthe reference calibrates at 100% with no flag in every pass: {'yes' if ok else 'NO'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=3, help="mutants per snippet (validation's and the scores')")
    parser.add_argument("--cache", type=Path, help="the sandbox's environment cache folder")
    parser.add_argument("--only-calibration", action="store_true", help="steps 1 and 4 only")
    parser.add_argument("--only-validation", action="store_true", help="step 1 only (each snippet's sealing)")
    parser.add_argument("--only-answers", action="store_true", help="steps 1 and 3 only (the tried answers)")
    parser.add_argument("--no-calibration", action="store_true", help="steps 1 to 3 (no release, no calibration)")
    args = parser.parse_args()
    if args.cache:
        os.environ["SANDBOX_CACHE_DIR"] = str(args.cache.resolve())
    os.environ.setdefault("SANDBOX_BACKEND", "bwrap")
    from scripts.bench_django import django_fresh

    django_fresh("measure-author-")
    from django.conf import settings

    settings.RUNS_ACTIVE_PER_USER = 100

    author, revision, report, elapsed = upload_to_validated(args.mutants)
    print(f"upload to validated revision r{revision.number}: {elapsed:.1f} s, validation {report.status}")
    for check in report.checks.exclude(status="passed"):
        print(f"  {check.status}: {check.label}: {check.detail[-400:]}")
    for check in report.checks.filter(key__in=["example"]):
        print(f"  example script: {check.detail[:600]}")
    sealed = [c for c in report.checks.filter(key__startswith="sealed:")]
    print(f"  sealed snippets: {sum(bool((c.result or {}).get('sealed')) for c in sealed)} of {len(sealed)}")
    if report.status != "passed":
        sys.exit("validation did not pass: nothing more to measure")
    if args.only_validation:
        return
    if args.only_answers:
        try_answers(author, revision)
        return
    if not args.only_calibration:
        mutation_scores(revision, args.mutants)
        try_answers(author, revision)
    if args.no_calibration:
        return
    if not release_calibration(revision):
        sys.exit("the release's calibration did not score the reference 100% with no flag")


if __name__ == "__main__":
    main()
