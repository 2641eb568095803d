"""How long a newcomer waits for the first page: `make run` in a fresh clone, timed to the first answered page.

    python3 scripts/time_first_page.py [--source .] [--dest /tmp/fresh-clone] [MAKE_VAR=VALUE ...]
    python3 scripts/time_first_page.py --install-only --installer pip|uv [--no-cache]

The first form clones `--source` (its committed HEAD) into `--dest` (removed first), runs `make run` there with none
of the service settings (no DATABASE_URL, REDIS_URL, broker: the SQLite and embedded-broker path the README
promises) and splits the wait by the commands make echoes:

    install         start -> make echoes `manage.py migrate`
    migrate+import  migrate -> the next command (the demo's scoring before its server, or the server itself)
    scoring         (only where demo_populate is its own command) demo_populate -> scripts/run.sh
    first answer    scripts/run.sh -> `/` answers 200
    demo scored     `/` answers without its "demo runs are scoring" notice (where the page has one)

The second form times only the install, in a fresh virtualenv in the clone, with pip or with uv (uv installed into
that virtualenv by pip first, as a Makefile that adopts it would; its own time is reported apart). `--no-cache`
leaves out the installer's cache, as on a machine that never installed these packages.

Standard library only: it runs before any virtualenv exists. It stops `make run` (its whole process group) when done.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

SERVICE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "VAR_DIR")
SCORING_MARK = 'id="release-scoring"'  # templates/benchmarks/home.html's notice while the release's own runs score
DEADLINE = 900.0
# The commands make echoes that start each phase: the first of a name counts (`demo_start` runs migrate, the import
# and demo_populate --background in one process; before it, each was its own command).
MARKS = (
    ("migrate", "manage.py migrate"),
    ("migrate", "manage.py demo_start"),
    ("populate", "manage.py demo_populate"),
    ("serve", "run.sh"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clone(source: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)


def fresh_env(*, no_cache: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES and not k.startswith("VIRTUAL_ENV")}
    if no_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
        env["UV_NO_CACHE"] = "1"
    return env


def page(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


def time_make_run(dest: Path, make_vars: list[str], *, no_cache: bool) -> dict[str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    log = (dest / "make-run.log").open("w")
    start = time.monotonic()
    marks: dict[str, float] = {}
    process = subprocess.Popen(
        ["make", "run", f"HOST=127.0.0.1:{port}", *make_vars],
        cwd=dest,
        env=fresh_env(no_cache=no_cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            now = time.monotonic() - start
            log.write(f"{now:7.1f} {line}")
            log.flush()
            for name, needle in MARKS:
                if needle in line and name not in marks:
                    marks[name] = now

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while time.monotonic() - start < DEADLINE and process.poll() is None:
            body = page(url) if "serve" in marks else None
            if body is not None:
                now = time.monotonic() - start
                marks.setdefault("answer", now)
                if SCORING_MARK not in body:
                    marks["scored"] = now
                    break
            time.sleep(0.25)
        if "answer" not in marks:
            raise SystemExit(f"no page within {DEADLINE:.0f} s (make exited {process.poll()}); see {log.name}")
        if "scored" not in marks:
            raise SystemExit(f"the demo was still scoring after {DEADLINE:.0f} s; see {log.name}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        # make exits at once; a worker still in its warm shutdown (an environment build) would outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()
    return marks


def report_make_run(marks: dict[str, float]) -> None:
    after_import = marks.get("populate", marks["serve"])
    rows = [
        ("install", 0.0, marks["migrate"]),
        ("migrate+import", marks["migrate"], after_import),
    ]
    if "populate" in marks:
        rows.append(("demo_populate (before serving)", marks["populate"], marks["serve"]))
    rows += [
        ("first answer (server start)", marks["serve"], marks["answer"]),
        ("total to first page", 0.0, marks["answer"]),
        ("after the install", marks["migrate"], marks["answer"]),
        ("demo scored (home notice gone)", 0.0, marks["scored"]),
    ]
    for name, begin, end in rows:
        print(f"{name:32} {end - begin:7.1f} s")
    print(f"{'load average (1 min) at the end':32} {os.getloadavg()[0]:7.1f}  (2 cores: above 2, steps wait for CPU)")


def time_install(dest: Path, installer: str, *, no_cache: bool) -> None:
    env = fresh_env(no_cache=no_cache)
    venv = Path(tempfile.mkdtemp(prefix="venv-", dir=dest))

    def timed(name: str, command: list[str]) -> None:
        begin = time.monotonic()
        subprocess.run(command, cwd=dest, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"{name:32} {time.monotonic() - begin:7.1f} s")

    timed("venv", [sys.executable, "-m", "venv", str(venv)])
    if installer == "pip":
        timed("pip upgrade pip", [str(venv / "bin/pip"), "install", "--quiet", "--upgrade", "pip"])
        timed("pip install -e .[test]", [str(venv / "bin/pip"), "install", "--quiet", "-e", ".[test]"])
    else:
        timed("pip install uv", [str(venv / "bin/pip"), "install", "--quiet", "uv"])
        command = [str(venv / "bin/uv"), "pip", "install", "--quiet", "--python", str(venv / "bin/python")]
        timed("uv pip install -e .[test]", [*command, "-e", ".[test]"])
    shutil.rmtree(venv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--dest", type=Path, default=Path(tempfile.gettempdir()) / "fresh-clone")
    parser.add_argument("--install-only", action="store_true")
    parser.add_argument("--installer", choices=("pip", "uv"), default="pip")
    parser.add_argument("--no-cache", action="store_true", help="the installers' caches left out")
    parser.add_argument("--keep", action="store_true", help="reuse --dest as it is (no fresh clone)")
    parser.add_argument("make_vars", nargs="*", help="MAKE_VAR=VALUE passed to `make run`")
    args = parser.parse_args()
    if not args.keep:
        clone(args.source, args.dest)
    if args.install_only:
        time_install(args.dest, args.installer, no_cache=args.no_cache)
    else:
        report_make_run(time_make_run(args.dest, args.make_vars, no_cache=args.no_cache))


if __name__ == "__main__":
    main()
