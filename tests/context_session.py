"""The generated migration session, as the tests import it: its home is :mod:`holon.testing`."""

from __future__ import annotations

from holon.testing import (
    AGENT,
    CONSTRAINT,
    DECISION,
    PLAN_EDIT_TURN,
    PLAN_V1,
    PLAN_V2_EXTRA,
    POLICY,
    UNRELATED,
    WAIT,
    Session,
    run_session,
)

__all__ = [
    "AGENT",
    "CONSTRAINT",
    "DECISION",
    "PLAN_EDIT_TURN",
    "PLAN_V1",
    "PLAN_V2_EXTRA",
    "POLICY",
    "UNRELATED",
    "WAIT",
    "Session",
    "run_session",
]
