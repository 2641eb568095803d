"""The Docker Compose stack as an operator runs it: images built with no registry (docker/build.sh), `up -d`,
/healthz, the `reference` model evaluated on the demo release through the REST API by the stack's own workers
(the sandbox worker through the host's engine), the leaderboard page, a clean stop and a restart that keeps
every record. Timings are printed (pytest -s); the stack uses a project name and volumes of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest
import requests

from tests.conftest import REPO, free_port, service_missing

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # the whole compose stack: images, services, a run

PROJECT = f"rcbci{os.getpid()}"
# The site sits behind a TLS proxy in production; the tests speak to gunicorn as that proxy would.
PROXY_HEADERS = {"X-Forwarded-Proto": "https", "Host": "localhost"}
SERVICES = ("postgres", "redis", "web", "worker", "sandbox-worker")
SECRET_KEY, POSTGRES_PASSWORD, REDIS_PASSWORD = "compose-test-" + "s" * 50, "pgsecret123", "redissecret123"
FIELD_ENCRYPTION_KEY = "compose-test-field-key-" + "f" * 30


def _compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    service_missing("Docker Compose", "neither `docker compose` nor Debian's docker-compose is installed")


class Stack:
    def __init__(self, env_file, port: int):
        self.compose = [*_compose_command(), "--project-name", PROJECT, "--env-file", str(env_file)]
        self.url = f"http://127.0.0.1:{port}"
        # Only what the engine client needs: the test process's own settings must not leak into the stack.
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key in ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "LANG")
        }

    def run(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [*self.compose, *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            pytest.fail(
                f"compose {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}\n{self.logs()}"
            )
        return proc

    def logs(self) -> str:
        proc = subprocess.run(
            [*self.compose, "logs", "--no-color", "--tail", "40"],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return proc.stdout[-8000:]

    def exec(self, service: str, *command: str) -> str:
        return self.run("exec", "-T", service, *command, timeout=180).stdout

    def holds(self, service: str, shell_test: str) -> bool:
        """Whether a shell test succeeds in the service's container, read from its output: compose v2.40's
        `exec -T` answers 0 whatever the command's exit status."""
        script = f"if {shell_test}; then echo rcb-yes; else echo rcb-no; fi"
        return self.run("exec", "-T", service, "sh", "-c", script, check=False).stdout.strip().endswith("rcb-yes")

    def get(self, path: str, **kwargs) -> requests.Response:
        return requests.get(
            self.url + path, headers={**PROXY_HEADERS, **kwargs.pop("headers", {})}, timeout=30, **kwargs
        )

    def wait_healthy(self, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                response = self.get("/healthz")
                if response.status_code == 200:
                    return response.json()
                last = f"{response.status_code} {response.text[:300]}"
            except requests.RequestException as exc:
                last = str(exc)
            time.sleep(2)
        pytest.fail(f"/healthz did not answer 200 within {timeout} s (last: {last})\n{self.logs()}")

    def exit_codes(self) -> dict[str, int]:
        ids = self.run("ps", "--all", "-q").stdout.split()
        codes = {}
        for container in ids:
            proc = subprocess.run(
                [
                    "docker",
                    "inspect",
                    "--format",
                    '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Running}} {{.State.ExitCode}}',
                    container,
                ],
                capture_output=True,
                text=True,
                check=True,
                env=self.env,
            )
            service, running, code = proc.stdout.split()
            codes[service] = -1 if running == "true" else int(code)
        return codes


def _env_file(path, port: int) -> None:
    lines = (REPO / ".env.example").read_text().splitlines()
    values = {
        "SECRET_KEY": SECRET_KEY,
        "FIELD_ENCRYPTION_KEY": FIELD_ENCRYPTION_KEY,
        "POSTGRES_PASSWORD": POSTGRES_PASSWORD,
        "REDIS_PASSWORD": REDIS_PASSWORD,
        "MAINTAINER_PASSWORD": "maintainer-secret-123",
        "WEB_PORT": str(port),
        "DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
        "RCB_ENV_FILE": str(path),
        "WEB_CONCURRENCY": "2",
        "WORKER_CONCURRENCY": "2",
    }
    out = [
        f"{line.split('=', 1)[0]}={values.pop(line.split('=', 1)[0])}"
        if "=" in line and not line.startswith("#") and line.split("=", 1)[0] in values
        else line
        for line in lines
    ]
    path.write_text("\n".join(out + [f"{key}={value}" for key, value in values.items()]) + "\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        service_missing("Docker engine", "`docker info` does not answer")
    _compose_command()
    port = free_port()
    env_file = tmp_path_factory.mktemp("compose") / "stack.env"
    _env_file(env_file, port)
    stack = Stack(env_file, port)
    started = time.monotonic()
    build = subprocess.run(
        ["bash", "docker/build.sh"],
        cwd=REPO,
        env={**stack.env, "RCB_ENV_FILE": str(env_file)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    print(f"\nimages built in {time.monotonic() - started:.1f} s")
    try:
        yield stack
    finally:
        # Clean-up only (the test stops the stack itself and checks every exit code): a worker still starting when
        # `down` comes (PID 1 without its signal handlers yet) ignores SIGTERM, and 60 s of grace were a minute lost.
        stack.run("down", "--volumes", "--timeout", "5", timeout=300, check=False)


def _remote_worker(stack: Stack, name: str) -> None:
    """A sandbox worker started as docs/OPERATIONS.md's "Adding a sandbox worker host" says: its environment names the
    database, the broker and the storage, and it has a cache volume of its own. It joins the stack's network
    (a real second host would use addresses) and mounts the media volume (a shared filesystem there)."""
    env = {
        "SECRET_KEY": SECRET_KEY,
        "FIELD_ENCRYPTION_KEY": FIELD_ENCRYPTION_KEY,
        "SANDBOX_BACKEND": "docker",
        "DATABASE_URL": f"postgres://rcb:{POSTGRES_PASSWORD}@postgres:5432/rcb",
        "REDIS_URL": f"redis://:{REDIS_PASSWORD}@redis:6379/0",
    }
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--name",
            name,
            "--hostname",
            name,
            "--network",
            f"{PROJECT}_default",
            *[arg for key, value in env.items() for arg in ("--env", f"{key}={value}")],
            "--group-add",
            str(os.stat("/var/run/docker.sock").st_gid),
            "-v",
            "/var/run/docker.sock:/var/run/docker.sock",
            "-v",
            f"{name}-cache:/var/cache/rcb",
            "-v",
            f"{PROJECT}_media:/var/lib/rcb/media",
            "rcb-app:latest",
            "worker",
            "sandbox",
        ],
        check=True,
        capture_output=True,
        env=stack.env,
        timeout=60,
    )


def _remote_worker_remove(stack: Stack, name: str) -> None:
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, env=stack.env, timeout=120)
    subprocess.run(["docker", "volume", "rm", f"{name}-cache"], capture_output=True, env=stack.env, timeout=60)


def _run_reference(stack: Stack, api: requests.Session) -> dict:
    started = time.monotonic()
    response = api.post(
        f"{stack.url}/api/v1/runs/",
        json={"model": "reference", "release": "demo-1.0.0", "with_paper": True, "samples": 1},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    run = response.json()
    deadline = time.monotonic() + 600
    while run["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(2)
        run = api.get(f"{stack.url}/api/v1/runs/{run['id']}/", timeout=30).json()
    print(
        f"reference evaluated on {run['total_items']} items in {time.monotonic() - started:.1f} s "
        "(with the numpy environment image built first if the engine lacks it)"
    )
    assert run["status"] == "completed", (run, stack.logs())
    return run


def test_the_stack_serves_evaluates_the_reference_and_stops_cleanly(stack, tmp_path):
    started = time.monotonic()
    stack.run("up", "-d", timeout=600)
    health = stack.wait_healthy()
    assert health == {"healthy": True}, "the public learns only healthy or not"
    # The details are for a signed-in maintainer.
    details = json.loads(
        stack.exec(
            "web",
            "python",
            "manage.py",
            "shell",
            "--verbosity",
            "0",
            "-c",
            "from django.contrib.auth.models import User; from django.test import Client; "
            "c = Client(HTTP_HOST='localhost'); "
            "c.force_login(User.objects.get(username='maintainer')); "
            "print(c.get('/healthz', secure=True).content.decode())",
        )
    )
    print(f"up and healthy in {time.monotonic() - started:.1f} s: {details['checks']}")
    assert details["healthy"] and set(details["checks"]) == {"database", "broker", "storage"}

    # The image's production settings, as the running container has them.
    deploy = stack.exec("web", "python", "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert "no issues" in deploy
    # Only the sandbox worker holds the engine socket.
    for service in ("web", "worker"):
        assert not stack.holds(service, "test -S /var/run/docker.sock")
    assert stack.holds("sandbox-worker", "test -S /var/run/docker.sock")
    assert stack.exec("web", "id", "-u").strip() == "10002"

    token = stack.exec("web", "python", "manage.py", "drf_create_token", "maintainer").split()[2]
    api = requests.Session()
    api.headers.update({**PROXY_HEADERS, "Authorization": f"Token {token}"})
    remote = f"{PROJECT}-remote-worker"
    try:
        _remote_worker(stack, remote)
        run = _run_reference(stack, api)
    finally:
        _remote_worker_remove(stack, remote)
    assert run["progress"]["done"] == run["total_items"] == 33
    assert run["score"]["scaled_pass_rate"] == 100.0 and run["score"]["errors"] == 0
    workers = stack.exec(
        "web",
        "python",
        "manage.py",
        "shell",
        "--verbosity",
        "0",
        "-c",
        "from evaluation.models import Outcome; "
        f"print(sorted(set(Outcome.objects.filter(run_id={run['id']}).values_list('worker', flat=True))))",
    )
    print(f"items scored by {workers.strip()}")
    assert remote in workers, "the worker started from environment variables alone took no item"

    page = stack.get("/versions/demo-1.0.0/leaderboard/")
    assert page.status_code == 200
    assert "Reference (calibration)" in page.text and "100.0%" in page.text
    assert stack.get("/static/vendor/htmx-2.0.11.min.js").status_code == 200

    # Backup as docs/OPERATIONS.md says: the database and the media, from the running stack.
    dump, media = tmp_path / "rcb.dump", tmp_path / "media.tar"
    dump.write_bytes(_exec_bytes(stack, "postgres", "pg_dump", "--format=custom", "-U", "rcb", "rcb"))
    media.write_bytes(_exec_bytes(stack, "web", "tar", "-C", "/var/lib/rcb/media", "-cf", "-", "."))

    started = time.monotonic()
    stack.run("stop", "--timeout", "60", timeout=300)
    print(f"stopped in {time.monotonic() - started:.1f} s")
    assert stack.exit_codes() == dict.fromkeys(SERVICES, 0)

    # Restore into an empty stack (volumes removed), as docs/OPERATIONS.md says; every record and file comes back.
    stack.run("down", "--volumes", "--timeout", "60", timeout=300)
    stack.run("up", "-d", "postgres", timeout=300)
    _until(lambda: stack.holds("postgres", "pg_isready -q"), 120)
    _exec_bytes(
        stack, "postgres", "pg_restore", "--clean", "--if-exists", "-U", "rcb", "-d", "rcb", stdin=dump.read_bytes()
    )
    stack.run("up", "-d", timeout=600)
    stack.wait_healthy()
    _exec_bytes(stack, "web", "tar", "-C", "/var/lib/rcb/media", "-xf", "-", stdin=media.read_bytes())
    again = api.get(f"{stack.url}/api/v1/runs/{run['id']}/", timeout=30).json()
    assert again["status"] == "completed" and again["score"] == run["score"]
    assert "already loaded" in stack.run("logs", "--no-color", "web").stdout
    release = api.get(f"{stack.url}/api/v1/releases/demo-1.0.0/", timeout=30).json()
    for kind, entry in release["downloads"].items():
        body = api.get(f"{stack.url}/api/v1/releases/demo-1.0.0/downloads/{kind}/", timeout=30).content
        assert hashlib.sha256(body).hexdigest() == entry["sha256"], kind
    assert "Reference (calibration)" in stack.get("/versions/demo-1.0.0/leaderboard/").text


def _exec_bytes(stack: Stack, service: str, *command: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [*stack.compose, "exec", "-T", service, *command],
        cwd=REPO,
        env=stack.env,
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout


def _until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not ready within {timeout} s"
        time.sleep(1)
