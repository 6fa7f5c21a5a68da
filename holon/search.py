"""MemorySearch: BM25 over a ledger's archived episodes and its evidence, for ``holon search``.

One index holds two kinds of documents: each archived ``ContextEpisodeRecord`` (its
structured text, as episode selection matches it) and each evidence record with text a
person would look for — messages, briefs, tool calls and results (a blob's preview,
not its bytes), work items, plans, decisions, follow-ups, waits, tasks, turn inputs
and legacy summaries. Every hit carries the ref that restores it (``episode:<id>`` or
``ledger:<seq>``) and where it came from.

Ranking is deterministic: query terms are de-duplicated and sorted before scoring, and
ties go to the more recent document (higher seq), then episodes before evidence.
The index is pure (records in, hits out) and incremental (:meth:`MemorySearch.add`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.context.search import episode_text, terms

__all__ = ["MemoryHit", "MemorySearch", "evidence_text"]

_K1: Final = 1.2
_B: Final = 0.75
_SNIPPET: Final = 160


def evidence_text(body: r.Body) -> str | None:
    """The searchable text of an evidence record, or ``None`` for kinds search skips."""
    if isinstance(body, r.Message | r.Brief | r.ContextSummary):
        return body.text
    if isinstance(body, r.ToolIntent):
        return f"{body.tool} {msgspec.json.encode(body.args).decode()}"
    if isinstance(body, r.ToolResult):
        output = body.output or (body.blob.preview if body.blob is not None else "")
        return "\n".join([f"{body.tool} {body.status}", *body.touched_files, output])
    if isinstance(body, r.WorkItem):
        parts = [body.id, body.objective, body.delivery_target or "", *body.scope_constraints]
        parts.append(body.summary or "")
        return "\n".join(p for p in parts if p)
    if isinstance(body, r.WorkPlan):
        return "\n".join(step.text for step in body.steps)
    if isinstance(body, r.Decision):
        return "\n".join(p for p in (body.id, body.text, body.rationale or "") if p)
    if isinstance(body, r.FollowUp):
        return f"{body.id}\n{body.text}"
    if isinstance(body, r.WaitingIntent):
        return "\n".join(p for p in (body.waiting_on, body.resume_hint or "") if p)
    if isinstance(body, r.TaskStarted):
        return body.description
    if isinstance(body, r.TaskResult):
        return "\n".join(p for p in (body.summary, body.output) if p)
    if isinstance(body, r.TurnStarted):
        return body.input
    return None


class MemoryHit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result.

    ``ref`` restores it (``holon get``); ``source`` is ``episode`` or the record kind;
    ``seq`` is the record's seq (an episode's last evidence seq); ``turns`` the turn
    range it covers; ``snippet`` its best-matching line; ``matched`` the query terms found.
    """

    ref: str
    source: str
    score: float
    seq: int
    turns: tuple[int, int] | None
    provenance: str
    snippet: str
    matched: tuple[str, ...]


class _Doc(msgspec.Struct, frozen=True):
    ref: str
    source: str
    seq: int
    turns: tuple[int, int] | None
    provenance: str
    text: str
    rank: int  # ties: episodes (0) before evidence (1)


def _snippet(text: str, wanted: set[str]) -> str:
    best, best_hits = "", -1
    for line in text.splitlines():
        hits = len(wanted.intersection(terms(line)))
        if hits > best_hits:
            best, best_hits = line.strip(), hits
    return best if len(best) <= _SNIPPET else best[: _SNIPPET - 1] + "…"


class MemorySearch:
    """BM25 over episodes and evidence records, added in ledger order."""

    def __init__(self, records: Iterable[r.Record] = ()) -> None:
        self._docs: list[_Doc] = []
        self._lengths: list[int] = []
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._total = 0
        for record in records:
            self.add(record)

    def __len__(self) -> int:
        return len(self._docs)

    def add(self, record: r.Record) -> None:
        """Index one record (kinds without searchable text are skipped)."""
        body = record.body
        if isinstance(body, r.ContextEpisodeRecord):
            doc = _Doc(
                ref=f"episode:{body.episode_id}",
                source="episode",
                seq=body.to_seq,
                turns=(body.first_turn, body.last_turn),
                provenance=(
                    f"episode {body.episode_id}, turns {body.first_turn}-{body.last_turn}, "
                    f"{body.work_item_id or 'no work item'}, {body.boundary_reason}, "
                    f"ledger:{body.from_seq}..{body.to_seq}"
                ),
                text=episode_text(body),
                rank=0,
            )
        else:
            text = evidence_text(body)
            if not text:
                return
            where = f"seq {record.seq}" + (f", turn {record.turn}" if record.turn is not None else "")
            doc = _Doc(
                ref=f"ledger:{record.seq}",
                source=record.kind,
                seq=record.seq,
                turns=(record.turn, record.turn) if record.turn is not None else None,
                provenance=f"{record.kind} at {where}",
                text=text,
                rank=1,
            )
        counts: dict[str, int] = {}
        for term in terms(doc.text):
            counts[term] = counts.get(term, 0) + 1
        if not counts:
            return
        index = len(self._docs)
        self._docs.append(doc)
        for term, tf in counts.items():
            self._postings.setdefault(term, []).append((index, tf))
        length = sum(counts.values())
        self._lengths.append(length)
        self._total += length

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        only: Literal["episodes", "evidence"] | None = None,
    ) -> list[MemoryHit]:
        """The best ``limit`` hits for a free-text query, optionally only episodes or evidence."""
        wanted = sorted(set(terms(query)))
        n = len(self._docs)
        if not wanted or n == 0:
            return []
        avg = self._total / n
        scores: dict[int, float] = {}
        for term in wanted:
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1.0 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for position, tf in postings:
                norm = tf * (_K1 + 1.0) / (tf + _K1 * (1.0 - _B + _B * self._lengths[position] / avg))
                scores[position] = scores.get(position, 0.0) + idf * norm
        keep = {"episodes": 0, "evidence": 1}.get(only or "")
        ranked = sorted(
            (item for item in scores.items() if keep is None or self._docs[item[0]].rank == keep),
            key=lambda item: (-item[1], -self._docs[item[0]].seq, self._docs[item[0]].rank),
        )
        hits: list[MemoryHit] = []
        want = set(wanted)
        for index, score in ranked[:limit]:
            doc = self._docs[index]
            have = set(terms(doc.text))
            hits.append(
                MemoryHit(
                    ref=doc.ref,
                    source=doc.source,
                    score=round(score, 6),
                    seq=doc.seq,
                    turns=doc.turns,
                    provenance=doc.provenance,
                    snippet=_snippet(doc.text, want),
                    matched=tuple(t for t in wanted if t in have),
                )
            )
        return hits
