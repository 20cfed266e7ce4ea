"""The package `make package` builds (ops/package.py), as Azure runs it: unpacked on its own, with
requirements.txt alone installed into a clean virtualenv, `function_app` imported from it and indexed.

`FUNCTIONS` is the contract: a function added to, renamed in or removed from function_app.py, or a
changed route, method list, auth level or schedule, fails here until the table says so too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

from ops import package
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

EVERY_METHOD = sorted(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])


def http(route: str, auth: str = "ANONYMOUS") -> dict:
    return {"type": "httpTrigger", "route": route, "methods": EVERY_METHOD, "authLevel": auth}


def timer(schedule: str) -> dict:
    return {"type": "timerTrigger", "schedule": schedule, "runOnStartup": False}


# Every function the host indexes, with its trigger as the worker hands it to the host.
FUNCTIONS = {
    "mcp_endpoint": http("api/a2a/mcp"),
    "purchase": http("api/a2a/purchase"),
    "receipt": http("api/receipts/{receipt_id}"),
    "receipts_of_day": http("api/receipts", auth="FUNCTION"),
    "jwks": http("api/.well-known/jwks.json"),
    "jwks_at_root": http(".well-known/jwks.json"),
    "bundles": http("api/bundles"),
    "download": http("api/download/{token}"),
    "openapi_document": http("api/openapi.json"),
    "health": http("api/health"),
    "agent_card": http(".well-known/agent-card.json"),
    "a2a_endpoint": http("api/a2a"),
    "ucp_profile": http(".well-known/ucp"),
    "ucp_catalog": http("ucp/catalog/{operation}"),
    "ucp_checkouts": http("ucp/checkout-sessions"),
    "ucp_checkout": http("ucp/checkout-sessions/{id}"),
    "ucp_checkout_action": http("ucp/checkout-sessions/{id}/{action}"),
    "ucp_order": http("ucp/orders/{id}"),
    "ucp_mcp": http("ucp/mcp"),
    "zz_unknown_route": http("{*path}"),
    "reap_idempotency_keys": timer("0 */15 * * * *"),
    "repair_receipts": timer("0 */5 * * * *"),
    "drain_contacts": timer("*/10 * * * * *"),
    "deliver_order_webhooks": timer("0 * * * * *"),
}

# Run with the unpacked package as the working directory (`-c` puts it first on sys.path, as the
# worker puts the app's folder): find the app as the worker does, index it once, and say what
# was loaded from where and what is installed.
PROBE = r"""
import importlib.metadata, importlib.util, json, os, sys
import azure.functions as func
import function_app

apps = [v for v in vars(function_app).values() if isinstance(v, func.FunctionRegister)]
functions = {}
for f in apps[0].get_functions():
    config = json.loads(f.get_function_json())
    trigger = [b for b in config["bindings"] if b["type"].endswith("Trigger")]
    functions[f.get_function_name()] = {"scriptFile": config["scriptFile"], "triggers": trigger}
homes = [os.getcwd(), sys.prefix, sys.base_prefix]
print(json.dumps({
    "apps": len(apps),
    "function_app": function_app.__file__,
    "functions": functions,
    "loaded_elsewhere": sorted(
        m.__file__ for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and not any(m.__file__.startswith(h + os.sep) for h in homes)
    ),
    "findable": {n: bool(importlib.util.find_spec(n)) for n in sys.argv[1:]},
    "installed": sorted(
        d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()
    ),
}))
"""

# The development trees, which the app must never find at run time.
DEV_TREES = ("devstack", "ops", "speclint", "tests", "bench", "soak")


def dev_requirements() -> set[str]:
    """Names required by requirements-dev.txt and not by requirements.txt."""

    def names(path: Path) -> set[str]:
        found = (re.match(r"[A-Za-z0-9._-]+", line.strip()) for line in path.read_text().splitlines())
        return {m.group().lower().replace("_", "-") for m in found if m}

    return names(ROOT / "requirements-dev.txt") - names(ROOT / "requirements.txt")


@pytest.fixture(scope="session")
def package_zip(tmp_path_factory) -> Path:
    # A checkout being worked on holds modules not yet added to git, which `make package` rightly
    # refuses (tested on a repository of its own below); here the package is what they make.
    output = tmp_path_factory.mktemp("package") / "storefront.zip"
    package.build(output, allow_untracked=True)
    return output


@pytest.fixture(scope="session")
def app_dir(package_zip, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("wwwroot")
    with zipfile.ZipFile(package_zip) as archive:
        archive.extractall(target)
    return target


@pytest.fixture(scope="session")
def indexed(app_dir, tmp_path_factory) -> dict:
    """The probe's report from a virtualenv holding requirements.txt alone (pip's cache keeps a
    repeated run quick; wheels only, as Azure's remote build on Linux would find them)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    pip_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        + ["--disable-pip-version-check", "--only-binary", ":all:", "-r", "requirements.txt"],
        cwd=app_dir,
        env=pip_env,
        check=True,
        timeout=110,
    )
    done = subprocess.run(
        [str(python), "-c", PROBE, *DEV_TREES],
        cwd=app_dir,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_package_holds_the_app_and_nothing_else(package_zip):
    with zipfile.ZipFile(package_zip) as archive:
        names = set(archive.namelist())
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "shared"], capture_output=True, text=True, check=True
    ).stdout.split()
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "shared").rglob("*.py")}

    assert {"function_app.py", "host.json", "requirements.txt"} <= names
    assert set(tracked) <= names
    assert modules <= names  # the ones not yet added to git too
    templates = r"shared/seams/templates/\w+\.(html|txt|css)"
    app = rf"shared/(\w+/)*\w+\.py|{templates}|shared/protocols/mcp/store_view\.html"  # the MCP App's view
    assert not [n for n in names if n not in package.REQUIRED and not re.fullmatch(app, n)]


def test_azure_indexes_exactly_the_functions_in_the_table(indexed):
    assert indexed["apps"] == 1
    assert {f["scriptFile"] for f in indexed["functions"].values()} == {"function_app.py"}
    found = {}
    for name, function in indexed["functions"].items():
        (trigger,) = function["triggers"]
        found[name] = {
            k: trigger[k]
            for k in ("type", "route", "methods", "authLevel", "schedule", "runOnStartup")
            if k in trigger
        }
        if "methods" in found[name]:
            found[name]["methods"] = sorted(found[name]["methods"])

    assert found == FUNCTIONS


def test_the_app_runs_from_the_package_alone(indexed, app_dir):
    assert indexed["function_app"] == str(app_dir / "function_app.py")
    assert indexed["loaded_elsewhere"] == []
    assert {name for name, findable in indexed["findable"].items() if findable} == set()


def test_requirements_txt_installs_every_storage_sdk_the_app_uses(indexed):
    # The contact queue needs azure-storage-queue beside the table and blob SDKs.
    assert {"azure-data-tables", "azure-storage-blob", "azure-storage-queue"} <= set(indexed["installed"])


def test_requirements_txt_brings_no_development_requirement(indexed):
    assert dev_requirements() & set(indexed["installed"]) == set()


def git_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "--all"], check=True)
    return tmp_path


APP = {
    "function_app.py": "",
    "host.json": "{}",
    "requirements.txt": "azure-functions\n",
    "shared/protocols/api.py": "",
}


def test_a_funcignore_core_tools_reads_differently_from_gitignore_is_refused(tmp_path):
    root = git_repo(tmp_path, {**APP, "shared/__pycache__/api.pyc": "", ".funcignore": "__pycache__\n"})

    with pytest.raises(package.PackageError) as refused:
        package.package_files(root)

    assert "only Core Tools ships: shared/__pycache__/api.pyc" in str(refused.value)
    (root / ".funcignore").write_text("__pycache__\n**/__pycache__\n")
    assert package.package_files(root) == [
        "function_app.py",
        "host.json",
        "requirements.txt",
        "shared/protocols/api.py",
    ]


def test_a_file_git_ignores_is_never_packaged(tmp_path):
    root = git_repo(tmp_path, {**APP, ".gitignore": "*.pem\n", "signing.pem": "secret", ".funcignore": ""})

    with pytest.raises(package.PackageError) as refused:
        package.package_files(root)

    assert "ignored by git: signing.pem" in str(refused.value)


def test_a_file_git_does_not_track_is_refused_until_it_is_added_or_funcignored(tmp_path):
    root = git_repo(tmp_path, {**APP, ".funcignore": ""})
    (root / "saved-receipt.json").write_text("{}")  # what a reader's curl -o leaves behind
    (root / "shared" / "new_module.py").write_text("")

    with pytest.raises(package.PackageError) as refused:
        package.package_files(root)

    assert "untracked: saved-receipt.json" in str(refused.value)
    assert "untracked: shared/new_module.py" in str(refused.value)
    subprocess.run(["git", "-C", str(root), "add", "shared/new_module.py"], check=True)
    (root / ".funcignore").write_text("saved-*.json\n")
    assert package.package_files(root) == [
        "function_app.py",
        "host.json",
        "requirements.txt",
        "shared/new_module.py",
        "shared/protocols/api.py",
    ]


def test_publish_never_ships_its_fixed_names(tmp_path):
    root = git_repo(
        tmp_path, {**APP, "local.settings.json": "{}", ".vscode/settings.json": "{}", ".funcignore": ""}
    )

    assert package.package_files(root) == [
        "function_app.py",
        "host.json",
        "requirements.txt",
        "shared/protocols/api.py",
    ]


def test_a_worktrees_git_file_is_never_packaged_or_refused(tmp_path):
    """In a git worktree `.git` is a file pointing at the repository: a pointer, never shipped."""
    root = git_repo(tmp_path / "app", {**APP, ".funcignore": ""})
    shutil.move(root / ".git", tmp_path / "repository.git")
    (root / ".git").write_text(f"gitdir: {tmp_path / 'repository.git'}\n")

    assert ".git" not in package.package_files(root)


def test_without_git_the_check_says_so_in_one_line(tmp_path, monkeypatch):
    root = git_repo(tmp_path, {**APP, ".funcignore": ""})
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))

    with pytest.raises(package.PackageError, match="git is not installed"):
        package.package_files(root)


def test_the_same_tree_gives_the_same_bytes(tmp_path):
    root = git_repo(tmp_path / "app", {**APP, ".funcignore": ""})
    package.build(tmp_path / "one.zip", root)
    os.utime(root / "host.json", (1e9, 1e9))  # another date, the same content
    package.build(tmp_path / "two.zip", root)

    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()


def azd_prepackage_hook() -> dict[str, str]:
    """The service's prepackage hook in azure.yaml: the command per platform."""
    hooks = yaml.safe_load((ROOT / "azure.yaml").read_text())["services"]["api"]["hooks"]
    return {platform: spec["run"] for platform, spec in hooks["prepackage"].items()}


def test_azds_prepackage_hook_runs_the_package_check_on_every_platform():
    hook = azd_prepackage_hook()

    assert hook == {
        "posix": ".venv/bin/python -m ops.package --check",
        "windows": ".venv\\Scripts\\python.exe -m ops.package --check",
    }


def test_azds_prepackage_hook_refuses_an_untracked_file_that_would_ship_as_make_package_does(tmp_path):
    """The hook's own command, run as azd runs it (in the project folder, by sh), on a checkout
    holding ops/package.py and a run.log nobody added."""
    root = git_repo(
        tmp_path, {**APP, "ops/__init__.py": "", "ops/package.py": Path(package.__file__).read_text()}
    )
    (root / ".funcignore").write_text("ops\n.venv\n")
    subprocess.run(["git", "-C", str(root), "add", ".funcignore"], check=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)

    def hook() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["sh", "-c", azd_prepackage_hook()["posix"]], cwd=root, capture_output=True, text=True, timeout=60
        )

    assert hook().returncode == 0
    (root / "run.log").write_text("a run's output\n")
    refused = hook()
    with pytest.raises(package.PackageError) as by_make_package:
        package.package_files(root)

    assert refused.returncode == 1
    assert refused.stderr == f"package: {by_make_package.value}\n"
    assert "untracked: run.log" in refused.stderr
    assert not (root / "dist").exists()  # a check: nothing built
