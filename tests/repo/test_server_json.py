"""server.json, the store's entry in the official MCP Registry: what `mcp-publisher publish` sends.

It is checked against the registry's published schema (pinned in tests/fixtures/registry/, see the
README there) and against the rules the registry applies on top of it at publish time (the name's
namespace, an https remote that is not loopback, every URL variable declared), and it must lead a
client to this app's MCP endpoint and say the app's version.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from urllib.parse import urlsplit

import jsonschema
import pytest
from mcp import Client

from ops import package
from shared import __version__
from tests.support import ROOT

SERVER_JSON = ROOT / "server.json"
SCHEMA = ROOT / "tests" / "fixtures" / "registry" / "server.schema.json"
# A GitHub login (alphanumerics and single inner hyphens, at most 39), as `mcp-publisher login github`
# grants `io.github.<login>/*`; the server part as the registry's name check reads it.
GITHUB_NAME = re.compile(
    r"io\.github\.(?P<login>[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38})/(?P<server>[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])"
)
URL_VARIABLE = re.compile(r"\{([^{}]*)\}")


def entry() -> dict:
    return json.loads(SERVER_JSON.read_text(encoding="utf-8"))


def schema_errors(document: dict) -> list[str]:
    """What the pinned schema refuses in `document`, validated under the draft the schema declares."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def fill(template: str, values: dict[str, str]) -> str:
    """A remote URL with its {variables} replaced, as a client does with what the user typed."""
    return URL_VARIABLE.sub(lambda m: values[m[1]], template)


def test_the_pinned_schema_is_the_draft_07_schema_server_json_names():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))

    assert jsonschema.validators.validator_for(schema) is jsonschema.Draft7Validator
    jsonschema.Draft7Validator.check_schema(schema)
    assert entry()["$schema"] == schema["$id"]


def test_server_json_is_valid_against_the_registrys_schema():
    assert schema_errors(entry()) == []


@pytest.mark.parametrize(
    "path, value",
    [
        pytest.param(("description",), "x" * 101, id="description-over-100"),
        pytest.param(("name",), "storefront", id="name-without-namespace"),
        pytest.param(("name",), "io.github.owner/store/front", id="name-with-two-slashes"),
        pytest.param(("version",), 1, id="version-not-a-string"),
        pytest.param(("remotes", 0, "type"), "stdio", id="remote-over-stdio"),
        pytest.param(("remotes", 0, "url"), "ftp://{host}/api/a2a/mcp", id="url-not-http"),
        pytest.param(("remotes", 0, "variables", "host", "isRequired"), "yes", id="flag-not-boolean"),
    ],
)
def test_the_schema_refuses_what_the_registry_refuses(path, value):
    document = copy.deepcopy(entry())
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value

    assert schema_errors(document), f"the pinned schema accepts {path} = {value!r}"


def test_the_name_is_in_a_github_namespace_mcp_publisher_login_github_grants():
    matched = GITHUB_NAME.fullmatch(entry()["name"])

    assert matched, entry()["name"]
    assert matched["server"] == "storefront"


def test_the_version_is_the_apps_version_and_one_the_registry_sorts():
    assert entry()["version"] == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), "the registry sorts semantic versions as such"


def test_the_remote_declares_exactly_the_variables_its_url_uses_and_asks_for_them():
    (remote,) = entry()["remotes"]
    used = set(URL_VARIABLE.findall(remote["url"]))

    assert remote["type"] == "streamable-http"
    assert used == set(remote["variables"]) == {"host"}
    assert all(asked["isRequired"] and asked["description"] for asked in remote["variables"].values())


def test_filled_in_the_remote_is_an_https_azure_url_the_registry_accepts():
    (remote,) = entry()["remotes"]
    example = {name: variable["placeholder"] for name, variable in remote["variables"].items()}
    url = urlsplit(fill(remote["url"], example))

    assert url.scheme == "https"
    assert url.hostname.endswith(".azurewebsites.net")
    assert not url.query and not url.fragment and url.port is None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_remote_path_on_a_running_app_serves_this_stores_tools_and_version(host, mode):
    (remote,) = entry()["remotes"]
    served = urlsplit(host.url)
    # The dev host speaks plain http on loopback; on Azure the same path is served over https.
    url = urlsplit(fill(remote["url"], {"host": served.netloc}))._replace(scheme=served.scheme).geturl()

    async def connect() -> tuple[list[str], object]:
        async with Client(url, mode=mode) as client:
            return [tool.name for tool in (await client.list_tools()).tools], client.server_info

    tools, server_info = asyncio.run(connect())

    assert "purchase_free_bundle" in tools
    # initialize's serverInfo, or the stamp the store puts on every 2026-07-28 result
    assert server_info.version == entry()["version"]


def test_a_publish_of_the_app_never_ships_server_json():
    assert SERVER_JSON.is_file()
    assert "server.json" not in package.package_files(allow_untracked=True)


def test_the_deploying_page_quotes_the_name_and_url_server_json_has():
    page = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = page.split("## Publishing to the MCP Registry", 1)[1].split("\n## ", 1)[0]
    (remote,) = entry()["remotes"]

    assert f"`name`: `{entry()['name']}`" in section
    assert f"`{remote['url']}`" in section
