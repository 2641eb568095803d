"""The reproducibility record of a run (a manifest with a hash over it) and the re-execution of its items."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import QuerySet

from benchmarks import visibility
from common.canonical import canonical_hash, canonical_json
from evaluation.models import EvaluationRun, Outcome
from evaluation.provenance import provenance_of
from evaluation.selectors.runs import outcomes_visible

MANIFEST_FORMAT = "rcb-run-manifest/1"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_outcomes(run: EvaluationRun) -> QuerySet[Outcome]:
    return (
        Outcome.objects.filter(run=run)
        .select_related("snippet__task__paper", "generation", "environment_lock")
        .order_by("snippet__task__paper__slug", "snippet__file_path", "snippet__position", "sample")
    )


# The manifest's items are read this many at a time: its memory stays bounded however big the run.
MANIFEST_CHUNK = 500
MANIFEST_ITEM_FIELDS = (
    "snippet_id",
    "sample",
    "snippet__task__paper__slug",
    "snippet__file_path",
    "snippet__name",
    "snippet__task__content_hash",
    "generation__prompt_hash",
    "generation__raw_answer",
    "generation__extracted_code",
    "generation_id",
    "environment_hash",
    "environment_lock__lock_hash",
    "limits",
    "sandbox_backend",
    "forked",
    "worker",
    "status",
    "category",
)


def manifest_outcomes(*, run: EvaluationRun, user) -> tuple[QuerySet[Outcome], int]:
    """The outcomes a user may see in a run's manifest (in manifest order), and how many were withheld.

    Held-out items are private (DESIGN.md, Splits): only maintainers get them; everyone else gets the public split.
    A run-scoped join, never `pk__in` over a subquery of the outcomes: on a fresh table (statistics from before the
    run) PostgreSQL planned that as a nested-loop semi join, quadratic in the run's size.
    """
    visible = outcomes_visible(run=run, user=user).order_by(
        "snippet__task__paper__slug", "snippet__file_path", "snippet__position", "sample"
    )
    return visible, Outcome.objects.filter(run=run).count() - visible.count()


# The answer as it came: a raw response (`answer`, its code extracted), or an upload's snippet body (`code`, stored
# as the code scored with no raw response); the manifest hashes that body.
STORED_AS = {"answer": "raw_answer", "code": "extracted_code"}


def _item(row: dict, run: EvaluationRun, *, worker: bool) -> dict:
    """One item's record; `worker` (maintainers only) names the worker host that ran it: which machines run the
    platform is not the run's to publish, and maintainers see it on the operations page too."""
    answered = row["generation_id"] is not None
    field = None
    if answered:
        field = "code" if not row["generation__raw_answer"] and row["generation__extracted_code"] else "answer"
    return {
        "item": row["snippet_id"],
        "sample": row["sample"],
        "paper": row["snippet__task__paper__slug"],
        "file": row["snippet__file_path"],
        "snippet": row["snippet__name"],
        "task_content_hash": row["snippet__task__content_hash"],
        "prompt_hash": row["generation__prompt_hash"] if answered else None,
        "answer_field": field,
        "answer_hash": _sha256(row[f"generation__{STORED_AS[field]}"]) if field else None,
        "code_hash": _sha256(row["generation__extracted_code"]) if answered else None,
        "environment_hash": row["environment_hash"],
        "environment_lock": row["environment_lock__lock_hash"],
        "protocol": run.protocol,
        "limits": row["limits"],
        "sandbox_backend": row["sandbox_backend"],
        "forked": row["forked"],
        **({"worker": row["worker"]} if worker else {}),
        "verdict": {"status": row["status"], "category": row["category"]},
    }


def run_endpoint(run: EvaluationRun, *, user) -> dict | None:
    """What the run calls, as it snapshot at its start; None for runs that call no model (uploads, calibration). Its
    api_base ("": the provider's own address) is None to whoever may not see the model's endpoint."""
    if not run.litellm_model:
        return None
    shown = visibility.endpoint_visible(user=user, owner_id=run.model.owner_id)
    return {"litellm_model": run.litellm_model, "api_base": run.api_base if shown else None, "params": run.call_params}


def run_manifest_chunks(*, run: EvaluationRun, user) -> Iterator[bytes]:
    """The run's manifest as UTF-8 pieces, item by item: per item what went in (task, prompt, answer,
    environment, limits) and what came out, with `sha256` over the canonical JSON of every other key.

    The body is written in its canonical spelling as it is hashed (keys sorted: `environments` before `items`, so
    the locks are read first, from the same visible outcomes), and `sha256` is added at the end.
    """
    from evaluation.models import EnvironmentLock
    from evaluation.selectors.monitoring import run_forkserver

    outcomes, withheld = manifest_outcomes(run=run, user=user)
    maintainer = visibility.user_sees_held_out(user=user)
    said = provenance_of(run)
    lock_ids = outcomes.order_by().exclude(environment_lock=None).values("environment_lock_id").distinct()
    locks = dict(EnvironmentLock.objects.filter(pk__in=lock_ids).values_list("lock_hash", "lock"))
    head = {
        "format": MANIFEST_FORMAT,
        "run": {
            "id": run.pk,
            "model": run.model.name,
            "model_kind": run.model.kind,
            "release": run.version.name,
            "release_manifest_hash": run.version.manifest_hash,
            "protocol": run.protocol,
            "with_paper": run.with_paper,
            "samples": run.samples,
            "params": run.params,
            "mode": run.mode,
            "agent_budget": run.agent_budget,
            "provenance": said.value,
            "provenance_label": said.label,
            "provenance_statement": said.statement,
            "endpoint": run_endpoint(run, user=user),
            "status": run.status,
            "finished_at": run.finished_at,
        },
        "scope": "all items" if not withheld else "public items only",
        "items_withheld": withheld,
        "environments": dict(sorted(locks.items())),
        # Warm and cold items and the fork server's start reasons; what each start and going cold said, on which
        # worker and environment, only for those who see held-out tasks (maintainers): a worker preloads every task
        # of the release, held-out ones too, so even a public item's start can name a held-out task's imports.
        "fork_server": run_forkserver(run=run).as_dict(details=maintainer),
    }
    digest = hashlib.sha256()

    def piece(text: str) -> bytes:
        data = text.encode("utf-8")
        digest.update(data)
        return data

    keys = sorted([*head, "items"])
    yield piece("{")
    for position, key in enumerate(keys):
        yield piece(("," if position else "") + json.dumps(key) + ":")
        if key != "items":
            yield piece(canonical_json(head[key]))
            continue
        yield piece("[")
        for number, row in enumerate(outcomes.values(*MANIFEST_ITEM_FIELDS).iterator(chunk_size=MANIFEST_CHUNK)):
            yield piece(("," if number else "") + canonical_json(_item(row, run, worker=maintainer)))
        yield piece("]")
    digest.update(b"}")  # the hashed body closes here; the document goes on with its hash
    yield f',"sha256":"{digest.hexdigest()}"}}'.encode()


def run_manifest(*, run: EvaluationRun, user) -> dict:
    """The manifest as one document (see run_manifest_chunks; pages and API stream it instead)."""
    return json.loads(b"".join(run_manifest_chunks(run=run, user=user)))


def manifest_verify(manifest: dict) -> bool:
    """Whether a manifest's `sha256` matches the rest of it."""
    body = {key: value for key, value in manifest.items() if key != "sha256"}
    return manifest.get("sha256") == canonical_hash(body)


@dataclass(frozen=True)
class Agreement:
    """One item executed again: the stored verdict against the new one."""

    outcome: Outcome
    status: str
    category: str
    detail: str
    environment_lock: str | None  # lock hash of the environment it ran in now
    skipped: bool = False  # no answer was recorded (the model call failed): nothing to execute

    @property
    def agrees(self) -> bool:
        return self.skipped or (self.status, self.category) == (self.outcome.status, self.outcome.category)

    @property
    def same_environment(self) -> bool | None:
        stored = self.outcome.environment_lock.lock_hash if self.outcome.environment_lock else None
        return None if stored is None or self.environment_lock is None else stored == self.environment_lock


def run_reproduce(*, run: EvaluationRun) -> Iterator[Agreement]:
    """Execute every recorded item of the run again with its stored code and limits, compare verdicts; stores nothing.

    Items without a recorded answer (the model call failed) are skipped; infrastructure failures now are
    reported as an `error` verdict, as a worker would record them.
    """
    from evaluation.executor import limits_for_release
    from evaluation.judging.step import answer_verdict
    from sandbox import EnvironmentBuildError, Limits, SandboxError

    known = set(Limits.__dataclass_fields__)

    for outcome in run_outcomes(run):
        generation = outcome.generation
        if generation is None or generation.error:
            yield Agreement(outcome, outcome.status, outcome.category, "no answer was recorded", None, skipped=True)
            continue
        try:
            # The limits the item ran under, as recorded; older outcomes have none: the release's.
            limits = (
                Limits(**{k: v for k, v in outcome.limits.items() if k in known})
                if outcome.limits
                else limits_for_release(run.version)
            )
            item_run = answer_verdict(snippet=outcome.snippet, code=generation.extracted_code, limits=limits)
        except (EnvironmentBuildError, SandboxError) as exc:
            yield Agreement(outcome, Outcome.Status.ERROR, Outcome.Category.INFRASTRUCTURE, str(exc), None)
            continue
        lock = canonical_hash(item_run.environment_lock) if item_run.environment_lock is not None else None
        yield Agreement(outcome, item_run.verdict.status, item_run.verdict.category, item_run.verdict.detail, lock)
