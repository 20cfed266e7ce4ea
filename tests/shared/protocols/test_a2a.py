"""The A2A endpoint and agent card (shared/protocols/a2a/) on a dev host: the official `a2a-sdk` client in its
1.0 and 0.3 modes, then raw JSON-RPC for the shapes, the keys and every error."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.compat.v0_3 import types as types_v03
from a2a.helpers import get_data_parts, new_data_message
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import PyJWK

from devstack.ports import free_port
from devstack.run import DEV_ACCOUNT_KEY
from devstack.services import Service, dev_settings, start_process
from shared import runtime
from shared.config.settings import Settings
from shared.protocols.a2a import endpoint as a2a
from shared.protocols.a2a.endpoint import message_key
from shared.protocols.http import Request
from shared.purchase.catalog import listing
from shared.purchase.receipt import signatures
from tests.snippets import snippet
from tests.support import ROOT, Buyer, fresh_python, unique_address, unique_email

LEGACY_CARD_FIELDS = ("url", "preferredTransport", "protocolVersion")


def start_agent(logs, azurite: str, sandbox: Service, **settings: str) -> Service:
    """A dev host whose public base URL is its own address, so its card points back at it (the
    session host announces localhost:7071), with these settings over the development ones."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **dev_settings(),
        "AzureWebJobsStorage": azurite,
        "BREVO_BASE_URL": f"{sandbox.url}/v3",
        "STOREFRONT_PUBLIC_BASE_URL": base,
        **settings,
    }
    log = logs / f"devhost-a2a-{port}.log"
    args = [sys.executable, "-m", "devstack.devhost", "--port", str(port), "--app-dir", str(ROOT)]
    return Service(start_process(args, port, log, env), base, log, env)


@pytest.fixture(scope="module")
def agent(logs, azurite, sandbox) -> Iterator[Service]:
    """The A2A dev host, allowing 5 purchases an hour per client address."""
    service = start_agent(logs, azurite, sandbox, STOREFRONT_RATE_LIMIT_PER_HOUR="5")
    yield service
    service.stop()


@pytest.fixture
def buyer(agent) -> Buyer:
    return Buyer(agent.url)


def rpc(buyer: Buyer, method: str, params: object = None, version: str | None = "1.0", headers=None):
    message = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        message["params"] = params
    version_header = {"A2A-Version": version} if version is not None else {}
    return buyer.http.post(
        f"{buyer.host}/api/a2a", json=message, headers={**version_header, **(headers or {})}, timeout=30
    )


def send(buyer: Buyer, data: object, message_id: str | None = None, version: str | None = "1.0", **fields):
    """SendMessage (1.0) or message/send (0.3; `version` None sends no A2A-Version header)."""
    legacy = version != "1.0"
    part = {"kind": "data", "data": data} if legacy else {"data": data, "mediaType": "application/json"}
    return send_parts(buyer, [part], message_id, version, **fields)


def send_parts(
    buyer: Buyer, parts: list, message_id: str | None = None, version: str | None = "1.0", **fields
):
    """A user message with these parts, in the version's own shapes."""
    legacy = version != "1.0"
    message = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "user" if legacy else "ROLE_USER",
        "parts": parts,
        **({"kind": "message"} if legacy else {}),
        **fields,
    }
    return rpc(buyer, "message/send" if legacy else "SendMessage", {"message": message}, version)


def text(version: str | None, words: str) -> dict:
    return {"text": words} if version == "1.0" else {"kind": "text", "text": words}


def message_result(response) -> dict:
    """The Message a SendMessage answered (1.0 wraps it in {"message": ...}, 0.3 does not)."""
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return result.get("message", result)


def field_of(error: dict) -> str:
    """The params field a 1.0 -32602 names (google.rpc.BadRequest)."""
    [violations] = [d["fieldViolations"] for d in error["data"] if d["@type"].endswith("BadRequest")]
    return violations[0]["field"]


def task_of(response) -> dict:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return result.get("task", result)


def receipt_of(task: dict) -> dict:
    [artifact] = task["artifacts"]
    [part] = artifact["parts"]
    return part["data"]


def error_of(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["error"]


# --- the official client --------------------------------------------------------------------------


async def _buy_with_the_sdk(base: str, version: str, email: str, address: str) -> dict:
    """Resolve the card from the base URL, send one message twice, read the task back, be refused
    and ask an unknown task; record what went over the wire."""
    sent: list[tuple[str, str]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            sent.append((json.loads(request.content)["method"], request.headers.get("A2A-Version", "")))

    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(transport=transport, event_hooks={"request": [record]}) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http))
        if version == "1.0":
            client = await factory.create_from_url(base)
        else:  # what a 0.3 client reads: the card without the 1.0 interfaces
            card = (await http.get(f"{base}/.well-known/agent-card.json")).json()
            del card["supportedInterfaces"]
            client = factory.create(parse_agent_card(card))
        message = new_data_message({"email": email, "name": "Ada"}, role=Role.ROLE_USER)
        first = [r async for r in client.send_message(SendMessageRequest(message=message))]
        again = [r async for r in client.send_message(SendMessageRequest(message=message))]
        fetched = await client.get_task(GetTaskRequest(id=first[0].task.id))
        bad = new_data_message({"email": "nope"}, role=Role.ROLE_USER)
        refused = [r async for r in client.send_message(SendMessageRequest(message=bad))]
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa"))
        listed = await client.list_tasks(ListTasksRequest()) if version == "1.0" else None
    return {
        "first": first,
        "again": again,
        "fetched": fetched,
        "refused": refused,
        "sent": sent,
        "listed": listed,
    }


@pytest.mark.parametrize(
    ("version", "methods"),
    [("1.0", ["SendMessage", "GetTask", "ListTasks"]), ("0.3", ["message/send", "tasks/get"])],
)
def test_official_client_buys_once_per_message_id_and_reads_the_task_back(agent, mail, version, methods):
    email = unique_email(f"a2a-sdk-{version}")
    seen = asyncio.run(_buy_with_the_sdk(agent.url, version, email, unique_address()))

    [first], [again], [refused] = seen["first"], seen["again"], seen["refused"]
    receipt = get_data_parts(first.task.artifacts[0].parts)[0]
    stored = httpx.get(receipt["receipt_url"]).json()
    assert first.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert first.task.id == receipt["receipt_id"]
    assert receipt == stored  # numbers come back as floats (protobuf Value), equal to the ints
    jwks = httpx.get(f"{agent.url}/.well-known/jwks.json").json()
    assert signatures.verify(
        json.dumps(receipt).encode(), jwks, exact_bytes=False
    ).valid  # as the client holds it
    assert receipt["caller"]["channel"] == "a2a"
    assert get_data_parts(again.task.artifacts[0].parts)[0] == receipt
    assert again.task.id == first.task.id
    assert MessageToDict(again.task.metadata) == {"storefront/replayed": True}
    assert get_data_parts(seen["fetched"].artifacts[0].parts)[0] == receipt
    assert refused.task.status.state == TaskState.TASK_STATE_REJECTED
    assert get_data_parts(refused.task.artifacts[0].parts)[0]["error"]["code"] == "invalid_email"
    assert len(mail.emails_to(email)) == 1
    if seen["listed"] is not None:  # no task is listed to an unauthenticated caller, not even its own
        assert (list(seen["listed"].tasks), seen["listed"].next_page_token) == ([], "")
    assert {method for method, _ in seen["sent"]} == set(methods)
    assert {header for _, header in seen["sent"]} == {version}


def test_official_client_reads_every_field_of_the_card(agent):
    document = httpx.get(f"{agent.url}/.well-known/agent-card.json").json()
    modern = {k: v for k, v in document.items() if k not in LEGACY_CARD_FIELDS}

    strict = ParseDict(modern, AgentCard())  # unknown fields would raise
    legacy = types_v03.AgentCard.model_validate(document)

    endpoint = f"{agent.url}/api/a2a"
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in strict.supported_interfaces] == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
    ]
    assert (legacy.url, legacy.preferred_transport, legacy.protocol_version) == (endpoint, "JSONRPC", "0.3.0")
    assert [s.id for s in strict.skills] == ["purchase_free_bundle", "list_bundles"]
    assert strict.capabilities.streaming is False and strict.capabilities.push_notifications is False


# --- the agent card -------------------------------------------------------------------------------


def test_card_names_the_endpoint_the_jwks_and_both_skills_from_the_settings(agent):
    answer = httpx.get(f"{agent.url}/.well-known/agent-card.json")
    card = answer.json()

    assert answer.headers["Content-Type"] == "application/json"
    assert card["capabilities"]["extendedAgentCard"] is False
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["application/json", "text/plain"]
    [extension] = card["capabilities"]["extensions"]
    assert extension["uri"] == "urn:storefront:a2a:signed-receipts:v1"
    assert extension["params"]["jwksUrl"] == f"{agent.url}/.well-known/jwks.json"
    assert httpx.get(extension["params"]["jwksUrl"]).json()["keys"]
    purchase, catalog = card["skills"]
    assert json.loads(purchase["examples"][0]) == {
        "email": "ada@example.org",
        "name": "Ada",
        "bundle_id": "agent-starter-kit",
    }
    assert json.loads(catalog["examples"][0]) == {"operation": "list_bundles"}


def test_card_is_cacheable_and_a_conditional_get_or_head_is_304(agent):
    url = f"{agent.url}/.well-known/agent-card.json"
    first = httpx.get(url)
    head = httpx.head(url)
    again = httpx.get(url, headers={"If-None-Match": first.headers["ETag"]})
    head_again = httpx.head(url, headers={"If-None-Match": first.headers["ETag"]})

    assert first.json()["signatures"]
    assert first.headers["Cache-Control"] == "public, max-age=300"
    assert (head.status_code, head.headers["ETag"], head.content) == (200, first.headers["ETag"], b"")
    assert (again.status_code, again.content, again.headers["ETag"]) == (304, b"", first.headers["ETag"])
    assert (head_again.status_code, head_again.headers["ETag"]) == (304, first.headers["ETag"])
    assert httpx.get(url, headers={"If-None-Match": '"other"'}).status_code == 200


def test_card_has_one_last_modified_that_answers_if_modified_since(agent):
    url = f"{agent.url}/.well-known/agent-card.json"
    first, second = httpx.get(url), httpx.get(url)
    modified = first.headers["Last-Modified"]

    since = httpx.get(url, headers={"If-Modified-Since": modified})
    head = httpx.head(url, headers={"If-Modified-Since": modified})
    tag_first = httpx.get(url, headers={"If-None-Match": '"other"', "If-Modified-Since": modified})
    invalid = httpx.get(url, headers={"If-Modified-Since": "yesterday"})

    assert re.fullmatch(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", modified)
    assert second.headers["Last-Modified"] == modified
    assert (since.status_code, since.content, since.headers["Last-Modified"]) == (304, b"", modified)
    assert since.headers["ETag"] == first.headers["ETag"] and head.status_code == 304
    assert tag_first.status_code == 200 and tag_first.json()["signatures"]  # If-None-Match decides
    assert invalid.status_code == 200 and invalid.headers["Last-Modified"] == modified


def test_the_official_resolver_verifies_the_served_card_with_the_served_keys(agent):
    """a2a-sdk's own resolver and verifier, keys read from the JWKS the card's signatures name."""
    jwks_url = f"{agent.url}/.well-known/jwks.json"
    named = []

    def store_key(kid, jku):
        named.append((kid, jku))
        [key] = [k for k in httpx.get(jwks_url).json()["keys"] if k["kid"] == kid]
        return PyJWK(key)

    async def resolve(verifier):
        async with httpx.AsyncClient() as http:
            return await A2ACardResolver(http, agent.url).get_agent_card(signature_verifier=verifier)

    card = asyncio.run(resolve(create_signature_verifier(store_key, ["ES256"])))
    document = httpx.get(f"{agent.url}/.well-known/agent-card.json").json()
    document["skills"][0]["description"] += " Also sends a second email."

    assert card.name == "Storefront" and len(card.signatures) == 2
    assert named[0] == (httpx.get(jwks_url).json()["keys"][0]["kid"], jwks_url)
    with pytest.raises(InvalidSignaturesError):
        create_signature_verifier(store_key, ["ES256"])(parse_agent_card(document))


def test_the_docs_snippet_verifies_the_served_card_with_the_official_sdk(agent):
    code = snippet("docs/clients.md", "create_signature_verifier").replace("http://localhost:7071", agent.url)

    done = fresh_python(code)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["verified", "Storefront"]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_card_answers_other_methods_405_with_allow(agent, method):
    answer = httpx.request(method, f"{agent.url}/.well-known/agent-card.json")

    assert (answer.status_code, answer.headers["Allow"]) == (405, "GET, HEAD")
    assert answer.json()["error"]["code"] == "method_not_allowed"


# --- purchases ------------------------------------------------------------------------------------


def test_send_message_answers_a_completed_task_carrying_the_stored_receipt_bytes(buyer, mail):
    response = send(buyer, {"email": buyer.email, "bundle_id": "mcp-field-guide"})

    task = task_of(response)
    receipt = receipt_of(task)
    stored = buyer.http.get(receipt["receipt_url"], timeout=10).content
    assert stored in response.content  # verbatim, not re-encoded
    assert "kind" not in task and "task" in response.json()["result"]
    assert (task["id"], task["contextId"]) == (receipt["receipt_id"], receipt["receipt_id"])
    assert task["status"] == {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": receipt["issued_at"][:-1] + ".000Z",
    }
    assert task["artifacts"][0]["parts"][0]["mediaType"] == "application/json"
    assert receipt["bundle"]["id"] == "mcp-field-guide"
    assert receipt["caller"] == {
        "channel": "a2a",
        "user_agent": buyer.http.headers["User-Agent"],
        "agent": {"verified": False},
    }
    assert len(mail.emails_to(buyer.email)) == 1


def test_message_send_without_a_version_header_is_answered_in_0_3_shapes(buyer):
    response = send(buyer, {"email": buyer.email}, version=None, contextId="ctx-of-the-caller")

    task = task_of(response)
    assert task["kind"] == "task"
    assert task["contextId"] == "ctx-of-the-caller"
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0] == {"kind": "data", "data": receipt_of(task)}
    assert receipt_of(task)["status"] == "fulfilled"


def test_a_resent_message_replays_the_receipt_bytes_and_sends_one_email(buyer, mail):
    message_id = str(uuid.uuid4())
    first = send(buyer, {"email": buyer.email}, message_id)
    again = send(buyer, {"email": buyer.email}, message_id, version=None)

    stored = buyer.http.get(receipt_of(task_of(first))["receipt_url"], timeout=10).content
    assert stored in first.content and stored in again.content
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert task_of(again)["metadata"] == {"storefront/replayed": True}
    assert len(mail.emails_to(buyer.email)) == 1


def test_any_message_id_becomes_a_valid_key_of_its_own(buyer, mail):
    odd = "m:1"  # too short for a key and with a character keys cannot hold
    first = receipt_of(task_of(send(buyer, {"email": buyer.email}, odd)))
    again = receipt_of(task_of(send(buyer, {"email": buyer.email}, odd)))
    http = buyer.purchase({"email": buyer.email, "idempotency_key": message_key(odd)}).json()

    assert message_key(odd) == message_key("m:1") != message_key("m:2")
    assert first["status"] == "fulfilled" and again == first
    assert http["receipt_id"] == first["receipt_id"]  # the derived key is the key, whatever the channel
    assert len(mail.emails_to(buyer.email)) == 1


def test_an_explicit_key_wins_over_the_message_id(buyer, mail):
    data = {"email": buyer.email, "idempotency_key": buyer.key}
    first = receipt_of(task_of(send(buyer, data, "message-a")))
    other_message = receipt_of(task_of(send(buyer, data, "message-b")))
    other_key = receipt_of(task_of(send(buyer, {**data, "idempotency_key": buyer.key + "-2"}, "message-a")))

    assert other_message == first
    assert other_key["receipt_id"] != first["receipt_id"]
    assert len(mail.emails_to(buyer.email)) == 2


def test_the_idempotency_key_header_wins_over_the_message_id(buyer, mail):
    header = {"Idempotency-Key": buyer.key}
    first = rpc_send_with_headers(buyer, {"email": buyer.email}, header)
    again = rpc_send_with_headers(buyer, {"email": buyer.email}, header)

    assert receipt_of(task_of(again)) == receipt_of(task_of(first))
    assert len(mail.emails_to(buyer.email)) == 1


def rpc_send_with_headers(buyer: Buyer, data: dict, headers: dict):
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": data}]}
    return rpc(buyer, "SendMessage", {"message": message}, headers=headers)


def test_a_message_id_reused_for_another_request_is_rejected_422_with_its_receipt(buyer):
    message_id = str(uuid.uuid4())
    send(buyer, {"email": buyer.email}, message_id)
    response = send(buyer, {"email": buyer.email, "name": "Someone Else"}, message_id)

    task = task_of(response)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert receipt_of(task)["error"]["code"] == "idempotency_key_reused"
    assert task["status"]["message"]["parts"][0]["text"] == receipt_of(task)["error"]["message"]


def test_a_refusal_is_a_rejected_task_with_the_failure_receipt_never_an_error(buyer, mail):
    response = send(buyer, {"email": "not-an-address"}, version="0.3")

    task = task_of(response)
    assert task["status"]["state"] == "rejected"
    assert task["status"]["message"]["role"] == "agent"
    assert receipt_of(task)["status"] == "refused"
    assert receipt_of(task)["error"]["code"] == "invalid_email"
    assert receipt_of(task)["receipt_url"] is None


def test_a_failure_is_a_failed_task_with_retry_after(buyer, mail):
    mail.fail_next("/v3/smtp/email", 500, match=buyer.email)

    response = send(buyer, {"email": buyer.email})

    task = task_of(response)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert receipt_of(task)["error"]["code"] == "upstream_unavailable"
    assert response.headers["Retry-After"] == str(receipt_of(task)["error"]["retry_after_seconds"])


def test_a_resend_while_the_first_runs_is_rejected_409_with_retry_after(buyer, mail):
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=2.0)
    message_id = str(uuid.uuid4())
    first = threading.Thread(target=lambda: send(buyer, {"email": buyer.email}, message_id), daemon=True)
    first.start()
    time.sleep(0.7)  # the claim is taken well before the slowed email goes out

    response = send(buyer, {"email": buyer.email}, message_id)
    first.join(10)

    assert receipt_of(task_of(response))["error"]["code"] == "idempotency_key_in_use"
    assert task_of(response)["status"]["state"] == "TASK_STATE_REJECTED"
    # The receipt speaks of keys; the A2A caller is told its key is the message itself.
    status_text = task_of(response)["status"]["message"]["parts"][0]["text"]
    assert "by resending the same message, with the same messageId" in status_text
    assert int(response.headers["Retry-After"]) >= 1
    assert len(mail.emails_to(buyer.email)) == 1


def test_purchases_count_against_the_client_address_rate_limit(buyer, mail):
    for _ in range(5):
        assert task_of(send(buyer, {"email": "nope"}))["status"]["state"] == "TASK_STATE_REJECTED"

    response = send(buyer, {"email": buyer.email})

    assert receipt_of(task_of(response))["error"]["code"] == "rate_limited"
    assert "Retry-After" in response.headers
    assert mail.emails_to(buyer.email) == []
    assert (
        task_of(send(Buyer(buyer.host), {"email": buyer.email}))["status"]["state"] == "TASK_STATE_COMPLETED"
    )


def test_list_bundles_answers_a_message_with_the_catalog(buyer):
    v1 = rpc(
        buyer,
        "SendMessage",
        {
            "message": {
                "messageId": "list-1",
                "role": "ROLE_USER",
                "parts": [{"data": {"operation": "list_bundles"}}],
            }
        },
    )
    legacy = send(buyer, {"operation": "list_bundles"}, version=None)

    message = v1.json()["result"]["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"data": listing(), "mediaType": "application/json"}]
    assert legacy.json()["result"]["kind"] == "message"
    assert legacy.json()["result"]["parts"] == [{"kind": "data", "data": listing()}]


def test_an_explicit_purchase_operation_is_the_same_purchase(buyer, mail):
    message_id = str(uuid.uuid4())
    first = receipt_of(task_of(send(buyer, {"email": buyer.email}, message_id)))
    named = receipt_of(
        task_of(send(buyer, {"operation": "purchase_free_bundle", "email": buyer.email}, message_id))
    )

    assert named == first
    assert len(mail.emails_to(buyer.email)) == 1


# --- messages of text ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_plain_text_is_answered_with_a_message_saying_what_to_send(buyer, mail, version):
    named = unique_email("named-in-text")

    response = send_parts(buyer, [text(version, f"Please send the starter kit to {named}")], version=version)

    reply = message_result(response)
    words, guide = (part.get("text") or part["data"] for part in reply["parts"])
    assert reply["role"] == ("ROLE_AGENT" if version == "1.0" else "agent")
    assert "task" not in response.json()["result"] and reply.get("kind", "message") == "message"
    assert words.startswith("Nothing was done") and "one data part (mediaType application/json)" in words
    assert "purchase_free_bundle" in words and '{"operation": "list_bundles"}' in words
    assert [skill["id"] for skill in guide["skills"]] == ["purchase_free_bundle", "list_bundles"]
    assert json.loads(guide["skills"][0]["examples"][0])["email"] == "ada@example.org"
    assert guide["agentCard"] == f"{buyer.host}/.well-known/agent-card.json"
    # The address in the text is never used: no email, no contact.
    assert mail.emails_to(named) == [] and mail.contact(named) is None


@pytest.mark.parametrize("wrap", [lambda j: j, lambda j: f"  ```json\n{j}\n```  "], ids=["bare", "fenced"])
def test_a_text_part_that_is_only_a_json_object_is_read_as_the_data_part(buyer, mail, wrap):
    purchase = wrap(json.dumps({"email": buyer.email, "name": "Ada"}))

    task = task_of(send_parts(buyer, [{"text": purchase}]))
    catalog = send_parts(buyer, [text("0.3", wrap('{"operation": "list_bundles"}'))], version="0.3")

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert receipt_of(task)["caller"]["channel"] == "a2a"
    assert len(mail.emails_to(buyer.email)) == 1
    assert message_result(catalog)["parts"] == [{"kind": "data", "data": listing()}]


def test_a_text_that_starts_like_json_but_is_not_is_invalid_params_and_buys_nothing(buyer, mail):
    broken = json.dumps({"email": buyer.email})[:-1] + ",}"  # a trailing comma

    error = error_of(send_parts(buyer, [{"text": "hello"}, {"text": broken}]))

    assert error["code"] == -32602
    assert field_of(error) == "message.parts[1].text"
    assert "not valid JSON" in error["message"]
    assert mail.emails_to(buyer.email) == []


def test_a_fence_left_open_over_thousands_of_blank_lines_is_answered_at_once(buyer):
    started = time.monotonic()

    response = send_parts(buyer, [{"text": "```json\n" + "\n" * 25_000 + "x"}])

    assert message_result(response)["parts"][0]["text"].startswith("Nothing was done")
    assert time.monotonic() - started < 5  # a backtracking pattern took minutes on this


@pytest.mark.parametrize(
    ("version", "part"),
    [
        ("1.0", {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}),
        ("1.0", {"url": "https://example.org/order.pdf", "mediaType": "application/pdf"}),
        ("1.0", {"text": "hello", "mediaType": "image/png"}),
        ("0.3", {"kind": "file", "file": {"uri": "https://example.org/order.pdf"}}),
    ],
)
def test_a_file_part_or_an_unread_media_type_is_content_type_not_supported(buyer, mail, version, part):
    purchase = {"email": buyer.email}
    data = {"data": purchase} if version == "1.0" else {"kind": "data", "data": purchase}

    response = send_parts(buyer, [data, part], version=version)  # refused even beside a good data part

    assert error_of(response)["code"] == -32005
    if version == "1.0":
        assert error_of(response)["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    ("version", "part"),
    [
        ("1.0", {"mediaType": "application/json"}),
        ("1.0", {"text": "hi", "data": {}}),
        ("1.0", {"text": 5}),
        ("0.3", {"type": "unsupported_type", "text": "This should be rejected"}),
        ("0.3", {"data": {"operation": "list_bundles"}}),  # 0.3 parts name their kind
    ],
)
def test_a_part_of_no_known_kind_is_invalid_params(buyer, version, part):
    assert error_of(send_parts(buyer, [part], version=version))["code"] == -32602


# --- listing tasks --------------------------------------------------------------------------------


def test_list_tasks_answers_an_empty_final_page_and_never_shows_a_task(buyer):
    task = task_of(send(buyer, {"email": buyer.email}, contextId="ctx-listed"))
    queries = [
        {},
        {"contextId": "ctx-listed"},
        {"status": "TASK_STATE_COMPLETED", "includeArtifacts": True, "historyLength": 0},
        {"pageSize": 7, "pageToken": "", "statusTimestampAfter": "2020-01-01T00:00:00.5+01:00"},
        {"pageSize": "100", "status": 3, "tenant": ""},
    ]

    pages = [rpc(buyer, "ListTasks", query) for query in queries]

    assert [page.json()["result"] for page in pages] == [
        {"tasks": [], "nextPageToken": "", "pageSize": size, "totalSize": 0} for size in (50, 50, 50, 7, 100)
    ]
    assert not any(task["id"] in page.text for page in pages)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pageSize": 0}, "pageSize"),
        ({"pageSize": 101}, "pageSize"),
        ({"pageSize": -3}, "pageSize"),
        ({"pageSize": True}, "pageSize"),
        ({"pageSize": "ten"}, "pageSize"),
        ({"historyLength": -5}, "historyLength"),
        ({"status": "TASK_STATE_RUNNING"}, "status"),
        ({"status": 9}, "status"),
        ({"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
        ({"statusTimestampAfter": "2026-13-01T00:00:00Z"}, "statusTimestampAfter"),
        ({"pageToken": "bmV4dA=="}, "pageToken"),
        ({"contextId": 5}, "contextId"),
        ({"includeArtifacts": "yes"}, "includeArtifacts"),
        ({"tenant": ["t"]}, "tenant"),
    ],
)
def test_list_tasks_refuses_params_out_of_the_specs_bounds_naming_the_field(buyer, params, field):
    error = error_of(rpc(buyer, "ListTasks", params))

    assert error["code"] == -32602
    assert field_of(error) == field


# --- reading tasks back ---------------------------------------------------------------------------


def test_get_task_returns_the_completed_purchase_in_either_version(buyer):
    sent = task_of(send(buyer, {"email": buyer.email}))

    v1 = rpc(buyer, "GetTask", {"id": sent["id"], "historyLength": 0})
    legacy = rpc(buyer, "tasks/get", {"id": sent["id"]}, version="0.3")

    assert v1.json()["result"] == sent  # unwrapped: GetTask's result is the Task
    assert legacy.json()["result"]["kind"] == "task"
    assert receipt_of(legacy.json()["result"]) == receipt_of(sent)


@pytest.mark.parametrize("task_id", ["rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa", "no-such-task", "../../etc"])
def test_an_unknown_task_is_task_not_found(buyer, task_id):
    error = error_of(rpc(buyer, "GetTask", {"id": task_id}))

    assert error["code"] == -32001
    assert error["data"][0]["reason"] == "TASK_NOT_FOUND"
    assert error_of(rpc(buyer, "tasks/get", {"id": task_id}, version=None))["code"] == -32001


def test_a_finished_task_cannot_be_canceled_or_continued(buyer):
    task_id = task_of(send(buyer, {"email": buyer.email}))["id"]

    assert error_of(rpc(buyer, "CancelTask", {"id": task_id}))["code"] == -32002
    assert (
        error_of(rpc(buyer, "tasks/cancel", {"id": "rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, None))["code"]
        == -32001
    )
    assert error_of(send(buyer, {"email": buyer.email}, taskId=task_id))["code"] == -32004
    assert (
        error_of(send(buyer, {"email": buyer.email}, taskId="rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa"))["code"]
        == -32001
    )


def test_get_task_history_length_is_bounded_and_no_history_is_returned(buyer, mail):
    task = task_of(send(buyer, {"email": buyer.email}))
    other = unique_email("history")

    found = rpc(buyer, "GetTask", {"id": task["id"], "historyLength": 1}).json()["result"]
    refused = [rpc(buyer, "GetTask", {"id": task["id"], "historyLength": n}) for n in (-1, 2**31, "x", 1.5)]
    legacy = rpc(buyer, "tasks/get", {"id": task["id"], "historyLength": -1}, version="0.3")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": {"email": other}}]}
    configured = rpc(buyer, "SendMessage", {"message": message, "configuration": {"historyLength": -1}})

    assert found["id"] == task["id"] and "history" not in found
    assert {error_of(r)["code"] for r in refused} == {-32602}
    assert {field_of(error_of(r)) for r in refused} == {"historyLength"}
    assert error_of(legacy)["code"] == -32602
    assert field_of(error_of(configured)) == "configuration.historyLength"
    assert mail.emails_to(other) == []


# --- what the store does not do -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "version", "code"),
    [
        ("SendStreamingMessage", "1.0", -32004),
        ("SubscribeToTask", "1.0", -32004),
        ("GetExtendedAgentCard", "1.0", -32004),
        ("CreateTaskPushNotificationConfig", "1.0", -32003),
        ("ListTaskPushNotificationConfigs", "1.0", -32003),
        ("message/stream", None, -32004),
        ("tasks/resubscribe", None, -32004),
        ("agent/getAuthenticatedExtendedCard", None, -32007),  # 0.3's own code for it
        ("tasks/pushNotificationConfig/set", None, -32003),
        ("tasks/list", None, -32601),
        ("NoSuchMethod", "1.0", -32601),
    ],
)
def test_unsupported_operations_get_the_spec_error(buyer, method, version, code):
    response = rpc(buyer, method, version=version)

    assert error_of(response)["code"] == code
    assert response.json()["id"] == 7


def test_push_notification_config_on_a_message_is_refused_before_buying(buyer, mail):
    message = {"messageId": "m-push-1", "role": "ROLE_USER", "parts": [{"data": {"email": buyer.email}}]}
    configuration = {"taskPushNotificationConfig": {"url": "https://example.org/hook"}}

    response = rpc(buyer, "SendMessage", {"message": message, "configuration": configuration})

    assert error_of(response)["code"] == -32003
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    ("method", "version", "code"),
    [
        ("SendMessage", None, -32601),  # no header is 0.3: SendMessage is no 0.3 method
        ("SendMessage", "", -32601),
        ("message/send", "1.0", -32601),
        ("SendMessage", "2.0", -32009),
        ("SendMessage", "one", -32009),
    ],
)
def test_a_method_of_another_version_is_not_found_and_an_unknown_version_not_supported(
    buyer, method, version, code
):
    message = {"messageId": "m-version", "role": "ROLE_USER", "parts": [{"data": {"email": buyer.email}}]}

    assert error_of(rpc(buyer, method, {"message": message}, version=version))["code"] == code


def test_patch_levels_do_not_matter(buyer):
    catalog = {"operation": "list_bundles"}
    message = {"messageId": "m-patch", "role": "ROLE_USER", "parts": [{"data": catalog}]}
    legacy = {"messageId": "m-patch", "role": "user", "parts": [{"kind": "data", "data": catalog}]}

    assert "message" in rpc(buyer, "SendMessage", {"message": message}, version="1.0.3").json()["result"]
    assert (
        rpc(buyer, "message/send", {"message": legacy}, version="0.3.0").json()["result"]["kind"] == "message"
    )


# --- malformed requests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"a": "\\ud800"}}',
        b"[" * 70 + b"]" * 70,
        b"[" * 60000,  # deeper than Python's own parser recurses: the telemetry glue met it first
    ],
)
def test_a_body_that_is_not_json_is_a_parse_error_with_a_null_id(buyer, body):
    response = buyer.post_raw("/api/a2a", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})

    assert error_of(response)["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    ("message", "echoed_id"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}], None),
        ("text", None),
        ({"jsonrpc": "2.0", "id": True, "method": "SendMessage"}, None),
        ({"jsonrpc": "2.0", "id": [1], "method": "SendMessage"}, None),
        ({"id": 1, "method": "SendMessage"}, 1),
        ({"jsonrpc": "1.0", "id": "a", "method": "SendMessage"}, "a"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),
    ],
)
def test_a_body_that_is_no_json_rpc_request_is_invalid_request(buyer, message, echoed_id):
    response = buyer.http.post(
        f"{buyer.host}/api/a2a", json=message, headers={"A2A-Version": "1.0"}, timeout=10
    )

    assert error_of(response)["code"] == -32600
    assert response.json()["id"] == echoed_id


@pytest.mark.parametrize("request_id", [b"NaN", b"Infinity", b"-Infinity"])
def test_an_id_that_json_cannot_echo_is_invalid_request(buyer, request_id):
    body = b'{"jsonrpc": "2.0", "id": ' + request_id + b', "method": "ListTasks", "params": {}}'

    response = buyer.post_raw("/api/a2a", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})

    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": response.json()["error"]}
    assert response.json()["error"]["code"] == -32600


def test_a_request_without_an_id_is_checked_then_refused_and_never_acted_on(buyer, mail):
    purchase = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"email": buyer.email}}],
        }
    }
    notifications = [
        {"jsonrpc": "2.0", "method": "NoSuchMethod", "params": {}},
        {"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": {"parts": "invalid"}}},
        {"jsonrpc": "2.0", "method": "SendMessage", "params": purchase},
    ]

    answers = [
        buyer.http.post(f"{buyer.host}/api/a2a", json=n, headers={"A2A-Version": "1.0"}, timeout=30)
        for n in notifications
    ]

    assert [(a.json()["id"], error_of(a)["code"]) for a in answers] == [
        (None, -32601),
        (None, -32602),
        (None, -32600),
    ]
    assert mail.emails_to(buyer.email) == []


def test_a_null_id_is_an_id_and_is_echoed(buyer):
    request = {"jsonrpc": "2.0", "id": None, "method": "ListTasks", "params": {}}

    answer = buyer.http.post(
        f"{buyer.host}/api/a2a", json=request, headers={"A2A-Version": "1.0"}, timeout=30
    )

    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "result": {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0},
    }


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "text/html; charset=utf-8"]
)
def test_a_body_declared_as_anything_but_json_is_415_content_type_not_supported(buyer, mail, content_type):
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"email": buyer.email}}],
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})

    answer = buyer.post_raw("/api/a2a", body.encode(), {"Content-Type": content_type, "A2A-Version": "1.0"})

    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == -32005
    assert "application/json" in answer.json()["error"]["message"]
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize("content_type", [None, "application/json; charset=utf-8", "application/a2a+json"])
def test_json_declared_with_a_charset_a_json_suffix_or_not_at_all_is_read(buyer, content_type):
    catalog = {"messageId": "m-ct", "role": "ROLE_USER", "parts": [{"data": {"operation": "list_bundles"}}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": catalog}})
    headers = {"A2A-Version": "1.0", **({"Content-Type": content_type} if content_type else {})}

    answer = buyer.post_raw("/api/a2a", body.encode(), headers)

    assert answer.json()["result"]["message"]["parts"][0]["data"] == listing()


@pytest.mark.parametrize(
    ("version", "role"),
    [
        ("1.0", None),
        ("1.0", "ROLE_UNSPECIFIED"),
        ("1.0", "user"),
        ("0.3", None),
        ("0.3", "ROLE_USER"),
        ("0.3", "agent"),
    ],
)
def test_a_message_without_the_user_role_is_invalid_params_and_buys_nothing(buyer, mail, version, role):
    legacy = version == "0.3"
    part = {"kind": "data", "data": {"email": buyer.email}} if legacy else {"data": {"email": buyer.email}}
    message = {"messageId": str(uuid.uuid4()), "parts": [part], **({"role": role} if role else {})}
    response = rpc(buyer, "message/send" if legacy else "SendMessage", {"message": message}, version)

    assert error_of(response)["code"] == -32602
    assert "message.role" in error_of(response)["message"]
    assert mail.emails_to(buyer.email) == []


def message_of(parts: list, **fields) -> dict:
    """SendMessage params: a 1.0 user message with these parts (fields added or overridden)."""
    return {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts, **fields}}


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ("text", -32602),
        ({}, -32602),
        ({"message": "hi"}, -32602),
        ({"message": {"role": "ROLE_USER", "parts": [{"data": {}}]}}, -32602),
        (message_of([{"data": {}}], messageId=""), -32602),
        (message_of([{"data": {}}], role="ROLE_AGENT"), -32602),
        (message_of([]), -32602),
        (message_of(["text"]), -32602),
        (message_of([{"data": {}, "mediaType": "text/csv"}]), -32005),
        (message_of([{"data": {}}, {"data": {}}]), -32602),
        (message_of([{"data": ["a@example.org"]}]), -32602),
        (message_of([{"data": {"operation": "refund"}}]), -32602),
        (message_of([{"data": {"operation": "list_bundles", "x": 1}}]), -32602),
        (message_of([{"data": {}}], contextId=7), -32602),
        (message_of([{"data": {}}], taskId=["t"]), -32602),
        (message_of([{"data": {}}], metadata="m"), -32602),
        ({**message_of([{"data": {}}]), "configuration": "c"}, -32602),
        ({**message_of([{"data": {}}]), "configuration": {"acceptedOutputModes": "json"}}, -32602),
        ({**message_of([{"data": {}}]), "configuration": {"returnImmediately": "yes"}}, -32602),
    ],
)
def test_a_message_without_one_usable_json_object_is_an_a2a_error_never_a_500(buyer, params, code):
    assert error_of(rpc(buyer, "SendMessage", params))["code"] == code


def test_a_text_part_beside_the_data_part_is_ignored(buyer):
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "please"}, {"data": {"email": buyer.email}}],
    }

    assert (
        task_of(rpc(buyer, "SendMessage", {"message": message}))["status"]["state"] == "TASK_STATE_COMPLETED"
    )


def test_a_body_over_64_kib_is_413_and_buys_nothing(buyer, mail):
    message = {"messageId": "m-big", "parts": [{"data": {"email": buyer.email, "name": "x" * 70_000}}]}
    response = rpc(buyer, "SendMessage", {"message": message})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example"])
def test_a_foreign_origin_is_403_and_buys_nothing(buyer, mail, origin):
    message = {"messageId": str(uuid.uuid4()), "parts": [{"data": {"email": buyer.email}}]}
    response = rpc(buyer, "SendMessage", {"message": message}, headers={"Origin": origin})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == -32600
    assert mail.emails_to(buyer.email) == []


def test_a_local_origin_is_allowed(buyer):
    message = {
        "messageId": "m-origin",
        "role": "ROLE_USER",
        "parts": [{"data": {"operation": "list_bundles"}}],
    }

    response = rpc(buyer, "SendMessage", {"message": message}, headers={"Origin": "http://localhost:3000"})

    assert response.json()["result"]["message"]["role"] == "ROLE_AGENT"


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_the_endpoint_answers_other_methods_405_with_allow_post(agent, method):
    answer = httpx.request(method, f"{agent.url}/api/a2a")

    assert (answer.status_code, answer.headers["Allow"]) == (405, "POST")
    assert "/.well-known/agent-card.json" in answer.json()["error"]["message"]


# --- the snippet in docs/clients.md -----------------------------------------------------------------


def test_the_docs_snippet_buys_once_and_replays_with_the_official_client(agent, mail):
    doc = (ROOT / "docs" / "clients.md").read_text()
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "create_client(" in b]
    email = unique_email("a2a-readme")
    code = snippet.replace("http://localhost:7071", agent.url).replace("ada@example.org", email)

    done = fresh_python(code)

    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert [line[:2] for line in lines] == [["1", "TASK_STATE_COMPLETED"], ["2", "TASK_STATE_COMPLETED"]]
    assert lines[0][2] == lines[1][2] and lines[0][2].startswith("rcpt_")
    assert len(mail.emails_to(email)) == 1


def test_the_docs_text_message_buys_as_its_data_part_would(buyer, mail):
    doc = (ROOT / "docs" / "clients.md").read_text()
    (example,) = [b for b in re.findall(r"```json\n(.*?)```", doc, re.S) if '"parts": [{"text"' in b]
    message = json.loads(example.replace("ada@example.org", buyer.email))

    response = rpc(buyer, "SendMessage", {"message": {**message, "messageId": str(uuid.uuid4())}})

    assert task_of(response)["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(mail.emails_to(buyer.email)) == 1


def test_get_task_with_receipt_storage_unreachable_is_an_internal_error_with_retry_after():
    dead = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={DEV_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
        "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
    )
    services = runtime.build(
        Settings.from_env(
            {**dev_settings(), "AzureWebJobsStorage": dead, "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "1"}
        )
    )
    body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "rcpt_" + "a" * 26}}
    request = Request("POST", {"a2a-version": "1.0"}, json.dumps(body).encode())

    answer = a2a.handle(request, services.storefront, services.settings)

    assert answer.status == 200
    assert json.loads(answer.body)["error"]["code"] == -32603
    assert answer.headers["Retry-After"] == "5"
