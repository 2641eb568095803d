"""Reported results: a benchmark's published per-snippet results (ResearchCodeBench's overall_stats.json layout)
imported as one run per model, marked reported and scored by the same code as every run."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.selectors import version_snippets
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.scoring import run_scores_store
from evaluation.services import EvaluationError, UploadError, run_protocol

MAX_SOURCE_CHARS = 2000


class ReportedResultsError(UploadError):
    """A results file that cannot be taken; `problems` lists everything wrong, each saying where."""


@dataclass(frozen=True)
class ReportedModel:
    name: str  # as published
    completions: dict[int, list[bool]]  # snippet pk -> passed, per completion


def _snippet_index(version: BenchmarkVersion) -> dict[str, dict[str, list[Snippet]]]:
    index: dict[str, dict[str, list[Snippet]]] = defaultdict(lambda: defaultdict(list))
    for snippet in version_snippets(version=version):
        index[snippet.task.paper.slug][snippet.name].append(snippet)
    return index


def reported_results_parse(*, version: BenchmarkVersion, data: bytes) -> list[ReportedModel]:
    """The file's models with their completions, matched to the release; refuses with every problem listed.

    Papers match by id (the paper's slug), snippets by name within their paper; every completion's
    `snippet_code_line_count` must equal the release's count of lines, and every model must cover every snippet
    of the release, so that a reported score is over the same items as a verified one.
    """
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportedResultsError([f"the file is not JSON: {exc}"]) from exc
    papers = document.get("results") if isinstance(document, dict) else None
    if not isinstance(papers, dict):
        raise ReportedResultsError(['expected an object with "results": {paper id: {"results": {model: ...}}}'])
    index = _snippet_index(version)
    problems: list[str] = []
    models: dict[str, dict[int, list[bool]]] = {}
    for paper_id, paper_entry in papers.items():
        where = f"results[{paper_id!r}]"
        if paper_id not in index:
            problems.append(
                f"{where}: no paper {paper_id!r} in release {version.name} (its papers: {', '.join(sorted(index))})"
            )
            continue
        by_model = paper_entry.get("results") if isinstance(paper_entry, dict) else None
        if not isinstance(by_model, dict):
            problems.append(f'{where}: expected {{"results": {{model name: ...}}}}')
            continue
        for model_name, model_entry in by_model.items():
            mwhere = f'{where}["results"][{model_name!r}]'
            by_snippet = model_entry.get("results") if isinstance(model_entry, dict) else None
            if not isinstance(by_snippet, dict):
                problems.append(f'{mwhere}: expected {{"results": {{snippet name: [completions]}}}}')
                continue
            found = models.setdefault(model_name, {})
            for snippet_name, completions in by_snippet.items():
                swhere = f'{mwhere}["results"][{snippet_name!r}]'
                matches = index[paper_id].get(snippet_name, [])
                if len(matches) != 1:
                    problems.append(
                        f"{swhere}: "
                        + (
                            f"snippet name {snippet_name!r} is ambiguous in paper {paper_id}"
                            if matches
                            else f"no snippet {snippet_name!r} in paper {paper_id} "
                            f"(its snippets: {', '.join(sorted(index[paper_id]))})"
                        )
                    )
                    continue
                snippet = matches[0]
                if not isinstance(completions, list) or not completions:
                    problems.append(f"{swhere}: expected a non-empty list of completions")
                    continue
                found[snippet.pk] = _completions_passed(completions, snippet, swhere, version, problems)
    _models_check(models, index, version, problems)
    if not models and not problems:
        problems.append("the file holds no results")
    if problems:
        raise ReportedResultsError(problems)
    return [ReportedModel(name=name, completions=found) for name, found in models.items()]


def _completions_passed(
    completions: list, snippet: Snippet, swhere: str, version: BenchmarkVersion, problems: list[str]
) -> list[bool]:
    """Whether each completion of one snippet passed; a completion that is malformed or counts other lines than
    the release is a problem instead."""
    passed: list[bool] = []
    for number, completion in enumerate(completions):
        cwhere = f"{swhere}[{number}]"
        if not isinstance(completion, dict) or not isinstance(completion.get("passed"), bool):
            problems.append(f'{cwhere}: expected an object with "passed": true or false')
            continue
        count = completion.get("snippet_code_line_count")
        if count != snippet.loc:
            problems.append(
                f"{cwhere}: snippet_code_line_count is {count!r}; release {version.name} "
                f"counts {snippet.loc} lines of code for this snippet"
            )
            continue
        passed.append(completion["passed"])
    return passed


def _models_check(
    models: dict[str, dict[int, list[bool]]],
    index: dict[str, dict[str, list[Snippet]]],
    version: BenchmarkVersion,
    problems: list[str],
) -> None:
    """Every model covers every snippet of the release, and each model's name gives a slug of its own."""
    expected = {s.pk: f"{paper}/{name}" for paper, names in index.items() for name, ss in names.items() for s in ss}
    for model_name, found in models.items():
        missing = sorted(label for pk, label in expected.items() if pk not in found)
        if missing:
            problems.append(
                f"model {model_name!r} has no results for {len(missing)} snippet(s) of release "
                f"{version.name}: {', '.join(missing)}"
            )
    slugs: dict[str, str] = {}
    for model_name in models:
        slug = slugify(model_name)[:100]
        if not slug:
            problems.append(f"model name {model_name!r} has no letters or digits to name it by")
        elif slug in slugs:
            problems.append(f"model names {slugs[slug]!r} and {model_name!r} both become {slug!r}")
        slugs.setdefault(slug, model_name)


@transaction.atomic
def reported_results_import(
    *, version: BenchmarkVersion, data: bytes, source: str = "", user=None
) -> list[EvaluationRun]:
    """One completed, scored run per model of the file, marked reported, with `source`; all or nothing."""
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise EvaluationError(f"release {version.name} is a draft; results are imported on published releases")
    source = source.strip()
    if len(source) > MAX_SOURCE_CHARS:
        raise EvaluationError(f"the source is {len(source)} characters; at most {MAX_SOURCE_CHARS}")
    reported = reported_results_parse(version=version, data=data)
    protocol = run_protocol(version=version, protocol=None)
    now = timezone.now()
    runs = []
    for entry in reported:
        model, _ = ModelEntry.objects.get_or_create(
            name=slugify(entry.name)[:100],
            defaults={"display_name": entry.name[:200], "kind": ModelEntry.Kind.REPORTED},
        )
        earlier = EvaluationRun.objects.filter(
            model=model, version=version, provenance=EvaluationRun.Provenance.REPORTED
        ).first()
        if earlier is not None:
            raise EvaluationError(
                f"model {entry.name!r} already has reported results on {version.name} "
                f"(run {earlier.pk}); nothing was imported"
            )
        samples = max(len(passed) for passed in entry.completions.values())
        total = sum(len(p) for p in entry.completions.values())
        run = EvaluationRun.objects.create(
            model=model,
            version=version,
            protocol=protocol,
            samples=samples,
            created_by=user,
            source=source,
            status=EvaluationRun.Status.COMPLETED,
            provenance=EvaluationRun.Provenance.REPORTED,
            total_items=total,
            done_items=total,
            params={"reported": True},
            started_at=now,
            finished_at=now,
            last_progress_at=now,
        )
        Outcome.objects.bulk_create(
            Outcome(
                run=run,
                snippet_id=snippet_id,
                sample=sample,
                status=Outcome.Status.PASSED if ok else Outcome.Status.FAILED,
                detail="" if ok else "reported as failed by the source",
            )
            for snippet_id, passed in entry.completions.items()
            for sample, ok in enumerate(passed)
        )
        run_scores_store(run=run)
        runs.append(run)
    return runs
