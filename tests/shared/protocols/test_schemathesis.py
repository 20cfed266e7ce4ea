"""Schemathesis fuzzes a dev host from the OpenAPI document it serves: no answer is a 5xx, and every
answer's status code, headers, content type and body are the ones the document gives that request.

The run is bounded and repeatable: a fixed number of examples per operation, derandomized, on a
host whose limits are high enough that fuzzing never meets them and whose tables are its own.
Run it longer, or explore with another seed (then random, reproducible from the seed):

    STOREFRONT_FUZZ_EXAMPLES=500 STOREFRONT_FUZZ_SEED=7 \\
        .venv/bin/python -m pytest tests/shared/protocols/test_schemathesis.py

The answers the fuzzer cannot reach (a download link only exists in an email, a replay needs a
second call with the same key) are validated against the same document below it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
import schemathesis

from shared.protocols.api import EVERY_METHOD
from tests.support import Buyer, unique_key

EXAMPLES = int(os.environ.get("STOREFRONT_FUZZ_EXAMPLES", "20"))
SEED = os.environ.get("STOREFRONT_FUZZ_SEED", "")
UNLIMITED = "1000000"

# Every check Schemathesis has, set apart from its default only where the app's design, not a defect,
# differs from what the check assumes; each for the reason given.
# Schemathesis' default for the answers to data that fits the schema.
FITS = '"2xx", "3xx", "401", "403", "404", "409", "429", "5xx"'
CONFIG = f"""
# The methods Azure lets a trigger list (but HEAD, which Schemathesis does not probe): every
# route lists them all and answers 405 with Allow for those it does not serve. TRACE and QUERY never
# reach the app (Azure and the dev host answer 404).
[phases.coverage]
unexpected-methods = {sorted(method.lower() for method in EVERY_METHOD if method != "HEAD")}

# A body that fits the input schema can still be refused with 422: the schema leaves an email's and
# a name's content to the server (the grammar-based runtimes it is written for take no format), so
# "000" fits the schema and is 422 invalid_email.
[checks.positive_data_acceptance]
expected-statuses = [{FITS}, "422"]

# The function key is Azure's to check, in front of the app; the dev host, like func start, checks none.
[checks.ignored_auth]
enabled = false

# The listing's cursor is opaque: any string fits its schema, only one this endpoint issued is
# accepted (400 invalid_cursor otherwise).
[[operations]]
include-path = "/api/receipts"
checks.positive_data_acceptance.expected-statuses = [{FITS}, "400"]
"""


@pytest.fixture(scope="module")
def fuzzed(host_factory):
    """A dev host of its own: limits the run cannot reach, tables and receipts no other test reads."""
    tag = uuid.uuid4().hex[:8]
    return host_factory(
        STOREFRONT_RATE_LIMIT_PER_HOUR=UNLIMITED,
        STOREFRONT_RECIPIENT_LIMIT_PER_DAY=UNLIMITED,
        STOREFRONT_DAILY_COST_CEILING_USD=UNLIMITED,
        STOREFRONT_GOVERNANCE_TABLE=f"fuzzgov{tag}",
        STOREFRONT_IDEMPOTENCY_TABLE=f"fuzzkeys{tag}",
        STOREFRONT_LEDGER_TABLE=f"fuzzledger{tag}",
        STOREFRONT_RECEIPTS_CONTAINER=f"fuzz-receipts-{tag}",
    )


@pytest.fixture(scope="module")
def served(fuzzed) -> dict:
    answer = requests.get(f"{fuzzed.url}/api/openapi.json", timeout=10)
    answer.raise_for_status()
    return answer.json()


def run_schemathesis(url: str, document: dict, workdir: Path, *headers: str) -> subprocess.CompletedProcess:
    """The CLI on the served document, saved to a file: Schemathesis never fuzzes the operation
    that serves the document it was loaded from, and GET /api/openapi.json is one of ours."""
    (workdir / "openapi.json").write_text(json.dumps(document))
    (workdir / "schemathesis.toml").write_text(CONFIG)
    generation = ["--seed", SEED, "--generation-database", "none"] if SEED else ["--generation-deterministic"]
    args = [str(Path(sys.executable).parent / "schemathesis"), "--config-file", "schemathesis.toml"]
    args += ["--no-color", "run", "openapi.json", "--url", url, "--max-examples", str(EXAMPLES), *generation]
    for header in headers:
        args += ["--header", header]
    return subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=300 + 2 * EXAMPLES)


@pytest.mark.parametrize("accept", [None, "text/html"], ids=["json", "html"])
def test_schemathesis_finds_no_server_error_and_no_answer_the_document_does_not_give(
    fuzzed, served, tmp_path, accept
):
    operations = sum(len(item) for item in served["paths"].values())
    headers = [f"Accept: {accept}"] if accept else []

    result = run_schemathesis(fuzzed.url, served, tmp_path, *headers)

    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-12000:]
    assert f"{operations} selected / {operations} total" in report, report[-3000:]


def conforms(document: dict, path: str, method: str, answer: requests.Response, **request: object) -> None:
    """Schemathesis' checks on one answer, as if it had sent the request: status code, headers,
    content type and body as the document gives them."""
    case = schemathesis.openapi.from_dict(document)[path][method].Case(**request)
    case.validate_response(answer)


def test_a_download_link_from_the_email_answers_the_documented_zip(fuzzed, served, mail):
    buyer = Buyer(fuzzed.url)
    assert buyer.purchase().status_code == 200
    link = next(link for e in mail.emails_to(buyer.email) for link in e["links"] if "/api/download/" in link)
    token = urlsplit(link).path.rsplit("/", 1)[1]

    answer = requests.get(f"{fuzzed.url}/api/download/{token}", timeout=10)

    assert answer.status_code == 200
    conforms(served, "/api/download/{token}", "GET", answer, path_parameters={"token": token})


def test_a_replay_answers_the_documented_receipt_with_idempotent_replayed(fuzzed, served):
    buyer = Buyer(fuzzed.url)
    key = {"Idempotency-Key": unique_key()}
    first = buyer.purchase(headers=key)

    replay = buyer.purchase(headers=key)

    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.content == first.content
    body = {"email": buyer.email}
    conforms(
        served, "/api/a2a/purchase", "POST", replay, body=body, headers=key, media_type="application/json"
    )
