"""Mutation testing of the core modules with mutmut: `python -m tests.mutation [target ...]`
(`make mutate`). For each target it mutates one module, runs that module's in-process tests
against every mutant and prints the share of mutants they catch; the targets with a floor fail
the run when their score is below it.

mutmut wants its configuration in the working directory and copies the code it mutates into
`mutants/` there, so each target runs in its own directory outside the checkout (it is printed,
and kept until the next run for `mutmut show` and `mutmut browse`): links to the repository's
code, tests and local stack, and a `setup.cfg` naming what to mutate. Every run starts afresh.

A mutant the tests do not catch either shows a gap in them or is equivalent: it behaves as the
original does for every input. `equivalent.toml` lists the ones judged equivalent, each by its
function and diff, with the reason; they are left out of the score. An entry that matches no
mutant any more, or a mutant the tests now catch, is reported so the list does not go stale.

One Azurite and one sandbox serve the whole run (`plugin.py` hands them to every worker). A
worker mutmut kills at its timeout may leave a dev host behind; this process adopts such orphans
(it is their subreaper) and ends them.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from tests.mutation.plugin import start_services
from tests.mutation.targets import TARGETS, Target

if sys.version_info >= (3, 11):
    import tomllib
else:  # mutmut brings `toml` on 3.10
    import toml as tomllib

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EQUIVALENTS = HERE / "equivalent.toml"
MUTMUT = Path(sys.executable).with_name("mutmut")
LINKED = ("shared", "tests", "devstack", "function_app.py", "host.json", "local.settings.json.example")
CAUGHT = {"killed", "timeout", "segfault"}  # a worker that crashed or hung failed the tests too
SEPARATOR = "ǁ"  # how mutmut names a class's method: xǁClassǁmethod
# A worker's wall-clock limit is (its tests' own time + TIMEOUT_CONSTANT) * TIMEOUT_MULTIPLIER:
# the constant covers starting Azurite and the sandbox on a busy machine.
TIMEOUT_CONSTANT = 30
TIMEOUT_MULTIPLIER = 2


@dataclass(frozen=True)
class Mutant:
    name: str  # shared.purchase.storefront.xǁStorefrontǁ_record__mutmut_7
    status: str

    @property
    def function(self) -> str:
        """`Class.method` or `function`, as equivalent.toml names it."""
        mangled = self.name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[1]
        if mangled.startswith("x" + SEPARATOR):
            return ".".join(mangled[2:].split(SEPARATOR))
        return mangled.removeprefix("x_")

    @property
    def caught(self) -> bool:
        return self.status in CAUGHT


@dataclass(frozen=True)
class Score:
    label: str
    caught: int
    total: int
    equivalent: int

    @property
    def percent(self) -> float:
        judged = self.total - self.equivalent
        return 100.0 * self.caught / judged if judged else 100.0

    def line(self, floor: float = 0.0) -> str:
        missed = self.total - self.equivalent - self.caught
        gate = f" (floor {floor:g} %)" if floor else ""
        return (
            f"  {self.label:<34} {self.total:>4} mutants  {self.caught:>4} caught  {missed:>3} missed  "
            f"{self.equivalent:>3} equivalent  score {self.percent:5.1f} %{gate}"
        )


def main(argv: list[str] | None = None) -> int:
    names = [t.name for t in TARGETS]
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", metavar="target", help=f"some of {', '.join(names)} (all)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "2")))
    parser.add_argument("--workdir", type=Path, default=_default_workdir())
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help=(
            "only the mutants whose mutmut name matches,"
            " e.g. 'shared.purchase.operation.xǁPurchaseOperationǁguard*'"
        ),
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="judge and score the last run's results again (after editing equivalent.toml), running nothing",
    )
    args = parser.parse_args(argv)
    unknown = set(args.targets) - set(names)
    if unknown:
        parser.error(f"no target {', '.join(sorted(unknown))}; the targets are {', '.join(names)}")
    chosen = [t for t in TARGETS if not args.targets or t.name in args.targets]
    if args.only:  # each glob names its module: shared.purchase.operation.…
        chosen = [t for t in chosen if any(g.startswith(t.module + ".") for g in args.only)]
    equivalents = _load_equivalents()
    _become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the run's services on the way out
    failed = []
    summary = []
    for target in chosen:
        started = time.monotonic()
        staging = args.workdir / target.name
        only = [g for g in args.only if g.startswith(target.module + ".")]
        if not args.report_only:
            _run(target, _stage(target, staging), args.jobs, only)
        mutants = _results(target, staging, only)
        elapsed = None if args.report_only else time.monotonic() - started
        scores, ok = _report(target, staging, mutants, equivalents, elapsed)
        summary += [(score, elapsed if i == 0 else None) for i, score in enumerate(scores)]
        if not ok:
            failed.append(target.name)
    print("\nmutation scores (caught / non-equivalent mutants)")
    for score, elapsed in summary:
        print(score.line() + (f"  {_minutes(elapsed)}" if elapsed is not None else ""))
    if failed:
        print(f"\nbelow the floor: {', '.join(failed)}")
        return 1
    return 0


def _default_workdir() -> Path:
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"storefront-mutation-{checkout}"


def _stage(target: Target, staging: Path) -> Path:
    """A fresh directory for mutmut: links to the code and tests, and its configuration."""
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "mutants").mkdir(parents=True)
    for name in LINKED:
        (staging / name).symlink_to(ROOT / name)
    # Azurite comes from the repository's node_modules, found next to the tests mutmut copies.
    (staging / "mutants" / "node_modules").symlink_to(ROOT / "node_modules")
    shutil.copy2(ROOT / "pyproject.toml", staging / "pyproject.toml")  # pytest's settings
    lines = [
        "[mutmut]",
        "source_paths = shared",
        f"only_mutate = {target.source}",
        "also_copy =",
        *(f"    {name}" for name in LINKED if name not in ("shared", "tests")),
        "pytest_add_cli_args_test_selection =",
        *(f"    {test}" for test in target.tests),
        "pytest_add_cli_args =",
        "    -p",
        "    tests.mutation.plugin",
        "    -p",
        "    no:cacheprovider",
        f"timeout_constant = {TIMEOUT_CONSTANT}",
        f"timeout_multiplier = {TIMEOUT_MULTIPLIER}",
        "use_git_change_detection = false",
    ]
    (staging / "setup.cfg").write_text("\n".join(lines) + "\n")
    return staging


def _run(target: Target, staging: Path, jobs: int, only: list[str]) -> None:
    print(f"\n== {target.name}: mutating {target.source}, testing with {' '.join(target.tests)}")
    print(f"   in {staging} (mutmut's log: mutmut.log there)", flush=True)
    command = [str(MUTMUT), "run", "--max-children", str(jobs), *only]
    log = staging / "mutmut.log"
    env, services = start_services(staging)
    try:
        with log.open("w") as out:
            process = subprocess.Popen(
                command,
                cwd=staging,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                # A run started in the background has SIGINT ignored, and mutmut would inherit that:
                # it gets the default back, so the SIGINT below stops it wherever this was started.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            try:
                while process.poll() is None:
                    _end_orphans({process.pid, *(s.pid for s in services)})
                    time.sleep(1)
            finally:
                if process.poll() is None:  # interrupted: mutmut stops its workers on SIGINT
                    process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    finally:
        for service in services:
            service.terminate()
            service.wait(10)
        _end_orphans(set())
    if process.returncode != 0:
        tail = log.read_text(errors="replace").replace("\r", "\n").splitlines()[-60:]
        print("\n".join(tail))
        sys.exit(f"mutmut failed on {target.name} (exit {process.returncode}); its log: {log}")


def _results(target: Target, staging: Path, only: list[str]) -> list[Mutant]:
    """Every mutant of the target's module in the last run, with its status."""
    listing = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"], cwd=staging, capture_output=True, text=True, check=True
    ).stdout
    mutants = []
    for line in listing.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name.startswith(target.module + ".") and (not only or any(fnmatch(name, g) for g in only)):
            mutants.append(Mutant(name, status))
    return mutants


# What `mutmut show` prints, for many mutants in one process (mutmut's own function for it).
_SHOW = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
json.dump({name: get_diff_for_mutant(name) for name in json.load(sys.stdin)}, sys.stdout)
"""


def _diffs(staging: Path, mutants: list[Mutant]) -> dict[str, list[str]]:
    """Each mutant's changed lines, each as its sign and the stripped line."""
    shown = subprocess.run(
        [sys.executable, "-c", _SHOW],
        cwd=staging,
        input=json.dumps([m.name for m in mutants]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        name: [
            f"{line[0]} {line[1:].strip()}"
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        for name, diff in json.loads(shown).items()
    }


def _report(
    target: Target, staging: Path, mutants: list[Mutant], equivalents: list[dict], elapsed: float | None
) -> tuple[list[Score], bool]:
    listed = [e for e in equivalents if e["module"] == target.source]
    missed, matched = [], set()
    equivalent: set[str] = set()
    judged = {e["function"] for e in listed}
    looked_at = [m for m in mutants if not m.caught or m.function in judged]
    diffs = _diffs(staging, looked_at)
    for mutant in looked_at:
        diff = diffs[mutant.name]
        entry = next(
            (
                (i, j)
                for i, e in enumerate(listed)
                for j, d in enumerate(e["diffs"])
                if e["function"] == mutant.function and d == diff
            ),
            None,
        )
        if entry is not None:
            matched.add(entry)
            if mutant.caught:
                print(f"  listed as equivalent, yet caught: {mutant.name} ({' / '.join(diff)})")
            else:
                equivalent.add(mutant.name)
        elif not mutant.caught:
            missed.append((mutant, diff))

    def score(label: str, group: list[Mutant]) -> Score:
        caught = sum(m.caught for m in group)
        return Score(label, caught, len(group), sum(m.name in equivalent for m in group))

    prefix = f"{target.module}.x{SEPARATOR}{target.scope}{SEPARATOR}"
    if target.scope:
        inside = [m for m in mutants if m.name.startswith(prefix)]
        scores = [
            score(f"{target.source} {target.scope}", inside),
            score(f"{target.source} (the rest)", [m for m in mutants if m not in inside]),
        ]
    else:
        scores = [score(target.source, mutants)]
    counts = Counter(m.status for m in mutants)
    took = f" in {_minutes(elapsed)}" if elapsed is not None else ""
    print(f"\n{target.name}: {len(mutants)} mutants{took} ({dict(counts)})")
    for mutant, diff in missed:
        print(f"  missed ({mutant.status}): {mutant.name}")
        for line in diff:
            print(f"      {line}")
    for i, entry in enumerate(listed):
        for j, diff in enumerate(entry["diffs"]):
            if (i, j) not in matched:
                print(f"  equivalent.toml lists what no mutant is any more: {entry['function']} {diff}")
    print(scores[0].line(target.floor))
    for extra in scores[1:]:
        print(extra.line())
    return scores, scores[0].percent >= target.floor


def _load_equivalents() -> list[dict]:
    """The judged mutants: each entry names a module and a function, the reason, and the mutants'
    diffs (`diffs`, a list of diffs, each a list of changed lines as `_diff` gives them)."""
    entries = tomllib.loads(EQUIVALENTS.read_text())["equivalent"] if EQUIVALENTS.exists() else []
    for entry in entries:
        missing = {"module", "function", "diffs", "why"} - entry.keys()
        if missing:
            sys.exit(f"{EQUIVALENTS.name}: an entry lacks {', '.join(sorted(missing))}: {entry}")
    return entries


def _become_subreaper() -> None:
    """Orphaned descendants (a killed worker's Azurite) are re-parented to this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        print("warning: cannot adopt orphaned workers' services; a timed-out worker's Azurite may linger")


def _end_orphans(keep: set[int]) -> None:
    """End this process's children but those in `keep`: the rest are orphans re-parented here."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in keep:
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == me:
                os.kill(int(entry.name), signal.SIGKILL)
                os.waitpid(int(entry.name), 0)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


if __name__ == "__main__":
    sys.exit(main())
