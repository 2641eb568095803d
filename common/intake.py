"""Turn an author's untrusted upload (an archive, or a git URL and commit) into a dict of path -> bytes, safely.

Nothing is ever extracted to disk and nothing is kept: the caller keeps the original upload and gets
either the package's files or an `IntakeError` whose message tells the author what is wrong, where
(which entry, file or URL) and which limit applies.

Both sources follow the same rules:
- Paths are relative to the package root, with `/` separators; absolute paths and `..` are refused.
- Junk is skipped: `__MACOSX/`, `.DS_Store`, `__pycache__/`, `*.pyc`, `.git/`.
- Limits (`UploadLimits`, from settings SUBMISSION_*) count every entry and every byte as it is read, so
  a bomb is refused at the limit, never held whole in memory.
- A symlink whose target is a file inside the package comes back as a copy of that file's
  content (the same bytes object). A symlink that cannot be resolved so (absolute, leaving the
  package, dangling, pointing to a directory, a loop) is refused in an archive, which the author
  can easily fix, and skipped in a git commit, which the author cannot change.

Archives (.zip, .tar.gz/.tgz, .tar, recognised by their magic bytes) lose their single common
top-level folder (`repo-main/...`). Hard links in a tar must name an earlier file of the archive.
Device files and FIFOs are refused.

Git repositories are fetched over https only, from public addresses only (settings
SUBMISSION_GIT_ALLOWED_HOSTS lifts the address check for listed hosts), with git's own
configuration, hooks, credential helpers, LFS and submodules switched off, under a deadline and
a size cap; the commit's files are read from git's object store, not from a working tree. To trust
a private CA, set GIT_SSL_CAINFO in the environment (git reads it); verification is never off.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import stat
import struct
import tarfile
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol, cast
from urllib.parse import urlsplit

import git
from django.conf import settings

from common.addresses import AddressRefused, HostUnresolvable, host_addresses_check, ip_literal
from common.errors import ApplicationError
from common.process import process_supervise, tail
from common.sizes import size_text

MB = 1000 * 1000  # decimal, as every size is said (common.sizes)
_CHUNK = 1 << 20
_JUNK_FOLDERS = frozenset({"__MACOSX", "__pycache__", ".git"})
_JUNK_FILES = frozenset({".DS_Store"})
_ZIP_CENTRAL_HEADER = 46  # bytes of a central-directory header before its name, extra field and comment
_ACCEPTED = "a .zip, .tar.gz (.tgz) or .tar archive"
_OTHER_FORMATS = {  # magic bytes of formats authors try, to name them in the refusal
    b"7z\xbc\xaf\x27\x1c": "7z",
    b"Rar!": "RAR",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"(\xb5/\xfd": "zstd",
}
_LINK_HOPS = 40  # like the kernel's limit on nested symlinks
_TAR_HEADER_ALLOWANCE = 4096  # per entry: header, pax records, long names and padding


class IntakeError(ApplicationError):
    """An upload that cannot be taken; the message is for the author (what, where, which limit)."""


@dataclass(frozen=True)
class UploadLimits:
    """What an upload or a clone may hold (the sandbox's run limits are `sandbox.base.Limits`)."""

    max_archive_bytes: int = 50 * MB
    max_unpacked_bytes: int = 200 * MB
    max_files: int = 5000
    max_file_bytes: int = 50 * MB
    clone_timeout: float = 120.0
    max_repo_bytes: int = 200 * MB


def limits_default() -> UploadLimits:
    """Limits from settings SUBMISSION_MAX_ARCHIVE_BYTES, ..._MAX_UNPACKED_BYTES, ..._MAX_FILES,
    ..._MAX_FILE_BYTES, ..._CLONE_TIMEOUT and ..._MAX_REPO_BYTES, each defaulting to `UploadLimits`'s."""
    defaults = UploadLimits()
    return UploadLimits(
        **{
            f.name: getattr(settings, f"SUBMISSION_{f.name.upper()}", getattr(defaults, f.name))
            for f in fields(UploadLimits)
        }
    )


# --- the package being collected (shared by archives and git) ---------------------------------


def _utf8_check(text: str, *, what: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # tarfile keeps undecodable bytes as surrogates
        raw = text.encode("utf-8", "surrogateescape")
        raise IntakeError(f"{where}: {what} {raw!r} is not valid UTF-8; rename it") from None


def _entry_path(name: str, where: str) -> str:
    """The normalized relative path of an entry name ('' for the root), or an IntakeError saying why not."""
    if "\x00" in name:
        raise IntakeError(f"{where}: entry {name!r} has a NUL character in its name")
    _utf8_check(name, what="entry name", where=where)
    unified = name.replace("\\", "/")  # Windows tools write backslashes
    if unified.startswith("/") or re.match(r"[A-Za-z]:(/|$)", unified):
        raise IntakeError(f"{where}: entry '{name}' has an absolute path; paths must be relative to the package folder")
    parts = [part for part in unified.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise IntakeError(f"{where}: entry '{name}' contains '..' and could leave the package folder")
    return "/".join(parts)


def _junk(path: str) -> bool:
    parts = path.split("/")
    return bool(_JUNK_FOLDERS.intersection(parts)) or parts[-1] in _JUNK_FILES or path.endswith(".pyc")


class _LinkUnresolvable(Exception):
    """A symlink that does not end at a file of the package; the message says why."""


@dataclass
class _Package:
    """Files collected from one source, with the limits enforced as they arrive."""

    where: str  # the source as the author knows it, first in every message
    limits: UploadLimits
    noun: str = "entries"
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # path -> symlink target
    folders: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)  # path -> entry name as in the source
    entries: int = 0
    unpacked: int = 0
    skipped: int = 0

    def entry_count(self) -> None:
        self.entries += 1
        if self.entries > self.limits.max_files:
            raise IntakeError(
                f"{self.where} has more than {self.limits.max_files} {self.noun} (limit {self.limits.max_files})"
            )

    def entry_path(self, name: str) -> str | None:
        """The entry's package path, or None when it is skipped (junk, or the root folder itself)."""
        path = _entry_path(name, self.where)
        if not path or _junk(path):
            self.skipped += bool(path)
            return None
        return path

    def size_check(self, name: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise IntakeError(
                f"{self.where}: entry '{name}' is {size_text(size)} unpacked, over the limit "
                f"of {size_text(self.limits.max_file_bytes)} per file"
            )

    def reserve(self, name: str, size: int) -> None:
        """Refuse an entry before reading it when its declared size already breaks a limit."""
        self.size_check(name, size)
        if self.unpacked + size > self.limits.max_unpacked_bytes:
            raise self.too_large()

    def too_large(self) -> IntakeError:
        return IntakeError(
            f"{self.where} unpacks to more than {size_text(self.limits.max_unpacked_bytes)} "
            f"(the limit for unpacked files)"
        )

    def read(self, stream: IO[bytes], name: str, declared: int) -> bytes:
        """Read one entry in chunks, counting bytes as they are decompressed and stopping at the limits."""
        self.reserve(name, declared)
        chunks, count = [], 0
        while chunk := stream.read(_CHUNK):
            count += len(chunk)
            # The declared size passed the limits, so stopping one chunk past it stops at the limits.
            if count > declared:
                raise IntakeError(
                    f"{self.where}: entry '{name}' holds more data than its declared size "
                    f"({size_text(declared)}); the archive is corrupt or forged"
                )
            chunks.append(chunk)
        if count != declared:
            raise IntakeError(
                f"{self.where}: entry '{name}' holds {size_text(count)}, not its declared size "
                f"{size_text(declared)}; the archive is corrupt or forged"
            )
        self.unpacked += count
        return b"".join(chunks)

    def _claim(self, path: str, name: str) -> None:
        if path in self.files or path in self.links or path in self.folders:
            raise IntakeError(f"{self.where}: entry '{name}' appears more than once (as '{path}')")
        self.names[path] = name

    def file_add(self, path: str, name: str, data: bytes) -> None:
        self._claim(path, name)
        self.files[path] = data

    def link_add(self, path: str, name: str, target: str) -> None:
        self._claim(path, name)
        self.links[path] = target

    def folder_add(self, path: str, name: str) -> None:
        if path in self.files or path in self.links:
            raise IntakeError(f"{self.where}: entry '{name}' is both a folder and a file")
        self.folders.add(path)

    def result(self, *, strip_top: bool, refuse_unresolvable: bool) -> dict[str, bytes]:
        """The package's files: top folder stripped, symlinks resolved, path conflicts refused."""
        if strip_top:
            self._top_folder_strip()
        self._conflicts_refuse()
        for path, target in sorted(self.links.items()):
            try:
                self.files[path] = self.files[self._link_follow(path)]
            except _LinkUnresolvable as why:
                if refuse_unresolvable:
                    raise IntakeError(
                        f"{self.where}: symlink '{self.names[path]}' -> '{target}' {why}; "
                        f"only symlinks to files inside the package are accepted"
                    ) from None
        if not self.files:
            detail = (
                f" (only {self.skipped} skipped entries: __MACOSX/, .DS_Store, __pycache__/, *.pyc, .git/)"
                if self.skipped
                else ""
            )
            raise IntakeError(f"{self.where} contains no files{detail}")
        return dict(sorted(self.files.items()))

    def _top_folder_strip(self) -> None:
        paths = [*self.files, *self.links]
        tops = {path.split("/", 1)[0] for path in paths}
        if len(tops) != 1 or not all("/" in path for path in paths):
            return
        cut = len(tops.pop()) + 1
        self.files = {path[cut:]: data for path, data in self.files.items()}
        self.links = {path[cut:]: target for path, target in self.links.items()}
        self.names = {path[cut:]: name for path, name in self.names.items() if len(path) > cut}
        self.folders = {path[cut:] for path in self.folders if len(path) > cut}

    def _conflicts_refuse(self) -> None:
        leaves = {*self.files, *self.links}
        for path in sorted(leaves):
            parts = path.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent in leaves:
                    raise IntakeError(
                        f"{self.where}: entry '{self.names[path]}' is inside "
                        f"'{self.names[parent]}', which is not a folder"
                    )

    def _link_follow(self, path: str) -> str:
        """The path of the file a symlink ends at, following symlinks through real folders only."""
        for _ in range(_LINK_HOPS):
            target = self.links[path]
            if target.startswith("/"):
                raise _LinkUnresolvable("has an absolute target")
            resolved = path.split("/")[:-1]
            steps = [step for step in target.split("/") if step not in ("", ".")]
            for i, step in enumerate(steps):
                if step != "..":
                    resolved.append(step)
                elif resolved:
                    resolved.pop()
                else:
                    raise _LinkUnresolvable("points outside the package")
                if i < len(steps) - 1 and "/".join(resolved) in self.links:  # a symlinked folder
                    raise _LinkUnresolvable(f"goes through the symlink '{'/'.join(resolved)}'")
            path = "/".join(resolved)
            if path in self.files:
                return path
            if path not in self.links:
                if not path or path in self.folders or any(other.startswith(path + "/") for other in self.files):
                    raise _LinkUnresolvable("points to a folder")
                raise _LinkUnresolvable("points to nothing in the package")
        raise _LinkUnresolvable(f"is part of a loop or a chain of more than {_LINK_HOPS} symlinks")


# --- archives ------------------------------------------------------------------------------------


def archive_files(data: bytes | BinaryIO, *, filename: str, limits: UploadLimits) -> dict[str, bytes]:
    """The files of an uploaded .zip, .tar.gz/.tgz or .tar, in memory, as {relative path: content}."""
    raw = _upload_read(data, filename=filename, limit=limits.max_archive_bytes)
    kind = _archive_kind(raw)
    package = _Package(where=filename, limits=limits)
    if kind == "zip":
        _zip_collect(raw, package)
    elif kind in ("tar.gz", "tar"):
        _tar_collect(raw, package, compressed=kind == "tar.gz")
    else:
        found = f"a {kind} file, which is not accepted" if kind else "not an archive we can read"
        raise IntakeError(f"{filename} is {found}: upload {_ACCEPTED}")
    return package.result(strip_top=True, refuse_unresolvable=True)


def _upload_read(data: bytes | BinaryIO, *, filename: str, limit: int) -> bytes:
    """The upload's bytes (at most the limit); a file-like upload is left where it was."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        declared = getattr(data, "size", None)  # Django's UploadedFile knows its size
        if isinstance(declared, int) and declared > limit:
            raise IntakeError(f"{filename} is {size_text(declared)}, over the limit of {size_text(limit)} for archives")
        start = data.tell() if getattr(data, "seekable", lambda: False)() else None
        raw = data.read(limit + 1)
        if start is not None:
            data.seek(start)
        if not isinstance(raw, bytes):
            raise TypeError("archive_files needs a binary file (opened with 'rb')")
    if len(raw) > limit:
        raise IntakeError(f"{filename} is larger than {size_text(limit)}, the limit for archives")
    return raw


def _archive_kind(raw: bytes) -> str | None:
    if raw.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return "zip"
    if raw.startswith(b"\x1f\x8b"):
        return "tar.gz"
    if raw[257:262] == b"ustar" or (raw and len(raw) % tarfile.BLOCKSIZE == 0 and not raw.strip(b"\0")):
        return "tar"  # with a POSIX or GNU header, or empty (only end-of-archive blocks)
    return next((name for magic, name in _OTHER_FORMATS.items() if raw.startswith(magic)), None)


def _zip_collect(raw: bytes, package: _Package) -> None:
    where, limits = package.where, package.limits
    _zip_directory_check(raw, where, max_files=limits.max_files)  # before zipfile builds one object per entry
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except UnicodeDecodeError as exc:
        raise IntakeError(
            f"{where}: entry name {exc.object[:200]!r} is marked UTF-8 but is not valid UTF-8; rename the file"
        ) from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise IntakeError(f"{where} is not a readable zip archive ({exc})") from None
    with archive:
        members = []
        for info in archive.infolist():
            package.entry_count()
            name = _zip_name(info)
            if "\x00" in info.orig_filename:
                raise IntakeError(f"{where}: entry {info.orig_filename!r} has a NUL character in its name")
            path = package.entry_path(name)
            if path is not None:
                members.append((info, name, path))
        for info, name, _ in members:  # the central directory already tells; refuse before reading anything
            package.size_check(name, info.file_size)
        if sum(info.file_size for info, _, _ in members) > limits.max_unpacked_bytes:
            raise package.too_large()
        for info, name, path in members:
            _zip_member_collect(archive, info, name, path, package)


class _ZipfileInternals(Protocol):
    """The private parts of zipfile that read the end record (stable since Python 2; typeshed leaves them out)."""

    _ECD_SIGNATURE: int
    _ECD_ENTRIES_TOTAL: int
    _ECD_SIZE: int
    _ECD_LOCATION: int
    stringEndArchive64: bytes
    sizeEndCentDir64: int
    sizeEndCentDir64Locator: int
    stringCentralDir: bytes

    def _EndRecData(self, fpin: IO[bytes]) -> list[Any] | None: ...


_zipfile = cast(_ZipfileInternals, zipfile)


def _zip_directory_check(raw: bytes, where: str, *, max_files: int) -> None:
    """Refuse a zip whose end record declares too many entries, or whose central directory holds other than the
    declared entries: zipfile parses the whole directory (one object per entry) whatever count is declared."""
    try:
        record = _zipfile._EndRecData(io.BytesIO(raw))
    except OSError:
        record = None
    if not record:
        raise IntakeError(f"{where} is not a readable zip archive (its central directory is missing; truncated?)")
    total, size = record[_zipfile._ECD_ENTRIES_TOTAL], record[_zipfile._ECD_SIZE]
    start = record[_zipfile._ECD_LOCATION] - size
    if record[_zipfile._ECD_SIGNATURE] == _zipfile.stringEndArchive64:
        start -= _zipfile.sizeEndCentDir64 + _zipfile.sizeEndCentDir64Locator
    malformed = f"{where} is not a readable zip archive (its central directory does not match its end record"
    if total > max_files:
        raise IntakeError(f"{where} has more than {max_files} entries (limit {max_files})")
    if start < 0:
        raise IntakeError(f"{malformed})")
    position, end = start, start + size
    for index in range(total):  # walk the fixed headers only: at most `total` steps, no object per entry
        if raw[position : position + 4] != _zipfile.stringCentralDir or position + _ZIP_CENTRAL_HEADER > end:
            raise IntakeError(f"{malformed}: entry {index + 1} of {total} is missing)")
        name, extra, comment = struct.unpack_from("<3H", raw, position + 28)
        position += _ZIP_CENTRAL_HEADER + name + extra + comment
    if position != end:
        raise IntakeError(f"{malformed}: it holds more entries than the {total} it declares)")


def _zip_name(info: zipfile.ZipInfo) -> str:
    """The entry's name: UTF-8 when flagged; otherwise UTF-8 if it decodes (many tools omit the flag), else CP437."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def _zip_member_collect(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, path: str, package: _Package
) -> None:
    where = package.where
    mode = info.external_attr >> 16 if info.create_system == 3 else 0  # Unix mode bits, when written by Unix
    if info.is_dir() or stat.S_ISDIR(mode):
        package.folder_add(path, name)
        return
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise IntakeError(f"{where}: entry '{name}' is a {_mode_kind(mode)}, not a file; remove it")
    if info.flag_bits & 0x1:
        raise IntakeError(f"{where}: entry '{name}' is encrypted; upload an archive without a password")
    try:
        with archive.open(info) as stream:
            if stat.S_ISLNK(mode):
                target = package.read(stream, name, info.file_size)
            else:
                data = package.read(stream, name, info.file_size)
    except NotImplementedError:
        raise IntakeError(
            f"{where}: entry '{name}' uses a compression method we cannot read "
            f"(method {info.compress_type}); use deflate"
        ) from None
    except IntakeError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError, ValueError) as exc:
        raise IntakeError(
            f"{where}: entry '{name}' is corrupt ({exc}); its declared size or checksum does not match its content"
        ) from None
    if stat.S_ISLNK(mode):
        package.link_add(path, name, _link_target_text(target, name, where))
    else:
        package.file_add(path, name, data)


def _mode_kind(mode: int) -> str:
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device file"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def _link_target_text(raw: bytes, name: str, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IntakeError(f"{where}: symlink '{name}' has a target that is not valid UTF-8") from None


class _Exceeded(Exception):
    """Raised by _CountingReader at its cap (not a ValueError, so tarfile cannot mistake it for bad data)."""


class _CountingReader:
    """A read-only stream that counts the bytes it hands out and refuses to go past a cap."""

    def __init__(self, raw: io.BufferedIOBase, cap: int):
        self.raw, self.cap, self.count = raw, cap, 0

    def read(self, size: int = -1) -> bytes:
        size = _CHUNK if size is None or size < 0 else min(size, _CHUNK)
        data = self.raw.read(size)
        self.count += len(data)
        if self.count > self.cap:
            raise _Exceeded
        return data


def _tar_collect(raw: bytes, package: _Package, *, compressed: bool) -> None:
    where, limits = package.where, package.limits
    # Headers, padding and skipped entries are decompressed too: the whole stream is capped, not only files.
    cap = limits.max_unpacked_bytes + (limits.max_files + 2) * _TAR_HEADER_ALLOWANCE
    source: io.BufferedIOBase = io.BytesIO(raw)
    if compressed:
        source = unzipped = gzip.GzipFile(fileobj=source, mode="rb")
        try:  # tell a broken gzip from a gzip of something else
            unzipped.peek(tarfile.BLOCKSIZE)
        except (OSError, EOFError, zlib.error) as exc:
            raise IntakeError(f"{where} is not a readable gzip file ({exc}); upload {_ACCEPTED}") from None
    stream = _CountingReader(source, cap)
    position = "at its start"
    try:
        # The ignore: stream mode ("r|") only reads its fileobj, but typeshed asks every fileobj to seek and write.
        with tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="surrogateescape") as archive:  # type: ignore[call-overload]
            while (member := archive.next()) is not None:
                position = f"after entry '{member.name}'"
                _tar_member_collect(archive, member, package)
                archive.members.clear()  # stream mode keeps every header otherwise
            _tar_rest_check(archive, where, position)
    except _Exceeded:
        raise package.too_large() from None
    except tarfile.ReadError as exc:
        if position == "at its start":
            kind = "gzip data does not hold a tar archive" if compressed else "tar archive is unreadable"
            raise IntakeError(f"{where}: the {kind} ({exc}); upload {_ACCEPTED}") from None
        raise IntakeError(f"{where} is truncated or corrupt {position} ({exc})") from None
    except (EOFError, zlib.error, tarfile.TarError, OSError) as exc:  # OSError covers gzip.BadGzipFile
        raise IntakeError(f"{where} is truncated or corrupt {position} ({exc or type(exc).__name__})") from None


def _tar_rest_check(archive: tarfile.TarFile, where: str, position: str) -> None:
    """After the end-of-archive marker only zero padding may follow; anything else is a header tarfile
    could not read, and everything after it would otherwise be dropped silently."""
    while chunk := archive.fileobj.read(_CHUNK):
        if chunk.strip(b"\0"):
            raise IntakeError(f"{where} is corrupt {position}: what follows is not a readable tar entry")


def _tar_member_collect(archive: tarfile.TarFile, member: tarfile.TarInfo, package: _Package) -> None:
    where, name = package.where, member.name
    package.entry_count()
    if member.ischr() or member.isblk() or member.isfifo():
        raise IntakeError(
            f"{where}: entry '{name}' is a "
            f"{'FIFO (named pipe)' if member.isfifo() else 'device file'}, not a file; remove it"
        )
    if member.issym() or member.islnk():
        _utf8_check(member.linkname, what=f"the target of link '{name}',", where=where)
    path = package.entry_path(name)
    if path is None:
        return
    if member.isdir():
        package.folder_add(path, name)
    elif member.issym():
        if member.linkname.startswith("/"):
            raise IntakeError(
                f"{where}: symlink '{name}' points to the absolute path '{member.linkname}'; "
                f"only symlinks to files inside the package are accepted"
            )
        package.link_add(path, name, member.linkname)
    elif member.islnk():
        package.file_add(path, name, _tar_hardlink_data(member, package))
    elif member.isreg():
        stream = archive.extractfile(member)
        assert stream is not None  # extractfile gives None only for what is neither a file nor a link
        package.file_add(path, name, package.read(stream, name, member.size))
    else:
        raise IntakeError(
            f"{where}: entry '{name}' has an unsupported type ({member.type!r}); "
            f"only files, folders and symlinks are accepted"
        )


def _tar_hardlink_data(member: tarfile.TarInfo, package: _Package) -> bytes:
    """A hard link names an earlier file of the archive (by its archive path): its content is shared."""
    where, name, linkname = package.where, member.name, member.linkname
    if linkname.replace("\\", "/").startswith("/"):
        raise IntakeError(f"{where}: hard link '{name}' points to the absolute path '{linkname}'")
    if ".." in linkname.replace("\\", "/").split("/"):
        raise IntakeError(f"{where}: hard link '{name}' points to '{linkname}', which could leave the package folder")
    target = _entry_path(linkname, where)
    if target not in package.files:
        raise IntakeError(
            f"{where}: hard link '{name}' points to '{linkname}', which is not a file earlier in the archive"
        )
    return package.files[target]


# --- git -------------------------------------------------------------------------------------------

_COMMIT = re.compile(r"[0-9a-fA-F]{7,40}")
_POLL_SECONDS = 0.2
_STDERR_KEEP = 64 * 1024  # a server can send endless "remote:" lines; keep the tail

# Configuration for every git process of a clone, passed as command-scope config (GIT_CONFIG_COUNT),
# which outranks any file and reaches git's own sub-processes (remote helpers, lazy fetches).
_GIT_CONFIG = (
    ("core.hooksPath", os.devnull),  # a repository cannot bring hooks, but no local hook may run either
    ("core.fsmonitor", "false"),
    ("credential.helper", ""),  # never lend the server's credentials to an author's URL
    ("protocol.allow", "never"),  # redirects, submodules, promisor fetches: https and nothing else
    ("protocol.https.allow", "always"),
    ("http.followRedirects", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("filter.lfs.smudge", ""),  # LFS pointers stay pointers; nothing is fetched from an LFS server
    ("filter.lfs.process", ""),
    ("filter.lfs.required", "false"),
    ("gc.auto", "0"),  # no background gc outliving the temp folder
    ("maintenance.auto", "false"),
    ("fetch.writeCommitGraph", "false"),
    ("init.defaultBranch", "intake"),
    ("advice.detachedHead", "false"),
)


def git_url_check(url: str) -> str:
    """The normalized https URL of a public git repository, or an IntakeError saying why it is refused."""
    return _git_url_resolve(url)[0]


def _git_url_resolve(url: str) -> tuple[str, list[str]]:
    """The normalized URL and the addresses its host name resolved to and passed (to pin git's DNS to)."""
    url = (url or "").strip()
    if not url:
        raise IntakeError("git URL is empty")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise IntakeError("git URL must not contain spaces or control characters")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if not scheme:
        if "::" in url.split("/", 1)[0]:
            raise IntakeError("git URL must use https:// (git's transport::address form is refused)")
        if re.match(r"[^/]+:", url):
            raise IntakeError(f"git URL must use https:// ('{url}' is an SSH address, user@host:path)")
        raise IntakeError("git URL must use https:// (for example https://github.com/owner/repo.git)")
    if scheme.group(1).lower() != "https":
        raise IntakeError(f"git URL must use https:// (not {scheme.group(1).lower()}://)")
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise IntakeError("git URL must not contain credentials (user:password@); the repository must be public")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise IntakeError("git URL has no host")
    try:
        port = parts.port
    except ValueError:
        raise IntakeError(f"git URL has an invalid port ({parts.netloc})") from None
    if parts.query:
        raise IntakeError("git URL must not have a query string (?...)")
    if parts.path in ("", "/"):
        raise IntakeError("git URL must name a repository (https://host/owner/repo.git)")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise IntakeError(f"git host {host} is not a valid host name") from None
    literal = ip_literal(host)
    shown = f"[{host}]" if literal and literal.version == 6 else host
    normalized = f"https://{shown}{f':{port}' if port and port != 443 else ''}{parts.path}"
    try:
        addresses = host_addresses_check(
            host, port or 443, what="git host", allowed_hosts=settings.SUBMISSION_GIT_ALLOWED_HOSTS
        )
    except HostUnresolvable as exc:
        raise IntakeError(f"could not reach {normalized}: {exc}") from None
    except AddressRefused as exc:
        raise IntakeError(str(exc)) from None
    return normalized, addresses


def git_files(url: str, commit: str, *, limits: UploadLimits) -> dict[str, bytes]:
    """The files of one commit of a public https git repository, as {relative path: content}."""
    url, addresses = _git_url_resolve(url)
    if not _COMMIT.fullmatch(commit or ""):
        raise IntakeError(f"commit must be a hexadecimal commit hash of 7 to 40 characters (got '{commit}')")
    with tempfile.TemporaryDirectory(prefix="intake-git-") as folder:
        clone = _Clone(Path(folder), url=url, addresses=addresses, limits=limits)
        sha = clone.commit_fetch(commit.lower())
        return clone.files(sha, shown=commit)


class _GitFailed(Exception):
    def __init__(self, stderr: str):
        super().__init__(stderr)
        self.stderr = stderr

    def reason(self) -> str:
        """git's last complaint, shortened for the author."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        complaint = next(
            (line for line in reversed(lines) if line.startswith(("fatal:", "error:"))),
            lines[-1] if lines else "git failed without a message",
        )
        complaint = re.sub(r"^(fatal|error): ", "", complaint)
        complaint = re.sub(r"^unable to access '[^']*': ", "", complaint)
        if "could not read username" in complaint.lower():
            return "the repository does not exist or is not public (the server asked for credentials)"
        return complaint[:300]


class _Clone:
    """One fetch of one commit into a temp folder, each git process under the deadline and the size cap."""

    def __init__(self, root: Path, *, url: str, addresses: list[str], limits: UploadLimits):
        self.root, self.url, self.limits = root, url, limits
        self.deadline = time.monotonic() + limits.clone_timeout
        self.work = root / "repo"
        self.work.mkdir()
        (root / "home").mkdir()
        self.git = git.Git(self.work)
        self.git.update_environment(**self._environment(addresses))

    def _environment(self, addresses: list[str]) -> dict[str, str]:
        config = list(_GIT_CONFIG)
        if addresses:  # connect to the addresses that were checked, not to a second DNS answer
            parts = urlsplit(self.url)
            pinned = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
            config.append(("http.curloptResolve", f"{parts.hostname}:{parts.port or 443}:{pinned}"))
        env = {
            "HOME": str(self.root / "home"),  # no ~/.netrc, ~/.gitconfig or credential stores
            "XDG_CONFIG_HOME": str(self.root / "home"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_LFS_SKIP_SMUDGE": "1",
            "GIT_CONFIG_PARAMETERS": "",
            "GIT_CONFIG_COUNT": str(len(config)),
        }
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        return env

    def commit_fetch(self, commit: str) -> str:
        """Fetch what the commit needs; returns its full hash."""
        self._run("init", "--quiet", "--template=", ".")
        self._run("remote", "add", "origin", self.url)
        try:
            self._run("ls-remote", "--quiet", "origin", "HEAD")
        except _GitFailed as failed:
            raise IntakeError(f"could not reach {self.url}: {failed.reason()}") from None
        if len(commit) == 40:
            # The cheap way, where the server allows fetching any commit by its hash (GitHub, GitLab,
            # protocol v2). The server was just reached, so a refusal is about the commit: try the long way.
            with contextlib.suppress(_GitFailed):
                self._run("fetch", "--quiet", "--no-tags", "--depth", "1", "origin", commit)
                return self._commit_resolve(commit)
        return self._history_fetch(commit)

    def _history_fetch(self, commit: str) -> str:
        """The fallback: every branch and tag without file contents, then the contents of the one commit."""
        try:
            self._run(
                "fetch",
                "--quiet",
                "--filter=blob:none",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
            )
        except _GitFailed as failed:
            raise IntakeError(f"could not reach {self.url}: {failed.reason()}") from None
        sha = self._commit_resolve(commit)
        try:  # checkout fetches the commit's missing blobs in one batch (a partial clone)
            self._run("checkout", "--quiet", "--detach", sha)
        except _GitFailed as failed:
            raise IntakeError(
                f"could not fetch the files of commit {commit} from {self.url}: {failed.reason()}"
            ) from None
        return sha

    def _commit_resolve(self, commit: str) -> str:
        try:
            out = self._run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}")
        except _GitFailed as failed:
            if "ambiguous" in failed.stderr:
                raise IntakeError(
                    f"commit {commit} is ambiguous in {self.url}; give the full 40-character hash"
                ) from None
            raise IntakeError(f"commit {commit} was not found in {self.url}") from None
        return out.decode().strip()

    def files(self, sha: str, *, shown: str) -> dict[str, bytes]:
        """The commit's files: the tree listed and checked against the limits first, then the blobs read."""
        package = _Package(where=f"{self.url} at commit {shown}", limits=self.limits, noun="files")
        blobs: list[tuple[str, str, str, bool]] = []  # (oid, path, entry name, is a symlink)
        pending = bytearray()

        def entries_take(chunk: bytes) -> None:
            pending.extend(chunk)
            *complete, rest = pending.split(b"\0")
            pending[:] = rest
            for entry in complete:
                blob = self._tree_entry(entry, package)
                if blob:
                    blobs.append(blob)

        self._run("ls-tree", "-r", "-z", "--long", "--full-tree", sha, on_stdout=entries_take)
        contents = self._blobs_read(sorted({oid for oid, *_ in blobs}), package)
        for oid, path, name, is_link in blobs:
            if is_link:
                package.link_add(path, name, _link_target_text(contents[oid], name, package.where))
            else:
                package.file_add(path, name, contents[oid])
        return package.result(strip_top=False, refuse_unresolvable=False)

    def _tree_entry(self, entry: bytes | bytearray, package: _Package) -> tuple[str, str, str, bool] | None:
        """One `ls-tree --long` record, checked against the limits before any content is read."""
        package.entry_count()
        meta, _, raw_name = entry.partition(b"\t")
        mode, kind, oid, size = meta.decode("ascii").split()
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise IntakeError(f"{package.where}: file name {raw_name!r} is not valid UTF-8") from None
        if kind == "commit":
            raise IntakeError(
                f"{package.where}: '{name}' is a git submodule, which is not supported; "
                f"add its files to the repository itself or upload an archive"
            )
        path = package.entry_path(name)
        if path is None or kind != "blob":
            return None
        is_link = mode == "120000"
        if not is_link:
            package.reserve(name, int(size))
            package.unpacked += int(size)
        return oid, path, name, is_link

    def _blobs_read(self, oids: list[str], package: _Package) -> dict[str, bytes]:
        """Contents by object id, one blob at a time through GitPython's `cat-file --batch` (the listing
        checked the sizes, and every blob is local by now: nothing more is fetched)."""
        contents = {}
        try:
            for oid in oids:
                if time.monotonic() >= self.deadline:
                    raise self._timeout()
                contents[oid] = self.git.get_object_data(oid)[3]
        except IntakeError:
            raise
        except ValueError as exc:  # GitPython's word for a missing object
            raise IntakeError(f"{package.where}: the server sent incomplete data ({exc})") from None
        finally:
            self.git.clear_cache()  # ends the persistent cat-file process before the folder goes
        return contents

    def _run(self, *args: str, on_stdout: Callable[[bytes], None] | None = None) -> bytes:
        """Run one git command; raises _GitFailed when git fails, IntakeError at the deadline or size cap."""
        if time.monotonic() >= self.deadline:
            raise self._timeout()
        # A session of its own, so a kill reaches git's helpers (remote-https, index-pack) too.
        handle = self.git.execute([self.git.GIT_PYTHON_GIT_EXECUTABLE, *args], as_process=True, start_new_session=True)
        process = handle.proc
        assert process is not None  # as_process=True always starts one
        stderr, out = bytearray(), bytearray()
        process_supervise(
            process,
            stdout=on_stdout or out.extend,
            stderr=tail(_STDERR_KEEP, stderr),
            check=self._limit_passed,
            poll_seconds=_POLL_SECONDS,
        )
        if _folder_bytes(self.root) > self.limits.max_repo_bytes:
            raise self._too_large()
        if process.returncode:
            raise _GitFailed(stderr.decode("utf-8", "replace"))
        return bytes(out)

    def _limit_passed(self) -> IntakeError | None:
        if time.monotonic() >= self.deadline:
            return self._timeout()
        if _folder_bytes(self.root) > self.limits.max_repo_bytes:
            return self._too_large()
        return None

    def _timeout(self) -> IntakeError:
        return IntakeError(f"fetching {self.url} took longer than {self.limits.clone_timeout:g} s (the limit); stopped")

    def _too_large(self) -> IntakeError:
        return IntakeError(
            f"the repository at {self.url} is larger than {size_text(self.limits.max_repo_bytes)} "
            f"(the limit for fetched repositories); stopped"
        )


def _folder_bytes(root: Path) -> int:
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):  # git renames temp files while we look
                total += os.lstat(os.path.join(folder, name)).st_size
    return total
