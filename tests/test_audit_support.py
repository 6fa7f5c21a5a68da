"""Ledgers for the audit tests: the fixture ledgers as a live agent wrote them, and a rendered session.

No tests here; the test_audit_* modules import these builders.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from holon import records as r
from holon.context import Budget
from holon.ledger import Ledger
from holon.testing import run_session
from tests.live import evidence_of, replay_live

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledgers"


def write_ledger(
    path: Path,
    agent_id: str,
    records: Iterable[r.Record],
    *,
    blobs: dict[str, bytes] | None = None,
    segment_bytes: int = 8 << 20,
) -> list[r.Record]:
    """Create a ledger holding ``records`` (renumbered from 0); returns them as stored."""
    stored: list[r.Record] = []
    with Ledger.create(path, agent_id=agent_id, fsync="never", segment_bytes=segment_bytes) as ledger:
        for data in (blobs or {}).values():
            ledger.put_blob(data)
        ledger.append_many(r.Record(body=rec.body, ts=rec.ts, turn=rec.turn) for rec in records)
        stored = list(ledger.read())
    return stored


def small_ledger(path: Path) -> Path:
    """A ledger at ``path`` holding one short turn."""
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=0),
        r.Record(body=r.Message(role="user", text="hello"), ts=2, turn=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=0),
    ]
    write_ledger(path, "a", records)
    return path


def fixture_records(name: str) -> list[r.Record]:
    """A fixture ledger's evidence replayed through the live loop (derived records included)."""
    lines = (FIXTURES / f"{name}.jsonl").read_bytes().splitlines()
    evidence = [r.decode_json_record(line) for line in lines]
    return replay_live(evidence_of(evidence)).records


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def session_records(turns: int = 60) -> tuple[list[r.Record], dict[str, bytes]]:
    """A rendered migration session: real PromptRendered records (sections, omissions) and blobs."""
    session = run_session(turns, Budget(context_window=6_000, output_reserve=500), seed=5)
    return session.live.records, session.blobs
