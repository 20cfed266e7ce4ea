"""What the README and docs/ print as the store's own words, against what the store says: the
example receipt against one a dev host signs with `make run`'s limits, each check's detail and
each limit message word for word, and every list of channels against the code's. A change of
wording fails here until the page follows it (`<...>` in a printed value stands for any text).
"""

from __future__ import annotations

import json
import re

import pytest

from shared.protocols import pages
from shared.purchase.call import CHANNELS
from tests.agents import AgentKey, KeyDirectory, Signed
from tests.snippets import blocks
from tests.support import ROOT, Buyer

PLACEHOLDER = "<...>"


def page(name: str) -> str:
    return (ROOT / name).read_text()


def words(text: str) -> str:
    """Prose as one line: a quote may wrap where the page does."""
    return " ".join(text.split())


def make_run_limits() -> dict[str, str]:
    """The limits `make run` serves with: the ones local.settings.json.example sets."""
    values = json.loads(page("local.settings.json.example"))["Values"]
    return {name: value for name, value in values.items() if "LIMIT" in name or "COST" in name}


@pytest.fixture(scope="module")
def store(host_factory):
    """A host with `make run`'s limits and counters of its own."""
    return host_factory(**make_run_limits(), STOREFRONT_GOVERNANCE_TABLE="governanceprinted")


@pytest.fixture(scope="module")
def verified_receipt(store) -> dict:
    """A receipt bought over MCP by a verified agent, as the example's caller is."""
    key = AgentKey()
    directory = KeyDirectory(key)
    try:
        buyer = Buyer(store.url)
        buyer.http.auth = Signed(key, directory.origin)
        answer = buyer.call_tool({"email": buyer.email, "idempotency_key": buyer.key})
    finally:
        directory.close()
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]["structuredContent"]


def example_receipt() -> dict:
    (block,) = [
        b for b in blocks(ROOT / "docs" / "receipts.md") if b.lang == "json" and "receipt_id" in b.body
    ]
    return json.loads(block.body)


def shape(value: object) -> object:
    """Keys and kinds, not values: what a reader's code would rely on."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def matches(printed: str, real: str) -> bool:
    pattern = re.escape(printed).replace(re.escape(PLACEHOLDER), ".+")
    return re.fullmatch(pattern, real) is not None


def test_the_example_receipt_has_the_shape_of_a_real_one(verified_receipt):
    assert shape(example_receipt()) == shape(verified_receipt)


def test_the_example_receipts_words_are_the_stores(verified_receipt):
    example = example_receipt()

    for printed, real in zip(example["checks"], verified_receipt["checks"], strict=True):
        assert (printed["name"], printed["result"]) == (real["name"], real["result"])
        assert matches(printed["detail"], real["detail"]), (printed["detail"], real["detail"])
    for field in ("version", "operation", "status", "bundle", "billing", "error"):
        assert example[field] == verified_receipt[field], field
    assert example["caller"]["channel"] == verified_receipt["caller"]["channel"]
    assert example["caller"]["agent"]["verified"] is verified_receipt["caller"]["agent"]["verified"] is True


def test_the_agents_page_quotes_a_verified_agents_rate_limit_detail(verified_receipt):
    quoted = re.search(r'`rate_limit` check says "(within N per hour [^"]*)"', words(page("docs/agents.md")))
    assert quoted, "docs/agents.md no longer quotes the verified agent's rate_limit detail"
    detail = next(c["detail"] for c in verified_receipt["checks"] if c["name"] == "rate_limit")
    numbers = re.match(r"within (\d+) per hour .*\((\d+) from its site\)", detail)

    assert numbers, detail
    filled = re.sub(r"\bN\b", numbers[1], re.sub(r"\bM\b", numbers[2], quoted[1]))  # the words N and M only
    assert detail.startswith(filled)


def test_an_unverified_callers_detail_says_from_this_client_as_the_receipts_page_does(store):
    said = re.search(r'its `rate_limit` check says "([^"]+)"', words(page("docs/receipts.md")))
    receipt = Buyer(store.url).purchase().json()
    detail = next(c["detail"] for c in receipt["checks"] if c["name"] == "rate_limit")

    assert said and said[1] in detail, detail
    assert receipt["caller"]["agent"] == {"verified": False}


def test_the_readmes_local_rate_limit_is_make_runs(store):
    stated = re.search(r"Hit the local rate limit \((\d+) an hour\)", words(page("README.md")))

    assert stated and stated[1] == make_run_limits()["STOREFRONT_RATE_LIMIT_PER_HOUR"]


@pytest.fixture(scope="module")
def refusal(host_factory) -> str:
    """The message of a real 429 where `make run` keeps its counters (Azurite's development
    account, off Azure): one purchase an hour, asked twice."""
    host = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE="governanceprinted1")
    buyer = Buyer(host.url)
    assert buyer.purchase().status_code == 200
    refused = buyer.purchase({"email": "other." + buyer.email})
    assert refused.status_code == 429, refused.text
    return refused.json()["error"]["message"]


@pytest.mark.parametrize("name", ["docs/governance.md", "docs/development.md"])
def test_the_pages_quote_how_a_local_limit_message_ends(refusal, name):
    quoted = re.search(r'ends "([^"]+)"', words(page(name)))

    assert quoted, f"{name} no longer quotes the end of a local limit message"
    assert refusal.endswith(quoted[1]), refusal


def test_the_404_the_errors_page_prints_is_the_stores(store):
    (block,) = [
        b for b in blocks(ROOT / "docs" / "errors.md") if '"not_found"' in b.body and "endpoints" in b.body
    ]
    printed = json.loads(block.body)["error"]
    real = Buyer(store.url).http.get(f"{store.url}/api/purchase", timeout=10).json()["error"]

    assert printed["message"] == real["message"]
    assert printed["endpoints"][:-1] == real["endpoints"][: len(printed["endpoints"]) - 1]
    assert {k: v for k, v in printed.items() if k not in ("message", "endpoints")} == {
        k: v for k, v in real.items() if k not in ("message", "endpoints")
    }


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        ("docs/receipts.md", r"Only `caller` \(channel ([^,]+(?:, [^,]+)*), user agent"),
        ("docs/telemetry.md", r"\| `storefront.channel` \| ([^|(]+)"),
    ],
    ids=["receipts", "telemetry"],
)
def test_every_list_of_channels_is_the_codes(name, sentence):
    listed = re.search(sentence, page(name))

    assert listed, f"{name} no longer lists the channels"
    assert re.findall(r"`(\w+)`", listed[1]) == list(CHANNELS)


def test_the_receipt_page_names_every_channel():
    assert set(pages.CHANNEL_LABELS) == set(CHANNELS)
