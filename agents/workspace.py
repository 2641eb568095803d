"""An agent item's workspace: the public package with the snippet masked, in a folder of the worker's disk kept
between turns, and the answer read back from it.

What the workspace holds, and how the answer is read back from it: evaluation/item_files.py (Harbor's tasks hold
the same).

Between turns (docs/AGENT_RUNS.md): each tools task ends by storing the workspace as a tar in Django storage (named
by trajectory and step, the previous one deleted once the new one is recorded) and marking the local copy with that
name in a file beside it (outside the workspace, so the agent cannot forge it). The next tools task uses the local
copy when its mark is the trajectory's current snapshot and restores the snapshot otherwise (another worker ran the
last tools, or this copy was lost or left mid-task: its mark is removed before a task changes it).

The worker's own file tools (read, write, edit, list) run here as the worker's user, so every path is resolved with
its symbolic links and refused unless it stays inside the workspace; no command of the agent runs between a check
and its use (each command's processes die with it).
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage

logger = logging.getLogger(__name__)

SANDBOX_UID = SANDBOX_GID = 65534  # the bwrap backend's sandbox user, who must own the workspace
FILE_BYTES_MAX = 2 * 1024 * 1024
PAGE_BYTES = 4096  # what a tmpfs allocates a file's data in


class WorkspaceError(ValueError):
    """A tool's path or edit the workspace refuses; the message goes back to the model."""


class Workspace:
    """The item's folder on this worker; created afresh for each attempt at the item."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def create(cls, *, name: str, files: dict[str, bytes]) -> Workspace:
        root = Path(settings.AGENT_WORKSPACE_DIR) / name
        if os.path.lexists(root):  # a lost attempt's workspace, whatever the agent left in it
            cls(root).remove()
            if os.path.lexists(root):
                raise OSError(f"the stale workspace {root} could not be removed")
        root.mkdir(parents=True, mode=0o700)
        workspace = cls(root)
        for path, data in files.items():
            workspace.write(path, data)
        return workspace

    @property
    def mark(self) -> Path:
        """Beside the folder: the name of the stored snapshot this copy is (absent: unknown, never trusted)."""
        return self.root.with_name(self.root.name + ".snapshot")

    def is_snapshot(self, name: str) -> bool:
        try:
            return bool(name) and self.root.is_dir() and self.mark.read_text() == name
        except OSError:
            return False

    def changing(self) -> None:
        """Before a task changes the copy: it is no stored snapshot any more until the task's own is recorded."""
        self.mark.unlink(missing_ok=True)

    def marked(self, name: str) -> None:
        self.mark.write_text(name)

    def snapshot_store(self, *, trajectory_id: int, index: int, cap: int, keep: str) -> tuple[str, bool]:
        """Store the workspace as a tar.gz in storage; returns (its storage name, whole). Over `cap` bytes only
        `keep` (the masked file, which holds the answer) is stored, and whole is False (the item ends: disk)."""
        with tempfile.TemporaryDirectory(prefix="rcb-snapshot-") as folder:
            archive = Path(folder) / "workspace.tar.gz"
            whole = _tar(self.root, archive, ["."]) and archive.stat().st_size <= cap
            if not whole:
                kept = [keep] if os.path.lexists(self.root / keep) else []
                if not _tar(self.root, archive, kept):
                    raise OSError(f"the workspace {self.root} could not be stored")
            name = f"agent-workspaces/{trajectory_id}/{index}-{uuid.uuid4().hex[:12]}.tar.gz"
            with archive.open("rb") as handle:
                return default_storage.save(name, File(handle)), whole

    @classmethod
    def restored(cls, *, name: str, snapshot: str, files: dict[str, bytes]) -> Workspace:
        """The workspace as the last stored step left it: this worker's copy when it is that snapshot, else the
        snapshot from storage, else (no tool has run yet) the start files."""
        local = cls(Path(settings.AGENT_WORKSPACE_DIR) / name)
        if local.is_snapshot(snapshot):
            return local
        local.changing()
        if not snapshot:
            return cls.create(name=name, files=files)
        workspace = cls.create(name=name, files={})
        with tempfile.TemporaryDirectory(prefix="rcb-snapshot-") as folder:
            archive = Path(folder) / "workspace.tar.gz"
            with default_storage.open(snapshot, "rb") as source, archive.open("wb") as target:
                for chunk in iter(lambda: source.read(1 << 20), b""):
                    target.write(chunk)
            done = subprocess.run(
                ["tar", "-xzf", str(archive), "-C", str(workspace.root), "--no-same-owner", "--no-same-permissions"],
                capture_output=True,
                timeout=600,
                check=False,
            )
        if done.returncode != 0:
            raise OSError(f"the workspace snapshot {snapshot} could not be restored: {done.stderr[-500:]!r}")
        workspace.marked(snapshot)
        logger.info("workspace %s restored from storage (%s)", name, snapshot)
        return workspace

    def remove(self) -> None:
        """Remove the workspace, never raising: `rm -rf` walks any depth the agent made (Python's rmtree recurses
        and fails past ~1000 levels); a failure is logged and the next attempt's `create` tries again."""
        try:
            subprocess.run(
                ["rm", "-rf", "--one-file-system", "--", str(self.root)], capture_output=True, timeout=600, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            logger.error("workspace %s not removed: %s", self.root, exc)
        self.mark.unlink(missing_ok=True)
        if os.path.lexists(self.root):
            logger.error("workspace %s is still there after rm -rf", self.root)

    def owned_by_sandbox(self) -> None:
        """Before a command: the sandbox user owns everything (as root only; a non-root worker runs local only).
        `chown -R` (links not followed) walks any depth and path length the agent made."""
        if os.geteuid() != 0:
            return
        subprocess.run(
            ["chown", "-R", "-P", "-h", f"{SANDBOX_UID}:{SANDBOX_GID}", "--", str(self.root)],
            capture_output=True,
            timeout=600,
            check=False,
        )

    def resolve(self, path: str) -> Path:
        """The real path of `path` (relative to the workspace, or /sandbox/...), refused if it leaves it."""
        relative = path.removeprefix("/sandbox/").removeprefix("/sandbox")
        if PurePosixPath(relative).is_absolute():
            raise WorkspaceError(f"{path}: give a path inside the workspace (relative, or under /sandbox)")
        root = self.root.resolve()
        try:
            target = Path(os.path.realpath(root / (relative or ".")))
        except (RecursionError, ValueError) as exc:  # Python 3.11's realpath recurses once per link of a chain
            raise WorkspaceError(f"{path}: a chain of links too deep to follow") from exc
        if target != root and root not in target.parents:
            raise WorkspaceError(f"{path}: the path leaves the workspace")
        _no_link_on(root, target, path=path)
        return target

    def read(self, path: str) -> bytes:
        target = self.resolve(path)
        if not target.is_file():
            raise WorkspaceError(f"{path}: no such file")
        if target.stat().st_size > FILE_BYTES_MAX:
            raise WorkspaceError(f"{path}: larger than {FILE_BYTES_MAX} bytes")
        with os.fdopen(os.open(target, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            return handle.read(FILE_BYTES_MAX + 1)

    def read_text(self, path: str) -> str | None:
        try:
            return self.read(path).decode("utf-8", "replace")
        except WorkspaceError:
            return None

    def write(self, path: str, data: bytes) -> None:
        if len(data) > FILE_BYTES_MAX:
            raise WorkspaceError(f"{path}: larger than {FILE_BYTES_MAX} bytes")
        target = self.resolve(path)
        if target == self.root.resolve() or target.is_dir():
            raise WorkspaceError(f"{path}: is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        self.resolve(str(target.parent.relative_to(self.root.resolve())))  # made under the workspace only
        tmp = target.with_name(f".{target.name}.rcb-tmp")
        tmp.unlink(missing_ok=True)  # never through a link the agent planted under this name
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)

    def over_limits(self, *, disk_bytes: int, files: int) -> str:
        """Why the workspace is over its disk or file-count limit ("" if it is not): measured, not enforced (a hard
        quota is future work, docs/AGENT_RUNS.md), so a command may overshoot before it is found."""
        used, count = 0, 0
        for path in _files_under(self.root, folders_too=True):
            count += 1
            try:
                used += _data_bytes(os.lstat(path))
            except OSError:
                continue
            if used > disk_bytes or count > files:
                break
        if used > disk_bytes:
            return f"the workspace uses more than {disk_bytes} bytes, over the workspace's limit"
        if count > files:
            return f"the workspace holds more than {files} files and folders, over the workspace's limit"
        return ""

    def listing(self, path: str = ".", *, limit: int | None = None) -> list[str]:
        """The files under `path`, sorted; with a limit, the walk stops after that many (those then sorted)."""
        top = self.resolve(path)
        if not top.is_dir():
            raise WorkspaceError(f"{path}: no such folder")
        root = self.root.resolve()
        return sorted(str(Path(found).relative_to(root)) for found in itertools.islice(_files_under(top), limit))


def _data_bytes(entry: os.stat_result) -> int:
    """A file's data as the command's tmpfs counted it: its pages, or fewer where it is sparse (allocated blocks).
    The copy on the worker's disk may hold a block more (ext4's extent metadata, a folder's own block): a file that
    filled the tmpfs to its limit exactly must not read as over it (a CI run ended such an item as "disk")."""
    if not stat.S_ISREG(entry.st_mode):
        return 0  # folders and links hold no data on a tmpfs; the file count bounds them
    return min(entry.st_blocks * 512, -(-entry.st_size // PAGE_BYTES) * PAGE_BYTES)


def _no_link_on(root: Path, target: Path, *, path: str) -> None:
    """Refuse `target` if a link is still on its way from `root`: realpath is not strict and gives up silently (past
    PATH_MAX, CVE-2025-4517's chain of links), returning a path that looks inside but leads out."""
    current = root
    for part in target.relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return  # the rest does not exist yet (a file being written)
        except OSError as exc:  # too long a path, too many links
            raise WorkspaceError(f"{path}: the path cannot be resolved inside the workspace ({exc.strerror})") from exc
        if stat.S_ISLNK(mode):
            raise WorkspaceError(f"{path}: the path leaves the workspace (through a link that does not resolve)")


def _tar(root: Path, archive: Path, paths: list[str]) -> bool:
    """`tar` of `paths` under root (links kept as links, any depth, one file system); False when it failed."""
    done = subprocess.run(
        ["tar", "-czf", str(archive), "-C", str(root), "--one-file-system"]
        + (["--", *paths] if paths else ["--files-from", "/dev/null"]),
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode not in (0, 1):  # 1: a file changed while read (none should: no command runs now)
        logger.error("tar of %s failed: %s", root, done.stderr[-500:])
        return False
    return True


def snapshot_delete(name: str) -> None:
    """Delete a stored snapshot (never raising: a leftover is only space)."""
    if not name:
        return
    try:
        default_storage.delete(name)
    except OSError as exc:
        logger.warning("workspace snapshot %s not deleted: %s", name, exc)


def _files_under(top: Path, *, folders_too: bool = False) -> Iterator[str]:
    """Every file under `top` (and folder, if asked), links not followed, by an explicit stack (os.walk recurses:
    an agent's deep tree would raise RecursionError)."""
    folders = [str(top)]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue  # unreadable or too long a path: not listed
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
                if folders_too:
                    yield entry.path
            else:
                yield entry.path
