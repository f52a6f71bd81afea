"""Which webhook URLs may be called: never a private, loopback or link-local address.

A webhook's URL is given by whoever administers the site, but the request is made from
inside the network, so a URL naming ``127.0.0.1``, ``10.0.0.5``, ``169.254.169.254`` (a
cloud's metadata service) or a name that resolves to one would let a webhook reach what
the internet cannot (server-side request forgery). Every address a host name resolves to
is checked — when the webhook is saved (``check_url``) and again at each delivery
(``resolve``), whose connection then goes to the address checked, not to a second lookup
that could answer otherwise. ``ZETT_WEBHOOK_ALLOW_PRIVATE = True`` allows them (a
receiver on the same machine or network, tests).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent_app import conf

__all__ = ["Target", "UnsafeURL", "check_url", "is_public", "resolve", "target_of"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeURL(ValueError):
    """A webhook URL that may not be called (the message says why)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL points: scheme, host, port and the path with its query."""

    scheme: str
    host: str
    port: int
    path: str


def target_of(url: str) -> Target:
    """The parts of ``url``; ``UnsafeURL`` for one that is no http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as bad:
        raise UnsafeURL(f"Not a valid URL: {bad}") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeURL("A webhook URL starts with https:// (or http://)")
    if not parts.hostname:
        raise UnsafeURL("A webhook URL names a host")
    if parts.username or parts.password:
        raise UnsafeURL("A webhook URL carries no user name or password")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = 443 if parts.scheme == "https" else 80
    return Target(parts.scheme, parts.hostname, port or default, path)


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` is on the public internet (not private, loopback, link-local,
    shared, reserved, multicast or unspecified)."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    return address.is_global and not address.is_multicast


def _allowed(addresses: list[IPAddress], host: str) -> list[IPAddress]:
    if not addresses:
        raise UnsafeURL(f"The host {host!r} has no address")
    if conf.ZETT_WEBHOOK_ALLOW_PRIVATE:
        return addresses
    private = [str(address) for address in addresses if not is_public(address)]
    if private:
        raise UnsafeURL(
            f"The host {host!r} is a private or loopback address ({private[0]}); webhooks "
            "call public addresses only (ZETT_WEBHOOK_ALLOW_PRIVATE = True allows it)"
        )
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _parsed(infos: list[tuple]) -> list[IPAddress]:
    seen: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in seen:
            seen.append(address)
    return seen


def check_url(url: str) -> list[IPAddress]:
    """Check ``url`` as a webhook's (resolving its host now); its addresses, or
    ``UnsafeURL``."""
    target = target_of(url)
    literal = _literal(target.host)
    if literal is not None:
        return _allowed([literal], target.host)
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as failed:
        raise UnsafeURL(f"The host {target.host!r} could not be resolved: {failed}") from None
    return _allowed(_parsed(infos), target.host)


async def resolve(target: Target) -> list[IPAddress]:
    """The addresses of ``target``'s host a delivery may connect to (``UnsafeURL`` if
    none), resolved without blocking the event loop."""
    literal = _literal(target.host)
    if literal is not None:
        return _allowed([literal], target.host)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as failed:
        raise UnsafeURL(f"The host {target.host!r} could not be resolved: {failed}") from None
    return _allowed(_parsed(infos), target.host)
