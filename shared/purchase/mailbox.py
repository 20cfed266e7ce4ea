"""The mailbox an email address delivers to, as the per-recipient limit counts it.

Many strings reach one inbox: sub-addressing (`ada+news@example.org`), and the rules of the
providers in shared/purchase/providers.py (Gmail's ignored dots, Proton's transparent `.` `_` `-`,
one account's other domains, Fastmail's subdomain addressing, a relay user's own subdomain, all of
whose addresses are one mailbox keyed `@user.<domain>`). The per-recipient limit is keyed by
`mailbox(address)`, so those share one count. Only the count: the Brevo contact and the email use
the address the buyer typed. Every rule merges strings, none splits them; a wrong merge makes two
mailboxes share one limit and never lets one get more than the limit.
"""

from __future__ import annotations

from shared.purchase.domains import ascii_lower, domain_key
from shared.purchase.providers import Provider, providers_of

# Sub-addressing: everything from the first "+" on is a tag, on every domain (RFC 5233's
# "detail"; Gmail, Outlook.com and Exchange Online, iCloud, Fastmail, Proton and the common
# servers' default). A provider's row adds its own separators (Yahoo's "-").
TAG = "+"


def mailbox(address: str) -> str:
    """The key of the inbox `address` delivers to: ASCII letters lower-cased (never case-folded:
    `ß` is not `ss`), the domain as shared.purchase.domains.domain_key spells it and under its
    provider's main name, the user name without its tag and as its provider reads it; any address
    at a relay user's own subdomain as `@` and that subdomain. Text without "@" comes back
    lower-cased the same way. Total: no text raises."""
    text = ascii_lower(address.strip())
    local, at, domain = text.rpartition("@")
    if not at:
        return text
    domain = domain_key(domain)
    if own := _user_subdomain(domain):
        return f"@{own}"  # no address has an empty user name, so no address has this key
    local, domain = _subdomain_addressed(local, domain)
    rows = providers_of(domain)
    domain = next((row.domains[0] for row in rows if row.one_namespace), domain)
    for separator in TAG + "".join(row.tags for row in rows):
        local = _untagged(local, separator)
    for row in rows:
        local = _as_read_by(row, local)
    return f"{local}@{domain}"


def _subdomain_addressed(local: str, domain: str) -> tuple[str, str]:
    """`anything@user.<domain>` as `user@<domain>` where the domain's provider addresses so."""
    user, dot, parent = domain.partition(".")
    if user and dot and any(row.subdomains for row in providers_of(parent)):
        return user, parent
    return local, domain


def _user_subdomain(domain: str) -> str:
    """`user.<main domain>` if `domain` is `user.<domain>` where a relay gives each user a
    subdomain of their own (on each of its domains, the same user's), else ""."""
    user, dot, parent = domain.partition(".")
    rows = [row for row in providers_of(parent) if row.user_subdomains] if user and dot else []
    return f"{user}.{rows[0].domains[0]}" if rows else ""


def _untagged(local: str, separator: str) -> str:
    """The local part before its tag; a local part that starts with the separator has no tag."""
    head, found, _ = local.partition(separator)
    return head if found and head else local


def _as_read_by(row: Provider, local: str) -> str:
    """The user name without the characters `row` ignores (unless nothing is left) and with each
    of its equivalent characters written as the first of them."""
    kept = "".join(c for c in local if c not in row.ignored) or local
    return kept.translate({ord(c): row.equivalent[0] for c in row.equivalent[1:]})
