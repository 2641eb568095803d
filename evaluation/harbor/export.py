"""A release exported as Harbor tasks (Harbor 0.26's task format): one folder per item, scored by Harbor itself.

Each task: `task.toml` (the release's limits and the item's metadata), `instruction.md` (the release's protocol in
agent mode), `environment/` (a Dockerfile on a base image given by name that installs the task's environment from
pinned, bundled files and the workspace an agent run starts with: hidden files absent, the snippet masked),
`solution/solve.sh` (the oracle: the reference body written into its region) and `tests/` (the original package
with its hidden files, the platform's harness and verify.py, copied in by Harbor only at verification).

Harbor's `no-network` policy needs its egress sidecar (a registry image) on a local engine, so the task leaves
Harbor's network mode at its default and its own compose file runs the container and its build with no network at
all (`network_mode: none`), which any engine honours; the verifier runs in a container of its own
(`environment_mode = "separate"`) that receives the agent's workspace (`artifacts`), of which verify.py reads only
the answer's file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from benchmarks.models import BenchmarkVersion, Snippet, VersionTask
from benchmarks.paper2code import splice
from benchmarks.selectors import papers_as_released, protocol_get, version_snippets
from evaluation.executor import requirements_for_pip
from evaluation.item_files import workspace_files
from evaluation.selectors.items import item_prompt
from evaluation.taskfiles import task_annotated, task_files, task_hidden_files
from sandbox import harness, programs
from sandbox.fetch import PROBE, Fetcher, IndexConfig, requirement_lines, target_from_probe
from sandbox.forkserver import preload_modules

ORG = "researchcodebench"
SCHEMA_VERSION = "1.4"  # harbor.models.task.config.TaskConfig.schema_version in Harbor 0.26
WORKSPACE = "/sandbox"
PYTHON = "/opt/env/bin/python"
SANDBOX_USER = "sandbox"  # uid 10001 of the sandbox base image
VERIFIER_SECONDS_EXTRA = 120  # copying the package and starting the interpreter, beyond the tests' own limit
SPLICE_MARK = "\0rcb-answer\0"
SPLITS = ("public", "held_out", "all")
# The harness and its programs as the platform runs them, shipped verbatim (the package markers empty).
HARNESS_TREE = {
    "sandbox/__init__.py": b"",
    "sandbox/harness.py": Path(harness.__file__).read_bytes(),
    **{
        f"sandbox/programs/{name}": (Path(programs.__file__).parent / name).read_bytes()
        for name in ("__init__.py", "child.py", "supervisor.py")
    },
}


class ExportError(ValueError):
    """A release or option the export refuses, with what and where."""


@dataclass(frozen=True)
class Environment:
    """A task environment's bundled distributions (file name -> bytes path) and their pins."""

    files: tuple[Path, ...]
    pins: tuple[str, ...]


def harbor_task_name(snippet: Snippet) -> str:
    """`researchcodebench/<paper>.<file>.<position>`: Harbor's org/name, stable across sites (no database ids)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", PurePosixPath(snippet.file_path).with_suffix("").as_posix()).strip("-")
    return f"{ORG}/{snippet.task.paper.slug}.{stem}.{snippet.position}"


FOLDER_MAX = 30  # Harbor 0.26 cuts a trial's name to a task folder's first 32 characters; a cut name lost its reward


def harbor_folder(name: str) -> str:
    """The task's folder: its name without the org, dots as dashes, at most FOLDER_MAX characters (a longer one is
    cut and told apart by a hash of the whole name)."""
    folder = name.split("/", 1)[1].replace(".", "-")
    if len(folder) <= FOLDER_MAX:
        return folder
    return f"{folder[: FOLDER_MAX - 9].rstrip('-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def release_export(
    *, version: BenchmarkVersion, root: Path, split: str = "public", with_paper: bool = True, base_image: str = ""
) -> list[str]:
    """Write one Harbor task per item of `version`'s `split` under `root` (new or empty); the task names."""
    if split not in SPLITS:
        raise ExportError(f"--split: {split!r} is not one of {', '.join(SPLITS)}")
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise ExportError(f"release {version.name} is a draft: only a published release is exported")
    if root.exists() and any(root.iterdir()):
        raise ExportError(f"{root} exists and is not empty")
    base_image = _pinned(base_image or settings.SANDBOX_DOCKER_BASE_IMAGE)
    snippets = list(version_snippets(version=version, split=None if split == "all" else split))
    splits = dict(VersionTask.objects.filter(version=version).values_list("task_id", "split"))
    root.mkdir(parents=True, exist_ok=True)
    environments: dict[str, Environment] = {}
    names = []
    for snippet in snippets:
        task = snippet.task
        if task.environment_hash not in environments:
            environments[task.environment_hash] = _environment(task.requirements, root / ".dists", base_image)
        name = harbor_task_name(snippet)
        files = harbor_task_files(
            snippet=snippet,
            version=version,
            split=splits[task.pk],
            with_paper=with_paper,
            base_image=base_image,
            environment=environments[task.environment_hash],
        )
        _write(root / harbor_folder(name), files)
        names.append(name)
    shutil.rmtree(root / ".dists", ignore_errors=True)
    return names


def harbor_task_files(
    *, snippet: Snippet, version: BenchmarkVersion, split: str, with_paper: bool, base_image: str, environment
) -> dict[str, bytes | Path]:
    """The files of one item's Harbor task, by path in the task folder (a Path value: a file to copy)."""
    task = snippet.task
    files = task_files(task)
    hidden = task_hidden_files(task)
    protocol = protocol_get(name=version.protocol.name)
    start, masked = workspace_files(
        snippet=snippet, files=files, hidden=hidden, protocol=protocol, with_paper=with_paper
    )
    annotated = task_annotated(task, snippet.file_path)
    head, _, tail = splice(annotated, annotated.snippets[snippet.position], SPLICE_MARK).partition(SPLICE_MARK)
    ending = "\r\n" if annotated.text.splitlines(keepends=True)[snippet.start_line - 1].endswith("\r\n") else "\n"
    seconds = int(version.time_limit_seconds or settings.SANDBOX_WALL_SECONDS)
    item = {
        "item": harbor_task_name(snippet),
        "workspace": WORKSPACE,
        "path": masked.path,
        "prefix": masked.prefix,
        "suffix": masked.suffix,
        "original": snippet.file_path,
        "head": head,
        "tail": tail,
        "ending": ending,
        "start_line": snippet.start_line,
        "loc": snippet.loc,
        "entry_point": task.test_entry_point,
        "python": PYTHON,
        "seconds": seconds,
        "hidden_files": sorted(hidden),
        "hidden_modules": sorted({PurePosixPath(p).stem for p in hidden if p.endswith(".py")}),
        # What the guard imports and watches from the answer's start (GuardSpec.imports): never the snippet's body.
        "imports": preload_modules(files, skipped=[(snippet.file_path, snippet.start_line, snippet.end_line)]),
        "manifest": task.test_manifest or {"runner": "strict"},
    }
    out: dict[str, bytes | Path] = {
        "task.toml": _task_toml(snippet=snippet, version=version, split=split, with_paper=with_paper).encode(),
        "instruction.md": _instruction(snippet, masked, version, with_paper).encode("utf-8"),
        "environment/Dockerfile": _dockerfile(base_image, environment).encode(),
        "environment/docker-compose.yaml": COMPOSE.encode(),
        "solution/solve.sh": _solve(masked, snippet.reference_code).encode(),
        "tests/test.sh": TEST_SH.encode(),
        "tests/verify.py": Path(__file__).with_name("verify.py").read_bytes(),
        "tests/item.json": json.dumps(item, indent=1).encode("utf-8"),
    }
    if environment.pins:
        out["environment/requirements.lock"] = "".join(f"{pin}\n" for pin in environment.pins).encode()
        out.update({f"environment/wheels/{path.name}": path for path in environment.files})
    out.update({f"environment/workspace/{path}": data for path, data in start.items()})
    out.update({f"tests/package/{path}": data for path, data in files.items()})
    out.update({f"tests/rcb/{path}": data for path, data in HARNESS_TREE.items()})
    return out


def _write(folder: Path, files: dict[str, bytes | Path]) -> None:
    for path, data in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, Path):
            shutil.copyfile(data, target)
        else:
            target.write_bytes(data)
        if path.endswith(".sh"):
            target.chmod(0o755)


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def _task_toml(*, snippet: Snippet, version: BenchmarkVersion, split: str, with_paper: bool) -> str:
    task = snippet.task
    seconds = int(version.time_limit_seconds or settings.SANDBOX_WALL_SECONDS)
    agent_seconds = float((version.agent_budget_max or {}).get("seconds") or settings.AGENT_BUDGET_MAXIMUMS["seconds"])
    gpu = task.needs_gpu
    title = papers_as_released(version=version, papers=[task.paper])[0].title
    lines = [
        f'schema_version = "{SCHEMA_VERSION}"',
        # The verifier's separate container receives the agent's workspace
        # (a folder: Harbor 0.26 downloads a file artifact as an empty folder); verify.py reads only the answer's file.
        f'artifacts = ["{WORKSPACE}"]',
        "",
        "[task]",
        f"name = {_toml_string(harbor_task_name(snippet))}",
        f"version = {_toml_string(version.name)}",
        f"description = {_toml_string(f'{title}: implement {snippet.name}')}",
        f'authors = [{{ name = "{ORG}" }}]',
        f"keywords = {json.dumps(['research-code', task.paper.slug])}",
        "",
        "[metadata]",
        f"release = {_toml_string(version.name)}",
        f"release_manifest_hash = {_toml_string(version.manifest_hash)}",
        f"paper = {_toml_string(task.paper.slug)}",
        f"task_revision = {task.revision}",
        f"task_content_hash = {_toml_string(task.content_hash)}",
        f"file = {_toml_string(snippet.file_path)}",
        f"snippet = {_toml_string(snippet.name)}",
        f"position = {snippet.position}",
        f"snippet_code_hash = {_toml_string(snippet.code_hash)}",
        f"loc = {snippet.loc}",
        f"split = {_toml_string(split)}",
        f"with_paper = {'true' if with_paper else 'false'}",
        "internet = false",
        "",
        "[verifier]",
        f"timeout_sec = {float(seconds + VERIFIER_SECONDS_EXTRA)}",
        'environment_mode = "separate"',
        'user = "root"  # hands the answer to the sandbox user, keeps the logs out of its reach',
        "",
        "[agent]",
        f"timeout_sec = {agent_seconds}",
        f'user = "{SANDBOX_USER}"',
        "",
        "[environment]",
        "build_timeout_sec = 1800.0",
        f"cpus = {version.cpus or settings.SANDBOX_CPUS}",
        f"memory_mb = {version.memory_mb or settings.SANDBOX_MEMORY_MB}",
        f"storage_mb = {settings.SANDBOX_DISK_MB}",
        f"gpus = {1 if gpu else 0}",
        f'workdir = "{WORKSPACE}"',
    ]
    return "\n".join(lines) + "\n"


def _instruction(snippet: Snippet, masked, version: BenchmarkVersion, with_paper: bool) -> str:
    prompt = item_prompt(snippet, with_paper=with_paper, protocol=version.protocol.name)
    return (
        f"# Implement `{snippet.name}` in `{WORKSPACE}/{masked.path}`\n\n"
        f"The workspace `{WORKSPACE}` holds a research paper's code{' and the paper' if with_paper else ''}. "
        f"In `{masked.path}` one block is masked by a TODO: replace the two TODO lines of block "
        f'"{snippet.name}" with your implementation (about {snippet.loc} line(s), at their indentation).\n\n'
        "Change nothing above or below the TODO block of that file: any edit there, or a missing file, fails the "
        "item. Only that file is judged; the paper's tests are not in the workspace and run after you finish, "
        "with no network.\n\n"
        "---\n\n" + prompt + "\n"
    )


DOCKERFILE = """\
FROM {base}
{install}COPY --chown=10001:10001 workspace/ {workspace}/
USER {user}
WORKDIR {workspace}
"""
# The task's environment from its bundled, pinned files: nothing is downloaded at build time.
INSTALL = """\
USER root
COPY wheels/ /tmp/rcb-wheels/
COPY requirements.lock /tmp/rcb-requirements.lock
RUN {python} -m pip install --no-index --find-links /tmp/rcb-wheels -r /tmp/rcb-requirements.lock \\
 && rm -rf /tmp/rcb-wheels /tmp/rcb-requirements.lock
"""

COMPOSE = """\
# Built and run with no network at all, on any engine (Harbor's no-network mode needs its egress sidecar image).
services:
  main:
    build:
      network: none
    network_mode: none
"""


def _dockerfile(base: str, environment: Environment) -> str:
    install = INSTALL.format(python=PYTHON) if environment.pins else ""
    return DOCKERFILE.format(base=base, install=install, workspace=WORKSPACE, user=SANDBOX_USER)


SOLVE = """\
#!/bin/sh
# The oracle: the reference body written into the TODO block of {path}.
set -eu
exec {python} - <<'EOF'
import base64
import hashlib
path = "{workspace}/{path}"
text = open(path, encoding="utf-8").read()
placeholder = base64.b64decode("{placeholder}").decode("utf-8")
body = base64.b64decode("{body}").decode("utf-8")
assert text.count(placeholder) == 1, "the TODO block is not in the file as exported"
open(path, "w", encoding="utf-8").write(text.replace(placeholder, body))
EOF
"""


def _solve(masked, reference: str) -> str:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode("utf-8")).decode()

    return SOLVE.format(
        path=masked.path,
        python=PYTHON,
        workspace=WORKSPACE,
        placeholder=b64(masked.placeholder),
        body=b64(reference if reference.endswith("\n") or not reference else reference + "\n"),
    )


TEST_SH = """\
#!/bin/sh
# Harbor's verifier: splice the answer's region of the agent's file into the original package and run the paper's
# tests under the platform's harness (verify.py); it writes reward.txt, reward.json and the answer to /logs/verifier.
set -u
mkdir -p /logs/verifier
PYTHONPATH="$(dirname "$0")/rcb" exec /usr/bin/python3 -B -s "$(dirname "$0")/verify.py" 2>>/logs/verifier/stderr.txt
"""


def _environment(requirements: str, cache: Path, base_image: str) -> Environment:
    """The task environment's distributions, fetched as data for the base image's interpreter, and their pins."""
    wanted = requirement_lines(requirements_for_pip(requirements))
    if not wanted:
        return Environment((), ())
    probe = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "10001", base_image, PYTHON, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        raise ExportError(f"--base-image {base_image}: its interpreter did not start: {probe.stderr[-300:]}")
    fetcher = Fetcher(
        config=IndexConfig.host(),
        target=target_from_probe(probe.stdout),
        cache=Path(settings.SANDBOX_CACHE_DIR) / "dists",
        max_bytes=settings.SANDBOX_FETCH_MB << 20,
    )
    folder = cache / str(len(os.listdir(cache)) if cache.exists() else 0)
    folder.mkdir(parents=True)
    fetched = fetcher.fetch(wanted, folder)
    if fetched.missing:
        raise ExportError(f"no distribution fits the base image for {', '.join(fetched.missing)}")
    files = tuple(sorted(folder.iterdir()))
    return Environment(files, tuple(_pin(path.name) for path in files))


def _pinned(image: str) -> str:
    """The image by its registry digest when it has one (Harbor's unpinned-image rule); a locally built base image
    (the sandbox base, made without a registry) has none and is named as given."""
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", image], capture_output=True, text=True
    )
    if inspected.returncode != 0:
        raise ExportError(f"--base-image {image}: no such image on this engine ({inspected.stderr.strip()[-200:]})")
    digests = json.loads(inspected.stdout or "null") or []
    return digests[0] if "@" not in image and digests else image


def _pin(filename: str) -> str:
    name, version = parse_wheel_filename(filename)[:2] if filename.endswith(".whl") else parse_sdist_filename(filename)
    return f"{canonicalize_name(name)}=={version}"
