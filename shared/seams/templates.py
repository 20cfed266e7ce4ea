"""Markup from Jinja2 templates (the files in shared/seams/templates/): the Python code hands them
plain values, so escaping is the default rather than a habit.

An HTML template (`.html`, `.htm`) and all it includes is autoescaped, with the entities
`html.escape` writes and control and format characters shown as backslash escapes
(`shared.config.printable`); any other template is plain text, never escaped. An undefined name
is an error, never an empty string. Jinja2 is imported with the first page or email, never at a
cold start.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from shared.config.printable import printable

if TYPE_CHECKING:
    import jinja2

BUILT_IN = Path(__file__).with_name("templates")


class Templates:
    """Two Jinja2 environments over the same folders: a template is rendered as HTML (every value
    autoescaped) when its name ends in `.html` or `.htm`, else as plain text. The root decides for
    everything it includes, extends or imports, whatever those files are named: a partial named
    `.j2` or `.txt` inside an HTML template is escaped as HTML."""

    def __init__(self, html: jinja2.Environment, text: jinja2.Environment):
        self._html, self._text = html, text
        text.globals = html.globals  # one set of globals for both

    @property
    def globals(self) -> dict:
        return self._html.globals

    def get_template(self, name: str) -> jinja2.Template:
        return (self._html if is_html(name) else self._text).get_template(name)


def environment(*folders: Path, sandboxed: bool = False) -> Templates:
    """The templates in `folders`, the first holding a name winning. `sandboxed` is for templates
    an operator wrote: they run inside the app, so they may read the values they are given but
    call nothing unsafe and change nothing."""
    return Templates(_environment(folders, sandboxed, True), _environment(folders, sandboxed, False))


def _environment(folders: tuple[Path, ...], sandboxed: bool, autoescape: bool) -> jinja2.Environment:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    kind = ImmutableSandboxedEnvironment if sandboxed else jinja2.Environment
    return kind(
        loader=jinja2.FileSystemLoader([str(folder) for folder in folders]),
        autoescape=autoescape,
        finalize=_finalize(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )


def is_html(name: str) -> bool:
    """Whether a template (the root of a rendering) is HTML, by its name."""
    return name.lower().endswith((".html", ".htm"))


def _finalize():
    from jinja2 import pass_eval_context
    from markupsafe import Markup

    @pass_eval_context
    def finalize(context, value: object) -> object:
        """Each `{{ value }}` as it is written out: None as nothing, and in HTML, escaped."""
        if value is None:
            return ""
        if not context.autoescape or hasattr(value, "__html__"):
            return value
        return Markup(html.escape(printable(str(value))))

    return finalize
