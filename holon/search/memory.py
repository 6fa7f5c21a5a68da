"""MemorySearch: ranked search over a ledger's archived episodes and its evidence, for ``holon search``.

One index holds two kinds of documents: each archived ``ContextEpisodeRecord`` (its
structured text, as episode selection matches it) and each evidence record with text a
person would look for — messages, briefs, tool calls and results, work items, plans,
decisions, follow-ups, waits, tasks, turn inputs and legacy summaries. A tool output
moved to the blob store (over the ledger's blob threshold, 4 KB by default) is indexed
by its text when the index is given a way to read blobs (``blob_text``), else by its
200-character preview. A turn input followed by its own message (importers record
both) is one document, the message. Every hit carries the ref that restores it
(``episode:<id>`` or ``ledger:<seq>``) and where it came from, with the work item it
belonged to (see :attr:`MemoryHit.work_item`) and, for a sub-agent's records, its task
(:attr:`MemoryHit.task`).

Ranking (docs/daemon-guide.md, *How memory search ranks*), every step deterministic:

- **Terms** (:func:`search_terms`): episode selection's words (:func:`holon.search.terms`),
  plus each identifier written with ``. / : # @ \\`` whole (``pull/123``, ``#123``,
  ``src/shop/cart.py``, a URL) and each pair of its neighbouring parts (``cart.py``,
  ``pull/123`` inside the PR's URL): an identifier matches as it was written, and by its parts.
- **BM25** (k1 1.2, b 0.75), the scorer episode selection uses (:func:`holon.search.add_bm25`).
- **Field weights** (:data:`FIELD_WEIGHTS`): an operator's request or a decision counts
  more than a plan's restatement of its steps; a tool's result more than the call's echo.
- **Recency**: a light prior, up to :data:`RECENCY` more for the newest record.
- **Near-duplicates collapse**: hits of the same field whose best line is the same and
  whose terms mostly agree (a plan step restated in every plan update) are one hit, with
  their count and every ref (:attr:`MemoryHit.refs`).

Each hit says why it matched (:attr:`MemoryHit.why`: the terms, the field, the weights).
Query terms are de-duplicated and sorted before scoring, and ties go to the more recent
document (higher seq), then episodes before evidence. The index is pure (records in,
hits out; a hit's record read back through the reader its caller gives, if any) and
incremental (:meth:`MemorySearch.add`). :func:`search_text` gives the hits as the text
the model's ``holon_search`` tool returns.
"""

from __future__ import annotations

import heapq
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.errors import UsageError
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, RuntimeState, apply_runtime, stated_config
from holon.search.bm25 import add_bm25, bm25_idf
from holon.search.episodes import episode_text
from holon.search.terms import IDENTIFIER_MARKS, fold_positions, search_terms

__all__ = [
    "BLOB_INDEXED_CHARS",
    "FIELD_WEIGHTS",
    "RECENCY",
    "BlobText",
    "MemoryHit",
    "MemorySearch",
    "RecordReader",
    "evidence_text",
    "search_text",
]

_SNIPPET: Final = 160
# Most characters of the query holon_search quotes back.
_QUOTED_QUERY: Final = 200
#: The most characters of a blob-stored output that are indexed: a longer one is indexed
#: by its first and last half of this many, where a log usually says what ran and how it
#: ended (a traceback, the failing test, the exit status). Tokenizing is ~1 s per 10 MB.
BLOB_INDEXED_CHARS: Final = 1_000_000

BlobText = Callable[[r.BlobRef], "str | None"]
"""Reads a blob-stored output's text for the index: ``None`` for one that cannot be read
(missing, damaged, not UTF-8), which is then indexed by its preview. Called again for a
hit's snippet, so the index holds no blob's text."""

RecordReader = Callable[[int], r.Record]
"""Reads the record at a seq (``Ledger.get``): a hit's record is read back for its text, so
the index holds no document's text."""


def _indexed_part(text: str) -> str:
    """What of a blob's text is indexed: all of it, or its head and tail (see BLOB_INDEXED_CHARS)."""
    if len(text) <= BLOB_INDEXED_CHARS:
        return text
    half = BLOB_INDEXED_CHARS // 2
    return f"{text[:half]}\n{text[-half:]}"


def _args_text(tool: str, args: dict[str, r.JSON]) -> str:
    """A tool call as text: its name, then each argument as ``name: value``, strings as written.

    Not the arguments' JSON: there a line break or a tab inside a string is an escape
    (backslash, ``n``) glued to the next word, so the command ``cd /repo`` + line break +
    ``pytest`` was indexed as ``npytest``, and the first word of every line of a
    command or a written file could not be found. Nested objects and lists give their
    leaves, each under its own key, walked with a stack so no nesting depth is too deep.
    """
    lines = [tool]
    stack: list[tuple[str, r.JSON]] = []
    for name, value in args.items():
        if isinstance(value, str):
            lines.append(f"{name}: {value}")  # the common case: no walk, no encoding
            continue
        stack.append((name, value))
        while stack:
            key, item = stack.pop()
            if isinstance(item, dict):
                stack.extend(reversed([(str(k), v) for k, v in item.items()]))
            elif isinstance(item, list | tuple):
                stack.extend(reversed([(key, v) for v in item]))
            else:
                text = item if isinstance(item, str) else msgspec.json.encode(item).decode()
                lines.append(f"{key}: {text}")
    return "\n".join(lines)


def evidence_text(body: r.Body, *, blob_output: str | None = None) -> str | None:
    """The searchable text of an evidence record, or ``None`` for kinds search skips.

    A tool result whose output is in the blob store is searched by ``blob_output``, that
    output's text, when given, else by the blob's preview.
    """
    if isinstance(body, r.Message | r.Brief | r.ContextSummary):
        return body.text
    if isinstance(body, r.ToolIntent):
        return _args_text(body.tool, body.args)
    if isinstance(body, r.ToolResult):
        output = body.output or (body.blob.preview if body.blob is not None else "")
        if blob_output is not None and body.blob is not None and not body.output:
            output = blob_output
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


#: How much a match counts by what kind of text it is in (multiplies its BM25 score).
#: What the operator asked and what was decided is what a search is usually for; a plan
#: restates its steps in every update, and a tool call's arguments echo what its result
#: then shows with the outcome. ``plan`` is a work plan and the tool call that declared it
#: (an importer records Claude Code's TodoWrite as both); a sub-agent's prompt is a
#: ``message``, not a ``request``: the operator did not write it.
FIELD_WEIGHTS: Final[dict[str, float]] = {
    "request": 1.6,
    "decision": 1.6,
    "work item": 1.4,
    "follow-up": 1.2,
    "message": 1.0,
    "tool result": 1.0,
    "episode": 1.0,
    "brief": 1.0,
    "wait": 1.0,
    "task": 1.0,
    "summary": 0.8,
    "tool call": 0.7,
    "plan": 0.5,
}
_FIELDS: Final = tuple(FIELD_WEIGHTS)
_FIELD_CODE: Final = {name: code for code, name in enumerate(_FIELDS)}
_PLAN: Final = _FIELD_CODE["plan"]
_TOOL_CALL: Final = _FIELD_CODE["tool call"]
#: The recency prior: a score is multiplied by ``1 + RECENCY * seq / newest seq``, so the
#: newest record counts up to 10% more than the oldest: it orders near-equal hits, it does
#: not bury a strong old match.
RECENCY: Final = 0.1
# Near-duplicates: the share of their terms two hits of one field and one best line must
# have in common (Jaccard) to be one hit.
_SAME_TERMS: Final = 0.5
# Hits ranked past the limit, to find near-duplicates of the last ones shown.
_LOOKAHEAD: Final = 4
# The most hits ranked per hit asked for, while near-duplicates leave too few groups.
_MAX_WINDOW: Final = 256
_BY_KIND: Final = {
    r.Decision: "decision",
    r.WorkItem: "work item",
    r.FollowUp: "follow-up",
    r.ToolResult: "tool result",
    r.ToolIntent: "tool call",
    r.WorkPlan: "plan",
    r.Brief: "brief",
    r.WaitingIntent: "wait",
    r.TaskStarted: "task",
    r.TaskResult: "task",
    r.ContextSummary: "summary",
    r.ContextEpisodeRecord: "episode",
}


def _field_of(body: r.Body) -> str:
    """The field a record's text is searched as (see :data:`FIELD_WEIGHTS`)."""
    field = _BY_KIND.get(type(body))
    if field is not None:
        return field
    if isinstance(body, r.Message):
        return "request" if body.role in ("user", "operator") and body.task_id is None else "message"
    if isinstance(body, r.TurnStarted):
        return "request" if body.trigger in ("user", "operator") else "message"
    return "message"


class MemoryHit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result.

    ``ref`` restores it (``holon get``); ``source`` is ``episode`` or the record kind;
    ``seq`` is the record's seq (an episode's last evidence seq); ``turns`` the turn
    range it covers; ``work_item`` the work item it belonged to (see below);
    ``provenance`` all of that as one line; ``snippet`` its best-matching line (of a long
    line, 160 characters around the first match); ``matched`` the query terms found.

    An episode's work item is the one it archived. An evidence record's is the work item
    it names (a work item or its state change, a plan, decision, follow-up, wait, brief
    or task stating ``work_item_id``), else the work item that was active when it was
    written: runtime state's active item (:attr:`RuntimeState.active_work_item_id`)
    folded from the work item records before it. ``None`` when there was none.

    ``task`` is the task a record belongs to: a sub-agent's message, call, result or plan
    (its ``task_id``), a task's start or result, a brief about a task; ``None`` for the
    agent's own records and for episodes. The provenance names it too.
    """

    ref: str
    source: str
    score: float
    seq: int
    turns: tuple[int, int] | None
    work_item: str | None
    provenance: str
    snippet: str
    matched: tuple[str, ...]
    task: str | None = None
    field: str = "message"
    why: str = ""
    count: int = 1
    refs: tuple[str, ...] = ()


class _Doc(msgspec.Struct, frozen=True):
    """A hit's document: an episode (``kind`` "episode"), or an evidence record's seq and turn.

    Built for hits only: the index holds its fields in columns (see :class:`MemorySearch`).
    """

    kind: str
    seq: int
    turn: int | None
    episode: r.ContextEpisodeRecord | None = None
    work_item: str | None = None
    task: str | None = None

    def ref(self) -> str:
        return f"episode:{self.episode.episode_id}" if self.episode is not None else f"ledger:{self.seq}"

    def turns(self) -> tuple[int, int] | None:
        if self.episode is not None:
            return (self.episode.first_turn, self.episode.last_turn)
        return (self.turn, self.turn) if self.turn is not None else None

    def provenance(self) -> str:
        body = self.episode
        if body is not None:
            return (
                f"episode {body.episode_id}, turns {body.first_turn}-{body.last_turn}, "
                f"{body.work_item_id or 'no work item'}, {body.boundary_reason}, "
                f"ledger:{body.from_seq}..{body.to_seq}"
            )
        turn = f", turn {self.turn}" if self.turn is not None else ""
        work = f", work item {self.work_item}" if self.work_item is not None else ""
        task = f", task {self.task}" if self.task is not None else ""
        return f"{self.kind} at seq {self.seq}{turn}{work}{task}"


#: Records that may name the work item they belong to (``work_item_id``).
_NAMING: Final = (r.WorkPlan, r.Decision, r.FollowUp, r.WaitingIntent, r.Brief, r.TaskStarted)
#: The record types whose work item is not simply the active one, or that change it.
_OF_WORK: Final = frozenset(
    {r.WorkItem, r.WorkItemState, r.ContextEpisodeRecord, r.WorkingMemoryDelta, *_NAMING}
)


def _task_of(body: r.Body) -> str | None:
    """The task a record belongs to (see :attr:`MemoryHit.task`)."""
    if isinstance(body, r.Message | r.ToolIntent | r.ToolResult | r.WorkPlan | r.Brief):
        return body.task_id
    if isinstance(body, r.TaskStarted | r.TaskResult):
        return body.id
    return None


def _snippet(text: str, wanted: set[str]) -> str:
    """The best-matching line, and of a long one the part that shows its first match."""
    best, best_hits = "", -1
    for line in text.splitlines():
        hits = len(wanted.intersection(search_terms(line)))
        if hits > best_hits:
            best, best_hits = line.strip(), hits
    if len(best) <= _SNIPPET:
        return best
    # A long line (a one-line JSON output, a log line): its head may not show the match,
    # and then the snippet does not tell the model why it was found.
    # Looked for in the line folded as terms() folds it (``strasse`` in "Straße", ``cafe``
    # in "Café"), each hit mapped back to where it is in the line as written.
    folded, origin = fold_positions(best) if not best.isascii() else (best.lower(), None)
    found = [m.start() for t in sorted(wanted) if (m := re.search(rf"(?<![0-9a-z]){re.escape(t)}", folded))]
    at = min(found, default=0)
    if origin is not None and found:
        at = origin[at]
    if at + 40 <= _SNIPPET - 1:
        return best[: _SNIPPET - 1] + "…"
    start = at - _SNIPPET // 4
    if start + _SNIPPET - 1 >= len(best):
        return "…" + best[len(best) - (_SNIPPET - 1) :]
    return "…" + best[start : start + _SNIPPET - 2] + "…"


class _Found:
    """A ranked document read back: what its hit shows and what near-duplicates are told by."""

    __slots__ = ("doc", "field", "index", "score", "snippet", "terms")

    def __init__(self, index: int, doc: _Doc, field: str, terms: frozenset[str], snippet: str) -> None:
        self.index = index
        self.doc = doc
        self.field = field
        self.terms = terms
        self.snippet = snippet
        self.score = 0.0


class _Group:
    """Near-duplicate hits shown as one: the best read back, and every member's document, best first."""

    __slots__ = ("best", "members")

    def __init__(self, best: _Found, members: list[int]) -> None:
        self.best = best
        self.members = members


def _near(first: _Found, other: _Found) -> bool:
    """Whether ``other`` is a near-duplicate of ``first``: same field, same best line, most terms shared.

    A plan step restated in every plan update, the same request sent twice, one failure
    in two runs of a command — of one work item and task. Episodes are never folded:
    each archives other turns.
    """
    if first.field != other.field or first.snippet != other.snippet or first.field == "episode":
        return False
    if first.doc.work_item != other.doc.work_item or first.doc.task != other.doc.task:
        return False  # the same failure under two work items is two facts
    union = len(first.terms | other.terms)
    return not union or len(first.terms & other.terms) / union >= _SAME_TERMS


class MemorySearch:
    """Ranked search over episodes and evidence records, added in ledger order (see the module).

    Postings are flat ``array('I')`` of ``doc, tf, doc, tf, ...``, one per term; a query
    scores only its terms' postings, weighs each document by its field and the recency
    prior, and ranks the best with a heap in windows until ``limit`` groups of
    near-duplicates are found, so its cost follows the postings it reads, not the size
    of the index. A document's seq, length, kind, turn, work item, field and term print
    are columns (arrays, or lists of shared objects). With
    ``read_record``, ~130 bytes a document in all, where a struct, its text and a Python
    int per posting held ~490 (1M-record ledger: 340 -> 90 MB; docs/benchmarks.md).

    Given ``read_record`` (the record at a seq, as ``Ledger.get`` reads it), the index
    holds no document's text: a hit's record is read back for its snippet and matched
    terms, as a blob-stored output's text is read again from its blob (``Agent.search``
    and ``holon search`` pass their ledger's). Without it each text is kept. The hits
    are the same either way; ``read_record`` must give the records that were added.

    ``for_query`` makes an index that answers that one query (``holon search``): every
    document is still tokenized and counted, so BM25's statistics (documents, average
    length, each query term's document frequency) and therefore the hits are those of
    a full index, but only the query terms' postings (and without ``read_record``, the
    texts of the documents holding one of them) are kept.
    """

    def __init__(
        self,
        records: Iterable[r.Record] = (),
        *,
        blob_text: BlobText | None = None,
        read_record: RecordReader | None = None,
        for_query: str | None = None,
    ) -> None:
        self._blob_text = blob_text
        self._read_record = read_record
        self._only_terms = None if for_query is None else frozenset(search_terms(for_query))
        #: Blob-stored outputs ``blob_text`` could not read, indexed by their preview instead.
        self.unread_blobs = 0
        # One entry per document, in the order added.
        self._seqs = array("q")
        self._lengths = array("I")
        self._evidence = bytearray()  # 1 evidence, 0 episode
        self._fields = bytearray()  # its field's code (_FIELDS)
        # CRC-32 of its distinct terms, sorted: documents of one field, length and print
        # hold the same terms, and fold as near-duplicates without being read back.
        self._prints = array("I")
        self._newest = 0  # the highest seq indexed: the recency prior's scale
        # Lists of shared objects: a kind is its class's constant, a turn's number and the
        # active work item's id the same object for every record that has them.
        self._kinds: list[str] = []
        self._turns: list[int | None] = []
        self._work_items: list[str | None] = []
        # Without read_record: each document's text ("" for one that holds no term of
        # ``for_query``'s, never a hit). A blob-stored output's is its preview's.
        self._texts: list[str] | None = [] if read_record is None else None
        # An episode document's record: its body, or with read_record its seq (read back
        # for a hit: on a 1M-record ledger its 32,315 episodes held 71 MB).
        self._episodes: dict[int, r.ContextEpisodeRecord | int] = {}
        # Tool results indexed by their blob's text: a hit reads the blob again.
        self._blobs: dict[int, r.BlobRef] = {}
        # The documents that belong to a task (a sub-agent's records, a task's): its id.
        self._tasks: dict[int, str] = {}
        self._postings: dict[str, array[int]] = {}
        self._total = 0
        # The last document, when it is a turn's input (turn_started): its message, when
        # it follows, takes its place instead of being indexed a second time.
        self._input: tuple[int | None, str] | None = None
        # Runtime state folded from the work item records only: its active work item is
        # the full fold's (the active stack reads nothing else), at a few records' cost.
        # Under the config the ledger's first derived record states (its finished_window
        # decides whether an old finished item can be reactivated), the default until then.
        self._work = RuntimeState()
        self._active: str | None = None  # its active_work_item_id
        self._config: ProjectionConfig | None = None
        for record in records:
            self.add(record)

    def __len__(self) -> int:
        return len(self._seqs)

    def add(self, record: r.Record) -> None:
        """Index one record (kinds without searchable text are skipped)."""
        body = record.body
        work = self._work_item_of(record)
        document = self._document_text(body)
        if document is None:
            return
        text, kept, blob = document
        if self._input == (record.turn, text) and not isinstance(body, r.ContextEpisodeRecord):
            self._merge_input(record, work)
            return
        words = search_terms(text)
        self._input = None
        if not words:
            return
        if isinstance(body, r.TurnStarted):
            self._input = (record.turn, text)
        counts = self._counted(words)
        index = len(self._seqs)
        self._append_document(record, work, blob)
        self._append_field(body, index, record.seq)
        held = self._only_terms is None or bool(counts)
        # (Not for a document of no query term's, never a hit: its print is never compared.)
        self._prints.append(zlib.crc32("\n".join(sorted(set(words))).encode()) if held else 0)
        self._newest = max(self._newest, record.seq)
        if self._texts is not None:
            self._texts.append(kept if held else "")
        postings = self._postings
        for term, tf in counts.items():
            found = postings.get(term)
            if found is None:
                postings[term] = array("I", (index, tf))
            else:
                found.append(index)
                found.append(tf)
        length = len(words)
        self._lengths.append(length)
        self._total += length

    def _document_text(self, body: r.Body) -> tuple[str, str, r.BlobRef | None] | None:
        """What a record is indexed by, the text its hit keeps, and the blob read for it, if any.

        None for a kind without searchable text. An episode keeps no text: it is made again
        from the episode. A blob-stored output is indexed by the blob's text when it can be
        read, and keeps its preview.
        """
        if isinstance(body, r.ContextEpisodeRecord):
            return episode_text(body), "", None
        searchable = evidence_text(body)
        if not searchable:
            return None
        stored = body.blob if isinstance(body, r.ToolResult) and not body.output else None
        if stored is None or self._blob_text is None:
            return searchable, searchable, None
        full = self._read_blob(stored)
        if full is None:
            self.unread_blobs += 1
            return searchable, searchable, None
        # Indexed by the output's text, held as the preview: the blob is read again for a
        # hit, so the index does not hold every large output.
        return evidence_text(body, blob_output=full) or searchable, searchable, stored

    def _merge_input(self, record: r.Record, work: str | None) -> None:
        """Make the last document, a turn's input, the message ``record`` that repeats it.

        A turn's input recorded twice, as turn_started.input and as the message that
        follows (importers write both): one document, the message, not two equal hits
        taking two places of the limit. Same text, same postings.
        """
        last = len(self._seqs) - 1
        self._seqs[last] = record.seq
        self._kinds[last] = record.kind
        self._work_items[last] = work
        self._fields[last] = _FIELD_CODE[_field_of(record.body)]
        self._newest = max(self._newest, record.seq)
        self._input = None

    def _counted(self, words: list[str]) -> dict[str, int]:
        """Each term's frequency in ``words``: of every term, or with ``for_query`` of its terms only."""
        only = self._only_terms
        if only is None:
            return Counter(words)
        if only.isdisjoint(words):
            return {}
        return {term: tf for term in only if (tf := words.count(term))}

    def _append_document(self, record: r.Record, work: str | None, blob: r.BlobRef | None) -> None:
        """Add the columns of a new document: its seq, kind, turn, work item and what it reads back."""
        body = record.body
        index = len(self._seqs)
        if isinstance(body, r.ContextEpisodeRecord):
            self._seqs.append(body.to_seq)
            self._kinds.append("episode")
            self._turns.append(None)
            self._episodes[index] = body if self._read_record is None else record.seq
        else:
            self._seqs.append(record.seq)
            self._kinds.append(record.kind)
            turns = self._turns
            turn = record.turn
            # The previous document's turn object when equal: one int per turn, not per record.
            turns.append(turns[-1] if turns and turn is not None and turns[-1] == turn else turn)
            if blob is not None:
                self._blobs[index] = blob
            task = _task_of(body)
            if task is not None:
                self._tasks[index] = task
        self._work_items.append(work)
        self._evidence.append(index not in self._episodes)

    def _append_field(self, body: r.Body, index: int, seq: int) -> None:
        """Add document ``index``'s field; a plan makes the tool call that declared it one too."""
        field = _FIELD_CODE[_field_of(body)]
        if (
            field == _PLAN
            and index
            and self._fields[index - 1] == _TOOL_CALL
            and self._seqs[index - 1] == seq - 1
        ):
            # The call that declared this plan (TodoWrite, task_tracker: the plan is recorded
            # right after it) restates the same steps: it is searched as the plan it is.
            self._fields[index - 1] = _PLAN
        self._fields.append(field)

    def _work_item_of(self, record: r.Record) -> str | None:
        """The work item ``record`` belonged to (see :class:`MemoryHit`); folds a work item record."""
        body = record.body
        if type(body) not in _OF_WORK:  # most records: one set lookup (isinstance of unions cost 15% of add)
            return self._active
        if isinstance(body, r.WorkItem | r.WorkItemState):
            self._work = apply_runtime(self._work, record, self._config or DEFAULT_CONFIG)
            self._active = self._work.active_work_item_id
            return body.id
        if isinstance(body, r.ContextEpisodeRecord | r.WorkingMemoryDelta):
            if self._config is None:
                self._config = stated_config(body)
            return body.work_item_id if isinstance(body, r.ContextEpisodeRecord) else self._active
        named = body.work_item_id if isinstance(body, _NAMING) else None
        return named if named is not None else self._active

    def _read_blob(self, blob: r.BlobRef) -> str | None:
        """The indexed part of a blob-stored output's text, or None when it cannot be read."""
        if self._blob_text is None:
            return None
        text = self._blob_text(blob)
        return None if text is None else _indexed_part(text)

    def _evidence_text(self, index: int) -> str:
        """An evidence document's text as indexed (a blob-stored output's read again from the blob)."""
        blob = self._blobs.get(index)
        full = None if blob is None else self._read_blob(blob)
        # An unreadable blob (readable when indexed, not now): the preview still says what it was.
        if self._texts is not None:
            text = self._texts[index]
            return text if blob is None or full is None else text.removesuffix(blob.preview) + full
        found = evidence_text(self._read(index, self._seqs[index]).body, blob_output=full)
        assert found is not None  # a kind with text, as when it was indexed
        return found

    def _read(self, index: int, seq: int) -> r.Record:
        """The record of document ``index``, read back at ``seq``; UsageError if it is another kind."""
        assert self._read_record is not None
        record = self._read_record(seq)
        kind = self._kinds[index]
        if record.kind != ("context_episode" if kind == "episode" else kind):
            raise UsageError(
                f"memory search indexed a {kind} record at seq {seq}, but read_record({seq}) gave "
                f"a {record.kind} record: it must read the ledger whose records were added"
            )
        return record

    def _episode(self, index: int) -> r.ContextEpisodeRecord | None:
        """Document ``index``'s episode (read back from the ledger when the index holds its seq)."""
        episode = self._episodes.get(index)
        if episode is None or isinstance(episode, r.ContextEpisodeRecord):
            return episode
        body = self._read(index, episode).body
        assert isinstance(body, r.ContextEpisodeRecord)
        return body

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        only: Literal["episodes", "evidence"] | None = None,
    ) -> list[MemoryHit]:
        """The best ``limit`` hits for a free-text query, optionally only episodes or evidence."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        if only not in (None, "episodes", "evidence"):
            # A typo ("episode") would otherwise filter nothing and read as a result.
            raise ValueError(f"only must be None, 'episodes' or 'evidence', not {only!r}")
        wanted = sorted(set(search_terms(query)))
        if self._only_terms is not None and not self._only_terms.issuperset(wanted):
            # Its other terms' postings were never kept: it would miss their hits.
            raise ValueError(f"this index answers only the query it was built for, not {query!r}")
        n = len(self._seqs)
        if not wanted or n == 0:
            return []
        avg = self._total / n
        sums: dict[int, float] = {}
        for term in wanted:
            postings = self._postings.get(term)
            if postings:
                add_bm25(sums, postings, bm25_idf(len(postings) // 2, n), self._lengths, avg)
        keep = {"episodes": 0, "evidence": 1}.get(only or "")
        evidence, fields, seqs = self._evidence, self._fields, self._seqs
        weights = [FIELD_WEIGHTS[name] for name in _FIELDS]
        recency = RECENCY / max(1, self._newest)
        items = [
            (index, bm25 * weights[fields[index]] * (1.0 + recency * seqs[index]))
            for index, bm25 in sums.items()
            if keep is None or evidence[index] == keep
        ]
        if not items:
            return []
        groups = self._groups(items, limit, set(wanted))
        return [self._hit(group, wanted, sums) for group in groups[:limit]]

    def _ranked(self, items: list[tuple[int, float]], window: int) -> list[tuple[int, float]]:
        """The best ``window`` of ``items`` (document, score), best first, ties at the cut included.

        Ties are broken as everywhere else: the newer seq, then episodes first.
        """
        best = heapq.nlargest(window, items, key=itemgetter(1))
        floor = best[-1][1]
        seqs, evidence = self._seqs, self._evidence
        top = [item for item in items if item[1] >= floor]
        return sorted(top, key=lambda item: (-item[1], -seqs[item[0]], evidence[item[0]]))

    def _groups(self, items: list[tuple[int, float]], limit: int, want: set[str]) -> list[_Group]:
        """The ranked hits with near-duplicates folded: groups in the order of their best hit.

        Read down the ranking in windows until ``limit`` groups are found. An evidence
        document with the field, length and term print of a group's is folded into it
        unread; any other is read back and folded into a group of its field and best line
        whose terms it mostly shares (:func:`_near`), else starts a group. Past the
        ``limit``-th group the window's rest (:data:`_LOOKAHEAD` more at least) is still
        folded by print, so a near-duplicate just below the cut is counted. At most
        :data:`_MAX_WINDOW` hits a shown one are ranked (a query whose best thousands of
        hits are copies of a few is then answered with those few): a query's cost stays
        bounded by the limit, not by how many documents repeat.
        """
        evidence, fields, prints, lengths = self._evidence, self._fields, self._prints, self._lengths
        work_items, tasks = self._work_items, self._tasks
        window = limit + _LOOKAHEAD
        groups: list[_Group] = []
        by_print: dict[tuple[int, int, int, str | None, str | None], _Group] = {}
        by_line: dict[tuple[str, str], list[_Group]] = {}
        done = 0
        while True:
            ranked = self._ranked(items, window)
            for index, score in ranked[done:]:
                key = (
                    (fields[index], prints[index], lengths[index], work_items[index], tasks.get(index))
                    if evidence[index]
                    else None
                )
                group = by_print.get(key) if key is not None else None
                if group is not None:
                    group.members.append(index)
                    continue
                if len(groups) >= limit:
                    continue  # past the cut: only what folds unread is counted
                hit = self._read_found(index, want)
                hit.score = score
                line = (hit.field, hit.snippet)
                group = next((g for g in by_line.get(line, ()) if _near(g.best, hit)), None)
                if group is None:
                    group = _Group(hit, [index])
                    groups.append(group)
                    by_line.setdefault(line, []).append(group)
                else:
                    group.members.append(index)
                if key is not None:
                    by_print[key] = group
            done = len(ranked)
            if len(groups) >= limit or done == len(items) or window >= _MAX_WINDOW * limit:
                return groups
            window *= 4

    def _ref(self, index: int) -> str:
        """The ref of document ``index`` (an episode's is read from its record)."""
        if self._evidence[index]:
            return f"ledger:{self._seqs[index]}"
        episode = self._episode(index)
        assert episode is not None
        return f"episode:{episode.episode_id}"

    def _read_found(self, index: int, want: set[str]) -> _Found:
        """Read back document ``index``: what its hit shows and what near-duplicates are told by."""
        seqs = self._seqs
        episode = self._episode(index)
        doc = _Doc(
            self._kinds[index],
            seqs[index],
            self._turns[index],
            episode,
            self._work_items[index],
            self._tasks.get(index),
        )
        text = episode_text(episode) if episode is not None else self._evidence_text(index)
        return _Found(
            index, doc, _FIELDS[self._fields[index]], frozenset(search_terms(text)), _snippet(text, want)
        )

    def _hit(self, group: _Group, wanted: list[str], sums: dict[int, float]) -> MemoryHit:
        """The hit a group of near-duplicates is shown as: its best, with the count and every ref."""
        best = group.best
        doc = best.doc
        count = len(group.members)
        matched = tuple(t for t in wanted if t in best.terms)
        weight = FIELD_WEIGHTS[best.field]
        prior = 1.0 + RECENCY * doc.seq / max(1, self._newest)
        whole = [t for t in matched if any(mark in t for mark in IDENTIFIER_MARKS)]
        why = f"matched {', '.join(matched) or 'no term'}"
        if whole:
            why += f" ({', '.join(whole)} whole)"
        why += f" in {'an' if best.field[0] in 'aeiou' else 'a'} {best.field} (x{weight:g})"
        why += f", BM25 {sums[best.index]:.3f}, recency x{prior:.3f}"
        if count > 1:
            why += f"; {count - 1} near-duplicate{'s' if count > 2 else ''} folded in"
        return MemoryHit(
            ref=doc.ref(),
            source=doc.kind,
            score=round(best.score, 6),
            seq=doc.seq,
            turns=doc.turns(),
            work_item=doc.work_item,
            provenance=doc.provenance(),
            snippet=best.snippet,
            matched=matched,
            task=doc.task,
            field=best.field,
            why=why,
            count=count,
            refs=(doc.ref(), *map(self._ref, group.members[1:])),
        )


def search_text(query: str, hits: Sequence[MemoryHit]) -> str:
    """What ``holon_search`` returns: one entry per hit, best first, each with its ref.

    The query is quoted back clipped to :data:`_QUOTED_QUERY` characters (a long one
    would be paid for again in the model's window), and a query without a single word
    to search for says so rather than that nothing matches it.
    """
    quoted = repr(query if len(query) <= _QUOTED_QUERY else query[: _QUOTED_QUERY - 1] + "…")
    if not search_terms(query):
        return (
            f"the query {quoted} has no words to search for: search for words of two or more "
            "letters or digits (common words such as 'the' or 'with' are ignored)"
        )
    if not hits:
        return f"nothing this agent recorded matches {quoted}"
    lines = [f"{len(hits)} hit{'s' if len(hits) != 1 else ''} for {quoted}, best first:"]
    for i, hit in enumerate(hits, 1):
        lines.append(f"{i}. {hit.ref} — {hit.provenance}")
        lines.append(f"   {hit.snippet}")
        lines.append(f"   why: {hit.why}")
        if hit.count > 1:
            # Every ref, so the model can restore the one it needs (the first is the newest best).
            lines.append(f"   {hit.count} near-identical hits: {', '.join(hit.refs)}")
    return "\n".join(lines)
