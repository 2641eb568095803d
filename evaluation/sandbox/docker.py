"""The `docker` backend: one throwaway container per run, from an image per environment layered on the sandbox base.

Every run gets a new container (read-only root, no network, uid 10001, no capabilities, memory, CPU and process
limits, tmpfs /work and /tmp) that is removed afterwards whatever happens. A warm container per session would
save about 0.2 s a run but share /tmp, the process table and the memory cgroup between runs, and Docker cannot
kill an exec'd process tree short of killing the container; a fresh container is the simpler guarantee.

The work files travel as a tar on the container's stdin: the archive API refuses containers with a read-only
root (and would not see a tmpfs anyway), and a bind mount needs the engine to share the worker's filesystem.

An environment image pip-installs the requirements into /opt/env, with the host's network and pip index settings
(read at build time; this host's local folders and file:// indexes are left out). A task without requirements
gets the base image itself under its environment tag.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import io
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath

import docker
import requests
from docker.utils.socket import frames_iter

from evaluation.sandbox.base import (
    Backend, Environment, EnvironmentBuildError, ExecResult, Limits, SandboxError, Session,
)
from evaluation.sandbox.lock import image_lock

ENV_REPOSITORY = "rcb-env"
PYTHON = "/opt/env/bin/python"
SANDBOX_USER = "10001:10001"
LABEL = "rcb.sandbox"
TMP_BYTES = 64 * 1024 * 1024
# The unpack step's exit status and last words; the test itself never runs if unpacking failed.
UNPACK_FAILED = 125
UNPACK_MESSAGE = "rcb-sandbox: unpacking the work files failed"
UNPACK = f'tar -x -C /work || {{ echo "{UNPACK_MESSAGE}" >&2; exit {UNPACK_FAILED}; }}; exec "$@"'
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PIP_KEYS = ("index-url", "extra-index-url", "trusted-host", "find-links", "cert", "timeout", "default-timeout",
            "retries", "proxy")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")

ENV_DOCKERFILE = """\
FROM {base}
USER root
COPY rcb-build/ /tmp/rcb-build/
RUN PIP_CONFIG_FILE=/tmp/rcb-build/pip.conf /opt/env/bin/python -m pip install --no-input --no-cache-dir \\
        --progress-bar off --root-user-action=ignore -r /tmp/rcb-build/requirements.txt \\
 && rm -rf /tmp/rcb-build
USER {user}
"""


@contextlib.contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """Turn engine and transport errors into SandboxError: they are infrastructure, never the model's doing."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(f"{what}: image missing ({exc.explanation})") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise SandboxError(f"{what}: {exc}") from exc


class DockerSession(Session):
    backend: DockerBackend

    def run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        archive = work_archive(files)
        api = self.backend.client().api
        with engine_errors("creating the sandbox container"):
            container = api.create_container(
                self.environment.location, ["sh", "-c", UNPACK, "rcb-unpack", *command],
                user=SANDBOX_USER, working_dir="/work", hostname="sandbox", stdin_open=True,
                network_disabled=True, environment=run_environment(limits),
                labels={LABEL: "1", "rcb.env": self.environment.hash},
                host_config=api.create_host_config(**host_config(limits)),
            )["Id"]
        try:
            return self._run(api, container, archive, limits)
        finally:
            with engine_errors("removing the sandbox container"), contextlib.suppress(docker.errors.NotFound):
                api.remove_container(container, force=True)

    def _run(self, api, container: str, archive: bytes, limits: Limits) -> ExecResult:
        with engine_errors("starting the sandbox container"):
            # Attach before start, so no output is missed; stdin closes (StdinOnce) when the archive is sent.
            stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        output = CappedOutput(limits.output_bytes)
        reader = threading.Thread(target=output.read, args=(stream,), daemon=True)
        try:
            with engine_errors("starting the sandbox container"):
                api.start(container)
            start = time.monotonic()
            reader.start()
            raw = getattr(stream, "_sock", stream)
            # A run that dies before reading all of its stdin closes the connection; its exit status tells.
            with contextlib.suppress(OSError):
                raw.sendall(archive)
                raw.shutdown(socket.SHUT_WR)
            timed_out = self._wait(api, container, start + limits.wall_seconds)
            duration = time.monotonic() - start
            reader.join(timeout=10)
        finally:
            with contextlib.suppress(OSError):
                stream.close()
        with engine_errors("inspecting the sandbox container"):
            state = api.inspect_container(container)["State"]
        code, oom_killed = state["ExitCode"], bool(state["OOMKilled"])
        stderr = output.text(2)
        if code == UNPACK_FAILED and stderr.rstrip().endswith(UNPACK_MESSAGE):
            raise SandboxError(f"{UNPACK_MESSAGE}: {stderr.strip()[-500:]}")
        killed = timed_out or (oom_killed and code == 137)
        return ExecResult(
            exit_code=None if killed else code, stdout=output.text(1), stderr=stderr, timed_out=timed_out,
            duration=duration, backend=DockerBackend.name, oom_killed=oom_killed,
            output_truncated=output.truncated,
        )

    def _wait(self, api, container: str, deadline: float) -> bool:
        """Wait for the run to end by `deadline`; kill it if it does not. True when it was killed for time."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                api.wait(container, timeout=max(remaining, 0.1))
                return False
            except requests.exceptions.RequestException:
                # A read timeout looks like any other transport error; asking the engine tells them apart.
                with engine_errors("waiting for the sandbox container"):
                    if not api.inspect_container(container)["State"]["Running"]:
                        return False
        with engine_errors("killing the sandbox container"):
            try:
                api.kill(container)
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                return False  # it ended on its own just in time
            api.wait(container, timeout=60)
        return True


class CappedOutput:
    """Demultiplexes the attach stream, keeping at most `cap` bytes per stream and discarding the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.chunks: dict[int, list[bytes]] = {1: [], 2: []}
        self.kept = {1: 0, 2: 0}
        self.truncated = False

    def read(self, stream) -> None:
        with contextlib.suppress(OSError, ValueError):
            for number, data in frames_iter(stream, tty=False):
                if number not in self.chunks:
                    continue
                room = self.cap - self.kept[number]
                if len(data) > room:
                    self.truncated = True
                if room > 0:
                    self.chunks[number].append(data[:room])
                    self.kept[number] += min(room, len(data))

    def text(self, number: int) -> str:
        return b"".join(self.chunks[number]).decode("utf-8", "replace")


def work_archive(files: Mapping[str, bytes]) -> bytes:
    """A tar of the run's files, refusing paths that would leave the work folder."""
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for relative, data in files.items():
            path = PurePosixPath(relative)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise ValueError(f"{relative}: path leaves the work folder")
            info = tarfile.TarInfo(str(path))
            info.size, info.mode, info.mtime = len(data), 0o644, now
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_environment(limits: Limits) -> dict[str, str]:
    """The only variables a run sees besides the image's (PATH, HOME, LANG, PYTHON*)."""
    threads = str(max(1, int(limits.cpus)))
    # Numeric libraries start a thread per host CPU otherwise, which the process limit counts.
    return {"TMPDIR": "/tmp", "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads}


def host_config(limits: Limits) -> dict:
    return {
        "network_mode": "none",
        "read_only": True,
        "init": True,
        "tmpfs": {
            "/work": f"size={limits.disk_bytes},uid=10001,gid=10001,mode=0700,exec,nosuid,nodev",
            "/tmp": f"size={min(limits.disk_bytes, TMP_BYTES)},mode=1777,exec,nosuid,nodev",
        },
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": limits.processes,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [docker.types.Ulimit(name="core", soft=0, hard=0)],
        # Output reaches the worker through the attach stream only; nothing is written to the engine's disk.
        "log_config": docker.types.LogConfig(type="none"),
    }


def pip_config() -> tuple[str, dict[str, str], list[str]]:
    """This host's pip index settings, read now, as a pip.conf for the image build, its extra files, and notes."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    found: dict[str, str] = {}
    # Later lines override earlier ones, in pip's own order (global, user, site, environment).
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        if name in PIP_KEYS and value:
            with contextlib.suppress(ValueError, SyntaxError):
                found[name] = str(ast.literal_eval(value))
    lines, extra, notes = ["[global]"], {}, []
    for name, value in found.items():
        if name in ("index-url", "extra-index-url", "find-links"):
            # Local folders and file:// indexes of this host do not exist inside the build.
            kept = [v for v in value.split() if v.startswith(("http://", "https://"))]
            notes += [f"not passed to the image build (a local path): {name} {v}" for v in value.split()
                      if v not in kept]
            value = " ".join(kept)
        elif name == "cert":
            if not Path(value).is_file():
                continue
            extra["cert.pem"] = Path(value).read_text()
            value = "/tmp/rcb-build/cert.pem"
        if value:
            lines.append(f"{name} = {value}")
    return "\n".join(lines) + "\n", extra, notes


def build_context(*, base: str, requirements: str, pip_conf: str, extra: Mapping[str, str]) -> bytes:
    files = {"Dockerfile": ENV_DOCKERFILE.format(base=base, user=SANDBOX_USER),
             "rcb-build/requirements.txt": requirements, "rcb-build/pip.conf": pip_conf}
    files.update({f"rcb-build/{name}": text for name, text in extra.items()})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def built_on(image, base_id: str) -> bool:
    """Whether an environment image stands on this base image (a rebuilt base rebuilds every environment)."""
    return image.id == base_id or (image.labels or {}).get("rcb.base") == base_id


class DockerBackend(Backend):
    name = "docker"

    def __init__(self, cache_dir: Path):
        from django.conf import settings

        super().__init__(cache_dir)
        self.base_image = settings.SANDBOX_DOCKER_BASE_IMAGE
        self.build_seconds = settings.SANDBOX_DOCKER_BUILD_SECONDS
        self._client: docker.DockerClient | None = None

    def client(self) -> docker.DockerClient:
        if self._client is None:
            with engine_errors("connecting to the Docker engine"):
                self._client = docker.from_env(timeout=60)
        return self._client

    def available(self) -> tuple[bool, str]:
        try:
            probe = docker.from_env(timeout=5)
            try:
                version = probe.version()["Version"]
                probe.images.get(self.base_image)
            finally:
                probe.close()
        except docker.errors.ImageNotFound:
            return False, (f"the sandbox base image {self.base_image} is missing: "
                           "build it with docker/sandbox-base/build.sh (no registry needed)")
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
            return False, f"the Docker engine does not answer: {exc}"
        return True, f"Docker engine {version}, base image {self.base_image}"

    def environment_build(self, *, env_hash: str, requirements: str) -> Environment:
        """The image for `env_hash`, built under a lock so concurrent workers build it once."""
        folder = self.cache_dir / "images"
        folder.mkdir(parents=True, exist_ok=True)
        tag = f"{ENV_REPOSITORY}:{env_hash[:20]}"
        log_path = folder / f"{env_hash}.log"
        with open(folder / f"{env_hash}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with engine_errors(f"building {tag}"):
                base = self.client().images.get(self.base_image)
                existing = self._image(tag)
                if existing is None or not built_on(existing, base.id):
                    self._build(tag, base, env_hash, requirements, log_path)
                if existing is not None and existing.id != self.client().images.get(tag).id:
                    # Built on an older base image and now untagged; one still in use stays until it is not.
                    with contextlib.suppress(docker.errors.APIError):
                        self.client().images.remove(existing.id)
        return Environment(hash=env_hash, backend=self.name, location=tag, python=PYTHON,
                           build_log=log_path.read_text() if log_path.exists() else "")

    def environment_remove(self, *, env_hash: str) -> bool:
        """Untag and delete the environment's image; an image a container still uses stays."""
        folder = self.cache_dir / "images"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{env_hash}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with engine_errors(f"removing the environment {env_hash[:20]}"):
                try:
                    self.client().images.remove(f"{ENV_REPOSITORY}:{env_hash[:20]}")
                except docker.errors.ImageNotFound:
                    pass
                except docker.errors.APIError as exc:
                    if exc.status_code == 409:  # a container of it exists: in use
                        return False
                    raise
            (folder / f"{env_hash}.log").unlink(missing_ok=True)
        return True

    def _image(self, tag: str):
        try:
            return self.client().images.get(tag)
        except docker.errors.ImageNotFound:
            return None

    def _build(self, tag: str, base, env_hash: str, requirements: str, log_path: Path) -> None:
        log = f"base image {self.base_image} ({base.id}); requirements:\n{requirements}\n"
        if not [ln for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("#")]:
            # Nothing to install: the environment is the base image under the environment's tag.
            base.tag(tag)
            log_path.write_text(log + "no requirements: tagged the base image\n")
            return
        pip_conf, extra, notes = pip_config()
        log += "pip.conf for the build:\n" + pip_conf + "".join(f"{note}\n" for note in notes)
        context = build_context(base=self.base_image, requirements=requirements, pip_conf=pip_conf, extra=extra)
        error = ""
        # Only builds get a network (the host's, for pip); runs never do.
        for chunk in self.client().api.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True, forcerm=True, decode=True,
            network_mode="host", timeout=self.build_seconds, labels={"rcb.base": base.id, "rcb.env": env_hash},
            buildargs={k: v for k, v in os.environ.items() if k in PROXY_VARIABLES},
        ):
            log += ANSI.sub("", chunk.get("stream", ""))
            if "error" in chunk:
                error = chunk["error"]
                log += f"\n{error}\n"
        log_path.write_text(log)
        if error:
            # The steps before the failing one stay behind as untagged images; the base itself is never among them.
            layers = [layer for layer in re.findall(r"^ ---> ([0-9a-f]{12})$", log, re.M)
                      if not base.id.startswith(f"sha256:{layer}")]
            if layers:
                with contextlib.suppress(docker.errors.APIError):
                    self.client().images.remove(layers[-1])
            pip_errors = [ln.strip() for ln in log.splitlines() if ln.strip().startswith("ERROR:")]
            raise EnvironmentBuildError(f"installing requirements failed: {(pip_errors or [error])[-1]}", log)

    def orphans_remove(self, *, older_than: float) -> int:
        """Sandbox containers outlive a worker killed mid-run; any older than a run may last is an orphan, whichever
        worker on this engine made it."""
        api = self.client().api
        removed = 0
        with engine_errors("removing orphaned sandbox containers"):
            for container in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
                if time.time() - container["Created"] > older_than:
                    with contextlib.suppress(docker.errors.NotFound):
                        api.remove_container(container["Id"], force=True)
                        removed += 1
        return removed

    def environment_lock(self, environment: Environment) -> dict:
        with engine_errors(f"reading image {environment.location}"):
            return image_lock(self.client().images.get(environment.location), tag=environment.location)

    def session_open(self, environment: Environment) -> Session:
        return DockerSession(self, environment)
