"""The README and docs/ as a reader meets them: every relative link and #anchor resolves, and every
snippet a reader is meant to run is run by the suite.

The convention (docs/development.md#snippets): a fenced `sh`, `bash` or `python` block is run on the
reader's machine against `make run`. Each one is listed in SNIPPETS with the tests that run it,
most of them against a dev host, the README's walkthrough and the own-bundle recipe against a fresh
`make run` (tests/snippets.py); a block that needs Azure, a real account or the reader's own
values carries `<!-- not run: reason -->` on the line above its fence. Every fence names its language.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ops import package
from shared.config.settings import SECRET_SETTINGS, Settings
from shared.protocols import api
from shared.purchase.providers import PROVIDERS
from tests.snippets import NOT_RUN, RUNNABLE, bash, blocks, runnable, snippet
from tests.support import HANG_SECONDS, ROOT, unique_email, unique_key

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LOCAL_URL = "http://localhost:7071"
VENV_PYTHON = ".venv/bin/python"


@dataclass(frozen=True)
class Snippet:
    """A runnable block (found by a string only it contains) and the tests that run it. A synopsis
    with placeholders names one test per form it shows."""

    page: str
    marker: str
    tests: tuple[str, ...]


README_WALKTHROUGH = (
    "tests/repo/test_readme.py::test_the_readme_examples_run_as_written_in_order_against_make_run"
)
OWN_BUNDLE_RECIPE = (
    "tests/devstack/test_seed_bundles.py::test_the_own_bundle_recipe_downloads_your_file_as_written"
)
SNIPPETS = (
    Snippet(
        "README.md",
        "make run    #",
        (
            "tests/repo/test_docs.py::test_make_run_and_make_test_are_the_makefile_targets_they_describe",
            "tests/devstack/test_run.py::test_make_run_starts_everything_serves_an_idempotent_purchase_and_stops_on_ctrl_c",
        ),
    ),
    Snippet("README.md", "from mcp import Client", (README_WALKTHROUGH,)),
    Snippet("README.md", "# Plain HTTP purchase", (README_WALKTHROUGH,)),
    Snippet(
        "docs/clients.md",
        "npx @modelcontextprotocol/inspector",
        ("tests/app/test_clients.py::test_inspector_cli_initializes_lists_and_calls_with_and_without_a_key",),
    ),
    Snippet(
        "docs/clients.md",
        "elicitation_callback=fill_in",
        (
            "tests/app/test_clients_2026.py::test_the_docs_python_sdk_example_answers_the_form_then_declines_it",
        ),
    ),
    Snippet(
        "docs/clients.md",
        '"elicitation/create"',
        ("tests/app/test_clients_2026.py::test_the_docs_typescript_example_answers_the_form_with_one_email",),
    ),
    Snippet(
        "docs/clients.md",
        "from a2a.client import create_client",
        (
            "tests/shared/protocols/test_a2a.py::test_the_docs_snippet_buys_once_and_replays_with_the_official_client",
        ),
    ),
    Snippet(
        "docs/clients.md",
        "create_signature_verifier",
        (
            "tests/shared/protocols/test_a2a.py::test_the_docs_snippet_verifies_the_served_card_with_the_official_sdk",
        ),
    ),
    Snippet(
        "docs/clients.md",
        "openapi_spec_validator",
        (
            "tests/shared/protocols/test_openapi.py::test_the_docs_check_fetches_and_validates_the_served_document",
        ),
    ),
    Snippet(
        "docs/ucp.md",
        "/.well-known/ucp",
        ("tests/app/test_ucp_http.py::test_the_docs_snippet_discovers_and_searches_as_the_page_says",),
    ),
    Snippet(
        "docs/ucp.md",
        "/ucp/checkout-sessions",
        ("tests/app/test_ucp_checkout_http.py::test_the_docs_checkout_snippet_runs_as_the_page_says",),
    ),
    Snippet(
        "docs/receipts.md",
        "ops.verify_receipt",
        ("tests/repo/test_docs.py::test_the_verify_receipt_snippet_says_valid_online_and_offline",),
    ),
    Snippet(
        "docs/errors.md",
        "# 415:",
        (
            "tests/shared/config/test_errors.py::test_the_curl_snippet_is_refused_415_as_the_page_says_then_buys",
        ),
    ),
    Snippet(
        "docs/development.md",
        "admin/functions/reap_idempotency_keys",
        ("tests/repo/test_docs.py::test_the_timer_snippet_runs_every_timer_on_the_dev_host",),
    ),
    Snippet(
        "docs/development.md",
        "class Notice",
        ("tests/repo/test_docs.py::test_the_executor_snippet_posts_a_notice_once",),
    ),
    Snippet(
        "docs/development.md",
        "--retry-all-errors",
        (
            "tests/devstack/test_taken_ports.py::test_the_readiness_snippet_waits_for_a_background_make_run_then_stops_it",
        ),
    ),
    Snippet("docs/development.md", 'id="field-notes"', (OWN_BUNDLE_RECIPE,)),
    Snippet("docs/development.md", "seed_bundles --file", (OWN_BUNDLE_RECIPE,)),
    Snippet("docs/development.md", "/_sandbox/emails", (OWN_BUNDLE_RECIPE,)),
    Snippet(
        "docs/speclint.md",
        "-m speclint http://localhost:7071/api/a2a/mcp",
        (
            "tests/speclint/test_rules.py::test_live_dev_host_passes_with_fail_on_low",
            "tests/speclint/test_transports_http.py::test_url_target_follows_next_cursor_and_carries_the_session",
            "tests/speclint/test_transports_stdio.py::test_lists_every_page_of_a_python_sdk_server",
            "tests/speclint/test_cli.py::test_accepted_file_shapes",
            "tests/speclint/test_cli.py::test_dash_reads_standard_input",
        ),
    ),
    Snippet(
        "docs/speclint.md",
        '"$MCP_URL"',
        (
            "tests/speclint/test_transports_http.py::test_url_target_follows_next_cursor_and_carries_the_session",
            "tests/speclint/test_cli.py::test_fail_on_thresholds_with_a_high_finding",
            "tests/speclint/test_cli.py::test_sarif_output_is_sarif_2_1_0",
        ),
    ),
)


def localized(code: str, base_url: str) -> str:
    return code.replace(LOCAL_URL, base_url).replace(VENV_PYTHON, str(ROOT / VENV_PYTHON))


# --- the snippet registry -------------------------------------------------------------------------


def test_every_fence_names_its_language():
    bare = [b.where for page in PAGES for b in blocks(page) if not b.lang]
    assert not bare, f"fences without a language (use text for output and layouts): {bare}"


def test_every_runnable_block_is_run_by_the_suite():
    unknown = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for block in runnable(page):
            entries = [s for s in SNIPPETS if s.page == name and s.marker in block.body]
            if len(entries) != 1:
                unknown.append((block.where, len(entries)))
    assert not unknown, (
        f"runnable blocks without exactly one SNIPPETS entry: {unknown}; add the test that runs it, "
        "or mark the block <!-- not run: reason --> (docs/development.md#snippets)"
    )


@pytest.mark.parametrize("entry", SNIPPETS, ids=lambda s: f"{s.page}:{s.marker}")
def test_every_registry_entry_matches_one_block_and_names_real_tests(entry):
    matching = [b for b in runnable(ROOT / entry.page) if entry.marker in b.body]
    assert len(matching) == 1, f"{entry.page}: {len(matching)} runnable blocks contain {entry.marker!r}"
    for test in entry.tests:
        path, name = test.split("::")
        assert re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M), (
            f"{test} does not exist"
        )


def test_not_run_markers_stand_only_above_runnable_blocks():
    for page in PAGES:
        inside = {n for b in blocks(page) for n in range(b.line, b.line + b.body.count("\n") + 2)}
        lines = enumerate(page.read_text().splitlines(), 1)
        markers = {n for n, line in lines if line.startswith("<!-- not run") and n not in inside}
        above = {b.line - 1 for b in blocks(page) if b.lang in RUNNABLE and NOT_RUN.match(b.above)}
        assert markers == above, f"{page.name}: a not-run marker without a reason or a block below it"


# --- links and anchors ----------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but `-` and `_`
    removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def prose(page: Path) -> str:
    """The page without its fenced blocks and inline code spans."""
    text = page.read_text()
    for block in blocks(page):
        text = text.replace(block.raw, "\n")
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set(re.findall(r'<a (?:id|name)="([^"]+)"', page.read_text()))
    for heading in re.findall(r"^#{1,6} (.+?)#*$", prose(page), re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def resolve(page: Path, target: str) -> str | None:
    """Why `target`, linked from `page`, does not resolve; None when it does."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if ROOT not in file.parents and file != ROOT:
        return "outside the repository"
    if not file.exists():
        return "no such file"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"no heading #{anchor} in {file.relative_to(ROOT)}"
    if anchor and file.suffix != ".md" and not re.fullmatch(r"L\d+(-L\d+)?", anchor):
        return "an anchor into a file that is not Markdown"
    return None


def links(page: Path) -> list[str]:
    targets = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose(page))
    targets += re.findall(r'<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"', prose(page))
    return [t for t in targets if not re.match(r"^([a-z][a-z0-9+.-]*:|//)", t, re.I)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = {target: why for target in links(page) if (why := resolve(page, target))}
    assert not broken, broken


def test_the_slug_follows_githubs_rules():
    assert slug("Finance views: the receipt page and the day's listing") == (
        "finance-views-the-receipt-page-and-the-days-listing"
    )
    assert slug("What the suite proves, client by client") == "what-the-suite-proves-client-by-client"
    assert slug("`make run` and A2A 1.0") == "make-run-and-a2a-10"


def test_the_docs_link_in_every_error_body_resolves():
    assert resolve(ROOT / "README.md", api.DOCS) is None, api.DOCS


def test_the_readme_stays_short_and_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200, "the README stays short: depth goes in docs/"
    for page in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, f"the README has no line for docs/{page.name}"


# --- the configuration table ----------------------------------------------------------------------


def configuration_rows() -> dict[str, list[str]]:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    settings = doc.split("## Settings", 1)[1].split("### Set by the platform", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", settings, re.M)
    return {name: [cell.strip() for cell in rest.split(" | ")] for name, rest in rows}


def readme_layout() -> tuple[set[str], set[str]]:
    """The README's 'What is where' block: (names marked deployed, names marked never deployed)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## What is where", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    sections: dict[str, set[str]] = {}
    for line in block.splitlines():
        if not line.startswith(" "):
            heading = line
            sections[heading] = set()
            continue
        names = re.match(r"\s+((?:\S+ )*\S+)\s{2,}", line)[1]
        sections[heading] |= {name.rstrip("/") for name in names.split(" ")}
    deployed, never = sections.values()
    return deployed, never


def test_the_readmes_layout_marks_as_deployed_exactly_what_the_package_holds():
    deployed, never = readme_layout()
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout
    tracked_paths = set(tracked.split())
    # what a publish of the committed tree ships: a work-in-progress file does not move the README
    shipped = set(package.package_files(allow_untracked=True)) & tracked_paths
    packaged = {path.split("/", 1)[0] for path in shipped}
    top_level_dirs = {path.split("/", 1)[0] for path in tracked_paths if "/" in path} - {".ci"}

    assert deployed == packaged
    assert not never & packaged
    assert top_level_dirs <= deployed | never, "a top-level folder the README does not place"
    assert all((ROOT / name).exists() for name in deployed | never)


def test_the_configuration_table_marks_exactly_the_codes_secrets():
    secret = {name for name, cells in configuration_rows().items() if cells[1] == "**yes**"}
    assert secret == set(SECRET_SETTINGS)


def provider_rows() -> list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
    """The providers table of governance.md's "One mailbox, many spellings": each row's
    provider, domains, source URLs and whether it is documented (or rests on user reports)."""
    doc = (ROOT / "docs" / "governance.md").read_text()
    section = doc.split("## One mailbox, many spellings", 1)[1].split("\n## ", 1)[0]
    table = section.split("| provider | domains | rule | source | documented or user reports |\n", 1)[1]
    rows = []
    for line in table.split("\n\n", 1)[0].splitlines()[1:]:
        name, domains, _, sources, kind = (cell.strip() for cell in line.strip("|").split(" | "))
        assert kind in ("documented", "user reports"), line
        urls = tuple(re.findall(r"\]\((https?://[^)\s]+)\)", sources))
        rows.append((name, tuple(re.findall(r"`([^`]+)`", domains)), urls, kind == "documented"))
    return rows


def test_the_providers_table_is_the_codes():
    """The docs list exactly the providers, domains and sources the mailbox key reads addresses by."""
    code = [
        (row.name, row.domains, tuple(url for _, url in row.sources if url), row.documented)
        for row in PROVIDERS
    ]
    assert provider_rows() == code


def test_the_configuration_table_gives_the_codes_defaults():
    default = Settings.from_env({})
    for name, cells in configuration_rows().items():
        written = re.fullmatch(r"`([^`]*)`(?: \(.*\))?", cells[0])
        if written and not name.startswith("AzureWebJobsStorage"):
            assert Settings.from_env({name: written[1]}) == default, f"{name}: {cells[0]} is not the default"


# --- the performance page -------------------------------------------------------------------------


def test_the_performance_page_quotes_the_recorded_run():
    """The printed run on docs/performance.md is exactly what `make bench` prints for the results it
    keeps beside the page: no figure on the page can drift from the run it claims to quote."""
    from bench.report import table

    page = (ROOT / "docs" / "performance.md").read_text()
    results = json.loads((ROOT / "docs" / "bench-results.json").read_text())  # the run the page quotes
    printed = re.search(r"^```text\n(.*?)^```", page, re.M | re.S)
    assert printed, "docs/performance.md has no printed run"
    expected = "\n".join(line.rstrip() for line in table(results).splitlines())
    assert printed.group(1).rstrip("\n") == expected, (
        "docs/performance.md differs from docs/bench-results.json"
    )


# --- the snippets this file runs ------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs_host(host_factory) -> str:
    """A host of its own, like a reader's `make run`: every snippet calls from 127.0.0.1, whose quota
    on the shared hosts' governance table must stay untouched."""
    return host_factory(
        STOREFRONT_RATE_LIMIT_PER_HOUR="1000", STOREFRONT_GOVERNANCE_TABLE="governancedocs"
    ).url


def test_make_run_and_make_test_are_the_makefile_targets_they_describe():
    done = subprocess.run(
        ["make", "-n", "-W", "requirements.txt", "run", "test"], cwd=ROOT, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert "-m devstack.run" in done.stdout
    assert "-m ruff check ." in done.stdout and "-m pytest" in done.stdout


def test_the_verify_receipt_snippet_says_valid_online_and_offline(docs_host, tmp_path):
    code = localized(snippet("docs/receipts.md", "ops.verify_receipt"), docs_host)
    code = code.replace("ada@example.org", unique_email("verify")).replace("order-2026-0005", unique_key())

    done = bash(code, tmp_path, {"PYTHONPATH": str(ROOT)})

    assert done.returncode == 0, done.stderr
    verdicts = done.stdout.splitlines()
    assert len(verdicts) == 2 and all(v.startswith("VALID: receipt rcpt_") for v in verdicts), done.stdout
    assert list(tmp_path.iterdir()) == [], "the snippet saves its files outside the checkout"


def test_the_timer_snippet_runs_every_timer_on_the_dev_host(docs_host, tmp_path):
    code = localized(snippet("docs/development.md", "admin/functions/reap_idempotency_keys"), docs_host)

    done = bash(code, tmp_path, {"PYTHONPATH": str(ROOT)})

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["202", "202", "202", "202"]


def test_the_executor_snippet_posts_a_notice_once(azurite):
    code = snippet("docs/development.md", "class Notice")

    ran = subprocess.run(
        [".venv/bin/python", "-"],
        input=code,
        cwd=ROOT,
        env={**os.environ, "AzureWebJobsStorage": azurite},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "['Closed on Monday'] True True\n"
