"""The live-ledger fake, as the tests import it: its home is :mod:`holon.testing`."""

from __future__ import annotations

from holon.testing import START_TS, LiveLedger, RecordsSource, evidence_of, replay_live

__all__ = ["START_TS", "LiveLedger", "RecordsSource", "evidence_of", "replay_live"]
