"""An incremental BM25 index over archived episodes, for episode selection and `holon episodes --search`.

Episodes are added as they are archived (:meth:`EpisodeIndex.add`, O(terms of the
episode)); a query scores only the postings of its own terms. Everything is
deterministic: terms are de-duplicated and sorted before scoring so floating-point
sums happen in one order, and ties are broken by recency (later ``to_seq`` first) then
by episode id.

For the renderer, a query may cap the postings it reads, all its terms together, to
``max_postings``: rarest terms first, each its most recent documents. Frequent terms
carry little BM25 weight anyway, and the cap keeps selection cost flat as the archive
grows (rare terms, the informative ones, have short postings and still reach old
episodes).

An index can be saved and restored without re-tokenizing its episodes
(:meth:`EpisodeIndex.export`, :meth:`EpisodeIndex.restore`): bytes in, bytes out, no
I/O here (the runtime stores them beside its checkpoints). A restored index is the
same index: same scores, same selection, same ``export()`` bytes as one built from the
episodes. Postings are kept as flat ``(doc, tf)`` pairs of unsigned 32-bit integers, so
a restored index reads the saved buffer in place and copies a term's postings only when
a new episode adds to that term.

It can also be saved in segments, each the index of a run of consecutive episodes
(:meth:`EpisodeIndex.export_segment`, :meth:`EpisodeIndex.restore_segments`), so that
what is saved for old episodes is never written again: a segment's bytes depend only on
its episodes and where they start. A term found in several segments has its postings
joined the first time it is read.
"""

from __future__ import annotations

import operator
import sys
import unicodedata
from array import array
from collections.abc import Iterable, Mapping
from itertools import islice, repeat
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.search.bm25 import Postings, add_bm25, bm25_idf
from holon.search.terms import TOKENIZER, terms

__all__ = [
    "INDEX_FORMAT",
    "EpisodeHit",
    "EpisodeIndex",
    "EpisodeIndexRejected",
    "episode_text",
]

#: Version of the exported index layout *and* of what it was built with. Bump it when
#: :func:`terms` or :func:`episode_text` change what an episode is indexed under: an
#: index saved by other tokenizing code is then rejected as stale instead of used.
#: 3: terms of any script (folded, unspaced scripts as bigrams), not ASCII words only.
#: 4: an episode's text holds the operator's requests made during it.
#: 5: the saved index holds each task run's job and each job's newest run.
INDEX_FORMAT: Final = 5
# What else a saved index depends on: the tokenizer (its patterns, stop words and Unicode
# database, named by holon.search.terms).
_TOKENIZER: Final = f"{INDEX_FORMAT}|{TOKENIZER}"
# Array type codes of exactly 4 and 8 bytes (C types vary by platform; the format does not).
_U32: Final = next(code for code in "IL" if array(code).itemsize == 4)
_U64: Final = next(code for code in "LQ" if array(code).itemsize == 8)
# How many of the newest saved episodes restore() re-tokenizes to check the saved postings.
_SPOT_CHECK: Final = 16


class EpisodeIndexRejected(msgspec.Struct, frozen=True, kw_only=True):
    """Why a saved episode index was not used; rebuild the index from the episodes instead.

    ``reason`` is ``corrupt`` (the bytes do not decode or are inconsistent), ``stale``
    (saved by other tokenizing code, or for other episodes than the ones given) or
    ``missing`` (reported by a caller that found no saved index; :meth:`EpisodeIndex.restore`
    itself never returns it).
    """

    reason: Literal["corrupt", "stale", "missing"]
    detail: str


class _SavedIndex(msgspec.Struct, frozen=True, array_like=True):
    """The exported layout (msgpack). Integer columns are little-endian arrays."""

    tokenizer: str
    count: int
    total_length: int
    ids: bytes  # u64 episode_id per document
    to_seqs: bytes  # u64 to_seq per document
    lengths: bytes  # u32 term count per document
    terms: list[str]  # in first-indexed order
    offsets: bytes  # u32 per term plus one: start of the term's pairs in ``postings``
    postings: bytes  # u32 doc, tf pairs
    decisions: dict[str, str]
    work_states: dict[str, str]
    task_jobs: dict[str, str]  # task id -> its job
    newest_runs: dict[str, str]  # job -> the task id of its newest run


_SAVED_ENCODER: Final = msgspec.msgpack.Encoder()
_SAVED_DECODER: Final = msgspec.msgpack.Decoder(_SavedIndex)


def _le(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return swapped.tobytes()


def _from_le(code: str, data: bytes) -> array[int]:
    values = array(code)
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


# The even byte values: what bytes.translate deletes to leave only odd ones.
_EVEN_BYTES: Final = bytes(range(0, 256, 2))


def _postings_problem(raw_offsets: bytes, offsets: array[int], flat: array[int], count: int) -> str | None:
    """What is structurally wrong with saved postings, in O(terms), or None.

    Checksummed bytes can still be malformed (a writer's bug, an edited file); without
    these checks an odd or decreasing offset misreads (doc, tf) pairs, and a document
    past the end raises IndexError in a later search instead of a rebuild now. Each
    term's *last* document is checked, not every one: reading every pair costs more than
    the rest of the restore. The spot check covers the newest episodes' postings in full.
    """
    # Offsets are little-endian u32: every fourth byte is a low byte, even for an even offset.
    if raw_offsets[::4].translate(None, _EVEN_BYTES):
        return "saved episode index has an offset inside a (doc, tf) pair"
    if not all(map(operator.lt, offsets, islice(offsets, 1, None))):
        return "saved episode index has a term with no postings or offsets out of order"
    # The pair ending at a term's end offset is its last; each end is at least 2 here.
    last = max(map(flat.__getitem__, map(operator.add, islice(offsets, 1, None), repeat(-2))), default=-1)
    if last >= count:
        return f"saved episode index has a posting for document {last}, past its {count} episodes"
    return None


def _other_tokenizer(saved: str) -> str:
    """Why a saved index's tokenizer fingerprint is not this code's, for a person."""
    saved_format, _, rest = saved.partition("|")
    saved_unicode, ours = rest.partition("|")[0], f"unicode {unicodedata.unidata_version}"
    if saved_format != str(INDEX_FORMAT):
        why = f"INDEX_FORMAT {saved_format[:20]!r}, this code's is {INDEX_FORMAT}"
    elif saved_unicode != ours:
        why = f"{saved_unicode[:40]!r}, this Python's is {ours!r}"
    else:
        why = "other term patterns or stop words"
    return f"saved episode index was built by other tokenizing code ({why})"


def episode_text(episode: r.ContextEpisodeRecord) -> str:
    """The structured text of an episode that search matches against."""
    parts: list[str] = []
    for value in (episode.work_item_id, episode.objective, episode.delivery_target):
        if value:
            parts.append(value)
    for group in (
        episode.requests,
        episode.summary_lines,
        episode.scope_hints,
        episode.touched_files,
        episode.commands,
        episode.verification,
        episode.decisions,
        episode.follow_ups,
        episode.waiting,
    ):
        parts.extend(group)
    return "\n".join(parts)


def _counts(episode: r.ContextEpisodeRecord) -> dict[str, int]:
    """Term frequencies of an episode's text, in first-occurrence order."""
    counts: dict[str, int] = {}
    for term in terms(episode_text(episode)):
        counts[term] = counts.get(term, 0) + 1
    return counts


class EpisodeHit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result: the episode, its BM25 score, and the terms that matched."""

    episode: r.ContextEpisodeRecord
    score: float
    matched: tuple[str, ...]


class _Segment:
    """One saved segment, read in place: its terms' postings, by slot, in ``flat``."""

    __slots__ = ("flat", "lengths", "offsets", "saved", "slots", "terms")

    def __init__(
        self, saved: _SavedIndex, lengths: array[int], offsets: array[int], flat: array[int]
    ) -> None:
        self.saved = saved
        self.terms = saved.terms
        self.slots = dict(zip(saved.terms, range(len(saved.terms)), strict=True))
        self.lengths = lengths
        self.offsets = offsets
        self.flat = memoryview(flat)

    def postings(self, term: str) -> memoryview | None:
        slot = self.slots.get(term)
        return None if slot is None else self.flat[self.offsets[slot] : self.offsets[slot + 1]]

    @classmethod
    def decode(cls, data: bytes | memoryview, *, first: int) -> _Segment | str:
        """The segment saved in ``data``, its documents from position ``first``; else what is
        wrong with it (prefixed ``stale:`` when it was saved by other tokenizing code)."""
        try:
            saved = _SAVED_DECODER.decode(data)
        except r.DECODE_ERRORS as exc:  # UnicodeDecodeError too, from msgspec before 0.23
            return f"saved index does not decode: {exc}"
        if saved.tokenizer != _TOKENIZER:
            return "stale:" + _other_tokenizer(saved.tokenizer)
        count, nterms = saved.count, len(saved.terms)
        sizes = (len(saved.ids), len(saved.to_seqs), len(saved.lengths), len(saved.offsets))
        expected = (8 * count, 8 * count, 4 * count, 4 * (nterms + 1))
        if count < 0 or sizes != expected or len(saved.postings) % 8:
            return "saved episode index has inconsistent sizes"
        lengths = _from_le(_U32, saved.lengths)
        offsets = _from_le(_U32, saved.offsets)
        flat = _from_le(_U32, saved.postings)
        if offsets[0] != 0 or offsets[-1] != len(flat) or sum(lengths) != saved.total_length:
            return "saved index has inconsistent offsets"
        problem = _postings_problem(saved.offsets, offsets, flat, first + count)
        if problem is not None:
            return problem
        # Each term's first document: one before ``first`` belongs to an earlier segment.
        if first and nterms and min(map(flat.__getitem__, islice(offsets, nterms))) < first:
            return f"saved episode index segment has a posting before its first document {first}"
        segment = cls(saved, lengths, offsets, flat)
        if len(segment.slots) != nterms:
            return "saved episode index repeats a term"
        return segment


class EpisodeIndex:
    """BM25 over episodes, appended to as episodes are archived.

    Not thread-safe; one index belongs to one agent's renderer (or one CLI call).
    """

    def __init__(self, episodes: Iterable[r.ContextEpisodeRecord] = ()) -> None:
        self._episodes: list[r.ContextEpisodeRecord] = []
        self._lengths: array[int] = array(_U32)
        # Postings a term got since construction or restore (or copied out of the
        # restored buffer when a new episode added to the term), in first-indexed order.
        self._postings: dict[str, array[int]] = {}
        # A restored index's saved postings, read in place, by segment (oldest first).
        # Empty for an index built from episodes.
        self._segments: list[_Segment] = []
        # Postings of terms found in several segments, joined on first read (None: in none).
        self._joined: dict[str, Postings | None] = {}
        self._total_length = 0
        self._by_id: dict[int, r.ContextEpisodeRecord] = {}
        # Decision id -> its text as the most recently added episode lists it.
        self._decisions: dict[str, str] = {}
        # Work item id -> its state when its most recently added episode was finalized.
        self._work_states: dict[str, str] = {}
        # Task id -> its job, and job -> its newest run's task id, as the episodes list them.
        self._task_jobs: dict[str, str] = {}
        self._newest_runs: dict[str, str] = {}
        # Whether each document ends later (to_seq) than the one before: then position
        # order is recency order (an archive is; an index of arbitrary episodes may not be).
        self._in_order = True
        for episode in episodes:
            self.add(episode)

    def __len__(self) -> int:
        return len(self._episodes)

    @property
    def episodes(self) -> tuple[r.ContextEpisodeRecord, ...]:
        """The indexed episodes, in the order they were added."""
        return tuple(self._episodes)

    def _read(self, term: str) -> Postings | None:
        postings = self._postings.get(term)
        if postings is not None:
            return postings
        return self._saved(term)

    def _saved(self, term: str) -> Postings | None:
        """The restored postings of ``term``, before any added since."""
        segments = self._segments
        if len(segments) == 1:  # an index saved whole: read in place, as it always was
            return segments[0].postings(term)
        if not segments:
            return None
        if term in self._joined:
            return self._joined[term]
        pieces = [piece for segment in segments if (piece := segment.postings(term)) is not None]
        joined: Postings | None = None
        if len(pieces) == 1:
            joined = pieces[0]
        elif pieces:
            joined = array(_U32)
            for piece in pieces:
                joined.frombytes(piece.tobytes())
        self._joined[term] = joined
        return joined

    def _writable(self, term: str) -> array[int]:
        postings = self._postings.get(term)
        if postings is None:
            postings = array(_U32)
            saved = self._saved(term)
            if saved is not None:
                postings.frombytes(saved.tobytes())
            self._joined.pop(term, None)
            self._postings[term] = postings
        return postings

    def add(self, episode: r.ContextEpisodeRecord) -> None:
        """Index one archived episode (adding the same episode id twice is a no-op)."""
        if episode.episode_id in self._by_id:
            return
        doc = len(self._episodes)
        if doc and episode.to_seq <= self._episodes[-1].to_seq:
            self._in_order = False
        self._by_id[episode.episode_id] = episode
        self._episodes.append(episode)
        counts = _counts(episode)
        for term, tf in counts.items():
            postings = self._writable(term)
            postings.append(doc)
            postings.append(tf)
        length = sum(counts.values())
        self._lengths.append(length)
        self._total_length += length
        for line in episode.decisions:
            did, _, text = line.partition(": ")
            self._decisions[did] = text
        if episode.work_item_id is not None and episode.work_state is not None:
            self._work_states[episode.work_item_id] = episode.work_state
        for run in episode.task_runs:
            self._task_jobs[run.id] = run.job
            self._newest_runs[run.job] = run.id

    def extend(self, episodes: Iterable[r.ContextEpisodeRecord]) -> None:
        """Index several episodes in order."""
        for episode in episodes:
            self.add(episode)

    def scores(self, query_terms: Iterable[str], *, max_postings: int | None = None) -> dict[int, float]:
        """BM25 score by document position for the given terms (only documents that match).

        With ``max_postings``, the query reads at most that many postings in all: its terms
        rarest first (fewest documents, then by term), each its most recent documents,
        until the budget is spent; the most common terms may read none. A query whose
        postings fit the budget scores exactly as without it.
        """
        n = len(self._episodes)
        if n == 0:
            return {}
        avg = self._total_length / n if self._total_length else 1.0
        lengths = self._lengths
        found: list[tuple[str, Postings]] = []
        for term in sorted(set(query_terms)):
            postings = self._read(term)
            if postings:
                found.append((term, postings))
        reads = self._reads(found, max_postings)
        out: dict[int, float] = {}
        # Scored in term order whatever the budget took: floating-point sums in one order.
        for (_, postings), take in zip(found, reads, strict=True):
            if take:
                add_bm25(out, postings[-2 * take :], bm25_idf(len(postings) // 2, n), lengths, avg)
        return out

    @staticmethod
    def _reads(found: list[tuple[str, Postings]], max_postings: int | None) -> list[int]:
        """How many of its newest postings each of ``found`` (by term) reads within ``max_postings``.

        Rarest first: a rare term's few documents are the informative ones (highest idf),
        so they are read whole, and the budget left goes to commoner terms, whose weight
        is near zero in a large archive. One budget for the whole query, not one per term:
        with one per term, a query of 40 words that every episode shares read 40 times the
        cap, and a selection cost ten times more at turn 10,000 than at turn 100.
        """
        sizes = [len(postings) // 2 for _, postings in found]
        if max_postings is None:
            return sizes
        reads = [0] * len(found)
        left = max_postings
        for at in sorted(range(len(found)), key=lambda i: (sizes[i], found[i][0])):
            if left <= 0:
                break
            reads[at] = min(sizes[at], left)
            left -= reads[at]
        return reads

    # ------------------------------------------------------------------ saving

    def _ordered_terms(self) -> Iterable[tuple[str, Postings]]:
        """Every term with its postings, in the order a fresh build would first index it."""
        seen: set[str] = set()
        for segment in self._segments:
            for term in segment.terms:
                if term not in seen:
                    seen.add(term)
                    postings = self._read(term)
                    assert postings is not None
                    yield term, postings
        for term, postings in self._postings.items():
            if term not in seen:
                yield term, postings

    def export(self, *, first: int = 0) -> bytes:
        """The index as bytes for :meth:`restore` (deterministic: equal indexes, equal bytes).

        With ``first``, as the segment of a larger index whose documents start at that
        position (:meth:`restore_segments`): :meth:`export_segment` of its episodes.
        """
        return self._export(first)

    @classmethod
    def export_segment(cls, episodes: Iterable[r.ContextEpisodeRecord], *, first: int) -> bytes | None:
        """The saved segment of ``episodes``, the index's documents from position ``first`` on.

        The same bytes whenever the same episodes start at the same position, so a segment
        once saved is named again, not rewritten (:meth:`restore_segments`). ``None`` when
        an episode id repeats: the index keeps one document per id, so the positions of
        the episodes after it are not the archive's.
        """
        index = cls()
        count = 0
        for episode in episodes:
            index.add(episode)
            count += 1
        return index._export(first) if len(index) == count else None

    def _export(self, first: int) -> bytes:
        names: list[str] = []
        offsets = array(_U32, [0])
        flat = array(_U32)
        for term, postings in self._ordered_terms():
            names.append(term)
            if isinstance(postings, memoryview):
                flat.frombytes(postings.tobytes())  # a C copy; extend() would iterate
            else:
                flat.extend(postings)
            offsets.append(len(flat))
        if first:
            # Documents are numbered from the segment's first position in the whole index.
            flat[::2] = array(_U32, [doc + first for doc in flat[::2]])
        saved = _SavedIndex(
            tokenizer=_TOKENIZER,
            count=len(self._episodes),
            total_length=self._total_length,
            ids=_le(array(_U64, [e.episode_id for e in self._episodes])),
            to_seqs=_le(array(_U64, [e.to_seq for e in self._episodes])),
            lengths=_le(self._lengths),
            terms=names,
            offsets=_le(offsets),
            postings=_le(flat),
            decisions=self._decisions,
            work_states=self._work_states,
            task_jobs=self._task_jobs,
            newest_runs=self._newest_runs,
        )
        return _SAVED_ENCODER.encode(saved)

    @classmethod
    def restore(
        cls, data: bytes, episodes: Iterable[r.ContextEpisodeRecord]
    ) -> EpisodeIndex | EpisodeIndexRejected:
        """The index :meth:`export` saved, for ``episodes`` (the same ones, plus any newer).

        ``episodes`` are all the episodes the index must cover, in order: the saved ones
        first (checked by id and ``to_seq``), then any archived since, which are indexed
        now. Only the newest few saved episodes are re-tokenized, as a check that the
        saved postings are theirs; every term's postings get O(terms) structural checks
        (offsets on pair boundaries and increasing, the last document in range). Returns
        why the bytes cannot be used when they do not decode or are malformed, were saved
        by other tokenizing code, or belong to other episodes.
        """
        return cls.restore_segments((data,), episodes)

    @classmethod
    def restore_segments(
        cls, parts: Iterable[bytes | memoryview], episodes: Iterable[r.ContextEpisodeRecord]
    ) -> EpisodeIndex | EpisodeIndexRejected:
        """The index saved as consecutive segments (:meth:`export_segment`, oldest first).

        As :meth:`restore` (one segment from position 0 is what :meth:`export` saves); each
        segment's documents must lie in its own positions, which follow the segment before.
        Nothing is joined here: a term's postings are joined across segments when read.
        """
        segments: list[_Segment] = []
        first = 0
        for at, data in enumerate(parts):
            segment = _Segment.decode(data, first=first)
            if isinstance(segment, str):
                where = f" (segment {at})" if at else ""
                reason: Literal["corrupt", "stale"] = "stale" if segment.startswith("stale:") else "corrupt"
                return EpisodeIndexRejected(reason=reason, detail=segment.removeprefix("stale:") + where)
            segments.append(segment)
            first += segment.saved.count
        count = first
        index = cls()
        docs: list[r.ContextEpisodeRecord] = []
        later: list[r.ContextEpisodeRecord] = []
        by_id = index._by_id
        for episode in episodes:
            if len(docs) < count:
                if episode.episode_id in by_id:
                    continue  # as add() does: a repeated id is not a new document
                by_id[episode.episode_id] = episode
                docs.append(episode)
            else:
                later.append(episode)  # add() indexes these (and skips repeated ids)
        if len(docs) < count:
            return EpisodeIndexRejected(
                reason="stale", detail=f"saved episode index covers {count} episodes, only {len(docs)} given"
            )
        ids = b"".join(segment.saved.ids for segment in segments)
        to_seqs = b"".join(segment.saved.to_seqs for segment in segments)
        try:
            seqs = array(_U64, [e.to_seq for e in docs])
            same = _le(array(_U64, [e.episode_id for e in docs])) == ids and to_seqs == _le(seqs)
        except OverflowError:
            same = False
        if not same:
            return EpisodeIndexRejected(
                reason="stale", detail="saved episode index is for other episodes (ids or to_seq differ)"
            )
        lengths = array(_U32)
        for segment in segments:
            lengths.extend(segment.lengths)
            index._decisions.update(segment.saved.decisions)
            index._work_states.update(segment.saved.work_states)
            index._task_jobs.update(segment.saved.task_jobs)
            index._newest_runs.update(segment.saved.newest_runs)
        index._episodes = docs
        index._in_order = all(map(operator.lt, seqs, islice(seqs, 1, None)))
        index._lengths = lengths
        index._total_length = sum(segment.saved.total_length for segment in segments)
        index._segments = segments
        problem = index._spot_check()
        if problem is not None:
            return EpisodeIndexRejected(reason="stale", detail=problem)
        index.extend(later)
        return index

    def _spot_check(self) -> str | None:
        """Re-tokenize the newest saved episodes; their postings must be what is saved."""
        for doc in range(max(0, len(self._episodes) - _SPOT_CHECK), len(self._episodes)):
            episode = self._episodes[doc]
            counts = _counts(episode)
            if sum(counts.values()) != self._lengths[doc]:
                return f"saved index disagrees with episode {episode.episode_id}'s text (length)"
            for term, tf in counts.items():
                postings = self._read(term)
                at = (len(postings) if postings is not None else 0) - 2
                while postings is not None and at >= 0 and postings[at] > doc:
                    at -= 2
                if postings is None or at < 0 or postings[at] != doc or postings[at + 1] != tf:
                    return f"saved index disagrees with episode {episode.episode_id}'s text ({term!r})"
        if self._episodes:
            newest = self._episodes[-1]
            # An episode lists each revision of a decision made in it; add() keeps the last
            # text of each id, so only that one is the saved index's (comparing every line
            # called the index of an agent that revised a decision stale at every open).
            latest = dict(line.partition(": ")[::2] for line in newest.decisions)
            for did, text in latest.items():
                if self._decisions.get(did) != text:
                    return f"saved episode index has another text for decision {did!r}"
            work = newest.work_item_id
            if work is not None and newest.work_state not in (None, self._work_states.get(work)):
                return f"saved episode index has another state for work item {work!r}"
            for run in newest.task_runs:
                if self._task_jobs.get(run.id) != run.job:
                    return f"saved episode index has another job for task {run.id!r}"
            last = newest.task_runs[-1] if newest.task_runs else None
            if last is not None and self._newest_runs.get(last.job) != last.id:
                return f"saved episode index has another newest run for task {last.id!r}'s job"
        return None

    @property
    def decisions(self) -> dict[str, str]:
        """Decision id → its text in the latest indexed episode that lists it (a copy)."""
        return dict(self._decisions)

    def superseded_run(self, task_id: str, live: Mapping[str, str]) -> bool:
        """Whether an indexed task run's result is no longer its job's latest.

        The latest is ``live``'s run of the job (job -> task id of the newest result not
        archived yet, as working memory shows it), else the newest run an indexed episode
        lists. A task no episode names a job for (its start was not in the ledger) is
        never superseded.
        """
        job = self._task_jobs.get(task_id)
        if job is None:
            return False
        return live.get(job, self._newest_runs.get(job)) != task_id

    def work_state(self, work_item_id: str) -> str | None:
        """The state of a work item when its most recently indexed episode was finalized, if any."""
        return self._work_states.get(work_item_id)

    @property
    def abandoned_work(self) -> frozenset[str]:
        """Work items whose most recent episode was finalized with the item abandoned."""
        return frozenset(w for w, state in self._work_states.items() if state == "abandoned")

    def get(self, episode_id: int) -> r.ContextEpisodeRecord | None:
        """The indexed episode with this id, if any."""
        return self._by_id.get(episode_id)

    def episode_at(self, doc: int) -> r.ContextEpisodeRecord:
        """The episode at a document position returned by :meth:`scores`."""
        return self._episodes[doc]

    def recent(self, count: int) -> list[int]:
        """The positions of the last ``count`` documents added, most recent first.

        Most recent by ``to_seq`` (later first), then by lower episode id: the order
        selection breaks ties in. In an archive that is the reverse of position order.
        """
        n = len(self._episodes)
        window = range(n - 1, max(0, n - count) - 1, -1)
        if self._in_order:
            return list(window)
        episodes = self._episodes
        return sorted(window, key=lambda doc: (-episodes[doc].to_seq, episodes[doc].episode_id))

    def search(self, query: str, *, limit: int = 10) -> list[EpisodeHit]:
        """The best ``limit`` episodes for a free-text query; ties by recency, then id."""
        if limit < 1:
            # ranked[:limit] with a negative limit would drop the worst hits instead.
            raise ValueError(f"limit must be at least 1, not {limit}")
        wanted = sorted(set(terms(query)))
        scored = self.scores(wanted)
        ranked = sorted(
            scored.items(),
            key=lambda item: (-item[1], -self._episodes[item[0]].to_seq, self._episodes[item[0]].episode_id),
        )
        hits = []
        for doc, score in ranked[:limit]:
            episode = self._episodes[doc]
            have = set(terms(episode_text(episode)))
            hits.append(
                EpisodeHit(episode=episode, score=score, matched=tuple(t for t in wanted if t in have))
            )
        return hits
