"""The shape of the code: `shared/` is five layer packages, each importing only from the layers below
it; every import names the module that defines what it takes (no re-exports, no aliases of old
names); and no module or class is too long to read."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support import ROOT

LAYERS = ("config", "seams", "exactly_once", "purchase", "protocols")  # bottom to top
# Every package of ours, and the app's one module.
PACKAGES = ("shared", "devstack", "speclint", "ops", "bench", "soak", "tests")


def modules(*trees: str) -> list[Path]:
    return sorted(
        path for tree in trees for path in (ROOT / tree).rglob("*.py") if "node_modules" not in path.parts
    )


@dataclass(frozen=True)
class Import:
    module: str  # absolute
    in_function: bool


@cache
def imports(path: Path, root: Path = ROOT) -> tuple[Import, ...]:
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
            found.extend(Import(name, in_function) for name in names if name)
        elif isinstance(node, ast.Import):
            found.extend(Import(alias.name, in_function) for alias in node.names)
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return tuple(found)


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
    assert sorted(loose) == ["__init__.py", "runtime.py"]
    assert sorted(
        p.name for p in (ROOT / "shared").iterdir() if p.is_dir() and p.name != "__pycache__"
    ) == sorted(LAYERS)


@pytest.mark.parametrize("path", modules("shared"), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_layer_imports_only_from_itself_and_the_layers_below(path):
    own = layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own is None or own == len(LAYERS):
        return  # shared/__init__ and runtime sit above every layer
    upward = {found.module for found in imports(path) if (at := layer(found.module)) is not None and at > own}
    assert not upward, f"{path.relative_to(ROOT)} reaches up to {sorted(upward)}"


# The vendors' SDKs: Azure's clients and the HTTP client Brevo is called with.
VENDOR_SDKS = ("azure", "requests")


@pytest.mark.parametrize("path", modules("shared"), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_seams_call_a_vendor(path):
    """Every call to Azure or Brevo goes through `shared/seams/`: no other module imports their SDKs,
    not even for a type."""
    if path.relative_to(ROOT).parts[1] == "seams":
        return
    vendors = {i.module for i in imports(path) if i.module.split(".")[0] in VENDOR_SDKS}
    assert not vendors, f"{path.relative_to(ROOT)} imports {sorted(vendors)}"


@pytest.mark.parametrize(
    "path",
    [*modules("shared", "devstack", "speclint", "ops", "bench", "soak"), ROOT / "function_app.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_tool_or_product_code_imports_the_tests(path):
    """What the bench and the soak share with the suite (services, ports, the fault proxy) lives in
    devstack/; and the soak is its own tool, not the bench's."""
    top = path.relative_to(ROOT).parts[0]
    found = {i.module for i in imports(path) if i.module.split(".")[0] == "tests"}
    if top == "soak":
        found |= {i.module for i in imports(path) if i.module.split(".")[0] == "bench"}
    assert not found, f"{path.relative_to(ROOT)} imports {sorted(found)}"


def test_the_layer_check_reads_what_would_hide_an_upward_import(tmp_path):
    probe = tmp_path / "shared" / "seams" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from shared.purchase.catalog import BUNDLES\n"
        "from ..purchase import tokens\n"  # a relative import
        "def later():\n    import shared.protocols.http\n"  # inside a function
    )
    found = {(i.module, i.in_function) for i in imports(probe, tmp_path)}
    assert ("shared.purchase.catalog.BUNDLES", False) in found
    assert ("shared.purchase.tokens", False) in found
    assert ("shared.protocols.http", True) in found


@pytest.mark.parametrize(
    "path",
    modules("shared", "devstack", "speclint", "ops", "bench", "soak"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_or_class_is_too_long_to_read(path):
    source = path.read_text()
    assert source.count("\n") <= 400, f"{path.name} has {source.count(chr(10))} lines"
    if path.relative_to(ROOT).parts[0] == "speclint":
        return  # two of its classes (an ECMA pattern checker, the HTTP wire) are still longer
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno - node.lineno + 1 <= 200, f"{path.name}: class {node.name}"


@pytest.mark.parametrize(
    "path",
    modules("shared", "devstack", "ops", "bench", "soak", "speclint"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_a_module_says_what_it_is_in_ten_lines_at_most(path):
    """Long protocol and design notes belong in docs/, where a reader looks for them."""
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    assert len(doc.splitlines()) <= 10, (
        f"{path.relative_to(ROOT)}'s docstring has {len(doc.splitlines())} lines"
    )


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def defined_names(path: Path) -> frozenset[str]:
    """What a module defines itself: its functions, classes and assigned names (under `if` and
    `try` too), never a name it imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else (node,):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(inner.name)
            elif isinstance(inner, (ast.Assign, ast.AnnAssign)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


@cache
def bound_names(path: Path) -> frozenset[str]:
    """Every name a module binds at its top level: what it defines and what it imports."""
    names = set(defined_names(path)) | {"__doc__", "__file__", "__name__", "__spec__", "__path__"}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def passed_on(path: Path, ours: dict[str, Path]) -> set[str]:
    """The names a module imports from modules of ours that are not modules themselves: read as
    its attributes, they would be taken through it. (A module it imports, ours or not, is fair
    game: that is where a test patches what the module uses.)"""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in ours:
            names |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" not in ours}
    return names


def indirect_imports(path: Path, ours: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Each name `path` takes from a module of ours that neither defines it nor has it as a
    submodule, by `from M import name` or as `M.name` on a module it imported: a name taken
    through a module that only passes it on."""
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in ours:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in ours:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif alias.name not in defined_names(ours[node.module]):
                    found.append(
                        f"{path.relative_to(root)}:{node.lineno} takes {alias.name} from {node.module}"
                    )
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in ours})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            unbound = node.attr not in bound_names(ours[module]) and f"{module}.{node.attr}" not in ours
            if unbound or node.attr in passed_on(ours[module], ours):
                found.append(f"{path.relative_to(root)}:{node.lineno} takes {node.attr} from {module}")
    return found


# Every tree of ours is held to one name, one module.
ONE_NAME = PACKAGES
OURS = {module_name(p): p for p in [*modules(*PACKAGES), ROOT / "function_app.py"]}


@pytest.mark.parametrize(
    "path",
    [*modules(*ONE_NAME), ROOT / "function_app.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_import_names_the_module_that_defines_it(path):
    assert not indirect_imports(path, OURS)


@pytest.mark.parametrize(
    "path", [p for p in modules(*ONE_NAME) if p.name == "__init__.py"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_a_package_is_only_its_modules(path):
    """An `__init__` imports nothing: no re-export, no lazy attribute, no alias finder."""
    found = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__"
    ]
    assert not found, f"{path.relative_to(ROOT)} imports on lines {found}"


def test_the_import_check_finds_a_name_passed_on(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "home.py").write_text("THING = 1\nclass Kind: ...\n")
    (tmp_path / "pkg" / "middle.py").write_text("from pkg.home import THING, Kind\nOWN = THING\n")
    user = tmp_path / "user.py"
    user.write_text(
        "from pkg.middle import OWN, THING\nfrom pkg.home import Kind\nfrom pkg import home, middle\n"
        "import pkg.middle as m\nhome.Kind, middle.OWN, middle.Kind, m.THING\n"
    )
    ours = {module_name(p, tmp_path): p for p in tmp_path.rglob("*.py")}
    assert indirect_imports(user, ours, tmp_path) == [
        "user.py:1 takes THING from pkg.middle",
        "user.py:5 takes Kind from pkg.middle",
        "user.py:5 takes THING from pkg.middle",
    ]


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
