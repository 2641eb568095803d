"""Run one answer for one demo snippet: first plainly (python paper2code_test.py, no guard), then through the
platform's executor (evaluation.executor.answer_test) on bwrap, warm (fork server) and/or cold.

usage: python review/attack.py TASK "SNIPPET NAME" ANSWER_FILE [--modes warm,cold] [--plain-only]
ANSWER_FILE holds the code lines exactly as spliced (indentation included), or a ```python block.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcb_review18")
os.environ.setdefault("VAR_DIR", str(REPO / "var"))

DEMO = REPO / "benchmarks" / "demo"
CACHE = Path(os.environ.get("REVIEW_CACHE", "/tmp/rcb-review18-cache"))
TASKS = {
    "dampnest": ("optimizer.py", ["optimizer_ref.py"], "numpy"),
    "topk-attention-pool": ("src/pooling.py", ["src/pooling_ref.py"], "numpy"),
    "trimmed-infonce": ("contrastive.py", ["contrastive_ref.py"], ""),
}


def answer_code(text: str) -> str:
    if "```python\n" in text:
        from benchmarks.paper2code.extract import extract_code
        return extract_code(text)
    return text


def task_files(task: str) -> dict[str, bytes]:
    folder = DEMO / task
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def plain_run(task: str, spliced_path: str, spliced: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(DEMO / task, tmp, dirs_exist_ok=True)
        Path(tmp, spliced_path).write_text(spliced)
        python = os.environ.get("PLAIN_PYTHON", "/work/main/.venv/bin/python")
        proc = subprocess.run([python, "paper2code_test.py"], cwd=tmp, capture_output=True, text=True, timeout=120)
        return proc.returncode, (proc.stdout + proc.stderr)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("snippet")
    parser.add_argument("answer")
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument("--plain-only", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    import django
    django.setup()
    from benchmarks.paper2code import parse, splice
    from evaluation.audit import answer_audit

    annotated_path, refs, requirements = TASKS[args.task]
    files = task_files(args.task)
    annotated = parse(files[annotated_path].decode(), annotated_path)
    marked = annotated.snippet(args.snippet)
    position = annotated.snippets.index(marked)
    code = answer_code(Path(args.answer).read_text())
    spliced = splice(annotated, marked, code)
    code_exit, output = plain_run(args.task, annotated_path, spliced)
    tail = output.strip().splitlines()[-3:]
    print(f"PLAIN (no guard): exit {code_exit}: {' | '.join(tail)}")
    if args.verbose:
        print(output[-3000:])
    if args.plain_only:
        return

    from evaluation import executor
    from evaluation.sandbox.bwrap import BwrapBackend
    from benchmarks.services import environment_hash
    from benchmarks.paper2code.requirements import requirements_vetted

    hidden = ["paper2code_test.py", *refs]
    reqs = requirements_vetted(requirements) if requirements else ""
    env_hash = environment_hash(reqs)
    for mode in args.modes.split(","):
        backend = BwrapBackend(CACHE, forkserver=(mode == "warm"))
        environment = backend.environment_build(env_hash=env_hash, requirements=reqs)
        session = backend.session_open(environment)
        try:
            manifest = executor.reference_manifest(session=session, files=files, test_entry_point="paper2code_test.py")
            run = executor.answer_test(session=session, files=files, annotated=annotated, position=position, code=code,
                                       test_entry_point="paper2code_test.py", hidden_files=hidden, manifest=manifest)
        finally:
            session.close()
        v = run.verdict
        print(f"PLATFORM bwrap {mode}: status={v.status} category={v.category} detail={v.detail[:400]!r}")
        for f in v.findings:
            print(f"   finding: {json.dumps(f)[:300]}")
        if args.verbose or v.status != "passed":
            for row in v.tests:
                if not row.get("passed"):
                    print(f"   test: {row['id']} {row['outcome']} {row.get('problem', '')[:200]}")
        if args.verbose and run.result is not None:
            print(run.result.stdout[-2000:], run.result.stderr[-2000:])


if __name__ == "__main__":
    main()
