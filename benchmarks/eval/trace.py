"""What every policy produces and every metric reads: one model call's exact prompt.

The machinery lives in the library (:mod:`holon.simulate`), shared with ``holon
simulate``: :class:`CallPrompt` (a call's lines, per-line token costs, breakpoints and
evictions), the :class:`TokenCounter` every policy is counted with, and
:func:`call_positions`, which says where an agent makes its model calls in a record
stream — the generated scenarios and the imported real transcripts go through the same
rule. :func:`transcript_text` is how a record reads in the baselines' chat transcripts.
"""

from __future__ import annotations

from holon.simulate import (
    UNIT_START,
    Block,
    CallPrompt,
    TokenCounter,
    call_positions,
    is_model_output,
    transcript_text,
)

__all__ = [
    "Block",
    "CallPrompt",
    "UNIT_START",
    "TokenCounter",
    "call_positions",
    "is_model_output",
    "transcript_text",
]
