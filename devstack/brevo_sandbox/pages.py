"""The HTML pages on ``GET /`` and ``GET /emails/<id>``: captured emails, the way Mailpit shows
SMTP mail, and the rate-limit counters. Everything from an email is escaped, and its HTML is shown
in a bare sandboxed iframe.
"""

from __future__ import annotations

import html
import json
from typing import Any

from devstack.brevo_sandbox.emails import CapturedEmail

PAGE_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1f2933;background:#f5f7fa}
header{background:#0b3954;color:#fff;padding:.8rem 1.5rem}
header h1{margin:0;font-size:1.25rem}header a{color:#cde}
main{padding:1rem 1.5rem;max-width:72rem}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;vertical-align:top;padding:.45rem .6rem;
  border-bottom:1px solid #e4e7eb}
th{background:#eef2f6;font-weight:600}
td.time{white-space:nowrap;color:#52606d;font-size:.85rem}
ul.links{margin:0;padding-left:1rem;font-size:.85rem;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;
  background:#fff;padding:1rem}
dt{font-weight:600}dd{margin:0;word-break:break-all}
iframe{width:100%;height:32rem;border:1px solid #cbd2d9;background:#fff}
pre{background:#fff;border:1px solid #cbd2d9;padding:.75rem;
  white-space:pre-wrap;word-break:break-word}
.empty{color:#52606d}
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{PAGE_CSS}</style></head>"
        '<body><header><h1><a href="/">Brevo sandbox</a></h1></header>'
        f"<main>{body}</main></body></html>"
    )


def _address(entry: dict[str, Any]) -> str:
    name = entry.get("name")
    return f"{name} <{entry['email']}>" if name else entry["email"]


def _links_list(links: list[str]) -> str:
    items = "".join(
        f'<li><a href="{_esc(url)}" rel="noopener noreferrer">{_esc(url)}</a></li>' for url in links
    )
    return f'<ul class="links">{items}</ul>' if links else ""


def _subject(email: CapturedEmail) -> str:
    if email.subject:
        return email.subject
    return f"(template #{email.templateId})" if email.templateId else "(no subject)"


def _index_row(email: CapturedEmail) -> str:
    return (
        f'<tr><td class="time">{_esc(email.received_at)}</td>'
        f"<td>{_esc(', '.join(_address(r) for r in email.to))}</td>"
        f'<td><a href="/emails/{email.id}">{_esc(_subject(email))}</a></td>'
        f"<td>{_links_list(email.links)}</td></tr>"
    )


def _limits_row(family: str, view: dict[str, Any]) -> str:
    cells = (view["limit"], view["used"], view["remaining"], view["accepted"], view["refused"])
    return (
        f"<tr><td>{_esc(family)}<br><small>{_esc(view['routes'])}</small></td>"
        + "".join(f"<td>{_esc('-' if cell is None else cell)}</td>" for cell in cells)
        + "</tr>"
    )


def _limits_section(limits: dict[str, Any]) -> str:
    """Per family: its limit, this window's use, what is left, and the totals accepted and
    refused with 429."""
    rows = "".join(_limits_row(family, view) for family, view in limits["families"].items())
    return (
        f'<h2 id="rate-limits">Rate limits ({_esc(limits["tier"])} tier)</h2>'
        "<table><thead><tr><th>Family</th><th>Limit</th><th>This window</th><th>Remaining</th>"
        f"<th>Accepted</th><th>429s</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def render_index(emails: list[CapturedEmail], limits: dict[str, Any]) -> str:
    """The inbox page: captured emails, newest first, then the rate-limit counters."""
    counters = _limits_section(limits)
    if not emails:
        return _page(
            "Brevo sandbox",
            f'<h2>Emails</h2><p class="empty">No emails captured yet.</p>{counters}',
        )
    rows = "".join(_index_row(e) for e in reversed(emails))
    table = (
        "<table><thead><tr><th>Received (UTC)</th><th>To</th><th>Subject</th>"
        f"<th>Links</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page(f"Brevo sandbox ({len(emails)})", f"<h2>Emails ({len(emails)})</h2>{table}{counters}")


def _metadata(email: CapturedEmail) -> str:
    rows = [
        ("From", _address(email.sender)),
        ("To", ", ".join(_address(r) for r in email.to)),
        ("Received (UTC)", email.received_at),
        ("Message-ID", email.messageId),
    ]
    if email.templateId:
        rows.append(("Template", f"#{email.templateId}"))
    if email.tags:
        rows.append(("Tags", ", ".join(email.tags)))
    return "<dl>" + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in rows) + "</dl>"


def _json_block(title: str, value: dict[str, Any]) -> str:
    if not value:
        return ""
    return f"<h2>{_esc(title)}</h2><pre>{_esc(json.dumps(value, indent=2))}</pre>"


def render_email(email: CapturedEmail) -> str:
    """One email: metadata, links, and the content rendered inertly."""
    parts = [f"<h2>{_esc(_subject(email))}</h2>", _metadata(email)]
    if email.links:
        parts.append(f"<h2>Links</h2>{_links_list(email.links)}")
    if email.htmlContent:
        # Bare "sandbox": no scripts, no same-origin access, no forms, no top nav.
        parts.append(f'<h2>HTML</h2><iframe sandbox srcdoc="{_esc(email.htmlContent)}"></iframe>')
    if email.textContent:
        parts.append(f"<h2>Text</h2><pre>{_esc(email.textContent)}</pre>")
    parts.append(_json_block("Params", email.params))
    parts.append(_json_block("Headers", email.headers))
    return _page(_subject(email), "".join(parts))


def render_email_not_found() -> str:
    return _page(
        "Email not found",
        '<h2>Email not found</h2><p><a href="/">Back to all emails</a></p>',
    )
