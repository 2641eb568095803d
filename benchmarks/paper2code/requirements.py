"""The requirements policy: a task's requirement lines are PEP 508 requirements from the package index, nothing else.

Every line is a requirement (name, extras, version specifiers, environment markers) or a comment or blank.
Refused, each with its line and why: pip options (`-r`, `-c`, `-e`, `--index-url`, any line starting with `-`),
URLs, VCS addresses, direct references (`name @ URL`), local paths and archives, line continuations and
environment variables (pip would expand `${NAME}` from the building host's environment). Every entry point
(form, archive intake, import, the environment build) calls `requirements_problems` or `requirements_vetted`.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement

from benchmarks.paper2code.problems import PackageError, Problem

_COMMENT_RE = re.compile(r"(^|\s+)#.*$")  # pip's own rule: '#' at the start or after whitespace
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_VCS = ("git", "hg", "svn", "bzr")
_ARCHIVE_SUFFIXES = (".zip", ".whl", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tar.lz")
_OPTION_WHY = {
    "-r": "it reads another file",
    "--requirement": "it reads another file",
    "-c": "it reads a constraints file",
    "--constraint": "it reads a constraints file",
    "-e": "it installs from a local folder or a repository",
    "--editable": "it installs from a local folder or a repository",
    "-f": "it changes where packages come from",
    "--find-links": "it changes where packages come from",
    "-i": "it changes where packages come from",
    "--index-url": "it changes where packages come from",
    "--extra-index-url": "it changes where packages come from",
    "--trusted-host": "it turns off TLS checks",
}
_ONLY = "only PEP 508 requirements from the package index (name, extras, versions, markers) are allowed"


def requirements_problems(text: str, *, file: str = "requirements") -> list[Problem]:
    """Every refused line of `text`, located at `file`:line, saying why."""
    return [Problem(file, number, message) for number, _, message in _lines_judge(text) if message]


def requirements_text(text: str) -> str:
    """A requirements file's text as it is kept: LF line ends, no trailing spaces or blank lines at either end, and
    one final newline ("" when empty). A browser's textarea sends CRLF and a form strips the last newline: two texts
    with the same text here are the same file, and an untouched file keeps its bytes."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    kept = "\n".join(lines).strip("\n")
    return f"{kept}\n" if kept else ""


def requirements_vetted(text: str, *, file: str = "requirements") -> str:
    """The requirements as canonical PEP 508 lines (comments dropped), the only form handed to pip.

    Raises PackageError listing every refused line.
    """
    problems = requirements_problems(text, file=file)
    if problems:
        raise PackageError(problems)
    return "".join(f"{requirement}\n" for _, requirement, _ in _lines_judge(text) if requirement)


def _lines_judge(text: str) -> list[tuple[int, str, str]]:
    """(line number, canonical requirement or "", refusal or "") for every line."""
    judged = []
    for number, raw in enumerate(text.splitlines(), start=1):
        requirement, why = _line_judge(raw)
        judged.append((number, requirement, f"{raw.strip()[:200]!r} is refused: {why}" if why else ""))
    return judged


def _line_judge(raw: str) -> tuple[str, str]:
    """The canonical requirement of one line ("" for a comment or blank), or why the line is refused."""
    if raw.rstrip().endswith("\\"):
        return "", "line continuations are not allowed; write each requirement on one line"
    line = _COMMENT_RE.sub("", raw).strip()
    if not line:
        return "", ""
    if line.startswith("-"):
        option = line.split()[0].split("=")[0]
        why = _OPTION_WHY.get(option, "pip options are not allowed")
        return "", f"pip option {option} is not allowed ({why}); {_ONLY}"
    if re.match(r"[A-Za-z]:[\\/]", line) or line.startswith((".", "/", "\\", "~")):
        return "", f"a local path is not allowed; {_ONLY}"
    if _URL_RE.match(line):  # a name followed by ':' is never PEP 508, so this is a scheme
        scheme = line.split(":", 1)[0].lower()
        if scheme == "file":
            return "", f"a local path (file:) is not allowed; {_ONLY}"
        if scheme in _VCS or scheme.split("+")[0] in _VCS:
            return "", f"a VCS address ({scheme}) is not allowed; {_ONLY}"
        return "", f"a URL is not allowed; {_ONLY}"
    head = re.split(r"[@;\[<>=!~\s]", line, maxsplit=1)[0]
    if "/" in head or "\\" in head:
        return "", f"a local path is not allowed; {_ONLY}"
    if "${" in line:
        return "", "environment variables (${...}) are not allowed: pip would fill them in from the build's environment"
    try:
        requirement = Requirement(line)
    except InvalidRequirement as exc:
        hint = " (options after a requirement, such as --hash, are not allowed)" if re.search(r"\s-", line) else ""
        return "", f"not a PEP 508 requirement{hint}: {str(exc).splitlines()[0]}"
    if requirement.url:
        return "", f"a direct reference (name @ URL) is not allowed; {_ONLY}"
    if requirement.name.lower().endswith(_ARCHIVE_SUFFIXES):
        return "", f"{requirement.name} looks like a local archive, which pip would install from disk; {_ONLY}"
    return str(requirement), ""
