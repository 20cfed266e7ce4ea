"""shared.config.settings: every app setting read from the environment into one validated object."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shared.config.keys import load_private_key, public_jwk
from shared.config.settings import (
    AZURE_MARKERS,
    BOUNDS,
    DEFAULT_BREVO_BASE_URL,
    DEVELOPER_IDENTITY,
    IDENTITY_SETTINGS,
    MANAGED_IDENTITY,
    SECRET_SETTINGS,
    Settings,
)
from shared.config.settings_reader import SettingsError, is_unresolved_reference
from shared.seams import telemetry
from tests.shared.config.test_keys import P256_P, SMALL_X, point_jwk
from tests.support import ROOT, new_ec_key, off_curve, private_pem

BREVO_KEY = "xkeysib-" + "0f1e2d3c4b5a6978" * 4 + "-Ab12Cd34Ef56Gh78"
HASH_SECRET = "9c1d4e7f2a5b8c3d6e9f0a1b4c7d2e5f8a3b6c9d0e1f4a7b2c5d8e3f6a9b0c1d"
SIGNING_KEY = private_pem(new_ec_key())
SECRETS = {
    "BREVO_API_KEY": BREVO_KEY,
    "STOREFRONT_SIGNING_KEY": SIGNING_KEY.replace("\n", "\\n"),  # as an app setting holds it
    "STOREFRONT_HASH_SECRET": HASH_SECRET,
}
RETIRED_JWK = public_jwk(ec.generate_private_key(ec.SECP256R1()))
FRONT_DOOR_ID = "3f2a9c1e-7b4d-4e8a-9c6f-1d2e3f4a5b6c"


def test_an_empty_environment_gives_the_documented_defaults():
    settings = Settings.from_env({})

    assert settings == Settings(missing_secrets=SECRET_SETTINGS)
    assert settings.storage_connection_string == "UseDevelopmentStorage=true"
    assert settings.brevo_api_key == ""
    assert settings.brevo_base_url == DEFAULT_BREVO_BASE_URL == "https://api.brevo.com/v3"
    assert settings.brevo_timeout_seconds == 10.0
    assert settings.brevo_contact_list_id == 0  # no list: the drainer creates contacts one at a time
    assert settings.contact_queue == "storefront-contacts"
    assert settings.contact_queue_shards == 4
    assert settings.storage_queue_uri == ""
    assert settings.rate_limit_per_hour == 5
    assert settings.recipient_limit_per_day == 3
    assert settings.daily_cost_ceiling_usd == Decimal("5.00")
    assert settings.cost_per_purchase_usd == Decimal("0.01")
    assert settings.signing_key_pem == ""
    assert settings.hash_secret == ""
    assert settings.sender_email == "store@example.com"
    assert settings.sender_name == "Storefront"
    assert settings.public_base_url == "http://localhost:7071"
    assert settings.allowed_origins == ()
    assert settings.download_token_ttl_seconds == 604800
    assert settings.storage_timeout_seconds == 5.0
    assert settings.idempotency_lease_seconds == 600
    assert settings.idempotency_ttl_seconds == 86400
    assert settings.idempotency_fail_open is False
    assert settings.idempotency_table == "idempotency"
    assert settings.governance_table == "governance"
    assert settings.receipts_container == "receipts"
    assert settings.bundles_container == "bundles"
    assert settings.ledger_table == "ledger"
    assert settings.retired_public_keys == ()


def test_every_setting_is_read_from_the_environment():
    env = {
        **SECRETS,
        "AzureWebJobsStorage": "DefaultEndpointsProtocol=https;AccountName=acct",
        "BREVO_BASE_URL": "http://127.0.0.1:8025/v3/",
        "STOREFRONT_BREVO_TIMEOUT_SECONDS": "2.5",
        "BREVO_CONTACT_LIST_ID": "7",
        "STOREFRONT_CONTACT_QUEUE": "shop-contacts-2",
        "STOREFRONT_CONTACT_QUEUE_SHARDS": "8",
        "STOREFRONT_RATE_LIMIT_PER_HOUR": "12",
        "STOREFRONT_RECIPIENT_LIMIT_PER_DAY": "2",
        "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": "40",
        "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR": "400",
        "STOREFRONT_AGENT_ORIGINS_ALLOWED": "HTTPS://Agent.Example:443/, https://other.example:8443",
        "STOREFRONT_AGENT_ORIGINS_DENIED": "https://bad.example",
        "STOREFRONT_UCP_PLATFORMS": "HTTPS://Platform.Example:443/ucp/, https://spck.dev/agent",
        "STOREFRONT_DAILY_COST_CEILING_USD": "7.25",
        "STOREFRONT_COST_PER_PURCHASE_USD": "0.015",
        "STOREFRONT_COST_COUNTER_SHARDS": "4",
        "STOREFRONT_SENDER_EMAIL": "shop@example.net",
        "STOREFRONT_SENDER_NAME": "The Shop",
        "STOREFRONT_EMAIL_TEMPLATE_DIR": "shared/seams/templates",
        "STOREFRONT_PUBLIC_BASE_URL": "https://shop.example.net/",
        "STOREFRONT_ALLOWED_ORIGINS": " App.Example.net, ,tools.example.org,",
        "STOREFRONT_TRUSTED_PROXY_HOPS": "2",
        "STOREFRONT_FRONT_DOOR_ID": FRONT_DOOR_ID,
        "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "3600",
        "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "1.5",
        "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": "120",
        "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "1800",
        "STOREFRONT_IDEMPOTENCY_FAIL_OPEN": "true",
        "STOREFRONT_IDEMPOTENCY_TABLE": "idem2",
        "STOREFRONT_GOVERNANCE_TABLE": "gov2",
        "STOREFRONT_RECEIPTS_CONTAINER": "receipts2",
        "STOREFRONT_BUNDLES_CONTAINER": "bundles2",
        "STOREFRONT_LEDGER_TABLE": "ledger2",
        "STOREFRONT_UCP_TABLE": "ucp2",
        "STOREFRONT_TERMS_URL": "https://shop.example/terms",
        "STOREFRONT_PRIVACY_URL": "https://shop.example/privacy",
        "STOREFRONT_RETIRED_PUBLIC_KEYS": json.dumps({"keys": [RETIRED_JWK]}),
    }

    settings = Settings.from_env(env)

    assert settings == Settings(
        storage_connection_string="DefaultEndpointsProtocol=https;AccountName=acct",
        brevo_api_key=BREVO_KEY,
        brevo_base_url="http://127.0.0.1:8025/v3",
        brevo_timeout_seconds=2.5,
        brevo_contact_list_id=7,
        contact_queue="shop-contacts-2",
        contact_queue_shards=8,
        rate_limit_per_hour=12,
        recipient_limit_per_day=2,
        agent_rate_limit_per_hour=40,
        agent_site_rate_limit_per_hour=400,
        agent_origins_allowed=("https://agent.example", "https://other.example:8443"),
        agent_origins_denied=("https://bad.example",),
        ucp_platforms=("https://platform.example/ucp", "https://spck.dev/agent"),
        daily_cost_ceiling_usd=Decimal("7.25"),
        cost_per_purchase_usd=Decimal("0.015"),
        cost_counter_shards=4,
        signing_key_pem=SIGNING_KEY,
        hash_secret=HASH_SECRET,
        sender_email="shop@example.net",
        sender_name="The Shop",
        email_template_dir="shared/seams/templates",  # as given; shared.runtime.load_settings checks it
        public_base_url="https://shop.example.net",
        allowed_origins=("app.example.net", "tools.example.org"),
        trusted_proxy_hops=2,
        front_door_id=FRONT_DOOR_ID,
        download_token_ttl_seconds=3600,
        storage_timeout_seconds=1.5,
        idempotency_lease_seconds=120,
        idempotency_ttl_seconds=1800,
        idempotency_fail_open=True,
        idempotency_table="idem2",
        governance_table="gov2",
        receipts_container="receipts2",
        bundles_container="bundles2",
        ledger_table="ledger2",
        ucp_table="ucp2",
        terms_url="https://shop.example/terms",
        privacy_url="https://shop.example/privacy",
        retired_public_keys=(RETIRED_JWK,),
        missing_secrets=(),
    )


def test_every_field_is_covered_by_the_full_environment_tests():
    # If a field is added, test_every_setting_is_read_from_the_environment (or, for storage
    # identity, test_user_assigned_identity_settings_are_read; for the secrets' strength, the
    # tests of public and weak secrets below) must name it too.
    assert len(dataclasses.fields(Settings)) == 49


def test_values_are_stripped_and_blank_values_mean_the_default():
    settings = Settings.from_env(
        {
            "STOREFRONT_SENDER_NAME": "  Shop  ",
            "STOREFRONT_RATE_LIMIT_PER_HOUR": " 9 ",
            "BREVO_BASE_URL": "   ",
            "BREVO_CONTACT_LIST_ID": " ",
        }
    )

    assert settings.sender_name == "Shop"
    assert settings.rate_limit_per_hour == 9
    assert settings.brevo_base_url == DEFAULT_BREVO_BASE_URL
    assert settings.brevo_contact_list_id == 0


def test_from_env_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("STOREFRONT_RATE_LIMIT_PER_HOUR", "42")

    assert Settings.from_env().rate_limit_per_hour == 42


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "five"),
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "1.5"),
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "0"),
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "-3"),
        ("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "three"),
        ("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "2.5"),
        ("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "0"),
        ("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "-1"),
        ("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "1w"),
        ("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "59"),
        ("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "-3600"),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "$5"),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "-0.01"),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "NaN"),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "Infinity"),
        ("STOREFRONT_COST_PER_PURCHASE_USD", "one cent"),
        ("STOREFRONT_COST_PER_PURCHASE_USD", "-1"),
        ("STOREFRONT_COST_PER_PURCHASE_USD", "0,01"),
        ("STOREFRONT_BREVO_TIMEOUT_SECONDS", "ten"),
        ("STOREFRONT_BREVO_TIMEOUT_SECONDS", "0.05"),
        ("STOREFRONT_BREVO_TIMEOUT_SECONDS", "-10"),
        ("STOREFRONT_BREVO_TIMEOUT_SECONDS", "inf"),
        ("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "5s"),
        ("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "0"),
        ("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "sNaN"),
        ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "ten minutes"),
        ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "0"),
        ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "-600"),
        ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "1.5"),
        ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "1d"),
        ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "0"),
        ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "-86400"),
        ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "86400.5"),
        ("STOREFRONT_IDEMPOTENCY_FAIL_OPEN", "yes"),
        ("STOREFRONT_IDEMPOTENCY_FAIL_OPEN", "2"),
    ],
)
def test_malformed_or_out_of_range_values_raise_settings_error_naming_the_setting(name, value):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: value})

    assert name in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        (" TRUE ", True),
        ("1", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("", False),
    ],
)
def test_idempotency_fail_open_is_read_as_a_boolean(value, expected):
    assert Settings.from_env({"STOREFRONT_IDEMPOTENCY_FAIL_OPEN": value}).idempotency_fail_open is expected


# The idempotency TTL plus the lease may not exceed the token TTL, so the lowest token TTL needs a
# TTL and a lease that fit.
FITTING_TTL = {"STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "30", "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": "30"}


@pytest.mark.parametrize(
    ("name", "value", "field", "expected", "other"),
    [
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "1", "rate_limit_per_hour", 1, {}),
        ("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "1", "recipient_limit_per_day", 1, {}),
        ("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "60", "download_token_ttl_seconds", 60, FITTING_TTL),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "0", "daily_cost_ceiling_usd", Decimal("0"), {}),
        ("STOREFRONT_COST_PER_PURCHASE_USD", "0", "cost_per_purchase_usd", Decimal("0"), {}),
        ("STOREFRONT_BREVO_TIMEOUT_SECONDS", "0.1", "brevo_timeout_seconds", 0.1, {}),
        ("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "0.1", "storage_timeout_seconds", 0.1, {}),
        ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "1", "idempotency_lease_seconds", 1, {}),
        ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "1", "idempotency_ttl_seconds", 1, {}),
    ],
)
def test_the_lowest_allowed_value_is_accepted(name, value, field, expected, other):
    assert getattr(Settings.from_env({name: value, **other}), field) == expected


# --- bounds: every numeric setting has a lowest and a highest value -----------------------------

# What each setting's extremes need beside them to pass the rule that a key's replay and lease fit
# inside the download link's lifetime.
COMPANIONS = {
    ("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "low"): FITTING_TTL,
    ("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "high"): {"STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "31536000"},
    ("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "high"): {"STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "31536000"},
}
FIELDS = {
    "STOREFRONT_BREVO_TIMEOUT_SECONDS": "brevo_timeout_seconds",
    "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "storage_timeout_seconds",
    "STOREFRONT_RATE_LIMIT_PER_HOUR": "rate_limit_per_hour",
    "STOREFRONT_RECIPIENT_LIMIT_PER_DAY": "recipient_limit_per_day",
    "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": "agent_rate_limit_per_hour",
    "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR": "agent_site_rate_limit_per_hour",
    "STOREFRONT_DAILY_COST_CEILING_USD": "daily_cost_ceiling_usd",
    "STOREFRONT_COST_PER_PURCHASE_USD": "cost_per_purchase_usd",
    "STOREFRONT_COST_COUNTER_SHARDS": "cost_counter_shards",
    "STOREFRONT_CONTACT_QUEUE_SHARDS": "contact_queue_shards",
    "BREVO_CONTACT_LIST_ID": "brevo_contact_list_id",
    "STOREFRONT_TRUSTED_PROXY_HOPS": "trusted_proxy_hops",
    "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "download_token_ttl_seconds",
    "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": "idempotency_lease_seconds",
    "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "idempotency_ttl_seconds",
}
WHOLE = {name for name, field in FIELDS.items() if isinstance(getattr(Settings(), field), int)}


def _step(name: str) -> Decimal:
    """The smallest change a setting can tell apart: 1 for a whole number, else a hundredth."""
    return Decimal(1) if name in WHOLE else Decimal("0.01")


def test_every_numeric_setting_has_bounds():
    numeric = {f.name for f in dataclasses.fields(Settings) if f.type in ("int", "float", "Decimal")}
    assert set(FIELDS.values()) == numeric
    assert set(FIELDS) == set(BOUNDS)


def test_the_configuration_doc_gives_each_numeric_settings_bounds():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    table = doc.split("## Settings", 1)[1].split("### Set by the platform", 1)[0]
    cells = {name: rest.split(" | ") for name, rest in re.findall(r"^\| `(\w+)` \| (.*) \|$", table, re.M)}

    for name, (low, high) in BOUNDS.items():
        assert cells[name][2].startswith(f"`{low}` to `{high}`"), name


@pytest.mark.parametrize("side", ["low", "high"])
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_each_bound_is_accepted(name, side):
    value = BOUNDS[name][0 if side == "low" else 1]

    settings = Settings.from_env({name: value, **COMPANIONS.get((name, side), {})})

    assert Decimal(str(getattr(settings, FIELDS[name]))) == Decimal(value)


@pytest.mark.parametrize("side", ["low", "high"])
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_a_value_just_past_a_bound_stops_start_up_naming_the_setting_and_its_bounds(name, side):
    low, high = BOUNDS[name]
    value = Decimal(low) - _step(name) if side == "low" else Decimal(high) + _step(name)

    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: str(value), **COMPANIONS.get((name, side), {})})

    assert str(caught.value).startswith(f"{name} must be ")
    assert f"from {low} to {high}" in str(caught.value)


HUGE_OR_ODD = [
    "1e12",
    "1e30",
    "1E+400",
    "9" * 5000,
    "-" + "9" * 5000,
    "inf",
    "-Infinity",
    "nan",
    "sNaN",
    "1e999999999",
    "0x10",
    "1_000",
    "\u0665",  # ARABIC-INDIC DIGIT FIVE, which int() and Decimal() would read as 5
    "\uff15",  # FULLWIDTH DIGIT FIVE
    "5 5",
]


@pytest.mark.parametrize("value", HUGE_OR_ODD)
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_huge_infinite_or_foreign_numbers_stop_start_up_naming_the_setting(name, value):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: value})

    assert str(caught.value).startswith(f"{name} must be ")
    assert len(str(caught.value)) < 200  # a 5,000-digit value is not echoed whole


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_minus_zero_is_zero_where_zero_is_allowed_and_refused_elsewhere(name):
    if Decimal(BOUNDS[name][0]) > 0:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({name: "-0"})
        return
    value = getattr(Settings.from_env({name: "-0"}), FIELDS[name])

    assert value == 0 and str(value) in ("0", "0.0")


@pytest.mark.parametrize("name", ["STOREFRONT_DAILY_COST_CEILING_USD", "STOREFRONT_COST_PER_PURCHASE_USD"])
def test_money_is_counted_in_whole_millionths_of_a_dollar(name):
    assert getattr(Settings.from_env({name: "0.000001"}), FIELDS[name]) == Decimal("0.000001")
    assert getattr(Settings.from_env({name: "0.0100000"}), FIELDS[name]) == Decimal("0.01")
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: "0.0000001"})  # would count as nothing: a free purchase
    assert f"{name} must be in whole millionths" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STOREFRONT_IDEMPOTENCY_TABLE", "idem_keys"),
        ("STOREFRONT_GOVERNANCE_TABLE", "1governance"),
        ("STOREFRONT_LEDGER_TABLE", "ab"),
        ("STOREFRONT_LEDGER_TABLE", "tables"),
        ("STOREFRONT_LEDGER_TABLE", "l" * 64),
        ("STOREFRONT_RECEIPTS_CONTAINER", "Receipts"),
        ("STOREFRONT_RECEIPTS_CONTAINER", "receipts--old"),
        ("STOREFRONT_BUNDLES_CONTAINER", "-bundles"),
        ("STOREFRONT_BUNDLES_CONTAINER", "bundles_2"),
        ("STOREFRONT_CONTACT_QUEUE", "Contacts"),
        ("STOREFRONT_CONTACT_QUEUE", "contacts--old"),
        ("STOREFRONT_CONTACT_QUEUE", "-contacts"),
        ("STOREFRONT_CONTACT_QUEUE", "contacts-"),
        ("STOREFRONT_CONTACT_QUEUE", "contacts_2"),
        ("STOREFRONT_CONTACT_QUEUE", "ab"),
        ("STOREFRONT_CONTACT_QUEUE", "c" * 57),  # `{prefix}-poison` would pass Azure's 63
        ("STOREFRONT_PUBLIC_BASE_URL", "shop.example.net"),
        ("STOREFRONT_PUBLIC_BASE_URL", "javascript:alert(1)"),
        ("STOREFRONT_PUBLIC_BASE_URL", "https://shop.example.net/?a=1"),
        ("STOREFRONT_PUBLIC_BASE_URL", "https://shop example.net"),
        ("STOREFRONT_PUBLIC_BASE_URL", "https://[::1"),
        ("BREVO_BASE_URL", "api.brevo.com/v3"),
        ("BREVO_BASE_URL", "ftp://api.brevo.com/v3"),
        ("STOREFRONT_FRONT_DOOR_ID", "my-front-door"),
    ],
)
def test_names_and_urls_azure_or_a_browser_would_refuse_stop_start_up_naming_the_setting(name, value):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: value})

    assert str(caught.value).startswith(name)


def test_names_and_urls_azure_accepts_are_kept():
    settings = Settings.from_env(
        {
            "STOREFRONT_LEDGER_TABLE": "Ledger2026",
            "STOREFRONT_BUNDLES_CONTAINER": "bundles-2026",
            "STOREFRONT_CONTACT_QUEUE": "c" * 56,
            "BREVO_BASE_URL": "http://127.0.0.1:8025/v3/",
            "STOREFRONT_FRONT_DOOR_ID": FRONT_DOOR_ID.upper(),
        }
    )

    assert (settings.ledger_table, settings.bundles_container) == ("Ledger2026", "bundles-2026")
    assert settings.contact_queue == "c" * 56
    assert settings.brevo_base_url == "http://127.0.0.1:8025/v3"
    assert settings.front_door_id == FRONT_DOOR_ID  # written the one way Azure sends it


@pytest.mark.parametrize(
    "value", ["ключ-" + "k" * 40, "xkeysib-" + "a" * 40 + " x", "xkeysib-\u00e9" + "a" * 40]
)
def test_a_brevo_key_no_http_header_can_carry_stops_start_up_without_echoing_it(value):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"BREVO_API_KEY": value})

    assert str(caught.value).startswith("BREVO_API_KEY must be printable ASCII")
    assert value not in str(caught.value) and "ключ" not in str(caught.value)


def test_a_value_that_is_not_utf8_stops_start_up_naming_the_setting():
    # os.environ gives undecodable bytes as lone surrogates; nothing downstream could encode them.
    with pytest.raises(SettingsError, match="STOREFRONT_HASH_SECRET is not valid UTF-8 text"):
        Settings.from_env({"STOREFRONT_HASH_SECRET": "secret-\udcff" + "x" * 40})


# --- the idempotency lease and TTL -----------------------------------------------------------------


def test_idempotency_lease_and_ttl_are_read_as_integers():
    settings = Settings.from_env(
        {"STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": " 45 ", "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "7200"}
    )

    assert settings.idempotency_lease_seconds == 45
    assert settings.idempotency_ttl_seconds == 7200
    assert isinstance(settings.idempotency_lease_seconds, int)
    assert isinstance(settings.idempotency_ttl_seconds, int)


def test_blank_idempotency_lease_and_ttl_mean_the_defaults():
    settings = Settings.from_env(
        {"STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": "  ", "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": ""}
    )

    assert settings.idempotency_lease_seconds == 600
    assert settings.idempotency_ttl_seconds == 86400


@pytest.mark.parametrize(
    ("ttl", "lease", "token_ttl"),
    [("3000", "600", "3600"), ("604200", "", ""), ("30", "30", "60"), ("29", "30", "60")],
    ids=["sum-equal", "sum-equal-to-the-default-token-ttl", "both-lowest", "shorter"],
)
def test_an_idempotency_ttl_plus_lease_up_to_the_token_ttl_is_accepted(ttl, lease, token_ttl):
    settings = Settings.from_env(
        {
            "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": ttl,
            "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": lease,
            "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": token_ttl,
        }
    )

    assert settings.idempotency_ttl_seconds == int(ttl)
    assert (
        settings.idempotency_ttl_seconds + settings.idempotency_lease_seconds
        <= settings.download_token_ttl_seconds
    )


@pytest.mark.parametrize(
    "env",
    [
        {"STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "3001", "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "3600"},
        {"STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "604201"},
        {"STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "86999"},
        {"STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": "86400", "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": "172799"},
    ],
    ids=[
        "one-second-longer",
        "longer-than-the-default-token-ttl",
        "default-ttl-over-a-short-token-ttl",
        "long-lease",
    ],
)
def test_an_idempotency_retention_outliving_the_token_is_refused_naming_the_settings(env):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)

    assert "STOREFRONT_IDEMPOTENCY_TTL_SECONDS" in str(caught.value)
    assert "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS" in str(caught.value)
    assert "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS" in str(caught.value)


def test_the_shipped_defaults_satisfy_the_ttl_rule():
    defaults = Settings()

    assert (
        defaults.idempotency_ttl_seconds + defaults.idempotency_lease_seconds
        <= defaults.download_token_ttl_seconds
    )
    assert Settings.from_env({}).idempotency_ttl_seconds == defaults.idempotency_ttl_seconds


def test_decimal_settings_keep_their_exact_value():
    settings = Settings.from_env({"STOREFRONT_COST_PER_PURCHASE_USD": "0.10"})

    assert settings.cost_per_purchase_usd == Decimal("0.10")
    assert isinstance(settings.cost_per_purchase_usd, Decimal)


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        ((), SECRET_SETTINGS),
        (SECRET_SETTINGS, ()),
        (("BREVO_API_KEY",), ("STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET")),
        (("STOREFRONT_SIGNING_KEY",), ("BREVO_API_KEY", "STOREFRONT_HASH_SECRET")),
        (("STOREFRONT_HASH_SECRET",), ("BREVO_API_KEY", "STOREFRONT_SIGNING_KEY")),
        (("BREVO_API_KEY", "STOREFRONT_HASH_SECRET"), ("STOREFRONT_SIGNING_KEY",)),
    ],
)
def test_missing_secrets_lists_exactly_the_unset_secrets(present, missing):
    settings = Settings.from_env({name: SECRETS[name] for name in present})

    assert settings.missing_secrets == missing


def test_a_blank_secret_counts_as_missing():
    settings = Settings.from_env({**SECRETS, "BREVO_API_KEY": "   "})

    assert settings.missing_secrets == ("BREVO_API_KEY",)
    assert settings.brevo_api_key == ""


def test_secret_settings_are_the_three_production_secrets():
    assert SECRET_SETTINGS == ("BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET")


def test_website_hostname_gives_the_default_public_base_url():
    settings = Settings.from_env({"WEBSITE_HOSTNAME": " shop.azurewebsites.net "})

    assert settings.public_base_url == "https://shop.azurewebsites.net"


def test_explicit_public_base_url_wins_over_website_hostname():
    settings = Settings.from_env(
        {
            "WEBSITE_HOSTNAME": "shop.azurewebsites.net",
            "STOREFRONT_PUBLIC_BASE_URL": "https://shop.example.net",
        }
    )

    assert settings.public_base_url == "https://shop.example.net"


def test_escaped_newlines_in_the_signing_key_become_real_newlines():
    settings = Settings.from_env({"STOREFRONT_SIGNING_KEY": SIGNING_KEY.replace("\n", "\\n")})

    assert settings.signing_key_pem == SIGNING_KEY
    assert "\\n" not in settings.signing_key_pem


def test_a_signing_key_with_real_newlines_is_kept():
    assert Settings.from_env({"STOREFRONT_SIGNING_KEY": SIGNING_KEY}).signing_key_pem == SIGNING_KEY.strip()


def test_the_development_signing_key_from_the_example_settings_is_usable():
    from shared.config.keys import KeySet
    from shared.purchase.tokens import TokenSigner
    from tests.support import ROOT

    values = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]

    settings = Settings.from_env(values)

    assert settings.missing_secrets == ()
    keys = KeySet.load(settings.signing_key_pem, settings.retired_public_keys)
    assert TokenSigner(keys, settings.public_base_url, 60).kid == keys.kid


def test_settings_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().rate_limit_per_hour = 100  # type: ignore[misc]


def test_allowed_origins_accept_full_origins_as_well_as_host_names():
    settings = Settings.from_env(
        {"STOREFRONT_ALLOWED_ORIGINS": "https://App.example.net:8443, agents.example"}
    )
    assert settings.allowed_origins == ("app.example.net", "agents.example")


def test_allowed_origins_that_name_no_host_are_refused():
    with pytest.raises(SettingsError, match="STOREFRONT_ALLOWED_ORIGINS"):
        Settings.from_env({"STOREFRONT_ALLOWED_ORIGINS": "https://"})


# --- STOREFRONT_RETIRED_PUBLIC_KEYS ----------------------------------------------------------------


def _jwk(**changes) -> dict:
    return {**public_jwk(ec.generate_private_key(ec.SECP256R1())), **changes}


def _p384_jwk() -> dict:
    numbers = ec.generate_private_key(ec.SECP384R1()).public_key().public_numbers()
    x, y = (
        base64.urlsafe_b64encode(n.to_bytes(48, "big")).rstrip(b"=").decode() for n in (numbers.x, numbers.y)
    )
    return {"kty": "EC", "crv": "P-384", "x": x, "y": y}


def _retired(value: str) -> tuple[dict, ...]:
    return Settings.from_env({"STOREFRONT_RETIRED_PUBLIC_KEYS": value}).retired_public_keys


def test_retired_public_keys_are_read_from_a_jwks():
    first, second = _jwk(), _jwk()

    assert _retired(json.dumps({"keys": [first, second]})) == (first, second)


def test_retired_public_keys_are_read_from_a_json_list_of_jwks():
    first, second = _jwk(), _jwk()

    assert _retired(json.dumps([first, second])) == (first, second)


def test_retired_public_keys_need_only_the_public_members():
    jwk = _jwk()
    bare = {m: jwk[m] for m in ("kty", "crv", "x", "y")}

    assert _retired(f"  {json.dumps([bare])}  ") == (bare,)


@pytest.mark.parametrize("value", ["", "   ", "[]", '{"keys": []}'])
def test_blank_or_empty_retired_public_keys_are_none(value):
    assert _retired(value) == ()


def test_retired_public_keys_are_a_tuple_of_dicts():
    keys = _retired(json.dumps([_jwk()]))

    assert isinstance(keys, tuple) and all(isinstance(k, dict) for k in keys)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("not json", id="text"),
        pytest.param('{"keys": [', id="truncated"),
        pytest.param("{'keys': []}", id="single-quotes"),
    ],
)
def test_retired_public_keys_that_are_not_json_are_refused_naming_the_setting(value):
    with pytest.raises(SettingsError, match="STOREFRONT_RETIRED_PUBLIC_KEYS must be JSON"):
        _retired(value)


def _not_public_p256() -> list:
    return [
        pytest.param(json.dumps({"keys": [_jwk(d="c2VjcmV0LXNjYWxhcg")]}), id="private-d-in-jwks"),
        pytest.param(json.dumps([_jwk(), _jwk(d="c2VjcmV0LXNjYWxhcg")]), id="private-d-in-list"),
        pytest.param(json.dumps([_jwk(d="")]), id="empty-d"),
        pytest.param(json.dumps([_p384_jwk()]), id="p384"),
        pytest.param(json.dumps([_jwk(crv="secp256k1")]), id="secp256k1"),
        pytest.param(json.dumps([_jwk(kty="RSA")]), id="rsa-kty"),
        pytest.param(json.dumps([{"kty": "oct", "k": "c2VjcmV0"}]), id="symmetric"),
        pytest.param(json.dumps([{k: v for k, v in _jwk().items() if k != "y"}]), id="missing-y"),
        pytest.param(json.dumps([_jwk(x="")]), id="empty-x"),
        pytest.param(json.dumps([off_curve(_jwk())]), id="off-the-curve"),
        pytest.param(json.dumps([_jwk(x="AAAA")]), id="x-too-short"),
        pytest.param(json.dumps([_jwk(y=_jwk()["y"] + "AAAA")]), id="y-too-long"),
        pytest.param(json.dumps([_jwk(x="not base64url!")]), id="x-not-base64url"),
        pytest.param(json.dumps([_jwk(x=12345)]), id="number-x"),
        pytest.param(json.dumps(["not a jwk"]), id="string-item"),
        pytest.param(json.dumps({"keys": {"kty": "EC"}}), id="keys-not-a-list"),
        pytest.param(json.dumps({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}), id="bare-jwk"),
        pytest.param(json.dumps("[]"), id="json-string"),
        pytest.param("null", id="null"),
    ]


@pytest.mark.parametrize("value", _not_public_p256())
def test_retired_keys_that_are_not_public_ec_p256_jwks_are_refused_naming_the_setting(value):
    with pytest.raises(SettingsError, match="STOREFRONT_RETIRED_PUBLIC_KEYS"):
        _retired(value)


def test_a_retired_key_listed_again_with_p_added_to_a_coordinate_stops_the_start():
    """The reproduction: x and x + p are one point, so the same key would be published twice."""
    x, y = SMALL_X

    with pytest.raises(SettingsError, match="STOREFRONT_RETIRED_PUBLIC_KEYS .*below p"):
        _retired(json.dumps([point_jwk(x, y), point_jwk(x + P256_P, y)]))


def test_a_refused_private_retired_key_is_not_echoed_in_the_error():
    with pytest.raises(SettingsError) as caught:
        _retired(json.dumps([_jwk(d="c2VjcmV0LXNjYWxhcg")]))

    assert "c2VjcmV0LXNjYWxhcg" not in str(caught.value)


class _Recording(dict):
    """An environment that remembers every name the settings ask for."""

    def __init__(self, values: dict[str, str] | None = None):
        super().__init__(values or {})
        self.asked: set[str] = set()

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)


def test_the_configuration_doc_lists_exactly_the_settings_the_app_reads():
    env = _Recording()
    Settings.from_env(env)
    env_identity = _Recording({"AzureWebJobsStorage__accountName": "acct"})
    Settings.from_env(env_identity)
    doc = (ROOT / "docs" / "configuration.md").read_text()
    settings_table = doc.split("## Settings", 1)[1].split("\n\n", 2)[1]
    platform_table = doc.split("### Set by the platform", 1)[1].split("\n\n", 2)[1]
    rows = set(re.findall(r"^\| `([A-Za-z_]+)` \|", settings_table, flags=re.MULTILINE))
    platform_rows = set(re.findall(r"^\| `([A-Za-z_]+)` \|", platform_table, flags=re.MULTILINE))
    # Set by Azure, not by the operator, or OpenTelemetry's own: the second table.
    platform = {"WEBSITE_HOSTNAME", "IDENTITY_ENDPOINT", *AZURE_MARKERS}
    read = env.asked | env_identity.asked | {telemetry.CONNECTION_SETTING}
    telemetry_source = Path(telemetry.__file__).read_text()
    telemetry_reads = set(re.findall(r"environ\.get\(\"([A-Z_]+)\"", telemetry_source))

    assert platform <= read
    assert telemetry_reads == {"OTEL_TRACES_SAMPLER"}
    assert rows == read - platform
    assert platform_rows == platform | telemetry_reads


# --- storage: a connection string or an identity-based connection ---------------------------------

TABLE_URI = "https://acct.table.core.windows.net"
BLOB_URI = "https://acct.blob.core.windows.net"
QUEUE_URI = "https://acct.queue.core.windows.net"
CLIENT_ID = "6f1c4b9e-2d3a-4c5b-8e7f-0a1b2c3d4e5f"


def test_user_assigned_identity_settings_are_read():
    settings = Settings.from_env(
        {
            "AzureWebJobsStorage__credential": "managedidentity",
            "AzureWebJobsStorage__clientId": CLIENT_ID,
            "AzureWebJobsStorage__tableServiceUri": TABLE_URI + "/",
            "AzureWebJobsStorage__blobServiceUri": BLOB_URI,
            "AzureWebJobsStorage__queueServiceUri": QUEUE_URI + "/",
        }
    )

    assert settings == Settings(
        storage_connection_string="",
        storage_table_uri=TABLE_URI,
        storage_blob_uri=BLOB_URI,
        storage_queue_uri=QUEUE_URI,
        storage_credential=MANAGED_IDENTITY,
        storage_client_id=CLIENT_ID,
        missing_secrets=SECRET_SETTINGS,
    )


def test_an_account_name_on_azure_is_the_system_assigned_identity_on_the_public_endpoints():
    settings = Settings.from_env(
        {"AzureWebJobsStorage__accountName": "acct", "IDENTITY_ENDPOINT": "http://127.0.0.1:41000/msi/token"}
    )

    assert settings.storage_connection_string == ""
    assert (settings.storage_table_uri, settings.storage_blob_uri) == (TABLE_URI, BLOB_URI)
    assert settings.storage_queue_uri == QUEUE_URI
    assert (settings.storage_credential, settings.storage_client_id) == (MANAGED_IDENTITY, "")


def test_identity_settings_off_azure_fall_back_to_the_developer_credential():
    settings = Settings.from_env({"AzureWebJobsStorage__accountName": "acct"})

    assert settings.storage_credential == DEVELOPER_IDENTITY


def test_service_uris_win_over_the_account_name():
    settings = Settings.from_env(
        {
            "AzureWebJobsStorage__accountName": "acct",
            "AzureWebJobsStorage__tableServiceUri": "https://acct-private.table.core.windows.net",
            "AzureWebJobsStorage__queueServiceUri": "https://acct-private.queue.core.windows.net",
        }
    )

    assert settings.storage_table_uri == "https://acct-private.table.core.windows.net"
    assert settings.storage_queue_uri == "https://acct-private.queue.core.windows.net"
    assert settings.storage_blob_uri == BLOB_URI


def test_a_connection_string_keeps_working_and_uses_no_identity():
    settings = Settings.from_env({"AzureWebJobsStorage": "UseDevelopmentStorage=true"})

    assert settings.storage_connection_string == "UseDevelopmentStorage=true"
    assert (
        settings.storage_table_uri,
        settings.storage_blob_uri,
        settings.storage_queue_uri,
        settings.storage_credential,
    ) == ("", "", "", "")


@pytest.mark.parametrize("name", IDENTITY_SETTINGS)
def test_a_connection_string_beside_identity_settings_is_refused_naming_both(name):
    values = {
        "AzureWebJobsStorage__accountName": "acct",
        "AzureWebJobsStorage__blobServiceUri": BLOB_URI,
        "AzureWebJobsStorage__tableServiceUri": TABLE_URI,
        "AzureWebJobsStorage__queueServiceUri": QUEUE_URI,
        "AzureWebJobsStorage__credential": "managedidentity",
        "AzureWebJobsStorage__clientId": CLIENT_ID,
    }
    key = "AccountKey=c2VjcmV0LWFjY291bnQta2V5"
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(
            {"AzureWebJobsStorage": f"DefaultEndpointsProtocol=https;{key}", name: values[name]}
        )

    assert "AzureWebJobsStorage (a connection string)" in str(caught.value)
    assert name in str(caught.value)
    assert key not in str(caught.value)


def test_a_blank_connection_string_beside_identity_settings_is_no_conflict():
    settings = Settings.from_env({"AzureWebJobsStorage": "  ", "AzureWebJobsStorage__accountName": "acct"})

    assert settings.storage_connection_string == ""
    assert settings.storage_table_uri == TABLE_URI


@pytest.mark.parametrize(
    ("env", "name"),
    [
        pytest.param(
            {
                "AzureWebJobsStorage__accountName": "acct",
                "AzureWebJobsStorage__blobServiceUri": "http://acct.blob",
            },
            "AzureWebJobsStorage__blobServiceUri",
            id="plain-http",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__accountName": "acct",
                "AzureWebJobsStorage__tableServiceUri": "acct.table.core",
            },
            "AzureWebJobsStorage__tableServiceUri",
            id="no-scheme",
        ),
        pytest.param(
            {"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__blobServiceUri": "https://"},
            "AzureWebJobsStorage__blobServiceUri",
            id="no-host",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__accountName": "acct",
                "AzureWebJobsStorage__blobServiceUri": "https://[::1",
            },
            "AzureWebJobsStorage__blobServiceUri",
            id="unparseable",
        ),
        pytest.param(
            {"AzureWebJobsStorage__accountName": "Acct_1"}, "AzureWebJobsStorage__accountName", id="name"
        ),
        pytest.param(
            {"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__credential": "clientsecret"},
            "AzureWebJobsStorage__credential",
            id="credential",
        ),
        pytest.param(
            {"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__clientId": "my-identity"},
            "AzureWebJobsStorage__clientId",
            id="client-id",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__blobServiceUri": BLOB_URI,
                "AzureWebJobsStorage__credential": "managedidentity",
            },
            "AzureWebJobsStorage__tableServiceUri",
            id="no-table-service",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__blobServiceUri": BLOB_URI,
                "AzureWebJobsStorage__tableServiceUri": TABLE_URI,
                "AzureWebJobsStorage__credential": "managedidentity",
            },
            "AzureWebJobsStorage__queueServiceUri",
            id="no-queue-service",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__accountName": "acct",
                "AzureWebJobsStorage__queueServiceUri": "http://acct.queue",
            },
            "AzureWebJobsStorage__queueServiceUri",
            id="plain-http-queue",
        ),
        pytest.param(
            {
                "AzureWebJobsStorage__credential": "managedidentity",
                "AzureWebJobsStorage__clientId": CLIENT_ID,
            },
            "AzureWebJobsStorage__tableServiceUri",
            id="identity-without-account",
        ),
    ],
)
def test_unusable_identity_settings_are_refused_naming_the_setting(env, name):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)

    assert name in str(caught.value)


def test_a_service_uri_carrying_a_sas_is_refused_without_echoing_it():
    sas = "sv=2024-01-01&sig=c2VjcmV0LXNpZ25hdHVyZQ"
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(
            {
                "AzureWebJobsStorage__accountName": "acct",
                "AzureWebJobsStorage__blobServiceUri": f"{BLOB_URI}?{sas}",
            }
        )

    assert "AzureWebJobsStorage__blobServiceUri must be an https:// URL with no query string" in str(
        caught.value
    )
    assert "sig=" not in str(caught.value)


# --- unresolved Key Vault references ----------------------------------------------------------------

REFERENCES = [
    "@Microsoft.KeyVault(SecretUri=https://shop-kv.vault.azure.net/secrets/hash/0123456789abcdef)",
    "@Microsoft.KeyVault(VaultName=shop-kv;SecretName=hash)",
    "  @microsoft.keyvault(VaultName=shop-kv;SecretName=hash)  ",
    "@Microsoft.AppConfiguration(Endpoint=https://shop.azconfig.io; Key=hash)",
]


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_an_unresolved_reference_in_a_secret_counts_as_missing_and_is_never_used(name, reference):
    settings = Settings.from_env({**SECRETS, name: reference})

    assert settings.missing_secrets == (name,)
    assert settings.unresolved_settings == (name,)
    assert settings.not_configured == (name,)
    assert "Microsoft" not in settings.brevo_api_key + settings.signing_key_pem + settings.hash_secret
    assert "shop-kv" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "field", "default"),
    [
        ("STOREFRONT_SENDER_EMAIL", "sender_email", "store@example.com"),
        ("STOREFRONT_RATE_LIMIT_PER_HOUR", "rate_limit_per_hour", 5),
        ("STOREFRONT_DAILY_COST_CEILING_USD", "daily_cost_ceiling_usd", Decimal("5.00")),
        ("STOREFRONT_RETIRED_PUBLIC_KEYS", "retired_public_keys", ()),
        ("AzureWebJobsStorage", "storage_connection_string", "UseDevelopmentStorage=true"),
    ],
)
def test_an_unresolved_reference_in_any_other_setting_is_named_not_used(name, field, default):
    settings = Settings.from_env({**SECRETS, name: REFERENCES[1]})

    assert getattr(settings, field) == default
    assert settings.unresolved_settings == (name,)
    assert settings.missing_secrets == ()
    assert settings.not_configured == (name,)


def test_an_unresolved_storage_connection_string_gives_way_to_identity_settings():
    settings = Settings.from_env(
        {"AzureWebJobsStorage": REFERENCES[0], "AzureWebJobsStorage__accountName": "acct"}
    )

    assert settings.storage_table_uri == TABLE_URI
    assert settings.unresolved_settings == ("AzureWebJobsStorage",)


@pytest.mark.parametrize(
    "value",
    [
        "@Microsoft.KeyVault(VaultName=kv;SecretName=s",
        "prefix @Microsoft.KeyVault(VaultName=kv;SecretName=s)",
        "Microsoft.KeyVault(VaultName=kv;SecretName=s)",
        "a-real-secret-value",
    ],
)
def test_values_that_are_not_whole_references_are_kept(value):
    assert not is_unresolved_reference(value)
    assert Settings.from_env({"STOREFRONT_HASH_SECRET": value}).hash_secret == value


# A purchase waits out at most this many storage timeouts in series when storage never answers
# (measured below); with two Brevo timeouts it must answer within what Azure's front end waits.
STORAGE_TIMEOUTS_IN_SERIES = 12
FRONT_END_SECONDS = 230


def test_the_highest_timeouts_still_answer_before_azures_front_end_gives_up():
    storage, brevo = (Decimal(BOUNDS[f"STOREFRONT_{n}_TIMEOUT_SECONDS"][1]) for n in ("STORAGE", "BREVO"))

    assert STORAGE_TIMEOUTS_IN_SERIES * storage + 2 * brevo < FRONT_END_SECONDS - 30


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_purchase_against_storage_that_never_answers_waits_out_a_dozen_timeouts_at_most(
    host_factory, azurite, keyed
):
    import time

    from devstack.faultproxy import FaultProxy, endpoint_port, proxied
    from tests.support import Buyer

    timeout = 0.5
    with (
        FaultProxy(endpoint_port(azurite, "Blob")) as blob,
        FaultProxy(endpoint_port(azurite, "Table")) as table,
        FaultProxy(endpoint_port(azurite, "Queue")) as queue,
    ):
        storage = proxied(azurite, blob=blob, table=table, queue=queue)
        host = host_factory(AzureWebJobsStorage=storage, STOREFRONT_STORAGE_TIMEOUT_SECONDS=str(timeout))
        buyer = Buyer(host.url)
        for proxy in (blob, table, queue):
            proxy.set("stall")
        started = time.monotonic()
        answer = buyer.purchase({"email": buyer.email, **({"idempotency_key": buyer.key} if keyed else {})})
        waited = time.monotonic() - started

    assert answer.status_code == 503
    assert waited < STORAGE_TIMEOUTS_IN_SERIES * timeout + 2, waited


@pytest.mark.parametrize(
    "written",
    [
        FRONT_DOOR_ID.upper(),
        "{" + FRONT_DOOR_ID + "}",
        "urn:uuid:" + FRONT_DOOR_ID,
        FRONT_DOOR_ID.replace("-", ""),
        f"  {FRONT_DOOR_ID}  ",
    ],
    ids=["upper", "braces", "urn", "bare-hex", "spaces"],
)
def test_a_front_door_id_in_any_guid_form_is_kept_as_azure_sends_it_and_matches(written):
    """Every Front Door client would share one rate bucket if the id never matched X-Azure-FDID."""
    from shared.protocols.client_address import client_address

    settings = Settings.from_env({"STOREFRONT_FRONT_DOOR_ID": written})
    headers = {
        "x-azure-fdid": FRONT_DOOR_ID,
        "x-azure-socketip": "198.51.100.7",
        "x-forwarded-for": "10.0.0.1",
    }

    assert settings.front_door_id == FRONT_DOOR_ID
    assert client_address(headers.get, front_door_id=settings.front_door_id) == "198.51.100.7"


def test_a_managed_identity_client_id_is_kept_in_its_canonical_form():
    env = {
        "AzureWebJobsStorage__accountName": "acct",
        "AzureWebJobsStorage__clientId": "{" + CLIENT_ID.upper() + "}",
    }

    assert Settings.from_env(env).storage_client_id == CLIENT_ID.lower()


# --- every configured key is checked at start-up -----------------------------------------------------


def _unusable_signing_keys() -> list:
    p384 = ec.generate_private_key(ec.SECP384R1())
    return [
        pytest.param("not a pem", "is not a readable PEM private key", id="garbage"),
        pytest.param(SIGNING_KEY[:-40], "is not a readable PEM private key", id="truncated"),
        pytest.param(SIGNING_KEY.replace("PRIVATE", "PUBLIC"), "is not a readable PEM", id="relabelled"),
        pytest.param(private_pem(p384), "must be an EC P-256 private key", id="p384"),
        pytest.param(
            private_pem(rsa.generate_private_key(65537, 2048)), "must be an EC P-256 private key", id="rsa"
        ),
        pytest.param(SIGNING_KEY + private_pem(new_ec_key()), "must be one PEM private key", id="two-keys"),
        pytest.param(json.dumps(SIGNING_KEY), "must be one PEM private key", id="json-quoted"),
    ]


@pytest.mark.parametrize(("value", "problem"), _unusable_signing_keys())
def test_a_signing_key_that_is_no_single_p256_private_key_stops_start_up(value, problem):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**SECRETS, "STOREFRONT_SIGNING_KEY": value})

    assert str(caught.value).startswith(f"STOREFRONT_SIGNING_KEY {problem}")
    assert SIGNING_KEY.splitlines()[1] not in str(caught.value)


def test_the_current_key_listed_as_retired_stops_start_up():
    current = public_jwk(load_private_key(SIGNING_KEY))

    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**SECRETS, "STOREFRONT_RETIRED_PUBLIC_KEYS": json.dumps([RETIRED_JWK, current])})

    assert str(caught.value).startswith(
        "STOREFRONT_RETIRED_PUBLIC_KEYS lists the current STOREFRONT_SIGNING_KEY"
    )


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(RETIRED_JWK, id="the-same-entry"),
        pytest.param({m: RETIRED_JWK[m] for m in ("kty", "crv", "x", "y")}, id="without-kid-alg-use"),
    ],
)
def test_a_retired_key_listed_twice_stops_start_up(second):
    with pytest.raises(SettingsError, match="STOREFRONT_RETIRED_PUBLIC_KEYS lists one key twice"):
        _retired(json.dumps([RETIRED_JWK, _jwk(), second]))


def test_a_retired_key_with_a_member_named_twice_stops_start_up():
    other = _jwk()
    text = json.dumps([RETIRED_JWK])[:-2] + f', "x": "{other["x"]}"}}]'  # which x? readers differ

    with pytest.raises(
        SettingsError, match="STOREFRONT_RETIRED_PUBLIC_KEYS must be JSON, each member named once"
    ):
        _retired(text)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param({"kid": "2025-key"}, "RFC 7638 thumbprint", id="foreign-kid"),
        pytest.param({"alg": "RS256"}, "ES256", id="alg"),
        pytest.param({"x": RETIRED_JWK["x"] + "="}, "unpadded base64url", id="padded"),
    ],
)
def test_a_retired_key_that_would_be_published_otherwise_stops_start_up_naming_it(change, problem):
    with pytest.raises(SettingsError) as caught:
        _retired(json.dumps([_jwk(), {**RETIRED_JWK, **change}]))

    assert str(caught.value).startswith(
        "STOREFRONT_RETIRED_PUBLIC_KEYS must list public EC P-256 JWKs: key 2 "
    )
    assert problem in str(caught.value)


def test_the_example_key_as_a_retired_key_stops_start_up_on_azure_only():
    example = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]
    example_jwk = public_jwk(load_private_key(example["STOREFRONT_SIGNING_KEY"].replace("\\n", "\n")))
    env = {**SECRETS, "STOREFRONT_RETIRED_PUBLIC_KEYS": json.dumps([example_jwk])}

    assert Settings.from_env(env).retired_public_keys == (example_jwk,)
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**env, "WEBSITE_INSTANCE_ID": "x7"})
    assert "STOREFRONT_RETIRED_PUBLIC_KEYS lists the public development key" in str(caught.value)
