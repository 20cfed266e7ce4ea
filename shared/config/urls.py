"""URL and host settings in the one form the app compares and builds with, the form a browser
writes: scheme and host in lower case, an internationalised host in IDNA (`xn--`) form, an IPv6
address compressed, no default port, no trailing slash (paths are appended to it). What cannot
be put in that form is refused, with the reason in words that never repeat the value.
docs/configuration.md#written-forms
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import idna

DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NETLOC = re.compile(r"(\[[^\[\]]*\]|[^\[\]:]*)(?::([0-9]{0,5}))?")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.{1,2}(?:/|$)")


def canonical_url(value: str, schemes: tuple[str, ...]) -> str:
    """`value`, an absolute URL of one of `schemes` with a host and no user, query or fragment,
    in its canonical form; ValueError saying what is wrong otherwise."""
    if not value.isprintable() or " " in value:
        raise ValueError("it holds a space or an invisible character")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("it is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise ValueError(f"its scheme is not {' or '.join(s + '://' for s in schemes)}")
    if "?" in value or "#" in value:
        raise ValueError("it has a query string or a fragment")
    if "@" in parts.netloc:
        raise ValueError("it names a user or a password")
    netloc = _NETLOC.fullmatch(parts.netloc)
    if not netloc or not netloc[1]:
        raise ValueError("it has no host")
    port = int(netloc[2]) if netloc[2] else DEFAULT_PORTS[scheme]
    if not 0 < port <= 65535:
        raise ValueError("its port is not from 1 to 65535")
    if _DOT_SEGMENT.search(parts.path) or "\\" in parts.path or not parts.path.isascii():
        raise ValueError("its path has a . or .. segment, a backslash or a character to percent-encode")
    host = canonical_host(netloc[1])
    shown_port = "" if port == DEFAULT_PORTS[scheme] else f":{port}"
    return f"{scheme}://{host}{shown_port}{parts.path.rstrip('/')}"


def canonical_host(host: str) -> str:
    """A host name or IP address as it stands in a URL and as a browser writes it: an IPv6
    address in brackets, compressed, never as IPv4; a name in lower case, IDNA-encoded; ValueError
    otherwise, and for a name that browsers (UTS 46) and Python's IDNA 2003 codec encode apart."""
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError("its IPv6 address is malformed") from None
        return f"[{_ipv6_text(address)}]"
    try:
        ascii_host = host.lower().encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("its host is not a valid host name") from None
    if not host.isascii():
        try:
            browsers = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except UnicodeError:
            raise ValueError("its host is not an IDNA 2008 host name: give its xn-- form") from None
        if browsers != ascii_host:
            raise ValueError("its host is encoded apart by browsers and by IDNA 2003: give its xn-- form")
    labels = ascii_host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("its host is not a host name (letters, digits and hyphens, no trailing dot)")
    if labels[-1].isdigit() or labels[-1].startswith("0x"):  # what a browser reads as IPv4
        try:
            return str(ipaddress.IPv4Address(ascii_host))
        except ValueError:
            raise ValueError("its IPv4 address is not four decimal numbers") from None
    return ascii_host


def _ipv6_text(address: ipaddress.IPv6Address) -> str:
    """`address` as the URL Standard serialises it: eight hex pieces, the first longest run of
    two or more zero pieces as `::`, and no dotted IPv4 tail (::ffff:c0a8:10a)."""
    pieces = [int.from_bytes(address.packed[i : i + 2], "big") for i in range(0, 16, 2)]
    start, length = -1, 1
    for i in range(8):
        run = next((n for n in range(8 - i) if pieces[i + n]), 8 - i)
        if run > length and (i == 0 or pieces[i - 1]):
            start, length = i, run
    text = [f"{piece:x}" for piece in pieces]
    if start < 0:
        return ":".join(text)
    return ":".join(text[:start]) + "::" + ":".join(text[start + length :])


def origin_host(entry: str) -> str:
    """The host an Origin header names, as `urlsplit(origin).hostname` gives it (an IPv6
    address without its brackets), from a host name or an origin (`https://host:port`); the
    scheme and port are not compared. ValueError for anything else (a path, a wildcard)."""
    url = canonical_url(entry if "://" in entry else f"https://{entry}", tuple(DEFAULT_PORTS))
    parts = urlsplit(url)
    if parts.path:
        raise ValueError("an origin has no path")
    return parts.hostname or ""


def canonical_origin(text: str, *, paths: tuple[str, ...] = ("",)) -> str | None:
    """`scheme://host[:port]` of an http(s) URL in its canonical form whose path (without its
    trailing slash) is among `paths`; None for anything else. An IPv4-mapped IPv6 host is
    written as the IPv4 address it reaches. An agent's `Signature-Agent` and the agent origins
    in the settings are compared in this form."""
    try:
        parts = urlsplit(canonical_url(text, tuple(DEFAULT_PORTS)))
    except ValueError:
        return None
    if parts.path not in paths:
        return None
    netloc = parts.netloc
    if netloc.startswith("[") and (mapped := ipaddress.IPv6Address(parts.hostname or "").ipv4_mapped):
        netloc = str(mapped) + netloc[netloc.index("]") + 1 :]
    return f"{parts.scheme}://{netloc}"
