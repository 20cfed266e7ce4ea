"""URL and host settings in the one form the app compares and builds with: scheme and host in
lower case, an internationalised host in IDNA (`xn--`) form, an IPv6 address compressed, no
default port, no trailing slash (paths are appended to it). What cannot be put in that form is
refused, with the reason in words that never repeat the value. docs/configuration.md#written-forms
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NETLOC = re.compile(r"(\[[^\[\]]*\]|[^\[\]:]*)(?::([0-9]{0,5}))?")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.{1,2}(?:/|$)")
# Characters IDNA 2003 (Python's codec) maps where browsers' UTS 46 keeps them: the two would
# give the host different `xn--` forms, so a host holding one is refused rather than guessed.
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


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
    """A host name or IP address as it stands in a URL (an IPv6 address in brackets), lower case,
    IDNA-encoded; ValueError otherwise."""
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError("its IPv6 address is malformed") from None
        mapped = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1, the one host it reaches
        return str(mapped) if mapped is not None else f"[{address.compressed}]"
    host = host.lower()
    if _DEVIATIONS & set(host):
        raise ValueError("its host has a character IDNA versions encode differently: give its xn-- form")
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("its host is not a valid host name") from None
    labels = ascii_host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("its host is not a host name (letters, digits and hyphens, no trailing dot)")
    if labels[-1].isdigit() or labels[-1].startswith("0x"):  # what a browser reads as IPv4
        try:
            return str(ipaddress.IPv4Address(ascii_host))
        except ValueError:
            raise ValueError("its IPv4 address is not four decimal numbers") from None
    return ascii_host


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
    trailing slash) is among `paths`; None for anything else. An agent's `Signature-Agent` and
    the agent origins in the settings are compared in this form."""
    try:
        parts = urlsplit(canonical_url(text, tuple(DEFAULT_PORTS)))
    except ValueError:
        return None
    return f"{parts.scheme}://{parts.netloc}" if parts.path in paths else None
