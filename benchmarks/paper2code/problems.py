"""Problems found in a task package, each located by file and line so an author can fix it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong (error) or suspicious (warning) at file:line; line 0 means the whole file."""

    file: str
    line: int
    message: str
    names: tuple[str, ...] = field(default=())
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.severity}: {self.message}"


class PackageError(Exception):
    """Raised with every error found, so the author sees all of them at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
