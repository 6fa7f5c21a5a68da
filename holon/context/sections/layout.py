"""The sections' table: their order under each layout, stability, priority and pinning.

What every section builder shares: :data:`SECTION_ORDER` and :data:`LAYOUTS`, the stability
class and priority of each section, and :func:`section_candidate`, which turns a
section's forms into the :class:`~holon.context.budget.Candidate` the planner takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Literal

import holon.records as r
from holon.context.budget import Candidate, Form, FormKind, Stability

__all__ = [
    "LAYOUTS",
    "PINNED_SECTIONS",
    "SECTION_ORDER",
    "SECTION_PRIORITY",
    "SECTION_STABILITY",
    "Counter",
    "Layout",
    "section_candidate",
    "section_form",
    "section_order",
    "section_stability",
]

Counter = Callable[[str], int]

SECTION_ORDER: Final = (
    "system",
    "tools",
    "working_memory",
    "context_summary",
    "episodes",
    "pending_delta",
    "active_work",
    "queue",
    "mandate",
    "history",
    "recalled",
    "current_input",
)
SECTION_STABILITY: Final[dict[str, Stability]] = {
    "system": "stable",
    "tools": "stable",
    "working_memory": "agent",
    "context_summary": "agent",
    "episodes": "agent",
    "pending_delta": "turn",
    "active_work": "turn",
    "queue": "turn",
    "history": "turn",
    "mandate": "turn",
    "recalled": "turn",
    "current_input": "turn",
}
SECTION_PRIORITY: Final = {
    "system": 100,
    "tools": 100,
    "current_input": 100,
    "mandate": 98,
    "active_work": 95,
    "working_memory": 90,
    "pending_delta": 85,
    "context_summary": 70,
    "episodes": 60,
    "queue": 50,
    "history": 40,
    "recalled": 30,
}
Layout = Literal["rfc", "recitation"]
#: The section orders a prompt can be laid out in (``RenderConfig.layout``).
LAYOUTS: Final[dict[Layout, tuple[str, ...]]] = {
    # The RFC's order: the sections by stability class, working memory in the prefix.
    "rfc": SECTION_ORDER,
    # The history right after what changes only with the epoch, and everything that
    # changes with the revision or the turn after it, newest last: the history stays a
    # cached prefix across revisions, and what must bind is read last.
    "recitation": (
        "system",
        "tools",
        "context_summary",
        "episodes",
        "mandate",
        "history",
        "working_memory",
        "pending_delta",
        "active_work",
        "queue",
        "recalled",
        "current_input",
    ),
}


def section_order(layout: Layout) -> tuple[str, ...]:
    """The sections in prompt order under ``layout``."""
    return LAYOUTS[layout]


def section_stability(name: str, layout: Layout) -> Stability:
    """The stability class of section ``name`` under ``layout``: the cache block it is in.

    Working memory changes with the revision. In the rfc layout it ends the cacheable
    prefix (AgentScoped); in the recitation layout it follows the history, in the
    TurnScoped tail, so the AgentScoped block is what changes with the epoch alone.
    """
    if layout == "recitation" and name == "working_memory":
        return "turn"
    return SECTION_STABILITY[name]


PINNED_SECTIONS: Final = frozenset(
    {"system", "tools", "working_memory", "pending_delta", "active_work", "mandate", "current_input"}
)


def section_form(
    kind: FormKind, lines: Sequence[str], count: Counter, omissions: Sequence[r.Omission] = ()
) -> Form:
    text = "\n".join(lines)
    return Form(kind=kind, text=text, tokens=count(text), omissions=tuple(omissions))


def section_candidate(
    name: str, forms: Sequence[Form], contents: Sequence[r.Omission] = (), *, pinned: bool | None = None
) -> Candidate:
    # A shorter form is worth offering only when it is smaller: an identical one adds
    # nothing, and one whose placeholders cost more than what it drops never fits where
    # the better form did not (and would inflate a pinned minimum).
    kept: list[Form] = []
    for f in forms:
        if not kept or (f.text != kept[-1].text and f.tokens < kept[-1].tokens):
            kept.append(f)
    return Candidate(
        name=name,
        order=SECTION_ORDER.index(name),
        stability=SECTION_STABILITY[name],
        priority=SECTION_PRIORITY[name],
        pinned=name in PINNED_SECTIONS if pinned is None else pinned,
        forms=tuple(kept),
        contents=tuple(contents),
    )
