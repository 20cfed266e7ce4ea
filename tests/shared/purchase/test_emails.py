"""The fulfillment email from templates (shared/purchase/emails.py): the built-in email as buyers have always
had it, an operator's templates in its place, and every template that would lose a buyer's link
refused at start-up, naming the setting."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from shared.config.settings import EMAIL_TEMPLATE_DIR
from shared.config.settings_reader import SettingsError
from shared.purchase import emails
from shared.purchase.catalog import BUNDLES
from shared.runtime import load_settings
from tests.snippets import blocks
from tests.support import ROOT, Buyer, fresh_python

BUNDLE = BUNDLES["agent-starter-kit"]
LINK = "https://shop.example.org/api/download/eyJhbGciOiJFUzI1NiJ9.eyJqdGkiOiJ0In0.c2ln"
UNTIL = "2026-12-07T05:54:27Z"


def email(name: str = "Ada", template_dir: str = "", link: str = LINK) -> emails.EmailContent:
    return emails.fulfillment_email(
        name=name, bundle=BUNDLE, link=link, expires_at=UNTIL, template_dir=template_dir
    )


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    """A template folder holding `files` (file name → template)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def refusal(path: Path | str) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings({EMAIL_TEMPLATE_DIR: str(path)})
    message = str(refused.value)
    assert message.startswith(f"{EMAIL_TEMPLATE_DIR}: "), message
    return message


# ----- the built-in email -------------------------------------------------------------------------


def test_the_built_in_email_greets_by_name_and_carries_the_link():
    sent = email("Zoë O'Brien")

    assert sent.subject == "Your Agent Starter Kit is ready"
    assert sent.text == (
        'Hello Zoë O\'Brien,\n\nYour free bundle "Agent Starter Kit" is ready.\n\n'
        f"Download it here (link valid until {UNTIL}):\n{LINK}\n"
    )
    assert sent.html == (
        "<p>Hello Zoë O&#x27;Brien,</p>"
        "<p>Your free bundle <strong>Agent Starter Kit</strong> is ready.</p>"
        f'<p><a href="{LINK}">Download Agent Starter Kit</a></p>'
        f"<p>The link is valid until {UNTIL}.</p>"
    )


def test_a_buyer_without_a_name_is_greeted_plainly():
    sent = email("")

    assert sent.text.startswith("Hello,\n\n")
    assert sent.html.startswith("<p>Hello,</p>")


def test_the_html_part_escapes_the_name_and_the_text_part_does_not():
    sent = email('<b onclick="x()">Ada</b>')

    assert "<b" not in sent.html
    assert "&lt;b onclick=&quot;x()&quot;&gt;Ada&lt;/b&gt;" in sent.html
    assert sent.text.startswith('Hello <b onclick="x()">Ada</b>,')


# ----- an operator's templates --------------------------------------------------------------------


def test_an_operators_html_replaces_only_the_html(tmp_path):
    html = '<p>Hey {{ name }}!</p><a href="{{ link }}">{{ bundle.title }}</a>'
    checked = load_settings({EMAIL_TEMPLATE_DIR: str(folder(tmp_path, {"fulfillment.html": html}))})

    sent = email("Ada", checked.email_template_dir)

    assert checked.email_template_dir == str(tmp_path)
    assert sent.html == f'<p>Hey Ada!</p><a href="{LINK}">Agent Starter Kit</a>'
    assert (sent.subject, sent.text) == (email().subject, email().text)


def test_a_relative_folder_is_taken_from_the_apps_folder():
    checked = load_settings({EMAIL_TEMPLATE_DIR: "shared/seams/templates"})

    assert checked.email_template_dir == str(ROOT / "shared" / "seams" / "templates")
    assert email("Ada", checked.email_template_dir) == email("Ada")


def docs_example(tmp_path: Path) -> Path:
    """The three files of docs/configuration.md's example, as written there."""
    page = ROOT / "docs" / "configuration.md"
    written = {}
    for block in blocks(page):
        above = [line for line in page.read_text().splitlines()[: block.line - 1] if line.strip()]
        named = re.fullmatch(r"`email-templates/(fulfillment[\w.]+)`:", above[-1])
        if named:
            written[named[1]] = block.body
    assert sorted(written) == sorted(emails.TEMPLATES)
    for name, text in written.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_documented_example_is_accepted_and_sends_what_it_says(tmp_path):
    checked = load_settings({EMAIL_TEMPLATE_DIR: str(docs_example(tmp_path))})

    sent = email("Ada", checked.email_template_dir)
    plain = email("", checked.email_template_dir)

    assert sent.subject == "Agent Starter Kit: your download link"
    assert sent.text.startswith("Hi Ada,\n\nThanks for picking up Agent Starter Kit")
    assert BUNDLE.description in sent.text and f"Download it here: {LINK}\n" in sent.text
    assert f'<p><a href="{LINK}">Download Agent Starter Kit</a> (the link works until {UNTIL})' in sent.html
    assert plain.text.startswith("Hi,\n") and plain.html.startswith("<p>Hi,</p>")


# ----- refused at start-up ------------------------------------------------------------------------


def test_a_folder_that_does_not_exist_or_holds_no_template_is_refused(tmp_path):
    assert "is not a folder the app can read" in refusal(tmp_path / "missing")
    (tmp_path / "fulfilment.html").write_text("<a href='{{ link }}'>x</a>")  # a misspelt name
    assert "holds none of fulfillment_subject.txt, fulfillment.txt, fulfillment.html" in refusal(tmp_path)


def test_a_syntax_error_is_refused_with_its_file_and_line(tmp_path):
    html = '<p>Hi</p>\n<a href="{{ link }}">{% if name %}x</a>\n'

    message = refusal(folder(tmp_path, {"fulfillment.html": html}))

    assert "fulfillment.html line 2 fails to render" in message
    assert "endif" in message


def test_an_unknown_name_is_refused_not_sent_empty(tmp_path):
    text = "Hello {{ nam }},\n{{ link }}\n"

    message = refusal(folder(tmp_path, {"fulfillment.txt": text}))

    assert "fulfillment.txt line 1 fails to render: 'nam' is undefined" in message


def test_a_template_that_fails_only_without_a_name_is_refused(tmp_path):
    text = "Hello {{ name[0] }}.\n{{ link }}\n"

    message = refusal(folder(tmp_path, {"fulfillment.txt": text}))

    assert "fulfillment.txt line 1 fails to render" in message
    assert "(rendered for bundle agent-starter-kit, without a name)" in message


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"fulfillment.txt": "Hello {{ name }}, your bundle is ready.\n"}, "fulfillment.txt must carry"),
        ({"fulfillment.html": "<p>Your bundle: {{ link }}</p>"}, "fulfillment.html must link to the"),
        ({"fulfillment.html": '<a href="{{ link }}x">go</a>'}, "fulfillment.html must link to the"),
        ({"fulfillment.html": "<!-- <a href='{{ link }}'> -->"}, "fulfillment.html must link to the"),
        ({"fulfillment_subject.txt": "{% if name %}Hi{% endif %}\n"}, "subject of one line"),
        ({"fulfillment_subject.txt": "Your\n{{ bundle.title }}\n"}, "subject of one line"),
    ],
    ids=[
        "text-without-link",
        "html-link-as-text",
        "html-link-changed",
        "html-link-commented",
        "subject-empty-without-a-name",
        "subject-of-two-lines",
    ],
)
def test_a_template_that_drops_the_link_or_breaks_the_subject_is_refused(tmp_path, files, problem):
    assert problem in refusal(folder(tmp_path, files))


@pytest.mark.parametrize(
    "unsafe",
    [
        "{{ bundle.__class__.__mro__ }}",
        "{{ link.__class__.__subclasses__() }}",
        "{{ bundle.update({'title': 'x'}) }}",
        "{{ self._TemplateReference__context }}",
    ],
)
def test_an_operators_template_runs_sandboxed(tmp_path, unsafe):
    html = f'<a href="{{{{ link }}}}">x</a>{unsafe}'

    message = refusal(folder(tmp_path, {"fulfillment.html": html}))

    assert "fulfillment.html line 1 fails to render: access to attribute" in message
    assert "is unsafe" in message


# ----- at purchase time ---------------------------------------------------------------------------


def test_a_template_that_drops_a_real_link_sends_the_built_in_email_and_logs_it(tmp_path, caplog):
    # Passes the start-up check (its sample link is on storefront.example), not a real purchase.
    html = '{% if "storefront.example" in link %}<a href="{{ link }}">Get it</a>{% endif %}'
    checked = load_settings({EMAIL_TEMPLATE_DIR: str(folder(tmp_path, {"fulfillment.html": html}))})

    with caplog.at_level(logging.ERROR, logger="shared.purchase.emails"):
        sent = email("Ada Secret", checked.email_template_dir)

    assert sent == email("Ada Secret")
    assert [r.getMessage() for r in caplog.records] == [
        'fulfillment.html must link to the download (<a href="{{ link }}">); the built-in email is sent'
    ]


def test_a_template_failing_on_a_real_purchase_names_its_line_in_the_log_not_the_buyer(tmp_path, caplog):
    text = '{{ link }}\n{% if name == "Grace" %}{{ name.missing }}{% endif %}\n'
    checked = load_settings({EMAIL_TEMPLATE_DIR: str(folder(tmp_path, {"fulfillment.txt": text}))})

    with caplog.at_level(logging.ERROR, logger="shared.purchase.emails"):
        sent = email("Grace", checked.email_template_dir)

    assert sent == email("Grace")
    [record] = caplog.records
    assert record.getMessage() == "fulfillment.txt line 2 failed (UndefinedError); the built-in email is sent"
    assert "Grace" not in record.getMessage()


def test_the_app_does_not_start_with_a_template_that_drops_the_link(tmp_path):
    folder(tmp_path, {"fulfillment.html": "<p>Your {{ bundle.title }} is ready.</p>"})
    env = {
        **os.environ,
        "AzureWebJobsStorage": "UseDevelopmentStorage=true",
        EMAIL_TEMPLATE_DIR: str(tmp_path),
    }

    result = fresh_python("import function_app", env)

    assert result.returncode != 0
    assert f"SettingsError: {EMAIL_TEMPLATE_DIR}: fulfillment.html must link to the download" in result.stderr


def test_a_purchase_sends_the_operators_email(host_factory, mail, tmp_path):
    docs_example(tmp_path)
    host = host_factory(STOREFRONT_EMAIL_TEMPLATE_DIR=str(tmp_path))
    buyer = Buyer(host.url)

    assert buyer.purchase({"email": buyer.email, "name": "Ada"}).status_code == 200

    [sent] = mail.emails_to(buyer.email)
    link = next(link for link in sent["links"] if "/api/download/" in link)
    assert sent["subject"] == "Agent Starter Kit: your download link"
    assert sent["textContent"].startswith("Hi Ada,\n\nThanks for picking up Agent Starter Kit")
    assert f"Download it here: {link}\n" in sent["textContent"]
    assert f'<p><a href="{link}">Download Agent Starter Kit</a>' in sent["htmlContent"]
