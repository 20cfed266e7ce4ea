"""Markup from Jinja2 templates (the files in shared/seams/templates/): the Python code hands them plain
values, so escaping is the default rather than a habit.

Every `.html` template is autoescaped, with the entities `html.escape` writes (`&quot;`, `&#x27;`)
and control and format characters shown as backslash escapes (`shared.config.printable`), so stored or
forged text can neither add markup nor hide in a page. `.txt` templates are plain text, never
escaped. An undefined name is an error, never an empty string. Jinja2 is imported when the first
environment is built (the first page or email), so a cold start (`import function_app`) does not
pay for it.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from shared.config.printable import printable

if TYPE_CHECKING:
    import jinja2

BUILT_IN = Path(__file__).with_name("templates")


def environment(*folders: Path, sandboxed: bool = False) -> jinja2.Environment:
    """An environment loading from `folders` in order, the first holding a name winning.
    `sandboxed` is for templates an operator wrote: they run inside the app, so they may read the
    values they are given but call nothing unsafe and change nothing."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    kind = ImmutableSandboxedEnvironment if sandboxed else jinja2.Environment
    return kind(
        loader=jinja2.FileSystemLoader([str(folder) for folder in folders]),
        autoescape=_is_html,
        finalize=_finalize(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )


def _is_html(name: str | None) -> bool:
    return name is not None and name.endswith(".html")


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
