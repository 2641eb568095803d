"""The Celery entry point of an agent item: the loop in a workspace, then scoring on the single-shot path.

The answer (the snippet body read from the final annotated file, workspace.answer_read) is stored as the item's
generation and tested by `item_execute` exactly as a single-shot answer: spliced into the original file, a fresh
sandbox, the same harness, audit and flags. The outcome's detail begins with what ended the agent.

Runs on the `sandbox` queue for now: the model's turns hold the worker's slot (moving turns to the `llm` queue is
issue 23 item 5, not done here).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import replace

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from benchmarks import visibility
from benchmarks.selectors import protocol_get
from evaluation import services
from evaluation.agents.budget import Budget
from evaluation.agents.loop import agent_loop, storable, system_prompt, trajectory_start
from evaluation.agents.models import AgentTrajectory
from evaluation.agents.policies import Policy, model_policy, placeholder_policy, reference_policy
from evaluation.agents.uploads import uploaded_ended_text
from evaluation.agents.workspace import MaskedFile, Workspace, answer_read, workspace_files
from evaluation.environments import ENVIRONMENT_FAILED, build_failures
from evaluation.executor import item_execute, limits_for_release, session_for
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.outcomes import Verdict
from evaluation.pipeline import SANDBOX_RETRIES, item, item_current, item_ended, retry_or_error
from evaluation.sandbox import EnvironmentBuildError, SandboxError
from evaluation.selectors import item_prompt, run_sends_held_out, run_snippets
from evaluation.taskfiles import task_files, task_hidden_files
from operations.watchdog import database_outage_outlasted

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
        AgentTrajectory.End.TOKENS: f"the token budget ran out ({trajectory.tokens} of {budget.get('tokens')})",
        AgentTrajectory.End.SECONDS: f"the wall-time budget ran out ({trajectory.seconds:.0f} of "
        f"{budget.get('seconds'):g} s)",
        AgentTrajectory.End.COST: f"the cost budget ran out ({trajectory.cost} of {budget.get('cost'):g} USD)",
        AgentTrajectory.End.DISK: "the workspace went over its disk or file limit",
        AgentTrajectory.End.STORAGE: "the trajectory reached its size cap",
    }
    return said.get(trajectory.ended_by, trajectory.get_ended_by_display())


@shared_task(bind=True, max_retries=SANDBOX_RETRIES)
@database_outage_outlasted
def item_agent(self, run_id: int, snippet_id: int, sample: int, epoch: int | None = None) -> None:
    """Let the agent work on one item, store its trajectory as it goes, then score its answer (once)."""
    run, snippet = item(run_id, snippet_id)
    if not item_current(run, epoch):
        return
    assert run is not None  # item_current: a current run
    if Outcome.objects.filter(run=run, snippet=snippet, sample=sample).exists():
        item_ended(run)
        return
    if not run_snippets(run=run).filter(pk=snippet.pk).exists():
        logger.error("run %s does not cover item %s (held out?); its agent does not start", run.pk, snippet.pk)
        return
    if (
        run.model.kind == ModelEntry.Kind.LITELLM
        and run.covers_held_out
        and not Generation.objects.filter(run=run, snippet=snippet, sample=sample).exists()
        and not run_sends_held_out(run=run)
        and not visibility.items_public(version=run.version).filter(pk=snippet.pk).exists()
    ):
        # As item_generate: covered at the start, untrusted now; the held-out item is never sent, an error.
        verdict = Verdict(
            Outcome.Status.ERROR,
            Outcome.Category.INFRASTRUCTURE,
            "not sent: the run's endpoint is no longer trusted with held-out prompts",
        )
        services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict)
        services.run_maybe_finish(run=run)
        return
    task = snippet.task
    worker = self.request.hostname or f"inline@{socket.gethostname()}"
    limits = limits_for_release(run.version)
    try:
        generation = Generation.objects.filter(run=run, snippet=snippet, sample=sample).first()
        if generation is None:
            generation = _agent_work(run=run, snippet=snippet, sample=sample, limits=limits)
        trajectory = AgentTrajectory.objects.filter(run=run, snippet=snippet, sample=sample).first()
        if run.params.get("uploaded"):  # an agent's answer made elsewhere, its trajectory (if any) as uploaded
            ended = uploaded_ended_text(trajectory)
        elif trajectory is None:
            raise AgentTrajectory.DoesNotExist(f"run {run.pk} item {snippet.pk}/{sample} has no trajectory")
        else:
            ended = _ended_text(trajectory)
        if generation.error:
            verdict = Verdict(Outcome.Status.ERROR, Outcome.Category.INFRASTRUCTURE, f"no answer: {generation.error}")
            services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation)
            if not services.run_pause_if_failing(run=run):
                item_ended(run)
            return
        if trajectory is not None and trajectory.answer_problem:
            verdict = Verdict(
                Outcome.Status.FAILED, Outcome.Category.WRONG_RESULT, f"{ended}; no answer: {trajectory.answer_problem}"
            )
            services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation)
        else:
            item_run = item_execute(
                snippet=snippet, code=generation.extracted_code, limits=limits, failures=build_failures
            )
            verdict = replace(item_run.verdict, detail=f"{ended}; {item_run.verdict.detail}")
            services.outcome_record(
                run=run,
                snippet=snippet,
                sample=sample,
                verdict=verdict,
                generation=generation,
                result=item_run.result,
                backend=item_run.backend,
                worker=worker,
                limits=item_run.limits,
                environment_lock=item_run.environment_lock,
                forked=item_run.forked,
            )
    except EnvironmentBuildError as exc:
        verdict = Verdict(
            Outcome.Status.ERROR,
            Outcome.Category.INFRASTRUCTURE,
            f"{ENVIRONMENT_FAILED} (task {task}): {exc}\n{exc.log[-1500:]}",
        )
        services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict)
    except SandboxError as exc:
        retry_or_error(self, run=run, snippet=snippet, sample=sample, exc=exc)
        return
    except (OperationalError, InterfaceError):
        raise  # the database is away: database_outage_outlasted waits for it and runs the item again
    except Exception as exc:  # anything else the agent's item raised ends it, so the run can finish
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
        )
    item_ended(run)


def _agent_work(*, run: EvaluationRun, snippet, sample: int, limits) -> Generation:
    """The agent's turns in a fresh workspace; its answer stored as the item's generation."""
    task = snippet.task
    budget = Budget.of(run.agent_budget)
    session = session_for(task.environment_hash, task.requirements, failures=build_failures)
    start, masked = workspace_files(
        snippet=snippet,
        files=task_files(task),
        hidden=task_hidden_files(task),
        protocol=protocol_get(name=run.protocol),
        with_paper=run.with_paper,
    )
    prompt = item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol)
    trajectory = trajectory_start(run=run, snippet=snippet, sample=sample, budget=budget)
    system = system_prompt(
        path=snippet.file_path,
        name=snippet.name,
        loc=snippet.loc,
        budget=budget,
        command_seconds=settings.AGENT_COMMAND_SECONDS,
        output_bytes=settings.AGENT_OUTPUT_BYTES,
    )
    workspace = Workspace.create(name=f"run{run.pk}-item{snippet.pk}-{sample}", files=start)
    try:
        try:
            policy = _policy(run, snippet, masked)
        except services.EvaluationError as exc:
            return services.generation_record(run=run, snippet=snippet, sample=sample, prompt=prompt, error=str(exc))
        end = agent_loop(
            trajectory=trajectory,
            policy=policy,
            system=system,
            prompt=prompt,
            workspace=workspace,
            session=session,
            limits=limits,
            budget=budget,
        )
        final = workspace.read_text(masked.path)
    finally:
        session.workspace_close(workspace=workspace.root)
        workspace.remove()
    usage = end.usage
    if end.error:
        return services.generation_record(
            run=run,
            snippet=snippet,
            sample=sample,
            prompt=prompt,
            error=end.error,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost=usage.cost,
            latency=usage.seconds,
            attempts=min(usage.turns, 32767),
        )
    body, problem = answer_read(final=final, masked=masked)
    AgentTrajectory.objects.filter(pk=trajectory.pk).update(answer_problem=problem)
    return services.generation_record(
        run=run,
        snippet=snippet,
        sample=sample,
        prompt=prompt,
        raw_answer=final or "",
        code=body or "",
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        latency=usage.seconds,
        attempts=min(usage.turns, 32767),
    )
