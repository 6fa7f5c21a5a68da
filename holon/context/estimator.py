"""Token estimators: how many tokens a text will cost in a model's prompt.

The budget planner needs a count for every candidate text. Two kinds are offered,
selected by name through :func:`get_estimator`:

``holon-heuristic`` (default, no dependency)
    A linear model over a fast, o200k-like split of the text (word pieces, CJK
    characters, digit groups, punctuation runs, whitespace runs, dense base64/hex
    runs, symbol and emoji runs). Its weights were fitted on ``fixtures/corpus/`` against OpenAI's o200k
    tokenizer and biased upward, because under-counting is what overflows a
    prompt: it under-counts by more than 5% on at most 3% of the corpus and its
    mean absolute error stays at or below 15% (tests/test_context_estimator.py).

``o200k_base``, ``cl100k_base`` (exact, optional extra ``bpe-openai``)
    The real BPE, imported lazily so holon runs without it.

An estimator's ``name`` and ``version`` are part of the render configuration and
are recorded in every ``PromptRendered``: a count is only reproducible with the same
estimator, so changing the heuristic's weights must bump its version.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_ESTIMATOR",
    "BpeEstimator",
    "Estimator",
    "HeuristicEstimator",
    "available_estimators",
    "get_estimator",
]

DEFAULT_ESTIMATOR: Final = "holon-heuristic"


@runtime_checkable
class Estimator(Protocol):
    """Counts the prompt tokens of a text; ``name`` + ``version`` identify the counting rule.

    ``joins_add_up`` is true when, for every pair of texts, the count of the two joined by
    a line break or a blank line is at most the sum of their counts plus one. The renderer
    counts a prompt in parts on that promise; for an estimator without it (exact BPE,
    which merges ``".\r\n\n"`` with a following newline into a costlier split) it
    counts the whole prompt again and refits it (docs/context-rendering.md).
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def joins_add_up(self) -> bool: ...

    def count(self, text: str) -> int: ...


# CJK ideographs, kana, hangul and their punctuation: o200k spends well under one token
# per character on these, so they are counted per character, not per "word".
_CJK: Final = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
# Symbols BPE has few merges for: combining marks, zero-width characters, math and
# technical symbols, box drawing and block elements (`tree`, progress bars), geometric
# shapes, dingbats (test runners' check marks), braille (spinners), variation selectors
# and emoji. o200k spends about 2 tokens on such a character (2.6 on an emoji: 4 UTF-8
# bytes), which a punctuation run (0.7 + 0.55 per further character) under-counted up
# to threefold. General punctuation, letterlike symbols and arrows (U+2010-U+21FF: the
# dashes, quotes, ellipsis and arrows of ordinary prose, about one token each) stay
# punctuation, so texts without these symbols count exactly as before.
_SYMBOL: Final = "\u0300-\u036f\u200b-\u200f\u2200-\u2bff\ufe00-\ufe0f\U0001f000-\U0001faff"
# One alternation, scanned once in C, most frequent groups first: the groups mirror
# o200k's pre-tokenizer closely enough that a per-group weight captures most of the
# variance.
_PIECE_PATTERN: Final = (
    r"([A-Z]*[a-z]+|[A-Z]+)"  # 1: ASCII word piece (camelCase splits like o200k)
    # 2: run of spaces before a non-space. Spaces before other whitespace or at the end
    # belong to a whitespace run (5), as o200k's pre-tokenizer joins them: split off as a
    # piece of their own, a text's leading run split where a line break joined before it
    # ended (after a punctuation run, which takes the breaks) and the joined text cost
    # more than its parts plus one (see joins_add_up).
    r"|( +(?=\S))"
    rf"|((?:[^\w\s{_SYMBOL}]|_)+[\r\n]*)"  # 3: punctuation run (underscores included) + line breaks
    r"|(\d+)"  # 4: digits (o200k groups them by three)
    r"|(\s+)"  # 5: newlines / tabs
    rf"|([{_CJK}]+)"  # 6: CJK run
    r"|([^\W\d_]+)"  # 7: other letters (accented, Cyrillic, ...)
    rf"|([{_SYMBOL}]+)"  # 8: symbol run (see _SYMBOL)
)


@functools.cache
def _piece() -> re.Pattern[str]:
    """:data:`_PIECE_PATTERN` compiled, on first use: compiling it takes ~10 ms, which every
    import of holon.context paid, ``holon --help`` (which lists the estimators) among them."""
    return re.compile(_PIECE_PATTERN)


# Texts up to this many characters are split with findall (faster); longer ones piece by piece.
_FINDALL_CHARS: Final = 1 << 16
# A lone space before a digit: o200k's digit groups take no space, so it is a token of its
# own (see _W_SPACE_DIGIT). Scanned apart from _PIECE_PATTERN: a branch there costs every piece.
_SPACE_DIGIT: Final = re.compile(r" (?=\d)")
# Base64, hex digests and similar: BPE finds few merges in them, so they cost extra.
_DENSE: Final = re.compile(r"[A-Za-z0-9+/=_-]{20,}")

# Weights fitted on fixtures/corpus/ (see the module docstring); bump the version when
# any of them changes.
_W_WORD: Final = 1.08
_W_CJK: Final = 0.78
_W_DIGITS: Final = 1.04  # per group of up to three digits
_W_PUNCT: Final = 0.68
_W_PUNCT_LONG: Final = 0.44  # per character beyond the first in a punctuation run
_W_SPACES: Final = 1.62  # per run of two or more spaces (indentation)
# o200k's pre-tokenizer never joins a space to a digit group, nor a line break to the
# indentation after it (two or more spaces or tabs before the next line's text): both
# cost a token of their own, which one-piece counting missed (a table of space-separated
# numbers under-counted by a third, short indented lines by a sixth).
_W_SPACE_DIGIT: Final = 1.0
_W_INDENT: Final = 1.0
_W_NEWLINE: Final = 0.97
_W_OTHER: Final = 0.50  # per non-ASCII, non-CJK letter
_W_DENSE: Final = 0.15  # per character of a dense run
_W_SYMBOL: Final = 2.2  # the first character of a symbol run (emoji aside)
_W_SYMBOL_LONG: Final = 1.0  # per further character (BPE merges runs like "──" or "███")
_W_ASTRAL: Final = 2.7  # per emoji (any character beyond U+FFFF): runs of them do not merge
# Whitespace runs. A run is one piece of the split, but BPE does not merge a long one
# into one token: o200k spends a token per 16 newlines or tabs, per 128 spaces, per 2
# lone carriage returns, per 4 characters of alternating whitespace (lines of trailing
# spaces, blank CRLF lines) and up to 2 per rarer space character (NEL, vertical tab).
# Counted as one piece, 100,000 newlines cost 1 token instead of 6,250. A run costs the
# larger of its piece weight and these per-character weights, which add up over a join
# (a blank line adds 2/8 and at most two changes: under 1): joins_add_up still holds.
_W_WS_CHANGE: Final = 0.36  # per change of character within a run
_W_WS_LINE: Final = 1 / 8  # per newline or tab
_W_WS_CRLF: Final = 1 / 4  # per CRLF line break (counted as one character)
_W_WS_SPACE: Final = 1 / 64  # per space (in a run of spaces too)
_W_WS_CR: Final = 0.75  # per carriage return
_W_WS_WIDE: Final = 0.6  # per no-break or ideographic space
_W_WS_OTHER: Final = 2.0  # per other whitespace character
# Collapses each run of one repeated character to that character (C speed, one string).
_REPEATS: Final = re.compile(r"(.)\1+", re.DOTALL)


def _whitespace_run(run: str) -> float:
    """A whitespace run's per-character cost (see _W_WS_CHANGE and below)."""
    crlf = run.count("\r\n")
    if crlf:
        run = run.replace("\r\n", "\n")
    line = run.count("\n") + run.count("\t") - crlf
    space = run.count(" ")
    cr = run.count("\r")
    wide = run.count("\xa0") + run.count("\u3000")
    changes = len(_REPEATS.sub(r"\1", run)) - 1 if len(run) > 1 else 0
    rest = len(run) - line - crlf - space - cr - wide
    return (
        _W_WS_CRLF * crlf
        + _W_WS_CHANGE * changes
        + _W_WS_LINE * line
        + _W_WS_SPACE * space
        + _W_WS_CR * cr
        + _W_WS_WIDE * wide
        + _W_WS_OTHER * rest
    )


def _indent(run: str) -> float:
    """The extra token of a line break's indentation: two or more characters after the last break."""
    last = max(run.rfind("\n"), run.rfind("\r"))
    return _W_INDENT if last >= 0 and len(run) - last > 2 else 0.0


@functools.lru_cache(maxsize=1024)
def _short_ws_cost(run: str) -> float:
    return max(_W_NEWLINE + _indent(run), _whitespace_run(run))


def _ws_cost(run: str) -> float:
    """A whitespace run's cost: the larger of its piece weight (with the indentation's own
    token, see _W_INDENT) and its per-character cost. Inside the max, joins still add up: a
    line break joined before a text's indentation adds at most _W_INDENT, since the text
    alone already paid for its indentation as a piece.

    Short runs (a line break and indentation) repeat all through code and logs: their
    cost is remembered, bounded in count and in key length.
    """
    if len(run) <= 64:
        return _short_ws_cost(run)
    return max(_W_NEWLINE + _indent(run), _whitespace_run(run))


class HeuristicEstimator:
    """The dependency-free default: a calibrated linear model over a regex split."""

    name: Final = DEFAULT_ESTIMATOR
    version: Final = "5"
    # A line break is a piece of its own, merges the whitespace runs either side of it into
    # one (adding two changes and the break, or the indentation's token the text after it
    # paid alone) or ends a punctuation run (free; what follows the breaks it takes is one
    # whitespace run or a piece the next text had alone, since spaces join the whitespace
    # after them); no other piece crosses it, and each part is rounded up on its own:
    # joined texts never cost more than their parts plus one (checked exhaustively on every
    # pair of texts of up to 3 whitespace, punctuation and word characters).
    joins_add_up: Final = True

    def count(self, text: str) -> int:
        if not text:
            return 0
        words = cjk = digits = punct = punct_long = other = 0
        symbols = runs = 0.0
        # findall builds every piece of the text at once: ~50 bytes per piece, a 2.5 GB peak
        # for a 50 MB tool output. A long text is scanned one match at a time instead
        # (groups("") is exactly what findall gives for each match).
        piece = _piece()
        pieces = (
            piece.findall(text)
            if len(text) <= _FINDALL_CHARS
            else (m.groups("") for m in piece.finditer(text))
        )
        for g_word, g_spaces, g_punct, g_num, g_ws, g_cjk, g_other, g_symbol in pieces:
            if g_word:
                words += 1
            elif g_punct:
                punct += 1
                # o200k ends a punctuation run with the line breaks after it: they cost nothing more.
                punct_long += len(g_punct.rstrip("\r\n")) - 1
            elif g_spaces:
                if len(g_spaces) > 1:
                    runs += max(_W_SPACES, _W_WS_SPACE * len(g_spaces))
            elif g_num:
                digits += (len(g_num) + 2) // 3
            elif g_ws:
                # A lone line break is most runs: its per-character cost (1/8) is below the piece's.
                runs += _W_NEWLINE if g_ws == "\n" else _ws_cost(g_ws)
            elif g_cjk:
                cjk += len(g_cjk)
            elif g_other:
                other += len(g_other)
            else:
                astral = sum(1 for ch in g_symbol if ch > "\uffff")
                bmp = len(g_symbol) - astral
                symbols += _W_ASTRAL * astral + (_W_SYMBOL + _W_SYMBOL_LONG * (bmp - 1) if bmp else 0.0)
        if digits:
            runs += _W_SPACE_DIGIT * len(_SPACE_DIGIT.findall(text))
        dense = sum(m.end() - m.start() for m in _DENSE.finditer(text)) if len(text) >= 20 else 0
        total = (
            _W_WORD * words
            + _W_CJK * cjk
            + _W_DIGITS * digits
            + _W_PUNCT * punct
            + _W_PUNCT_LONG * punct_long
            + _W_OTHER * other
            + _W_DENSE * dense
            + symbols
            + runs
        )
        # Round up: a prompt must never be under-budgeted by a rounding error.
        return int(total) + (total > int(total))


class BpeEstimator:
    """Exact counts with OpenAI's BPE tables through the optional ``bpe-openai`` package."""

    def __init__(self, encoding: str) -> None:
        try:
            import bpe_openai  # type: ignore[import-untyped]  # noqa: PLC0415 - optional extra, loaded on demand
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ValueError(
                f"estimator {encoding!r} needs the optional tokenizer extra: pip install 'holon[tokenizer]'"
            ) from exc
        self._encoding: Any = bpe_openai.get_encoding(encoding)
        self._name = encoding
        self._token_limit: Any = bpe_openai.TokenLimitError
        # "+split1": a text of 1,000,000 characters or more, which bpe-openai refuses, is
        # counted in pieces (_count_in_pieces); counts of shorter texts are unchanged.
        self._version = f"bpe-openai-{bpe_openai.__version__}+split1"

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str:
        return self._version

    @property
    def joins_add_up(self) -> bool:
        # BPE's pre-tokenizer groups a run of line breaks with the whitespace and
        # punctuation before it, and that group can split into more tokens joined than
        # apart (o200k: ".\r\n\n" + "\n" + "[" costs one token more than the parts).
        return False

    def count(self, text: str) -> int:
        return _count_in_pieces(self._count_piece, text, limit=_BPE_PIECE_CHARS)

    def _count_piece(self, text: str) -> int:
        """The exact count of a text shorter than bpe-openai's input limit."""
        try:
            # encode_ordinary: special-token text in a tool output is just text here.
            return len(self._encoding.encode_ordinary(text)) if text else 0
        except self._token_limit as exc:
            # bpe-openai encodes the whole text, then refuses a result over 200,000
            # tokens; the error carries the exact count.
            return int(exc.token_count)


# bpe-openai refuses a text of 1,000,000 characters or more ("Input too long to encode
# safely"): a longer text is counted in pieces shorter than this, cut where the BPE
# pre-tokenizer always splits (see _count_in_pieces).
_BPE_PIECE_CHARS: Final = 999_999
# Points where the o200k and cl100k pre-tokenizers always split, whatever surrounds them:
# - after a line break followed by a character that is neither whitespace nor "/": no
#   piece of either regex holds a line break followed by such a character (a word's
#   optional prefix excludes \r and \n, a punctuation run may only end in [\r\n/]*
#   (o200k) or [\r\n]* (cl100k), a whitespace piece holds no other character), and the
#   piece before is the same whether the text ends there or goes on (a whitespace run
#   ending in a line break is matched by \s*[\r\n] before any lookahead alternative);
# - after an ASCII letter or digit followed by a space or ASCII punctuation other than
#   "'": a word, digit group or contraction ends there (a contraction is "'" + letters,
#   hence the exclusion) and no piece starts with a letter or digit before a space or
#   punctuation.
# Cut at such points, the pieces of a text are the pieces of its parts, so the counts add
# up exactly (tests/test_context_estimator.py checks it with Hypothesis on both encodings).
_BPE_SPLIT: Final = re.compile(r"(?<=\n)(?=[^\s/])|(?<=[A-Za-z0-9])(?=[ !-&(-/:-@\[-`{-~])")


def _count_in_pieces(count: Callable[[str], int], text: str, *, limit: int) -> int:
    """``count(text)`` for a text of any length, where ``count`` takes under ``limit`` characters.

    A longer text is cut at points where BPE always splits (``_BPE_SPLIT``), each cut
    between ``limit // 2`` and ``limit`` characters after the last, and the pieces' exact
    counts are added up. A stretch with no such point in that window (a line over half a
    million characters of hex digits or CJK text without punctuation) cannot be counted
    exactly; up to the next split point it is counted as its UTF-8 bytes, a sound upper
    bound (every BPE token is at least one byte) that can only make a prompt smaller than
    it could have been, never overflow its budget.
    """
    end = len(text)
    if end < limit:
        return count(text)
    total, start = 0, 0
    while end - start >= limit:
        m = _BPE_SPLIT.search(text, start + limit // 2, start + limit)
        if m is not None:
            total += count(text[start : m.start()])
            start = m.start()
            continue
        m = _BPE_SPLIT.search(text, start + limit)
        stop = end if m is None else m.start()
        total += len(text[start:stop].encode("utf-8", "surrogatepass"))
        start = stop
    return total + count(text[start:])


_EXACT: Final = ("o200k_base", "cl100k_base")
_CACHE: dict[str, Estimator] = {}


def available_estimators() -> tuple[str, ...]:
    """Names :func:`get_estimator` accepts (the exact ones need the tokenizer extra)."""
    return (DEFAULT_ESTIMATOR, *_EXACT)


def get_estimator(name: str = DEFAULT_ESTIMATOR) -> Estimator:
    """The estimator called ``name``; raises ``ValueError`` for an unknown name."""
    cached = _CACHE.get(name)
    if cached is not None:
        return cached
    estimator: Estimator
    if name == DEFAULT_ESTIMATOR:
        estimator = HeuristicEstimator()
    elif name in _EXACT:
        estimator = BpeEstimator(name)
    else:
        raise ValueError(f"unknown estimator {name!r}; expected one of {', '.join(available_estimators())}")
    # Loading BPE tables takes ~0.1 s; estimators are immutable, so one per name is shared.
    _CACHE[name] = estimator
    return estimator
