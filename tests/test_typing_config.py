"""The ratchets on the lint and type configuration in pyproject.toml: mypy ignores no module's errors, and no file but
the sandbox's programs is allowed over ruff's complexity limit; mypy checks the bodies of unannotated functions and
every application package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

# The only files allowed over ruff's complexity limit (C901, max-complexity in pyproject.toml): the sandbox's programs,
# whose guard is one closure on purpose (pyproject.toml says why). Any other function over the limit is split.
COMPLEXITY_EXEMPT_FILES = frozenset({"sandbox/programs/*"})

APPLICATION_PACKAGES = (
    "agents",
    "benchmarks",
    "common",
    "config",
    "evaluation",
    "leaderboard",
    "operations",
    "sandbox",
    "submissions",
    "scripts",
)


def pyproject() -> dict:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def mypy_ignored_modules(config: dict) -> set[str]:
    ignored: set[str] = set()
    for override in config["tool"]["mypy"].get("overrides", []):
        if override.get("ignore_errors"):
            modules = override["module"]
            ignored.update([modules] if isinstance(modules, str) else modules)
    return ignored


def complexity_debt_files(config: dict) -> set[str]:
    ignores = config["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    return {pattern for pattern, codes in ignores.items() if any("C901".startswith(code) for code in codes)}


def test_mypy_ignores_no_module():
    ignored = mypy_ignored_modules(pyproject())
    assert not ignored, (
        f"pyproject.toml [tool.mypy] ignores the errors of {sorted(ignored)}: fix the module's type errors instead "
        f"(an ignore on the line, with its error code and a reason, where one really must stay)"
    )


def test_only_the_sandbox_programs_are_exempt_from_the_complexity_limit():
    grown = complexity_debt_files(pyproject()) - COMPLEXITY_EXEMPT_FILES
    assert not grown, (
        f"pyproject.toml [tool.ruff.lint.per-file-ignores] exempts {sorted(grown)} from C901, which the committed "
        f"list in {Path(__file__).name} does not: split the function instead of exempting its file"
    )


def test_mypy_checks_every_package_and_untyped_bodies():
    mypy = pyproject()["tool"]["mypy"]
    assert mypy["check_untyped_defs"] is True, "check_untyped_defs must stay on: unannotated bodies are checked too"
    assert "ignore-without-code" in mypy.get("enable_error_code", []), "a bare `# type: ignore` must be an error"
    missing = [package for package in APPLICATION_PACKAGES if package not in mypy["files"]]
    assert not missing, f"pyproject.toml [tool.mypy] files does not name {missing}"


def test_the_ratchet_sees_an_added_module():
    """The checks read the lists pyproject.toml gives: a module or file added to them is found (guards the parsing
    itself), in either spelling mypy takes."""
    config = pyproject()
    overrides = config["tool"]["mypy"].setdefault("overrides", [])
    overrides.append({"module": ["common.newcomer"], "ignore_errors": True})
    overrides.append({"module": "common.other", "ignore_errors": True})
    assert mypy_ignored_modules(config) == {"common.newcomer", "common.other"}
    config["tool"]["ruff"]["lint"].setdefault("per-file-ignores", {})["common/newcomer.py"] = ["C90"]
    assert complexity_debt_files(config) - COMPLEXITY_EXEMPT_FILES == {"common/newcomer.py"}


def ruff_findings(text: str, *, as_file: str) -> str:
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed (pip install -e '.[lint]')")
    command = [str(ruff), "check", "--no-cache", "--output-format", "concise", "--stdin-filename", as_file, "-"]
    return subprocess.run(command, input=text, capture_output=True, text=True, cwd=REPO, check=False).stdout


@pytest.mark.parametrize("line", ["import django", "import django.conf", "from django.db import connection"])
def test_the_sandbox_package_cannot_import_django(line: str):
    """The banned import holds in the sandbox package, its programs and the rest, and only there (every app imports
    Django)."""
    assert "TID251" in ruff_findings(f"{line}\n", as_file="sandbox/programs/child.py")
    assert "TID251" in ruff_findings(f"{line}\n", as_file="sandbox/docker.py")
    assert "TID251" not in ruff_findings(f"{line}\n", as_file="evaluation/executor.py")


def test_complexity_limit_applies_outside_the_debt_list():
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(20))
    assert "C901" in ruff_findings(f"def f(x):\n{branches}    return -1\n", as_file="evaluation/routing.py")
