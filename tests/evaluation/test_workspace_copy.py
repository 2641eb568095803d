"""What comes back from an agent's sandbox is checked on the worker (sandbox/workspace_copy.py): a command may write
the copy-back stream itself (an attacker did, on bwrap, through the end step's descriptor), so the sandbox's own
count is not trusted. Each attack first lands with the limits lifted, then is refused with the workspace untouched."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

from sandbox.workspace_copy import workspace_unpack

NO_LIMIT = 1 << 62


def _archive(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buffer.seek(0)
    return buffer


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _sparse_terabyte() -> tuple[tarfile.TarInfo, bytes]:
    """A GNU sparse member (PAX 1.0) of 1 TiB apparent size and one byte of data, as the attacker forged it."""
    data = b"1\n0\n1\n".ljust(512, b"\0") + b"x"
    info = tarfile.TarInfo("./GNUSparseFile.0/big")
    info.size = len(data)
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "./big",
        "GNU.sparse.realsize": str(1 << 40),
    }
    return info, data


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "work"
    workspace.mkdir(parents=True)
    (workspace / "model.py").write_text("kept\n")
    return workspace


def _unpack(archive, workspace, **limits):
    return workspace_unpack(archive, workspace, deadline=time.monotonic() + 30, **limits)


def test_a_forged_sparse_file_over_the_disk_limit_is_refused_and_the_workspace_kept(tmp_path):
    unguarded = _workspace(tmp_path / "a")
    assert _unpack(_archive([_sparse_terabyte()]), unguarded, max_bytes=NO_LIMIT, max_entries=NO_LIMIT) == []
    assert os.stat(unguarded / "big").st_size == 1 << 40  # the attack lands without the worker's check

    workspace = _workspace(tmp_path / "b")
    forged = _archive([_file("./a.txt", b"forged\n"), _sparse_terabyte()])
    assert _unpack(forged, workspace, max_bytes=64 << 20, max_entries=1000) is None
    assert sorted(p.name for p in workspace.iterdir()) == ["model.py"]
    assert not workspace.with_name("work.rcb-new").exists()


def test_more_entries_than_the_cap_are_refused(tmp_path):
    members = [_file(f"./f{i}", b"") for i in range(50)]
    assert len(os.listdir(unguarded := _workspace(tmp_path / "a"))) == 1
    assert _unpack(_archive(members), unguarded, max_bytes=NO_LIMIT, max_entries=NO_LIMIT) == []
    assert len(os.listdir(unguarded)) == 50

    workspace = _workspace(tmp_path / "b")
    assert _unpack(_archive(members), workspace, max_bytes=NO_LIMIT, max_entries=49) is None
    assert os.listdir(workspace) == ["model.py"]


def test_a_link_chain_too_deep_for_realpath_is_dropped_not_raised(tmp_path):
    """Python 3.11's realpath recurses once per link: 1,200 links raised RecursionError out of the filter and wedged
    every later command of the item."""
    members = [_file("./t", b"target\n")]
    previous = "t"
    for i in range(1200, 0, -1):
        link = tarfile.TarInfo(f"./l{i}")
        link.type, link.linkname = tarfile.SYMTYPE, previous
        members.append((link, None))
        previous = f"l{i}"
    members.append(_file("./model.py", b"answer\n"))
    workspace = _workspace(tmp_path)
    dropped = _unpack(_archive(members), workspace, max_bytes=NO_LIMIT, max_entries=NO_LIMIT)
    assert dropped is not None and (workspace / "model.py").read_text() == "answer\n"


def test_an_answer_at_the_head_of_a_deep_link_chain_reads_as_no_answer_not_an_infrastructure_error(tmp_path):
    """Read for scoring, a model.py at the head of 1,200 links raised RecursionError, which ended the item as an
    infrastructure error (never scored): it is a path the workspace refuses, so the item has no answer."""
    from agents.workspace import Workspace

    root = tmp_path / "work"
    root.mkdir()
    (root / "t").write_text("target\n")
    previous = "t"
    for i in range(1200, 0, -1):
        os.symlink(previous, root / f"l{i}")
        previous = f"l{i}"
    os.symlink(previous, root / "model.py")
    assert Workspace(root).read_text("model.py") is None


def _escaping_chain(
    target: str, *last: tuple[tarfile.TarInfo, bytes | None]
) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """CVE-2025-4517's shape, as the third attack review forged it: a chain of links longer than PATH_MAX, where
    realpath (and so the `data` filter, before Python 3.11.13) stops following, makes `escape` point at
    `<workspace's parent>/<target>`; `escape/pwned` is then written there."""
    long, steps, members = "d" * 247, "abcdefghijklmnop", []

    def entry(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = kind, link, 0o755
        return info, None

    path = ""
    for step in steps:
        members += [
            entry(os.path.join(path, long), tarfile.DIRTYPE),
            entry(os.path.join(path, step), tarfile.SYMTYPE, long),
        ]
        path = os.path.join(path, long)
    chain = os.path.join(*steps, "l" * 254)
    members += [
        entry(chain, tarfile.SYMTYPE, "../" * len(steps)),
        entry("escape", tarfile.SYMTYPE, f"{chain}/../{target}"),
    ]
    return [*members, *last, _file("model.py", b"x = 1\n")]


PWNED = _file("escape/pwned", b"written outside the workspace\n")


def test_a_link_chain_past_path_max_writes_nothing_outside_the_workspace(tmp_path):
    unguarded = tmp_path / "a"
    (unguarded / "outside").mkdir(parents=True)
    (unguarded / "fresh").mkdir()
    with tarfile.open(fileobj=_archive(_escaping_chain("outside", PWNED)), mode="r|") as tar:
        tar.errorlevel = 0
        tar.extractall(unguarded / "fresh", filter="data")
    assert (unguarded / "outside" / "pwned").exists(), "the data filter alone lets the chain write outside"

    (tmp_path / "b" / "outside").mkdir(parents=True)
    workspace = _workspace(tmp_path / "b")
    dropped = _unpack(_archive(_escaping_chain("outside", PWNED)), workspace, max_bytes=NO_LIMIT, max_entries=NO_LIMIT)

    assert not (tmp_path / "b" / "outside" / "pwned").exists()
    assert dropped is not None and "escape/pwned" in dropped
    assert (workspace / "model.py").read_text() == "x = 1\n"


def test_a_hard_link_through_a_link_chain_past_path_max_is_dropped(tmp_path):
    """The same chain, then a hard link to a file of the worker's through it: the link would be the worker's file
    itself, its content read and, once written by a later command, changed."""
    grab = tarfile.TarInfo("grab")
    grab.type, grab.linkname = tarfile.LNKTYPE, "escape/secret"
    unguarded = tmp_path / "a"
    (unguarded / "outside").mkdir(parents=True)
    (unguarded / "outside" / "secret").write_text("the worker's\n")
    (unguarded / "fresh").mkdir()
    with tarfile.open(fileobj=_archive(_escaping_chain("outside", (grab, None))), mode="r|") as tar:
        tar.errorlevel = 0
        tar.extractall(unguarded / "fresh", filter="data")
    assert (unguarded / "fresh" / "grab").stat().st_ino == (unguarded / "outside" / "secret").stat().st_ino

    (tmp_path / "b" / "outside").mkdir(parents=True)
    (tmp_path / "b" / "outside" / "secret").write_text("the worker's\n")
    workspace = _workspace(tmp_path / "b")
    dropped = _unpack(
        _archive(_escaping_chain("outside", (grab, None))), workspace, max_bytes=NO_LIMIT, max_entries=NO_LIMIT
    )

    assert dropped is not None and "grab" in dropped and not (workspace / "grab").exists()


def test_a_hard_link_to_a_member_the_archive_lacks_refuses_the_copy_not_the_worker(tmp_path):
    grab = tarfile.TarInfo("grab")
    grab.type, grab.linkname = tarfile.LNKTYPE, "nowhere/secret"
    workspace = _workspace(tmp_path)

    assert _unpack(_archive([(grab, None)]), workspace, max_bytes=NO_LIMIT, max_entries=NO_LIMIT) is None
    assert (workspace / "model.py").read_text() == "kept\n"


def test_a_workspace_filled_to_its_limit_exactly_is_not_over_it_and_one_page_more_is(tmp_path):
    """A command filled its 64 MB tmpfs to the byte; the copy on the worker's disk took one more block (extent
    metadata) and a CI run ended the item as over its disk limit. The workspace counts data as the tmpfs did: a
    file's pages, and no more than it holds where it is sparse."""
    from agents.workspace import Workspace

    limit = 8 << 20
    root = tmp_path / "work"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "full").write_bytes(b"\1" * limit)  # written, so allocated, as the copy back is
    (root / "sparse").touch()
    os.truncate(root / "sparse", 1 << 40)  # apparent size only
    workspace = Workspace(root)
    assert workspace.over_limits(disk_bytes=limit, files=10) == ""
    (root / "one-more").write_bytes(b"\1")
    assert "more than 8388608 bytes" in workspace.over_limits(disk_bytes=limit, files=10)
    assert "more than 3 files" in workspace.over_limits(disk_bytes=1 << 40, files=3)
