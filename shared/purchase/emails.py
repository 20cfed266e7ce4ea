"""The fulfillment email's subject, text and HTML, from templates: the built-in ones in
shared/seams/templates/, or an operator's (`STOREFRONT_EMAIL_TEMPLATE_DIR`, docs/configuration.md).

An operator's folder replaces any of the three files it holds (`TEMPLATES`); the others stay built
in. Its templates run sandboxed and are checked once, at start-up (`check_folder`, called by
`shared.config.settings`): each must render for every bundle on offer, with a name and without, the text
and the HTML must carry the download link and the subject must be one line, or the app does not
start. A purchase never fails on a template: one that still misbehaves is logged and the built-in
email goes out instead.
"""

from __future__ import annotations

import functools
import logging
import traceback
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from shared.purchase.catalog import BUNDLES, Bundle
from shared.seams import templates

log = logging.getLogger(__name__)

SUBJECT, TEXT, HTML = "fulfillment_subject.txt", "fulfillment.txt", "fulfillment.html"
TEMPLATES = (SUBJECT, TEXT, HTML)
APP_ROOT = Path(__file__).resolve().parents[2]
# What the start-up check renders each template with: a link shaped like the real ones.
SAMPLE_LINK = "https://storefront.example/api/download/eyJhbGciOiJFUzI1NiJ9.eyJqdGkiOiJzYW1wbGUifQ.c2ln"
SAMPLE_EXPIRES_AT = "2026-12-07T05:54:27Z"
SAMPLE_NAMES = ("Zoë O'Brien", "")


@dataclass(frozen=True)
class EmailContent:
    subject: str
    text: str
    html: str


class TemplateProblem(ValueError):
    """An operator's email templates cannot be used; the message says which file and why."""


def fulfillment_email(
    *, name: str, bundle: Bundle, link: str, expires_at: str, template_dir: str = ""
) -> EmailContent:
    """The email that carries a bundle's download link; `template_dir` is an operator's folder
    that `check_folder` accepted, "" for the built-in templates."""
    if template_dir:
        try:
            return _render(_environment(template_dir), name, bundle, link, expires_at)
        except Exception as exc:  # noqa: BLE001 - whatever the template did, the buyer gets an email
            log.error("%s; the built-in email is sent", _logged(exc))
    return _render(_environment(""), name, bundle, link, expires_at)


def check_folder(folder: str) -> str:
    """The operator's template folder as an absolute path (a relative one is taken from the app's
    folder), once every template in it renders an email that carries the link."""
    path = APP_ROOT / folder
    if not path.is_dir():
        raise TemplateProblem(f"{folder!r} is not a folder the app can read")
    if not any((path / name).is_file() for name in TEMPLATES):
        raise TemplateProblem(f"{folder!r} holds none of {', '.join(TEMPLATES)}")
    environment = _environment(str(path))
    for bundle in BUNDLES.values():
        for name in SAMPLE_NAMES:
            sample = f"(rendered for bundle {bundle.id}, {'with a name' if name else 'without a name'})"
            try:
                _render(environment, name, bundle, SAMPLE_LINK, SAMPLE_EXPIRES_AT)
            except TemplateProblem as exc:
                raise TemplateProblem(f"{exc} {sample}") from None
            except Exception as exc:  # noqa: BLE001 - any failure refuses the template
                where = _where(exc) or "a template"
                raise TemplateProblem(f"{where} fails to render: {exc} {sample}") from None
    return str(path)


@functools.cache
def _environment(folder: str):
    """Built-in templates run as an operator's would (sandboxed), so both behave the same."""
    folders = (Path(folder), templates.BUILT_IN) if folder else (templates.BUILT_IN,)
    return templates.environment(*folders, sandboxed=True)


def _render(environment, name: str, bundle: Bundle, link: str, expires_at: str) -> EmailContent:
    context = {
        "name": name,
        "bundle": {"id": bundle.id, "title": bundle.title, "description": bundle.description},
        "link": link,
        "expires_at": expires_at,
    }
    subject, text, page = (environment.get_template(t).render(context) for t in TEMPLATES)
    subject = subject.strip()
    if not subject or any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in subject):
        raise TemplateProblem(f"{SUBJECT} must give a subject of one line, not empty or several")
    if link not in text:
        raise TemplateProblem(f"{TEXT} must carry the download link ({{{{ link }}}})")
    if link not in _links(page):
        raise TemplateProblem(f'{HTML} must link to the download (<a href="{{{{ link }}}}">)')
    return EmailContent(subject=subject, text=text, html=page)


def _logged(exc: Exception) -> str:
    """A failure as the log may show it: Jinja2's own message could quote the buyer's name, so
    only its place and kind."""
    if isinstance(exc, TemplateProblem):
        return str(exc)
    return f"{_where(exc) or 'a template'} failed ({type(exc).__name__})"


def _where(exc: Exception) -> str:
    """The template file and line a failure comes from: a syntax error says so itself, a failure
    while rendering is the innermost template frame of its traceback."""
    filename = getattr(exc, "filename", None)
    if filename:
        return f"{Path(filename).name} line {getattr(exc, 'lineno', '?')}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.endswith(TEMPLATES):
            return f"{Path(frame.filename).name} line {frame.lineno}"
    return ""


def _links(page: str) -> set[str]:
    """The href of every <a> in an HTML fragment, as a mail client reads it."""
    found: set[str] = set()

    class Anchors(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "a":
                found.update(value for key, value in attrs if key == "href" and value)

    parser = Anchors(convert_charrefs=True)
    parser.feed(page)
    parser.close()
    return found
