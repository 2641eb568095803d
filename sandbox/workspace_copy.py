"""An agent's workspace copied into a sandbox's size-limited work folder and back (docker_agent.py's containers and
bwrap.py's commands): never bound, so a command can fill no more of the worker's disk than the release's disk limit.
Packed by GNU tar (links archived as links); unpacked by Python's `data` filter into a new folder that replaces the
workspace whole, or not at all (docker_agent.py's docstring says what the filter drops and why)."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sandbox.base import Limits, SandboxError

# The copy's allowance on top of the command's wall limit: a workspace of a few thousand files copies in and back in
# seconds; 20k empty files took ~20-26 s on a loaded 2-core worker (tarfile's filter is per member), so a
# workspace much past that is stopped by the deadline before it reaches AGENT_WORKSPACE_FILES.
COPY_SECONDS = 30.0


def time_limit(limits: Limits, copy_seconds: float) -> str:
    """The limit a command and its copy were held to, in words (the caller's copy allowance: a test may shorten it)."""
    return f"the time limit ({limits.wall_seconds:.0f} s for the command, {copy_seconds:.0f} s for the copy)"


def copy_notes(refused: str, dropped: list[str] | None) -> str:
    """What the command's output says of its copy-back: why it was refused (the workspace as it was), or what the
    filter left out."""
    if refused:
        return f"\n[the workspace was not copied back: {refused}; it stays as it was before this command]"
    if dropped:
        return (
            f"\n[not kept in the workspace: {len(dropped)} entries (links out of it, devices, FIFOs), "
            f"e.g. {', '.join(dropped[:5])}]"
        )
    return ""


def over_reason(state: str, *, entries: int, disk_bytes: int) -> str:
    """Why a workspace over its caps is not copied back (the end step counted before its tar)."""
    if state == "entries":
        return f"it holds more than {entries} files and folders"
    return f"its files hold more than {disk_bytes} bytes (a sparse file counts its full size)"


def workspace_pack(workspace: Path, archive: IO[bytes], *, seconds: float) -> None:
    """The worker's workspace as a tar owned by the sandbox user; GNU tar walks any depth, links not followed,
    sparse files kept sparse (what came back is bounded, so this only guards a workspace restored from storage)."""
    try:
        proc = subprocess.run(
            ["tar", "-c", "--sparse", "-f", "-", "-C", str(workspace)]
            + ["--owner=10001", "--group=10001", "--numeric-owner", "."],
            stdout=archive,
            stderr=subprocess.PIPE,
            timeout=max(1.0, seconds),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed the tar
        raise SandboxError(f"packing the agent's workspace took more than {seconds:.0f} s") from exc
    if proc.returncode not in (0, 1):  # 1: a file changed while read, which nothing does between commands
        raise SandboxError(f"packing the agent's workspace failed: {proc.stderr.decode(errors='replace')[-500:]}")
    archive.flush()
    archive.seek(0)


def workspace_unpack(
    archive: IO[bytes], workspace: Path, *, deadline: float, max_bytes: int, max_entries: int
) -> list[str] | None:
    """Replace `workspace` by the container's copy in `archive`, through the `data` filter; the names it dropped,
    None (and the workspace untouched) if the archive is unreadable, over `max_bytes` (files' apparent sizes, sparse
    ones at their full size) or `max_entries`, or `deadline` (time.monotonic()) passed first. The sandbox counted
    too, but what arrives is checked here: a command may have written the stream itself."""
    dropped: list[str] = []
    fresh = workspace.with_name(workspace.name + ".rcb-new")
    old = workspace.with_name(workspace.name + ".rcb-old")
    for stale in (fresh, old):
        _remove(stale)
    fresh.mkdir(mode=0o700)

    real_folders: set[str] = set()  # folders of the new one already seen not to be links

    def kept(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            if _through_link(fresh, member.name, real_folders, itself=False) or (
                member.islnk() and _through_link(fresh, member.linkname, real_folders, itself=True)
            ):
                raise tarfile.FilterError(member.name)
            return tarfile.data_filter(member, path)
        except (tarfile.FilterError, RecursionError, ValueError):  # a link chain deeper than realpath can follow
            dropped.append(member.name)
            return None

    def within_limits(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        size = 0
        for entries, member in enumerate(tar, 1):
            if time.monotonic() >= deadline:
                raise TimeoutError("the copy-back's deadline passed")
            size += member.size if member.isfile() else 0
            if entries > max_entries or size > max_bytes:
                raise _OverLimit(f"over {max_entries} entries or {max_bytes} bytes")
            yield member

    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            tar.errorlevel = 0  # a member the worker cannot create (too long a path) is left out, not fatal
            tar.extractall(fresh, members=within_limits(tar), filter=kept)
    except (tarfile.TarError, OSError, _OverLimit, RecursionError, ValueError, KeyError):  # KeyError: a hard link to
        _remove(fresh)  # a member the archive does not hold
        return None
    except BaseException:
        _remove(fresh)
        raise
    os.rename(workspace, old)
    os.rename(fresh, workspace)
    _remove(old)
    return [name.removeprefix("./") for name in dropped]


def _through_link(root: Path, name: str, real_folders: set[str], *, itself: bool) -> bool:
    """Whether `name` (in `root`) passes through a link already unpacked (its last part too when `itself`): the `data`
    filter judges links by realpath, which Python before 3.11.13 stops following past PATH_MAX (CVE-2025-4517), so a
    chain can point out of the folder; nothing is written or hard-linked through a link at all."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    prefix = str(root)
    for part in parts if itself else parts[:-1]:
        prefix = os.path.join(prefix, part)
        if prefix in real_folders:
            continue
        if os.path.islink(prefix):
            return True
        if os.path.isdir(prefix):
            real_folders.add(prefix)
    return False


class _OverLimit(Exception):
    """The copy-back holds more than the workspace may."""


def _remove(folder: Path) -> None:
    """`rm -rf` walks any depth the agent made (shutil.rmtree recurses)."""
    if os.path.lexists(folder):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], capture_output=True, check=False)
