"""The README as a newcomer follows it: with a fresh `make run` up, every shell block from "Try it"
on runs as written, one after the other (tests/snippets.py puts the stack's free ports in place of
7071 and 8025), and prints what the README says it does."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from tests.snippets import Block, MakeRun, runnable
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

README = ROOT / "README.md"
WALKTHROUGH_FROM = "## Try it"
BUYER = "ada@example.org"


def walkthrough() -> list[Block]:
    """The README's runnable blocks from "Try it" to the end, in the order a reader meets them."""
    start = README.read_text().splitlines().index(WALKTHROUGH_FROM) + 1
    return [block for block in runnable(README) if block.line > start]


def json_documents(output: str) -> list[tuple[str, object]]:
    """The JSON documents one after another in `output`, each as (its text, its value)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := len(output) - len(output[at:].lstrip())) < len(output):
        value, end = decoder.raw_decode(output, at)
        found.append((output[at:end], value))
        at = end
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[MakeRun]:
    """`make run` as the reader starts it: from the checkout, with no receipt, key or count yet."""
    with MakeRun(ROOT, tmp_path_factory.mktemp("readme") / "azurite") as running:
        yield running


def emails_to(stack: MakeRun, address: str) -> list[dict]:
    return requests.get(f"{stack.sandbox_url}/_sandbox/emails", params={"to": address}, timeout=10).json()


def test_the_walkthrough_is_the_try_it_snippet_then_the_curl_examples():
    markers = [("from mcp import Client" in b.body, "# Plain HTTP purchase" in b.body) for b in walkthrough()]

    assert markers == [(True, False), (False, True)], (
        "a block was added to the README after 'Try it': say in the test below what it prints"
    )


def test_the_readme_examples_run_as_written_in_order_against_make_run(stack):
    try_it, examples = walkthrough()

    replayed = stack.run(try_it.body, ROOT)
    emails_after_try_it = emails_to(stack, BUYER)
    ran = stack.run(examples.body, ROOT)

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == "True\n"
    assert len(emails_after_try_it) == 1
    assert ran.returncode == 0, ran.stderr
    (bought, receipt), (_, mcp), (_, tools), (on_record, _), (_, health) = json_documents(ran.stdout)
    assert receipt["status"] == "fulfilled" and receipt["receipt_id"].startswith("rcpt_")
    assert on_record == bought, "the receipt URL serves the purchase's receipt byte for byte"
    assert mcp["result"]["structuredContent"]["status"] == "fulfilled"
    assert mcp["result"]["structuredContent"]["receipt_id"] != receipt["receipt_id"]
    assert {tool["name"] for tool in tools["result"]["tools"]} == {"purchase_free_bundle", "list_bundles"}
    assert health["status"] == "ok"
    assert len(emails_to(stack, BUYER)) == 3
