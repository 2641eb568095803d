"""A trajectory exported in Harbor's Agent Trajectory Interchange Format, ATIF-v1.4 (Harbor's RFC 0001); which of
our fields go where, and what is dropped, is listed in docs/AGENT_RUNS.md.

ATIF folds a turn into one agent step: the model's message, its tool calls, and the tools' outputs as the step's
observation. Our steps are messages (system, user, assistant, tool), so each tool step joins the assistant step whose
call it answers; one that answers no call of an earlier assistant step becomes a system step's observation.
"""

from __future__ import annotations

import json

from agents.models import AgentStep, AgentTrajectory
from agents.selectors import TRAJECTORY_FORMAT

ATIF_VERSION = "ATIF-v1.4"
AGENT_NAME = "researchcodebench-agent"
SOURCES = {AgentStep.Role.SYSTEM: "system", AgentStep.Role.USER: "user", AgentStep.Role.ASSISTANT: "agent"}


# No tool's arguments nest deeper; a deeper value is kept as its text, so the export's encoder never meets it.
ARGUMENTS_DEPTH = 64


def _depth(value) -> int:
    """How deeply a JSON value nests its objects and lists (a scalar: 0), counted without recursion."""
    deepest, level = 0, [(value, 0)]
    while level:
        item, depth = level.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            level.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _arguments(text: str) -> dict:
    """ATIF wants the arguments as an object; the model's JSON string when it is one (of a tool's depth), else the
    string kept whole."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, a number past the int-string limit, nested past the parser
        return {"_raw": text}
    return value if isinstance(value, dict) and _depth(value) <= ARGUMENTS_DEPTH else {"_raw": text}


def _extra(step: AgentStep) -> dict:
    return {"rcb_index": step.index, "duration": step.duration, "budget_left": step.budget_left}


def trajectory_atif(*, trajectory: AgentTrajectory, run) -> dict:
    """The trajectory as an ATIF-v1.4 document (run: its EvaluationRun, for the model's name and provenance)."""
    steps: list[dict] = []
    calls_of: dict[str, dict] = {}  # a tool call's id -> the ATIF step that made it
    for step in trajectory.steps.all():
        if step.role == AgentStep.Role.TOOL:
            target = calls_of.get(step.tool_call_id)
            if target is None:  # answers no call we saw: a system step's observation, the id it gave in extra
                target = {
                    "step_id": 0,
                    "timestamp": step.created_at.isoformat(),
                    "source": "system",
                    "message": "",
                    "extra": {"rcb_index": step.index, "tool_call_id": step.tool_call_id, "tool_name": step.tool_name},
                }
                steps.append(target)
            target.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": step.tool_call_id if target["source"] == "agent" else None, "content": step.content}
            )
            target["extra"].setdefault("tool_durations", {})[step.tool_call_id] = step.duration
            continue
        atif: dict = {
            "step_id": 0,
            "timestamp": step.created_at.isoformat(),
            "source": SOURCES[AgentStep.Role(step.role)],
            "message": step.content,
            "extra": _extra(step),
        }
        if step.role == AgentStep.Role.ASSISTANT:
            atif["model_name"] = run.litellm_model or run.model.name
            calls = [call for call in step.tool_calls if {"id", "name", "arguments"} <= set(call)]
            if calls:
                atif["tool_calls"] = [
                    {"tool_call_id": c["id"], "function_name": c["name"], "arguments": _arguments(c["arguments"])}
                    for c in calls
                ]
                calls_of.update({c["id"]: atif for c in calls})
            if malformed := [call for call in step.tool_calls if call not in calls]:
                atif["extra"]["malformed_tool_calls"] = malformed
            metrics = {
                "prompt_tokens": step.prompt_tokens,
                "completion_tokens": step.completion_tokens,
                "cost_usd": None if step.cost is None else float(step.cost),
            }
            if metrics := {key: value for key, value in metrics.items() if value is not None}:
                atif["metrics"] = metrics
        steps.append(atif)
    for number, atif in enumerate(steps, start=1):
        atif["step_id"] = number
    final = {
        "total_prompt_tokens": trajectory.prompt_tokens,
        "total_completion_tokens": trajectory.completion_tokens,
        "total_steps": len(steps),
        "extra": {"turns": trajectory.turns, "seconds": trajectory.seconds},
    }
    if trajectory.cost is not None:  # unknown is left out, never 0
        final["total_cost_usd"] = float(trajectory.cost)
    uploaded = run.is_upload
    return {
        "schema_version": ATIF_VERSION,
        "session_id": f"rcb-run{trajectory.run_id}-snippet{trajectory.snippet_id}-sample{trajectory.sample}",
        "agent": {
            "name": "uploaded-agent" if uploaded else AGENT_NAME,
            "version": TRAJECTORY_FORMAT,
            "model_name": run.litellm_model or run.model.name,
            "extra": {"budget": trajectory.budget},
        },
        "notes": (
            "Exported from the ResearchCodeBench platform's trajectory format "
            f"{TRAJECTORY_FORMAT}; tool outputs are the observations of the agent step whose call they answer. "
            + ("Uploaded by its model's owner: self-reported, not watched by the platform." if uploaded else "")
        ).strip(),
        "final_metrics": final,
        "extra": {
            "run": trajectory.run_id,
            "snippet": trajectory.snippet_id,
            "sample": trajectory.sample,
            "ended_by": trajectory.ended_by,
            "answer_problem": trajectory.answer_problem,
            "provenance": run.provenance,
            "uploaded": uploaded,
        },
        "steps": steps,
    }
