"""Golden files: a small registry of generators, and the command that regenerates them all.

``python -m tests.golden`` (``make golden``) rewrites every golden file under
``fixtures/golden/``; review the diff, never edit by hand. ``python -m tests.golden
--check`` only reports missing or stale files. A layer adds its own generator with
:func:`golden`::

    @golden("context")
    def _context() -> dict[str, bytes]:
        return {"<fixture>/prompt.txt": render(...)}

A generator returns file contents keyed by path relative to ``fixtures/golden``; it
must be deterministic (tests compare the bytes).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
from click.testing import CliRunner

from holon import records as r
from holon.cli import main as holon_cli
from holon.context import (
    Budget,
    RenderConfig,
    build_context,
    prompt_rendered,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from holon.projections import WorkingMemorySnapshot, apply, initial_state
from holon.replay import turn_spans
from tests.cli_support import build_ledger, live_records
from tests.live import replay_live

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden"
LEDGERS = ROOT / "fixtures" / "ledgers"

GoldenGenerator = Callable[[], dict[str, bytes]]

#: generator name -> generator. Add with :func:`golden`.
GENERATORS: dict[str, GoldenGenerator] = {}


def golden(name: str) -> Callable[[GoldenGenerator], GoldenGenerator]:
    """Register a golden-file generator under ``name``."""

    def register(generator: GoldenGenerator) -> GoldenGenerator:
        if name in GENERATORS:
            raise ValueError(f"golden generator {name!r} is registered twice")
        GENERATORS[name] = generator
        return generator

    return register


def read_fixture(path: Path) -> list[r.Record]:
    """The records of a fixture ledger (canonical JSONL)."""
    lines = path.read_bytes().splitlines()
    return [r.decode_json_record(line, where=f"line {i + 1} of {path.name}") for i, line in enumerate(lines)]


def fixture_ledgers() -> list[Path]:
    """Every fixture ledger, sorted by name."""
    return sorted(LEDGERS.glob("*.jsonl"))


def generate_all() -> dict[Path, bytes]:
    """Every golden file's expected bytes, by absolute path."""
    out: dict[Path, bytes] = {}
    for name in sorted(GENERATORS):
        for relative, data in GENERATORS[name]().items():
            path = GOLDEN / relative
            if path in out:
                raise ValueError(f"golden file {relative} is produced by two generators")
            out[path] = data
    return out


# --------------------------------------------------------------------------- projections


class _TurnMemory(msgspec.Struct, frozen=True, omit_defaults=False):
    """One line of memory.jsonl: working memory after a turn's post-turn refresh."""

    turn: int | None
    turn_ended_seq: int
    outcome: str
    revision: int
    compression_epoch: int
    pending_from: int | None
    snapshot: object  # the full snapshot when this turn changed it, else None
    delta: object
    episode: object


@golden("projections")
def _projection_memory() -> dict[str, bytes]:
    encoder = msgspec.json.Encoder()
    files: dict[str, bytes] = {}
    for path in fixture_ledgers():
        live = replay_live(read_fixture(path))
        records = live.records
        lines: list[bytes] = []
        state_snapshot: WorkingMemorySnapshot | None = None
        state = initial_state()
        i = 0
        while i < len(records):
            record = records[i]
            state = apply(state, record)
            i += 1
            if not isinstance(record.body, r.TurnEnded):
                continue
            delta = episode = None
            while i < len(records) and records[i].kind in r.DERIVED_KINDS:
                state = apply(state, records[i])
                body = records[i].body
                if isinstance(body, r.WorkingMemoryDelta):
                    delta = body
                else:
                    episode = body
                i += 1
            memory = state.memory
            changed = memory.snapshot != state_snapshot
            state_snapshot = memory.snapshot
            entry = _TurnMemory(
                turn=record.turn,
                turn_ended_seq=record.seq,
                outcome=record.body.outcome,
                revision=memory.revision,
                compression_epoch=memory.compression_epoch,
                pending_from=memory.pending.from_revision if memory.pending is not None else None,
                snapshot=memory.snapshot if changed else None,
                delta=delta,
                episode=episode,
            )
            lines.append(encoder.encode(entry))
        files[f"{path.stem}/memory.jsonl"] = b"".join(line + b"\n" for line in lines)
    return files


# --------------------------------------------------------------------------- context

#: Budget and config of the golden prompts (heuristic estimator: no optional dependency).
GOLDEN_BUDGET = Budget(context_window=8_000, output_reserve=1_000)
GOLDEN_RENDER = RenderConfig(prompt_cache_key="golden")


def _json(value: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n"


@golden("context")
def _context_prompts() -> dict[str, bytes]:
    """The prompt each fixture ledger renders to: text, both adapter forms, and the plan."""
    files: dict[str, bytes] = {}
    for path in fixture_ledgers():
        live = replay_live(read_fixture(path))
        agent = path.stem
        prompt = build_context(
            live.state, GOLDEN_BUDGET, GOLDEN_RENDER, agent_id=agent, history=live.evidence
        )
        files[f"{agent}/prompt.txt"] = prompt.text.encode() + b"\n"
        files[f"{agent}/prompt.anthropic.json"] = _json(
            to_anthropic_messages(prompt, model="claude-sonnet-5-5", max_tokens=1_000)
        )
        files[f"{agent}/prompt.openai-chat.json"] = _json(to_openai_chat(prompt, model="gpt-5.5"))
        files[f"{agent}/prompt.openai-responses.json"] = _json(to_openai_responses(prompt, model="gpt-5.5"))
        files[f"{agent}/prompt.rendered.json"] = _json(prompt_rendered(prompt))
    return files


# --------------------------------------------------------------------------- cli

#: Golden CLI runs per fixture ledger: file name -> arguments after the ledger path.
#: ``{turn}`` is the last turn with a recorded prompt (so `render --at-turn` is checked
#: against a real prompt_hash).
CLI_RUNS: dict[str, tuple[str, ...]] = {
    "cli-replay.txt": ("replay", "{path}", "--check"),
    "cli-render.txt": ("render", "{path}"),
    "cli-render.json": ("render", "{path}", "--format", "json"),
    "cli-render.anthropic.json": ("render", "{path}", "--format", "anthropic"),
    "cli-render.openai.json": ("render", "{path}", "--format", "openai"),
    "cli-render.openai-responses.json": ("render", "{path}", "--format", "openai-responses"),
    "cli-render-at-turn.txt": ("render", "{path}", "--at-turn", "{turn}"),
    "cli-render-at-turn.json": ("render", "{path}", "--at-turn", "{turn}", "--format", "json"),
    "cli-explain.txt": ("explain", "{path}", "--at-turn", "{turn}"),
    "cli-explain.json": ("explain", "{path}", "--at-turn", "{turn}", "--json"),
    # A tight budget, so the plan shows compaction, omissions and their refs.
    "cli-explain-tight.txt": (
        "explain",
        "{path}",
        "--at-turn",
        "{turn}",
        "--budget",
        "1500",
        "--output-reserve",
        "100",
    ),
    "cli-memory.txt": ("memory", "{path}"),
    "cli-memory-at-turn.txt": ("memory", "{path}", "--at-turn", "{turn}"),
    "cli-memory.json": ("memory", "{path}", "--json"),
}


def last_prompted_turn(name: str) -> int:
    """The last turn of fixture ``name`` that recorded a prompt."""
    records = live_records(name)
    turns = [
        span.turn
        for span in turn_spans(records)
        if any(isinstance(records[i].body, r.PromptRendered) for i in range(span.start, span.end))
    ]
    if not turns:
        raise ValueError(f"fixture {name} records no prompt; CLI goldens need one")
    return turns[-1]


def cli_outputs(name: str, directory: Path) -> dict[str, bytes]:
    """Every golden CLI output of fixture ``name``, run on a ledger built under ``directory``."""
    ledger = build_ledger(directory / name, name)
    values = {"path": str(ledger), "turn": str(last_prompted_turn(name))}
    runner = CliRunner()
    out: dict[str, bytes] = {}
    for file, template in CLI_RUNS.items():
        args = [part.format(**values) for part in template]
        result = runner.invoke(holon_cli, args, catch_exceptions=False)
        if result.exit_code != 0:
            raise RuntimeError(f"holon {' '.join(args)} exited {result.exit_code}: {result.stderr.strip()}")
        out[f"{name}/{file}"] = result.stdout_bytes
    return out


@golden("cli")
def _cli() -> dict[str, bytes]:
    """`holon replay`, `render` (every format, next prompt and a past turn), `explain`, `memory`."""
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="holon-golden-") as tmp:
        for path in fixture_ledgers():
            files.update(cli_outputs(path.stem, Path(tmp)))
    return files


def main(argv: list[str]) -> int:
    """Regenerate (or with ``--check``, verify) every golden file; returns an exit code."""
    check = "--check" in argv
    stale = 0
    for path, data in generate_all().items():
        current = path.read_bytes() if path.exists() else None
        if current == data:
            continue
        stale += 1
        relative = path.relative_to(ROOT)
        if check:
            print(f"{'missing' if current is None else 'stale'}: {relative}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"wrote {relative}")
    if check and stale:
        print(f"{stale} golden file(s) out of date; run `make golden` and review the diff")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
