"""common.addresses: the one address rule for outbound connections users choose, checked where connected."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from common.addresses import AddressRefused, HostUnresolvable, host_addresses_check, public_connections_only


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("127.0.0.1", "api_base host 127.0.0.1 is a loopback address; refused"),
        ("[::1]", "api_base host ::1 is a loopback address; refused"),
        ("169.254.169.254", "api_base host 169.254.169.254 is a link-local address; refused"),
        ("10.2.3.4", "api_base host 10.2.3.4 is a private-network address; refused"),
        ("localhost", "api_base host localhost resolves to a loopback address ("),
        ("127.1", "api_base host 127.1 resolves to a loopback address (127.0.0.1); refused"),
    ],
)
def test_loopback_private_and_metadata_hosts_are_refused(host, message):
    with pytest.raises(AddressRefused) as refused:
        host_addresses_check(host, 443, what="api_base host")
    assert str(refused.value).startswith(message)


def test_a_listed_host_is_exempt_and_a_public_literal_needs_no_pinning():
    assert host_addresses_check("127.0.0.1", 443, what="h", allowed_hosts=["127.0.0.1"]) == []
    assert host_addresses_check("8.8.8.8", 443, what="h") == []


def test_an_unresolvable_name_says_so():
    with pytest.raises(HostUnresolvable, match="the host name nowhere.invalid does not resolve"):
        host_addresses_check("nowhere.invalid", 443, what="h")


@pytest.fixture
def local_http():
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], hits
    httpd.shutdown()
    httpd.server_close()


def test_connections_under_the_guard_never_reach_a_loopback_server(local_http):
    port, hits = local_http
    for url in (f"http://127.0.0.1:{port}/literal", f"http://localhost:{port}/name"):
        with public_connections_only(what="api_base host") as refusals, pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=5)
        assert "api_base host" in refusals.refused and "loopback address" in refusals.refused
    assert hits == []
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/after", timeout=5) as answer:  # the guard is gone again
        assert answer.read() == b"ok"
    assert hits == ["/after"]


def test_the_guard_checks_the_resolution_that_is_connected_to(local_http, monkeypatch):
    """DNS rebinding: a name that answered with a public address once answers with loopback when connecting."""
    port, hits = local_http
    from common import addresses

    answers = iter(
        [
            [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port))],
            [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))],
        ]
    )
    with public_connections_only(what="api_base host"):
        pass  # installs the guard over the real resolver
    monkeypatch.setattr(addresses, "_resolve", lambda *args, **kwargs: next(answers))
    assert host_addresses_check("rebind.example", port, what="api_base host") == ["93.184.215.14"]
    with public_connections_only(what="api_base host") as refusals, pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://rebind.example:{port}/", timeout=5)
    assert refusals.refused == "api_base host rebind.example resolves to a loopback address (127.0.0.1); refused"
    assert hits == []


def test_the_guard_is_per_thread(local_http):
    port, hits = local_http
    results: list[bytes] = []
    with public_connections_only(what="h"):
        other = threading.Thread(
            target=lambda: results.append(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/other-thread", timeout=5).read()
            )
        )
        other.start()
        other.join()
    assert results == [b"ok"] and hits == ["/other-thread"]
