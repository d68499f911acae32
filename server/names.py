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
# Letters that show nothing (Hangul fillers, the braille blank).
_BLANK = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}
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
_ASCII_FOLDS = {"0": "o", "1": "l", "I": "l", "|": "l"}


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
    bad = next((c for c in name if unicodedata.category(c) in _FORBIDDEN or c in _BLANK),
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
        c = _ASCII_FOLDS.get(c, folds.get(c, c))
        for d in c.casefold():
            d = _ASCII_FOLDS.get(d, d)
            if d not in _IGNORED_IN_KEY and unicodedata.category(d) not in _MARKS \
                    and unicodedata.category(d) not in _FORBIDDEN:
                out.append(d)
    key = "".join(out)
    return key.replace("rn", "m").replace("vv", "w")


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character with an ASCII letter or digit among its look-alikes, to the
    first such (Unicode's confusables, as the confusable-homoglyphs package ships them)."""
    data = json.loads(resources.files("confusable_homoglyphs")
                      .joinpath("confusables.json").read_text(encoding="utf-8"))
    folds: dict[str, str] = {}
    for char, homoglyphs in data.items():
        if len(char) != 1 or (char.isascii() and char.isalnum()):
            continue
        for glyph in homoglyphs:
            shape = glyph["c"]
            if len(shape) == 1 and shape.isascii() and shape.isalnum():
                folds[char] = shape
                break
    return folds


def _scripts(name: str) -> set[str]:
    from confusable_homoglyphs import categories

    return set(categories.unique_aliases(name))
