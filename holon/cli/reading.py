"""The read commands over working memory and the evidence: ``holon memory``, ``holon episodes``,
``holon get``, ``holon search``, ``holon mcp`` and ``holon stats``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec

from holon.cli.group import _common, _given
from holon.cli.ledgers import _each_record, _passes, _reading
from holon.cli.printing import _clip, _count, _echo, _echo_json, _n, _table, _write_bytes

if TYPE_CHECKING:
    import holon.records as r


def _delta_summary(delta: r.WorkingMemoryDelta) -> str:
    return (
        f"revision {delta.from_revision} → {delta.to_revision} ({delta.reason.replace('_', ' ')}, "
        f"evidence ledger:{delta.evidence_from_seq}..{delta.evidence_to_seq})"
    )


@click.command()
@_common
@click.option(
    "--at-turn", type=int, metavar="N", help="Working memory after turn N's post-turn refresh (default: now)."
)
def memory(path: Path, as_json: bool, at_turn: int | None) -> None:
    """Show working memory: the snapshot, the pending delta and the episode being built.

    The snapshot lines cite the ledger seqs their facts came from ([ledger:<seq>]).

    Example: holon memory runs/agent-7 --at-turn 12
    """
    from holon.replay import memory_of

    with _reading(path) as ledger:
        read, resume = _passes(ledger)
        view = memory_of(read, at_turn, resume=resume)
    if as_json:
        _echo_json(view)
        return
    when = f"after turn {at_turn}" if at_turn is not None else "now"
    confirmed = view.confirmed_revision if view.confirmed_revision is not None else "none"
    _echo(
        f"working memory {when} (seq {view.after_seq}) · revision {view.revision} · compression epoch "
        f"{view.compression_epoch} · last revision shown to the model: {confirmed} · "
        f"{view.archived_episodes} episode(s) archived"
    )
    _echo("")
    _echo("snapshot:")
    for line in view.lines or ("(empty: no work item, plan or facts yet)",):
        _echo(f"  {line}")
    _echo("")
    delta = view.pending_delta
    if delta is not None:
        _echo(f"pending delta: {_delta_summary(delta)} — pinned in every prompt until one confirms it")
    elif view.latest_delta is not None:
        # The renderer keeps showing a confirmed delta while its revision holds (same
        # bytes, same cache prefix); say so, or `explain` seems to contradict this.
        delta = view.latest_delta
        _echo(
            f"pending delta: none — a prompt confirmed revision {view.revision}; its delta, "
            f"{_delta_summary(delta)}, may still be shown, unpinned, while the revision holds"
        )
    else:
        _echo("pending delta: none (the model has seen the current revision)")
    for line in delta.lines if delta is not None else ():
        _echo(f"  {line}")
    _echo("")
    b = view.builder
    if b.turns == 0 and b.from_seq is None:
        _echo("active episode: nothing accumulated since the last episode")
        return
    turns = f"turns {b.first_turn}-{b.last_turn}" if b.first_turn is not None else "no turns yet"
    _echo(
        f"active episode: {b.work_item_id or 'no work item'}, {turns} ({b.turns} turn(s)), from ledger:"
        f"{b.from_seq}, {b.tool_calls} tool call(s), {b.failed_calls} failed"
    )
    for label, items in (
        ("files", b.files),
        ("commands", b.commands),
        ("verification", b.verification),
        ("decisions", b.decisions),
        ("results", b.results),
    ):
        if items:
            _echo(f"  {label}: {'; '.join(items)}")


@click.command()
@_common
@click.option("--search", "query", metavar="QUERY", help="Rank episodes by BM25 relevance to QUERY.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Most episodes shown with --search.",
)
def episodes(path: Path, as_json: bool, query: str | None, limit: int) -> None:
    """List the archived episodes (finished stretches of work), or search them.

    Each episode is an immutable record of turns, work item, files, commands and
    results; restore one in full with `holon get PATH episode:<id>`.

    Example: holon episodes runs/agent-7 --search "billing migration"
    """
    import holon.records as r
    from holon.context import EpisodeIndex

    if query is None and _given("limit"):
        raise click.UsageError("--limit applies to --search only; without it every episode is listed")
    if query is not None:
        _check_query(query)
    with _reading(path) as ledger:
        # Streamed: the episodes are a small part of a long ledger.
        archive = [rec.body for rec in _each_record(ledger) if isinstance(rec.body, r.ContextEpisodeRecord)]
    if query is None:
        if as_json:
            _echo_json(archive)
            return
        if not archive:
            _echo("no episodes archived yet")
            return
        for line in _table(
            ["id", "turns", "work", "boundary", "evidence", "objective"],
            [
                [
                    e.episode_id,
                    f"{e.first_turn}-{e.last_turn}",
                    e.work_item_id or "-",
                    e.boundary_reason,
                    f"ledger:{e.from_seq}..{e.to_seq}",
                    _clip(e.objective, 50),
                ]
                for e in archive
            ],
            right=(0,),
        ):
            _echo(line)
        return
    hits = EpisodeIndex(archive).search(query, limit=limit)
    if as_json:
        _echo_json(
            [
                {
                    "ref": f"episode:{h.episode.episode_id}",
                    "score": round(h.score, 6),
                    "matched": h.matched,
                    "episode": h.episode,
                }
                for h in hits
            ]
        )
        return
    if not hits:
        _echo(f"no episode matches {query!r}")
        return
    for line in _table(
        ["ref", "score", "turns", "work", "matched", "objective"],
        [
            [
                f"episode:{h.episode.episode_id}",
                f"{h.score:.3f}",
                f"{h.episode.first_turn}-{h.episode.last_turn}",
                h.episode.work_item_id or "-",
                ", ".join(h.matched),
                _clip(h.episode.objective, 40),
            ]
            for h in hits
        ],
        right=(1,),
    ):
        _echo(line)


# --------------------------------------------------------------------------- get / search


def _check_query(query: str) -> None:
    """Refuse a query with no word to search for (as holon_search tells the model).

    Its answer was "nothing matches": read as "the ledger holds no such thing", when the
    query (punctuation, an emoji, only common words) could match nothing in any ledger.
    """
    from holon.search import search_terms

    if not search_terms(query):
        quoted = repr(query if len(query) <= 200 else query[:199] + "…")
        raise click.UsageError(
            f"the query {quoted} has no words to search for: search for words of two or more "
            "letters or digits (common words such as 'the' or 'with' are ignored)"
        )


@click.command()
@_common
@click.argument("ref")
def get(path: Path, as_json: bool, ref: str) -> None:
    """Restore REF to its original bytes: ledger:<seq>, blob:<hash> or episode:<id>.

    Prints exactly what a prompt placeholder promises: a tool result's full output
    (from its blob if it was moved), a message's text, a turn's input, an episode's
    JSON, a blob's bytes; any other record as its canonical JSON line. Those bytes go
    unchanged to a pipe or file; on a terminal, control characters and bytes that are
    not UTF-8 are shown as escapes (\\x1b, \\xff). With --json, the whole record or
    episode (and a blob as text or base64).

    Example: holon get runs/agent-7 ledger:1234 > output.txt
    """
    import holon.records as r
    from holon.context import restore, restore_bytes
    from holon.replay import LedgerRefSource

    with _reading(path) as ledger:
        source = LedgerRefSource(ledger)
        if not as_json:
            data = restore_bytes(ref, source)
            _write_bytes(data, newline=not data.endswith(b"\n"))
            return
        found = restore(ref, source)
    if isinstance(found, bytes):
        try:
            text: str | None = found.decode()
        except UnicodeDecodeError:
            text = None
        _echo_json(
            {
                "ref": ref,
                "blob": {
                    "size": len(found),
                    "text": text,
                    "base64": None if text is not None else base64.b64encode(found).decode(),
                },
            }
        )
    elif isinstance(found, r.ContextEpisodeRecord):
        _echo_json({"ref": ref, "episode": found})
    else:
        _echo_json({"ref": ref, "record": msgspec.json.decode(r.encode_json_record(found))})


@click.command()
@_common
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Most hits shown.")
@click.option(
    "--only",
    type=click.Choice(["episodes", "evidence"]),
    help="Search only archived episodes, or only evidence records.",
)
def search(path: Path, as_json: bool, query: str, limit: int, only: str | None) -> None:
    """Search episodes and evidence (messages, tool calls and results, plans, ...) with BM25.

    Identifiers match as written and by their parts (#123, pull/123, src/shop/cart.py, a
    URL). An operator's request or a decision counts more than a plan's restatement, a
    tool's result more than the call's echo, and a newer record a little more than an
    older one. Near-duplicates (a plan step restated in every plan update) are one hit
    with their count and every ref. Each hit says why it matched (why: the terms, the
    field and its weight; --json: matched, field, why, count, refs).

    Ranking is deterministic (ties go to the more recent record). Each hit shows the
    ref that restores it and where it came from: the record, its turn and the work item
    it belonged to (the one it names, else the one active when it was recorded; --json:
    work_item), or the episode and its work item. A long tool output kept in the blob
    store is searched by its text (its first and last 500,000 characters), not only by
    its preview. The model's own recall calls (holon_get, holon_search) are left out,
    as the agent's search leaves them out.

    A query with no word to search for (punctuation, only common words such as "the")
    is a usage error, not "nothing matches".

    Example: holon search runs/agent-7 "flaky test_checkout"
    """
    from holon.runtime import blob_text_of, is_recall
    from holon.search import MemorySearch

    _check_query(query)
    with _reading(path) as ledger:
        # As Agent.search: the model's own recall calls are not evidence to find.
        # Streamed: the index keeps neither the records nor their searchable text.
        # A blob-stored output (over the blob threshold) is searched by its text, read from
        # the blob store, not only by its 200-character preview.
        # Built for this one query: the hits of a full index, without its every term's postings;
        # holding no text, a hit's record is read back by its seq.
        index = MemorySearch(
            (rec for rec in _each_record(ledger) if not is_recall(rec)),
            blob_text=blob_text_of(ledger),
            read_record=ledger.get,
            for_query=query,
        )
        hits = index.search(query, limit=limit, only=only)  # type: ignore[arg-type]
    if index.unread_blobs:
        _echo(
            f"holon: warning: {index.unread_blobs:,} blob-stored tool output(s) could not be read "
            f"(missing or damaged) and were searched by their preview only; `holon verify {path}` "
            "names them",
            err=True,
        )
    if as_json:
        _echo_json(hits)
        return
    if not hits:
        _echo(f"nothing matches {query!r}")
        return
    for i, hit in enumerate(hits, 1):
        _echo(f"{i:>2}. {hit.ref}  score {hit.score:.3f}  {hit.provenance}")
        _echo(f"    {hit.snippet}")
        _echo(f"    why: {hit.why}")
        if hit.count > 1:
            _echo(f"    {hit.count} near-identical hits: {', '.join(hit.refs)}")


@click.command(name="mcp")
@_common
def mcp_(path: Path, as_json: bool) -> None:
    """Serve holon_search and holon_get for the ledger at PATH to an MCP client, over stdio.

    Any client of the Model Context Protocol (Claude Code, Cursor, the OpenAI Agents SDK)
    starts this command and gets the two recall tools holon's own runtime offers its
    model: holon_search (BM25 over episodes and evidence) and holon_get (the original
    text behind a ref, a page at a time). The ledger is opened read-only: the server
    never writes to it, runs beside the agent appending to it, and sees each record as
    soon as it is appended. Stdout carries the protocol; warnings go to stderr. With
    --json, it does not serve: it prints the tools and instructions it would offer, and
    exits. Needs the `mcp` extra (pip install 'holon[mcp]').

    Example: claude mcp add holon -- holon mcp runs/agent-7
    """
    from holon.integrations import describe_mcp, serve_mcp

    if as_json:
        _echo_json(describe_mcp(path))
        return
    serve_mcp(path)


# --------------------------------------------------------------------------- stats


@click.command()
@_common
def stats(path: Path, as_json: bool) -> None:
    """Summarize the ledger: records by kind, turns, prompt tokens per section, evictions, cache churn.

    Token figures come from the recorded prompts (prompt_rendered records): min, median
    and max per section over the prompts that rendered it. Cache-key changes count
    consecutive prompts whose cacheable prefix changed; unknown outcomes are tool calls
    whose effect the ledger cannot tell (a result recorded as unknown after a crash, or
    no result at all). Evictions (items prompts left out or shortened) are counted by
    cause: the reason with the item it names as <id> and its counts as N, as `holon audit
    --report evictions` counts them; --json has them by reason too.

    Example: holon stats runs/agent-7
    """
    from holon.replay import ledger_projection, ledger_stats

    with _reading(path) as ledger:
        read, resume = _passes(ledger)
        agent = ledger.agent_id
        # Passes that hold no records: the config (from the newest checkpoint when it states it,
        # as `holon memory` takes it; else a pass of its own), then the counts.
        projection = ledger_projection(read, resume)
        s = ledger_stats(read(), projection=projection, resume=resume)
    if as_json:
        _echo_json({"agent_id": agent, **msgspec.to_builtins(s)})
        return
    span = ""
    if s.first_ts is not None and s.last_ts is not None:
        span = f" · {(s.last_ts - s.first_ts) / 3_600_000:.1f} h of ledger time"
    _echo(f"agent {agent} · {_count(s.records, 'record')} · {_count(s.turns, 'turn')}{span}")
    outcomes = ", ".join(f"{k} {v}" for k, v in s.outcomes.items()) or "none"
    _echo(f"turn outcomes: {outcomes}")
    _echo(
        f"tool calls: {_n(s.tool_calls)} · unknown outcomes: {s.unknown_outcomes} · "
        f"outputs in blobs: {s.blobs}"
    )
    _echo(
        f"working memory revision {s.revision} · compression epoch {s.compression_epoch} · "
        f"{s.episodes} episode(s)"
    )
    _echo("")
    _echo("records by kind:")
    for line in _table(["kind", "count"], [[k, _n(v)] for k, v in s.by_kind.items()], right=(1,)):
        _echo("  " + line)
    _echo("")
    if not s.prompts:
        _echo("no recorded prompts (prompt_rendered records), so no token figures")
        return
    _echo(
        f"prompts: {s.prompts} · cache keys: {s.cache_keys} distinct, "
        f"{s.cache_key_changes} change(s) between "
        f"consecutive prompts · evictions: {_n(s.evictions)}"
    )
    rows = [
        [x.section, x.prompts, _n(x.min), f"{x.median:,.0f}", _n(x.max), x.compacted, x.omitted]
        for x in (*s.sections, *((s.prompt_tokens,) if s.prompt_tokens else ()))
    ]
    for line in _table(
        ["section", "prompts", "min", "median", "max", "shortened", "omitted"], rows, right=(1, 2, 3, 4, 5, 6)
    ):
        _echo("  " + line)
    if s.evictions_by_cause:
        _echo("")
        # By cause, not reason: reasons name their item ("decision d7 not shown"), a row each.
        _echo("evictions by cause (item ids shown as <id>, counts as N):")
        for line in _table(
            ["cause", "count"], [[k, _n(v)] for k, v in s.evictions_by_cause.items()], right=(1,)
        ):
            _echo("  " + line)
