"""The one tokenizer of holon's search: the terms every index is built and queried by.

:func:`terms` gives episode selection's words (folded, any script, stop words dropped);
:func:`search_terms` gives memory search's, those words and then every identifier
written with ``. / : # @ \\`` kept whole and by its neighbouring parts. Both are pure and
deterministic. :data:`TOKENIZER` names what the terms depend on besides this code (the
patterns, the stop words, the Unicode database), so a saved index can tell it was built
by other tokenizing code (:mod:`holon.search.episodes`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = [
    "IDENTIFIER_MARKS",
    "STOP_WORDS",
    "TOKENIZER",
    "fold_positions",
    "search_terms",
    "terms",
]

_TERM: Final = re.compile(r"[0-9a-z]+(?:[_-][0-9a-z]+)*")
_STOP: Final = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have"),
        *("if", "in", "into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "then"),
        *("this", "to", "was", "were", "will", "with", "ok", "done", "none"),
    )
)
#: Words too common to search for; :func:`terms` drops them.
STOP_WORDS: Final = _STOP
# What terms() drops of ASCII text: stop words and one-character terms.
_DROP: Final = _STOP | frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_SPLIT: Final = re.compile(r"[_-]").split

# Scripts written without spaces between words: a run of them is indexed as its
# overlapping character bigrams (a one-character run as itself), so a query matches
# inside a run. Thai, Lao, Myanmar, Khmer, kana, CJK ideographs, Hangul syllables.
_RUNS: Final = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
# On folded text (only word characters, "_", "-" and spaces are left): a run of an
# unspaced script, or a word with its joined identifiers, as _TERM matches ASCII ones.
_TOKEN: Final = re.compile(rf"([{_RUNS}]+)|([^\s_\-{_RUNS}]+(?:[_-][^\s_\-{_RUNS}]+)*)")
_IN_RUNS: Final = re.compile(rf"[{_RUNS}]").fullmatch
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]+")

# What a saved index depends on besides its layout and this code: the term patterns, the
# stop words, and the Unicode database folding reads (another Python may fold some
# characters differently).
TOKENIZER: Final = (
    f"unicode {unicodedata.unidata_version}|{_TERM.pattern}|{_TOKEN.pattern}|{' '.join(sorted(_STOP))}"
)


class _Fold(dict[int, str]):
    """``str.translate`` table folding each character for search, filled on first use.

    Compatibility forms become their plain letters (fullwidth letters, ligatures),
    accents and other non-spacing marks are dropped (``é`` becomes ``e``, ``İ``
    becomes ``i``), case is folded (``ß`` becomes ``ss``), the Turkish dotless i is ``i``,
    invisible format characters (soft hyphen, zero-width joiners, direction marks)
    vanish, and anything that is not a letter, digit, spacing mark, ``_`` or ``-``
    becomes a space. The unspaced scripts keep their marks (``デ`` is not ``テ``).
    """

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if _IN_RUNS(char):
            folded = unicodedata.normalize("NFKC", char) if unicodedata.category(char)[0] in "LNM" else " "
        else:
            kept: list[str] = []
            for part in unicodedata.normalize("NFKD", char):
                category = unicodedata.category(part)
                if category in ("Mn", "Me", "Cf"):
                    continue
                kept.append(part if category[0] in "LN" or category == "Mc" or part in "_-" else " ")
            folded = unicodedata.normalize("NFKC", "".join(kept)).casefold().replace("\u0131", "i")
        self[code] = folded
        return folded


# Filled once per character ever seen, by every caller alike: what it holds never
# changes what terms() returns, only how fast.
_FOLD: Final = _Fold()


def _fold(text: str) -> str:
    # NFKC first: a decomposed accent is folded as the precomposed letter, halfwidth
    # ``ｶﾞ`` as ``ガ``.
    return unicodedata.normalize("NFKC", text).translate(_FOLD)


def _fold_run(match: re.Match[str]) -> str:
    # Only non-ASCII runs are folded: most non-ASCII characters in a ledger are
    # punctuation (— → …) inside ASCII text, which stays as it is.
    return _fold(match.group())


def fold_positions(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character as :func:`terms` folds it, and where each
    folded character came from (its offset in ``text``).

    For showing where a term was found: ``strasse`` is at offset 0 of ``Straße``.
    """
    folded: list[str] = []
    origin: list[int] = []
    for at, char in enumerate(text):
        lowered = char.lower()
        piece = lowered if lowered.isascii() else _fold(lowered)
        folded.append(piece)
        origin.extend([at] * len(piece))
    return "".join(folded), origin


def terms(text: str) -> list[str]:
    """Search terms of a text: folded words, identifiers and path parts, minus stop words.

    ``src/holon/ledger.py`` yields ``src/holon/ledger.py``'s parts *and* the joined
    identifiers (``ledger``, ``py``), so file paths match both whole and by component.
    Terms are lowercase ``[0-9a-z]`` words for ASCII text. Other text is folded first
    (see :class:`_Fold`: accents, case, compatibility forms), so ``Straße`` is found by
    ``strasse``, ``İSTANBUL`` by ``istanbul`` and ``café`` by ``cafe``; words of any
    script are terms, and a run of Chinese, Japanese, Korean, Thai, Lao, Khmer or
    Myanmar text gives its overlapping character bigrams, which need no spaces between
    words. ASCII words have the same terms wherever other characters are around them.
    """
    lowered = text.lower()
    if not text.isascii():
        lowered = _NON_ASCII.sub(_fold_run, lowered)
        if not lowered.isascii():
            return _script_terms(lowered.translate(_FOLD))
    found = _TERM.findall(lowered)
    if "_" not in lowered and "-" not in lowered:
        # No joined identifiers (the common case): one pass, one set lookup per word.
        return [match for match in found if match not in _DROP]
    out: list[str] = []
    for match in found:
        if match not in _DROP:
            out.append(match)
        if "_" in match or "-" in match:
            out.extend(part for part in _SPLIT(match) if part not in _DROP)
    return out


def _script_terms(folded: str) -> list[str]:
    """:func:`terms` of folded text that is not all ASCII: words of any script, bigrams of runs."""
    out: list[str] = []
    for run, word in _TOKEN.findall(folded):
        if run:
            out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            continue
        if len(word) > 1 and word not in _STOP:
            out.append(word)
        if "_" in word or "-" in word:
            out.extend(part for part in _SPLIT(word) if len(part) > 1 and part not in _STOP)
    return out


# An identifier's part: a word, with its joined ``_``/``-`` pieces (terms() keeps those whole).
_SEGMENT: Final = r"[0-9a-z]+(?:[_-][0-9a-z]+)*"
#: The marks that join an identifier's parts as written: a path, a URL, ``#123``, ``user@host``.
IDENTIFIER_MARKS: Final = "./:#@\\"
_JOINT: Final = r"[./:#@\\]+"
# An identifier written with those marks (or ``#`` and a word), not begun inside another.
_IDENTIFIER: Final = re.compile(rf"(?<![0-9a-z_#./:@\\-])(?:#?{_SEGMENT}(?:{_JOINT}{_SEGMENT})+|#{_SEGMENT})")
_JOINTS: Final = re.compile(rf"({_JOINT})").split
# The whitespace-separated tokens holding a mark, where identifiers are looked for: the
# identifier pattern over whole texts cost three times as much (5.8 MB of a generated
# session's texts: 1.30 s, against 0.43 s token by token; the same identifiers).
_MARKED: Final = re.compile(r"(?<!\S)[^\s./:#@\\]*[./:#@\\]\S*").findall
_CLOCK: Final = re.compile(r"[0-9:.]+").fullmatch
# The URL paths that number a pull request or issue (GitHub, GitLab, Gitea): ``.../pull/123`` is #123.
_NUMBERED: Final = frozenset({"pull", "pulls", "issues", "merge_requests"})


def search_terms(text: str) -> list[str]:
    """The terms memory search indexes a text under and looks a query up by.

    First :func:`terms` of the text (episode selection's words, as
    before and in the same order), then each identifier written with ``. / : # @ \\``,
    lowercase: whole (``pull/123``, ``#123``, ``src/shop/cart.py``,
    ``https://github.com/o/r/pull/123``) and each pair of neighbouring parts with the mark
    between them (``shop/cart``, ``cart.py``; ``pull/123`` inside the URL). So ``#123``
    finds the request that wrote ``#123`` before a record that only has the number, a
    path is found whole or by a part of it, and a PR's URL path inside a pasted URL. A
    pull request's or issue's URL path (``pull/123``, ``issues/123``, ``merge_requests/123``)
    also gives ``#123``, the number as it is written in text.
    """
    words = terms(text)
    found = [whole for token in _MARKED(text.lower()) for whole in _IDENTIFIER.findall(token)]
    for whole in found:
        if ":" in whole and _CLOCK(whole):
            continue  # a time of day, a line:column: numbers no one searches for joined
        words.append(whole)
        parts = _JOINTS(whole)
        if len(parts) > 3:  # more than one pair (one is the identifier itself)
            pairs = range(0, len(parts) - 2, 2)
            words.extend(parts[i] + parts[i + 1] + parts[i + 2] for i in pairs if parts[i])
        # A pull request's or issue's URL path is the #N it is also written as.
        words.extend(
            f"#{parts[i + 2]}"
            for i in range(0, len(parts) - 2, 2)
            if parts[i] in _NUMBERED and parts[i + 1] == "/" and parts[i + 2].isdigit()
        )
    return words
