"""Fetch the distributions of an environment from this host's package indexes, outside any sandbox, executing nothing.

Files are listed from each index's simple API (PEP 691 JSON or PEP 503 HTML, file:// indexes included) and from
find-links folders or pages, as this host's pip is configured (`pip config list`: index-url, extra-index-url,
find-links, cert, trusted-host, proxy, constraint, timeouts). The configuration is used here only: it never
reaches a build and never appears in a log (which names files, never where they came from).

Nothing is resolved the way pip does it: for each requirement the newest matching file is fetched (a wheel the
target interpreter can install, else the source distribution), and the dependencies a wheel declares in its
METADATA and the build requirements an sdist declares in its pyproject.toml are read as data and fetched too.
pip inside the sandbox then resolves among these files; what it still misses it reports, and is fetched next.
"""

from __future__ import annotations

import ast
import email.parser
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urljoin, urlparse

import requests
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, parse_tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from sandbox.base import EnvironmentBuildError, SandboxError


def _pip_default_index() -> str:
    """pip's own default index when the host's pip configuration names none (pip owns that address, not this file)."""
    from pip._internal.models.index import PyPI

    return PyPI.simple_url


DEFAULT_INDEX = _pip_default_index()
SIMPLE_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
# pip's own default when an sdist has no [build-system] (and what setuptools then asks for).
LEGACY_BUILD_REQUIRES = ("setuptools>=40.8.0", "wheel")
METADATA_BYTES = 4 * 1024 * 1024
SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class Target:
    """The interpreter an environment is built for: its marker environment and the wheel tags it accepts."""

    markers: dict[str, str]
    tags: tuple[str, ...]

    @functools.cached_property
    def tag_rank(self) -> dict[Tag, int]:
        return {tag: rank for rank, text in enumerate(self.tags) for tag in parse_tag(text)}

    @property
    def python(self) -> Version:
        return Version(self.markers["python_full_version"])


@dataclass(frozen=True)
class IndexConfig:
    """Where distributions come from, as this host's pip is configured."""

    index_urls: tuple[str, ...] = (DEFAULT_INDEX,)
    find_links: tuple[str, ...] = ()
    cert: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    proxy: str | None = None
    timeout: float = 15.0
    retries: int = 5
    constraints: dict[str, SpecifierSet] = field(default_factory=dict)
    # Projects whose files come from this one index alone (a framework's CPU wheel index), not from the ones above.
    project_indexes: dict[NormalizedName, str] = field(default_factory=dict)

    def with_project_indexes(self, indexes: dict[str, str]) -> IndexConfig:
        """This configuration with each named project taken from its own index alone; a name or address that is not
        one is refused with what is wrong (an operator's setting: it fails the build, never a project silently)."""
        checked: dict[NormalizedName, str] = {}
        for name, url in indexes.items():
            if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name.strip()):
                raise EnvironmentBuildError(f"SANDBOX_CPU_WHEEL_INDEXES: {name!r} is not a project name")
            if urlparse(url.strip()).scheme not in ("https", "http", "file"):
                raise EnvironmentBuildError(
                    f"SANDBOX_CPU_WHEEL_INDEXES: the index of {name.strip()} must be an http(s) or file URL"
                )
            checked[canonicalize_name(name.strip())] = url.strip().rstrip("/")
        return replace(self, project_indexes=checked)

    @classmethod
    def host(cls) -> IndexConfig:
        """Read now from the worker's own pip (`pip config list`): its files, in the order pip lists them, then its
        PIP_* variables, which win as they do in pip (older pips list the variables first)."""
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PIP_NO_INPUT": "1"},
        )
        values: dict[str, str] = {}
        lines = proc.stdout.splitlines()
        for line in sorted(lines, key=lambda line: line.startswith(":env:")):  # stable: the files' order is kept
            key, _, value = line.partition("=")
            section, _, name = key.rpartition(".")
            if section in ("global", "download", "install", ":env:") and value:
                try:
                    values[name] = str(ast.literal_eval(value))
                except (ValueError, SyntaxError):
                    continue
        if values.get("no-index", "").lower() in ("1", "true", "yes", "on"):
            index_urls: tuple[str, ...] = ()
        else:
            index_urls = (values.get("index-url", DEFAULT_INDEX), *values.get("extra-index-url", "").split())
        return cls(
            index_urls=tuple(url.rstrip("/") for url in index_urls),
            find_links=tuple(values.get("find-links", "").split()),
            cert=values.get("cert"),
            trusted_hosts=tuple(values.get("trusted-host", "").split()),
            proxy=values.get("proxy"),
            timeout=float(values.get("timeout", values.get("default-timeout", 15))),
            retries=int(values.get("retries", 5)),
            constraints=_constraints(values.get("constraint", "").split()),
        )


def _constraints(paths: Sequence[str]) -> dict[str, SpecifierSet]:
    """Version caps from the host's constraint files (local files only), applied when choosing what to fetch."""
    caps: dict[str, SpecifierSet] = {}
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                requirement = Requirement(line.split("#", 1)[0].strip())
            except InvalidRequirement:
                continue
            name = canonicalize_name(requirement.name)
            caps[name] = caps.get(name, SpecifierSet()) & requirement.specifier
    return caps


@dataclass(frozen=True)
class Candidate:
    """One file of a project, as an index lists it (a listing may hold thousands: tags are parsed when asked)."""

    filename: str
    url: str
    version: Version
    sha256: str | None = None
    requires_python: str | None = None
    yanked: bool = False

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @functools.cached_property
    def wheel_tags(self) -> frozenset[Tag]:
        try:
            return parse_wheel_filename(self.filename)[3] if self.is_wheel else frozenset()
        except InvalidWheelFilename:
            return frozenset()


@dataclass
class FetchResult:
    fetched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def requirement_lines(text: str) -> list[Requirement]:
    """The requirements of a task (PEP 508 lines, `#` comments), or EnvironmentBuildError naming the bad line."""
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            raise EnvironmentBuildError(f"requirements line {number}: not a requirement ({exc})", raw) from exc
        if requirement.url:
            raise EnvironmentBuildError(f"requirements line {number}: direct references are not installed", raw)
        found.append(requirement)
    return found


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


class Fetcher:
    """Fetches files into a download cache shared by all builds of this worker, and links them into a build."""

    def __init__(self, *, config: IndexConfig, target: Target, cache: Path, max_bytes: int):
        self.config, self.target, self.cache, self.max_bytes = config, target, cache, max_bytes
        self.cache.mkdir(parents=True, exist_ok=True)
        self.http = requests.Session()
        adapter = requests.adapters.HTTPAdapter(
            max_retries=requests.adapters.Retry(
                total=config.retries, backoff_factor=0.25, status_forcelist=(500, 502, 503, 504)
            )
        )
        self.http.mount("https://", adapter)
        self.http.mount("http://", adapter)
        if config.proxy:
            self.http.proxies = {"http": config.proxy, "https": config.proxy}
        self._listings: dict[NormalizedName, list[Candidate]] = {}
        self._pages: dict[str, list[Candidate]] = {}
        self._seen: set[str] = set()
        self.fetched_bytes = 0

    def fetch(self, requirements: Iterable[Requirement], folder: Path) -> FetchResult:
        """Fetch each requirement and what its files declare they need into `folder` (hard links into the cache)."""
        result = FetchResult()
        queue = [(requirement, frozenset({""})) for requirement in requirements]
        while queue:
            requirement, extras = queue.pop(0)
            if requirement.marker and not any(
                requirement.marker.evaluate({**self.target.markers, "extra": extra}) for extra in extras
            ):
                continue
            if self.tried(requirement):
                continue
            self._seen.add(_key(requirement))
            candidate = self._choose(requirement)
            if candidate is None:
                result.missing.append(str(requirement))
                continue
            path = self._download(candidate)
            destination = folder / candidate.filename
            if not destination.exists():
                _link(path, destination)
                result.fetched.append(candidate.filename)
            wanted = frozenset({"", *map(canonicalize_name, requirement.extras)})
            needs, notes = self._declared(path, candidate)
            queue += [(needed, wanted if candidate.is_wheel else frozenset({""})) for needed in needs]
            result.notes += notes
        return result

    def tried(self, requirement: Requirement) -> bool:
        """Whether this build already looked for this requirement (found or not)."""
        return _key(requirement) in self._seen

    def _choose(self, requirement: Requirement) -> Candidate | None:
        name = canonicalize_name(requirement.name)
        specifier = requirement.specifier & self.config.constraints.get(name, SpecifierSet())
        pinned = any(spec.operator in ("==", "===") for spec in specifier)
        versions = specifier.filter(
            {
                c.version
                for c in self._candidates(name)
                if not (c.yanked and not pinned) and _python_fits(c.requires_python, self.target.python)
            }
        )
        # Newest first; within a version a wheel this interpreter takes (its best tag first), else the sdist.
        for version in sorted(versions, reverse=True):
            files = [
                c
                for c in self._candidates(name)
                if c.version == version
                and not (c.yanked and not pinned)
                and _python_fits(c.requires_python, self.target.python)
            ]
            wheels = [
                (min(self.target.tag_rank.get(tag, 10**6) for tag in c.wheel_tags), c)
                for c in files
                if c.is_wheel and c.wheel_tags & self.target.tag_rank.keys()
            ]
            if wheels:
                return min(wheels, key=lambda ranked: ranked[0])[1]
            sdists = [c for c in files if not c.is_wheel]
            if sdists:
                return sdists[0]
        return None

    def _candidates(self, name: NormalizedName) -> list[Candidate]:
        if name not in self._listings:
            found: list[Candidate] = []
            if name in self.config.project_indexes:  # this index alone: no newer GPU build from elsewhere wins
                found += self._index_files(f"{self.config.project_indexes[name]}/{name}/")
            else:
                for index in self.config.index_urls:
                    found += self._index_files(f"{index}/{name}/")
                for location in self.config.find_links:
                    found += [c for c in self._page_files(location) if _project_of(c.filename) == name]
            self._listings[name] = [c for c in found if _project_of(c.filename) == name]
        return self._listings[name]

    def _index_files(self, url: str) -> list[Candidate]:
        """A project's files on one simple index (PEP 691 JSON or PEP 503 HTML); none when it has no such project."""
        if url.startswith("file:"):
            folder = Path(unquote(urlparse(url).path))
            if (folder / "index.html").is_file():
                return _html_candidates((folder / "index.html").read_text(errors="replace"), url)
            return _folder_candidates(folder)
        response = self._get(url, headers={"Accept": SIMPLE_ACCEPT})
        if response.status_code == 404:
            return []
        self._raise_for(response, "listing a project on the package index")
        if response.headers.get("Content-Type", "").startswith("application/vnd.pypi.simple.v1+json"):
            return _json_candidates(response.json(), response.url)
        return _html_candidates(response.text, response.url)

    def _page_files(self, location: str) -> list[Candidate]:
        if location not in self._pages:
            self._pages[location] = self._page_read(location)
        return self._pages[location]

    def _page_read(self, location: str) -> list[Candidate]:
        if location.startswith(("http://", "https://")):
            response = self._get(location)
            self._raise_for(response, "reading a find-links page")
            return _html_candidates(response.text, response.url)
        path = Path(unquote(urlparse(location).path) if location.startswith("file:") else location)
        if path.is_dir():
            return _folder_candidates(path)
        if path.is_file():
            return _html_candidates(path.read_text(errors="replace"), path.as_uri())
        return []

    def _get(self, url: str, **kwargs) -> requests.Response:
        host = urlparse(url).hostname or ""
        verify: bool | str = False if host in self.config.trusted_hosts else (self.config.cert or True)
        try:
            return self.http.get(url, timeout=self.config.timeout, verify=verify, **kwargs)
        except requests.RequestException as exc:
            # The message may carry the index address (and its credentials): name only the kind of failure.
            raise SandboxError(f"the package index did not answer ({type(exc).__name__})") from exc

    @staticmethod
    def _raise_for(response: requests.Response, what: str) -> None:
        if response.status_code >= 400:
            raise SandboxError(f"{what}: the package index answered HTTP {response.status_code}")

    def _download(self, candidate: Candidate) -> Path:
        """The file in the download cache, fetched once and checked against the index's sha256 when it gives one."""
        cached = self.cache / (candidate.sha256 or "unhashed") / candidate.filename
        if cached.is_file():
            return cached
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{candidate.filename}.{os.getpid()}.partial")
        digest = hashlib.sha256()
        try:
            if candidate.url.startswith("file:"):
                with open(unquote(urlparse(candidate.url).path), "rb") as source, open(partial, "wb") as out:
                    while chunk := source.read(1 << 20):
                        self._take(chunk, digest, out)
            else:
                with self._get(candidate.url, stream=True) as response, open(partial, "wb") as out:
                    self._raise_for(response, f"downloading {candidate.filename}")
                    try:
                        for chunk in response.iter_content(1 << 20):
                            self._take(chunk, digest, out)
                    except requests.RequestException as exc:
                        raise SandboxError(f"downloading {candidate.filename} failed ({type(exc).__name__})") from exc
            if candidate.sha256 and digest.hexdigest() != candidate.sha256:
                raise SandboxError(f"{candidate.filename}: its sha256 differs from the one the index lists")
            partial.replace(cached)
        finally:
            partial.unlink(missing_ok=True)
        return cached

    def _take(self, chunk: bytes, digest, out) -> None:
        self.fetched_bytes += len(chunk)
        if self.fetched_bytes > self.max_bytes:
            raise EnvironmentBuildError(
                f"the requirements need more than {self.max_bytes // (1024 * 1024)} MB of distributions"
            )
        digest.update(chunk)
        out.write(chunk)

    @staticmethod
    def _declared(path: Path, candidate: Candidate) -> tuple[list[Requirement], list[str]]:
        """What a file says it needs, read as data: a wheel's Requires-Dist, an sdist's build requirements."""
        texts = _wheel_requires(path) if candidate.is_wheel else _sdist_build_requires(path)
        found, notes = [], []
        for text in texts:
            try:
                found.append(Requirement(text))
            except InvalidRequirement:
                notes.append(f"{candidate.filename}: ignored a declared requirement that does not parse: {text!r}")
        return found, notes


def _key(requirement: Requirement) -> str:
    return f"{canonicalize_name(requirement.name)}{sorted(requirement.extras)}{requirement.specifier}"


def _link(source: Path, destination: Path) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copyfile(source, destination)
    os.chmod(destination, 0o644)


def _project_of(filename: str) -> NormalizedName | None:
    try:
        if filename.endswith(".whl"):
            return canonicalize_name(filename.split("-")[0])
        if filename.endswith(SDIST_SUFFIXES):
            return parse_sdist_filename(filename)[0]
    except InvalidSdistFilename:
        return None
    return None


def _candidate(
    url: str, *, sha256: str | None = None, requires_python: str | None = None, yanked: bool = False, base: str = ""
) -> Candidate | None:
    """The file an index links to, if its name is a distribution's; a remote page never leads to a local file."""
    if base.startswith(("http://", "https://")) and not url.startswith(("http://", "https://")):
        return None
    filename = unquote(PurePosixPath(urlparse(url).path).name)
    if not filename or filename.startswith(".") or "/" in filename or "\\" in filename:
        return None
    try:
        if filename.endswith(".whl"):
            # name-version-...: the version alone now; the tags only for the files a build considers.
            version = Version(filename.split("-")[1])
        elif filename.endswith(SDIST_SUFFIXES):
            version = parse_sdist_filename(filename)[1]
        else:
            return None
    except (InvalidSdistFilename, InvalidVersion, IndexError):
        return None
    return Candidate(filename, url, version, sha256, requires_python, yanked)


@functools.lru_cache(maxsize=4096)
def _python_fits(requires_python: str | None, python: Version) -> bool:
    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True


def _html_candidates(html: str, base: str) -> list[Candidate]:
    parser = _Anchors()
    parser.feed(html)
    found = []
    for link in parser.links:
        href = link.get("href")
        if not href:
            continue
        url, _, fragment = urljoin(base, href).partition("#")
        sha256 = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        candidate = _candidate(
            url,
            sha256=sha256,
            requires_python=link.get("data-requires-python"),
            yanked="data-yanked" in link,
            base=base,
        )
        if candidate:
            found.append(candidate)
    return found


def _json_candidates(data: dict, base: str) -> list[Candidate]:
    found = []
    for item in data.get("files", []):
        candidate = _candidate(
            urljoin(base, item.get("url", "")),
            sha256=(item.get("hashes") or {}).get("sha256"),
            requires_python=item.get("requires-python"),
            yanked=bool(item.get("yanked")),
            base=base,
        )
        if candidate:
            found.append(candidate)
    return found


def _folder_candidates(folder: Path) -> list[Candidate]:
    if not folder.is_dir():
        return []
    return [c for path in sorted(folder.iterdir()) if path.is_file() and (c := _candidate(path.as_uri()))]


def _wheel_requires(path: Path) -> list[str]:
    try:
        with zipfile.ZipFile(path) as wheel:
            member = next(
                (
                    info
                    for info in wheel.infolist()
                    if info.filename.count("/") == 1 and info.filename.endswith(".dist-info/METADATA")
                ),
                None,
            )
            if member is None or member.file_size > METADATA_BYTES:
                return []
            text = wheel.read(member).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile) as exc:
        raise EnvironmentBuildError(f"{path.name}: not a readable wheel ({exc})") from exc
    return email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or []


def _sdist_build_requires(path: Path) -> list[str]:
    """[build-system] requires of the sdist's top-level pyproject.toml, or pip's legacy default."""
    text = None
    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                member = next(
                    (i for i in archive.infolist() if re.fullmatch(r"[^/]+/pyproject\.toml", i.filename)), None
                )
                if member is not None and member.file_size <= METADATA_BYTES:
                    text = archive.read(member).decode("utf-8", "replace")
        else:
            with tarfile.open(path) as archive:
                for info in archive:
                    if re.fullmatch(r"[^/]+/pyproject\.toml", info.name) and info.isfile():
                        if info.size <= METADATA_BYTES and (stream := archive.extractfile(info)):
                            text = stream.read().decode("utf-8", "replace")
                        break
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise EnvironmentBuildError(f"{path.name}: not a readable source distribution ({exc})") from exc
    if text is None:
        return list(LEGACY_BUILD_REQUIRES)
    try:
        build_system = tomllib.loads(text).get("build-system")
    except tomllib.TOMLDecodeError:
        return list(LEGACY_BUILD_REQUIRES)
    if not isinstance(build_system, dict) or "requires" not in build_system:
        return list(LEGACY_BUILD_REQUIRES)
    requires = [r for r in build_system.get("requires", []) if isinstance(r, str)]
    if "build-backend" not in build_system and not any(
        canonicalize_name(Requirement(r).name) == "wheel" for r in requires if _parses(r)
    ):
        requires.append("wheel")
    return requires


def _parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def target_from_probe(stdout: str) -> Target:
    """The Target printed by PROBE in the environment's interpreter."""
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        return Target(markers=dict(data["markers"]), tags=tuple(data["tags"]))
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        raise SandboxError(f"the environment's interpreter did not describe itself: {stdout[-500:]!r}") from exc


# Run by the environment's own interpreter (pip's vendored packaging is there: pip is what installs).
PROBE = (
    "import json; from pip._vendor.packaging import markers, tags; "
    "print(json.dumps({'markers': markers.default_environment(), 'tags': [str(t) for t in tags.sys_tags()]}))"
)
