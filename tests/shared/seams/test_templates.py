"""Rendering templates (shared/seams/templates.py): what autoescaping writes, what plain text keeps, that
an unknown name is an error, and that a cold start never imports Jinja2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError
from markupsafe import Markup

from shared.seams import templates
from tests.support import fresh_python


def render(tmp_path: Path, name: str, source: str, *, sandboxed: bool = False, **context: object) -> str:
    (tmp_path / name).write_text(source)
    return templates.environment(tmp_path, sandboxed=sandboxed).get_template(name).render(context)


def test_html_is_escaped_with_the_entities_html_escape_writes(tmp_path):
    page = render(tmp_path, "a.html", '<a title="{{ v }}">{{ v }}</a>', v='O\'Brien & "Co" <b>')

    escaped = "O&#x27;Brien &amp; &quot;Co&quot; &lt;b&gt;"
    assert page == f'<a title="{escaped}">{escaped}</a>'


def test_control_and_format_characters_in_html_are_shown_as_escapes(tmp_path):
    page = render(tmp_path, "a.html", "<p>{{ v }}</p>", v="agent\x00\x1b\u202e\u2028/1.0")

    assert page == r"<p>agent\x00\x1b\u202e\u2028/1.0</p>"


def test_plain_text_templates_are_not_escaped(tmp_path):
    text = render(tmp_path, "a.txt", "Hello {{ v }}\n", v="O'Brien & <Co>")

    assert text == "Hello O'Brien & <Co>\n"


def test_markup_a_template_built_is_not_escaped_twice_and_none_is_nothing(tmp_path):
    page = render(
        tmp_path, "a.html", "{{ safe }}|{{ missing }}|{{ 0 }}", safe=Markup("<em>x</em>"), missing=None
    )

    assert page == "<em>x</em>||0"


def test_an_unknown_name_is_an_error_not_an_empty_string(tmp_path):
    with pytest.raises(UndefinedError):
        render(tmp_path, "a.html", "<p>{{ titel }}</p>", title="Kit")


def test_a_sandboxed_template_reads_values_but_calls_nothing_unsafe(tmp_path):
    assert render(tmp_path, "a.html", "{{ b.title }}", sandboxed=True, b={"title": "Kit"}) == "Kit"
    with pytest.raises(SecurityError):
        render(tmp_path, "b.html", "{{ b.__class__ }}", sandboxed=True, b={})
    with pytest.raises(SecurityError):
        render(tmp_path, "c.html", "{{ b.clear() }}", sandboxed=True, b={"title": "Kit"})


def test_the_first_folder_holding_a_name_wins(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.txt").write_text("first")
    (second / "a.txt").write_text("second")
    (second / "b.txt").write_text("only in second")
    environment = templates.environment(first, second)

    assert environment.get_template("a.txt").render() == "first"
    assert environment.get_template("b.txt").render() == "only in second"


def test_importing_the_app_does_not_import_jinja2_and_the_first_page_does():
    probe = (
        "import sys, function_app\nprint('jinja2' in sys.modules)\n"
        "from shared.config import settings\nfrom shared.protocols import pages\n"
        "from shared.purchase import emails\n"
        "print('jinja2' in sys.modules)\n"
        "settings.Settings.from_env({})\nprint('jinja2' in sys.modules)\n"
        "pages.message_page('t', 'm')\nprint('jinja2' in sys.modules)\n"
    )

    result = fresh_python(probe, {**os.environ, "AzureWebJobsStorage": "UseDevelopmentStorage=true"})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "False", "True"]


@pytest.mark.parametrize("partial", ["part.htm", "part.j2", "part.txt", "part", "part.HTML.bak"])
@pytest.mark.parametrize("how", ["include", "import", "extends"])
def test_everything_an_html_template_reaches_is_escaped_whatever_its_file_name(tmp_path, partial, how):
    """A buyer's name the filter accepts, rendered through a partial an operator named anything."""
    name = "<a href=//1249767168>Claim your refund</a>"
    sources = {
        "include": ('{% include "PART" %}', "<p>{{ v }}</p>"),
        "import": (
            '{% from "PART" import line %}{{ line(v) }}',
            "{% macro line(x) %}<p>{{ x }}</p>{% endmacro %}",
        ),
        "extends": (
            '{% extends "PART" %}{% block b %}{{ v }}{% endblock %}',
            "<p>{% block b %}{% endblock %}</p>",
        ),
    }
    root, part = sources[how]
    (tmp_path / partial).write_text(part)
    for sandboxed in (False, True):
        page = render(tmp_path, "mail.html", root.replace("PART", partial), sandboxed=sandboxed, v=name)

        assert "<a " not in page and "&lt;a href=//1249767168&gt;" in page


def test_a_text_template_includes_its_partials_unescaped_whatever_their_names(tmp_path):
    (tmp_path / "part.html").write_text("Hello {{ v }}")

    assert (
        render(tmp_path, "mail.txt", '{% include "part.html" %}', v="O'Brien & <Co>")
        == "Hello O'Brien & <Co>"
    )


def test_an_htm_template_is_html(tmp_path):
    assert render(tmp_path, "a.htm", "{{ v }}", v="<b>") == "&lt;b&gt;"
