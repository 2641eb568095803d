"""Which network addresses the platform may contact for a user (git intake, model endpoints), checked where connected.

One rule for every outbound connection an author or model owner chooses: only public addresses; loopback,
private, link-local (cloud metadata), multicast, reserved and other special-use addresses are refused. A host
name is checked by the addresses it resolves to, and those same addresses are the ones connected to: git gets
them pinned (`host_addresses_check`), and model calls run under `public_connections_only`, which checks every
name resolution of the calling thread as it happens, so a DNS answer that changes between a check and the
connection (rebinding) is never used unchecked.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_PRIVATE_V4 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_UNIQUE_LOCAL_V6 = ipaddress.ip_network("fc00::/7")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class AddressRefused(OSError):
    """A host the platform will not connect to for a user; the message says which and why.

    An OSError, so network libraries treat it as a failed connection wherever the check happens inside them.
    """


class HostUnresolvable(AddressRefused):
    """A host name that does not resolve at all."""


def ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None  # a name; odd IPv4 spellings (127.1, 0x7f.1) are caught after resolution


def address_problem(ip: IPAddress) -> str | None:
    """Why an address may not be contacted ("a loopback", ...), or None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # the same host, by its IPv4 rules
        ip = ip.ipv4_mapped
    for kind, inner in _embedded_ipv4(ip):  # a relay or translator would carry the connection to the inner one
        if problem := _own_address_problem(inner):
            return f"{kind} address for {inner}, {problem}"
    return _own_address_problem(ip)


def _own_address_problem(ip: IPAddress) -> str | None:
    checks = (
        (ip.is_unspecified, "an unspecified"),
        (ip.is_loopback, "a loopback"),
        (ip.is_link_local, "a link-local"),
        (ip.is_multicast, "a multicast"),
        (ip.version == 6 and ip in _UNIQUE_LOCAL_V6, "a unique-local"),
        (ip.version == 4 and any(ip in net for net in _PRIVATE_V4), "a private-network"),
        (ip.is_reserved, "a reserved"),
        (not ip.is_global, "a special-use (not public)"),
    )
    return next((problem for hit, problem in checks if hit), None)


def _embedded_ipv4(ip: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address stands for: 6to4 (2002::/16), Teredo (2001::/32; server and client),
    NAT64 (64:ff9b::/96) and the deprecated IPv4-compatible form (::a.b.c.d)."""
    if ip.version == 4:
        return []
    found = []
    if ip.sixtofour:
        found.append(("a 6to4", ip.sixtofour))
    if ip.teredo:
        found += [("a Teredo", ip.teredo[1]), ("a Teredo", ip.teredo[0])]
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):  # :: and ::1 are IPv6's own
        kind = "a NAT64" if ip in _NAT64 else "an IPv4-compatible"
        found.append((kind, ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    return found


def hosts_normalized(hosts: Iterable[str]) -> frozenset[str]:
    """A setting's list of exempt hosts, compared as `host_addresses_check` sees them."""
    return frozenset(h.strip().strip("[]").lower().rstrip(".") for h in hosts if h.strip())


def host_addresses_check(host: str, port: int, *, what: str, allowed_hosts: Iterable[str] = ()) -> list[str]:
    """The addresses `host` resolves to, every one public ([] for a public IP literal or an exempt host).

    `what` names the host in messages ("git host", "api_base host"); AddressRefused says why it is refused.
    """
    host = host.strip("[]").lower().rstrip(".")
    if host in hosts_normalized(allowed_hosts):
        return []
    literal = ip_literal(host)
    if literal:
        if problem := address_problem(literal):
            raise AddressRefused(f"{what} {host} is {problem} address; refused")
        return []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise HostUnresolvable(f"the host name {host} does not resolve ({exc})") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    _addresses_refuse(host, addresses, what=what)
    return addresses


def _addresses_refuse(host: str, addresses: Iterable[str], *, what: str) -> None:
    for address in addresses:
        if problem := address_problem(ipaddress.ip_address(address)):
            raise AddressRefused(f"{what} {host} resolves to {problem} address ({address}); refused")


# --- checked where connected --------------------------------------------------------------------------

_resolve = socket.getaddrinfo  # the real resolver, before the guard wraps it
_guard = threading.local()
_install_lock = threading.Lock()


def _guarded_getaddrinfo(host, port, *args, **kwargs):
    infos = _resolve(host, port, *args, **kwargs)
    rule = getattr(_guard, "rule", None)
    if rule is not None and host is not None:
        name = (host.decode("idna") if isinstance(host, bytes) else str(host)).strip("[]").lower().rstrip(".")
        what, allowed, refusals = rule
        if name not in allowed:
            try:
                _addresses_refuse(name, (str(info[4][0]).split("%")[0] for info in infos), what=what)
            except AddressRefused as refused:
                refusals.refused = str(refused)
                raise
    return infos


def _guard_install() -> None:
    global _resolve
    with _install_lock:
        if socket.getaddrinfo is not _guarded_getaddrinfo:
            _resolve = socket.getaddrinfo
            socket.getaddrinfo = _guarded_getaddrinfo


@contextlib.contextmanager
def public_connections_only(*, what: str, allowed_hosts: Iterable[str] = ()) -> Iterator[Refusals]:
    """While the block runs, every host name this thread resolves must give only public addresses.

    The check sits inside the resolution the connecting code uses, so the addresses checked are the ones it
    connects to. Yields a Refusals whose `refused` is the message of the last refusal.
    """
    _guard_install()
    refusals = Refusals()
    saved = getattr(_guard, "rule", None)
    _guard.rule = (what, hosts_normalized(allowed_hosts), refusals)
    try:
        yield refusals
    finally:
        _guard.rule = saved


class Refusals:
    """What `public_connections_only` refused in its block ("" when nothing)."""

    refused: str = ""
