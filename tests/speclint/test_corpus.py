"""The real-world corpus in tests/fixtures/speclint_corpus (dumped by speclint.corpus.dump): the dumps are
well-formed, every tool carries one side-effect label, and today's speclint reads every real schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speclint.cli import main
from speclint.corpus import peers as speclint_peers
from speclint.corpus.dump import SERVERS
from speclint.findings import Finding
from speclint.load import tools_from
from speclint.rules.lint import lint
from tests.support import ROOT

CORPUS = Path(__file__).parents[1] / "fixtures" / "speclint_corpus"
LABELS = json.loads((CORPUS / "labels.json").read_text())
LABEL_CLASSES = {"reads-only", "retry-safe", "retry-unsafe"}
DUMPS = sorted(p for p in CORPUS.glob("*.json") if p.name != "labels.json")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def corpus_tool_keys() -> list[str]:
    return [f"{load(p)['server']}/{tool['name']}" for p in DUMPS for tool in load(p)["tools"]]


def test_corpus_holds_at_least_eight_servers_and_eighty_tools():
    assert len(DUMPS) >= 8
    assert len(corpus_tool_keys()) >= 80


def test_every_server_of_the_dump_script_has_a_fixture_and_no_fixture_is_stray():
    assert {p.stem for p in DUMPS} == {server.name for server in SERVERS}


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_dump_names_its_pinned_package_and_lists_tools_with_schemas(path: Path):
    document = load(path)
    pinned = {server.name: server for server in SERVERS}[path.stem]
    assert document["server"] == path.stem
    assert (document["package"], document["version"], document["ecosystem"]) == (
        pinned.package,
        pinned.version,
        pinned.ecosystem,
    )
    assert document["tools"]
    names = [tool["name"] for tool in document["tools"]]
    assert len(names) == len(set(names)), "a server lists a tool name twice"
    for tool in document["tools"]:
        assert isinstance(tool["name"], str) and tool["name"]
        assert isinstance(tool["inputSchema"], dict)
        assert tool["inputSchema"].get("type") == "object"


def test_every_tool_has_exactly_one_label_and_every_label_names_a_tool():
    keys = corpus_tool_keys()
    assert len(keys) == len(set(keys))
    assert sorted(LABELS) == sorted(keys)


@pytest.mark.parametrize("key", sorted(LABELS))
def test_label_is_a_known_class_with_a_one_line_reason(key: str):
    entry = LABELS[key]
    assert set(entry) == {"label", "reason"}
    assert entry["label"] in LABEL_CLASSES
    assert entry["reason"].strip() and "\n" not in entry["reason"]


def test_labels_use_every_class():
    assert {entry["label"] for entry in LABELS.values()} == LABEL_CLASSES


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_speclint_lints_every_real_schema_without_crashing(path: Path):
    tools = tools_from(load(path), str(path))
    findings = lint(tools)
    assert all(isinstance(f, Finding) for f in findings)
    assert {f.tool for f in findings} <= {tool["name"] for tool in tools}


@pytest.mark.parametrize("output_format", ["text", "json", "sarif"])
@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_speclint_cli_renders_every_real_manifest(path: Path, output_format: str, capsys):
    code = main([str(path), "--format", output_format, "--fail-on", "never"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err == ""
    if output_format != "text":
        json.loads(out)


# ---------------------------------------------------------------- targets on the corpus


def corpus_findings() -> list[tuple[str, Finding]]:
    """(server, finding) for every finding on every dump."""
    out = []
    for path in DUMPS:
        document = load(path)
        out.extend((document["server"], f) for f in lint(document["tools"]))
    return out


def label(server: str, finding: Finding) -> str:
    return LABELS[f"{server}/{finding.tool}"]["label"]


def test_sl001_never_fires_on_a_tool_that_only_reads():
    wrong = [
        f"{s}/{f.tool}" for s, f in corpus_findings() if f.rule_id == "SL001" and label(s, f) == "reads-only"
    ]
    assert wrong == []


def test_sl001_fires_on_at_least_nine_in_ten_retry_unsafe_tools():
    unsafe = {key for key, entry in LABELS.items() if entry["label"] == "retry-unsafe"}
    fired = {f"{s}/{f.tool}" for s, f in corpus_findings() if f.rule_id == "SL001"}
    caught = unsafe & fired
    assert len(caught) / len(unsafe) >= 0.9, (
        f"caught {len(caught)} of {len(unsafe)}; missed {sorted(unsafe - fired)}"
    )


def test_every_high_sl001_finding_is_a_retry_unsafe_tool():
    highs = [(s, f) for s, f in corpus_findings() if f.rule_id == "SL001" and f.severity == "high"]
    assert highs, "the corpus has retry-unsafe tools without keys: SL001 must say so at high"
    assert [f"{s}/{f.tool}" for s, f in highs if label(s, f) != "retry-unsafe"] == []


def test_no_other_rule_is_high_on_the_corpus():
    """SL004 is high only for what an engine rejects (none of these schemas; see
    tests/speclint/test_engines.py), SL006 only for a schema no call can satisfy or no client can compile:
    a new high finding here must be checked by hand and its tool added to this test."""
    others = [
        (s, f.rule_id, f.tool, f.path)
        for s, f in corpus_findings()
        if f.severity == "high" and f.rule_id != "SL001"
    ]
    assert others == []


@pytest.mark.parametrize("server", ["time", "fetch", "sequential-thinking"])
def test_default_gate_passes_on_the_fully_annotated_read_only_servers(server, capsys):
    code = main([str(CORPUS / f"{server}.json")])
    out, _ = capsys.readouterr()
    assert code == 0, out


HOSTILE = json.loads((CORPUS.parent / "speclint_hostile.json").read_text())["schemas"]


def test_speclint_reports_every_crafted_schema_an_engine_rejects_at_high():
    """End to end, through lint: a schema an engine rejects gets a high SL004 finding (or
    the SL006 finding it merged into); one every engine accepts gets no SL004 at all."""
    rejected = [case for case in HOSTILE if "rejected" in case["verdict"].values()]
    clean = [case for case in HOSTILE if set(case["verdict"].values()) == {"ok"}]
    caught, noisy = [], []
    for case in rejected + clean:
        findings = lint([{"name": "t", "inputSchema": case["schema"]}])
        high = [f for f in findings if f.rule_id in ("SL004", "SL006") and f.severity == "high"]
        if case in rejected and high:
            caught.append(case["name"])
        if case in clean and any(f.rule_id == "SL004" for f in findings):
            noisy.append(case["name"])
    assert len(caught) / len(rejected) >= 12 / 14, f"caught {len(caught)} of {len(rejected)}"
    assert noisy == []


# ---------------------------------------------------------------- the peer table in docs/speclint.md

PEERS = json.loads((ROOT / "docs" / "speclint-peers.json").read_text())


def test_the_peer_files_speclint_column_is_todays_speclint():
    stale = {}
    for path in DUMPS:
        document = load(path)
        hits = speclint_peers.speclint_hits(document, path)
        if PEERS["servers"][document["server"]]["speclint"] != speclint_peers.tally(hits):
            stale[document["server"]] = speclint_peers.tally(hits)
    refresh = "python -m speclint.corpus.peers --speclint-only"
    assert stale == {}, f"run `{refresh}` to refresh docs/speclint-peers.json"


def test_docs_show_the_table_the_peer_file_makes():
    page = (ROOT / "docs" / "speclint.md").read_text()
    assert speclint_peers.summary_table(PEERS) in page, "paste `python -m speclint.corpus.peers --table`"
