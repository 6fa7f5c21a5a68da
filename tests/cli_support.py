"""Ledgers for CLI tests and golden files, built from the fixture ledgers.

A fixture (``fixtures/ledgers/*.jsonl``) holds evidence and runtime records only, and
its ``prompt_rendered`` records are placeholders. :func:`live_records` replays it the
way the runtime would: derived records after every ``turn_ended``, and each
``prompt_rendered`` replaced by the record of a real prompt, rendered with
:data:`CLI_BUDGET` / :data:`CLI_RENDER` from the state at that point — so `holon render
--at-turn N` has a recorded prompt_hash to reproduce.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

import msgspec
from click.testing import CliRunner, Result

from holon import records as r
from holon.cli import main as holon_cli
from holon.context import Budget, RenderConfig, build_context, prompt_rendered
from holon.ledger import Ledger
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, fold
from holon.runtime.checkpoints import ToolIndex, write_checkpoint
from tests.live import LiveLedger

__all__ = [
    "CLI_BUDGET",
    "CLI_RENDER",
    "LEDGERS",
    "build_ledger",
    "fixture_names",
    "invoke",
    "live_records",
    "tree_bytes",
    "write_jsonl",
]

ROOT = Path(__file__).resolve().parent.parent
LEDGERS = ROOT / "fixtures" / "ledgers"

#: Budget and render config of the prompts recorded in CLI test ledgers.
CLI_BUDGET = Budget(context_window=8_000, output_reserve=1_000)
CLI_RENDER = RenderConfig(prompt_cache_key="golden")


def fixture_names() -> list[str]:
    """The fixture ledgers' names (file stems), sorted."""
    return sorted(p.stem for p in LEDGERS.glob("*.jsonl"))


@functools.cache
def live_records(name: str) -> tuple[r.Record, ...]:
    """The records a live agent would have written for fixture ``name`` (agent id = ``name``)."""
    live = LiveLedger()
    path = LEDGERS / f"{name}.jsonl"
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        record = r.decode_json_record(line, where=f"line {number} of {path.name}")
        if isinstance(record.body, r.PromptRendered):
            live.before_prompt()
            prompt = build_context(live.state, CLI_BUDGET, CLI_RENDER, agent_id=name, history=live.evidence)
            record = r.Record(body=prompt_rendered(prompt), ts=record.ts, turn=record.turn)
        live._append(record)
        if isinstance(record.body, r.TurnEnded):
            live.refresh()
    return tuple(live.records)


def build_ledger(directory: Path, name: str) -> Path:
    """Write fixture ``name`` as a live ledger at ``directory`` and return its path."""
    with Ledger.create(directory, agent_id=name, fsync="never") as ledger:
        ledger.append_many(live_records(name))
    return directory


def invoke(*args: str | Path, input: bytes | None = None) -> Result:
    """Run ``holon`` with ``args`` in-process (stdout and stderr kept apart)."""
    return CliRunner().invoke(holon_cli, [str(a) for a in args], input=input)


def tree_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: to prove a command wrote nothing."""
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def write_jsonl(path: Path, records: Iterable[r.Record]) -> Path:
    """Write records as canonical JSONL lines."""
    path.write_bytes(b"".join(r.encode_json_record(rec) + b"\n" for rec in records))
    return path


def corrupt_ledger(target: Path) -> Path:
    """A fixture ledger at ``target`` with one byte flipped in the middle of its active segment."""
    build_ledger(target, "boundary_turn_cap")
    segment = sorted((target / "segments").glob("*.seg"))[-1]
    data = bytearray(segment.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    segment.write_bytes(bytes(data))
    return target


def divergent_ledger(target: Path) -> tuple[Path, int]:
    """A ledger whose first episode was edited after it was derived, and that episode's seq."""
    records = list(live_records("boundary_task_rejoined"))
    index = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.ContextEpisodeRecord))
    body = records[index].body
    assert isinstance(body, r.ContextEpisodeRecord)
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, objective="rewritten")
    )
    with Ledger.create(target, agent_id="x", fsync="never") as ledger:
        ledger.append_many(records)
    return target, records[index].seq


def checkpoint_at_head(
    ledger: Ledger, *, config: ProjectionConfig = DEFAULT_CONFIG, head_hash: str | None = None
) -> None:
    """Checkpoint ``ledger`` (open for writing) at its head, folded under ``config``, as its agent would.

    ``head_hash`` overrides the hash the checkpoint claims (a checkpoint that does not verify).
    """
    ledger.flush()
    seq, hashed = ledger.head()
    index = ToolIndex()
    for record in ledger.read():
        index.apply(record)
    state = fold(ledger.read(), config=config)
    assert state.seq == seq
    write_checkpoint(ledger.path, state, index, head_hash=head_hash if head_hash is not None else hashed)
