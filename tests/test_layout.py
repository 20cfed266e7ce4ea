"""The shape of `shared/`: five layer packages, each importing only from the layers below it; no
module or class too long to read; and every module's old flat name (`shared.settings`, ...) still
importing, as the very module it moved to (shared/_moved.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared import _moved

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("config", "seams", "exactly_once", "purchase", "protocols")  # bottom to top
# The one call upwards: the settings check an operator's email templates with the email's own rules
# when the app starts, so a broken template stops the start rather than a purchase. It is made
# inside a function, so importing the settings never imports the purchase.
UPWARD = ("shared/config/settings.py", "shared.purchase.emails")
# Every module that sat directly in shared/ before the layers, by its old name: each still imports.
OLD_NAMES = [
    "a2a",
    "a2a_answers",
    "a2a_card",
    "a2a_protocol",
    "a2a_requests",
    "api",
    "brevo",
    "catalog",
    "downloads",
    "emails",
    "errors",
    "exactly_once",
    "failures",
    "governance",
    "hashing",
    "http",
    "idempotency",
    "idempotency_table",
    "keys",
    "ledger",
    "mailbox",
    "mcp",
    "mcp_elicit",
    "mcp_legacy",
    "mcp_modern",
    "mcp_tools",
    "names",
    "openapi",
    "openapi_paths",
    "openapi_schemas",
    "pages",
    "printable",
    "purchase",
    "purchase_call",
    "purchase_fulfil",
    "purchase_guards",
    "purchase_operation",
    "purchase_receipt",
    "readiness",
    "receipts",
    "repair",
    "request_state",
    "runtime",
    "schema",
    "secret_strength",
    "settings",
    "settings_reader",
    "signatures",
    "storage",
    "telemetry",
    "templates",
    "tokens",
]


def modules(*trees: str) -> list[Path]:
    return sorted(
        path for tree in trees for path in (ROOT / tree).rglob("*.py") if "node_modules" not in path.parts
    )


@dataclass(frozen=True)
class Import:
    module: str  # absolute, with an old flat name read as the module it names now
    in_function: bool


def _absolute(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "shared" and len(parts) > 1 and parts[1] in _moved.MOVED:
        return ".".join(["shared", *_moved.MOVED[parts[1]].split("."), *parts[2:]])
    return module


def imports(path: Path, root: Path = ROOT) -> list[Import]:
    """Every import in `path`, relative ones resolved, each module and each name it takes from
    one (a name may be a submodule)."""
    package = list(path.relative_to(root).parent.parts)
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            found.extend(Import(_absolute(name), in_function) for name in names if name)
        elif isinstance(node, ast.Import):
            found.extend(Import(_absolute(alias.name), in_function) for alias in node.names)
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


def layer(module: str) -> int | None:
    """The layer `module` sits in, bottom 0; `shared.runtime`, the composition root, above them all."""
    parts = module.split(".")
    if parts[:2] == ["shared", "runtime"]:
        return len(LAYERS)
    if parts[0] == "shared" and len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def test_every_module_of_shared_sits_in_a_layer_but_the_composition_root():
    loose = [p.name for p in (ROOT / "shared").glob("*.py")]
    assert sorted(loose) == ["__init__.py", "_moved.py", "runtime.py"]
    assert sorted(
        p.name for p in (ROOT / "shared").iterdir() if p.is_dir() and p.name != "__pycache__"
    ) == sorted(LAYERS)


@pytest.mark.parametrize("path", modules("shared"), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_layer_imports_only_from_itself_and_the_layers_below(path):
    own = layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own is None or own == len(LAYERS):
        return  # shared/__init__, _moved and runtime sit above every layer
    relative = str(path.relative_to(ROOT))
    upward = {
        found.module
        for found in imports(path)
        if (at := layer(found.module)) is not None
        and at > own
        # `from shared.purchase import emails` in a function names the package and the module
        and not (relative == UPWARD[0] and found.in_function and UPWARD[1].startswith(found.module))
    }
    assert not upward, f"{relative} reaches up to {sorted(upward)}"


def test_the_one_upward_call_is_made_only_when_the_settings_are_checked():
    found = [i for i in imports(ROOT / UPWARD[0]) if i.module.startswith("shared.purchase")]
    assert {i.module for i in found} == {"shared.purchase", UPWARD[1]}
    assert all(i.in_function for i in found)


def test_the_layer_check_reads_what_would_hide_an_upward_import(tmp_path):
    probe = tmp_path / "shared" / "seams" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from shared.catalog import BUNDLES\n"  # an old flat name
        "from ..purchase import tokens\n"  # a relative import
        "def later():\n    import shared.protocols.http\n"  # inside a function
    )
    found = {(i.module, i.in_function) for i in imports(probe, tmp_path)}
    assert ("shared.purchase.catalog.BUNDLES", False) in found
    assert ("shared.purchase.tokens", False) in found
    assert ("shared.protocols.http", True) in found


@pytest.mark.parametrize("path", modules("shared", "devstack"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_or_class_is_too_long_to_read(path):
    source = path.read_text()
    assert source.count("\n") <= 400, f"{path.name} has {source.count(chr(10))} lines"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno - node.lineno + 1 <= 200, f"{path.name}: class {node.name}"


PROBE = """
import importlib, json, sys
name, target = sys.argv[1], sys.argv[2]
old = importlib.import_module(name)  # the old name first, in a fresh interpreter
new = importlib.import_module(target)
print(json.dumps({"same": old is new, "spec": old.__spec__.name, "file": old.__file__,
                  "attribute": getattr(sys.modules["shared"], name.split(".")[1]) is new}))
"""


MOVED_NAMES = sorted(set(OLD_NAMES) - {"runtime", "purchase", "exactly_once"})  # those three kept their names


def test_every_old_name_that_moved_is_mapped_and_nothing_else():
    assert sorted(_moved.MOVED) == MOVED_NAMES


@pytest.mark.parametrize("old", MOVED_NAMES)
def test_an_old_name_imports_the_very_module_that_moved(old):
    assert old in _moved.MOVED, f"shared.{old} no longer imports"
    target = f"shared.{_moved.MOVED[old]}"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, f"shared.{old}", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["same"] and found["attribute"]
    assert found["spec"] == target  # the module keeps its own spec: reloads and tools see the real one
    assert found["file"] == str(ROOT / "shared" / (target.split(".", 1)[1].replace(".", "/") + ".py"))


def test_no_file_is_left_at_an_old_name():
    assert not [old for old in MOVED_NAMES if (ROOT / "shared" / f"{old}.py").exists()]


def test_a_name_that_never_was_a_module_is_still_not_found():
    with pytest.raises(ModuleNotFoundError):
        __import__("shared.no_such_module")


def test_the_purchase_and_the_executor_hand_out_what_their_old_modules_did():
    from shared import exactly_once, purchase
    from shared.exactly_once import executor
    from shared.purchase import storefront

    assert purchase.__all__ == storefront.__all__  # the lazy list is the module's, name for name
    for name in storefront.__all__:
        assert getattr(purchase, name) is getattr(storefront, name)
    for name in ("ExactlyOnce", "Done", "Key", "Operation", "Run", "CLAIMED", "WORDS"):
        assert name in exactly_once.__all__
        assert getattr(exactly_once, name) is getattr(executor, name)
    with pytest.raises(AttributeError):
        purchase.no_such_name  # noqa: B018


def test_a_purchase_module_imports_without_the_whole_purchase():
    probe = (
        "import sys\n"
        "from shared.purchase import catalog\n"
        "import shared.purchase.tokens\n"
        "print('shared.purchase.storefront' in sys.modules, 'shared.exactly_once.executor' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def documented_tree() -> set[str]:
    """The paths under shared/ that docs/development.md's Layout block draws, by indentation."""
    text = (ROOT / "docs/development.md").read_text()
    block = text.split("## Layout", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    paths, stack = set(), []
    for line in block.splitlines():
        name = line.split(" ", 1)[0] if not line.startswith(" ") else line.strip().split(" ", 1)[0]
        depth = (len(line) - len(line.lstrip(" "))) // 2
        if not (name.endswith("/") or name.endswith(".py")) or len(line) - len(line.lstrip(" ")) > 8:
            continue
        stack = [*stack[:depth], name]
        if stack[0] == "shared/":
            paths.add("".join(stack))
    return paths - {"shared/"}


def test_the_development_page_draws_every_module_of_shared_and_no_other():
    actual = {f"{p.relative_to(ROOT)}" for p in (ROOT / "shared").rglob("*.py") if p.name != "__init__.py"}
    actual |= {
        f"{p.relative_to(ROOT)}/"
        for p in (ROOT / "shared").rglob("*")
        if p.is_dir() and p.name != "__pycache__"
    }
    assert documented_tree() == actual


def test_the_old_names_import_from_a_zip_too(tmp_path):
    """Where the sources are not plain files (a zip, compiled files only), the packages still hand
    out their old names: nothing here looks for a file on disk."""
    archive = tmp_path / "app.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in (ROOT / "shared").rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(ROOT))
    probe = (
        f"import sys; sys.path.insert(0, {str(archive)!r})\n"
        "from shared.purchase import Storefront\n"
        "from shared.exactly_once import ExactlyOnce\n"
        "import shared.settings, shared.idempotency\n"
        "print(shared.settings.__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(archive / "shared" / "config" / "settings.py")
