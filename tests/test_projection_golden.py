"""Fixture ledgers and golden memory files are current, and each boundary fixture shows its boundary."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from holon import records as r
from holon.projections import verify_derivations
from tests.golden import GOLDEN, LEDGERS, ROOT, generate_all, read_fixture
from tests.live import replay_live


def _make_session() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_session", ROOT / "fixtures" / "make_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE_SESSION = _make_session()


@pytest.mark.parametrize("name", sorted(MAKE_SESSION.FIXTURES))
def test_fixture_ledger_is_what_the_script_writes(name: str) -> None:
    path = LEDGERS / f"{name}.jsonl"
    assert path.exists(), f"{path.relative_to(ROOT)} is missing; run `python fixtures/make_session.py`"
    assert path.read_bytes() == MAKE_SESSION.fixture_bytes(name), (
        f"{path.relative_to(ROOT)} is stale; run `python fixtures/make_session.py` then `make golden`"
    )


def test_golden_files_are_current() -> None:
    expected = generate_all()
    assert any(path.is_relative_to(GOLDEN) for path in expected)
    problems = []
    for path, data in sorted(expected.items()):
        relative: Path = path.relative_to(ROOT)
        if not path.exists():
            problems.append(f"missing {relative}")
        elif path.read_bytes() != data:
            problems.append(f"stale {relative}")
    assert not problems, "; ".join(problems) + " — run `make golden` and review the diff"


@pytest.mark.parametrize(
    "reason", ["active_work_switched", "wait_boundary", "task_rejoined", "result_checkpoint", "turn_cap"]
)
def test_boundary_fixture_finalizes_an_episode_for_its_reason(reason: str) -> None:
    live = replay_live(read_fixture(LEDGERS / f"boundary_{reason}.jsonl"))
    reasons = [
        rec.body.boundary_reason for rec in live.records if isinstance(rec.body, r.ContextEpisodeRecord)
    ]
    assert reasons[0] == reason
    assert verify_derivations(live.records).ok


def test_long_session_fixture_is_long_and_verifies() -> None:
    evidence = read_fixture(LEDGERS / "session_multi_work.jsonl")
    live = replay_live(evidence)
    turns = sum(rec.kind == "turn_started" for rec in evidence)
    work_items = {rec.body.id for rec in evidence if isinstance(rec.body, r.WorkItem)}
    assert turns >= 200 and len(work_items) >= 5
    assert live.state.memory.compression_epoch >= 20
    assert verify_derivations(live.records).ok
