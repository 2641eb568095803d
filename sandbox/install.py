"""Install a task's requirements into an environment so that none of their code ever runs outside a sandbox.

One procedure for every backend, in rounds: fetch distributions outside (fetch.py: reads index listings and
files as data, runs nothing), then `pip install --no-index --find-links` inside the backend's build sandbox (no
network, the unprivileged user, an empty environment, the environment folder the only writable place besides
its own temporary folders). Source distributions are built there too, from build requirements fetched the same
way; what pip reports it cannot find (a dependency an sdist declares only when built, a version a conflict
needs) is fetched in the next round, up to BUILD_ROUNDS. A backend supplies only the BuildSandbox.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement

from sandbox.base import EnvironmentBuildError, ExecResult, Limits, SandboxError
from sandbox.config import setting
from sandbox.fetch import PROBE, Fetcher, IndexConfig, Target, requirement_lines, target_from_probe

# Where a sandboxed build step sees its inputs (the fetched files and the requirements), read-only.
INPUTS = "/rcb-build"
BUILD_ROUNDS = 6
OUTPUT_BYTES = 4 * 1024 * 1024
# The whole environment of a build step besides PATH, HOME, TMPDIR and LANG: no configuration file is read.
BUILD_ENV = {
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_CACHE_DIR": "1",
    "PYTHONNOUSERSITE": "1",
}
_targets: dict[str, Target] = {}
MISSING = re.compile(r"(?:satisfies the requirement|No matching distribution found for|depends on) ([^\s()]+)")


class BuildSandbox(Protocol):
    """Runs one build step with the environment writable, `inputs` read-only, no network, no secrets."""

    python: str  # the environment's interpreter, as the step sees it
    interpreter: str  # names the interpreter behind it: the same name, the same wheel tags and markers

    def inputs_at(self, inputs: Path) -> str:
        """Where the step sees the inputs folder."""
        ...

    def run(self, command: Sequence[str], *, inputs: Path, env: Mapping[str, str], limits: Limits) -> ExecResult: ...


def build_limits(deadline: float) -> Limits:
    """A build step's limits: the run limits' memory, processes and disk, every core, the build's time left."""
    return Limits(
        wall_seconds=max(1.0, deadline - time.monotonic()),
        memory_bytes=setting("SANDBOX_MEMORY_MB") << 20,
        processes=setting("SANDBOX_PROCESSES"),
        cpus=float(os.cpu_count() or 1),
        output_bytes=OUTPUT_BYTES,
        disk_bytes=setting("SANDBOX_DISK_MB") << 20,
    )


def requirements_install(*, requirements: str, sandbox: BuildSandbox, work: Path, dists: Path) -> str:
    """Install `requirements` through `sandbox`; returns the build log, or raises EnvironmentBuildError with it.

    `work` is this build's own folder (emptied here, removed afterwards); `dists` the worker's download cache.
    """
    wanted = requirement_lines(requirements)
    log = ["requirements:", requirements.rstrip(), ""]
    if not wanted:
        return "\n".join([*log, "nothing to install"]) + "\n"
    shutil.rmtree(work, ignore_errors=True)
    (work / "files").mkdir(parents=True)
    (work / "requirements.txt").write_text("".join(f"{requirement}\n" for requirement in wanted))
    os.chmod(work, 0o755)
    os.chmod(work / "files", 0o755)
    os.chmod(work / "requirements.txt", 0o644)
    deadline = time.monotonic() + setting("SANDBOX_BUILD_SECONDS")
    try:
        return _rounds(wanted, sandbox=sandbox, work=work, dists=dists, log=log, deadline=deadline)
    except EnvironmentBuildError as exc:
        if exc.log:
            raise
        raise EnvironmentBuildError(str(exc), _joined([*log, str(exc)])) from exc  # refused while fetching
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rounds(
    wanted: list[Requirement], *, sandbox: BuildSandbox, work: Path, dists: Path, log: list[str], deadline: float
) -> str:
    target = _target(sandbox, work, deadline)
    log.append(f"python {target.markers['python_full_version']} ({target.tags[0]})")
    config = IndexConfig.host().with_project_indexes(setting("SANDBOX_CPU_WHEEL_INDEXES"))
    fetcher = Fetcher(config=config, target=target, cache=dists, max_bytes=setting("SANDBOX_FETCH_MB") << 20)
    inputs = sandbox.inputs_at(work)
    command = [
        sandbox.python,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        f"{inputs}/files",
        "--progress-bar",
        "off",
        "-r",
        f"{inputs}/requirements.txt",
    ]
    for number in range(1, BUILD_ROUNDS + 1):
        fetched = fetcher.fetch(wanted, work / "files")
        log += [f"round {number}: fetched {', '.join(fetched.fetched) or 'nothing new'}", *fetched.notes]
        unavailable = [str(r) for r in wanted if str(r) in fetched.missing]
        if unavailable:
            raise EnvironmentBuildError(
                f"installing requirements failed: No matching distribution found for {', '.join(unavailable)} "
                "(no file on the package index fits this interpreter)",
                _joined(log),
            )
        result = sandbox.run(command, inputs=work, env=BUILD_ENV, limits=build_limits(deadline))
        output = (result.stdout + result.stderr).rstrip()
        log += ["$ pip " + " ".join(command[3:]), output]
        if result.timed_out:
            raise EnvironmentBuildError(
                f"installing requirements timed out after {setting('SANDBOX_BUILD_SECONDS')} s", _joined(log)
            )
        if result.exit_code == 0:
            return _joined(log)
        wanted = [r for r in _reported_missing(output) if not fetcher.tried(r)]
        if not wanted:
            errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR:")]
            last = (errors or output.splitlines() or ["(no output)"])[-1].removeprefix("ERROR: ")
            raise EnvironmentBuildError(f"installing requirements failed: {last}", _joined(log))
    raise EnvironmentBuildError(
        f"installing requirements failed: still missing distributions after {BUILD_ROUNDS} rounds of fetching",
        _joined(log),
    )


def _target(sandbox: BuildSandbox, work: Path, deadline: float) -> Target:
    """What the environment's interpreter accepts, asked of it in the sandbox once per interpreter and process."""
    if sandbox.interpreter not in _targets:
        probe = sandbox.run([sandbox.python, "-c", PROBE], inputs=work, env=BUILD_ENV, limits=build_limits(deadline))
        if probe.exit_code != 0:
            raise SandboxError(
                f"the environment's interpreter did not start in the build sandbox: {probe.stderr[-500:]}"
            )
        _targets[sandbox.interpreter] = target_from_probe(probe.stdout)
    return _targets[sandbox.interpreter]


def _reported_missing(output: str) -> list[Requirement]:
    found: dict[str, Requirement] = {}
    for text in MISSING.findall(output):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        found.setdefault(str(requirement), requirement)
    return list(found.values())


def _joined(log: list[str]) -> str:
    return "\n".join(log) + "\n"
