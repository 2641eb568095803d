"""A framework's CPU wheel index (SANDBOX_CPU_WHEEL_INDEXES) is the one source of that framework's files, so an
author's `torch>=2.1` builds the CPU build: without it, a newer build on the host's own indexes (a GPU build of
gigabytes) wins. The indexes here are local folders (file:// simple indexes), as an air-gapped site would have."""

from __future__ import annotations

import hashlib
import io
import re
import uuid
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.tags import sys_tags

from sandbox import EnvironmentBuildError, Limits
from sandbox.fetch import Fetcher, IndexConfig, Target
from tests.conftest import sandbox_backend_or_missing


def wheel(name: str, version: str, build: str) -> tuple[str, bytes]:
    """A pure-Python wheel of one module `<name>` that says which build it is."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}.py": f"BUILD = {build!r}\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rcb-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist_info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist_info}/RECORD"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return f"{module}-{version}-py3-none-any.whl", buffer.getvalue()


def simple_index(root: Path, name: str, version: str, build: str) -> str:
    """A file:// PEP 503 index at `root` serving one wheel of `name`; its URL."""
    project = root / name
    project.mkdir(parents=True)
    filename, data = wheel(name, version, build)
    (project / filename).write_bytes(data)
    (project / "index.html").write_text(f'<a href="{filename}">{filename}</a>')
    return root.as_uri()


@pytest.fixture
def framework(tmp_path):
    """A framework whose default index has a newer GPU build and whose CPU index has the CPU build."""
    name = f"rcb-framework-{uuid.uuid4().hex[:8]}"
    default = simple_index(tmp_path / "default", name, "2.2.0", "gpu")
    cpu = simple_index(tmp_path / "cpu", name, "2.1.0+cpu", "cpu")
    return name, default, cpu


def test_the_cpu_index_is_the_framework_s_only_source(framework, tmp_path):
    name, default, cpu = framework
    target = Target(markers=default_environment(), tags=tuple(str(tag) for tag in sys_tags()))
    wanted = [Requirement(f"{name}>=2.1")]
    host = IndexConfig(index_urls=(default,))
    for config, expected in ((host, "2.2.0"), (host.with_project_indexes({name: cpu}), "2.1.0+cpu")):
        folder = tmp_path / f"files-{expected}"
        folder.mkdir()
        fetched = Fetcher(config=config, target=target, cache=tmp_path / "cache", max_bytes=1 << 20).fetch(
            wanted, folder
        )
        assert fetched.fetched == [f"{name.replace('-', '_')}-{expected}-py3-none-any.whl"]
    other = IndexConfig(index_urls=(default,)).with_project_indexes({"some-other-framework": cpu})
    assert other.project_indexes == {"some-other-framework": cpu.rstrip("/")}  # names are normalised


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"torch; rm -rf": "https://example.org/whl/cpu"}, "is not a project name"),
        ({"torch": "--index-url x"}, "must be an http(s) or file URL"),
    ],
)
def test_a_bad_setting_is_refused_with_what_is_wrong(setting, message):
    with pytest.raises(EnvironmentBuildError, match=re.escape(message)):
        IndexConfig().with_project_indexes(setting)


def test_the_environment_builder_applies_the_setting(framework, sandbox_cache, settings, monkeypatch):
    name, default, cpu = framework
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    host = IndexConfig.host()
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ".join([*host.index_urls[1:], default]))
    settings.SANDBOX_CPU_WHEEL_INDEXES = {name: cpu}
    env_hash = hashlib.sha256(f"rcb-test-cpu-index-{uuid.uuid4()}".encode()).hexdigest()
    environment = backend.environment_build(env_hash=env_hash, requirements=f"{name}>=2.1\n")
    try:
        with backend.session(environment) as session:
            source = f"import {name.replace('-', '_')} as f; print(f.BUILD)"
            result = session.run(
                files={"p.py": source.encode()}, command=[environment.python, "p.py"], limits=Limits(wall_seconds=60)
            )
        assert result.stdout.strip() == "cpu", (result.stdout, result.stderr, environment.build_log[-2000:])
        assert cpu not in environment.build_log, "the build log names files, never where they came from"
    finally:
        backend.environment_remove(env_hash=env_hash)
