"""shared.config.secret_strength, and what the store does with a public or weak secret: on Azure (the
platform's own variables say so) it refuses it as if unset, health names it and purchases answer
503; on a developer machine it uses it and warns once. Neither the log nor an answer ever carries
the value. In process on Azurite and the Brevo sandbox, and through dev hosts.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import uuid

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from devstack.services import dev_settings
from shared.config.errors import NotConfigured
from shared.config.keys import load_private_key, public_jwk
from shared.config.secret_strength import PUBLISHED_SIGNING_KEYS, problem
from shared.config.settings import AZURE_MARKERS, SECRET_SETTINGS, Settings
from shared.protocols import api
from shared.purchase.call import Caller, PurchaseCall
from tests.shared.config.test_secret_references import brevo_requests, build
from tests.support import ROOT, Buyer, new_ec_key, private_pem, unique_address, unique_email

EXAMPLE = {name: dev_settings()[name] for name in SECRET_SETTINGS}
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
# What Flex Consumption sets where it runs the app.
ON_AZURE = {
    "WEBSITE_SITE_NAME": "func-shop",
    "WEBSITE_SKU": "FlexConsumption",
    "CONTAINER_NAME": "func-shop-7f3a2c1b9d",
    "WEBSITE_HOSTNAME": "func-shop.azurewebsites.net",
}


def secret_texts() -> list[str]:
    """Pieces of the example secrets that would show if a value were logged or answered."""
    pem_line = EXAMPLE["STOREFRONT_SIGNING_KEY"].split("\\n")[1]
    return [EXAMPLE["BREVO_API_KEY"], EXAMPLE["STOREFRONT_HASH_SECRET"], pem_line]


def strong_secrets() -> dict[str, str]:
    """Secrets as an operator generates them (docs/deploying.md)."""
    return {
        "BREVO_API_KEY": f"xkeysib-{secrets.token_hex(32)}-{secrets.token_urlsafe(12)}",
        "STOREFRONT_SIGNING_KEY": private_pem(new_ec_key()).replace("\n", "\\n"),
        "STOREFRONT_HASH_SECRET": secrets.token_hex(32),
    }


def pem_of_scalar(scalar: int) -> str:
    key = ec.derive_private_key(scalar, ec.SECP256R1())
    return private_pem(key)


# --- the rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_each_value_of_the_example_settings_is_public(name):
    value = EXAMPLE[name].replace("\\n", "\n")

    found = problem(name, value)

    assert found is not None and found.startswith(f"{name} is the public development ")
    assert "local.settings.json.example" in found


def test_the_example_signing_key_is_public_in_any_encoding():
    key = load_private_key(EXAMPLE["STOREFRONT_SIGNING_KEY"].replace("\\n", "\n"))
    sec1 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()

    assert "BEGIN EC PRIVATE KEY" in sec1
    assert problem("STOREFRONT_SIGNING_KEY", sec1) == (
        "STOREFRONT_SIGNING_KEY is the public development key from local.settings.json.example"
    )


PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", re.DOTALL)


def test_every_p256_private_key_in_the_repository_is_known_as_public():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    found = set()
    for path in filter(None, tracked.stdout.decode().split("\0")):
        try:
            # Line breaks as they are, escaped once (an environment value) or twice (in JSON).
            text = (ROOT / path).read_text().replace("\\\\n", "\n").replace("\\n", "\n")
        except (UnicodeDecodeError, OSError):
            continue
        for block in PEM_BLOCK.finditer(text):
            try:
                found.add(public_jwk(load_private_key(block[0]))["kid"])
            except NotConfigured:  # not a usable key: a placeholder in a test or a doc
                continue

    assert found, "the example settings' key was not found: the scan is broken"
    assert found <= PUBLISHED_SIGNING_KEYS


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("STOREFRONT_HASH_SECRET", "h", "STOREFRONT_HASH_SECRET is shorter than 32 characters"),
        ("STOREFRONT_HASH_SECRET", secrets.token_hex(16)[:31], "shorter than 32 characters"),
        ("STOREFRONT_HASH_SECRET", "a" * 64, "repeats too few characters"),
        ("STOREFRONT_HASH_SECRET", "abcdefg" * 8, "repeats too few characters"),
        ("BREVO_API_KEY", "k", "BREVO_API_KEY is shorter than 32 characters"),
        ("BREVO_API_KEY", "xkeysib-" + "0" * 23, "too short to be a Brevo API key"),
    ],
    ids=["one-character", "31-random", "one-repeated", "seven-repeated", "brevo-one-character", "brevo-31"],
)
def test_short_or_repetitive_secrets_are_weak(name, value, expected):
    found = problem(name, value)

    assert found is not None and expected in found
    assert len(value) < 8 or value not in found


@pytest.mark.parametrize("scalar", [1, 2, 12345, 2**127, P256_ORDER - 1, P256_ORDER - 2**100])
def test_a_hand_made_signing_key_is_weak(scalar):
    pem = pem_of_scalar(scalar)

    assert problem("STOREFRONT_SIGNING_KEY", pem) == (
        "STOREFRONT_SIGNING_KEY was not generated at random: its private number is small enough to guess"
    )


@pytest.mark.parametrize("attempt", range(5))
def test_secrets_generated_as_the_docs_say_are_fit(attempt):
    for name, value in strong_secrets().items():
        assert problem(name, value.replace("\\n", "\n")) is None, name
    assert problem("STOREFRONT_HASH_SECRET", secrets.token_urlsafe(32)) is None  # 43 characters
    assert problem("STOREFRONT_HASH_SECRET", secrets.token_hex(16)) is None  # 32 hex digits


@pytest.mark.parametrize(
    "value", ["", "not a pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"]
)
def test_an_unreadable_signing_key_is_left_to_the_key_check(value):
    assert problem("STOREFRONT_SIGNING_KEY", value) is None


# --- where the app runs ---------------------------------------------------------------------------


@pytest.mark.parametrize("marker", AZURE_MARKERS)
def test_each_platform_variable_says_azure(marker):
    assert Settings.from_env({marker: "x7"}).hosted_on_azure is True


def test_core_tools_a_laptop_and_a_container_are_not_azure():
    core_tools = {
        "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true",
        "AZURE_FUNCTIONS_ENVIRONMENT": "Development",
        "WEBSITE_HOSTNAME": "localhost:7071",  # Core Tools sets it to its own address
        **{marker: "  " for marker in AZURE_MARKERS},
    }

    assert Settings.from_env(core_tools).hosted_on_azure is False
    assert Settings.from_env({}).hosted_on_azure is False
    # A dev container or a CI runner may set CONTAINER_NAME; Linux Consumption sets it too, beside
    # WEBSITE_SITE_NAME and WEBSITE_SKU.
    assert Settings.from_env({"CONTAINER_NAME": "devcontainer"}).hosted_on_azure is False


# --- the settings ---------------------------------------------------------------------------------


def test_on_azure_the_example_secrets_are_refused_and_never_kept():
    settings = Settings.from_env({**EXAMPLE, **ON_AZURE})

    assert settings.refused_secrets == SECRET_SETTINGS
    assert settings.not_configured == SECRET_SETTINGS
    assert settings.missing_secrets == ()
    assert (settings.brevo_api_key, settings.signing_key_pem, settings.hash_secret) == ("", "", "")
    assert not any(text in repr(settings) for text in secret_texts())


def test_off_azure_the_example_secrets_are_used_and_named_for_a_warning():
    settings = Settings.from_env(EXAMPLE)

    assert [name for name, _ in settings.weak_secrets] == list(SECRET_SETTINGS)
    assert settings.refused_secrets == () and settings.not_configured == ()
    assert settings.hash_secret == EXAMPLE["STOREFRONT_HASH_SECRET"]


@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_on_azure_only_the_public_secret_is_refused(name):
    settings = Settings.from_env({**strong_secrets(), name: EXAMPLE[name], **ON_AZURE})

    assert settings.refused_secrets == (name,)
    assert settings.not_configured == (name,)


def test_on_azure_strong_secrets_are_used():
    chosen = strong_secrets()

    settings = Settings.from_env({**chosen, **ON_AZURE})

    assert settings.weak_secrets == () and settings.not_configured == ()
    assert settings.hash_secret == chosen["STOREFRONT_HASH_SECRET"]


# --- health and purchases, in process -------------------------------------------------------------


def governance() -> str:
    return f"gov{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(
    ("name", "weak"),
    [
        ("STOREFRONT_HASH_SECRET", "hunter2"),
        ("STOREFRONT_HASH_SECRET", EXAMPLE["STOREFRONT_HASH_SECRET"]),
        ("STOREFRONT_HASH_SECRET", "\ufeff" + json.dumps(EXAMPLE["STOREFRONT_HASH_SECRET"])),
        ("STOREFRONT_HASH_SECRET", EXAMPLE["STOREFRONT_HASH_SECRET"].upper() + "-prod"),
        ("BREVO_API_KEY", EXAMPLE["BREVO_API_KEY"]),
        ("STOREFRONT_SIGNING_KEY", EXAMPLE["STOREFRONT_SIGNING_KEY"]),
        ("STOREFRONT_SIGNING_KEY", pem_of_scalar(7)),
    ],
    ids=[
        "short-hash",
        "example-hash",
        "quoted-example-hash",
        "suffixed-example-hash",
        "example-brevo",
        "example-signing",
        "hand-made-signing",
    ],
)
def test_on_azure_a_weak_secret_makes_health_503_naming_it_and_purchases_503(
    name, weak, azurite, sandbox, mail
):
    services = build(azurite, sandbox, governance(), **{**strong_secrets(), name: weak, **ON_AZURE})
    email = unique_email()
    before = brevo_requests(sandbox)

    health = api.health(services)
    outcome = services.storefront.purchase(
        PurchaseCall({"email": email}, None, unique_address(), Caller("http"))
    )
    report = json.loads(health.body)

    assert health.status == 503
    assert report["status"] == "unconfigured"
    assert report["missing_settings"] == [name]
    assert len(report["problems"]) == 1 and report["problems"][0].startswith(f"{name} ")
    assert outcome.status == 503
    assert json.loads(outcome.body)["error"]["code"] == "not_configured"
    assert brevo_requests(sandbox) == before
    assert mail.emails_to(email) == []
    for text in (health.body.decode(), outcome.body.decode()):
        assert weak.replace("\\n", "\n") not in text and weak not in text


def test_on_azure_the_example_signing_key_is_not_published(azurite, sandbox):
    services = build(azurite, sandbox, governance(), **ON_AZURE)

    assert json.loads(api.jwks(services).body) == {"keys": []}


def test_off_azure_the_example_secrets_serve_purchases(azurite, sandbox, mail):
    services = build(azurite, sandbox, governance())
    email = unique_email()

    health = api.health(services)
    outcome = services.storefront.purchase(
        PurchaseCall({"email": email}, None, unique_address(), Caller("http"))
    )

    assert health.status == 200
    assert outcome.status == 200
    assert len(mail.emails_to(email)) == 1


# --- through a dev host ---------------------------------------------------------------------------


def test_a_dev_host_on_azure_with_the_example_secrets_is_unconfigured_and_refuses(host_factory, mail):
    host = host_factory(**ON_AZURE, STOREFRONT_GOVERNANCE_TABLE="governanceazure")
    buyer = Buyer(host.url)

    health = buyer.http.get(f"{host.url}/api/health", timeout=10)
    keyed = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})
    mcp = buyer.call_tool({"email": buyer.email})
    jwks = buyer.http.get(f"{host.url}/.well-known/jwks.json", timeout=10)
    log = host.log()

    assert health.status_code == 503
    assert health.json()["missing_settings"] == list(SECRET_SETTINGS)
    assert all("public development" in problem for problem in health.json()["problems"])
    assert keyed.status_code == 503 and keyed.json()["error"]["code"] == "not_configured"
    assert mcp.json()["result"]["isError"] is True
    assert jwks.json() == {"keys": []}
    assert mail.emails_to(buyer.email) == []
    for name in SECRET_SETTINGS:
        assert log.count(f"{name} is the public development") == 1, log
    for text in secret_texts():
        assert text not in log + health.text + keyed.text + mcp.text + jwks.text


def test_a_dev_host_off_azure_warns_once_naming_the_settings_never_the_values(host):
    Buyer(host.url).purchase()
    requests.get(f"{host.url}/api/health", timeout=10)
    log = host.log()

    warning = (
        "BREVO_API_KEY, STOREFRONT_SIGNING_KEY, STOREFRONT_HASH_SECRET: public or weak values, fine on "
        "this machine; on Azure the store refuses them"
    )
    assert log.count(warning) == 1, log
    assert "public development" not in log  # the refusals are Azure's only
    for text in secret_texts():
        assert text not in log


@pytest.mark.parametrize("on_azure", [True, False], ids=["azure", "elsewhere"])
def test_the_start_up_log_names_weak_secrets_and_never_shows_them(caplog, on_azure):
    from shared import runtime

    weak = {
        "BREVO_API_KEY": "xkeysib-short7",
        "STOREFRONT_HASH_SECRET": "hunter2-hunter2",
        "STOREFRONT_SIGNING_KEY": pem_of_scalar(3),
    }
    settings = Settings.from_env({**weak, **(ON_AZURE if on_azure else {})})

    with caplog.at_level("WARNING", logger="shared.runtime"):
        runtime.report_settings(settings)
    lines = [record.getMessage() for record in caplog.records]

    if on_azure:
        assert [line.split(" ", 1)[0] for line in lines] == list(SECRET_SETTINGS)
        assert all(line.endswith("; on Azure purchases are refused until it is replaced") for line in lines)
    else:
        assert len(lines) == 1 and lines[0].startswith(", ".join(SECRET_SETTINGS) + ": public or weak values")
    pem_line = weak["STOREFRONT_SIGNING_KEY"].splitlines()[1]
    for value in (weak["BREVO_API_KEY"], weak["STOREFRONT_HASH_SECRET"], pem_line, "hunter2"):
        assert not any(value in line for line in lines)
