"""A heavy problem set in the task format (tests that import torch, numpy and scipy on the CPU, a spread of test
durations) evaluated with the `reference` model through the whole platform: import_pset into a fresh database, real
Celery workers on bwrap or docker, a run started by the platform's own service, scored; against the naive baseline
measured in the same script run (sequential, a fresh copy of the task's files and a fresh interpreter per item, no
sandbox, no platform).

What it does, in order:
1. A fresh database (PostgreSQL `rcb_benchpipe`, dropped and created, as in production, so one run of this script at
   a time; or `--database sqlite`) and a broker of its own (a Redis database claimed as the test fixtures claim
   theirs, or `--broker filesystem`).
2. The environment (numpy, scipy, torch==2.13.0; one shared requirements file, as the published set has one shared
   environment) is built before anything is timed, for the chosen backend and for bwrap (the naive baseline uses
   the bwrap environment's venv python, outside any sandbox). The workload of 64x64 tanh-matmul steps is calibrated
   with that python, single-threaded, so each paper's test body lasts its drawn duration.
3. The problem set: `--papers` papers sharing `--snippets` snippets, nested up to depth 3 (each stage function of
   a model.py is one snippet, holding a nested one that may hold another), a model_ref.py the tests compare with,
   a context file and a LaTeX paper. Each paper's test checks every stage against the reference, then runs the
   paper's workload and prints `RCB-OWN <seconds>`: the time of its own body, without interpreter start and
   imports. Durations per paper (the test runs whole for each of its items): most under 0.5 s, a tenth about
   1 s, a tenth 2-5 s. Imported with `manage.py import_pset --publish`.
4. `--workers` Celery workers (`celery -A config worker --concurrency N`, N from `--concurrency`, default 1;
   queues sandbox and default, as tests/conftest.py starts them; DEBUG off as in production, `--debug` on), then
   `services.run_start` of the reference model (as the site and the API do); the wall time is from that call until
   the run is completed. The measured run is the second one: the first after an import makes each task's test
   manifest from its reference on first use (a sandbox run per task, once for good), and its wall is printed apart;
   `--fresh` measures that first run instead.
5. `--validate`: one generated paper (a short-test one) submitted as a submission by an author and validated by the
   same workers (submissions' `revision_validate` task): its wall time and number of test runs.
6. The naive baseline over the same items, in the same order.

`--replay without` measures the run with no sealed replay: before it, every task's stored recording is replaced by
one whose snippets are all unsealed, so each item is judged by its tests alone (as an unsealed snippet's is), every
other step unchanged. `--replay both` runs the set without the replay, restores the recordings, then measures the
run with it (the full report), and prints the two walls and their ratio, measured under the same load.

Where the time goes, per item (the sums of every item of the run, divided by the number of items):
- own: the tests' own body time (RCB-OWN, from the outcome's stdout).
- in the sandbox beyond own: Outcome.duration (what the backend timed: bwrap from the sandboxed process's or the
  fork's start to its exit; docker from the container's start to its exit, so creating, attaching and removing
  the container count as outside) minus own: interpreter start, imports, harness, fork.
- outside the sandbox, in the task: the worker's busy time per item (Celery's own "Task ... succeeded in Xs",
  parsed from each worker's log) minus Outcome.duration: loading the item, building the prompt, splicing and the
  audit, storing the outcome, the end-of-run check, and the scoring of the last item.
- outside the sandbox, between tasks: workers x wall minus the busy time: the broker, acknowledgement and prefetch,
  and the workers' idle time at the end while the last items run on the other one.

`--set heterogeneous` (issue 19): each paper's test also imports two of REAL_MODULES (modules of the libraries the
environment holds: scipy's subpackages, sympy, networkx, mpmath, jinja2, torch's) and calls one real function of each
before its timed body, so the papers' import graphs genuinely differ as a published set's do; the run reports the fork
servers' starts with their reasons, permanent cold fall-backs and the items that ran warm and cold (Outcome.forked).
Items are dispatched as the platform queues them (paper after paper); two workers take them in turn.

The fork server's mode is read from the worker logs ("fork server for environment ...: preloaded" when items fork
from it, "the fork server is off" when it fell back; no message: it was never on).
The machine is shared: the load average is printed at the start and the end, and only ratios measured in the same
run are comparable.

Run: .venv/bin/python scripts/bench_pipeline.py [--papers 20] [--snippets 212] [--workers 2] [--backend bwrap]
     [--forkserver on|off] [--set homogeneous|heterogeneous] [--validate] [--database postgres|sqlite]
     [--broker redis|filesystem] [--fresh] [--debug] [--replay with|without|both [--rounds N]]
     [--postgres-url URL] [--redis URL] [--no-naive]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_django import OWN, THREADS_ONE, naive  # noqa: E402
from scripts.redis_claim import redis_database_claimed  # noqa: E402

REQUIREMENTS = "numpy\nscipy\ntorch==2.13.0\n"
POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/rcb_benchpipe"
VERSION = "bench-pipeline-1.0.0"
TASK_DONE = re.compile(r"Task ([\w.]+)\[[0-9a-f-]+\] succeeded in ([0-9.]+)s")
CALIBRATE = """import time, torch
torch.set_num_threads(1)
x, w = torch.randn(64, 64), torch.randn(2, 64, 64) / 8
w0 = w[0]
best = 0.0
for _ in range(6):  # the best of several rounds: other work on the machine only ever slows a round down
    start = time.perf_counter()
    for _ in range(4000):
        x = torch.tanh(x @ w0)
    best = max(best, 4000 / (time.perf_counter() - start))
print(best)
"""

# What a stage of a paper's model does, for informative snippet names (FORMAT.md 3: the name is the only hint).
STAGES = [
    ("gated residual update", "input gate", "gate sharpening"),
    ("normalised attention mixing", "score temperature", "score clipping"),
    ("momentum-damped projection", "damping factor", "damping floor"),
    ("spectral feature scaling", "scale estimate", "scale smoothing"),
    ("contrastive similarity head", "similarity logits", "logit margin"),
    ("low-rank adapter update", "adapter gate", "gate warm-up"),
]


# ---------------------------------------------------------------------------------------------------------------
# The problem set


@dataclass(frozen=True)
class PaperPlan:
    paper_id: str
    snippets: int
    seconds: float  # the test body's own time, drawn
    uses_scipy: bool
    real: tuple[int, ...] = ()  # --set heterogeneous: the REAL_MODULES this paper's test imports and calls


# --set heterogeneous: modules of the libraries the environment holds (scipy's subpackages, sympy, networkx,
# mpmath, jinja2, torch's), each with one real call, so papers' import graphs genuinely differ (scipy.signal
# imports most of scipy, sympy 2 s of modules, torch.testing.assert_close imports sympy on its first call).
REAL_MODULES = [
    ("scipy.signal", "scipy.signal.savgol_filter(np.linspace(0, 1, 21), 5, 2).sum()"),
    ("scipy.sparse.csgraph", "scipy.sparse.csgraph.shortest_path(np.ones((4, 4))).sum()"),
    ("scipy.optimize", "scipy.optimize.minimize_scalar(lambda v: (v - 1) ** 2).x"),
    ("scipy.stats", "scipy.stats.norm.cdf(0.5)"),
    ("scipy.interpolate", "scipy.interpolate.CubicSpline([0, 1, 2], [0, 1, 0])(0.5)"),
    ("scipy.integrate", "scipy.integrate.quad(np.sin, 0, 1)[0]"),
    ("scipy.spatial", "scipy.spatial.KDTree(np.eye(3)).query([0, 0, 1])[0]"),
    ("scipy.ndimage", "scipy.ndimage.gaussian_filter(np.eye(5), 1).sum()"),
    ("scipy.fft", "abs(scipy.fft.fft(np.ones(8))[0])"),
    ("scipy.special", "scipy.special.expit(0.3)"),
    ("sympy", "sympy.sqrt(2).evalf()"),
    ("networkx", "len(networkx.cycle_basis(networkx.cycle_graph(5)))"),
    ("mpmath", "mpmath.quad(mpmath.sin, [0, 1])"),
    ("torch.distributions", "torch.distributions.Normal(0.0, 1.0).log_prob(torch.tensor(0.0))"),
    ("torch.nn.functional", "torch.nn.functional.softplus(torch.tensor(0.5))"),
    ("torch.testing", "torch.testing.assert_close(torch.ones(2), torch.ones(2)) or 1.0"),
    ("jinja2", "len(jinja2.Template('{{ x }}').render(x=1))"),
    ("scipy.linalg", "scipy.linalg.norm(np.eye(2))"),
    ("numpy.polynomial", "numpy.polynomial.Polynomial.fit([0, 1, 2], [0, 1, 4], 2).degree()"),
    ("torch.fft", "torch.fft.rfft(torch.ones(8)).abs()[0]"),
]


def papers_plan(papers: int, snippets: int, seed: int = 14, *, heterogeneous: bool = False) -> list[PaperPlan]:
    """Snippets spread over the papers; per paper a test duration: a tenth 2-5 s, a tenth ~1 s, the rest < 0.5 s."""
    rng = random.Random(seed)
    long_ones = max(1, round(papers / 10)) if papers >= 3 else 0
    middle = round(papers / 10)
    seconds = (
        [rng.uniform(2.0, 5.0) for _ in range(long_ones)]
        + [rng.uniform(0.6, 1.2) for _ in range(middle)]
        + [rng.uniform(0.05, 0.45) for _ in range(papers - long_ones - middle)]
    )
    rng.shuffle(seconds)
    counts = [snippets // papers + (1 if p < snippets % papers else 0) for p in range(papers)]
    pool = len(REAL_MODULES)
    return [
        PaperPlan(
            f"heavy-{p:02d}",
            counts[p],
            seconds[p],
            p % 3 == 1,
            tuple(dict.fromkeys([p % pool, (7 * p + 3) % pool])) if heterogeneous else (),
        )
        for p in range(papers)
    ]


def _groups(count: int) -> list[int]:
    """Sizes of the nested groups of one file (3: depth 3, 2: depth 2, 1: flat) adding up to `count`."""
    sizes: list[int] = []
    pattern = [3, 2, 1, 2, 3, 2]
    while sum(sizes) < count:
        sizes.append(min(pattern[len(sizes) % len(pattern)], count - sum(sizes)))
    return sizes


def _stage(paper: int, index: int, size: int, uses_scipy: bool) -> str:
    """One stage function whose body is a snippet, holding a nested one (size >= 2) that holds another (size 3)."""
    outer, inner, innermost = (f"{name} of stage {index}" for name in STAGES[(paper + index) % len(STAGES)])
    a, b, c, d = 0.3 + 0.05 * index, 0.1 * (paper % 5), 0.05 + 0.01 * index, 0.5 + 0.02 * paper
    scipy_factor = f" * float(special.expit({0.2 + 0.1 * index:.2f}))" if uses_scipy else ""
    ind = " " * 4
    lines = [f"def stage_{index}(x, w):", f'{ind}# <paper2code name="{outer}">']
    if size >= 2:
        lines.append(f'{ind}# <paper2code name="{inner}">')
    lines.append(f"{ind}gate_{index} = torch.sigmoid(x @ w[{index % 2}] * {a:.2f} + {b:.2f})")
    if size == 3:
        lines += [
            f'{ind}# <paper2code name="{innermost}">',
            f"{ind}gate_{index} = gate_{index} * gate_{index} + {c:.2f}",
            f'{ind}# </paper2code name="{innermost}">',
        ]
    if size >= 2:
        lines.append(f'{ind}# </paper2code name="{inner}">')
    lines += [
        f"{ind}hidden_{index} = torch.tanh(x @ w[{(index + 1) % 2}]) * gate_{index}{scipy_factor}",
        f"{ind}out_{index} = x + {d:.2f} * MIX * hidden_{index}",
        f'{ind}# </paper2code name="{outer}">',
        f"{ind}return out_{index}",
        "",
        "",
    ]
    return "\n".join(lines)


def _model(paper: int, plan: PaperPlan) -> tuple[str, list[str]]:
    head = (
        "import torch\n" + ("from scipy import special\n" if plan.uses_scipy else "") + "\nfrom utils import MIX\n\n\n"
    )
    sizes = _groups(plan.snippets)
    return head + "".join(_stage(paper, i, size, plan.uses_scipy) for i, size in enumerate(sizes)), [
        f"stage_{i}" for i in range(len(sizes))
    ]


TEST = '''"""Tests for {paper_id}: every stage matches the reference implementation, then the paper's workload runs."""

import time
import unittest

import numpy as np
import torch
{scipy_import}{real_imports}
import model
import model_ref

STAGES = {stages!r}
ITERATIONS = {iterations}


class TestStages(unittest.TestCase):
    def test_stages_match_the_reference_and_the_workload_runs(self):
{real_calls}        start = time.perf_counter()
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 64, generator=generator)
        w = torch.randn(2, 64, 64, generator=generator) / 8
        for name in STAGES:
            with self.subTest(stage=name):
                self.assertTrue(torch.allclose(getattr(model, name)(x, w), getattr(model_ref, name)(x, w)))
        y, w0 = x, w[0]
        for _ in range(ITERATIONS):
            y = torch.tanh(y @ w0)
        self.assertTrue(bool(torch.isfinite(y).all()))
        self.assertEqual(np.asarray(y.shape).tolist(), [64, 64])
{scipy_check}        print(f"RCB-OWN {{time.perf_counter() - start:.4f}}")


if __name__ == "__main__":
    unittest.main()
'''
SCIPY_CHECK = "        self.assertLess(float(scipy.linalg.norm(y.numpy())), 1e6)\n"


def _paper_text(paper_id: str, title: str, size: int) -> str:
    paragraph = (
        f"We study {title.lower()} ({paper_id}). Each stage applies a gated update "
        "$h_{t+1} = x_t + \\alpha\\,\\tanh(W x_t) \\odot \\sigma(\\beta W' x_t + b)$, where the gate is "
        "sharpened by squaring and the mixing weight $\\alpha$ is shared across stages. We show that the "
        "update is stable for small $\\alpha$ and report results on synthetic benchmarks.\n\n"
    )
    body = paragraph * max(1, size // len(paragraph))
    return (
        f"\\documentclass{{article}}\n\\title{{{title}}}\n\\begin{{document}}\n\\maketitle\n"
        f"\\section{{Method}}\n{body}\\end{{document}}\n"
    )


def pset_heavy_generate(root: Path, plans: list[PaperPlan], *, per_second: float, paper_bytes: int) -> None:
    """Write the set in the FORMAT.md layout; `per_second`: workload steps per second on one core."""
    entries = []
    for number, plan in enumerate(plans):
        folder = root / plan.paper_id
        folder.mkdir(parents=True, exist_ok=True)
        title = f"Heavy Stage Networks {number}: {STAGES[number % len(STAGES)][0].capitalize()}"
        source, stages = _model(number, plan)
        test = TEST.format(
            paper_id=plan.paper_id,
            stages=stages,
            iterations=max(1, int(plan.seconds * per_second)),
            scipy_import="import scipy.linalg\n" if plan.uses_scipy else "",
            scipy_check=SCIPY_CHECK if plan.uses_scipy else "",
            real_imports="".join(f"import {REAL_MODULES[i][0]}\n" for i in plan.real),
            real_calls="".join(
                f"        self.assertTrue(np.isfinite(float({REAL_MODULES[i][1]})))\n" for i in plan.real
            ),
        )
        files = {
            "paper2code_paper.tex": _paper_text(plan.paper_id, title, paper_bytes),
            "paper2code_test.py": test,
            "model.py": source,
            "model_ref.py": source,
            "utils.py": "# Shared constants of the stages.\nMIX = 1.0\n",
            "requirements.txt": REQUIREMENTS,
        }
        for path, text in files.items():
            (folder / path).write_text(text, encoding="utf-8")
        entries.append(
            {
                "id": plan.paper_id,
                "title": title,
                "arxiv_abs": f"https://example.org/fictional-papers/{plan.paper_id}",
                "arxiv_date": "2025-06-01",
                "arxiv_v1_date": "2025-05-01",
                "github_url": f"https://example.org/fictional-code/{plan.paper_id}",
                "first_commit_date": "2025-04-01",
                "last_commit_date": "2025-06-15",
                "venue": "BENCH2025",
                "annotated_file_paths": "model.py",
                "context_file_paths": ["utils.py"],
            }
        )
    (root / "papers.yaml").write_text(
        "# Generated by scripts/bench_pipeline.py; every paper is fictional.\n"
        + yaml.safe_dump(entries, sort_keys=False),
        encoding="utf-8",
    )


# ---------------------------------------------------------------------------------------------------------------
# The platform around it: database, broker, workers


def postgres_recreate(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def postgres_drop(url: str) -> None:
    import psycopg

    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


class Worker:
    """A real Celery worker process (its own process group), as tests/conftest.py's WorkerProcess starts one."""

    def __init__(
        self, number: int, env: dict[str, str], log: Path, queues: str = "sandbox,default", concurrency: int = 1
    ):
        celery = str(Path(sys.executable).with_name("celery"))
        self.hostname = f"bench{number}-{os.getpid()}@{os.uname().nodename}"
        self.log = log
        self.process = subprocess.Popen(
            [
                celery,
                "-A",
                "config",
                "worker",
                "--queues",
                queues,
                "--concurrency",
                str(concurrency),
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--hostname",
                self.hostname,
            ],
            cwd=REPO,
            env=env,
            stdout=log.open("a"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def ready(self) -> bool:
        if self.process.poll() is not None:
            sys.exit(f"worker {self.hostname} exited ({self.process.returncode}):\n{self.output()[-3000:]}")
        return " ready." in self.output()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def busy(self, task: str) -> list[float]:
        """Seconds of each finished `task` this worker ran, as Celery logs them."""
        return [float(s) for name, s in TASK_DONE.findall(self.output()) if name == task]

    def fork_starts(self) -> list[str]:
        """Why each of this worker's fork server starts happened ("first", "new imports: ...", ...)."""
        return re.findall(
            r"fork server for environment \w+ \([^)]*\): preloaded .*\(start \d+: ([^\n]*)\)$",
            self.output(),
            flags=re.M,
        )

    def fork_offs(self) -> list[str]:
        return re.findall(r"the fork server is off, every item starts cold: ([^\n]*)", self.output())

    def fork_mode(self) -> str:
        log = self.output()
        preloaded = re.findall(r"fork server for environment \w+(?: \([^)]*\))?: preloaded ([^\n]*)", log)
        off = re.findall(r"the fork server is off, every item starts cold: ([^\n]*)", log)
        if off:
            return f"COLD (fell back: {off[-1][:160]})"
        if preloaded:
            return f"fork server (preloaded {preloaded[-1][:120]})"
        return "cold (no fork server in this worker's log: SANDBOX_FORKSERVER off, or the backend has none)"


def platform_environment(args, tmp: Path, broker: str, database: str) -> dict[str, str]:
    """The settings this script and its workers share (the same database, storage, broker and sandbox cache)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_RESULT_BACKEND", "REDIS_URL")}
    env.update(
        {
            # As production runs its workers (DEBUG off: no log of every query), with secrets of their own; --debug
            # as `make run` does.
            "DEBUG": "true" if args.debug else "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "FIELD_ENCRYPTION_KEY": secrets.token_urlsafe(32),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": database,
            "CELERY_BROKER_URL": broker,
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
            "MEDIA_ROOT": str(tmp / "media"),
            "SANDBOX_BACKEND": args.backend,
            "SANDBOX_CACHE_DIR": str(args.cache),
            "SANDBOX_FORKSERVER": "true" if args.forkserver == "on" else "false",
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    return env


# ---------------------------------------------------------------------------------------------------------------
# Measurements


def environments_build(args) -> tuple[str, str]:
    """Build (or find built) the environment for the backend and for bwrap; the environment hash and the bwrap
    environment's python, which the naive baseline runs outside any sandbox."""
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import environment_hash
    from sandbox import backend_get

    requirements = requirements_vetted(REQUIREMENTS)
    env_hash = environment_hash(requirements)
    pythons = {}
    for name in dict.fromkeys([args.backend, "bwrap"]):
        backend = backend_get(name, cache_dir=args.cache)
        ok, why = backend.available()
        if not ok:
            sys.exit(f"the {name} backend is not available: {why}")
        start = time.monotonic()
        pythons[name] = backend.environment_build(env_hash=env_hash, requirements=requirements).python
        print(f"  environment {env_hash[:12]} on {name}: ready in {time.monotonic() - start:.0f} s", flush=True)
    return env_hash, pythons["bwrap"]


def run_wait(run_id: int, timeout: float, workers: list[Worker]) -> None:
    from evaluation.models import EvaluationRun

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = EvaluationRun.objects.filter(pk=run_id).values_list("status", flat=True).get()
        if status != EvaluationRun.Status.QUEUED and status != EvaluationRun.Status.RUNNING:
            if status != EvaluationRun.Status.COMPLETED:
                sys.exit(f"run {run_id} ended {status}")
            return
        for worker in workers:
            worker.ready()  # exits when a worker died
        time.sleep(0.1)
    sys.exit(f"run {run_id} did not finish within {timeout:.0f} s:\n{workers[0].output()[-3000:]}")


def naive_items(run) -> list[tuple[str, dict[str, bytes]]]:
    """Each item of the run as the naive baseline runs it: the task's files with the reference answer spliced."""
    from benchmarks.paper2code import splice
    from evaluation.models import Outcome
    from evaluation.taskfiles import task_annotated, task_files

    items = []
    for outcome in Outcome.objects.filter(run=run).select_related("snippet__task").order_by("pk"):
        snippet = outcome.snippet
        annotated = task_annotated(snippet.task, snippet.file_path)
        spliced = splice(annotated, annotated.snippets[snippet.position], snippet.reference_code)
        items.append(
            (snippet.task.test_entry_point, {**task_files(snippet.task), snippet.file_path: spliced.encode("utf-8")})
        )
    return items


def validation_measure(root: Path, plans: list[PaperPlan], workers: list[Worker]) -> dict:
    """Submit one generated paper (the first with a short test) as an author would and wait for its validation."""
    from django.conf import settings
    from django.contrib.auth.models import User

    from submissions import services
    from submissions.models import ValidationReport

    plan = next((p for p in plans if p.seconds < 0.5), plans[0])
    folder = root / plan.paper_id
    entry = next(e for e in yaml.safe_load((root / "papers.yaml").read_text()) if e["id"] == plan.paper_id)
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    author = User.objects.create_user(f"bench-author-{uuid.uuid4().hex[:8]}", email="author@example.org")
    metadata = {
        key: str(entry[key])
        for key in (
            "title",
            "venue",
            "arxiv_abs",
            "github_url",
            "arxiv_date",
            "arxiv_v1_date",
            "first_commit_date",
            "last_commit_date",
        )
    }
    values = {
        "metadata": {**metadata, "id": f"{plan.paper_id}-submitted"},
        "files": services.draft_files_store(files),
        "paper_path": "paper2code_paper.tex",
        "annotated_paths": ["model.py"],
        "context_paths": ["utils.py"],
        "source": {"kind": "archive", "name": f"{plan.paper_id}.zip"},
    }
    submission = services.draft_update(
        submission=services.submission_create(author=author), actor=author, values=values
    )
    busy_before = sum(len(w.busy("submissions.tasks.revision_validate")) for w in workers)
    start = time.monotonic()
    report_id = services.submission_submit(submission=submission, actor=author).report.pk
    deadline = start + 3600
    while ValidationReport.objects.filter(pk=report_id, status__in=["pending", "running"]).exists():
        if time.monotonic() > deadline:
            sys.exit("the validation did not finish within an hour")
        time.sleep(0.1)
    wall = time.monotonic() - start
    report = ValidationReport.objects.get(pk=report_id)
    checks = list(report.checks.order_by("position"))
    snippet_checks = [c for c in checks if c.key.startswith(("masked:", "noop:")) and c.status in ("passed", "failed")]
    reference = next(c for c in checks if c.key == "reference")
    runs = (settings.SUBMISSION_REFERENCE_RUNS if reference.status == "passed" else 0) + len(snippet_checks)
    while sum(len(w.busy("submissions.tasks.revision_validate")) for w in workers) == busy_before:
        time.sleep(0.1)  # the task logs its end just after the report is stored
    busy = [s for w in workers for s in w.busy("submissions.tasks.revision_validate")][-1]
    failed = [f"{c.key}: {c.status} {c.detail[:300]}" for c in checks if c.status != "passed"]
    return {
        "paper": plan.paper_id,
        "snippets": plan.snippets,
        "seconds": plan.seconds,
        "wall": wall,
        "busy": busy,
        "runs": runs,
        "status": report.status,
        "backend": report.sandbox_backend,
        "reference_s": reference.duration or 0.0,
        "snippet_checks_s": sum(c.duration or 0.0 for c in snippet_checks),
        "failed": failed,
    }


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--snippets", type=int, default=212, help="snippets of the whole set (spread over papers)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="Celery workers")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="each worker's --concurrency (its sandbox slots; the deployment's default WORKER_CONCURRENCY is 2)",
    )
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--forkserver", choices=["on", "off"], default="on", help="SANDBOX_FORKSERVER of the workers")
    parser.add_argument(
        "--set",
        choices=["homogeneous", "heterogeneous"],
        default="homogeneous",
        dest="kind",
        help="heterogeneous: each paper's test also imports and calls two of REAL_MODULES (scipy's "
        "subpackages, sympy, networkx, mpmath, jinja2, torch's), so import graphs differ",
    )
    parser.add_argument("--validate", action="store_true", help="also time one paper's submission validation")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="measure the first run after the import (each task's test manifest made from its reference on first "
        "use), not the run after it",
    )
    parser.add_argument(
        "--database",
        choices=["postgres", "sqlite"],
        default="postgres",
        help="postgres: --postgres-url (dropped and created); sqlite: in the temporary folder",
    )
    parser.add_argument(
        "--postgres-url", default=POSTGRES_URL, help=f"the database dropped and created (default {POSTGRES_URL})"
    )
    parser.add_argument(
        "--replay",
        choices=["with", "without", "both"],
        default="with",
        help="the sealed replay: with (as the platform judges), without (every snippet unsealed: the tests alone), "
        "both (a run without, then the measured run with it, and their ratio)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --replay both: this many pairs of runs (without, with), the last pair's second run the measured "
        "one; each pair's ratio and their median are printed, so a load that drifts between the halves of one pair "
        "does not decide the figure",
    )
    parser.add_argument(
        "--broker",
        choices=["redis", "filesystem"],
        default="redis",
        help="redis: a database of its own on the server of REDIS_URL (default 127.0.0.1:6379); "
        "filesystem: the embedded broker in the temporary folder",
    )
    parser.add_argument(
        "--redis",
        help="with --broker redis: this Redis database URL as the broker (emptied before), instead of one claimed",
    )
    parser.add_argument("--paper-kb", type=int, default=290, help="size of each paper's text (the published ~290)")
    parser.add_argument(
        "--steps-per-second",
        type=float,
        help="the workload's calibration (printed by an earlier run), so runs compare on equal work",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=REPO / "var" / "sandbox-bench",
        help="sandbox cache (environments are kept between runs)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the run")
    parser.add_argument(
        "--naive-from",
        type=float,
        nargs=2,
        metavar=("WALL", "OWN"),
        help="for quick comparisons only: skip the naive baseline and take its wall and own seconds from an earlier "
        "run with the same --steps-per-second (the reported ratios then are not of one run)",
    )
    parser.add_argument(
        "--no-naive",
        action="store_true",
        help="skip the naive baseline: the limit is then the run's own time (its tests' RCB-OWN, inflated by "
        "contention as the run is) over the cores, and no /naive ratio is known",
    )
    parser.add_argument(
        "--debug", action="store_true", help="workers with DEBUG on, as `make run` (default: off, as production)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, set) and database")
    args = parser.parse_args()
    if args.snippets < args.papers:
        parser.error("--snippets must be at least --papers")
    if args.rounds < 1 or (args.rounds > 1 and args.replay != "both"):
        parser.error("--rounds takes 1 or more, and more than 1 only with --replay both")
    if args.fresh and args.replay != "with":
        parser.error("--fresh measures the first run, which makes the recordings: use --replay with")
    args.cache = args.cache.resolve()
    return args


def broker_choose(args, claim: contextlib.ExitStack) -> str:
    """The broker's URL: the filesystem one, the Redis database `--redis` (emptied), or (no `--redis`, or `claim`) one
    claimed into `claim` as the test fixtures claim theirs."""
    if getattr(args, "broker", "redis") == "filesystem":
        return "filesystem://"
    if args.redis and args.redis != "claim":
        import redis

        redis.Redis.from_url(args.redis).flushdb()
        return args.redis
    return claim.enter_context(
        redis_database_claimed(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), wait_seconds=120, ttl_seconds=3 * 3600
        )
    )


def platform_up(args, tmp: Path, broker: str, database: str, **settings: str) -> dict[str, str]:
    """The platform a bench times, in this process: the database made anew (PostgreSQL) and migrated, the
    environment its workers get (`settings` added) set as this process' own, Django set up; returns that environment."""
    if database.startswith("postgres"):
        postgres_recreate(database)
    env = {**platform_environment(args, tmp, broker, database), **settings}
    os.environ.clear()
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def main() -> None:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still stop the workers and drop the database
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    load_start = load()
    print(f"load average (1, 5, 15 min) at the start: {load_start}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()  # the Redis database claimed, released in the `finally` below
    broker = broker_choose(args, claim)
    database = args.postgres_url if args.database == "postgres" else f"sqlite:///{tmp / 'db.sqlite3'}"
    workers: list[Worker] = []
    try:
        start = time.monotonic()
        env = platform_up(args, tmp, broker, database)
        from django.core.management import call_command
        from django.db import connections

        print(
            f"database: {args.database} ({database}); broker: {broker}; backend: {args.backend}, "
            f"SANDBOX_FORKSERVER={env['SANDBOX_FORKSERVER']}; made and migrated in {time.monotonic() - start:.0f} s",
            flush=True,
        )

        print("building the environments before timing ...", flush=True)
        env_hash, python = environments_build(args)
        per_second = args.steps_per_second or float(
            subprocess.run(
                [python, "-c", CALIBRATE], capture_output=True, text=True, check=True, env={**os.environ, **THREADS_ONE}
            ).stdout.strip()
        )
        plans = papers_plan(args.papers, args.snippets, heterogeneous=args.kind == "heterogeneous")
        root = tmp / "pset"
        pset_heavy_generate(root, plans, per_second=per_second, paper_bytes=args.paper_kb * 1000)
        start = time.monotonic()
        call_command("import_pset", str(root), version=VERSION, publish=True, verbosity=0)
        print(
            f"  set generated and imported in {time.monotonic() - start:.0f} s "
            f"(workload: {per_second:.0f} steps/s on one core, "
            f"{'given' if args.steps_per_second else 'calibrated'})",
            flush=True,
        )

        from django.db.models import Count

        from benchmarks.models import BenchmarkVersion, Snippet
        from evaluation import services
        from evaluation.models import EvaluationRun, ModelEntry, Outcome

        version = BenchmarkVersion.objects.get(name=VERSION)
        hashes = set(version.tasks.values_list("environment_hash", flat=True))
        if hashes != {env_hash}:
            sys.exit(f"the tasks' environments {sorted(hashes)} are not the one built ({env_hash})")
        depths: dict[int, int] = {}
        for depth in Snippet.objects.values_list("depth", flat=True):
            depths[depth] = depths.get(depth, 0) + 1
        own_planned = sum(p.seconds * p.snippets for p in plans)
        print(
            f"set: {len(plans)} papers, {sum(depths.values())} snippets (by depth: "
            f"{', '.join(f'{d}: {n}' for d, n in sorted(depths.items()))}); tests import torch and numpy "
            f"({sum(p.uses_scipy for p in plans)} papers also scipy); planned own time {own_planned:.0f} s; "
            f"test durations per paper: {sum(p.seconds < 0.5 for p in plans)} under 0.5 s, "
            f"{sum(0.5 <= p.seconds < 2 for p in plans)} about 1 s, "
            f"{sum(p.seconds >= 2 for p in plans)} of 2-5 s",
            flush=True,
        )

        connections.close_all()
        workers = [Worker(i, env, tmp / f"worker{i}.log", concurrency=args.concurrency) for i in range(args.workers)]
        workers_wait(workers)
        print(f"{args.workers} worker(s) ready; starting the reference run ...", flush=True)

        earlier = {w.hostname: 0 for w in workers}  # tasks of the first run, not this run's
        if not args.fresh:
            earlier = first_run(version, workers, timeout=args.timeout)
        without, earlier, pairs = replay_off(args, version, workers, earlier)
        start = time.monotonic()
        run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
        run_wait(run.pk, args.timeout, workers)
        wall = time.monotonic() - start
        run = EvaluationRun.objects.get(pk=run.pk)
        outcomes = list(
            Outcome.objects.filter(run=run)
            .order_by("pk")
            .values("status", "detail", "duration", "stdout_tail", "sandbox_backend", "worker", "snippet__task__paper")
        )
        bad = [o for o in outcomes if o["status"] != "passed"]
        own = [float(m.group(1)) for o in outcomes if (m := OWN.search(o["stdout_tail"]))]
        deadline = time.monotonic() + 30  # the last task logs its end just after the run is completed
        while (
            sum(len(w.busy("evaluation.tasks.item_evaluate")) for w in workers) < len(outcomes) + sum(earlier.values())
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        busy = {w.hostname: w.busy("evaluation.tasks.item_evaluate")[earlier[w.hostname] :] for w in workers}
        modes = {w.hostname: w.fork_mode() for w in workers}
        starts = {w.hostname: w.fork_starts() for w in workers}
        offs = {w.hostname: w.fork_offs() for w in workers}
        forked = dict(Outcome.objects.filter(run=run).values_list("forked").annotate(n=Count("pk")))

        validation = validation_measure(root, plans, workers) if args.validate else None
        for worker in workers:
            worker.stop()

        print(f"run {run.pk} completed: {len(outcomes)} items, {len(outcomes) - len(bad)} passed", flush=True)
        naive_wall, naive_own = naive_measure(args, python, run, own)
        load_end = load()

        items = len(outcomes)
        sandbox = sum(o["duration"] or 0.0 for o in outcomes)
        busy_total = sum(sum(b) for b in busy.values())
        busy_count = sum(len(b) for b in busy.values())
        # Each worker logs its tasks in the order it stored their outcomes: paired, the per-item spread (the first
        # item of a worker also starts its fork server, which Outcome.duration does not count).
        outside = sorted(
            b - (o["duration"] or 0.0)
            for w in workers
            for b, o in zip(busy[w.hostname], [o for o in outcomes if o["worker"] == w.hostname], strict=False)
        )
        # The same pairs split by whether the item is its worker's first of a paper (the task's files and the
        # lazy imports of its tests are prepared once per paper and worker) or a later one.
        firsts, laters = outside_by_paper_order(workers, busy, outcomes)
        slots = args.workers * args.concurrency
        cores = min(slots, os.cpu_count() or slots)
        limit = sum(naive_own) / cores
        print()
        print(
            f"load average (1, 5, 15 min): at the start {load_start}, at the end {load_end} "
            "(other work on the machine inflates every row alike)"
        )
        print(
            f"backend {args.backend}, {args.workers} worker(s) of concurrency {args.concurrency} on "
            f"{os.cpu_count()} cores, "
            f"{args.database} + {args.broker} broker; modes:"
        )
        fork_modes_print(modes, starts, offs, busy)
        print(
            f"set: {args.kind}; items warm (forked) {forked.get(True, 0)}, cold {forked.get(False, 0)}"
            f"{', no fork server ' + str(forked[None]) if forked.get(None) else ''}"
        )
        if bad:
            print(f"!! {len(bad)} item(s) did not pass, e.g. {bad[0]['status']}: {bad[0]['detail'][:500]}")
        if len(own) != items:
            print(f"!! {items - len(own)} item(s) printed no RCB-OWN")
        if busy_count != items:
            print(f"!! the worker logs show {busy_count} finished item tasks for {items} items")
        print(
            f"items: {items}; the tests' own time: {sum(own):.1f} s in the run, {sum(naive_own):.1f} s in the naive "
            f"baseline; the limit: {limit:.1f} s (naive own time / {cores} cores)"
        )
        print(
            f"the limit from the run's own time instead: {sum(own) / cores:.1f} s (own time in parallel, inflated by "
            f"contention); the run's wall against it: {wall / (sum(own) / cores):.2f}x"
        )
        print(
            f"own time per item: {sum(x < 0.5 for x in own)} under 0.5 s, {sum(0.5 <= x < 2 for x in own)} of "
            f"0.5-2 s, {sum(x >= 2 for x in own)} of 2 s or more (longest {max(own, default=0):.1f} s)"
        )
        print(f"{'':44} {'wall s':>8} {'/limit':>7} {'/naive':>7}")
        print(
            f"{'platform run (' + args.backend + ', SANDBOX_FORKSERVER ' + args.forkserver + ')':44} {wall:8.1f} "
            f"{wall / limit:6.2f}x {wall / naive_wall:6.2f}x"
        )
        print(f"{'naive baseline':44} {naive_wall:8.1f} {naive_wall / limit:6.2f}x {1:6.2f}x")
        replay_print(args.replay, wall=wall, without=without, limit=limit, naive_wall=naive_wall, pairs=pairs)
        print(
            f"throughput: {items / wall:.2f} items/s in the run; the limit {items / limit:.2f} items/s "
            f"(items / (naive own time / {cores} cores)): {limit / wall:.0%} of it"
        )
        print("per item, in the run (ms):")
        print(f"  own (the test's body){'':22} {1000 * sum(own) / items:8.1f}")
        print(
            f"  in the sandbox beyond own{'':18} {1000 * (sandbox - sum(own)) / items:8.1f}  "
            "(Outcome.duration - own: start, imports, harness)"
        )
        print(
            f"  outside the sandbox, in the task{'':11} {1000 * (busy_total - sandbox) / items:8.1f}  "
            "(worker busy - Outcome.duration)"
        )
        if outside and args.concurrency == 1:  # with more slots a worker's log and outcomes interleave: no pairs
            outside_print(outside, firsts, laters)
        print(
            f"  outside the sandbox, between tasks{'':9} {1000 * (slots * wall - busy_total) / items:8.1f}  "
            f"({slots} slots x wall - worker busy: broker, ack, idle at the end)"
        )
        print(
            f"  naive: wall - own per item{'':17} {1000 * (naive_wall - sum(naive_own)) / items:8.1f}  "
            "(interpreter start, imports, the copy)"
        )
        if run.started_at is not None and run.finished_at is not None:
            print(
                f"run timestamps: started -> finished {(run.finished_at - run.started_at).total_seconds():.1f} s "
                f"(the script's wall includes dispatch and the last poll)"
            )
        if validation:
            validation_print(validation)
        connections.close_all()
    finally:
        cleanup(args, workers, claim, database, tmp)


def naive_measure(args, python: str, run, own: list[float]) -> tuple[float, list[float]]:
    """The naive baseline's wall and own time per item: measured, given (--naive-from), or none (--no-naive: the
    run's own time stands for the tests' own time, and the naive wall is unknown)."""
    if args.naive_from:
        print(f"!! no naive baseline run: its wall and own time are from --naive-from {args.naive_from}")
        return args.naive_from[0], [args.naive_from[1]]
    if args.no_naive:
        print("!! no naive baseline run (--no-naive): the limit is the run's own time (RCB-OWN) over the cores")
        return float("nan"), own
    print("naive baseline (sequential, fresh copy and interpreter per item, no sandbox) ...", flush=True)
    return naive(python, naive_items(run))


def workers_wait(workers: list[Worker]) -> None:
    """Wait for every worker to start (two minutes at most)."""
    deadline = time.monotonic() + 120
    while not all(w.ready() for w in workers):
        if time.monotonic() > deadline:
            sys.exit(f"the workers did not start:\n{workers[0].output()[-3000:]}")
        time.sleep(0.2)


def first_run(version, workers: list[Worker], *, timeout: float) -> dict[str, int]:
    """Run the set once before the measured run; each worker's finished item tasks by then, by hostname."""
    # A set imported without validation has no test manifests yet: each task's is made from its reference,
    # in the sandbox, on first use and stored. The first run pays that once per task (and per worker racing
    # on it); the measured run is the next, as the "second run, environments built".
    _, earlier = run_timed(
        version, workers, timeout=timeout, label="after the import (test manifests made on first use)"
    )
    return earlier


def replay_off(
    args, version, workers: list[Worker], earlier: dict[str, int]
) -> tuple[float | None, dict[str, int], list[tuple[float, float]]]:
    """--replay without: every snippet unsealed for the measured run; both: a run without first (its wall), then
    the recordings restored for the measured run; with --rounds N, N-1 whole pairs (without, with) before that one,
    their walls returned as pairs."""
    if args.replay == "with":
        return None, earlier, []
    saved = recordings_unsealed(version)
    print(f"the replay is off: {sealed_count(saved)} sealed snippet(s) unsealed", flush=True)
    if args.replay == "without":
        return None, earlier, []
    pairs: list[tuple[float, float]] = []
    for round_ in range(1, args.rounds):
        off, earlier = run_timed(version, workers, timeout=args.timeout, label=f"round {round_}: without the replay")
        recordings_restore(saved)
        on, earlier = run_timed(version, workers, timeout=args.timeout, label=f"round {round_}: with the replay")
        pairs.append((off, on))
        print(f"  round {round_}: with / without {on / off:.2f}x", flush=True)
        saved = recordings_unsealed(version)
    without, earlier = run_timed(version, workers, timeout=args.timeout, label="without the replay")
    recordings_restore(saved)
    print(f"the replay is on again for the measured run ({sealed_count(saved)} sealed)", flush=True)
    return without, earlier, pairs


def replay_print(
    mode: str,
    *,
    wall: float,
    without: float | None,
    limit: float,
    naive_wall: float,
    pairs: Sequence[tuple[float, float]] = (),
) -> None:
    if without is not None:
        print(
            f"{'the same run without the sealed replay':44} {without:8.1f} {without / limit:6.2f}x "
            f"{without / naive_wall:6.2f}x   (with / without: {wall / without:.2f}x)"
        )
        if pairs:
            ratios = [on / off for off, on in pairs] + [wall / without]
            print(
                f"  with / without per pair, in order: {', '.join(f'{r:.2f}x' for r in ratios)}; "
                f"median {statistics.median(ratios):.2f}x"
            )
    elif mode == "without":
        print("  (the platform run above is without the sealed replay: every snippet unsealed)")


def recordings_unsealed(version) -> dict[int, dict]:
    """Store for every task of the release a recording whose snippets are all unsealed (its items are then judged
    by their tests alone, as an unsealed snippet's are); the recordings it replaced, by task, to restore."""
    from benchmarks.models import Task

    saved: dict[int, dict] = {}
    off = "bench_pipeline.py --replay without"
    for task in Task.objects.filter(versions=version, recording__isnull=False):
        recording: dict = task.recording or {}
        saved[task.pk] = recording
        unsealed = {
            **recording,
            "targets": {k: {**t, "sealed": False, "reason": off} for k, t in recording["targets"].items()},
            "snippets": {k: {**e, "sealed": False, "reason": off} for k, e in recording["snippets"].items()},
        }
        Task.objects.filter(pk=task.pk).update(recording=unsealed)
    return saved


def recordings_restore(saved: Mapping[int, dict]) -> None:
    from benchmarks.models import Task

    for pk, recording in saved.items():
        Task.objects.filter(pk=pk).update(recording=recording)


def sealed_count(recordings: Mapping[int, dict]) -> int:
    return sum(bool(e.get("sealed")) for r in recordings.values() for e in r.get("snippets", {}).values())


def run_timed(version, workers: list[Worker], *, timeout: float, label: str) -> tuple[float, dict[str, int]]:
    """Run the set once (not the measured run); its wall, and each worker's finished item tasks by then."""
    from evaluation import services
    from evaluation.models import ModelEntry, Outcome

    done = {w.hostname: len(w.busy("evaluation.tasks.item_evaluate")) for w in workers}
    start = time.monotonic()
    first = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    run_wait(first.pk, timeout, workers)
    first_wall = time.monotonic() - start
    items_first = Outcome.objects.filter(run=first).count()
    deadline = time.monotonic() + 30
    while (
        sum(len(w.busy("evaluation.tasks.item_evaluate")) for w in workers) < items_first + sum(done.values())
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    earlier = {w.hostname: len(w.busy("evaluation.tasks.item_evaluate")) for w in workers}
    print(f"run {first.pk} {label}: {first_wall:.1f} s; load {load()}", flush=True)
    return first_wall, earlier


def fork_modes_print(modes: dict, starts: dict, offs: dict, busy: dict) -> None:
    """Each worker's fork server mode, its starts by reason and its permanent cold fallbacks."""
    for hostname, mode in modes.items():
        print(f"  {hostname}: {mode} ({len(busy[hostname])} items)")
        reasons: dict[str, int] = {}
        for reason in starts[hostname]:
            reasons[reason.split(":", 1)[0]] = reasons.get(reason.split(":", 1)[0], 0) + 1
        print(
            f"    fork server starts: {len(starts[hostname])} ("
            f"{', '.join(f'{k} {v}' for k, v in reasons.items()) or 'none'}); permanent cold fallbacks: "
            f"{len(offs[hostname])}{' (' + offs[hostname][-1][:120] + ')' if offs[hostname] else ''}"
        )


def outside_by_paper_order(
    workers: list[Worker], busy: dict, outcomes: Sequence[Mapping[str, Any]]
) -> tuple[list[float], list[float]]:
    """Seconds outside the sandbox per item, split by whether the item is its worker's first of a paper or later."""
    firsts: list[float] = []
    laters: list[float] = []
    for w in workers:
        seen: set = set()
        mine = [o for o in outcomes if o["worker"] == w.hostname]
        for b, o in zip(busy[w.hostname], mine, strict=False):
            paper = o["snippet__task__paper"]
            (laters if paper in seen else firsts).append(b - (o["duration"] or 0.0))
            seen.add(paper)
    return firsts, laters


def outside_print(outside: list[float], firsts: list[float], laters: list[float]) -> None:
    print(
        f"    per item: median {1000 * outside[len(outside) // 2]:.1f}, 90th percentile "
        f"{1000 * outside[int(len(outside) * 0.9)]:.1f}, max {1000 * outside[-1]:.1f}"
    )
    for label, part in (("a worker's first of a paper", firsts), ("the paper's later items", laters)):
        if part:
            print(
                f"    {label}: {len(part)} items, median {1000 * statistics.median(part):.1f}, total {sum(part):.1f} s"
            )


def validation_print(v: dict) -> None:
    print(
        f"validation of {v['paper']} as a submission ({v['snippets']} snippets, test body "
        f"{v['seconds']:.2f} s, {v['backend']}): {v['status']} in {v['wall']:.1f} s wall "
        f"(task {v['busy']:.1f} s), {v['runs']} test runs ({v['wall'] / max(1, v['runs']):.2f} s each; "
        f"reference check {v['reference_s']:.1f} s, snippet checks {v['snippet_checks_s']:.1f} s)"
    )
    for line in v["failed"]:
        print(f"  !! {line}")


def cleanup(args, workers: list[Worker], claim: contextlib.ExitStack, database: str, tmp: Path) -> None:
    """Stop the workers, release the Redis database claimed, and (unless --keep) drop the database and the folder."""
    for worker in workers:
        worker.stop()
    claim.close()
    if args.keep:
        print(f"kept: {tmp}, {database}")
        return
    if database.startswith("postgres"):
        with contextlib.suppress(Exception):  # Django may not be set up yet
            from django.db import connections

            connections.close_all()
        postgres_drop(database)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
