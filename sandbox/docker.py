"""The `docker` backend: one throwaway container per run, from an image per environment layered on the sandbox base.

A cold run gets a new container (read-only root, no network, uid 10001, no capabilities, memory, CPU and process
limits, tmpfs /work and /tmp) that is removed afterwards whatever happens. With the fork server on, a session keeps
one long-lived container of the same kind (`ContainerZygote`) whose zygote forks each harness item into namespaces,
tmpfs folders and cgroups of its own (forkserver.py); it reaches the worker through a unix socket in a folder bound
into the container, the only way to pass it file descriptors, and its items' cgroups nest under the container's on
the worker's host. A worker that shares neither (another host, its own pid namespace) runs every item cold. The
container's seccomp profile is Docker's default one (20.10's, vendored in seccomp/, moby's Apache-2.0 text) plus the
few calls a fork needs to build an item's sandbox, which each item's own filter refuses again.

The work files travel as a tar on the container's stdin: the archive API refuses containers with a read-only
root (and would not see a tmpfs anyway), and a bind mount needs the engine to share the worker's filesystem.

An environment image is built by install.py (fetching on the worker, which runs nothing; pip inside) through
DockerBuild: each build step is a container of the base image (its /opt/env handed to uid 10001 once per base,
`rcb-env-build`) with no network, uid 10001, no capabilities and an empty environment; the fetched files come
on stdin into a tmpfs, and the container of the install that succeeded is committed as the environment image.
Not `docker build`: the classic builder's RUN steps cannot drop capabilities or limit processes, a COPY of the
fetched files would stay in a layer of every image for good, and each round of fetching would send a new build
context; a step container gets exactly the isolation of a run, and a tmpfs never enters the commit. No host
configuration reaches a build (no pip.conf, no proxy, no index address). A task without requirements gets the
base image itself under its environment tag.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import io
import json
import logging
import os
import select
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING

import requests

import docker
from sandbox.base import (
    Environment,
    EnvironmentBuildError,
    ExecResult,
    Limits,
    SandboxBackend,
    SandboxError,
    Session,
)
from sandbox.cgroups import RunCgroups
from sandbox.config import setting
from sandbox.docker_engine import (
    SANDBOX_USER,
    WORKER_LABEL,
    CappedOutput,
    container_remove,
    engine_errors,
    host_config,
    run_environment,
)
from sandbox.forkserver import (
    CHILD_OWN_PROCESSES,
    START_SECONDS,
    ZYGOTE_PROCESSES,
    ForkingSession,
    ForkRefused,
    Zygote,
    zygote_args,
)
from sandbox.install import INPUTS, requirements_install
from sandbox.lock import image_lock

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from sandbox.docker_agent import AgentContainer

ENV_REPOSITORY = "rcb-env"
PYTHON = "/opt/env/bin/python"
LABEL = "rcb.sandbox"
# The unpack step's exit status and last words; the test itself never runs if unpacking failed.
UNPACK_FAILED = 125
UNPACK_MESSAGE = "rcb-sandbox: unpacking the work files failed"
UNPACK = f'tar -x -C "$0" || {{ echo "{UNPACK_MESSAGE}" >&2; exit {UNPACK_FAILED}; }}; exec "$@"'
# Build containers are found by name (a label would pass into the committed image, and from it to every run).
BUILD_NAME = "rcb-build-"
BUILD_REPOSITORY = "rcb-env-build"
# Fork server containers: labelled apart from runs (they live as long as their worker's session, not one run).
ZYGOTE_LABEL = "rcb.zygote"
CONTROL_DIR = "/rcb-control"
CONTROL_SOCKET = f"{CONTROL_DIR}/control.sock"
SECCOMP_DEFAULT = Path(__file__).with_name("seccomp") / "docker-default.json"
# What a fork needs before its item runs: its own namespaces, tmpfs folders and hostname.
FORK_SYSCALLS = ("unshare", "mount", "umount2", "sethostname")
ZYGOTE_LOG_BYTES = 64 * 1024
ZYGOTE_FOLDER_BYTES = 1024 * 1024


@functools.cache
def forkserver_seccomp() -> str:
    """The fork server container's profile: Docker's default one, plus FORK_SYSCALLS."""
    profile = json.loads(SECCOMP_DEFAULT.read_text())
    profile["syscalls"].append({"names": list(FORK_SYSCALLS), "action": "SCMP_ACT_ALLOW"})
    return json.dumps(profile)


def socket_bind_short(listener: socket.socket, path: Path) -> None:
    """Bind a unix socket at a path however long: through the folder's descriptor, since a socket's address is
    limited to 108 bytes and a cache folder (a test's temporary folder, a deep volume) may be longer."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


class ContainerZygote(Zygote):
    """The zygote as the main process of a long-lived container of the environment's image (a cold run's isolation,
    its seccomp profile widened by FORK_SYSCALLS), connected back to the worker through a bound unix socket."""

    def __init__(
        self,
        backend: DockerBackend,
        environment: Environment,
        *,
        preload: Sequence[str],
        limits: Limits,
        helpers: Sequence[str] = (),
    ):
        self.api = backend.client().api
        self.container: str | None = None
        self.stream = None
        self.output = CappedOutput(ZYGOTE_LOG_BYTES)
        self.folder = Path(tempfile.mkdtemp(prefix="zygote-", dir=backend.cache_dir))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.folder.chmod(0o755)
            socket_bind_short(listener, self.folder / "control.sock")
            os.chmod(self.folder / "control.sock", 0o666)  # for uid 10001; it is unlinked once the zygote connected
            listener.listen(1)
            # The zygote's pages and an item's both count: the container holds twice an item's memory, each item
            # its own share in its cgroup below. Its own folders stay tiny: every item mounts fresh ones.
            config = host_config(
                replace(
                    limits,
                    memory_bytes=2 * limits.memory_bytes,
                    disk_bytes=ZYGOTE_FOLDER_BYTES,
                    processes=limits.processes + ZYGOTE_PROCESSES + CHILD_OWN_PROCESSES,
                ),
                tmp_bytes=ZYGOTE_FOLDER_BYTES,
            )
            config.update(
                binds={str(self.folder): {"bind": CONTROL_DIR, "mode": "ro"}},
                auto_remove=True,
                shm_size=ZYGOTE_FOLDER_BYTES,
                security_opt=["no-new-privileges", f"seccomp={forkserver_seccomp()}"],
            )
            with engine_errors("creating the fork server container"):
                self.container = self.api.create_container(
                    environment.location,
                    [PYTHON, *zygote_args(CONTROL_SOCKET, preload, helpers)],
                    user=SANDBOX_USER,
                    working_dir="/work",
                    hostname="sandbox",
                    network_disabled=True,
                    environment=run_environment(limits),
                    labels={
                        ZYGOTE_LABEL: "1",
                        "rcb.env": environment.hash,
                        WORKER_LABEL: f"{socket.gethostname()}:{os.getpid()}",
                    },
                    host_config=self.api.create_host_config(**config),
                )["Id"]
                self.stream = self.api.attach_socket(self.container, params={"stdout": 1, "stderr": 1, "stream": 1})
                self.reader = threading.Thread(target=self.output.read, args=(self.stream,), daemon=True)
                self.reader.start()
                self.api.start(self.container)
                self.pid = int(self.api.inspect_container(self.container)["State"]["Pid"])
            self.control = self._accept(listener)
        except BaseException:
            listener.close()
            self.stop()
            raise
        listener.close()
        self.held = frozenset({"memory", "pids"}) if self._cgroups_visible() else frozenset()

    def _accept(self, listener: socket.socket) -> socket.socket:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if select.select([listener], [], [], 0.5)[0]:
                control, _ = listener.accept()
                (self.folder / "control.sock").unlink()  # nothing else in the container can connect now
                return control
            if not self.reader.is_alive():
                break
        raise ForkRefused(f"the fork server container did not connect: {self.output.text(2)[-2000:]}")

    def _cgroups_visible(self) -> bool:
        """Whether this worker sees the container's cgroups (its init's pid names the container here)."""
        try:
            return self.container is not None and self.container in Path(f"/proc/{self.pid}/cgroup").read_text()
        except OSError:
            return False

    def item_cgroups(self, limits: Limits, *, own: int) -> RunCgroups:
        return RunCgroups(limits, own=own, pid=self.pid)

    def alive(self) -> bool:
        return self.reader.is_alive()

    def stop(self) -> str:
        with contextlib.suppress(OSError, AttributeError):
            self.control.close()
        if self.container is not None:
            with contextlib.suppress(SandboxError):
                container_remove(self.api, self.container)
        if self.stream is not None:
            self.reader.join(timeout=5)
            with contextlib.suppress(OSError):
                self.stream.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.output.text(2)


class DockerSession(ForkingSession):
    backend: DockerBackend
    work_dir = "/work"

    def __init__(self, backend: DockerBackend, environment: Environment):
        super().__init__(backend, environment, forkserver=backend.forkserver)
        self._agents: dict[Path, AgentContainer] = {}
        self.agent_restarts = 0  # agent containers replaced because their command channel had closed

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        """An agent's shell command in the kept container of its workspace (docker_agent.py: the workspace copied
        in and back, everything the command left killed at its end)."""
        from sandbox.docker_agent import AgentContainer, container_key

        for gone in [path for path in self._agents if path != workspace and not path.exists()]:
            self.workspace_close(workspace=gone)  # an item that ended without saying so
        container = self._agents.get(workspace)
        if container is not None and container.lost():
            self.agent_restarts += 1
            logger.warning("the agent container of %s lost its command channel: a new one is started", workspace)
        if container is not None and (container.key != container_key(limits) or not container.alive()):
            self.workspace_close(workspace=workspace)
            container = None
        if container is None:
            container = self._agents[workspace] = AgentContainer(self.backend, self.environment, limits)
        return container.command_run(workspace=workspace, command=command, limits=limits)

    def workspace_close(self, *, workspace: Path) -> None:
        container = self._agents.pop(workspace, None)
        if container is not None:
            container.remove()

    def close(self) -> None:
        for workspace in list(self._agents):
            self.workspace_close(workspace=workspace)
        super().close()

    def _zygote_start(self, preload: Sequence[str], limits: Limits, helpers: Sequence[str] = ()) -> ContainerZygote:
        return ContainerZygote(self.backend, self.environment, preload=preload, limits=limits, helpers=helpers)

    @contextlib.contextmanager
    def _archive(self, files: Mapping[str, bytes]) -> Iterator[IO[bytes]]:
        with tempfile.TemporaryFile(prefix="rcb-docker-") as archive:
            archive.write(work_archive(files))
            archive.seek(0)
            yield archive

    def run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        if limits.gpu:  # a GPU run starts its own container with the device request, never a fork of the zygote
            return self._cold_run(files=files, command=command, limits=limits)
        return super().run(files=files, command=command, limits=limits)

    def _cold_run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        archive = work_archive(files)
        api = self.backend.client().api
        with engine_errors("creating the sandbox container"):
            container = api.create_container(
                self.environment.location,
                ["sh", "-c", UNPACK, "/work", *command],
                user=SANDBOX_USER,
                working_dir="/work",
                hostname="sandbox",
                stdin_open=True,
                network_disabled=True,
                environment=run_environment(limits),
                labels={LABEL: "1", "rcb.env": self.environment.hash},
                host_config=api.create_host_config(**host_config(limits)),
            )["Id"]
        try:
            return container_run(api, container, io.BytesIO(archive), limits)
        finally:
            container_remove(api, container)


def container_run(api, container: str, archive: IO[bytes], limits: Limits) -> ExecResult:
    """Start a created container, send `archive` on its stdin, collect capped output, kill it at the deadline."""
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
            while chunk := archive.read(1 << 20):
                raw.sendall(chunk)
            raw.shutdown(socket.SHUT_WR)
        timed_out = _container_wait(api, container, start + limits.wall_seconds)
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
        exit_code=None if killed else code,
        stdout=output.text(1),
        stderr=stderr,
        timed_out=timed_out,
        duration=duration,
        backend=DockerBackend.name,
        oom_killed=oom_killed,
        output_truncated=output.truncated,
    )


def _container_wait(api, container: str, deadline: float) -> bool:
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


def built_on(image, base_id: str) -> bool:
    """Whether an environment image stands on this base image (a rebuilt base rebuilds every environment)."""
    return image.id == base_id or (image.labels or {}).get("rcb.base") == base_id


class DockerBuild:
    """Build steps as containers of the build image: no network, uid 10001, no capabilities, /opt/env writable.

    The inputs travel on stdin into a tmpfs (never part of an image); the container of the last step that
    succeeded is kept (`installed`) for the backend to commit, every other one is removed at once.
    """

    python = PYTHON

    def __init__(self, backend: DockerBackend, image: str):
        self.backend, self.image = backend, image
        self.interpreter = f"docker {image}"
        self.installed: str | None = None

    def inputs_at(self, inputs: Path) -> str:
        return INPUTS

    def run(self, command: Sequence[str], *, inputs: Path, env: Mapping[str, str], limits: Limits) -> ExecResult:
        api = self.backend.client().api
        size = sum(path.stat().st_size for path in inputs.rglob("*") if path.is_file())
        # tmpfs pages count against the memory limit: the inputs come on top of what the build itself needs.
        limits = replace(
            limits, memory_bytes=limits.memory_bytes + size, disk_bytes=max(limits.disk_bytes, size + (64 << 20))
        )
        variables = {"PATH": "/opt/env/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", **env}
        # `env -i`: the step sees only these; nothing set on the container could pass into the committed image.
        argv = ["sh", "-c", UNPACK, INPUTS, "env", "-i", *(f"{k}={v}" for k, v in variables.items()), *command]
        with engine_errors("creating a build container"):
            container = api.create_container(
                self.image,
                argv,
                user=SANDBOX_USER,
                working_dir="/tmp",
                hostname="sandbox",
                stdin_open=True,
                network_disabled=True,
                name=f"{BUILD_NAME}{uuid.uuid4().hex[:12]}",
                host_config=api.create_host_config(
                    **host_config(limits, work=INPUTS, tmp_bytes=limits.disk_bytes, read_only=False)
                ),
            )["Id"]
        try:
            with tempfile.TemporaryFile() as archive:
                with tarfile.open(fileobj=archive, mode="w") as tar:
                    for path in sorted(inputs.iterdir()):
                        tar.add(path, arcname=path.name, filter=_owned_by_sandbox)
                archive.seek(0)
                result = container_run(api, container, archive, limits)
        except BaseException:
            container_remove(api, container)
            raise
        if result.exit_code == 0:
            self.discard()
            self.installed = container
        else:
            container_remove(api, container)
        return result

    def discard(self) -> None:
        if self.installed is not None:
            container_remove(self.backend.client().api, self.installed)
            self.installed = None


def _owned_by_sandbox(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid, info.gid, info.uname, info.gname = 10001, 10001, "", ""
    return info


class DockerBackend(SandboxBackend):
    name = "docker"
    gpu = True

    def __init__(self, cache_dir: Path, *, forkserver: bool | None = None):
        super().__init__(cache_dir)
        self.base_image = setting("SANDBOX_DOCKER_BASE_IMAGE")
        self.forkserver = setting("SANDBOX_FORKSERVER") if forkserver is None else forkserver
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
            return False, (
                f"the sandbox base image {self.base_image} is missing: "
                "build it with docker/sandbox-base/build.sh (no registry needed)"
            )
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
                if base.id is None:  # docker-py reads the id from the engine's reply, which could lack it
                    raise SandboxError(f"the engine gave no id for the base image {self.base_image}")
                existing = self._image(tag)
                if existing is None or not built_on(existing, base.id):
                    self._build(tag, base, env_hash, requirements, log_path)
                if existing is not None and existing.id != self.client().images.get(tag).id:
                    # Built on an older base image and now untagged; one still in use stays until it is not.
                    with contextlib.suppress(docker.errors.APIError):
                        self.client().images.remove(existing.id)
        return Environment(
            hash=env_hash,
            backend=self.name,
            location=tag,
            python=PYTHON,
            build_log=log_path.read_text() if log_path.exists() else "",
        )

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
        header = f"base image {self.base_image} ({base.id})\n"
        sandbox = DockerBuild(self, self._build_image(base))
        try:
            log = header + requirements_install(
                requirements=requirements,
                sandbox=sandbox,
                work=self.cache_dir / "images" / f"{env_hash}.inputs",
                dists=self.cache_dir / "dists",
            )
            if sandbox.installed is None:
                # Nothing to install: the environment is the base image under the environment's tag.
                base.tag(tag)
            else:
                repository, _, name = tag.partition(":")
                self.client().api.commit(
                    sandbox.installed,
                    repository=repository,
                    tag=name,
                    changes=[
                        f"USER {SANDBOX_USER}",
                        "WORKDIR /work",
                        f'CMD ["{PYTHON}"]',
                        f"LABEL rcb.base={base.id} rcb.env={env_hash}",
                    ],
                )
        except EnvironmentBuildError as exc:
            log_path.write_text(header + exc.log)
            raise EnvironmentBuildError(str(exc), header + exc.log) from exc
        finally:
            sandbox.discard()
        log_path.write_text(log)

    def _build_image(self, base) -> str:
        """The base image with /opt/env handed to the sandbox user, made once per base image (no network)."""
        tag = f"{BUILD_REPOSITORY}:{base.id.removeprefix('sha256:')[:20]}"
        with open(self.cache_dir / "images" / "build-image.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._image(tag) is not None:
                return tag
            api = self.client().api
            container = api.create_container(
                base.id,
                ["chown", "-R", SANDBOX_USER, "/opt/env"],
                user="0:0",
                network_disabled=True,
                name=f"{BUILD_NAME}{uuid.uuid4().hex[:12]}",
                host_config=api.create_host_config(
                    network_mode="none", cap_drop=["ALL"], cap_add=["CHOWN"], security_opt=["no-new-privileges"]
                ),
            )["Id"]
            try:
                api.start(container)
                if api.wait(container, timeout=120)["StatusCode"] != 0:
                    raise SandboxError(f"preparing {tag}: chown of /opt/env failed: {api.logs(container)[-500:]!r}")
                api.commit(
                    container,
                    repository=BUILD_REPOSITORY,
                    tag=tag.partition(":")[2],
                    changes=[f"USER {SANDBOX_USER}", f'CMD ["{PYTHON}"]'],
                )
            finally:
                container_remove(api, container)
        return tag

    def orphans_remove(self, *, older_than: float) -> int:
        """Sandbox containers outlive a worker killed mid-run; any older than a run may last is an orphan, whichever
        worker on this engine made it."""
        api = self.client().api
        removed = 0
        with engine_errors("removing orphaned sandbox containers"):
            runs = [(c, older_than) for c in api.containers(all=True, filters={"label": f"{LABEL}=1"})]
            # A build step may last as long as a whole build; the engine's name filter matches substrings.
            builds = [
                (c, setting("SANDBOX_BUILD_SECONDS") + 60)
                for c in api.containers(all=True, filters={"name": BUILD_NAME})
                if any(n.lstrip("/").startswith(BUILD_NAME) for n in c.get("Names") or [])
            ]
            for container, limit in runs + builds:
                if time.time() - container["Created"] > limit:
                    removed += container_remove(api, container["Id"])
        return removed

    def environment_lock(self, environment: Environment) -> dict:
        with engine_errors(f"reading image {environment.location}"):
            return image_lock(self.client().images.get(environment.location), tag=environment.location)

    def session_open(self, environment: Environment) -> Session:
        return DockerSession(self, environment)
