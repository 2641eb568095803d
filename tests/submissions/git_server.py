"""A git repository served over HTTPS on 127.0.0.1, so intake tests clone over the real smart-HTTP protocol.

Usage::

    from tests.submissions.git_server import git_https_server

    with git_https_server(repo_path) as (url, ca_file):
        monkeypatch.setenv("GIT_SSL_CAINFO", ca_file)   # the client trusts the test CA
        git_files(url, commit, limits=...)             # url is "https://127.0.0.1:PORT/repo.git"

The served repository is a bare mirror of ``repo_path`` taken on entry (later commits in
``repo_path`` are not served) with ``uploadpack.allowAnySHA1InWant`` and ``uploadpack.allowFilter``
set, as on the big hosts, so clients may fetch a commit by its hash and make partial clones.
``requests``, when given, collects ``"METHOD /path?query"`` of every request; ``delay`` makes every
answer wait that many seconds (for client timeouts). The certificate is issued for 127.0.0.1 and
localhost by a throwaway CA whose certificate is ``ca_file``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import ipaddress
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REPO_NAME = "repo.git"


@contextlib.contextmanager
def git_https_server(
    repo_path: str | os.PathLike,
    *,
    requests: list[str] | None = None,
    delay: float = 0.0,
) -> Iterator[tuple[str, str]]:
    """Serve a mirror of `repo_path` over HTTPS for the duration of the block; yields (repository URL, CA file)."""
    workdir = Path(tempfile.mkdtemp(prefix="git-https-"))
    try:
        served = workdir / "root" / REPO_NAME
        _git("clone", "--quiet", "--mirror", str(repo_path), str(served))
        for key in ("uploadpack.allowAnySHA1InWant", "uploadpack.allowFilter", "http.uploadpack"):
            _git("-C", str(served), "config", key, "true")
        ca_file, cert_file, key_file = certificates_make(workdir)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        handler = _handler_for(project_root=served.parent, requests=requests, delay=delay)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        # The handshake happens in the handler thread, so a stuck client cannot block accept().
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield f"https://127.0.0.1:{httpd.server_address[1]}/{REPO_NAME}", str(ca_file)
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=_isolated_env())


def _isolated_env() -> dict[str, str]:
    """The server side ignores the host's git configuration, like a fresh server would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def certificates_make(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost signed by it (EC keys: fast)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intake tests CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


def _chunked_read(rfile: io.BufferedIOBase) -> bytes:
    """A request body sent with chunked transfer encoding, its trailers read past."""
    parts = []
    while size := int(rfile.readline().split(b";")[0].strip() or b"0", 16):
        parts.append(rfile.read(size))
        rfile.readline()
    while rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
        pass
    return b"".join(parts)


def _cgi_response(stdout: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """A CGI program's output as the status, the headers and the body of the response."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in stdout else b"\n\n"
    head, _, payload = stdout.partition(separator)
    status, headers = 200, []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.append((name, value.strip()))
    return status, headers, payload


def _handler_for(*, project_root: Path, requests: list[str] | None, delay: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Runs `git http-backend` as a CGI program for every request."""

        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            self._cgi(b"")

        def do_POST(self) -> None:
            self._cgi(self._body())

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # git sends large bodies chunked
                return _chunked_read(self.rfile)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _cgi(self, body: bytes) -> None:
            if requests is not None:
                requests.append(f"{self.command} {self.path}")
            if delay:
                time.sleep(delay)
            url = urlsplit(self.path)
            env = _isolated_env()
            env.update(
                GIT_PROJECT_ROOT=str(project_root),
                GIT_HTTP_EXPORT_ALL="1",
                GATEWAY_INTERFACE="CGI/1.1",
                REQUEST_METHOD=self.command,
                PATH_INFO=unquote(url.path),
                QUERY_STRING=url.query,
                CONTENT_TYPE=self.headers.get("Content-Type", ""),
                CONTENT_LENGTH=str(len(body)),
                REMOTE_ADDR=self.client_address[0],
                SERVER_PROTOCOL="HTTP/1.1",
            )
            for header in ("Git-Protocol", "Content-Encoding"):
                if header in self.headers:
                    env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
            result = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env)
            status, headers, payload = _cgi_response(result.stdout)
            if result.returncode and not result.stdout:
                status, payload = 500, result.stderr
            with contextlib.suppress(OSError):  # the client may have given up (timeouts)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

    return Handler
