"""Every setting of a fixed form (a number, a boolean, a GUID, a URL, a host list, a name, an enum,
a key list) reads to one canonical value from each way of writing it that the docs allow, and is
refused at start-up, naming the setting, in any other: none is accepted and then never matches."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import idna
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from shared.config.keys import public_jwk, thumbprint
from shared.config.settings import BOUNDS, IDENTITY_SETTINGS, MANAGED_IDENTITY, Settings
from shared.config.settings_reader import SettingReader, SettingsError
from shared.protocols.http import origin_allowed

BOM, ZWSP = "\ufeff", "\u200b"
GUID = "3f2a9c1e-7b4d-4e8a-9c6f-1d2e3f4a5b6c"
# One key for every worker: the test ids show it, and xdist wants the same ids in each.
RETIRED = public_jwk(ec.derive_private_key(int(hashlib.sha256(b"retired").hexdigest(), 16), ec.SECP256R1()))
BARE = {m: RETIRED[m] for m in ("kty", "crv", "x", "y")}
ACCOUNT = {"AzureWebJobsStorage__accountName": "acct"}
# Hosts Python's IDNA 2003 codec encodes one way and browsers (UTS 46) another, or only one reads.
APART_HOSTS = [
    "\u2c7cob.example",  # modifier small j: browsers send job.example
    "\U0001f130gent.example",  # squared A: browsers send agent.example
    "\u13a0.example",  # Cherokee: IDNA 2003 and UTS 46 case-map it apart
    "\uab70.example",
    "\u13f8.example",
    "stra\u00dfe.example",  # sharp s: IDNA 2003 writes ss, UTS 46 keeps it
    "\u2603.example",  # not an IDNA 2008 name
]
ENCODED_APART = [f"https://{host}" for host in APART_HOSTS]


@dataclass(frozen=True)
class Form:
    name: str
    read: Callable[[Settings], object]  # the field (or what is published of it) the value becomes
    canonical: object
    good: list[str]
    bad: list[str]
    beside: dict[str, str] = field(default_factory=dict)  # what the setting needs set beside it


def _field(name: str) -> Callable[[Settings], object]:
    return lambda settings: getattr(settings, name)


def _wrapped(text: str) -> list[str]:
    """`text` as a copy from JSON, a shell or a file can wrap it: each must be refused."""
    return [f'"{text}"', f"'{text}'", f"`{text}`", BOM + text, text + ZWSP, f"{text}\x00"]


def _whole(name: str, field_name: str, value: int, beside: dict[str, str] | None = None) -> Form:
    text = str(value)
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in text)
    return Form(
        name,
        _field(field_name),
        value,
        [text, f"  {text} ", f"+{text}"],
        [f"0{text}", f"{text}.0", f"{text}e0", f"{text[0]}_{text[1:]}", f"0x{value:x}", fullwidth, "NaN"]
        + [f"{text}s", f"-{text}", *_wrapped(text)],
        beside or {},
    )


def _number(name: str, field_name: str, value: str, as_read: object) -> Form:
    return Form(
        name,
        _field(field_name),
        as_read,
        [value, f" {value} ", f"+{value}", f"{value}0", f"{Decimal(value).scaleb(1)}e-1"],
        [f"0{value}", value.replace(".", ","), f"{value}.0", "inf", "-Infinity", "nan", f"{value}s"]
        + [f"-{value}", "\u0661", *_wrapped(value)],
    )


def _url(name: str, canonical: str, good: list[str], bad: list[str], beside=None) -> Form:
    common = ["//" + canonical.split("://")[1], "ftp://" + canonical.split("://")[1], *_wrapped(canonical)]
    return Form(name, _field(_URL_FIELDS[name]), canonical, [canonical, *good], [*bad, *common], beside or {})


_URL_FIELDS = {
    "STOREFRONT_PUBLIC_BASE_URL": "public_base_url",
    "BREVO_BASE_URL": "brevo_base_url",
    "STOREFRONT_TERMS_URL": "terms_url",
    "STOREFRONT_PRIVACY_URL": "privacy_url",
    "AzureWebJobsStorage__tableServiceUri": "storage_table_uri",
    "AzureWebJobsStorage__blobServiceUri": "storage_blob_uri",
    "AzureWebJobsStorage__queueServiceUri": "storage_queue_uri",
}
HTTPS_ONLY = ["http://acct.{0}.core.windows.net", "https://acct.{0}.core.windows.net?sv=2024&sig=c2ln"]


def _service(kind: str) -> Form:
    canonical = f"https://acct.{kind}.core.windows.net"
    return _url(
        f"AzureWebJobsStorage__{kind}ServiceUri",
        canonical,
        [canonical.upper() + "/", canonical + ":443/", f"HTTPS://Acct.{kind.title()}.Core.Windows.Net"],
        [u.format(kind) for u in HTTPS_ONLY] + [canonical.replace("acct", "me@acct")],
        ACCOUNT,
    )


FORMS = [
    _whole("STOREFRONT_RATE_LIMIT_PER_HOUR", "rate_limit_per_hour", 12),
    _whole("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", "recipient_limit_per_day", 20),
    _whole("STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR", "agent_rate_limit_per_hour", 40),
    _whole("STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR", "agent_site_rate_limit_per_hour", 400),
    _whole("STOREFRONT_COST_COUNTER_SHARDS", "cost_counter_shards", 16),
    _whole("STOREFRONT_CONTACT_QUEUE_SHARDS", "contact_queue_shards", 16),
    _whole("BREVO_CONTACT_LIST_ID", "brevo_contact_list_id", 42),
    _whole("STOREFRONT_TRUSTED_PROXY_HOPS", "trusted_proxy_hops", 10),
    _whole("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", "download_token_ttl_seconds", 90000),
    _whole("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", "idempotency_lease_seconds", 120),
    _whole("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", "idempotency_ttl_seconds", 3600),
    _number("STOREFRONT_BREVO_TIMEOUT_SECONDS", "brevo_timeout_seconds", "2.5", 2.5),
    _number("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "storage_timeout_seconds", "1.5", 1.5),
    _number("STOREFRONT_DAILY_COST_CEILING_USD", "daily_cost_ceiling_usd", "7.25", Decimal("7.25")),
    _number("STOREFRONT_COST_PER_PURCHASE_USD", "cost_per_purchase_usd", "0.015", Decimal("0.015")),
    *(
        Form(
            "STOREFRONT_IDEMPOTENCY_FAIL_OPEN",
            _field("idempotency_fail_open"),
            value,
            good,
            bad + _wrapped(text),
        )
        for value, text, good, bad in [
            (
                True,
                "true",
                ["true", "TRUE", "True", " true ", "1"],
                ["yes", "on", "t", "2", "tru e", "\uff11"],
            ),
            (
                False,
                "false",
                ["false", "FALSE", "False", " false", "0"],
                ["no", "off", "f", "00", "-0", "nil"],
            ),
        ]
    ),
    Form(
        "STOREFRONT_FRONT_DOOR_ID",
        _field("front_door_id"),
        GUID,
        [GUID, GUID.upper(), "{" + GUID + "}", "urn:uuid:" + GUID, GUID.replace("-", ""), f" {GUID} "],
        ["my-front-door", "+" + GUID.replace("-", "")[1:], GUID.replace("3", "\uff13", 1), GUID[:-1]]
        + [GUID + "0", "{" + GUID, GUID.replace("-", "", 1), GUID.replace("-", "_"), *_wrapped(GUID)],
    ),
    Form(
        "AzureWebJobsStorage__clientId",
        _field("storage_client_id"),
        GUID,
        [GUID.upper(), "{" + GUID + "}", GUID.replace("-", "")],
        ["my-identity", "+" + GUID.replace("-", "")[1:], GUID[:-1], *_wrapped(GUID)],
        ACCOUNT,
    ),
    _url(
        "STOREFRONT_PUBLIC_BASE_URL",
        "https://shop.example.net",
        [
            "HTTPS://Shop.Example.NET",
            "https://shop.example.net/",
            "https://shop.example.net:443",
            "https://SHOP.example.net:443//",
            " https://shop.example.net ",
        ],
        [
            "shop.example.net",
            "javascript:alert(1)",
            "https://shop.example.net/?a=1",
            "https://shop.example.net/#top",
            "https://user:pw@shop.example.net",
            "https://shop example.net",
            "https://[::1",
            "https://shop.example.net:0",
            "https://shop.example.net:65536",
            "https://shop.example.net:+443",
            "https://shop.example.net./",
            "https://*.example.net",
            "https://shop_1.example.net",
            "https://shop.example.net/a/../b",
            "https://shop.example.net\\@evil.example",
            "https://stra\u00dfe.example",
            "https://shop.example.net/caf\u00e9",
        ],
    ),
    _url(
        "STOREFRONT_PUBLIC_BASE_URL",
        "https://xn--bcher-kva.example/shop",
        [
            "https://B\u00fccher.example/shop/",
            "https://B\u00dcCHER.example:443/shop",
            "https://xn--bcher-KVA.example/shop",
        ],
        [],
    ),
    _url(
        "STOREFRONT_PUBLIC_BASE_URL",
        "http://[::1]:7071",
        ["http://[0:0:0:0:0:0:0:1]:7071/", "HTTP://[::1]:7071"],
        [],
    ),
    _url(
        "STOREFRONT_PUBLIC_BASE_URL",
        "https://[::ffff:c0a8:10a]",  # as a browser writes it: IPv6, never the IPv4 it maps
        ["https://[::ffff:192.168.1.10]", "https://[0:0:0:0:0:FFFF:C0A8:010A]/"],
        ENCODED_APART,
    ),
    _url(
        "BREVO_BASE_URL",
        "http://127.0.0.1:8025/v3",
        ["http://127.0.0.1:8025/v3/", "HTTP://127.0.0.1:8025/v3"],
        [
            "http://127.1:8025/v3",
            "http://0x7f.0.0.1:8025/v3",
            "http://127.0.0.01:8025/v3",
            "127.0.0.1:8025/v3",
        ],
    ),
    _url(
        "BREVO_BASE_URL", "https://api.brevo.com/v3", ["https://API.Brevo.com:443/v3/"], ["api.brevo.com/v3"]
    ),
    _url(
        "STOREFRONT_TERMS_URL",
        "https://shop.example/terms",
        ["HTTPS://Shop.Example/terms"],
        ["shop.example/terms"],
    ),
    _url(
        "STOREFRONT_PRIVACY_URL",
        "https://shop.example/privacy",
        ["https://shop.example:443/privacy"],
        ["privacy"],
    ),
    _service("table"),
    _service("blob"),
    _service("queue"),
    *(
        Form(
            name,
            _field(name.removeprefix("STOREFRONT_").lower()),
            ("https://agent.example", "http://[::1]:8080"),
            [
                "https://agent.example,http://[::1]:8080",
                "HTTPS://Agent.Example:443/, http://[0:0::1]:8080/",
                " https://agent.example , ,https://AGENT.example, http://[::1]:8080",
            ],
            [
                "agent.example",
                "https://agent.example/path",
                "https://agent.example?x=1",
                "https://user@agent.example",
                "https://*.agent.example",
                "ftp://agent.example",
                *_wrapped("https://agent.example"),
            ],
        )
        for name in ("STOREFRONT_AGENT_ORIGINS_ALLOWED", "STOREFRONT_AGENT_ORIGINS_DENIED")
    ),
    *(
        Form(
            name,
            _field(name.removeprefix("STOREFRONT_").lower()),
            ("https://192.0.2.7:8443",),  # the IPv4 address an IPv4-mapped host reaches
            ["https://[::ffff:192.0.2.7]:8443", "https://[::ffff:c000:207]:8443/, https://192.0.2.7:8443"],
            ENCODED_APART,
        )
        for name in ("STOREFRONT_AGENT_ORIGINS_ALLOWED", "STOREFRONT_AGENT_ORIGINS_DENIED")
    ),
    Form(
        "STOREFRONT_ALLOWED_ORIGINS",
        _field("allowed_origins"),
        ("app.example.net", "xn--bcher-kva.example", "::1"),
        [
            "app.example.net,b\u00fccher.example,[::1]",
            "https://App.Example.net:8443, https://B\u00dcCHER.example, http://[0::1]:3000",
            " app.example.net/, xn--bcher-kva.example, ,[::1], APP.example.net:8443,",
        ],
        [
            "*.example.net",
            "app.example.net/path",
            "https://app.example.net/path",
            "https://app.example.net?x=1",
            "app.example.net:8443:1",
            "app .example.net",
            "app.example.net.",
            "https://",
            "user@app.example.net",
            "stra\u00dfe.example",
            *APART_HOSTS,
            *ENCODED_APART,
            *_wrapped("app.example.net"),
        ],
    ),
    Form(
        "STOREFRONT_ALLOWED_ORIGINS",
        _field("allowed_origins"),
        ("::ffff:c0a8:10a", "agent.example"),  # as urlsplit reads a browser's Origin
        [
            "[::ffff:192.168.1.10], \uff41gent.example",
            "https://[::ffff:c0a8:10a]:8443, https://agent\u3002example",
            "http://[0:0:0:0:0:ffff:c0a8:010a], AGENT.example",
        ],
        [],
    ),
    Form(
        "STOREFRONT_RETIRED_PUBLIC_KEYS",
        lambda settings: tuple(thumbprint(jwk) for jwk in settings.retired_public_keys),
        (RETIRED["kid"],),
        [
            json.dumps({"keys": [RETIRED]}),
            json.dumps([RETIRED]),
            json.dumps([BARE]),
            f" {json.dumps([BARE])} ",
        ],
        [
            json.dumps([{**BARE, "x": BARE["x"] + "="}]),
            json.dumps([{**BARE, "kid": "2025"}]),
            json.dumps([RETIRED, BARE]),
            json.dumps([BARE])[:-2] + f', "x": "{BARE["x"]}"}}]',
            *_wrapped(json.dumps([BARE])),
        ],
    ),
    Form(
        "AzureWebJobsStorage__accountName",
        _field("storage_table_uri"),
        "https://acct.table.core.windows.net",
        ["acct", " acct "],
        ["Acct", "ac", "acct_1", "acct.table", *_wrapped("acct")],
    ),
    Form(
        "AzureWebJobsStorage__credential",
        _field("storage_credential"),
        MANAGED_IDENTITY,
        ["managedidentity", "ManagedIdentity", " MANAGEDIDENTITY "],
        ["clientsecret", "managed identity", "managed-identity", *_wrapped("managedidentity")],
        ACCOUNT,
    ),
    *(
        Form(name, _field(field_name), value, [value, f" {value} "], [*bad, *_wrapped(value)])
        for name, field_name, value, bad in [
            ("STOREFRONT_IDEMPOTENCY_TABLE", "idempotency_table", "Idem2", ["idem_2", "2idem", "tables"]),
            ("STOREFRONT_GOVERNANCE_TABLE", "governance_table", "gov2", ["gov-2", "go"]),
            ("STOREFRONT_LEDGER_TABLE", "ledger_table", "ledger2", ["ledger 2", "l" * 64]),
            ("STOREFRONT_UCP_TABLE", "ucp_table", "Ucp2", ["ucp-2", "u" * 64]),
            ("STOREFRONT_RECEIPTS_CONTAINER", "receipts_container", "receipts-2", ["Receipts", "r--2"]),
            ("STOREFRONT_BUNDLES_CONTAINER", "bundles_container", "bundles-2", ["bundles_2", "-b2"]),
            ("STOREFRONT_CONTACT_QUEUE", "contact_queue", "shop-contacts", ["Shop", "c" * 57, "x-"]),
        ]
    ),
]


def _rows(kind: str) -> list:
    return [
        pytest.param(form, value, id=f"{form.name}={value!r}")
        for form in FORMS
        for value in (form.good if kind == "good" else form.bad)
    ]


@pytest.mark.parametrize(("form", "value"), _rows("good"))
def test_each_allowed_way_of_writing_a_setting_reads_to_its_canonical_value(form, value):
    settings = Settings.from_env({**form.beside, form.name: value})

    assert form.read(settings) == form.canonical


@pytest.mark.parametrize(("form", "value"), _rows("bad"))
def test_any_other_way_stops_start_up_naming_the_setting(form, value):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**form.beside, form.name: value})

    assert str(caught.value).startswith(form.name)
    assert "sig=" not in str(caught.value)  # a URI's SAS is never echoed


# Hosts an operator may write, and for an IPv6 address the host a browser's Origin carries for it
# (the URL Standard's form); a name's is what UTS 46 (non-transitional) encodes it to, as browsers
# do (they allow hyphens in the third and fourth place of an ASCII label, as here).
WRITTEN_HOSTS = {
    "app.example.net": None,
    "App.Example.NET": None,
    "b\u00fccher.example": None,
    "B\u00dcCHER.example": None,
    "xn--bcher-KVA.example": None,
    "\u043f\u0440\u0438\u043c\u0435\u0440.example": None,
    "\uff41gent.example": None,
    "agent\u3002example": None,
    "shop.example\uff0ecom": None,
    "\u01c5.example": None,
    "\u0130.example": None,
    "ab--cd.example": None,
    "127.0.0.1": None,
    **{host: None for host in APART_HOSTS},
    "[::1]": "[::1]",
    "[0:0::1]": "[::1]",
    "[::ffff:192.168.1.10]": "[::ffff:c0a8:10a]",
    "[0:0:0:0:0:FFFF:C0A8:010A]": "[::ffff:c0a8:10a]",
    "[2001:db8:0:0:1:0:0:1]": "[2001:db8::1:0:0:1]",
}


@pytest.mark.parametrize(("host", "sent"), WRITTEN_HOSTS.items(), ids=repr)
def test_each_accepted_allowed_origin_allows_the_origin_a_browser_sends_for_it(host, sent):
    for entry in (host, f"https://{host}:8443"):
        try:
            allowed = Settings.from_env({"STOREFRONT_ALLOWED_ORIGINS": entry}).allowed_origins
        except SettingsError:
            assert host in APART_HOSTS  # refused, then: never accepted and then never matched
            continue
        if sent is None:
            uts46 = host.isascii() and host.lower() or idna.encode(host, uts46=True, transitional=False)
            sent = uts46 if isinstance(uts46, str) else uts46.decode("ascii")
        assert origin_allowed(f"https://{sent}:8443", allowed), entry


def test_money_and_timeouts_are_written_out_without_an_exponent():
    settings = Settings.from_env(
        {"STOREFRONT_DAILY_COST_CEILING_USD": "5E+2", "STOREFRONT_COST_PER_PURCHASE_USD": "1e-6"}
    )

    assert (str(settings.daily_cost_ceiling_usd), str(settings.cost_per_purchase_usd)) == ("500", "0.000001")


# The storage identity settings are read by shared/config/settings.py itself, not by a reader kind.
READ_BY_THE_STORAGE_RULES = {
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "AzureWebJobsStorage__tableServiceUri",
    "AzureWebJobsStorage__blobServiceUri",
    "AzureWebJobsStorage__queueServiceUri",
}
KINDS = (
    "integer",
    "decimal",
    "money",
    "boolean",
    "url",
    "optional_url",
    "guid",
    "name",
    "jwks",
    "hosts",
    "origins",
)


def test_the_table_covers_every_setting_read_as_a_fixed_form(monkeypatch):
    read: set[str] = set()
    for kind in KINDS:
        method = getattr(SettingReader, kind)

        def recording(self, name, *args, _method=method, **kwargs):
            read.add(name)
            return _method(self, name, *args, **kwargs)

        monkeypatch.setattr(SettingReader, kind, recording)
    Settings.from_env({})
    Settings.from_env(ACCOUNT)

    assert set(BOUNDS) <= read
    assert set(IDENTITY_SETTINGS) >= READ_BY_THE_STORAGE_RULES
    assert {form.name for form in FORMS} == read | READ_BY_THE_STORAGE_RULES
