"""How a form shortens what a record holds: texts clipped to a bound, and the placeholder
lines and omissions that name the refs restoring what was cut."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import holon.records as r
from holon.context.refs import ledger_ref
from holon.context.sections.layout import Counter

__all__ = [
    "PINNED_CALLS",
    "PINNED_DECISIONS",
    "PINNED_ENV_CHARS",
    "PINNED_ID_CHARS",
    "PINNED_OBJECTIVE_CHARS",
    "PINNED_SCOPE",
    "PINNED_TEXT_CHARS",
    "bound_text",
    "cite",
    "clip_line",
    "clipped_line",
    "not_shown_line",
    "ref_list",
    "shrunk",
]


def clipped_line(text: str, limit: int) -> tuple[str, bool]:
    """``text`` on one line, cut to ``limit`` characters; and whether anything was cut."""
    flat = " ".join(text.split())
    return (flat, False) if len(flat) <= limit else (flat[: limit - 1] + "…", True)


def clip_line(text: str, limit: int) -> str:
    return clipped_line(text, limit)[0]


def cite(*seqs: int | None) -> str:
    return " ".join(f"[{ledger_ref(s)}]" for s in seqs if s is not None)


# What the pinned minimums (the truncated forms of working memory, active work and the
# current input) keep of each text a record holds. Their size must not depend on the size
# of any one record: a pasted spec as an objective or a scope constraint, a wait or a
# decision of a few pages made the minimum larger than any window, and every render
# raised BudgetExceeded — an agent that could not take a turn. Each clipped text's line
# or a placeholder names the record that restores it.
PINNED_TEXT_CHARS: Final = 200
PINNED_OBJECTIVE_CHARS: Final = 400
#: An id (of a work item, step, wait, decision or call) or a trigger: an ordinary one — a
#: UUID counts 43 tokens — is never clipped; one of pasted text is.
PINNED_ID_CHARS: Final = 128
_PINNED_ID_TOKENS: Final = 48
PINNED_ENV_CHARS: Final = 400
#: Scope constraints and decisions made this turn the minimums list (the live work item's
#: constraints, unlike working memory's, are not capped by the projection).
PINNED_SCOPE: Final = 12
PINNED_DECISIONS: Final = 8
#: Unknown-outcome calls the current input's minimum lists (the newest; the projection's
#: tool window bounds them only by its configured size).
PINNED_CALLS: Final = 8
#: Refs a placeholder lists at most (the plan's omissions name every one).
_PINNED_REFS: Final = 8


#: A clipped text also keeps to a token bound of a third of its characters: characters
#: alone bound emoji (about 2.7 tokens each) or CJK text at several times the tokens of
#: prose, which is about a quarter of a token per character.
_CHARS_PER_TOKEN: Final = 3


def bound_text(text: str, limit: int, count: Counter) -> tuple[str, bool]:
    """``text`` as it is when it has at most ``limit`` characters and ``limit // 3`` tokens (so
    an ordinary text reads the same in every form), else on one line clipped to fit both;
    and whether it changed. An id keeps to :data:`_PINNED_ID_TOKENS` instead."""
    most = _PINNED_ID_TOKENS if limit == PINNED_ID_CHARS else limit // _CHARS_PER_TOKEN
    if len(text) <= limit and count(text) <= most:
        return text, False
    # A text over the limit is changed even when its one-line form fits (a run of blank
    # lines): shown as it is, it would cost tokens per character.
    flat = " ".join(text.split())
    n = min(len(flat), limit)
    while True:
        shown = flat if n >= len(flat) else flat[: n - 1] + "…"
        tokens = count(shown)
        if tokens <= most or n <= 1:
            return shown, True
        n = min(n - 1, n * most // tokens)


def ref_list(refs: Sequence[str]) -> str:
    """``refs`` for a placeholder: at most :data:`_PINNED_REFS` of them, then how many more."""
    unique = list(dict.fromkeys(refs))
    shown = ", ".join(unique[:_PINNED_REFS])
    return shown if len(unique) <= _PINNED_REFS else f"{shown} and {len(unique) - _PINNED_REFS} more"


def shrunk(
    section: str, ref: str, reason: str, full: Sequence[str], shown: Sequence[str], *, count: Counter
) -> r.Omission:
    """The omission for lines a minimum shortened: what the shortening saved, by ``ref``."""
    tokens = max(0, count("\n".join(full)) - count("\n".join(shown)))
    return r.Omission(section=section, ref=ref, reason=reason, tokens=tokens)


def not_shown_line(n: int, noun: str, refs: Sequence[str], *, more: bool) -> str:
    """The placeholder for entries a form leaves out: how many, and the refs that restore them."""
    nouns = noun if n == 1 else f"{noun}s"
    what = f"+{n} more {nouns}" if more else f"{n} {nouns} not shown"
    return f"({what} — restore with ref {', '.join(dict.fromkeys(refs))})"
