"""shared.protocols.agents: Web Bot Auth signatures from real signers, the draft's test vectors,
and every way a signature can be refused, with nonces counted in the session's Azurite."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import time
import uuid

import pytest
import requests

from shared.config.errors import SignatureRefused
from shared.config.hashing import Hasher
from shared.protocols.agents import AgentPolicy, AgentVerifier, ReplayUnchecked, identified
from shared.protocols.http import Answer, Request
from shared.purchase.agent import Agent
from shared.seams.counters import TableCounters
from shared.seams.key_directory import Directory, KeyDirectories, thumbprint
from shared.seams.storage import table_client
from tests.agents import AgentKey, KeyDirectory, bot_auth_headers, sign
from tests.support import ROOT

pytestmark = pytest.mark.services
VECTORS = json.loads((ROOT / "tests" / "fixtures" / "web_bot_auth_vectors.json").read_text())
STORE = "http://127.0.0.1:7071/api/a2a/purchase"
DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


@pytest.fixture(scope="module")
def counters(azurite) -> TableCounters:
    return TableCounters(table_client(azurite, "agents" + uuid.uuid4().hex[:10], timeout=5))


@pytest.fixture
def key() -> AgentKey:
    return AgentKey()


@pytest.fixture
def directory(key):
    served = KeyDirectory(key)
    yield served
    served.close()


def verifier(
    counters, *, local=True, allowed=(), denied=(), clock=time.time, directories=None
) -> AgentVerifier:
    found = directories or KeyDirectories(local=local, timeout=1.0)
    return AgentVerifier(
        found, counters, Hasher("unit-test-secret"), AgentPolicy(allowed, denied, local), clock
    )


def request_of(prepared: requests.PreparedRequest) -> Request:
    headers = {name.lower(): value for name, value in prepared.headers.items()}
    return Request(prepared.method or "POST", headers, prepared.body or b"", url=prepared.url or "")  # type: ignore[arg-type]


def signed(key: AgentKey, origin: str, url: str = STORE, **options) -> Request:
    prepared = requests.Request("POST", url, json={"email": "ada@example.org"}).prepare()
    return request_of(sign(prepared, key, origin, **options))


# --- the draft's test vectors ----------------------------------------------------------------------


class VectorKeys:
    """The vectors' agent, https://signature-agent.test, whose directory holds the RFC 9421 test key."""

    def keys(self, origin: str, *, older_than: float | None = None) -> Directory:
        x = VECTORS["key"]["x"]
        raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
        return Directory({thumbprint(x): raw}, 0.0, float("inf"))


def vector_request(vector: dict, url: str | None = None) -> Request:
    headers = {"signature-input": vector["signature_input"], "signature": vector["signature"]}
    if "signature_agent" in vector:
        headers["signature-agent"] = vector["signature_agent"]
    return Request("GET", headers, url=url or vector["target_url"])


WITH_AGENT = [v for v in VECTORS["vectors"] if "signature_agent" in v]
WITHOUT_AGENT = [v for v in VECTORS["vectors"] if "signature_agent" not in v]


@pytest.mark.parametrize("vector", WITH_AGENT, ids=[f"{v['source']}-{v['label']}" for v in WITH_AGENT])
def test_the_drafts_test_vectors_verify(counters, vector):
    at = vector["created_ms"] / 1000 + 10
    found = verifier(counters, clock=lambda: at, directories=VectorKeys()).identify(vector_request(vector))
    assert found == Agent("https://signature-agent.test", "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U")


@pytest.mark.parametrize("vector", WITH_AGENT, ids=[f"{v['source']}-{v['label']}" for v in WITH_AGENT])
def test_a_test_vector_sent_to_another_authority_is_refused(counters, vector):
    at = vector["created_ms"] / 1000 + 10
    check = verifier(counters, clock=lambda: at, directories=VectorKeys())
    with pytest.raises(SignatureRefused, match="does not verify"):
        check.identify(vector_request(vector, url="https://example.org/path/to/resource"))


@pytest.mark.parametrize("vector", WITHOUT_AGENT, ids=[f"{v['source']}-{v['label']}" for v in WITHOUT_AGENT])
def test_a_test_vector_without_signature_agent_is_refused_for_want_of_a_directory(counters, vector):
    at = vector["created_ms"] / 1000 + 10
    with pytest.raises(SignatureRefused, match="no Signature-Agent"):
        verifier(counters, clock=lambda: at, directories=VectorKeys()).identify(vector_request(vector))


# --- real signers ---------------------------------------------------------------------------------


def test_a_request_signed_with_the_working_groups_dictionary_form_names_its_agent(counters, key, directory):
    assert verifier(counters).identify(signed(key, directory.origin)) == Agent(
        directory.origin, key.thumbprint
    )


def test_a_request_signed_by_the_bot_auth_package_names_its_agent(counters, key, directory):
    headers = {k.lower(): v for k, v in bot_auth_headers(STORE, key, directory.origin).items()}
    assert "key=" not in headers["signature-input"], "the earlier form: Signature-Agent one string"

    found = verifier(counters).identify(Request("POST", headers, url=STORE))

    assert found == Agent(directory.origin, key.thumbprint)


def test_without_a_signature_the_caller_is_unverified(counters):
    check = verifier(counters)
    assert check.identify(Request("POST", {}, url=STORE)) is None
    assert check.identify(Request("POST", {"signature": "sig1=:AAAA:"}, url=STORE)) is None
    other = {"signature-input": 'sig1=("@authority");created=1;tag="ucp"', "signature": "sig1=:AAAA:"}
    assert check.identify(Request("POST", other, url=STORE)) is None, "a signature for something else"


# --- refused ----------------------------------------------------------------------------------------


def test_a_replayed_signature_is_refused(counters, key, directory):
    request = signed(key, directory.origin)
    check = verifier(counters)
    assert check.identify(request) is not None
    with pytest.raises(SignatureRefused, match="used before"):
        check.identify(request)
    with pytest.raises(SignatureRefused, match="used before"):
        verifier(counters).identify(request)  # another instance: the nonce is in Table storage


def test_a_signature_without_a_nonce_is_used_once_however_its_header_is_rewritten(counters, key, directory):
    """Without a nonce the replay check keys on the signature's bytes, not the header's text: a
    parameter, a space or another member added to Signature is the same signature."""
    request = signed(key, directory.origin, nonce=None)
    assert verifier(counters).identify(request) is not None
    label_value = request.headers["signature"]
    for rewritten in (label_value + ";x", " " + label_value, label_value + ", zz=:AAAA:"):
        headers = {**request.headers, "signature": rewritten}
        if "zz=" in rewritten:
            headers["signature-input"] += ', zz=("@authority");created=1'
        with pytest.raises(SignatureRefused, match="used before"):
            verifier(counters).identify(Request("POST", headers, url=STORE))


def test_headers_past_4_kib_are_refused(counters, key, directory):
    request = signed(key, directory.origin)
    for name in ("signature-input", "signature", "signature-agent"):
        padded = {**request.headers, name: request.headers[name] + " " * 4097}
        with pytest.raises(SignatureRefused, match="4 KiB"):
            verifier(counters).identify(Request("POST", padded, url=STORE))


def test_a_signature_replayed_after_midnight_is_still_refused(counters, key, directory):
    """The nonce is kept under the signed `created` day, not the day it was checked."""
    midnight = (int(time.time()) // 86400 + 1) * 86400
    request = signed(key, directory.origin, created=midnight - 10)
    assert verifier(counters, clock=lambda: midnight - 5).identify(request) is not None
    with pytest.raises(SignatureRefused, match="used before"):
        verifier(counters, clock=lambda: midnight + 5).identify(request)


def test_without_a_hash_secret_a_signed_caller_is_served_unverified(counters, key, directory):
    check = AgentVerifier(KeyDirectories(local=True), counters, Hasher(""), AgentPolicy(local=True))
    seen: list[Request] = []
    answer = identified(
        signed(key, directory.origin), check, lambda r: seen.append(r) or Answer(200), rpc=False
    )
    assert answer.status == 200 and seen[0].agent is None


def test_a_signature_without_a_nonce_is_used_once(counters, key, directory):
    request = signed(key, directory.origin, nonce=None)
    assert verifier(counters).identify(request) is not None
    with pytest.raises(SignatureRefused, match="used before"):
        verifier(counters).identify(request)


REFUSALS = {
    "expired": ({"created": -400, "lifetime": 60}, "expired"),
    "created in the future": ({"created": 120}, "in the future"),
    "too old": ({"created": -900, "lifetime": 3600}, "older than 300 seconds"),
    "signature-agent not covered": ({"covered": ("@authority",)}, "does not cover the Signature-Agent"),
    "a member typed jwks_uri": ({"signature_agent": 'agent1="{o}";type=jwks_uri'}, "type=directory"),
    "not an origin": ({"signature_agent": 'agent1="{o}/somewhere"'}, "https origin"),
    "not a URL": ({"signature_agent": 'agent1="agent"'}, "https origin"),
}


@pytest.mark.parametrize(("options", "why"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_signature_that_cannot_be_accepted_is_refused_saying_why(counters, key, directory, options, why):
    if "created" in options:  # seconds from now
        options = {**options, "created": time.time() + options["created"]}
    if "signature_agent" in options:
        options = {**options, "signature_agent": options["signature_agent"].replace("{o}", directory.origin)}
    with pytest.raises(SignatureRefused, match=why):
        verifier(counters).identify(signed(key, directory.origin, **options))


def test_a_signature_agent_without_the_member_the_signature_covers_is_refused(counters, key, directory):
    request = signed(key, directory.origin)
    moved = Request("POST", {**request.headers, "signature-agent": f'agent2="{directory.origin}"'}, url=STORE)
    with pytest.raises(SignatureRefused, match="https origin"):
        verifier(counters).identify(moved)


def test_a_key_the_directory_does_not_hold_is_refused(counters, directory):
    with pytest.raises(SignatureRefused, match="holds no key with this keyid"):
        verifier(counters).identify(signed(AgentKey(), directory.origin))


def test_a_signature_moved_to_another_agents_directory_does_not_verify(counters, key, directory):
    other = KeyDirectory(key)  # publishes the same key, but the signature named the first origin
    try:
        request = signed(key, directory.origin)
        moved = Request("POST", {**request.headers, "signature-agent": f'agent1="{other.origin}"'}, url=STORE)
        with pytest.raises(SignatureRefused, match="does not verify"):
            verifier(counters).identify(moved)
    finally:
        other.close()


def test_a_request_sent_to_another_host_does_not_verify(counters, key, directory):
    request = signed(key, directory.origin, url="http://127.0.0.1:7071/api/a2a/purchase")
    moved = Request("POST", request.headers, url="http://store.example/api/a2a/purchase")
    with pytest.raises(SignatureRefused, match="does not verify"):
        verifier(counters).identify(moved)


def test_on_azure_an_agent_must_be_an_https_origin(counters, key, directory):
    with pytest.raises(SignatureRefused, match="https origin"):
        verifier(counters, local=False).identify(signed(key, directory.origin))


def test_the_settings_lists_decide_whose_directories_are_fetched(counters, key, directory):
    with pytest.raises(SignatureRefused, match="STOREFRONT_AGENT_ORIGINS_DENIED"):
        verifier(counters, denied=(directory.origin,)).identify(signed(key, directory.origin))
    with pytest.raises(SignatureRefused, match="STOREFRONT_AGENT_ORIGINS_ALLOWED"):
        verifier(counters, allowed=("https://agent.example",)).identify(signed(key, directory.origin))
    assert directory.hits == 0, "neither list let the store fetch the directory"
    found = verifier(counters, allowed=(directory.origin,)).identify(signed(key, directory.origin))
    assert found == Agent(directory.origin, key.thumbprint)


DIRECTORIES = {
    "not found": ({"status": 404}, "answered HTTP 404"),
    "a redirect": ({"status": 302, "headers": {"Location": "http://127.0.0.1:9/"}}, "answered HTTP 302"),
    "not JSON": ({"document": b"<html>"}, "not JSON"),
    "not a JWKS": ({"document": {"keys": "none"}}, "not a JWKS"),
    "no Ed25519 key": (
        {"document": {"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]}},
        "no Ed25519",
    ),
    "too large": ({"document": {"keys": [], "pad": "x" * 70_000}}, "larger than"),
    "too slow": ({"delay": 1.5}, "cannot be fetched"),
}


@pytest.mark.parametrize(("served", "why"), DIRECTORIES.values(), ids=DIRECTORIES.keys())
def test_a_directory_that_cannot_be_used_refuses_the_signature(counters, key, directory, served, why):
    for name, value in served.items():
        setattr(directory, name, value)
    with pytest.raises(SignatureRefused, match=why):
        verifier(counters).identify(signed(key, directory.origin))


def test_a_new_key_is_found_by_fetching_the_directory_again_and_the_cache_is_kept_otherwise(
    counters, directory
):
    now = [1000.0]
    directories = KeyDirectories(local=True, clock=lambda: now[0])
    check = AgentVerifier(directories, counters, Hasher("unit-test-secret"), AgentPolicy(local=True))
    first, second = AgentKey(), AgentKey()
    directory.document = {"keys": [first.public_jwk]}
    assert check.identify(signed(first, directory.origin)) is not None
    assert check.identify(signed(first, directory.origin)) is not None
    assert directory.hits == 1, "cached for its max-age"

    directory.document = {"keys": [first.public_jwk, second.public_jwk]}
    with pytest.raises(SignatureRefused, match="holds no key"):
        check.identify(signed(second, directory.origin))  # fetched a minute ago: not again yet
    now[0] += 61
    assert check.identify(signed(second, directory.origin)) == Agent(directory.origin, second.thumbprint)
    assert directory.hits == 2


def test_malformed_headers_are_refused_never_a_crash(counters, key, directory):
    genuine = signed(key, directory.origin)
    pieces = [
        "sig1=",
        '("@authority"',
        ";",
        'tag="web-bot-auth"',
        "keyid=",
        '"',
        ":",
        "=",
        "\x00",
        "é",
        ")",
        "created=",
        "99999999999999999999",
        'key="x"',
        "agent1=",
        '"http://[::1',
        ",",
        " ",
    ]
    rng = random.Random(32)
    check = verifier(counters)
    for _ in range(400):
        headers = dict(genuine.headers)
        for name in ("signature-input", "signature", "signature-agent"):
            if rng.random() < 0.5:
                headers[name] = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        with contextlib.suppress(SignatureRefused):
            check.identify(Request("POST", headers, url=STORE))


# --- what the doors do with it ------------------------------------------------------------------------


def test_a_refused_signature_answers_401_and_runs_nothing(counters, key, directory):
    ran = []
    request = signed(AgentKey(), directory.origin)

    plain = identified(request, verifier(counters), lambda r: ran.append(r) or Answer(200), rpc=False)
    rpc = identified(request, verifier(counters), lambda r: ran.append(r) or Answer(200), rpc=True)

    assert ran == []
    assert plain.status == rpc.status == 401
    assert json.loads(plain.body)["error"]["code"] == "invalid_signature"
    assert json.loads(rpc.body)["error"]["data"]["code"] == "invalid_signature"
    assert "web-bot-auth" in plain.headers["WWW-Authenticate"]


def test_when_the_replay_check_cannot_be_made_the_caller_is_unverified(key, directory):
    dead = TableCounters(table_client(DEAD_TABLES, "agents", timeout=1))
    check = verifier(dead)
    with pytest.raises(ReplayUnchecked):
        check.identify(signed(key, directory.origin))

    seen: list[Request] = []
    answer = identified(
        signed(key, directory.origin), check, lambda r: seen.append(r) or Answer(200), rpc=False
    )

    assert answer.status == 200 and seen[0].agent is None


def test_an_unforeseen_failure_is_a_401_and_the_log_keeps_no_caller_text(caplog):
    class Broken:
        def identify(self, req):
            raise RuntimeError('Signature-Agent: agent1="https://evil.example" \x1b[31m')

    answer = identified(Request("POST", {}, url=STORE), Broken(), lambda r: Answer(200), rpc=False)  # type: ignore[arg-type]

    assert answer.status == 401 and "correlation id" in json.loads(answer.body)["error"]["message"]
    assert "evil.example" not in caplog.text and "\x1b" not in caplog.text
    assert "RuntimeError" in caplog.text
