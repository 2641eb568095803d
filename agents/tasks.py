"""The Celery tasks of an agent item: its turns on the `llm` queue, its tools and its scoring on the `sandbox` queue.

The chain (docs/AGENT_RUNS.md): `item_agent` (sandbox; what the feeder and the watchdog queue) stores the first two
steps and queues `agent_turn` (llm: one model call) -> if the turn called tools, `item_agent` again (sandbox: runs
them in the workspace, restored from storage when this worker's copy is not the current one, then stores it) -> the
next `agent_turn` ... -> once the agent submitted or a budget ended it, `item_agent` scores the answer. A sandbox slot
is held only while tools run or the answer is tested, never while the model thinks.

Each task carries the index of the step it will write, and does nothing when the stored steps are not exactly that
many (a duplicate delivery). `item_agent` without an index (the feeder, the watchdog's re-dispatch) continues from
whatever is stored: the tools of a stored turn, the next turn, or the scoring.

The answer (the snippet body read from the final annotated file, evaluation.item_files.answer_read) is stored as
the item's generation and judged by the single judging step (evaluation.judging.item_judge) exactly as a
single-shot answer: spliced into the original file, a fresh sandbox, the same harness, audit and flags, and the
same records (the fork server's starts included). The outcome's detail begins with what ended the agent.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from agents.budget import Budget
from agents.loop import (
    agent_acted,
    conversation_start,
    storable,
    system_prompt,
    tools_carry,
    tools_pending,
    trajectory_start,
    turn_take,
    usage_stored,
)
from agents.models import AgentTrajectory
from agents.policies import Policy, model_policy, placeholder_policy, reference_policy
from agents.uploads import uploaded_ended_text
from agents.workspace import Workspace, snapshot_delete
from benchmarks.selectors import protocol_get
from common.money import usd
from evaluation import services
from evaluation.environments import build_failures
from evaluation.executor import limits_for_release, session_for
from evaluation.item_files import MaskedFile, answer_read, workspace_files
from evaluation.judging.step import environment_failed, item_judge
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.outcomes import Verdict, model_call_failed
from evaluation.pipeline import (
    SANDBOX_RETRIES,
    held_out_withdrawn,
    item,
    item_current,
    item_ended,
    retry_or_error,
)
from evaluation.routing import AGENT_TURN, ITEM_AGENT
from evaluation.selectors.items import item_prompt, run_snippets
from evaluation.taskfiles import task_files, task_hidden_files
from operations.watchdog import database_outage_outlasted
from sandbox import EnvironmentBuildError, SandboxError

logger = logging.getLogger(__name__)


def _policy(run: EvaluationRun, snippet, masked: MaskedFile) -> Policy:
    if run.model.kind == ModelEntry.Kind.REFERENCE:
        return reference_policy(masked=masked, reference_code=snippet.reference_code)
    if run.model.kind == ModelEntry.Kind.PLACEHOLDER:
        return placeholder_policy()
    return model_policy(services.model_call(run=run))


def _ended_text(trajectory: AgentTrajectory) -> str:
    budget = trajectory.budget
    said: dict[str, str] = {
        AgentTrajectory.End.SUBMITTED: "the agent submitted",
        AgentTrajectory.End.TURNS: f"the turn budget ran out ({trajectory.turns} of {budget.get('turns')} turns)",
        AgentTrajectory.End.TOKENS: f"the token budget ran out ({trajectory.tokens:,} of {budget.get('tokens', 0):,})",
        AgentTrajectory.End.SECONDS: f"the wall-time budget ran out ({trajectory.seconds:.0f} of "
        f"{budget.get('seconds'):g} s)",
        AgentTrajectory.End.COST: f"the cost budget ran out ({usd(trajectory.cost)} of {usd(budget.get('cost'))})",
        AgentTrajectory.End.DISK: "the workspace went over its disk or file limit",
        AgentTrajectory.End.STORAGE: "the trajectory reached its size cap",
        AgentTrajectory.End.CONTEXT: "the conversation outgrew what the model accepts",
    }
    return said.get(trajectory.ended_by, trajectory.get_ended_by_display())


def _files(run: EvaluationRun, snippet) -> tuple[dict[str, bytes], MaskedFile]:
    task = snippet.task
    return workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=run.with_paper,
    )


def _workspace_name(run: EvaluationRun, snippet, sample: int) -> str:
    return f"run{run.pk}-item{snippet.pk}-{sample}"


def _item_failed(run: EvaluationRun, snippet, sample: int, exc: Exception) -> None:
    """Anything else an agent's task raised ends its item as an error, so the run can finish."""
    logger.exception("agent item run %s item %s/%s failed", run.pk, snippet.pk, sample)
    reason = f"the agent's item failed: {type(exc).__name__}: {exc}"[:2000]
    AgentTrajectory.objects.filter(run=run, snippet=snippet, sample=sample, ended_by="").update(
        ended_by=AgentTrajectory.End.ERROR
    )
    verdict = Verdict(Outcome.Status.ERROR, Outcome.Category.INFRASTRUCTURE, storable(reason))
    services.outcome_record(
        run=run,
        snippet=snippet,
        sample=sample,
        verdict=verdict,
        generation=Generation.objects.filter(run=run, snippet=snippet, sample=sample).first(),
        agent_acted=agent_acted(run=run, snippet=snippet, sample=sample),
    )
    _workspace_drop(run, snippet, sample)
    item_ended(run)


@shared_task(bind=True, max_retries=SANDBOX_RETRIES, name=AGENT_TURN)  # its name from before the move (routing.py)
@database_outage_outlasted
def agent_turn(self, run_id: int, snippet_id: int, sample: int, epoch: int | None, index: int) -> None:
    """One model turn of an agent item (`llm` queue): its message stored as step `index`, then the item's next task
    queued (its tools on the sandbox queue, the next turn, or the scoring)."""
    run, snippet = item(run_id, snippet_id)
    if not item_current(run, epoch):
        return
    assert run is not None  # pipeline.item_current: a current run
    trajectory = AgentTrajectory.objects.filter(run=run, snippet=snippet, sample=sample).first()
    if (
        trajectory is None
        or trajectory.ended_by
        or trajectory.steps.count() != index
        or Outcome.objects.filter(run=run, snippet=snippet, sample=sample).exists()
    ):
        logger.info("agent turn %s of run %s item %s/%s: done already", index, run.pk, snippet.pk, sample)
        return
    budget = Budget.of(trajectory.budget)
    try:
        try:
            policy = _policy(run, snippet, _files(run, snippet)[1])
        except services.EvaluationError as exc:
            _model_failed(run, snippet, sample, trajectory, error=str(exc), attempts=1)
            item_agent.delay(run_id, snippet_id, sample, epoch)
            return
        turn = turn_take(trajectory=trajectory, policy=policy, budget=budget)
        if not turn.recorded:
            return
        if turn.error:
            _model_failed(run, snippet, sample, trajectory, error=turn.error, attempts=turn.attempts)
        stored = trajectory.steps.count()
        if turn.tools or turn.ended_by:
            item_agent.delay(run_id, snippet_id, sample, epoch, stored)
        else:
            agent_turn.delay(run_id, snippet_id, sample, epoch, stored)
    except SandboxError as exc:  # the task's files could not be read from storage
        acted = agent_acted(run=run, snippet=snippet, sample=sample)
        retry_or_error(self, run=run, snippet=snippet, sample=sample, exc=exc, agent_acted=acted)
    except (OperationalError, InterfaceError):
        raise  # the database is away: database_outage_outlasted waits for it and runs the turn again
    except Exception as exc:
        _item_failed(run, snippet, sample, exc)


def _model_failed(
    run: EvaluationRun, snippet, sample: int, trajectory: AgentTrajectory, *, error: str, attempts: int
) -> None:
    """The model could not be called: the item's generation is that error (scored as an error, never tested). Its
    attempts count the failed call, as a single-shot generation's do, so the run's pause rule sees it."""
    trajectory.refresh_from_db()
    if trajectory.ended_by != AgentTrajectory.End.MODEL_ERROR:
        AgentTrajectory.objects.filter(pk=trajectory.pk).update(ended_by=AgentTrajectory.End.MODEL_ERROR)
    usage = usage_stored(trajectory)
    services.generation_record(
        run=run,
        snippet=snippet,
        sample=sample,
        prompt=item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol),
        error=error,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        latency=usage.seconds,
        attempts=min(usage.turns + max(1, attempts), 32767),
    )


@shared_task(bind=True, max_retries=SANDBOX_RETRIES, name=ITEM_AGENT)
@database_outage_outlasted
def item_agent(
    self, run_id: int, snippet_id: int, sample: int, epoch: int | None = None, index: int | None = None
) -> None:
    """The sandbox side of an agent item: begin it, run a stored turn's tools, or score its answer (once); without
    `index`, continue from whatever is stored."""
    run, snippet = item(run_id, snippet_id)
    if not item_current(run, epoch):
        return
    assert run is not None  # pipeline.item_current: a current run
    if Outcome.objects.filter(run=run, snippet=snippet, sample=sample).exists():
        item_ended(run)
        return
    if not run_snippets(run=run).filter(pk=snippet.pk).exists():
        logger.error("run %s does not cover item %s (held out?); its agent does not start", run.pk, snippet.pk)
        return
    if (
        run.model.kind == ModelEntry.Kind.LITELLM
        and not Generation.objects.filter(run=run, snippet=snippet, sample=sample).exists()
        and held_out_withdrawn(run=run, snippet=snippet, sample=sample)
    ):
        return
    worker = self.request.hostname or f"inline@{socket.gethostname()}"
    limits = limits_for_release(run.version)
    try:
        if run.is_upload:  # an agent's answer made elsewhere, its trajectory (if any) as uploaded
            _uploaded_score(run=run, snippet=snippet, sample=sample, limits=limits, worker=worker)
            return
        trajectory = trajectory_start(run=run, snippet=snippet, sample=sample, budget=Budget.of(run.agent_budget))
        if index is not None and trajectory.steps.count() != index:
            logger.info("agent step %s of run %s item %s/%s: done already", index, run.pk, snippet.pk, sample)
            return
        generation = Generation.objects.filter(run=run, snippet=snippet, sample=sample).first()
        if generation is None:
            if not trajectory.ended_by and not _agent_work(
                self, run=run, snippet=snippet, sample=sample, epoch=epoch, trajectory=trajectory, limits=limits
            ):
                return  # the item goes on in its next task
            generation = _answer_record(run=run, snippet=snippet, sample=sample)
        trajectory.refresh_from_db()
        if generation.error:  # the model call failed: as a single-shot item's, and the same pause rule
            _model_call_failed_record(run=run, snippet=snippet, sample=sample, generation=generation)
            return
        ended = _ended_text(trajectory)
        if trajectory.answer_problem:
            verdict = Verdict(
                Outcome.Status.FAILED, Outcome.Category.WRONG_RESULT, f"{ended}; no answer: {trajectory.answer_problem}"
            )
            services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation)
        else:
            item_judge(
                run=run,
                snippet=snippet,
                sample=sample,
                generation=generation,
                worker=worker,
                limits=limits,
                ended=ended,
            )
    except EnvironmentBuildError as exc:  # the workspace's environment, before any answer
        services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=environment_failed(snippet, exc))
    except SandboxError as exc:
        acted = agent_acted(run=run, snippet=snippet, sample=sample)
        retry_or_error(self, run=run, snippet=snippet, sample=sample, exc=exc, agent_acted=acted)
        return
    except (OperationalError, InterfaceError):
        raise  # the database is away: database_outage_outlasted waits for it and runs the item again
    except Exception as exc:  # anything else the agent's item raised ends it, so the run can finish
        _item_failed(run, snippet, sample, exc)
        return
    _workspace_drop(run, snippet, sample)
    item_ended(run)


def _model_call_failed_record(*, run: EvaluationRun, snippet, sample: int, generation: Generation) -> None:
    """An agent item whose model call failed ends as a single-shot item's does, under the same pause rule."""
    services.outcome_record(
        run=run,
        snippet=snippet,
        sample=sample,
        verdict=model_call_failed(generation.error, run=run),
        generation=generation,
    )
    _workspace_drop(run, snippet, sample)
    if not services.run_pause_if_failing(run=run):
        item_ended(run)


def _agent_work(task, *, run: EvaluationRun, snippet, sample: int, epoch, trajectory, limits) -> bool:
    """The sandbox's part of a running item; True when the item ended here (to be scored now)."""
    budget = Budget.of(trajectory.budget)
    steps = trajectory.steps.count()
    if not steps:
        system = system_prompt(
            path=snippet.file_path,
            name=snippet.name,
            loc=snippet.loc,
            budget=budget,
            command_seconds=settings.AGENT_COMMAND_SECONDS,
            output_bytes=settings.AGENT_OUTPUT_BYTES,
        )
        prompt = item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol)
        if conversation_start(trajectory=trajectory, system=system, prompt=prompt, budget=budget):
            agent_turn.delay(run.pk, snippet.pk, sample, epoch, 2)
        return False
    if not tools_pending(trajectory.steps.order_by("-index").first()):
        agent_turn.delay(run.pk, snippet.pk, sample, epoch, steps)  # its turn was lost (a re-dispatch)
        return False
    start, masked = _files(run, snippet)
    earlier = trajectory.workspace_snapshot
    workspace = Workspace.restored(name=_workspace_name(run, snippet, sample), snapshot=earlier, files=start)
    workspace.changing()
    session = session_for(snippet.task.environment_hash, snippet.task.requirements, failures=build_failures)
    snapshot = ""

    def stored(ended: str) -> dict:
        nonlocal snapshot
        snapshot, whole = workspace.snapshot_store(
            trajectory_id=trajectory.pk, index=steps, cap=limits.disk_bytes, keep=masked.path
        )
        fields: dict = {"workspace_snapshot": snapshot}
        if not whole and not ended:
            fields["ended_by"] = AgentTrajectory.End.DISK
        return fields

    try:
        recorded, ended = tools_carry(
            trajectory=trajectory, workspace=workspace, session=session, limits=limits, budget=budget, stored=stored
        )
    finally:
        session.workspace_close(workspace=workspace.root)  # docker: its kept container goes with the task
    if not recorded:  # another delivery of this task stored its steps first
        snapshot_delete(snapshot)
        return False
    workspace.marked(snapshot)
    snapshot_delete(earlier)
    trajectory.refresh_from_db()
    if trajectory.ended_by:
        return True
    agent_turn.delay(run.pk, snippet.pk, sample, epoch, trajectory.steps.count())
    return False


def _answer_record(*, run: EvaluationRun, snippet, sample: int) -> Generation:
    """The ended item's answer, read from its workspace as it stands, stored as its generation."""
    trajectory = AgentTrajectory.objects.get(run=run, snippet=snippet, sample=sample)
    start, masked = _files(run, snippet)
    workspace = Workspace.restored(
        name=_workspace_name(run, snippet, sample), snapshot=trajectory.workspace_snapshot, files=start
    )
    final = workspace.read_text(masked.path)
    usage = usage_stored(trajectory)
    body, problem = answer_read(final=final, masked=masked)
    AgentTrajectory.objects.filter(pk=trajectory.pk).update(answer_problem=problem)
    return services.generation_record(
        run=run,
        snippet=snippet,
        sample=sample,
        prompt=item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol),
        raw_answer=final or "",
        code=body or "",
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        latency=usage.seconds,
        attempts=min(usage.turns, 32767),
    )


def _workspace_drop(run: EvaluationRun, snippet, sample: int) -> None:
    """The item is over: its local copy and its stored snapshot go."""
    Workspace(Path(settings.AGENT_WORKSPACE_DIR) / _workspace_name(run, snippet, sample)).remove()
    trajectory = AgentTrajectory.objects.filter(run=run, snippet=snippet, sample=sample).first()
    if trajectory is not None and trajectory.workspace_snapshot:
        snapshot_delete(trajectory.workspace_snapshot)
        AgentTrajectory.objects.filter(pk=trajectory.pk).update(workspace_snapshot="")


def _uploaded_usage(generation: Generation, trajectory: AgentTrajectory | None) -> Generation:
    """An uploaded item's generation carries its trajectory's usage, as a live agent item's does (_answer_record), so
    the run's scores, the leaderboard's cost and the chart count it (self-reported, as the run is). Without a
    trajectory its usage stays unknown."""
    if trajectory is None:
        return generation
    usage = usage_stored(trajectory)
    Generation.objects.filter(pk=generation.pk).update(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        latency=usage.seconds,
    )
    generation.refresh_from_db()
    return generation


def _uploaded_score(*, run: EvaluationRun, snippet, sample: int, limits, worker: str) -> None:
    """An uploaded agent run's item: its answer tested on the single-shot path, its trajectory as uploaded."""
    trajectory = AgentTrajectory.objects.filter(run=run, snippet=snippet, sample=sample).first()
    generation = _uploaded_usage(Generation.objects.get(run=run, snippet=snippet, sample=sample), trajectory)
    ended = uploaded_ended_text(trajectory)
    if generation.error:  # only an upload's own report (a Harbor trial's exception) sets it: not passed
        verdict = Verdict(
            Outcome.Status.FAILED,
            Outcome.Category.REPORTED_ERROR,
            f"no answer: {generation.error} (an error the upload reports counts as not passed)",
        )
        services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation)
    elif trajectory is not None and trajectory.answer_problem:
        verdict = Verdict(
            Outcome.Status.FAILED, Outcome.Category.WRONG_RESULT, f"{ended}; no answer: {trajectory.answer_problem}"
        )
        services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation)
    else:
        item_judge(
            run=run, snippet=snippet, sample=sample, generation=generation, worker=worker, limits=limits, ended=ended
        )
    item_ended(run)
