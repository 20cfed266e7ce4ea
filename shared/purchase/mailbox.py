"""The mailbox an email address delivers to, as the per-recipient limit counts it.

Many strings reach one inbox: sub-addressing (`ada+news@example.org`), Gmail's ignored dots and
its googlemail.com twin, a provider's other domains for the same account, a domain written in
another form. The per-recipient limit is keyed by `mailbox(address)`, so all of those share one
count. Only the count: the Brevo contact and the email use the address the buyer typed.

Every rule merges strings, none splits them. A rule that merged two real mailboxes by mistake
would make them share one limit; no rule lets one mailbox get more than the limit.
"""

from __future__ import annotations

import re
import unicodedata

# Domains that are another name of one provider's accounts: the same user name on each is one
# account (Google: gmail.com and googlemail.com; Apple: "About your @icloud.com, @me.com, and
# @mac.com email addresses"; Proton: "Types of email addresses and aliases").
ALIASES = {
    "googlemail.com": "gmail.com",
    "me.com": "icloud.com",
    "mac.com": "icloud.com",
    "protonmail.com": "proton.me",
    "protonmail.ch": "proton.me",
    "pm.me": "proton.me",
}
# Gmail ignores dots in a user name ("Dots don't matter in Gmail addresses").
DOTLESS = frozenset({"gmail.com"})
# Fastmail's subdomain addressing: anything@user.fastmail.com is user+anything@fastmail.com.
SUBDOMAIN_ADDRESSED = frozenset({"fastmail.com", "fastmail.fm"})
# Sub-addressing: everything from the first "+" on is a tag, on every domain (RFC 5233's
# "detail"; Gmail, Outlook.com and Exchange Online, iCloud, Fastmail, Proton and the common
# servers' default). Yahoo's disposable addresses are basename-keyword@yahoo.<tld>.
TAG = "+"
YAHOO_TAG = "-"
_DOTS = re.compile("[.\u3002\uff0e\uff61]")  # the separators IDNA reads as a dot


def mailbox(address: str) -> str:
    """The key of the inbox `address` delivers to: case-folded, the domain in its one ASCII
    (IDNA) form and under its provider's main name, the local part without its tag and, where
    the provider ignores them, without dots. An address without "@" comes back case-folded."""
    text = unicodedata.normalize("NFKC", address).strip().casefold()
    local, at, domain = text.rpartition("@")
    if not at:
        return text
    domain = _domain(domain)
    local, domain = _subdomain_addressed(local, domain)
    domain = ALIASES.get(domain, domain)
    local = _untagged(local, TAG)
    if _is_yahoo(domain):
        local = _untagged(local, YAHOO_TAG)
    if domain in DOTLESS:
        local = local.replace(".", "") or local
    return f"{local}@{domain}"


def _domain(domain: str) -> str:
    """The domain's ASCII form: A-labels decoded and encoded again, so every spelling of one name
    (U-labels, other dots, a trailing root dot, a non-canonical A-label) gives the same text. A
    name IDNA refuses is kept as it is (it cannot be anyone's mailbox under another spelling)."""
    labels = _DOTS.split(domain.rstrip(".\u3002\uff0e\uff61"))
    try:
        unicode = ".".join(_decoded(label) for label in labels)
        return unicode.encode("idna").decode("ascii")
    except UnicodeError:
        return domain


def _decoded(label: str) -> str:
    if label.startswith("xn--"):
        return label[4:].encode("ascii").decode("punycode")
    return label


def _subdomain_addressed(local: str, domain: str) -> tuple[str, str]:
    user, dot, parent = domain.partition(".")
    if dot and parent in SUBDOMAIN_ADDRESSED:
        return user, parent
    return local, domain


def _untagged(local: str, separator: str) -> str:
    """The local part before its tag; a local part that starts with the separator has no tag."""
    head, found, _ = local.partition(separator)
    return head if found and head else local


def _is_yahoo(domain: str) -> bool:
    """yahoo.com and Yahoo's country domains (yahoo.fr, yahoo.co.uk, yahoo.com.br)."""
    labels = domain.split(".")
    return labels[0] == "yahoo" and 2 <= len(labels) <= 3
