"""The sandbox's in-process programs as files of their own, so that linters, type checkers, coverage and editors see
them: child.py (the harness's test process), supervisor.py (the harness's supervisor), zygote.py (the fork server),
command_server.py (an agent container's command server on docker). They are programs run inside the sandbox, never
imported: `source` reads their text."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def source(name: str) -> str:
    """The text of the program NAME.py, without its leading comment (what the sandbox runs)."""
    text = resources.files(__name__).joinpath(f"{name}.py").read_text(encoding="utf-8")
    return text[text.index("\n\n") + 1 :]
