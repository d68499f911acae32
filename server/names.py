"""The one policy for names people see (a person's, an account's, a table's, a championship's),
applied wherever a name enters: sign-in (device, password, an OIDC token's claim), a profile,
JoinTable, CreateTable, a championship, an operator's rename.

A name is NFC, trimmed, its runs of spaces made one, 1..limit characters; it holds no control,
format (bidi overrides, zero-width), private, unassigned or line-breaking character and no blank
letter; no letter carries more than three accents; it shows something; it is written in one
script (Common characters such as digits and punctuation go with any, and the scripts a
language mixes, Latin with Han and the Japanese kana, or with Hangul, go together); and it is
not one the server keeps for itself ("Bot 2", "admin", "(deleted)", ...).

Two accounts may not share a name: ``name_key`` folds a name to what it looks like (NFKC,
Unicode's confusable characters to their Latin prototype, as UTS #39's skeleton does, case,
spaces and joining punctuation), so "Ana", "ANA", "A n a" and "Аna" with a Cyrillic A are one
name. The confusables are Unicode's, from the confusable-homoglyphs package.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from importlib import resources

from server.errors import ServiceError

PERSON_MAX = 32  # an account's or a seat's name
TABLE_MAX = 64  # a table's or a championship's name
_FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# Characters that show nothing: Unicode's Default_Ignorable_Code_Point (variation selectors,
# the combining grapheme joiner, fillers, ...), blank letters and symbols.
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
              (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
              (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
              (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
              (0xE0000, 0xE0FFF))
_BLANK = {"\u2800", "\U0001D159"}


def _is_invisible(c: str) -> bool:
    code = ord(c)
    return c in _BLANK or any(low <= code <= high for low, high in _IGNORABLE)
_MARKS = {"Mn", "Me", "Mc"}
_SPACES = re.compile(r"[^\S\n\r\t\v\f\x1c-\x1f\x85\u2028\u2029]+")  # spaces, not breaks
_BOT_NAME = re.compile(r"bot\s*\d+")
# What the server calls itself, its operators and the forgotten (compared by name_key).
RESERVED = ("admin", "administrator", "operator", "moderator", "copas", "server", "system",
            "root", "support", "staff", "(deleted)", "deleted", "bot", "anonymous")
# Scripts one name may mix (a language writes them together), besides Common and Inherited.
_MIXES = ({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}, {"LATIN", "HAN", "HANGUL"},
          {"LATIN", "HAN", "BOPOMOFO"})
_NEUTRAL = {"COMMON", "INHERITED"}
# Joining punctuation a look-alike may add or leave out ("Ana_", "A.na").
_IGNORED_IN_KEY = set(" _-.·'’`\u00b7")


def _invalid(text: str, reason: str = "INVALID_NAME") -> ServiceError:
    return ServiceError.invalid(text, reason)


def clean(value: str, limit: int, *, field: str = "display_name", required: bool = True,
          is_reserved_checked: bool = True) -> str:
    """``value`` as a name people will see, by the policy above ("" when empty and not
    ``required``).

    :raises ServiceError: INVALID_NAME (with what is wrong), NAME_RESERVED.
    """
    if len(value) > limit * 4:
        raise _invalid(f"{field} is at most {limit} characters")
    name = unicodedata.normalize("NFC", value)
    bad = next((c for c in name if unicodedata.category(c) in _FORBIDDEN or _is_invisible(c)),
               None)
    if bad is not None:
        raise _invalid(f"{field} may not contain control, formatting or blank characters "
                       f"(U+{ord(bad):04X})")
    name = _SPACES.sub(" ", name).strip(" ")
    if not name:
        if required:
            raise _invalid(f"{field} must be 1..{limit} characters")
        return ""
    if len(name) > limit:
        raise _invalid(f"{field} is at most {limit} characters")
    marks = 0
    for c in name:
        marks = marks + 1 if unicodedata.category(c) in _MARKS else 0
        if marks > 3:
            raise _invalid(f"{field} stacks too many accents on one letter")
    if not any(not c.isspace() and unicodedata.category(c) not in _MARKS for c in name):
        raise _invalid(f"{field} must show something")
    if unicodedata.category(name[0]) in _MARKS:
        raise _invalid(f"{field} may not begin with an accent")
    directions = {unicodedata.bidirectional(c) for c in name}
    if directions & {"R", "AL"} and "L" in directions:
        raise _invalid(f"{field} mixes right-to-left and left-to-right letters: write it in "
                       "one direction")
    scripts = _scripts(name) - _NEUTRAL
    if len(scripts) > 1 and not any(scripts <= mix for mix in _MIXES):
        raise _invalid(f"{field} mixes scripts ({', '.join(sorted(scripts)).lower()}): "
                       "write it in one")
    if is_reserved_checked and is_reserved(name):
        raise ServiceError.invalid(f"{field} is one the server keeps for itself (its bots, "
                                   "its operators): choose another", "NAME_RESERVED")
    return name


def person(value: str, *, required: bool = True) -> str:
    """A person's or an account's name (1..32 characters)."""
    return clean(value, PERSON_MAX, required=required)


def is_reserved(name: str) -> bool:
    key = name_key(name)
    return key in _RESERVED_KEYS() or _BOT_NAME.fullmatch(name.casefold()) is not None \
        or _BOT_NAME.fullmatch(key) is not None


@functools.cache
def _RESERVED_KEYS() -> frozenset[str]:
    return frozenset(name_key(r) for r in RESERVED)


def name_key(name: str) -> str:
    """What ``name`` looks like, for uniqueness: two names with one key are one name."""
    folds = _prototypes()
    text = unicodedata.normalize("NFKC", name)
    out = []
    for c in text:
        for d in folds.get(c, c).casefold():
            d = folds.get(d, d)
            if d not in _IGNORED_IN_KEY and unicodedata.category(d) not in _MARKS \
                    and unicodedata.category(d) not in _FORBIDDEN:
                out.append(d.casefold())
    key = "".join(out)
    return key.replace("rn", "m").replace("vv", "w")


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character to its class's prototype: the characters Unicode's
    confusables (as the confusable-homoglyphs package ships them) say look alike, joined
    into classes (a look-alike of a look-alike is one), each folded to its ASCII letter (a
    lower-case one first), else its digit, else its lowest character: "а" (Cyrillic) to "a",
    "力" to "カ", "0" to "O", "1" and "I" to "l"."""
    data = json.loads(resources.files("confusable_homoglyphs")
                      .joinpath("confusables.json").read_text(encoding="utf-8"))
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while (up := parent.get(x, x)) != x:
            parent[x] = parent.get(up, up)
            x = up
        return x

    for char, homoglyphs in data.items():
        if len(char) != 1:
            continue
        for glyph in homoglyphs:
            shape = glyph["c"]
            if len(shape) == 1 and root(char) != root(shape):
                parent[root(char)] = root(shape)
    classes: dict[str, list[str]] = {}
    for char in parent.keys() | {c for c in data if len(c) == 1}:
        classes.setdefault(root(char), []).append(char)
    folds: dict[str, str] = {}
    for members in classes.values():
        ascii_alnum = sorted(c for c in members if c.isascii() and c.isalnum())
        prototype = min(ascii_alnum, key=lambda c: (not c.islower(), not c.isalpha(), c)) \
            if ascii_alnum else min(members)
        for char in members:
            if char != prototype:
                folds[char] = prototype
    return folds


def preload() -> None:
    """Reads Unicode's confusables and scripts now (about 0.3 s of one core, once per
    process): the server does it at start, off its event loop, so the first name a client
    sends does not hold the loop."""
    _prototypes()
    _RESERVED_KEYS()
    _scripts("Ana")


def _scripts(name: str) -> set[str]:
    from confusable_homoglyphs import categories

    return set(categories.unique_aliases(name))
