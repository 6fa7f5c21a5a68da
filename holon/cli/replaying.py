"""``holon replay``: the ledger folded turn by turn; and what a derived record that diverges
means, which ``holon verify`` says too.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from holon.cli.failures import CheckFailed
from holon.cli.group import _common
from holon.cli.ledgers import _reading
from holon.cli.printing import _clip, _count, _echo, _echo_json_list, _n, _report
from holon.progress import progress_items

if TYPE_CHECKING:
    import holon.records as r
    from holon.projections import ProjectionConfig, VerificationReport
    from holon.replay import Replay, TurnReplay


def _turn_lines(turn: TurnReplay) -> list[str]:
    seqs = f"seq {turn.started_seq}..{turn.ended_seq if turn.ended_seq is not None else '…'}"
    said = _clip(turn.input, 60) if turn.input else "(no input)"
    head = f"turn {turn.turn} · {seqs} · {turn.trigger}: {said}"
    head += f" · {turn.outcome or 'still open'}"
    lines = [head]
    for p in turn.prompts:
        change = (
            "first"
            if p.previous_cache_key is None
            else ("changed" if p.cache_key != p.previous_cache_key else "unchanged")
        )
        lines.append(
            f"  prompt   seq {p.seq}: {_n(p.total_tokens)} of {_n(p.budget)} tokens · revision "
            f"{p.working_memory_revision}, epoch {p.compression_epoch} · cache key {change}: {p.cache_key}"
        )
        if p.sections:
            parts = [
                f"{s.section} {_n(s.tokens)}" + ("" if s.form == "full" else f" ({s.form})")
                for s in p.sections
            ]
            lines.append("           " + " · ".join(parts))
        if p.omitted:
            lines.append(f"           {p.omitted} item(s) left out or shortened (see `holon explain`)")
    if turn.delta is not None:
        d = turn.delta
        lines.append(
            f"  memory   revision {d.from_revision} → {d.to_revision} ({d.reason.replace('_', ' ')}; "
            f"changed {', '.join(d.changed_fields)}; "
            f"evidence ledger:{d.evidence_from_seq}..{d.evidence_to_seq})"
        )
        lines.extend(f"           {line}" for line in d.lines)
    else:
        lines.append(f"  memory   revision {turn.revision} (unchanged)")
    for e in turn.episodes:
        lines.append(
            f"  episode  {e.episode_id} finalized ({e.boundary_reason.replace('_', ' ')}): turns "
            f"{e.first_turn}-{e.last_turn}, {e.work_item_id or 'no work item'}, "
            f"ledger:{e.from_seq}..{e.to_seq}"
            f" — {_clip(e.objective, 50)}"
        )
        lines.append(f"           compression epoch → {turn.compression_epoch}")
    return lines


def _diff_lines(divergence: Any) -> list[str]:
    lines: list[str] = []
    for d in divergence.diffs:
        want = msgspec.json.format(msgspec.json.encode(d.expected), indent=2).decode().splitlines()
        got = msgspec.json.format(msgspec.json.encode(d.found), indent=2).decode().splitlines()
        lines.append(f"  {d.field}:")
        lines.extend(
            "    " + line.rstrip("\n")
            for line in difflib.unified_diff(
                want,
                got,
                fromfile="re-derived by this holon",
                tofile=f"ledger seq {divergence.seq}",
                lineterm="",
            )
        )
    return lines


@click.command()
@_common
@click.option("--until-turn", type=int, metavar="N", help="Stop after turn N (and its post-turn refresh).")
@click.option(
    "--check", is_flag=True, help="Also re-derive every derived record and exit 1 at the first divergence."
)
def replay(path: Path, as_json: bool, until_turn: int | None, check: bool) -> None:
    """Fold the ledger turn by turn and show what happened to working memory.

    For each turn: its input and outcome; each recorded prompt with its tokens by
    section and whether the cache key changed; the working-memory revision and the
    delta's reason and lines; episodes finalized and the compression epoch.

    With --check, replay verification runs too: every derived record (delta, episode)
    must equal what this holon derives from the evidence before it; otherwise the
    command prints the first divergent seq with a diff and exits 1.

    Example: holon replay runs/agent-7 --until-turn 40 --check
    """
    from holon.projections import verify_derivations
    from holon.replay import replay_of

    with _reading(path) as ledger:
        agent = ledger.agent_id
        upto = [ledger.head()[0] + 1]  # the records a pass reads: all, then those replayed
        # No bar while the turns print to the same terminal: it would be drawn between them.
        passes = ("reading", "verifying") if check else ("reading",)
        labels = iter(passes if sys.stdout.isatty() else (*passes, "replaying"))

        def read() -> Iterator[r.Record]:
            label, count = next(labels, None), upto[0]
            records = ledger.read(0, count)
            return records if label is None else progress_items(records, length=count, label=label)

        # The config the whole ledger records, also when only a prefix of it is replayed.
        replay = replay_of(read, until_turn=until_turn)
        upto[0] = replay.records
        projection = replay.projection
        # Checked before anything is printed, as the turns are printed while they are folded.
        report = verify_derivations(replay.read(), config=projection) if check else None
        with _report():
            if as_json:
                _echo_json_list(
                    {"agent_id": agent, "records": replay.records, "last_seq": replay.last_seq},
                    "turns",
                    replay.turns(),
                    lambda: _replayed_memory(replay) | {"check": report},
                )
            else:
                _echo(
                    f"agent {agent} · {_count(replay.records, 'record')} · "
                    f"{_count(replay.turn_count, 'turn')} · last seq {replay.last_seq}"
                )
                for turn in replay.turns():
                    _echo("")
                    for line in _turn_lines(turn):
                        _echo(line)
                _echo("")
                for line in _replay_end_lines(replay, report):
                    _echo(line)
    if report is not None and not report.ok:
        raise _diverged(report, projection)


def _replay_end_lines(replay: Replay, report: VerificationReport | None) -> list[str]:
    """The end of `holon replay`'s text, once the turns are folded: the memory, and the check's verdict."""
    lines: list[str] = []
    final = replay.state if replay.records else None
    if final is not None:
        memory = final.memory
        lines.append(
            f"after seq {final.seq}: working memory revision {memory.revision}, compression "
            f"epoch {memory.compression_epoch}, {memory.archived_episodes} episode(s) archived, "
            f"pending delta: {'yes' if memory.pending is not None else 'no'}"
        )
    if report is None:
        return lines
    if report.ok:
        pending = " (the last turn's refresh is still to be appended)" if report.pending_refresh else ""
        lines.append(
            f"replay check ok: {report.refreshes} post-turn refreshes re-run, "
            f"{report.derived_checked} "
            f"derived records equal what this holon derives (projection version "
            f"{report.projection_version}){pending}"
        )
        return lines
    assert report.divergence is not None
    lines.append(f"replay check FAILED at seq {report.divergence.seq}: {report.divergence.describe()}")
    return [*lines, *_diff_lines(report.divergence)]


def _replayed_memory(replay: Replay) -> dict[str, int]:
    """The memory figures of ``replay --json`` once the turns are folded (0 when nothing was)."""
    memory = replay.state.memory if replay.state is not None and replay.records else None
    return {
        "revision": memory.revision if memory else 0,
        "compression_epoch": memory.compression_epoch if memory else 0,
        "episodes": memory.archived_episodes if memory else 0,
    }


def _diverged(report: VerificationReport, projection: ProjectionConfig) -> CheckFailed:
    """The failure of `replay --check` and `verify` when a derived record differs."""
    divergence = report.divergence
    assert divergence is not None
    return CheckFailed(
        f"derived records diverge at seq {divergence.seq} ({divergence.kind}); "
        f"{_divergence_cause(report, projection)}"
    )


def _divergence_cause(report: VerificationReport, projection: ProjectionConfig) -> str:
    """What a divergence means, and what to do: the cause named when the report shows it."""
    divergence = report.divergence
    assert divergence is not None
    for diff in divergence.diffs:
        if diff.field != "body.projection_version" or not isinstance(diff.found, int):
            continue
        # Derived by other rules: the ledger is not damaged, and "edited" sent the user
        # looking for a tampering that never happened.
        written = (
            f"the {divergence.found_kind} there was derived by projection version {diff.found}; this holon "
        )
        if diff.found < diff.expected:
            return (
                f"{written}derives version {diff.expected}: an older holon wrote the ledger, and the memory "
                "rules have changed since (docs/memory-model.md, Replay verification), which is not damage; "
                "check its derived records with the holon release that wrote them"
            )
        return (
            f"{written}derives version {diff.expected}: a newer holon wrote the ledger; "
            "check it with that release or a later one"
        )
    if divergence.kind == "missing" and divergence.after_seq is not None and report.derived_checked == 0:
        # Evidence written with Ledger.append alone: no refresh ever ran, so memory never changed.
        return (
            f"the ledger holds no derived record before seq {divergence.seq}: its writer appended "
            "evidence without the post-turn refresh; write evidence with holon.Agent, `holon append` or "
            "holon.replay.append_evidence, which append a turn's derived records after its turn_ended"
        )
    return f"the ledger was written by different projection code, or edited{_projection_hint(projection)}"


def _projection_hint(projection: ProjectionConfig) -> str:
    """What a divergence message adds about the projection config the ledger was folded under."""
    from holon.projections import DEFAULT_CONFIG
    from holon.replay import describe_projection

    if projection == DEFAULT_CONFIG:
        # Before holon recorded the config, a non-default one left no trace in the ledger.
        return (
            " (or derived under a non-default ProjectionConfig by a holon that did not record it: "
            "such a ledger cannot be told apart)"
        )
    return f" (folded under the recorded {describe_projection(projection)})"
