"""The budget planner: which form of each section fits the token budget.

A :class:`Candidate` is a section offered in one or more :class:`Form`\\ s, best first
(full, then compact, then truncated). :func:`plan_budget` admits candidates into an
allowance:

1. every pinned candidate gets its minimum (last) form; if those minimums alone do not
   fit, :class:`~holon.errors.BudgetExceeded` is raised with both numbers;
2. then, highest priority first (ties by section order), each candidate is upgraded
   to the best form that still fits — or, when it is not pinned and nothing fits, it
   is omitted.

The outcome depends only on the set of candidates, never on the order they were
passed in. Every form carries what it leaves out (:class:`~holon.records.Omission`:
section, ref, reason, tokens); a section the planner drops entirely gets an ``omitted``
form whose omissions name everything it would have shown, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

import holon.records as r
from holon.errors import BudgetExceeded

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "Candidate",
    "Form",
    "FormKind",
    "Stability",
    "ToolExchange",
    "plan_budget",
]

FormKind = Literal["full", "compact", "truncated", "omitted"]
Stability = Literal["stable", "agent", "turn"]

_FORM_RANK: Final = {"full": 0, "compact": 1, "truncated": 2, "omitted": 3}


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """The token budget of one model call.

    ``context_window`` is the model's window; ``output_reserve`` is kept free for the
    answer and comes off first. ``prefix_share`` is the part of the rest the Stable and
    AgentScoped sections may take before the TurnScoped ones are planned (so the
    cacheable prefix does not depend on this turn's volume); ``episode_share`` is the
    episode sub-budget as a share of the same rest.
    """

    context_window: int
    output_reserve: int = 0
    prefix_share: float = 0.5
    episode_share: float = 0.15

    def __post_init__(self) -> None:
        if self.context_window <= 0 or self.output_reserve < 0:
            raise ValueError("Budget: context_window must be positive and output_reserve non-negative")
        if not (0.0 < self.prefix_share <= 1.0 and 0.0 <= self.episode_share <= 1.0):
            raise ValueError("Budget: prefix_share must be in (0, 1] and episode_share in [0, 1]")

    @property
    def available(self) -> int:
        """Tokens the prompt may use: the window minus the output reserve."""
        return self.context_window - self.output_reserve


#: Budget used to render when neither the caller nor a recorded prompt gives one.
DEFAULT_BUDGET: Final = Budget(context_window=200_000, output_reserve=8_000)


class ToolExchange(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call and its result as they read in a section's text, for native adapters.

    ``text[start:result]`` is the call's line, ``text[result:end]`` the result as shown
    (its head line, then the output, a preview or the placeholder that names its ref).
    An adapter that sends the history's tool calls as the provider's own blocks sends
    ``arguments`` as the call's input and the result text as its output, under
    ``call_id``; the text around the span stays text. ``arguments`` are the call's own
    when the line shows them whole, else ``{"holon_note": <what the line shows>}`` (the
    arguments cut to a preview, or the stub of a call that declared a plan), so the
    native form says no more and no less than the text.
    """

    call_id: str
    tool: str
    arguments: dict[str, Any]
    start: int
    result: int
    end: int

    def shifted(self, by: int) -> ToolExchange:
        """The same exchange in a text that holds this one's text from offset ``by``."""
        return ToolExchange(
            call_id=self.call_id,
            tool=self.tool,
            arguments=self.arguments,
            start=self.start + by,
            result=self.result + by,
            end=self.end + by,
        )


class Form(msgspec.Struct, frozen=True, kw_only=True):
    """One rendering of a section: its kind, text, token count and what it left out.

    ``omissions`` names, with the ref that restores it, everything this form shortens or
    drops compared with the section's full content. ``cuts`` are offsets of line breaks
    in ``text`` where an adapter may start a new content block (see
    :attr:`~holon.context.PromptSection.cuts`); ``calls`` the tool calls with their
    results it shows, in text order (see :class:`ToolExchange`).
    """

    kind: FormKind
    text: str
    tokens: int
    omissions: tuple[r.Omission, ...] = ()
    cuts: tuple[int, ...] = ()
    calls: tuple[ToolExchange, ...] = ()


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A section offered to the planner: forms best first; pinned ones never drop below their last.

    ``contents`` lists what the section would show, one entry per ref (``reason`` says
    what the entry is, ``tokens`` what it costs): if the planner omits the section, these
    are reported as its omissions, with the planner's reason.
    """

    name: str
    order: int
    stability: Stability
    priority: int
    pinned: bool
    forms: tuple[Form, ...]
    contents: tuple[r.Omission, ...] = ()

    def __post_init__(self) -> None:
        if not self.forms:
            raise ValueError(f"candidate {self.name!r} has no forms")
        ranks = [_FORM_RANK[f.kind] for f in self.forms]
        if ranks != sorted(ranks):
            raise ValueError(f"candidate {self.name!r}: forms must go full → compact → truncated")


def _omitted(candidate: Candidate) -> Form:
    smallest = candidate.forms[-1].tokens
    reason = f"section did not fit the budget (needs {smallest} tokens at its smallest)"
    return Form(
        kind="omitted",
        text="",
        tokens=0,
        omissions=tuple(
            msgspec.structs.replace(o, section=candidate.name, reason=f"{reason}: {o.reason}")
            for o in candidate.contents
        ),
    )


def plan_budget(candidates: Iterable[Candidate], allowance: int, *, what: str = "prompt") -> dict[str, Form]:
    """Choose a form for every candidate within ``allowance`` tokens.

    Returns section name → chosen form. A dropped section gets kind ``omitted``: empty
    text, no tokens, and as its omissions the candidate's ``contents`` with the reason
    (the section did not fit). Raises :class:`BudgetExceeded` when the pinned minimums
    exceed the allowance.
    """
    ordered = sorted(candidates, key=lambda c: (-c.priority, c.order, c.name))
    names = [c.name for c in ordered]
    if len(set(names)) != len(names):
        raise ValueError("plan_budget: section names must be unique")
    chosen: dict[str, Form] = {}
    used = 0
    for c in ordered:
        if c.pinned:
            chosen[c.name] = c.forms[-1]
            used += c.forms[-1].tokens
    if used > allowance:
        raise BudgetExceeded(f"{what} over budget", available=allowance, required=used)
    for c in ordered:
        current = chosen.get(c.name)
        held = current.tokens if current is not None else 0
        for form in c.forms:
            if used - held + form.tokens <= allowance:
                chosen[c.name] = form
                used += form.tokens - held
                break
        else:
            if current is None:
                chosen[c.name] = _omitted(c)
    return chosen
