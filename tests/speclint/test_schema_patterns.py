"""speclint.schema.patterns: the ECMA-262 (u flag) checker agrees with Node's own RegExp on every pattern
of the table, and Python's verdict is re.compile's."""

from __future__ import annotations

import json
import re
import subprocess
import warnings

import pytest

from devstack.node import NODE22
from speclint.schema import patterns, unicode_properties

NODE = NODE22

# Patterns seen in tool schemas, Python-isms, PCRE-isms and the u flag's strict corners.
PATTERNS = [
    "^[a-z]+$", "^\\d{3}-\\d{4}$", "^[A-Za-z0-9+/]*={0,2}$", "^\\+?[1-9]\\d{1,14}$",
    "^https?://[^\\s/$.?#].[^\\s]*$", "^(?!\\s*$).+", "^[^\\x00-\\x1f]*$", "\\d{1,5000}",
    "^.+?$", "[\\p{L}\\d_-]+", "^\\p{L}+$", "\\P{Lu}", "\\u{1F600}", "\\u0041", "\\cJ", "\\0",
    "[\\b]", "\\b", "\\/", "[\\-]", "\\.\\*", "[^\\]]", "[]", "[^]", "()", "(?:a)*", "a{2}",
    "a{2,}", "(?<name>a)\\k<name>", "(?<!ab)c", "(?<=a+)b",
    # Python's named groups and inline flags, PCRE's anchors, possessives and atomic groups
    "^(?P<year>\\d{4})$", "(?i)^abc$", "(?i:abc)", "^\\A\\w+\\Z$", "\\Qa\\E", "a++", "(?>a)",
    "(?#comment)a", "\\h", "\\e", "[[:alpha:]]",
    # the u flag refuses identity escapes of non-syntax characters and lone brackets
    "^[\\w\\-\\.]+$", "^foo\\-bar$", "\\_", "\\ ", "[\\_]", "\\'", '\\"', "\\@", "{", "a}", "]",
    "a{,5}", "a\\b+", "(?=a)*",
    # group names are identifiers, Unicode ones too; \u escapes join surrogate pairs in u-mode
    "(?<café>a)", "(?<π>a)\\k<π>", "(?<a$_1>a)", "(?<a\\u0062>a)\\k<ab>", "(?<1a>a)",
    "(?<a-b>a)", "(?<>a)", "(?<a", "[\\uD83D\\uDE00-\\uD83D\\uDE4F]", "[\\uD83D\\uDE4F-\\uD83D\\uDE00]",
    "[\\uD83D-\\uDE00]", "[\\uDE00-\\uD83D]", "[\U0001F600-\U0001F64F]", "^\\uD83D\\uDE00+$",
    # property names ECMA-262 knows, case-sensitive
    "\\p{Script=Greek}", "\\p{sc=Grek}", "\\p{scx=Latn}", "\\p{General_Category=Letter}",
    "\\p{gc=Lu}", "\\p{ASCII}", "\\p{Any}", "\\p{Emoji}", "\\p{Lowercase}", "\\P{digit}",
    "\\p{Foo}", "\\p{lower}", "\\p{RGI_Emoji}", "\\p{Script=Foo}", "\\p{scx=Hrkt}", "\\p{ASCII=Y}",
    "\\p{Lu=Ll}", "[\\p{Letter}\\p{Nd}]",
    # plain mistakes
    "a{2,1}", "(?<n>a)(?<n>b)", "\\1(a)", "(a)\\2", "[z-a]", "[\\d-z]", "[a-\\d]", "\\x4",
    "\\c1", "\\00", "a|*", "(", ")", "x**", "\\u{110000}", "\\k<x>",
    # \u{...} takes leading zeros; group names take escaped surrogate pairs and ID_Start/ID_Continue
    # characters newer than Python's tables or outside XID (after NFKC)
    "\\u{0000000041}", "[\\u{0000000041}]", "\\u{00000110000}", "(?<\\u{0000061}>a)",
    "(?<\\uD835\\uDC9C>a)", "(?<a\\uD835\\uDC9C>a)", "(?<\\uD835>a)", "(?<ア・イ>a)", "(?<\U0002EBF0>a)",
    "(?<\u037a>a)", "(?<\u309b>a)", "(?<\u0e33>a)", "(?<a\u00b7>a)", "(?<\u00b7>a)", "(?<a b>a)",
    "(?<a.b>a)", "(?<\u2603>a)", "(?<\\u2e2f>a)", "(?<\\ufdd0>a)", "(?<a\\uffff>a)",
    "(?<\\u{D835}\\uDC9C>a)", "(?<\\uD835\\u{DC9C}>a)", "(?<\ud835\\uDC9C>a)", "[\\u{D83D}\\uDE00-\\uDE4F]",
]  # fmt: skip


@pytest.fixture(scope="module")
def node_verdicts() -> dict[str, str | None]:
    if not NODE.exists():
        pytest.fail("Node 22 is missing: run `make test`, which installs it first (devstack/node22)")
    script = (
        "const ps = JSON.parse(require('fs').readFileSync(0, 'utf8')); const out = {};"
        "for (const p of ps) { try { new RegExp(p, 'u'); out[p] = null } catch (e) { out[p] = e.message } }"
        "process.stdout.write(JSON.stringify(out));"
    )
    done = subprocess.run(
        [str(NODE), "-e", script], input=json.dumps(PATTERNS), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_ecma_verdict_matches_node(pattern, node_verdicts):
    mine = patterns.ecma_error(pattern)

    assert (mine is None) == (node_verdicts[pattern] is None), (node_verdicts[pattern], mine)


def test_the_table_holds_both_verdicts(node_verdicts):
    valid = [p for p, error in node_verdicts.items() if error is None]
    assert 20 <= len(valid) <= len(PATTERNS) - 20


@pytest.mark.parametrize("pattern", PATTERNS)
def test_python_verdict_is_re_compile(pattern):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(pattern)
        expected = None
    except re.error:
        expected = "error"
    assert (patterns.python_error(pattern) is None) == (expected is None)


def test_every_property_name_speclint_knows_compiles_in_node():
    names = [f"\\p{{{v}}}" for v in unicode_properties.GENERAL_CATEGORY | unicode_properties.BINARY]
    names += [f"\\p{{gc={v}}}" for v in unicode_properties.GENERAL_CATEGORY]
    names += [f"\\p{{{k}={v}}}" for k in ("sc", "Script_Extensions") for v in unicode_properties.SCRIPT]
    assert len(names) > 500
    script = (
        "const ps = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "const bad = ps.filter(p => { try { new RegExp(p, 'u'); return false } catch { return true } });"
        "process.stdout.write(JSON.stringify(bad));"
    )
    done = subprocess.run([str(NODE), "-e", script], input=json.dumps(names), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    assert all(patterns.ecma_error(name) is None for name in names)


def test_errors_are_one_line_and_say_where():
    message = patterns.ecma_error("^(?P<year>\\d{4})$")
    assert message is not None and "position 1" in message and "\n" not in message
