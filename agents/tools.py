"""The tools an agent may call (litellm/OpenAI function schemas) and what each does, its output as the model sees it.

`run` executes in the sandbox (the session's `command_run`: the task's environment, no network, the release's
memory and CPU limits, a time limit per command, output capped with the cap said); the file tools act on the
workspace folder directly, confined to it (workspace.Workspace.resolve).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from django.conf import settings

from agents.workspace import Workspace, WorkspaceError
from sandbox import EnvironmentBuildError, Limits, SandboxError, Session

SUBMIT = "submit"


def _function(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_PATH = {"type": "string", "description": "A path relative to the workspace (/sandbox)."}
TOOLS = [
    _function(
        "run",
        "Run a shell command in the workspace (/sandbox) with the task's Python environment, no network. "
        "It is killed at its time limit, and everything it started ends with it.",
        {"command": {"type": "string"}},
        ["command"],
    ),
    _function("read_file", "Read a text file of the workspace.", {"path": _PATH}, ["path"]),
    _function(
        "write_file",
        "Create or overwrite a file of the workspace.",
        {"path": _PATH, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _function(
        "edit_file",
        "Replace one exact occurrence of old_string by new_string in a file of the workspace.",
        {"path": _PATH, "old_string": {"type": "string"}, "new_string": {"type": "string"}},
        ["path", "old_string", "new_string"],
    ),
    _function("list_files", "List the files under a folder of the workspace.", {"path": _PATH}, []),
    _function(
        SUBMIT, "Submit: the TODO block as it now stands in its file is your answer. Nothing after this runs.", {}, []
    ),
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)
WRITING_TOOLS = frozenset({"run", "write_file", "edit_file"})  # the workspace is measured after each


@dataclass(frozen=True)
class ToolResult:
    output: str
    submitted: bool = False


def command_limits(limits: Limits, *, seconds_left: float) -> Limits:
    """A tool command's limits: the release's memory, CPUs and processes, its own time limit (never past the wall
    budget) and output cap."""
    return replace(
        limits,
        wall_seconds=max(1.0, min(settings.AGENT_COMMAND_SECONDS, seconds_left)),
        output_bytes=settings.AGENT_OUTPUT_BYTES,
    )


def _capped(text: str, truncated: bool, cap: int) -> str:
    return text + (f"\n[output cut at {cap} bytes per stream]" if truncated else "")


def output_cut(text: str, cap: int) -> str:
    """At most `cap` bytes of UTF-8 (a character is never split), the cut said."""
    data = text.encode("utf-8", "replace")
    if len(data) <= cap:
        return text
    return (
        data[:cap].decode("utf-8", "ignore") + f"\n[output cut at {cap} bytes; read a part with `run` "
        f"(head, sed -n, grep)]"
    )


def tool_call(
    *, name: str, arguments: str, workspace: Workspace, session: Session, limits: Limits, seconds_left: float
) -> ToolResult:
    """Carry out one tool call; every failure is an output the model reads, never an exception. A file tool's
    output is cut at AGENT_OUTPUT_BYTES (`run` cuts each stream at it)."""
    result = _tool_call(
        name=name, arguments=arguments, workspace=workspace, session=session, limits=limits, seconds_left=seconds_left
    )
    if name == "run":
        return result
    return replace(result, output=output_cut(result.output, settings.AGENT_OUTPUT_BYTES))


def _tool_call(
    *, name: str, arguments: str, workspace: Workspace, session: Session, limits: Limits, seconds_left: float
) -> ToolResult:
    try:
        args = json.loads(arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        return ToolResult(f"error: arguments are not valid JSON ({exc})")
    except RecursionError:  # nested deeper than the parser goes: no tool's arguments are
        return ToolResult("error: arguments are nested too deeply")
    if name not in TOOL_NAMES:
        return ToolResult(f"error: no tool named {name!r}; tools: {', '.join(sorted(TOOL_NAMES))}")
    try:
        if name == SUBMIT:
            return ToolResult("submitted", submitted=True)
        if name == "run":
            return ToolResult(
                _run(
                    str(args["command"]),
                    workspace=workspace,
                    session=session,
                    limits=command_limits(limits, seconds_left=seconds_left),
                )
            )
        if name == "read_file":
            return ToolResult(workspace.read(str(args["path"])).decode("utf-8", "replace"))
        if name == "write_file":
            workspace.write(str(args["path"]), str(args["content"]).encode("utf-8"))
            return ToolResult(f"wrote {args['path']}")
        if name == "edit_file":
            return ToolResult(_edit(workspace, str(args["path"]), str(args["old_string"]), str(args["new_string"])))
        return ToolResult(_listing(workspace, str(args.get("path") or ".")))
    except KeyError as exc:
        return ToolResult(f"error: missing argument {exc.args[0]!r}")
    except WorkspaceError as exc:
        return ToolResult(f"error: {exc}")
    except (SandboxError, EnvironmentBuildError):
        raise  # the worker's sandbox failed, not the agent: the item is retried
    except Exception as exc:  # noqa: BLE001 -- what the agent's arguments or files make a tool raise, it reads
        return ToolResult(f"error: {type(exc).__name__}: {exc}")


def _listing(workspace: Workspace, path: str) -> str:
    cap = settings.AGENT_LIST_ENTRIES
    found = workspace.listing(path, limit=cap + 1)
    text = "\n".join(found[:cap]) or "(no files)"
    if len(found) > cap:
        text += f"\n[more files not named: the listing stops at {cap} files; narrow the path or use `run`]"
    return text


def _edit(workspace: Workspace, path: str, old: str, new: str) -> str:
    text = workspace.read(path).decode("utf-8")
    count = text.count(old) if old else 0
    if count != 1:
        raise WorkspaceError(f"{path}: old_string occurs {count} times; it must occur exactly once")
    workspace.write(path, text.replace(old, new, 1).encode("utf-8"))
    return f"edited {path}"


def _run(command: str, *, workspace: Workspace, session: Session, limits: Limits) -> str:
    workspace.owned_by_sandbox()
    result = session.command_run(workspace=workspace.root, command=command, limits=limits)
    if result.timed_out:
        status = f"killed at its time limit of {limits.wall_seconds:.0f} s"
    elif result.oom_killed:
        status = "killed: out of memory"
    else:
        status = f"exit code {result.exit_code}"
    cap = limits.output_bytes
    return (
        f"[{status}, {result.duration:.1f} s]\n[stdout]\n{_capped(result.stdout, result.output_truncated, cap)}"
        f"\n[stderr]\n{_capped(result.stderr, result.output_truncated, cap)}"
    )
