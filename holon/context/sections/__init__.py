"""Section builders: each turns part of :class:`ContextInputs` into a budget candidate.

Sections, in prompt order (see docs/context-rendering.md for the full table):

====  ==================  ===========  ========  ======  ================================
 #    name                stability    priority  pinned  forms
====  ==================  ===========  ========  ======  ================================
 1    system              stable       100       yes     full
 2    tools               stable       100       yes     full
 3    working_memory      agent        90        yes     full, compact, truncated
 3'   context_summary     agent        70        no      full, truncated (only without WM)
 4    episodes            agent        60        no      full, compact, truncated
 5    pending_delta       turn         85        yes(*)  full, compact
 6    active_work         turn         95        yes     full, compact, truncated
 7    queue               turn         50        no      full, compact
 8    mandate             turn         98        yes     full, compact, truncated
 9    history             turn         40        no      filled newest-first
10    recalled            turn         30        no      full (room the history left)
11    current_input       turn         100       yes     full, truncated
====  ==================  ===========  ========  ======  ================================

(*) until a prompt confirmed it; then, unpinned, shown again while its revision holds
and the history keeps its start.

That is the ``rfc`` layout. The ``recitation`` layout (:data:`LAYOUTS`) keeps the same
sections and forms in another order — system, tools, context_summary, episodes, mandate,
history, then working_memory, pending_delta, active_work, queue, recalled, current_input — and
there working memory is TurnScoped: it sits after the history, so a new revision re-sends
only the prompt's tail, not the history (docs/context-rendering.md, *Layouts*).

Only facts fixed by the working-memory revision and the compression epoch are placed in
Stable/AgentScoped sections (the snapshot, the archived episodes); everything that can
change within a revision (the live plan, the environment, queues, history, input) is
TurnScoped. Every shortened or dropped item names the ref that restores it.

The package, by stability tier (the history and the recalled section are built by
:mod:`holon.context.history` and :mod:`holon.context.recall`):

- :mod:`~holon.context.sections.layout`: the table above — order, layouts, stability,
  priority, pinning — and the candidate every builder returns;
- :mod:`~holon.context.sections.bounds`: how a form clips a record's text and names the
  ref that restores it; :mod:`~holon.context.sections.work`: a work item's and a plan's
  lines, which working memory and the active-work section share;
- :mod:`~holon.context.sections.stable`: system, tools;
- :mod:`~holon.context.sections.agent`: working memory, the legacy summary, episodes;
- :mod:`~holon.context.sections.turn_work`: pending delta, active work, queue;
- :mod:`~holon.context.sections.turn_input`: the operator's requests, the current input.

What it may import: what :mod:`holon.context` may (records, errors, projections, msgspec,
no I/O) and, of the context layer, only the modules the renderer builds on (budget,
inputs, refs, rounds), never :mod:`holon.context.render`. Inside, ``layout`` imports no
other module of the package, ``bounds`` only ``layout``, ``work`` both; each tier's
module imports those three at most, never another tier (``tests/test_layers.py``).
Callers import from here, not from the modules inside.
"""

from __future__ import annotations

from holon.context.sections.agent import (
    context_summary_candidate,
    episode_text_forms,
    episodes_candidate,
    working_memory_candidate,
)
from holon.context.sections.layout import (
    LAYOUTS,
    SECTION_ORDER,
    SECTION_PRIORITY,
    SECTION_STABILITY,
    Counter,
    Layout,
    section_order,
    section_stability,
)
from holon.context.sections.stable import system_candidate, tools_candidate
from holon.context.sections.turn_input import (
    MANDATE_HEADER,
    MANDATE_HEADER_BEFORE_HISTORY,
    current_input_candidate,
    mandate_candidate,
)
from holon.context.sections.turn_work import TRUNCATED_OPEN_STEPS as TRUNCATED_OPEN_STEPS
from holon.context.sections.turn_work import active_work_candidate, pending_delta_candidate, queue_candidate
from holon.context.sections.work import DERIVED_OBJECTIVE as DERIVED_OBJECTIVE
from holon.context.sections.work import RECENT_FINISHED_STEPS as RECENT_FINISHED_STEPS

# The three ``as`` imports above keep importable from here the constants the module this
# package replaced had at its top level, outside __all__.
__all__ = [
    "LAYOUTS",
    "MANDATE_HEADER",
    "MANDATE_HEADER_BEFORE_HISTORY",
    "SECTION_ORDER",
    "SECTION_PRIORITY",
    "SECTION_STABILITY",
    "Counter",
    "Layout",
    "active_work_candidate",
    "context_summary_candidate",
    "current_input_candidate",
    "episode_text_forms",
    "episodes_candidate",
    "mandate_candidate",
    "pending_delta_candidate",
    "queue_candidate",
    "section_order",
    "section_stability",
    "system_candidate",
    "tools_candidate",
    "working_memory_candidate",
]
