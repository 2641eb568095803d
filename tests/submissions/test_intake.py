"""Intake of untrusted uploads: archives read safely in memory, git commits fetched safely over https."""

from __future__ import annotations

import contextlib
import gzip
import io
import ipaddress
import os
import socket
import stat
import subprocess
import tarfile
import tempfile
import time
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from common.intake import IntakeError, UploadLimits, archive_files, git_files, git_url_check, limits_default
from tests.submissions.git_server import git_https_server

MB = 1000 * 1000  # decimal, as the site says sizes (common.sizes)


# --- archive builders ----------------------------------------------------------------------------


def zip_bytes(files: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def tar_member(name: str, data: bytes = b"", *, kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def tar_bytes(*members: tuple, compressed: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compressed else "w", format=tarfile.GNU_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def refused(data: bytes, *, filename: str = "paper.zip", limits: UploadLimits | None = None) -> str:
    with pytest.raises(IntakeError) as caught:
        archive_files(data, filename=filename, limits=limits or UploadLimits())
    return str(caught.value)


@pytest.fixture(scope="module")
def zip_bomb() -> bytes:
    """1 GB of zeros in ~1 MB, written through zipfile's streaming writer (never 1 GB in memory)."""
    buffer = io.BytesIO()
    zeros = bytes(MB)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("paper/README.md", b"innocent\n")
        with archive.open("paper/weights.bin", "w", force_zip64=True) as entry:
            for _ in range(1024):
                entry.write(zeros)
    return buffer.getvalue()


# --- archives: what is kept ------------------------------------------------------------------------


def test_zip_gives_files_relative_to_the_package_root_without_junk():
    data = zip_bytes(
        {
            "repo-main/paper2code_test.py": b"import model\n",
            "repo-main/src/model.py": b"x = 1\n",
            "repo-main/.DS_Store": b"\0",
            "repo-main/src/__pycache__/model.cpython-311.pyc": b"\0",
            "repo-main/src/old.pyc": b"\0",
            "repo-main/.git/config": b"[core]\n",
            "__MACOSX/repo-main/._model.py": b"\0",
            "repo-main/docs/": b"",
        }
    )
    upload = SimpleUploadedFile("paper.zip", data)

    files = archive_files(upload, filename=upload.name, limits=UploadLimits())

    assert files == {"paper2code_test.py": b"import model\n", "src/model.py": b"x = 1\n"}
    assert upload.tell() == 0 and upload.read() == data  # the caller's upload is left as it was


def test_tar_gz_and_plain_tar_are_recognised_by_content_with_the_top_folder_stripped():
    members = (
        tar_member("./repo-1.0/", kind=tarfile.DIRTYPE),
        tar_member("./repo-1.0/a.py", b"a = 1\n"),
        tar_member("./repo-1.0/pkg/b.py", b"b = 2\n"),
    )
    expected = {"a.py": b"a = 1\n", "pkg/b.py": b"b = 2\n"}

    assert archive_files(tar_bytes(*members), filename="repo.tgz", limits=UploadLimits()) == expected
    assert (
        archive_files(tar_bytes(*members, compressed=False), filename="upload.bin", limits=UploadLimits()) == expected
    )


def test_a_single_top_level_file_keeps_its_place_and_names_in_cp437_zips_decode():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("donn\u00e9es.py")  # stored as CP437, as old Windows tools do
        archive.writestr(info, b"x = 1\n")
        archive.writestr("notes.md", b"hi\n")
    assert archive.infolist()[0].flag_bits & 0x800 == 0

    assert archive_files(buffer.getvalue(), filename="p.zip", limits=UploadLimits()) == {
        "donn\u00e9es.py": b"x = 1\n",
        "notes.md": b"hi\n",
    }


def test_symlinks_and_hard_links_inside_the_package_become_the_file_content():
    tar = tar_bytes(
        tar_member("p/src/model.py", b"M\n"),
        tar_member("p/model.py", kind=tarfile.SYMTYPE, link="src/model.py"),
        tar_member("p/copy.py", kind=tarfile.LNKTYPE, link="p/src/model.py"),
    )
    assert archive_files(tar, filename="p.tar.gz", limits=UploadLimits()) == {
        "copy.py": b"M\n",
        "model.py": b"M\n",
        "src/model.py": b"M\n",
    }

    zipped = zip_bytes({"p/src/model.py": b"M\n"}, symlinks={"p/link.py": "src/model.py"})
    assert archive_files(zipped, filename="p.zip", limits=UploadLimits())["link.py"] == b"M\n"


# --- archives: bombs and limits ---------------------------------------------------------------------


def test_zip_bomb_is_refused_quickly_without_being_unpacked(zip_bomb):
    assert len(zip_bomb) < 2 * MB
    tracemalloc.start()
    started = time.monotonic()
    try:
        message = refused(zip_bomb, filename="bomb.zip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert time.monotonic() - started < 2
    assert peak < 16 * MB
    assert "bomb.zip: entry 'paper/weights.bin' is 1 GB unpacked, over the limit of 50 MB per file" in message


def test_zip_bomb_under_the_per_file_limit_is_refused_at_the_total_limit(zip_bomb):
    message = refused(zip_bomb, filename="bomb.zip", limits=UploadLimits(max_file_bytes=2 << 30))
    assert message == "bomb.zip unpacks to more than 200 MB (the limit for unpacked files)"


def test_zip_entry_whose_declared_size_lies_is_refused_after_reading_only_the_declared_bytes():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("big.bin", "w") as entry:
        for _ in range(64):
            entry.write(bytes(MB))
    forged = bytearray(buffer.getvalue())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header, central directory
        at = forged.index(signature)
        forged[at + offset : at + offset + 4] = (1000).to_bytes(4, "little")

    started = time.monotonic()
    message = refused(bytes(forged), filename="forged.zip")

    assert time.monotonic() - started < 1
    assert "forged.zip: entry 'big.bin' is corrupt" in message and "declared size" in message


def test_tar_gz_stream_is_capped_while_decompressing_even_for_skipped_entries():
    junk = tar_member("p/__pycache__/huge.pyc", bytes(3 * MB))  # never kept, but it must be decompressed past
    data = tar_bytes(tar_member("p/a.py", b"a\n"), junk)
    message = refused(data, filename="p.tar.gz", limits=UploadLimits(max_unpacked_bytes=MB, max_files=10))
    assert message == "p.tar.gz unpacks to more than 1 MB (the limit for unpacked files)"


def test_tar_entry_over_the_per_file_limit_is_refused_from_its_header():
    data = tar_bytes(tar_member("p/data.bin", bytes(2 * MB)))
    message = refused(data, filename="p.tgz", limits=UploadLimits(max_file_bytes=MB))
    assert message == "p.tgz: entry 'p/data.bin' is 2 MB unpacked, over the limit of 1 MB per file"


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_too_many_entries(kind):
    names = [f"p/f{i}.py" for i in range(6)]
    data = zip_bytes(dict.fromkeys(names, b"")) if kind == "zip" else tar_bytes(*(tar_member(n) for n in names))
    assert refused(data, filename="many", limits=UploadLimits(max_files=5)) == "many has more than 5 entries (limit 5)"


def central_directory_bomb(*, entries: int, declared: int) -> bytes:
    """One stored file whose central directory repeats its header `entries` times; the end record says `declared`."""
    import struct
    import zlib

    name, data = b"f" * 40, b"x"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(data), 1, 1, len(name), 0) + name + data
    header = (
        struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, zlib.crc32(data), 1, 1, len(name), 0, 0, 0, 0, 0, 0
        )
        + name
    )
    directory = header * entries
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, declared, declared, len(directory), len(local), 0)
    return local + directory + end


# It measures its own time, yet runs beside other tests: 0.1-0.2 s on this 2-core machine at a load of 13, against
# its bound of 1 s (zipfile took seconds); its memory peak is this process's alone.
@pytest.mark.parametrize("declared", [1, 5000])
def test_zip_central_directory_holding_more_entries_than_declared_is_refused_before_zipfile_parses_it(declared):
    bomb = central_directory_bomb(entries=400_000, declared=declared)  # 34 MB
    assert len(bomb) > 30 * MB
    tracemalloc.start()
    started = time.perf_counter()
    message = refused(bomb, filename="bomb.zip", limits=UploadLimits(max_archive_bytes=50 * MB, max_files=5000))
    elapsed, peak = time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert message == (
        f"bomb.zip is not a readable zip archive (its central directory does not match its end "
        f"record: it holds more entries than the {declared} it declares)"
    )
    # zipfile itself took seconds and over 200 MB here (one ZipInfo per entry) before the entry count was refused.
    assert elapsed < 1.0 and peak < 5 * MB, f"{elapsed:.2f} s, {peak / MB:.1f} MB"


def test_zip_central_directory_declaring_more_entries_than_it_holds_is_refused():
    message = refused(central_directory_bomb(entries=3, declared=4), filename="short.zip")
    assert message.endswith("end record: entry 4 of 4 is missing)")


def test_zip_with_zip64_end_records_is_read():
    import struct

    plain = zip_bytes({"p/a.py": b"a = 1\n", "p/b.py": b"b = 2\n", "p/c.txt": b"c"})
    end = plain[-22:]  # the classic end record (no comment); rewritten as zip64, as tools do past 65535 entries
    _, _, _, _, entries, size, offset, _ = struct.unpack("<4s4H2LH", end)
    body = plain[:-22]
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(body), 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    files = archive_files(body + end64 + locator + classic, filename="z64.zip", limits=UploadLimits())
    assert files == {"a.py": b"a = 1\n", "b.py": b"b = 2\n", "c.txt": b"c"}


def test_upload_over_the_archive_limit():
    assert (
        refused(bytes(2 * MB), filename="big.zip", limits=UploadLimits(max_archive_bytes=MB))
        == "big.zip is larger than 1 MB, the limit for archives"
    )
    upload = SimpleUploadedFile("big.zip", bytes(3 * MB))
    with pytest.raises(IntakeError, match=r"^big\.zip is 3 MB, over the limit of 1 MB for archives$"):
        archive_files(upload, filename="big.zip", limits=UploadLimits(max_archive_bytes=MB))


# --- archives: entries that are refused ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_path_traversal_is_refused_naming_the_entry(kind):
    data = (
        zip_bytes({"p/ok.py": b"", "../evil.py": b"x"})
        if kind == "zip"
        else tar_bytes(tar_member("p/ok.py"), tar_member("../evil.py", b"x"))
    )
    assert "entry '../evil.py' contains '..' and could leave the package folder" in refused(data)


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_absolute_path_is_refused_naming_the_entry(kind):
    data = zip_bytes({"/etc/cron.d/evil": b"x"}) if kind == "zip" else tar_bytes(tar_member("/etc/cron.d/evil", b"x"))
    assert "entry '/etc/cron.d/evil' has an absolute path" in refused(data)


def test_backslash_traversal_from_windows_tools_is_refused():
    assert "entry '..\\evil.py' contains '..'" in refused(zip_bytes({"..\\evil.py": b"x"}))


def test_absolute_symlink_in_a_tar_is_refused():
    data = tar_bytes(tar_member("p/a.py", b"a"), tar_member("p/passwd", kind=tarfile.SYMTYPE, link="/etc/passwd"))
    assert refused(data, filename="p.tgz") == (
        "p.tgz: symlink 'p/passwd' points to the absolute path '/etc/passwd'; "
        "only symlinks to files inside the package are accepted"
    )


# "../../p/a.py" is a file of the archive, but above the package root once the top folder is stripped
@pytest.mark.parametrize("target", ["../../etc/passwd", "../../p/a.py", "sub/../../../x"])
def test_symlink_escaping_with_dotdot_is_refused(target):
    data = tar_bytes(tar_member("p/a.py", b"a"), tar_member("p/sub/link", kind=tarfile.SYMTYPE, link=target))
    assert f"symlink 'p/sub/link' -> '{target}' points outside the package" in refused(data, filename="p.tgz")


def test_symlink_escaping_in_a_zip_is_refused():
    data = zip_bytes({"a.py": b"a"}, symlinks={"key": "../../home/user/.ssh/id_rsa"})
    assert "symlink 'key' -> '../../home/user/.ssh/id_rsa' points outside the package" in refused(data)


@pytest.mark.parametrize(
    ("target", "why"),
    [("missing.py", "points to nothing in the package"), ("sub", "points to a folder"), ("loop", "is part of a loop")],
)
def test_symlinks_that_do_not_end_at_a_file_are_refused(target, why):
    data = tar_bytes(
        tar_member("sub/a.py", b"a"),
        tar_member("loop", kind=tarfile.SYMTYPE, link="loop2"),
        tar_member("loop2", kind=tarfile.SYMTYPE, link="loop"),
        tar_member("link", kind=tarfile.SYMTYPE, link=target),
    )
    assert why in refused(data, filename="p.tgz")


def test_hard_link_leaving_the_archive_is_refused():
    data = tar_bytes(tar_member("p/a.py", b"a"), tar_member("p/shadow", kind=tarfile.LNKTYPE, link="/etc/shadow"))
    assert "hard link 'p/shadow' points to the absolute path '/etc/shadow'" in refused(data)
    data = tar_bytes(tar_member("p/a.py", b"a"), tar_member("p/up", kind=tarfile.LNKTYPE, link="../x"))
    assert "hard link 'p/up' points to '../x', which could leave the package folder" in refused(data)


@pytest.mark.parametrize(
    ("kind", "what"),
    [(tarfile.CHRTYPE, "device file"), (tarfile.BLKTYPE, "device file"), (tarfile.FIFOTYPE, "FIFO (named pipe)")],
)
def test_device_files_and_fifos_are_refused(kind, what):
    data = tar_bytes(tar_member("p/a.py", b"a"), tar_member("p/dev", kind=kind))
    assert refused(data, filename="p.tgz") == f"p.tgz: entry 'p/dev' is a {what}, not a file; remove it"


def test_duplicate_paths_are_refused():
    data = tar_bytes(tar_member("p/a.py", b"one"), tar_member("p/./a.py", b"two"))
    assert "entry 'p/./a.py' appears more than once (as 'p/a.py')" in refused(data)


def test_entry_names_that_are_not_utf8_are_refused_with_their_bytes():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT, encoding="latin-1") as archive:
        archive.addfile(tarfile.TarInfo("caf\u00e9.py"), io.BytesIO(b""))
    assert "entry name b'caf\\xe9.py' is not valid UTF-8" in refused(buffer.getvalue(), filename="p.tar")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"print('not an archive')\n", "code.zip is not an archive we can read: upload a .zip, .tar.gz (.tgz) or .tar"),
        (b"7z\xbc\xaf\x27\x1c" + bytes(40), "code.zip is a 7z file, which is not accepted: upload a .zip, .tar.gz"),
        (b"\x1f\x8b\x08\x00" + bytes(20), "code.zip is not a readable gzip file (Error -3 while decompressing"),
        (b"", "code.zip is not an archive we can read"),
    ],
)
def test_not_an_archive(data, expected):
    assert refused(data, filename="code.zip").startswith(expected)


def test_gzip_that_does_not_hold_a_tar_is_refused():
    assert "code.tgz: the gzip data does not hold a tar archive" in refused(
        gzip.compress(b"hello " * 200), filename="code.tgz"
    )


@pytest.mark.parametrize(
    "data",
    [zip_bytes({}), tar_bytes(), tar_bytes(compressed=False), zip_bytes({"p/": b"", "__MACOSX/p/._a": b"x"})],
    # Named: a gzip header holds the time it was made, so ids from the bytes differ between xdist workers.
    ids=["zip", "tar.gz", "tar", "zip-of-folders-and-macos-files"],
)
def test_empty_archive(data):
    assert refused(data, filename="empty").startswith("empty contains no files")


def test_truncated_tar_gz_is_refused():
    data = tar_bytes(tar_member("p/a.py", bytes(100_000)), tar_member("p/b.py", os.urandom(100_000)))
    assert "p.tgz is truncated or corrupt" in refused(data[: len(data) // 2], filename="p.tgz")


def test_limits_default_reads_settings(settings):
    settings.SUBMISSION_MAX_FILES = 7
    settings.SUBMISSION_CLONE_TIMEOUT = 5
    assert limits_default() == UploadLimits(max_files=7, clone_timeout=5)


# --- git URLs ---------------------------------------------------------------------------------------


@pytest.fixture
def no_git_process(monkeypatch):
    """Fail the test if anything starts git (and so contacts a host)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"git was started: {args[1:]}")

    monkeypatch.setattr(git.cmd.Git, "execute", refuse)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///srv/repos/secret.git", "git URL must use https:// (not file://)"),
        ("http://github.com/owner/repo.git", "git URL must use https:// (not http://)"),
        ("ssh://git@github.com/owner/repo.git", "git URL must use https:// (not ssh://)"),
        ("git://github.com/owner/repo.git", "git URL must use https:// (not git://)"),
        (
            "git@github.com:owner/repo.git",
            "git URL must use https:// ('git@github.com:owner/repo.git' is an SSH address",
        ),
        ("ext::sh%20-c%20touch%20pwned", "git URL must use https:// (git's transport::address form is refused)"),
        ("https://user:token@github.com/owner/repo.git", "git URL must not contain credentials (user:password@)"),
        ("https://127.0.0.1/repo.git", "git host 127.0.0.1 is a loopback address; refused"),
        ("https://10.0.0.1/repo.git", "git host 10.0.0.1 is a private-network address; refused"),
        ("https://192.168.1.20:8443/repo.git", "git host 192.168.1.20 is a private-network address; refused"),
        ("https://[::1]/repo.git", "git host ::1 is a loopback address; refused"),
        ("https://[::ffff:127.0.0.1]/repo.git", "git host ::ffff:127.0.0.1 is a loopback address; refused"),
        ("https://[::ffff:10.0.0.1]/repo.git", "git host ::ffff:10.0.0.1 is a private-network address; refused"),
        (
            "https://[2002:7f00:1::]/repo.git",
            "git host 2002:7f00:1:: is a 6to4 address for 127.0.0.1, a loopback address",
        ),
        (
            "https://[2002:a9fe:a9fe::1]/x.git",
            "git host 2002:a9fe:a9fe::1 is a 6to4 address for 169.254.169.254, a link-",
        ),
        (
            "https://[2002:c0a8:0101::]/repo.git",
            "git host 2002:c0a8:0101:: is a 6to4 address for 192.168.1.1, a private-",
        ),
        # Teredo: the client's IPv4 is stored inverted (here 127.0.0.1 and 10.0.0.1), the server's in the clear.
        (
            "https://[2001:0:5ef5:79fd::80ff:fffe]/r.git",
            "git host 2001:0:5ef5:79fd::80ff:fffe is a Teredo address for 127.0.0.1, a loopback address; refused",
        ),
        (
            "https://[2001:0:4136:e378::f5ff:fffe]/r.git",
            "git host 2001:0:4136:e378::f5ff:fffe is a Teredo address for 10.0.0.1, a private-network address; refused",
        ),
        (
            "https://[64:ff9b::a9fe:a9fe]/latest/meta-data",
            "git host 64:ff9b::a9fe:a9fe is a NAT64 address for 169.254.169.254, a link-local address; refused",
        ),
        (
            "https://[::127.0.0.1]/repo.git",
            "git host ::127.0.0.1 is an IPv4-compatible address for 127.0.0.1, a loopback",
        ),
        ("https://169.254.169.254/latest/meta-data", "git host 169.254.169.254 is a link-local address; refused"),
        ("https://[fd12::1]/repo.git", "git host fd12::1 is a unique-local address; refused"),
        ("https://224.0.0.1/repo.git", "git host 224.0.0.1 is a multicast address; refused"),
        ("https://0.0.0.0/repo.git", "git host 0.0.0.0 is an unspecified address; refused"),
        ("https://localhost/repo.git", "git host localhost resolves to a loopback address ("),
        ("https://127.1/repo.git", "git host 127.1 resolves to a loopback address (127.0.0.1); refused"),
    ],
)
def test_forbidden_git_urls_are_refused_before_anything_is_contacted(url, message, settings, no_git_process):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = []
    with pytest.raises(IntakeError) as caught:
        git_files(url, "0" * 40, limits=UploadLimits())
    assert str(caught.value).startswith(message)


def test_host_name_resolving_to_a_6to4_address_of_a_private_one_is_refused(monkeypatch, settings, no_git_process):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = []
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, **kw: [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2002:a00:1::1", port, 0, 0))],
    )
    with pytest.raises(
        IntakeError,
        match=r"^git host sly\.example resolves to a 6to4 address for 10\.0\.0\.1, a "
        r"private-network address \(2002:a00:1::1\); refused$",
    ):
        git_url_check("https://sly.example/team/repo.git")


def test_6to4_of_a_public_address_is_allowed():
    from common.addresses import address_problem

    assert address_problem(ipaddress.ip_address("2002:808:808::1")) is None  # 8.8.8.8 behind a 6to4 relay


def test_host_name_resolving_to_a_private_address_is_refused(monkeypatch, settings, no_git_process):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = []
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, **kw: [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("140.82.112.3", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port)),
        ],
    )
    with pytest.raises(
        IntakeError,
        match=r"^git host git\.intranet\.example resolves to a private-network "
        r"address \(10\.1\.2\.3\); refused$",
    ):
        git_url_check("https://git.intranet.example/team/repo.git")


def test_public_urls_are_normalized(monkeypatch, settings):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = ["127.0.0.1"]
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, **kw: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("140.82.112.3", port))],
    )
    assert git_url_check("  HTTPS://GitHub.com:443/Owner/Repo.git#readme ") == "https://github.com/Owner/Repo.git"
    assert git_url_check("https://127.0.0.1:8443/x.git") == "https://127.0.0.1:8443/x.git"


@pytest.mark.parametrize("commit", ["main", "abc12", "g" * 40, "0" * 41, ""])
def test_commit_must_be_a_hash(commit, settings, no_git_process):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = ["127.0.0.1"]
    with pytest.raises(IntakeError, match="commit must be a hexadecimal commit hash of 7 to 40 characters"):
        git_files("https://127.0.0.1/x.git", commit, limits=UploadLimits())


# --- git over a local HTTPS server ----------------------------------------------------------------------


def _git(*args: str, cwd: Path, env: dict | None = None) -> str:
    isolated = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **isolated, **(env or {})},
    )
    return result.stdout.strip()


def repo_commit(repo: Path, files: dict[str, bytes | str], *, executable: tuple[str, ...] = ()) -> str:
    """Write files (a str value is a symlink target) into `repo` and commit them; returns the commit hash."""
    if not (repo / ".git").exists():
        _git("init", "--quiet", "--initial-branch=main", str(repo), cwd=repo.parent)
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.symlink_to(content)
        else:
            path.write_bytes(content)
            if name in executable:
                path.chmod(0o755)
    _git("add", "--all", cwd=repo)
    _git("-c", "user.name=Author", "-c", "user.email=author@example.org", "commit", "--quiet", "-m", "work", cwd=repo)
    return _git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture
def served(settings, monkeypatch):
    """Serve a repository over HTTPS on 127.0.0.1, allowed and trusted: `with served(repo) as url:`."""
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = ["127.0.0.1"]

    @contextlib.contextmanager
    def serve(repo: Path, **options) -> Iterator[str]:
        with git_https_server(repo, **options) as (url, ca_file):
            monkeypatch.setenv("GIT_SSL_CAINFO", ca_file)
            yield url

    return serve


def test_known_commit_gives_its_files_and_not_later_ones(tmp_path, served):
    repo = tmp_path / "repo"
    first = repo_commit(
        repo,
        {
            "paper2code_test.py": b"import model\n",
            "src/model.py": b"x = 1\n",
            "model.py": "src/model.py",
            "outside": "/etc/passwd",
            "up": "../../x",
        },
    )
    repo_commit(repo, {"later.py": b"later\n", "src/model.py": b"x = 2\n"})
    requests: list[str] = []

    with served(repo, requests=requests) as url:
        files = git_files(url, first, limits=UploadLimits())

    # symlinks inside the tree are resolved; those leaving it are skipped
    assert files == {"model.py": b"x = 1\n", "paper2code_test.py": b"import model\n", "src/model.py": b"x = 1\n"}
    assert all("lfs" not in request for request in requests)


def test_short_hash_takes_the_fallback_and_gives_the_same_files(tmp_path, served):
    repo = tmp_path / "repo"
    first = repo_commit(repo, {"a.py": b"a\n", "pkg/b.py": b"b\n"})
    repo_commit(repo, {"c.py": b"c\n"})

    with served(repo) as url:
        assert git_files(url, first[:7].upper(), limits=UploadLimits()) == {"a.py": b"a\n", "pkg/b.py": b"b\n"}


@pytest.mark.parametrize("commit", ["deadbeef" * 5, "abcdef1"])
def test_unknown_commit_was_not_found(tmp_path, served, commit):
    repo = tmp_path / "repo"
    repo_commit(repo, {"a.py": b"a\n"})

    with served(repo) as url, pytest.raises(IntakeError) as caught:
        git_files(url, commit, limits=UploadLimits())
    assert str(caught.value) == f"commit {commit} was not found in {url}"


def test_unreachable_host_says_could_not_reach(settings):
    settings.SUBMISSION_GIT_ALLOWED_HOSTS = ["127.0.0.1"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again when the block ends: nothing listens there

    with pytest.raises(IntakeError, match=rf"^could not reach https://127\.0\.0\.1:{port}/x\.git: .*connect"):
        git_files(f"https://127.0.0.1:{port}/x.git", "0" * 40, limits=UploadLimits())


def test_untrusted_certificate_is_not_accepted(tmp_path, served, monkeypatch):
    repo = tmp_path / "repo"
    commit = repo_commit(repo, {"a.py": b"a\n"})
    with served(repo) as url:
        monkeypatch.setenv("GIT_SSL_CAINFO", str(Path(__file__)))  # not the test CA
        with pytest.raises(IntakeError, match=rf"^could not reach {url}: "):
            git_files(url, commit, limits=UploadLimits())


def test_hooks_filters_and_lfs_never_run_even_with_a_hostile_git_configuration(tmp_path, served, monkeypatch):
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n".encode()
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize 123456789\n"
    repo = tmp_path / "repo"
    commit = repo_commit(
        repo,
        {
            ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
            "weights.bin": pointer,
            "hooks/post-checkout": hook,
            ".githooks/post-checkout": hook,
            "a.py": b"a\n",
        },
        executable=("hooks/post-checkout", ".githooks/post-checkout"),
    )
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    for name in ("post-checkout", "reference-transaction", "post-index-change"):
        (home / "hooks" / name).write_bytes(hook)
        (home / "hooks" / name).chmod(0o755)
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(f'[core]\n\thooksPath = {home / "hooks"}\n[filter "lfs"]\n\tsmudge = touch {marker}\n')
    hostile = {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(gitconfig)}
    _git("clone", "--quiet", str(repo), str(tmp_path / "plain"), cwd=tmp_path, env=hostile)
    assert marker.exists(), "the hostile configuration must be able to run something for this test to mean anything"
    marker.unlink()
    for name, value in hostile.items():
        monkeypatch.setenv(name, value)
    requests: list[str] = []

    with served(repo, requests=requests) as url:
        full = git_files(url, commit, limits=UploadLimits())
        short = git_files(url, commit[:10], limits=UploadLimits())  # the fallback path checks out a worktree

    assert not marker.exists()
    assert full == short
    assert full["weights.bin"] == pointer
    assert full["hooks/post-checkout"] == hook
    assert all("lfs" not in request for request in requests)


def test_submodules_are_refused_with_a_note(tmp_path, served):
    repo = tmp_path / "repo"
    repo_commit(repo, {"a.py": b"a\n", ".gitmodules": b'[submodule "lib"]\n\tpath = vendor/lib\n\turl = file:///etc\n'})
    _git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendor/lib", cwd=repo)
    _git("-c", "user.name=Author", "-c", "user.email=author@example.org", "commit", "--quiet", "-m", "lib", cwd=repo)
    commit = _git("rev-parse", "HEAD", cwd=repo)

    with served(repo) as url, pytest.raises(IntakeError) as caught:
        git_files(url, commit, limits=UploadLimits())
    assert str(caught.value) == (
        f"{url} at commit {commit}: 'vendor/lib' is a git submodule, which is not "
        f"supported; add its files to the repository itself or upload an archive"
    )


def test_git_limits_on_files_and_repository_size(tmp_path, served):
    repo = tmp_path / "repo"
    commit = repo_commit(repo, {"a.py": b"a\n", "b.py": b"b\n", "c.py": b"c\n", "data.bin": os.urandom(300_000)})

    with served(repo) as url:
        with pytest.raises(IntakeError) as caught:
            git_files(url, commit, limits=UploadLimits(max_files=3))
        assert str(caught.value) == f"{url} at commit {commit} has more than 3 files (limit 3)"
        with pytest.raises(IntakeError) as caught:
            git_files(url, commit, limits=UploadLimits(max_repo_bytes=100_000))
        assert str(caught.value) == (
            f"the repository at {url} is larger than 100 kB (the limit for fetched repositories); stopped"
        )
        with pytest.raises(IntakeError) as caught:
            git_files(url, commit, limits=UploadLimits(max_file_bytes=100_000))
        assert "entry 'data.bin' is 300 kB unpacked, over the limit of 100 kB per file" in str(caught.value)


def test_slow_server_hits_the_timeout(tmp_path, served):
    repo = tmp_path / "repo"
    commit = repo_commit(repo, {"a.py": b"a\n"})

    with served(repo, delay=3) as url:
        started = time.monotonic()
        with pytest.raises(IntakeError) as caught:
            git_files(url, commit, limits=UploadLimits(clone_timeout=0.5))
    assert time.monotonic() - started < 2
    assert str(caught.value) == f"fetching {url} took longer than 0.5 s (the limit); stopped"


def test_temp_folder_is_removed_whatever_happens(tmp_path, served, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    repo = tmp_path / "repo"
    commit = repo_commit(repo, {"a.py": b"a\n"})

    with served(repo) as url:
        git_files(url, commit, limits=UploadLimits())
        with pytest.raises(IntakeError):
            git_files(url, "abcdef1", limits=UploadLimits())
    assert list((tmp_path / "tmp").iterdir()) == []
