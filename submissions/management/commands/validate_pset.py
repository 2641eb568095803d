"""Check a whole problem set as submissions are checked (FORMAT.md section 9), inline or on the workers."""

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.mutation import MUTANTS_DEFAULT
from benchmarks.paper2code.pset import read_pset
from sandbox import SandboxError
from submissions import selectors, validation
from submissions.models import SetValidation

POLL_SECONDS = 0.5


def _read(path: Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: cannot read {what}: {exc}") from exc


class Command(BaseCommand):
    help = (
        "Run the section 9 checks of every paper of a problem set (reference passes N times, each snippet "
        "masked and replaced by a no-op makes the tests fail; with --mutants, each snippet's mutation score) "
        "with the submissions' validation code: paper by paper here, or with --workers one paper per task on the "
        "workers' sandbox queue, in parallel."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Folder holding papers.yaml.")
        parser.add_argument(
            "--environment",
            type=Path,
            help="Requirements every paper runs in instead of its own (a legacy shared environment).",
        )
        parser.add_argument("--json", type=Path, dest="json_out", metavar="OUT", help="Write the results as JSON.")
        parser.add_argument(
            "--workers",
            action="store_true",
            help="Queue one task per paper on the `sandbox` queue and wait for the workers.",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help="With --workers: give up waiting after this long (default: wait).",
        )
        parser.add_argument(
            "--mutants",
            type=int,
            nargs="?",
            const=MUTANTS_DEFAULT,
            default=0,
            metavar="N",
            help="Also run up to N mutants of each snippet's reference body (default "
            f"{MUTANTS_DEFAULT}) and report the share its tests kill, with the survivors.",
        )
        parser.add_argument(
            "--min-score",
            type=float,
            default=None,
            metavar="SCORE",
            help="With --mutants: warn about snippets below this mutation score (0-1; default "
            "MUTATION_SCORE_MIN). A warning: it never fails the command.",
        )

    def handle(
        self,
        *args,
        path: Path,
        environment: Path | None,
        json_out: Path | None,
        workers: bool = False,
        timeout: float | None = None,
        mutants: int = 0,
        min_score: float | None = None,
        **options,
    ) -> None:
        if mutants < 0:
            raise CommandError(f"--mutants {mutants}: give a number of mutants per snippet of at least 1")
        if min_score is not None and not 0 <= min_score <= 1:
            raise CommandError(f"--min-score {min_score:g}: give a share of killed mutants between 0 and 1")
        shared = _read(environment, "the environment") if environment is not None else None
        try:
            papers = read_pset(Path(path), shared_environment=shared is not None)
        except PackageError as exc:
            raise CommandError(f"{path}: {len(exc.problems)} problem(s):\n{exc}") from exc
        run = validation.pset_validation_create(
            packages=papers, source=str(path), environment=shared, mutants=mutants, score_min=min_score
        )
        total = sum(p.checks_total for p in run.papers.all())
        with tqdm(total=total, unit="check", file=self.stderr._out) as progress:
            if workers:
                self._on_workers(run, progress, timeout)
            else:
                self._inline(run, progress)
        summaries = selectors.set_validation_summaries(validation=run)
        if json_out is not None:
            Path(json_out).write_text(
                json.dumps(selectors.set_validation_json(summaries=summaries), indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )
        failures = sum(len(s.problems) for s in summaries)
        if failures:
            failing = sum(bool(s.problems) for s in summaries)
            raise CommandError(f"{failures} problem(s) in {failing} of {len(papers)} paper(s)")
        warnings = sum(len(s.warnings) for s in summaries)
        if warnings:  # a low mutation score never fails the command, and never reads as a clean pass either
            self.stdout.write(
                f"all checks passed with {warnings} warning(s) (see each above): {len(papers)} paper(s), "
                f"{total} check(s)"
            )
        else:
            self.stdout.write(f"all checks passed: {len(papers)} paper(s), {total} check(s)")

    def _summary_write(self, paper, progress: tqdm) -> None:
        summary = selectors.set_paper_summary(paper=paper)
        lines = [summary.line, *(f"  {p}" for p in summary.problems)]
        for snippet in summary.snippets:
            mutation = snippet.get("mutation")
            if mutation:
                lines.append(f'  "{snippet["name"]}": mutation {_score_line(mutation)}')
                lines += [f"    survived: {diff}" for diff in mutation["survivors"]]
                lines += [f"    equivalent on the recorded inputs: {diff}" for diff in mutation.get("equivalents", ())]
                lines += [f"    timed out (killed): {diff}" for diff in mutation["timeouts"]]
                proposed = mutation.get("proposed")
                if proposed and proposed.get("score") is not None:
                    lines.append(
                        f"    the proposed replay tests: score {proposed['score']:.0%} ({proposed['killed']} of "
                        f"{mutation.get('counted', mutation['generated'])} killed)"
                    )
                    lines += [f"      only your tests kill: {diff}" for diff in proposed["only_tests"]]
        lines += [f"  warning: {w}" for w in summary.warnings]
        progress.write("\n".join(lines), file=self.stdout._out)

    def _inline(self, run: SetValidation, progress: tqdm) -> None:
        for paper in run.papers.order_by("position"):
            progress.set_description(paper.paper)
            before = progress.n
            try:
                validation.set_paper_run(paper=paper, on_check=lambda _: progress.update(1))
            except SandboxError as exc:
                validation.set_paper_error(paper=paper, detail=f"the sandbox failed: {exc}")
            paper.refresh_from_db()
            progress.update(before + paper.checks_total - progress.n)  # checks a failure left unrun count as done
            self._summary_write(paper, progress)

    def _on_workers(self, run: SetValidation, progress: tqdm, timeout: float | None) -> None:
        validation.set_validation_dispatch(validation=run)
        progress.set_description(f"{run.papers.count()} paper(s) queued on `sandbox`")
        reported: set[int] = set()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            papers = list(run.papers.order_by("position"))
            done = sum(selectors.set_paper_summary(paper=p).done for p in papers)
            progress.update(done - progress.n)
            for paper in papers:
                if paper.pk not in reported and paper.finished_at is not None:
                    reported.add(paper.pk)
                    self._summary_write(paper, progress)
            running = [p.paper for p in papers if p.status == "running"]
            if running:
                progress.set_description(", ".join(running)[:60])
            if len(reported) == len(papers):
                return
            if deadline is not None and time.monotonic() > deadline:
                raise CommandError(
                    f"gave up after {timeout:g} s with {len(papers) - len(reported)} paper(s) "
                    "unfinished; is a worker consuming the `sandbox` queue?"
                )
            time.sleep(POLL_SECONDS)


def _score_line(mutation: dict) -> str:
    """ "score 80% (4 of 5 killed: 3 by the replay, 1 by the tests; 1 equivalent, not counted)"."""
    if mutation["score"] is None:
        return "score: none (no mutants)" if not mutation.get("equivalent") else "score: none (all equivalent)"
    counted = mutation.get("counted", mutation["generated"])
    by = mutation.get("killed_by")
    how = f": {by['replay']} by the replay, {by['tests']} by the tests" if by else ""
    equivalent = mutation.get("equivalent")
    apart = f"; {equivalent} equivalent on the recorded inputs, not counted" if equivalent else ""
    return f"score {mutation['score']:.0%} ({mutation['killed']} of {counted} killed{how}{apart})"
