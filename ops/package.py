"""The zip that a publish uploads, built here so it can be read and tested before Azure runs it.

    python -m ops.package [--output PATH]        (`make package`; default dist/storefront.zip)
    python -m ops.package --check                (azd's prepackage hook: the checks, no zip)

The zip holds the tree minus what `.funcignore` excludes and the names Core Tools never ships. It
is written only when Core Tools and azd read `.funcignore` alike and git tracks every file in it,
and the same tree gives the same bytes. Why, and how the two readings differ:
docs/deploying.md#the-package.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = Path("dist") / "storefront.zip"
NEVER_SHIPPED_DIRS = frozenset({".git", ".vscode"})
# `.git` is a file, not a folder, in a git worktree or submodule: a pointer, treated as the folder.
NEVER_SHIPPED_FILES = frozenset(
    {".git", ".funcignore", ".gitignore", "local.settings.json", "project.lock.json"}
)
REQUIRED = ("function_app.py", "host.json", "requirements.txt")
_REGEX_SPECIALS = re.compile(r"[-\[\]/{}()+?.\\^$|]")


class PackageError(Exception):
    """The tree cannot be packaged as it stands; the message says what to change."""


def package_files(root: Path = ROOT, allow_untracked: bool = False) -> list[str]:
    """The paths (relative, `/`-separated) a publish of `root` uploads, checked as the module says
    (`allow_untracked` lists files git does not track instead of refusing them)."""
    patterns = _funcignore(root)
    by_core_tools = _core_tools_reading(root, patterns)
    by_gitignore = _gitignore_reading(root)
    if by_core_tools != by_gitignore:
        raise PackageError(
            ".funcignore means different things to Core Tools and to gitignore readers (azd, git); "
            "write a pattern both exclude (a nested folder needs '**/name' for Core Tools):\n"
            + _listing("only Core Tools ships", by_core_tools - by_gitignore)
            + _listing("only gitignore readers ship", by_gitignore - by_core_tools)
        )
    ignored = _ignored_by_git(root, by_core_tools)
    if ignored:
        raise PackageError(
            "a publish would ship files git ignores; add them to .funcignore:\n"
            + _listing("ignored by git", ignored)
        )
    untracked = set() if allow_untracked else _untracked(root, by_core_tools)
    if untracked:
        raise PackageError(
            "a publish would ship files git does not track; delete them, `git add` the ones that are "
            "part of the app, or add them to .funcignore:\n" + _listing("untracked", untracked)
        )
    missing = [name for name in REQUIRED if name not in by_core_tools]
    if missing:
        raise PackageError(f"the package lacks {', '.join(missing)}, which Azure needs to run the app")
    return sorted(by_core_tools)


def build(output: Path, root: Path = ROOT, allow_untracked: bool = False) -> list[str]:
    """Write the package to `output` (replacing it whole) and return the paths it holds
    (`allow_untracked` as for `package_files`)."""
    files = package_files(root, allow_untracked)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=output.parent, suffix=".tmp", delete=False) as tmp:
        try:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
                for name in files:
                    entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                    entry.create_system = 3  # Unix, so the mode below is honoured where it is unpacked
                    entry.external_attr = 0o100644 << 16
                    entry.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(entry, (root / name).read_bytes())
        except BaseException:
            os.unlink(tmp.name)
            raise
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, output)
    return files


def core_tools_matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """`.funcignore` lines as Core Tools applies them: a function telling whether a path ships."""
    positive: list[str] = []
    negative: list[str] = []
    for line in patterns:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line
        line = line[1:] if line.startswith("/") else line
        (negative if negated else positive).append(line)
    deny, keep = _core_tools_regex(positive), _core_tools_regex(negative)
    return lambda path: bool(keep and keep.match(path)) or not (deny and deny.match(path))


def _core_tools_regex(patterns: list[str]) -> re.Pattern | None:
    if not patterns:
        return None
    parts = [
        _REGEX_SPECIALS.sub(lambda m: "\\" + m.group(), p).replace("**", "(.+)").replace("*", "([^/]+)")
        for p in sorted(patterns)
    ]
    return re.compile("^((" + ")|(".join(parts) + r"))\b", re.ASCII)


def _funcignore(root: Path) -> list[str]:
    path = root / ".funcignore"
    return path.read_text(encoding="utf-8").split("\n") if path.is_file() else []


def _core_tools_reading(root: Path, patterns: list[str]) -> set[str]:
    ships = core_tools_matcher(patterns)
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d.lower() not in NEVER_SHIPPED_DIRS]
        base = Path(folder).relative_to(root)
        for name in files:
            path = (base / name).as_posix()
            if name.lower() not in NEVER_SHIPPED_FILES and ships(path):
                found.add(path)
    return found


def _gitignore_reading(root: Path) -> set[str]:
    """git's own gitignore matcher over every file, as if none were tracked (an empty index)."""
    with tempfile.TemporaryDirectory() as empty:
        listed = _git(
            root,
            ["ls-files", "-z", "--others", "--exclude-from=" + str(root / ".funcignore")],
            env={"GIT_INDEX_FILE": os.path.join(empty, "index")},
        )
    return {
        path
        for path in listed
        if path.rsplit("/", 1)[-1].lower() not in NEVER_SHIPPED_FILES
        and not NEVER_SHIPPED_DIRS & {part.lower() for part in path.split("/")[:-1]}
    }


def _ignored_by_git(root: Path, paths: Iterable[str]) -> set[str]:
    return set(_git(root, ["check-ignore", "-z", "--stdin"], stdin="\0".join(sorted(paths)), ok=(0, 1)))


def _untracked(root: Path, paths: Iterable[str]) -> set[str]:
    return set(paths) & set(_git(root, ["ls-files", "-z", "--others", "--exclude-standard"]))


def _git(
    root: Path, args: list[str], env: dict | None = None, stdin: str = "", ok: tuple[int, ...] = (0,)
) -> list[str]:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            input=stdin.encode(),
            capture_output=True,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except FileNotFoundError:
        raise PackageError("git is not installed: the package is checked against git's own reading") from None
    if done.returncode not in ok:
        raise PackageError(f"git {args[0]} failed: {done.stderr.decode().strip()}")
    return [p for p in done.stdout.decode().split("\0") if p]


def _listing(title: str, paths: Iterable[str]) -> str:
    paths = sorted(paths)
    return "".join(f"  {title}: {p}\n" for p in paths[:20]) + (
        f"  ... and {len(paths) - 20} more\n" if len(paths) > 20 else ""
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.package", description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / DEFAULT_OUTPUT)
    parser.add_argument(
        "--check", action="store_true", help="refuse as the build would, write nothing (azd zips itself)"
    )
    args = parser.parse_args(argv)
    output = args.output.resolve()
    try:
        files = package_files() if args.check else build(output)
    except PackageError as error:
        print(f"package: {error}", file=sys.stderr)
        return 1
    if args.check:
        print(f"package: the {len(files)} files a publish ships are all tracked by git")
        return 0
    if output.parent == ROOT / DEFAULT_OUTPUT.parent:
        (output.parent / ".gitignore").write_text("# Built by `make package`; never committed.\n*\n")
    for name in files:
        print(f"  {name}")
    shown = output.relative_to(ROOT) if output.is_relative_to(ROOT) else output
    print(f"{shown}: {len(files)} files, {output.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
