"""Check a whole problem set as submissions are checked (FORMAT.md section 9), inline, paper by paper."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.pset import read_pset
from submissions.models import ValidationReport
from submissions.tasks import sandbox_checks

PASSED = ValidationReport.Status.PASSED


def _read(path: Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: cannot read {what}: {exc}") from exc


class Command(BaseCommand):
    help = ("Run the section 9 checks of every paper of a problem set (reference passes N times, each snippet "
            "masked and replaced by a no-op makes the tests fail) with the submissions' validation code.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Folder holding papers.yaml.")
        parser.add_argument("--environment", type=Path,
                            help="Requirements every paper runs in instead of its own (a legacy shared environment).")
        parser.add_argument("--json", type=Path, dest="json_out", metavar="OUT", help="Write the results as JSON.")

    def handle(self, *args, path: Path, environment: Path | None, json_out: Path | None, **options) -> None:
        shared = _read(environment, "the environment") if environment is not None else None
        try:
            papers = read_pset(Path(path))
        except PackageError as exc:
            raise CommandError(f"{path}: {len(exc.problems)} problem(s):\n{exc}") from exc
        total = sum(2 + 2 * len(a.snippets) for p in papers for a in p.annotated.values())
        report: dict[str, dict] = {}
        failures, failing_papers = 0, 0
        with tqdm(total=total, unit="check", file=self.stderr._out) as progress:
            for paper in papers:
                progress.set_description(paper.id)
                names = {(path_, s.index): s.name for path_, a in paper.annotated.items() for s in a.snippets}
                snippets = {name: {"masked_fails": False, "noop_fails": False} for name in names.values()}
                entry = {"reference_passed": False, "snippets": snippets}
                problems: list[str] = []
                for check in sandbox_checks(files=dict(paper.files), annotated=dict(paper.annotated),
                                            requirements=paper.requirements if shared is None else shared,
                                            test_entry_point=paper.test_entry_point):
                    progress.update(1)
                    kind, _, rest = check.key.partition(":")
                    if kind in ("masked", "noop"):
                        file_path, _, index = rest.rpartition(":")
                        name = names[(file_path, int(index))]
                        snippets[name][f"{kind}_fails"] = check.status == PASSED
                        if check.status != PASSED:
                            problems.append(f'"{name}" ({file_path}) {"masked" if kind == "masked" else "as a no-op"}: '
                                            "the tests still pass, they do not cover this snippet")
                    elif kind == "reference":
                        entry["reference_passed"] = check.status == PASSED
                    if check.status != PASSED:
                        if kind not in ("masked", "noop"):
                            problems.append(f"{kind}: {check.detail.strip().splitlines()[0] if check.detail else ''}")
                        if check.blocks:
                            problems.append(check.blocks)
                report[paper.id] = entry
                failures += len(problems)
                failing_papers += bool(problems)
                covered = sum(s["masked_fails"] and s["noop_fails"] for s in snippets.values())
                summary = (f"{paper.id}: reference {'passed' if entry['reference_passed'] else 'FAILED'}, "
                           f"{covered}/{len(snippets)} snippets covered")
                progress.write(summary + "".join(f"\n  {p}" for p in problems), file=self.stdout._out)
        if json_out is not None:
            Path(json_out).write_text(json.dumps({"papers": report}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if failures:
            raise CommandError(f"{failures} problem(s) in {failing_papers} of {len(papers)} paper(s)")
        self.stdout.write(f"all checks passed: {len(papers)} paper(s), {total} check(s)")
