"""infra/ and azure.yaml, read as text against the code they deploy.

The Bicep compiler cannot run here, so `Bicep` below is a small reader: it finds the `param`,
`var`, `resource`, `module` and `output` declarations of a file, with their decorators and bodies
(strings and comments skipped, `${...}` interpolations followed), and the entries of an object
literal. It does not type-check, resolve an expression beyond a literal or a name passed down
from main.bicep, check resource types, API versions or property names against Azure's schemas,
or know what a deployment would do. The template is checked for that by
`az deployment sub what-if` on the user's side (docs/deploying.md); CI never deploys it. checkov,
an independent scanner with its own Bicep parser, holds it to its security checks (at the end),
less the exceptions of tests/infra/checkov-skips.yml.

The settings the code reads come from `Settings.from_env` itself, given a mapping that records
every key looked up: once empty, once holding the template's own values (so reads that depend on
other settings are seen too). A name read by scanning the mapping for keys it does not hold, or
straight from `os.environ` elsewhere, is not seen: those are the platform settings listed below.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from shared.config.keys import load_private_key
from shared.config.settings import BOUNDS, SECRET_SETTINGS, Settings
from tests.support import ROOT, new_ec_key, own_venv, private_pem

pytestmark = pytest.mark.services  # checkov runs in a virtualenv of its own

INFRA = ROOT / "infra"
MAIN = INFRA / "main.bicep"
PARAMETERS = INFRA / "main.parameters.json"
HOOK = INFRA / "hooks" / "preprovision.py"
DOC = ROOT / "docs" / "deploying.md"

# Settings the template sets for the Functions platform rather than for shared/config/settings.py.
PLATFORM_SETTINGS = {
    "AzureWebJobsStorage__credential": "the host connects to its storage with a managed identity",
    "AzureWebJobsStorage__clientId": "the host's identity is the user-assigned one",
    "AzureWebJobsStorage__blobServiceUri": "the host keeps keys and timer locks in blobs",
    "AzureWebJobsStorage__queueServiceUri": "the host's own queues and the app's contact queues",
    "AzureWebJobsStorage__tableServiceUri": "the host's own tables",
    "APPLICATIONINSIGHTS_CONNECTION_STRING": "host telemetry; the telemetry seam reads it from os.environ",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "telemetry sent with the identity's token (local auth off)",
}
# Settings the code reads that the template must leave alone.
LEFT_TO_THE_PLATFORM = {
    "WEBSITE_HOSTNAME": "the platform sets it to the app's host name",
    "IDENTITY_ENDPOINT": "the platform sets it where a managed identity is offered",
    "WEBSITE_INSTANCE_ID": "the platform sets it; it tells the app it runs on Azure",
    "WEBSITE_SITE_NAME": "the platform sets it to the app's name; it tells the app it runs on Azure",
    "WEBSITE_SKU": "the platform sets it; it tells the app it runs on Azure",
    "CONTAINER_APP_NAME": "Azure Container Apps sets it; it tells the app it runs on Azure",
}
NEVER_SET = {
    "AzureWebJobsStorage": "a connection string carries the account key, and shared keys are disabled",
}
# The system-assigned form of the identity-based connection; this template uses the user-assigned one.
OTHER_IDENTITY_FORMS = ("AzureWebJobsStorage__accountName",)
# Settings Flex Consumption moved into functionAppConfig or does not support.
FLEX_DEPRECATED = (
    "FUNCTIONS_WORKER_RUNTIME",
    "FUNCTIONS_EXTENSION_VERSION",
    "WEBSITE_RUN_FROM_PACKAGE",
    "WEBSITE_CONTENTSHARE",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
    "SCM_DO_BUILD_DURING_DEPLOYMENT",
    "ENABLE_ORYX_BUILD",
)
# siteConfig properties a Flex Consumption site refuses or does not act on (Microsoft's Flex
# Consumption deprecations, and its Functions monitoring guide for the health check).
FLEX_SITE_CONFIG_UNUSED = {
    "ftpsState": "Flex Consumption has no FTP endpoint; Azure refuses the property",
    "healthCheckPath": "Health check is not an option on Flex Consumption",
    "alwaysOn": "not valid on Flex Consumption",
    "linuxFxVersion": "replaced by functionAppConfig.runtime",
    "netFrameworkVersion": "replaced by functionAppConfig.runtime",
    "use32BitWorkerProcess": "32-bit is not supported",
    "functionAppScaleLimit": "replaced by functionAppConfig.scaleAndConcurrency.maximumInstanceCount",
    "preWarmedInstanceCount": "replaced by functionAppConfig.scaleAndConcurrency.alwaysReady",
}
# Azure's built-in role definitions: (role, the resource type it must be assigned on).
ACCOUNT, VAULT, INSIGHTS = (
    "Microsoft.Storage/storageAccounts",
    "Microsoft.KeyVault/vaults",
    "Microsoft.Insights/components",
)
IDENTITY_ROLES = {
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": ("Storage Blob Data Owner", ACCOUNT),
    "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3": ("Storage Table Data Contributor", ACCOUNT),
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": ("Storage Queue Data Contributor", ACCOUNT),
    "4633458b-17de-408a-b874-0445c86b69e6": ("Key Vault Secrets User", VAULT),
    "3913510d-42f4-4e42-8a64-420c390055eb": ("Monitoring Metrics Publisher", INSIGHTS),
}
# The one role the person running azd gets: uploading bundle files, on the bundles container only.
UPLOADER_ROLE = (
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Microsoft.Storage/storageAccounts/blobServices/containers",
)
SECRET_PARAM = re.compile(r"(secret|password|apikey|signingkey)$", re.IGNORECASE)  # a value, not its URI
QUEUES = "Microsoft.Storage/storageAccounts/queueServices/queues"
# Azure's rule for a queue name: 3 to 63 lowercase letters, digits and single hyphens, neither end a hyphen.
QUEUE_NAME = re.compile(r"(?=.{3,63}$)[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]")


# --- a small Bicep reader ---------------------------------------------------------------------


def _string_end(text: str, i: int) -> int:
    """Index just past the string starting at text[i]."""
    if text.startswith("'''", i):
        return text.index("'''", i + 3) + 3
    i += 1
    while text[i] != "'":
        if text[i] == "\\":
            i += 2
        elif text.startswith("${", i):
            i = _close(text, i + 1)
        else:
            i += 1
    return i + 1


def _close(text: str, i: int) -> int:
    """Index just past the bracket closing the one at text[i]."""
    depth = 0
    while True:
        if text[i] == "'":
            i = _string_end(text, i)
            continue
        if text[i] in "{[(":
            depth += 1
        elif text[i] in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def _without_comments(text: str) -> str:
    """The text with comments blanked (line breaks kept), strings untouched."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "'":
            end = _string_end(text, i)
        elif text.startswith("//", i):
            end = text.find("\n", i) if "\n" in text[i:] else len(text)
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.index("*/", i) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        else:
            end = i + 1
        out.append(text[i:end])
        i = end
    return "".join(out)


def _value_end(text: str, i: int) -> int:
    """End of the expression starting at text[i]: the end of its line, brackets and strings spanning lines."""
    while i < len(text) and text[i] not in "\n,}":
        if text[i] == "'":
            i = _string_end(text, i)
        elif text[i] in "{[(":
            i = _close(text, i)
        else:
            i += 1
    return i


def entries(body: str) -> dict[str, str]:
    """The entries of an object literal `{ key: value ... }`, each value as source text."""
    found, i = {}, body.index("{") + 1
    key = re.compile(r"\s*(?:'((?:[^'\\]|\\.)*)'|([\w$]+))\s*:\s*")
    while True:
        while body[i] in " \t\r\n,":
            i += 1
        if body[i] == "}":
            return found
        match = key.match(body, i)
        assert match, f"cannot read an object entry at: {body[i : i + 40]!r}"
        end = _value_end(body, match.end())
        found[match[1] if match[1] is not None else match[2]] = body[match.end() : end].strip()
        i = end


def literal(value: str) -> str | None:
    """The value of a string, number or boolean literal; None for any other expression."""
    if re.fullmatch(r"-?\d+|true|false", value):
        return value
    match = re.fullmatch(r"'((?:[^'\\$]|\\.|\$(?!\{))*)'", value)
    return re.sub(r"\\(.)", r"\1", match[1]) if match else None


@dataclass(frozen=True)
class Decl:
    kind: str  # param, var, resource, module or output
    name: str
    header: str  # the rest of the declaration's first line, up to `=`
    decorators: str
    value: str  # after `=`: a default, an expression or a body

    @property
    def target(self) -> str:
        """A resource's type or a module's path."""
        match = re.search(r"'([^'@]+)", self.header)
        return match[1] if match else ""

    @property
    def body(self) -> dict[str, str]:
        return entries(self.value[self.value.index("{") :])


class Bicep:
    def __init__(self, path: Path):
        self.path = path
        self.text = _without_comments(path.read_text())
        self.decls = list(self._declarations())

    def _declarations(self) -> Iterator[Decl]:
        start = re.compile(r"^(param|var|resource|module|output)\s+(\w+)([^=\n]*)(=?)", re.MULTILINE)
        for match in start.finditer(self.text):
            kind, name, header, has_value = match.groups()
            end = _value_end(self.text, match.end()) if has_value else match.end()
            yield Decl(
                kind, name, header.strip(), self._decorators(match.start()), self.text[match.end() : end]
            )

    def _decorators(self, at: int) -> str:
        """The `@decorator(...)` lines right above a declaration."""
        lines = self.text[:at].rstrip("\n").split("\n")
        taken: list[str] = []
        while lines and lines[-1].strip() and lines[-1].startswith(("@", " ", ")", "}", "]")):
            taken.insert(0, lines.pop())
        while taken and not taken[0].startswith("@"):
            taken.pop(0)
        return "\n".join(taken)

    def get(self, kind: str, name: str) -> Decl:
        found = [d for d in self.decls if d.kind == kind and d.name == name]
        assert len(found) == 1, f"{self.path.name}: expected one {kind} {name}, found {len(found)}"
        return found[0]

    def all(self, kind: str, target: str | None = None) -> list[Decl]:
        return [d for d in self.decls if d.kind == kind and target in (None, d.target)]

    def required_params(self) -> set[str]:
        return {d.name for d in self.all("param") if not d.value.strip()}

    def module_file(self, module: Decl) -> Path:
        return (self.path.parent / module.target).resolve()


@cache
def bicep(path: Path) -> Bicep:
    return Bicep(path)


def bicep_files() -> list[Path]:
    return sorted(INFRA.rglob("*.bicep"))


def prop(body: dict[str, str], path: str) -> str:
    """A nested entry, `a.b.c`, as source text."""
    first, _, rest = path.partition(".")
    assert first in body, f"no {first!r} in {sorted(body)}"
    return prop(entries(body[first]), rest) if rest else body[first]


def site_file() -> Bicep:
    """The file declaring the app settings (a `Microsoft.Web/sites/config` named appsettings)."""
    found = [
        bicep(p)
        for p in bicep_files()
        for d in bicep(p).all("resource", "Microsoft.Web/sites/config")
        if literal(d.body["name"]) == "appsettings"
    ]
    assert len(found) == 1, "expected one appsettings resource in infra/"
    return found[0]


def app_settings() -> dict[str, str]:
    (config,) = site_file().all("resource", "Microsoft.Web/sites/config")
    return entries(config.body["properties"])


def passed_to(file: Bicep, param: str) -> list[tuple[Bicep, str]]:
    """What each module call of `file` passes to its parameter `param`: (caller, expression)."""
    return [
        (bicep(p), entries(m.body["params"])[param])
        for p in bicep_files()
        for m in bicep(p).all("module")
        if bicep(p).module_file(m) == file.path.resolve() and param in entries(m.body["params"])
    ]


def resolve(file: Bicep, value: str) -> str | None:
    """A literal, or a name that stands for one: a var, a param that every caller passes a literal,
    or a param nobody calls with (main.bicep's) and its literal default (`string(name)` stands for
    the same)."""
    converted = re.fullmatch(r"string\((\w+)\)", value)
    if converted:
        return resolve(file, converted[1])
    if literal(value) is not None or not re.fullmatch(r"\w+", value):
        return literal(value)
    kinds = {d.name: d for d in file.decls if d.kind in ("param", "var")}
    if value not in kinds:
        return None
    if kinds[value].kind == "var":
        return resolve(file, kinds[value].value.strip())
    callers = passed_to(file, value)
    if not callers:
        default = kinds[value].value.strip()
        return literal(default) if default else None
    resolved = {resolve(caller, given) for caller, given in callers}
    return resolved.pop() if len(resolved) == 1 else None


# --- what the code reads ----------------------------------------------------------------------


class Recorder(Mapping[str, str]):
    """A mapping that remembers every key looked up."""

    def __init__(self, values: Mapping[str, str] | None = None):
        self.values, self.read = dict(values or {}), set()

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return self.values[key]

    def get(self, key: str, default=None):
        self.read.add(key)
        return self.values.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def production_env() -> dict[str, str]:
    """The app settings as the app would see them on Azure: literals as written, each expression
    replaced by a value of the kind it yields (a Key Vault reference by a resolved secret)."""
    samples = {
        "STOREFRONT_PUBLIC_BASE_URL": "https://func-sample.azurewebsites.net",
        "STOREFRONT_SENDER_EMAIL": "store@sample.example",
        "STOREFRONT_RETIRED_PUBLIC_KEYS": "",
        "BREVO_CONTACT_LIST_ID": "2",
        "STOREFRONT_SIGNING_KEY": private_pem(new_ec_key()),  # what its Key Vault reference resolves to
    }
    file, env = site_file(), {}
    for name, value in app_settings().items():
        resolved = resolve(file, value)
        if resolved is not None:
            env[name] = resolved
        elif name in samples:
            env[name] = samples[name]
        elif name.endswith("clientId"):
            env[name] = "00000000-0000-4000-8000-000000000000"
        elif name.endswith("ServiceUri"):
            env[name] = f"https://stsample.{name.split('__')[1].removesuffix('ServiceUri')}.core.windows.net/"
        else:
            env[name] = "resolved-by-key-vault" if "@Microsoft.KeyVault(" in value else "sample"
    return env


@cache
def code_reads() -> frozenset[str]:
    read: set[str] = set()
    for values in ({}, production_env()):
        recorder = Recorder(values)
        Settings.from_env(recorder)
        read |= recorder.read
    return frozenset(read)


# --- the settings -----------------------------------------------------------------------------


def test_template_sets_every_setting_the_code_reads():
    optional = {*LEFT_TO_THE_PLATFORM, *NEVER_SET, *OTHER_IDENTITY_FORMS}
    missing = code_reads() - set(app_settings()) - optional
    assert not missing, (
        f"read by shared/config/settings.py, not set in {site_file().path.name}: {sorted(missing)}"
    )


def test_template_sets_no_setting_the_code_does_not_know():
    unknown = set(app_settings()) - code_reads() - set(PLATFORM_SETTINGS)
    assert not unknown, f"set by the template, read by nobody: {sorted(unknown)}"


def test_template_leaves_platform_settings_alone_and_sets_no_connection_string():
    settings = set(app_settings())
    assert not settings & {*LEFT_TO_THE_PLATFORM, *NEVER_SET, *FLEX_DEPRECATED}


def test_no_account_key_or_connection_string_anywhere_in_the_template():
    files = sorted(p for p in INFRA.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in [ROOT / "azure.yaml", *files]:
        text = path.read_text()
        for needle in (
            "AccountKey",
            "listKeys",
            "listAccountSas",
            "listServiceSas",
            "DefaultEndpointsProtocol",
        ):
            assert needle.lower() not in text.lower(), f"{needle} in {path.relative_to(ROOT)}"


def test_every_literal_setting_is_the_codes_default():
    default, file = Settings.from_env({}), site_file()
    for name, value in app_settings().items():
        written = resolve(file, value)
        if written is not None and name in code_reads() and name not in PLATFORM_SETTINGS:
            assert Settings.from_env({name: written}) == default, (
                f"{name}={written!r} is not the code's default: change the default in "
                "shared/config/settings.py, or make it a parameter with a reason"
            )


def test_template_settings_pass_the_apps_startup_validation():
    settings = Settings.from_env(production_env())

    assert settings.missing_secrets == ()


def test_every_container_the_app_and_the_deployment_use_is_created():
    main, site = bicep(MAIN), site_file()
    (call,) = [m for m in main.all("module") if "containerNames" in entries(m.body["params"])]
    created = {
        resolve(main, item) for item in entries(call.body["params"])["containerNames"].strip("[]").split()
    }
    settings = Settings.from_env(production_env())
    (app,) = site.all("resource", "Microsoft.Web/sites")
    package = re.search(
        r"\$\{(\w+)\}'$", prop(app.body, "properties.functionAppConfig.deployment.storage.value")
    )
    assert {settings.bundles_container, settings.receipts_container, resolve(site, package[1])} <= created


def interpolated(file: Bicep, value: str, bound: Mapping[str, str]) -> str | None:
    """A string literal whose `${name}` parts are loop variables (`bound`) or names `resolve` reads."""
    parts = {name: bound.get(name, resolve(file, name)) for name in re.findall(r"\$\{(\w+)\}", value)}
    if None in parts.values():
        return None
    return literal(re.sub(r"\$\{(\w+)\}", lambda m: parts[m[1]], value))


def created_queues() -> dict[str, tuple[Bicep, Decl]]:
    """Each queue the template creates, by name, with its file (`for x in range(start, count)` unrolled)."""
    created: dict[str, tuple[Bicep, Decl]] = {}
    for path in bicep_files():
        file = bicep(path)
        for queue in file.all("resource", QUEUES):
            loop = re.match(r"\s*\[\s*for (\w+) in range\((\w+), (\w+)\)\s*:", queue.value)
            start, count = (int(resolve(file, loop[2])), int(resolve(file, loop[3]))) if loop else (0, 1)
            for i in range(start, start + count):
                name = interpolated(file, queue.body["name"], {loop[1]: str(i)} if loop else {})
                assert name, f"{queue.name}: cannot read the name {queue.body['name']}"
                created[name] = (file, queue)
    return created


def test_the_contact_queues_are_created_with_the_names_the_app_settings_give():
    settings, site = app_settings(), site_file()
    prefix = resolve(site, settings["STOREFRONT_CONTACT_QUEUE"])
    shards = int(resolve(site, settings["STOREFRONT_CONTACT_QUEUE_SHARDS"]))

    queues = created_queues()

    assert set(queues) == {f"{prefix}-{n}" for n in range(shards)} | {f"{prefix}-poison"}
    assert all(QUEUE_NAME.fullmatch(name) for name in queues), sorted(queues)
    for file, queue in queues.values():  # each in the queue service of the account the template creates
        service = file.get("resource", queue.body["parent"])
        account = file.get("resource", service.body["parent"])
        assert service.target == "Microsoft.Storage/storageAccounts/queueServices"
        assert literal(service.body["name"]) == "default"
        assert account.target == ACCOUNT and "existing" not in account.header


def test_the_queue_parameters_hold_the_apps_bounds():
    (storage,) = {file for file, _ in created_queues().values()}
    low, high = BOUNDS["STOREFRONT_CONTACT_QUEUE_SHARDS"]
    shards = storage.get("param", "contactQueueShards").decorators
    prefix = storage.get("param", "contactQueuePrefix").decorators

    assert f"@minValue({low})" in shards and f"@maxValue({high})" in shards
    assert "@maxLength(56)" in prefix  # `<prefix>-poison`, the longest name, within Azure's 63


def test_the_apps_identity_may_use_the_contact_queues():
    """The app's queue client signs in as the identity AzureWebJobsStorage__clientId names, as its
    table and blob clients do: Storage Queue Data Contributor must be that identity's, on the account
    that holds the queues, not a grant that only the host's own queues happen to need."""
    (role,) = [guid for guid, (name, _) in IDENTITY_ROLES.items() if name == "Storage Queue Data Contributor"]
    ((roles, who, scope),) = [(f, who, s) for f, who, guid, s in role_assignments() if guid == role]
    settings, main = app_settings(), bicep(MAIN)
    (storage,) = {file for file, _ in created_queues().values()}
    (account_module,) = [m for m in main.all("module") if main.module_file(m) == storage.path.resolve()]

    assert who == "identityPrincipalId" and scope.target == ACCOUNT
    assert [given for _, given in passed_to(roles, who)] == ["identity.outputs.principalId"]
    assert settings["AzureWebJobsStorage__clientId"] == "identityClientId"
    assert [given for _, given in passed_to(site_file(), "identityClientId")] == ["identity.outputs.clientId"]
    assert settings["AzureWebJobsStorage__queueServiceUri"] == "storage.properties.primaryEndpoints.queue"
    for file in (roles, site_file()):  # the role's scope and the app's queue endpoint: that one account
        assert [given for _, given in passed_to(file, "storageAccountName")] == [
            f"{account_module.name}.outputs.name"
        ]


def test_the_contact_list_comes_from_the_azd_environment_and_is_empty_by_default():
    main, site = bicep(MAIN), site_file()
    parameters = json.loads(PARAMETERS.read_text())["parameters"]

    assert app_settings()["BREVO_CONTACT_LIST_ID"] == "brevoContactListId"
    assert [(caller.path, given) for caller, given in passed_to(site, "brevoContactListId")] == [
        (MAIN, "brevoContactListId")
    ]
    assert literal(main.get("param", "brevoContactListId").value.strip()) == ""
    assert parameters["brevoContactListId"]["value"] == "${BREVO_CONTACT_LIST_ID}"
    assert Settings.from_env({"BREVO_CONTACT_LIST_ID": ""}) == Settings.from_env({})


# The limits an operator sets with `azd env set <setting> <value>`: setting -> main.bicep's param.
LIMIT_PARAMS = {
    "STOREFRONT_RATE_LIMIT_PER_HOUR": "rateLimitPerHour",
    "STOREFRONT_RECIPIENT_LIMIT_PER_DAY": "recipientLimitPerDay",
    "STOREFRONT_DAILY_COST_CEILING_USD": "dailyCostCeilingUsd",
    "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": "agentRateLimitPerHour",
    "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR": "agentSiteRateLimitPerHour",
}


@pytest.mark.parametrize(("setting", "param"), sorted(LIMIT_PARAMS.items()))
def test_each_limit_is_an_azd_parameter_wired_to_its_app_setting_with_the_codes_default(setting, param):
    main, site = bicep(MAIN), site_file()
    parameters = json.loads(PARAMETERS.read_text())["parameters"]
    written = app_settings()[setting]
    default = literal(main.get("param", param).value.strip())
    substitution = re.fullmatch(r"\$\{(\w+)(?:=([^}]*))?\}", parameters[param]["value"])

    assert written in (param, f"string({param})"), f"{setting} is not the module's {param}: {written}"
    assert [(caller.path, given) for caller, given in passed_to(site, param)] == [(MAIN, param)]
    assert substitution and substitution[1] == setting, f"{param} must come from azd's {setting}"
    assert (substitution[2] or "") == default, f"{param}: the parameters file's default is not main.bicep's"
    assert default is not None and Settings.from_env({setting: default}) == Settings.from_env({}), (
        f"{param}'s default {default!r} is not shared/config/settings.py's"
    )
    assert setting in code_reads()


@pytest.mark.parametrize(("setting", "param"), sorted(LIMIT_PARAMS.items()))
def test_each_whole_number_limit_carries_the_apps_bounds_in_bicep(setting, param):
    low, high = BOUNDS[setting]
    for file in (bicep(MAIN), site_file()):
        declared = file.get("param", param)
        if re.match(r"\s*int\b", declared.header):
            assert f"@minValue({low})" in declared.decorators, f"{file.path.name}: {param}"
            assert f"@maxValue({high})" in declared.decorators, f"{file.path.name}: {param}"
        else:  # a decimal, or empty for "derived": the preprovision hook holds it to BOUNDS
            assert re.match(r"\s*string\b", declared.header), f"{file.path.name}: {param} {declared.header}"


def test_the_deploying_doc_names_each_limits_azd_value():
    for setting in LIMIT_PARAMS:
        (row,) = re.findall(rf"^\| `{setting}` \|.*$", DOC.read_text(), re.MULTILINE)
        assert f"azd: `{setting}`" in row, row


def test_host_storage_connects_with_the_user_assigned_identity():
    settings, main = app_settings(), bicep(MAIN)
    assert literal(settings["AzureWebJobsStorage__credential"]) == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == "identityClientId"
    for service in ("blob", "queue", "table"):
        uri = settings[f"AzureWebJobsStorage__{service}ServiceUri"]
        assert uri == f"storage.properties.primaryEndpoints.{service}"
    assert [given for _, given in passed_to(site_file(), "identityClientId")] == ["identity.outputs.clientId"]
    identity = main.get("module", "identity")
    assert (
        bicep(main.module_file(identity)).get("output", "clientId").value.strip()
        == "identity.properties.clientId"
    )


def test_secrets_are_key_vault_references_resolved_by_the_identity():
    settings, site = app_settings(), site_file()
    for name in SECRET_SETTINGS:
        match = re.fullmatch(r"'@Microsoft\.KeyVault\(SecretUri=\$\{(\w+)\}\)'", settings[name])
        assert match, f"{name} is not a Key Vault reference: {settings[name]}"
        (given,) = [given for _, given in passed_to(site, match[1])]
        module, output = re.fullmatch(r"(\w+)\.outputs\.(\w+)", given).groups()
        vault = bicep(bicep(MAIN).module_file(bicep(MAIN).get("module", module)))
        secret = re.fullmatch(r"(\w+)\.properties\.secretUri", vault.get("output", output).value.strip())
        assert secret, f"{name}: the reference must name the secret without a version"
        stored = vault.get("resource", secret[1])
        assert stored.target == "Microsoft.KeyVault/vaults/secrets"
        assert "@secure()" in vault.get("param", prop(stored.body, "properties.value")).decorators
    (app,) = site.all("resource", "Microsoft.Web/sites")
    assert prop(app.body, "properties.keyVaultReferenceIdentity") == "identityId"
    assert literal(prop(app.body, "identity.type")) == "UserAssigned"
    assert [given for _, given in passed_to(site, "identityId")] == ["identity.outputs.id"]


def test_key_vault_authorizes_by_rbac_and_keeps_deleted_secrets():
    (vault,) = [
        v
        for p in bicep_files()
        for v in bicep(p).all("resource", "Microsoft.KeyVault/vaults")
        if "existing" not in v.header
    ]
    properties = entries(vault.body["properties"])
    assert properties["enableRbacAuthorization"] == "true"
    assert properties["enableSoftDelete"] == "true"
    assert "accessPolicies" not in properties


def test_storage_account_accepts_only_entra_id_over_tls():
    (account,) = [
        a
        for p in bicep_files()
        for a in bicep(p).all("resource", "Microsoft.Storage/storageAccounts")
        if "existing" not in a.header
    ]
    properties = entries(account.body["properties"])
    assert properties["allowSharedKeyAccess"] == "false"
    assert properties["allowBlobPublicAccess"] == "false"
    assert literal(properties["minimumTlsVersion"]) == "TLS1_2"
    assert literal(account.body["kind"]) == "StorageV2"
    assert properties["isHnsEnabled"] == "false"  # blob index tags need a flat namespace


def test_application_insights_takes_only_entra_id_tokens():
    (insights,) = [
        a
        for p in bicep_files()
        for a in bicep(p).all("resource", "Microsoft.Insights/components")
        if "existing" not in a.header
    ]
    assert prop(insights.body, "properties.DisableLocalAuth") == "true"
    settings = app_settings()
    assert settings["APPLICATIONINSIGHTS_CONNECTION_STRING"] == "appInsights.properties.ConnectionString"
    assert (
        settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"]
        == "'ClientId=${identityClientId};Authorization=AAD'"
    )


def test_the_log_workspace_caps_daily_ingestion():
    (workspace,) = [
        a
        for p in bicep_files()
        for a in bicep(p).all("resource", "Microsoft.OperationalInsights/workspaces")
        if "existing" not in a.header
    ]
    assert prop(workspace.body, "properties.workspaceCapping.dailyQuotaGb") == "dailyQuotaGb"
    assert prop(workspace.body, "properties.features.disableLocalAuth") == "true"
    assert "param dailyQuotaGb int = 1" in (INFRA / "modules" / "monitoring.bicep").read_text()


def test_function_app_runs_python_311_on_flex_consumption():
    site = site_file()
    (plan,) = site.all("resource", "Microsoft.Web/serverfarms")
    assert literal(prop(plan.body, "sku.name")) == "FC1"
    assert literal(prop(plan.body, "sku.tier")) == "FlexConsumption"
    (app,) = site.all("resource", "Microsoft.Web/sites")
    assert literal(app.body["kind"]) == "functionapp,linux"
    config = entries(prop(app.body, "properties.functionAppConfig"))
    assert literal(prop(config, "runtime.name")) == "python"
    assert literal(prop(config, "runtime.version")) == "3.11"
    assert literal(prop(config, "deployment.storage.type")) == "blobContainer"
    assert literal(prop(config, "deployment.storage.authentication.type")) == "UserAssignedIdentity"
    assert prop(config, "deployment.storage.authentication.userAssignedIdentityResourceId") == "identityId"
    assert {"maximumInstanceCount", "instanceMemoryMB"} <= set(entries(config["scaleAndConcurrency"]))


def test_site_config_sets_nothing_flex_consumption_refuses_or_ignores():
    (app,) = site_file().all("resource", "Microsoft.Web/sites")
    site_config = entries(prop(app.body, "properties.siteConfig"))

    assert not set(site_config) & set(FLEX_SITE_CONFIG_UNUSED), "see FLEX_SITE_CONFIG_UNUSED"
    assert literal(site_config["minTlsVersion"]) == "1.2"


def test_deployments_authenticate_with_entra_id_only():
    site = site_file()
    (app,) = site.all("resource", "Microsoft.Web/sites")
    policies = {
        literal(policy.body["name"]): policy.body
        for path in bicep_files()
        for policy in bicep(path).all("resource", "Microsoft.Web/sites/basicPublishingCredentialsPolicies")
    }

    assert set(policies) == {"ftp", "scm"}, "the FTP and the SCM (Kudu) passwords must both be off"
    for name, policy in policies.items():
        assert policy["parent"] == app.name, f"{name}: not a policy of the function app"
        assert prop(policy, "properties.allow") == "false", f"{name}: basic credentials still allowed"


def role_assignments() -> Iterator[tuple[Bicep, str, str, Decl]]:
    """Every role assignment: (its file, the principal expression, the role's GUID, its scope)."""
    for path in bicep_files():
        file = bicep(path)
        guids = {v.name: literal(v.value.strip()) for v in file.all("var")}
        for assignment in file.all("resource", "Microsoft.Authorization/roleAssignments"):
            properties = entries(assignment.body["properties"])
            role = re.fullmatch(
                r"subscriptionResourceId\('Microsoft\.Authorization/roleDefinitions', (\w+)\)",
                properties["roleDefinitionId"],
            )
            assert role, f"{assignment.name}: the role must be a built-in definition named by a var"
            yield (
                file,
                properties["principalId"],
                guids[role[1]],
                file.get("resource", assignment.body["scope"]),
            )


def test_identity_holds_each_role_on_its_resource_and_nothing_more():
    granted = {
        (guid, scope.target) for _, who, guid, scope in role_assignments() if who == "identityPrincipalId"
    }
    assert granted == {(guid, on) for guid, (_, on) in IDENTITY_ROLES.items()}
    for file in {file for file, who, _, _ in role_assignments() if who == "identityPrincipalId"}:
        assert [given for _, given in passed_to(file, "identityPrincipalId")] == [
            "identity.outputs.principalId"
        ]


def test_whoever_runs_azd_may_only_upload_to_the_bundles_container():
    others = [
        (file, guid, scope) for file, who, guid, scope in role_assignments() if who != "identityPrincipalId"
    ]
    assert [(guid, scope.target) for _, guid, scope in others] == [UPLOADER_ROLE]
    ((file, _, scope),) = others
    assert "${bundlesContainerName}" in scope.body["name"]
    assert resolve(file, "bundlesContainerName") == "bundles"


# --- parameters and modules -------------------------------------------------------------------


def test_secret_parameters_are_secure_and_have_no_default():
    for path in bicep_files():
        for param in bicep(path).all("param"):
            if SECRET_PARAM.search(param.name):
                assert "@secure()" in param.decorators, f"{path.name}: {param.name} is not @secure()"
                assert not param.value.strip(), f"{path.name}: {param.name} has a default"
    main = bicep(MAIN)
    assert all(
        "@secure()" in main.get("param", p).decorators for p in ("brevoApiKey", "signingKey", "hashSecret")
    )


def test_parameter_file_passes_secrets_from_the_azd_environment_only():
    main, parameters = bicep(MAIN), json.loads(PARAMETERS.read_text())["parameters"]
    declared = {p.name: p for p in main.all("param")}
    assert set(parameters) <= set(declared), "the parameters file names a parameter main.bicep lacks"
    assert main.required_params() <= set(parameters), "a required parameter is not in the parameters file"
    for name, entry in parameters.items():
        value = entry["value"]
        assert isinstance(value, str) and not re.search(r"PRIVATE KEY|xkeysib-|AccountKey", value)
        if "@secure()" in declared[name].decorators:
            assert re.fullmatch(r"\$\{\w+\}", value), f"{name} must come from the azd environment"


def test_every_module_exists_and_gets_every_required_param():
    for path in bicep_files():
        for module in bicep(path).all("module"):
            target = bicep(path).module_file(module)
            assert target.exists(), f"{path.name}: module {module.name} -> {module.target} is missing"
            given, declared = (
                set(entries(module.body["params"])),
                {p.name for p in bicep(target).all("param")},
            )
            assert bicep(target).required_params() <= given, f"{module.name}: required params not passed"
            assert given <= declared, f"{module.name}: passes params {target.name} does not declare"


def test_main_deploys_into_its_own_resource_group():
    main = bicep(MAIN)
    assert re.search(r"^targetScope = 'subscription'$", main.text, re.MULTILINE)
    (group,) = main.all("resource", "Microsoft.Resources/resourceGroups")
    assert all(m.body["scope"] == group.name for m in main.all("module"))


def test_outputs_name_the_function_app_and_its_url():
    main = bicep(MAIN)
    outputs = {o.name: o.value.strip() for o in main.all("output")}
    app = [m for m in main.all("module") if main.module_file(m) == site_file().path.resolve()][0]
    assert outputs["AZURE_FUNCTION_APP_NAME"] == f"{app.name}.outputs.name"
    assert outputs["AZURE_FUNCTION_APP_URL"] == f"{app.name}.outputs.url"
    assert site_file().get("output", "url").value.strip() == "'https://${site.properties.defaultHostName}'"


def test_azure_yaml_deploys_this_folder_as_the_tagged_python_function():
    text = (ROOT / "azure.yaml").read_text()
    service = re.search(r"^services:\n  (\w+):\n((?:    .*\n)+)", text, re.MULTILINE)
    assert service, "azure.yaml names no service"
    assert {"project: .", "language: python", "host: function"} <= {
        line.strip() for line in service[2].splitlines()
    }
    (app,) = site_file().all("resource", "Microsoft.Web/sites")
    assert f"'azd-service-name': '{service[1]}'" in app.body["tags"]
    for run in re.findall(r"run: (.+)", text):
        module = re.search(r" -m ([\w.]+)", run)
        script = module[1].replace(".", "/") + ".py" if module else run.split()[-1].replace("\\", "/")
        assert (ROOT / script).exists(), f"azure.yaml runs {script}, which does not exist"


# --- the preprovision hook --------------------------------------------------------------------


@pytest.fixture
def azd(tmp_path) -> Path:
    """A stand-in `azd` on PATH that records each call's arguments, one JSON list a line."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "azd"
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    calls.touch()
    return calls


def run_hook(azd: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    path = f"{azd.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        [sys.executable, str(HOOK)], env={"PATH": path, **env}, capture_output=True, text=True, timeout=60
    )
    calls = [json.loads(line) for line in azd.read_text().splitlines()]
    assert all(call[:3] == ["env", "set", "--"] for call in calls)
    return done, {call[3]: call[4] for call in calls}


INPUTS = {"BREVO_API_KEY": "xkeysib-0123", "STOREFRONT_SENDER_EMAIL": "store@shop.example"}


def test_preprovision_generates_the_secrets_in_forms_the_app_and_parameter_file_take(azd):
    done, kept = run_hook(azd, **INPUTS)

    assert done.returncode == 0, done.stderr
    assert set(kept) == {"STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET"}
    key = kept["STOREFRONT_SIGNING_KEY"]
    assert "\n" not in key and key.startswith("-----BEGIN PRIVATE KEY-----\\n")  # PKCS#8, one line
    through_json = json.loads(f'"{key}"')  # as azd substitutes it into main.parameters.json
    assert load_private_key(through_json).curve.name == "secp256r1"
    assert Settings.from_env({"STOREFRONT_SIGNING_KEY": key}).signing_key_pem == through_json
    assert re.fullmatch(r"[0-9a-f]{64}", kept["STOREFRONT_HASH_SECRET"])
    assert key not in done.stdout + done.stderr


def test_preprovision_keeps_secrets_the_environment_already_has(azd):
    first = run_hook(azd, **INPUTS)[1]
    azd.write_text("")

    done, kept = run_hook(azd, **INPUTS, **first, AZURE_KEY_VAULT_NAME="kv-sample")

    assert done.returncode == 0, done.stderr
    assert kept == {}


def test_preprovision_will_not_replace_a_lost_secret_of_a_provisioned_environment(azd):
    done, kept = run_hook(azd, **INPUTS, STOREFRONT_HASH_SECRET="a" * 64, AZURE_KEY_VAULT_NAME="kv-sample")

    assert done.returncode == 1
    assert "STOREFRONT_SIGNING_KEY is missing from an environment already provisioned" in done.stderr
    assert kept == {}


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"STOREFRONT_SENDER_EMAIL": "store@shop.example"}, "BREVO_API_KEY is not set"),
        ({"BREVO_API_KEY": "xkeysib-0123"}, "STOREFRONT_SENDER_EMAIL is not set"),
        ({**INPUTS, "BREVO_API_KEY": 'xkeysib-"0123'}, "BREVO_API_KEY holds a quote"),
        (
            {**INPUTS, "STOREFRONT_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----\nAAAA"},
            "STOREFRONT_SIGNING_KEY holds",
        ),
        ({**INPUTS, "STOREFRONT_SIGNING_KEY": "not a key"}, "STOREFRONT_SIGNING_KEY is not a readable PEM"),
        ({**INPUTS, "STOREFRONT_RETIRED_PUBLIC_KEYS_BASE64": "e30="}, "STOREFRONT_RETIRED_PUBLIC_KEYS must"),
        ({**INPUTS, "BREVO_CONTACT_LIST_ID": "my-list"}, "BREVO_CONTACT_LIST_ID must"),
        ({**INPUTS, "STOREFRONT_RATE_LIMIT_PER_HOUR": "0"}, "STOREFRONT_RATE_LIMIT_PER_HOUR"),
        ({**INPUTS, "STOREFRONT_RATE_LIMIT_PER_HOUR": " 120"}, "STOREFRONT_RATE_LIMIT_PER_HOUR has spaces"),
        ({**INPUTS, "STOREFRONT_RECIPIENT_LIMIT_PER_DAY": "10\n"}, "STOREFRONT_RECIPIENT_LIMIT_PER_DAY has"),
        ({**INPUTS, "STOREFRONT_DAILY_COST_CEILING_USD": "five"}, "STOREFRONT_DAILY_COST_CEILING_USD"),
        ({**INPUTS, "STOREFRONT_DAILY_COST_CEILING_USD": "2000000"}, "STOREFRONT_DAILY_COST_CEILING_USD"),
        ({**INPUTS, "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": "1.5"}, "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR"),
        (
            {**INPUTS, "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR": "0"},
            "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR",
        ),
    ],
)
def test_preprovision_stops_on_inputs_the_deployment_cannot_use(azd, env, complaint):
    done, kept = run_hook(azd, **env)

    assert done.returncode == 1
    assert complaint in done.stderr
    assert kept == {}


def hook_module():
    """infra/hooks/preprovision.py as a module, for the names it checks."""
    spec = importlib.util.spec_from_file_location("preprovision_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_checks_every_value_the_parameters_file_takes_from_azd():
    """A value added to main.parameters.json but not to the hook would skip its checks (quotes,
    spaces around a limit that azd would drop for the template's default)."""
    hook = hook_module()
    taken = set(re.findall(r"\$\{(\w+?)(?:=|\})", PARAMETERS.read_text()))

    assert {name for name in taken if not name.startswith("AZURE_")} == set(hook.PASSED)
    assert set(hook.LIMITS) == set(LIMIT_PARAMS)


@pytest.mark.parametrize("setting", sorted(LIMIT_PARAMS))
def test_preprovision_refuses_every_limit_with_spaces_around_it(azd, setting):
    done, kept = run_hook(azd, **INPUTS, **{setting: " 7 "})

    assert done.returncode == 1
    assert f"{setting} has spaces around it" in done.stderr
    assert kept == {}


def test_preprovision_accepts_limits_within_the_apps_bounds(azd):
    limits = {
        "STOREFRONT_RATE_LIMIT_PER_HOUR": "120",
        "STOREFRONT_DAILY_COST_CEILING_USD": "19.35",
        "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": "60",
    }

    done, _ = run_hook(azd, **INPUTS, **limits)

    assert done.returncode == 0, done.stderr


def test_preprovision_never_prints_a_secret_when_azd_fails_to_keep_it(azd):
    azd.parent.joinpath("bin", "azd").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(azd)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nsys.exit(3)\n"
    )

    done, tried = run_hook(azd, **INPUTS)

    assert done.returncode == 1
    assert "`azd env set STOREFRONT_SIGNING_KEY` failed (exit 3)" in done.stderr
    assert "Traceback" not in done.stderr
    assert tried["STOREFRONT_SIGNING_KEY"].split("\\n")[1] not in done.stdout + done.stderr


# --- docs/deploying.md ------------------------------------------------------------------------


def documented_settings() -> dict[str, str]:
    """The settings table's rows: name -> default cell."""
    rows = re.findall(r"^\| `([\w]+)` \| ([^|]*) \|", DOC.read_text(), re.MULTILINE)
    return {name: default.strip() for name, default in rows}


def test_deploying_doc_lists_every_setting_the_code_reads_and_the_template_sets():
    missing = (code_reads() | set(app_settings())) - set(documented_settings())
    assert not missing, f"docs/deploying.md has no row for {sorted(missing)}"


def test_deploying_doc_gives_the_codes_defaults():
    default = Settings.from_env({})
    for name, cell in documented_settings().items():
        written = re.fullmatch(r"`([^`]*)`", cell)
        if written and name in code_reads():
            assert Settings.from_env({name: written[1]}) == default, (
                f"{name}: the doc's default {cell} is not the code's"
            )


# --- an independent scanner: checkov ----------------------------------------------------------

CHECKOV_REQUIREMENTS = ROOT / "tests" / "infra" / "checkov-requirements.txt"
CHECKOV_SKIPS = ROOT / "tests" / "infra" / "checkov-skips.yml"
CHECKOV_VENV = ROOT / ".venv" / "checkov"
# The resource types of this template that checkov has Bicep checks for: every one declared must be
# in its report, or it did not read the file that declares it.
CHECKOV_SCANNED_TYPES = {
    "Microsoft.Web/serverfarms",
    "Microsoft.Web/sites",
    "Microsoft.Web/sites/config",
    "Microsoft.KeyVault/vaults",
    "Microsoft.KeyVault/vaults/secrets",
    "Microsoft.Storage/storageAccounts",
    "Microsoft.Storage/storageAccounts/blobServices/containers",
}


@pytest.fixture(scope="module")
def checkov() -> Path:
    """checkov's executable, from a virtualenv of its own that the first run builds (see
    tests/infra/checkov-requirements.txt for why it cannot share .venv), rebuilt when that file changes."""
    return own_venv(CHECKOV_REQUIREMENTS, CHECKOV_VENV) / "checkov"


@pytest.fixture(scope="module")
def checkov_report(checkov, tmp_path_factory) -> dict:
    """checkov's Bicep scan of infra/, run offline: no API key, no platform mapping, no update
    check, no download; from an empty directory, so only a config file in infra/ could steer it."""
    home = tmp_path_factory.mktemp("checkov")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "BC_SKIP_MAPPING": "TRUE",
        "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE",
    }
    done = subprocess.run(
        [str(checkov), "--directory", str(INFRA), "--framework", "bicep", "--output", "json"]
        + ["--skip-download"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), f"checkov exited {done.returncode}:\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    reports = [
        r for r in (report if isinstance(report, list) else [report]) if r.get("check_type") == "bicep"
    ]
    assert len(reports) == 1, f"checkov reported no Bicep scan: {done.stdout[:500]}"
    return reports[0]


def scanned(checks: list[dict]) -> set[tuple[str, str]]:
    """(check id, resource) for each result; a resource is its file under infra/ and checkov's id."""
    return {(c["check_id"], f"{c['file_path'].lstrip('/')}:{c['resource']}") for c in checks}


def checkov_skips() -> dict[tuple[str, str], dict]:
    listing = yaml.safe_load(CHECKOV_SKIPS.read_text())
    listed: dict[tuple[str, str], dict] = {}
    for entry in listing:
        assert set(entry) == {"check", "name", "resources", "reason"}, entry
        assert re.fullmatch(r"CKV2?_AZURE_\d+", entry["check"]), entry["check"]
        assert len(entry["reason"].split()) >= 10, f"{entry['check']}: say why it does not apply"
        for resource in entry["resources"]:
            assert (entry["check"], resource) not in listed, f"{entry['check']} {resource}: listed twice"
            listed[entry["check"], resource] = entry
    return listed


def test_checkov_reads_every_resource_it_has_checks_for(checkov_report):
    results = checkov_report["results"]
    declared = {
        f"{path.relative_to(INFRA).as_posix()}:{d.target}.{d.name}"
        for path in bicep_files()
        for d in bicep(path).all("resource")
        if d.target in CHECKOV_SCANNED_TYPES and "existing" not in d.header
    }
    seen = {resource for _, resource in scanned(results["passed_checks"] + results["failed_checks"])}

    assert not results["parsing_errors"], f"checkov cannot parse {results['parsing_errors']}"
    assert declared, "the reader found none of the resources checkov checks"
    assert declared <= seen, f"checkov did not check {sorted(declared - seen)}"
    assert not list(INFRA.rglob(".checkov.y*ml")), "checkov's settings belong in tests/infra/, not infra/"


def test_checkov_fails_the_template_on_nothing_but_the_listed_exceptions(checkov_report):
    results, listed = checkov_report["results"], checkov_skips()
    suppressed = sorted(scanned(results.get("skipped_checks", [])))
    assert not suppressed, f"suppressed outside tests/infra/checkov-skips.yml: {suppressed}"
    failed = {key: c["check_name"] for c in results["failed_checks"] for key in scanned([c])}

    unexpected = sorted(
        f"{check} {name!r} on {resource}"
        for (check, resource), name in failed.items()
        if (check, resource) not in listed
    )
    assert not unexpected, "checkov finds, not in tests/infra/checkov-skips.yml:\n" + "\n".join(unexpected)
    stale = sorted(f"{check} on {resource}" for check, resource in set(listed) - set(failed))
    assert not stale, "listed in tests/infra/checkov-skips.yml but no longer failing:\n" + "\n".join(stale)
    renamed = sorted(key for key, name in failed.items() if listed[key]["name"] != name)
    assert not renamed, f"the listed name is not checkov's: {renamed}"
