"""The recalled section: older evidence the current input asks about, which the history no longer shows.

The history shows the newest evidence that fits, and archived episodes their summaries;
what a new input asks about may lie between the two, in records the history moved past
(a detail from an earlier session, the output of a command run hours ago). The recalled
section brings the few records that match the input's words best back into the prompt,
each whole or as its preview, each naming the ref that restores it.

Every step is deterministic and reads only the ledger through the caller's
:class:`~holon.context.evidence.EvidenceView`, as the history does:

- **The gate.** Only a turn whose input is a message (not a wake-up, a task's result or a
  continuation), and only when the input has at least :data:`MIN_QUERY_TERMS` search terms
  once stop words and the words of a routine continuation (:data:`ROUTINE_WORDS`: "ok,
  continue", "yes please go on") are left out, one of them *new*: not in the text of the
  prompt's other sections. An input about what the prompt already shows recalls nothing.
- **The window.** The records in the ``recall_window`` seqs before the history's start:
  a render reads a bounded range, so its cost does not grow with the ledger.
- **What is recalled.** Messages, briefs, and tool calls with their results, as history
  units (a call is never shown without its result; the result is a preview). Left out:
  the operator's requests of the current session (the operator's requests section and the
  history show each of them, and a superseded instruction must not come back after its
  correction), a call that declared a plan (working memory shows the plan in force), and
  anything after the history's start (it is in the prompt already).
- **The ranking.** BM25 (:func:`holon.context.search.add_bm25`, the scorer of every index
  here) over the window's records, query terms sorted; a record must match at least two
  of the input's terms, one of them new. Ties go to the newer record.
  Records whose text repeats one already chosen are left out.
- **The room.** At most ``recall_share`` of the room, and only room the history left:
  the section never moves the history, so it costs only its own tokens, in the prompt's
  tail, where a new input re-sends everything anyway.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Form
from holon.context.evidence import EvidenceView
from holon.context.history import HistoryRules, history_units
from holon.context.inputs import ContextInputs
from holon.context.search import add_bm25, bm25_idf, terms

__all__ = [
    "MIN_QUERY_TERMS",
    "RECALL_HEADER",
    "RECALL_LIMIT",
    "ROUTINE_WORDS",
    "Recall",
    "recall_query",
    "recalled_form",
]

Counter = Callable[[str], int]

RECALL_HEADER: Final = (
    "## Recalled for this input (older records the history above no longer shows, matched to "
    "the input's words, oldest first; the history and working memory are newer and hold where "
    "they differ)"
)
#: Most records the section shows.
RECALL_LIMIT: Final = 6
#: Fewest search terms an input must have, past stop words and routine words, to recall anything.
MIN_QUERY_TERMS: Final = 2
#: Words of a routine continuation: an input made only of these recalls nothing.
ROUTINE_WORDS: Final = frozenset(
    {
        *("ahead", "alright", "carry", "continue", "done", "fine", "go", "going", "good", "great"),
        *("keep", "next", "ok", "okay", "please", "proceed", "right", "sounds", "sure", "thank"),
        *("thanks", "yes", "yep"),
    }
)
# A recalled result or message is a preview: its room is shared by several records.
_RECALL_TOKENS: Final = 400
_ROLES_OF_REQUESTS: Final = frozenset({"user", "operator", "channel"})
_WINDOWS_HELD: Final = 4


class Recall(msgspec.Struct, frozen=True, kw_only=True):
    """What the recalled section showed: its form, and the seqs of the records it brought back."""

    form: Form
    seqs: tuple[int, ...]


def _holds(text: str, term: str) -> bool:
    """Whether lowercased ``text`` has ``term`` as a word (not inside another: ``van`` in ``relevant``)."""
    at = text.find(term)
    while at >= 0:
        end = at + len(term)
        if (at == 0 or not _word_char(text[at - 1])) and (end == len(text) or not _word_char(text[end])):
            return True
        at = text.find(term, at + 1)
    return False


def _word_char(char: str) -> bool:
    return char.isalnum() or char in "_-"


def recall_query(inputs: ContextInputs) -> list[str] | None:
    """The input's search terms to recall by, sorted, or ``None`` when the gate is closed."""
    current = inputs.current_input
    if current is None or current.seq is None:
        return None
    wanted = sorted({t for t in terms(current.text) if t not in ROUTINE_WORDS})
    return wanted if len(wanted) >= MIN_QUERY_TERMS else None


def _text_of(body: r.Body) -> str | None:
    if isinstance(body, r.Message | r.Brief):
        return body.text
    if isinstance(body, r.ToolIntent):
        return f"{body.tool} {msgspec.json.encode(body.args, order='sorted').decode()}"
    if isinstance(body, r.ToolResult):
        if body.blob is not None and not body.output:
            return f"{body.blob.preview}\n{body.blob.tail}"
        return body.output
    return None


class _Window:
    """The recallable records of one window, indexed for ranking.

    Left out: the current session's requests (``session``: the seq of its first; the
    mandate or the history shows each of them) and a call that declared a plan.
    """

    def __init__(self, records: Sequence[r.Record], session: int | None) -> None:
        self.records = records  # held, so the identities the cache keys on stay taken
        self.at: list[int] = []  # index in ``records`` of each document
        self.lengths: array[int] = array("q")
        self.postings: dict[str, array[int]] = {}
        planned: set[str] = set()  # calls that declared a plan: neither half is recalled
        for i, rec in enumerate(records):
            body = rec.body
            request = isinstance(body, r.Message) and body.role in _ROLES_OF_REQUESTS
            if request and session is not None and rec.seq >= session:
                continue
            declares_plan = i + 1 < len(records) and isinstance(records[i + 1].body, r.WorkPlan)
            if isinstance(body, r.ToolIntent) and declares_plan:
                planned.add(body.call_id)
                continue
            if isinstance(body, r.ToolResult) and body.call_id in planned:
                continue
            text = _text_of(body)
            if not text:
                continue
            counts: dict[str, int] = {}
            for term in terms(text):
                counts[term] = counts.get(term, 0) + 1
            doc = len(self.at)
            self.at.append(i)
            self.lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                found = self.postings.get(term)
                if found is None:
                    found = self.postings[term] = array("q")
                found.extend((doc, tf))
        self.avg = max(1.0, sum(self.lengths) / len(self.at)) if self.at else 1.0

    def ranked(self, query: list[str], novel: frozenset[str]) -> list[int]:
        """Indexes into ``records``, best first, of the documents matching at least two terms of
        ``query``, one of them ``novel``."""
        n = len(self.at)
        sums: dict[int, float] = {}
        matched: dict[int, int] = {}
        new: set[int] = set()
        for term in query:  # sorted: floating-point sums are reproducible
            found = self.postings.get(term)
            if not found:
                continue
            add_bm25(sums, found, bm25_idf(len(found) // 2, n), self.lengths, self.avg)
            docs = found[::2]
            for doc in docs:
                matched[doc] = matched.get(doc, 0) + 1
            if term in novel:
                new.update(docs)
        hits = [doc for doc in sums if matched[doc] >= MIN_QUERY_TERMS and doc in new]
        hits.sort(key=lambda doc: (-sums[doc], -doc))
        return [self.at[doc] for doc in hits]


# The windows indexed last: consecutive renders read the same window while the history
# keeps its start. Speed only: a window is used again only for the very record objects it
# was built from, which it holds.
_WINDOWS: OrderedDict[tuple[int | None, int, int, int], _Window] = OrderedDict()


def _window(records: Sequence[r.Record], session: int | None) -> _Window:
    key = (session, len(records), id(records[0]), id(records[-1]))
    held = _WINDOWS.get(key)
    if held is not None and held.records[0] is records[0] and held.records[-1] is records[-1]:
        return held  # the oldest window goes first, used or not: a few are held
    made = _WINDOWS[key] = _Window(records, session)
    if len(_WINDOWS) > _WINDOWS_HELD:
        _WINDOWS.popitem(last=False)
    return made


def _pair(records: Sequence[r.Record], at: int) -> list[r.Record] | None:
    """The records of the unit ``records[at]`` belongs to: itself, or a call with its result
    (``None``: a call or result whose other half is outside ``records``)."""
    body = records[at].body
    if isinstance(body, r.ToolIntent):
        for rec in records[at + 1 :]:
            if isinstance(rec.body, r.ToolResult) and rec.body.call_id == body.call_id:
                return [records[at], rec]
        return None
    if isinstance(body, r.ToolResult):
        for rec in reversed(records[:at]):
            if isinstance(rec.body, r.ToolIntent) and rec.body.call_id == body.call_id:
                return [rec, records[at]]
        return None
    return [records[at]]


def recalled_form(
    inputs: ContextInputs,
    view: EvidenceView,
    count: Counter,
    rules: HistoryRules,
    *,
    before: int,
    window: int,
    room: int,
    shown: Sequence[str],
) -> Recall | None:
    """The recalled section for ``inputs`` within ``room`` tokens, from the ``window`` seqs of
    evidence before seq ``before`` (where the history starts), or ``None``.

    ``shown`` are the texts of the prompt's other sections (joined and lowercased only once
    the gate is open: most renders stop before): an input all of whose terms they already
    hold is about what the prompt shows (a routine turn), and recalls nothing; a record is
    recalled only for a term they do not hold.
    """
    query = recall_query(inputs)
    header_tokens = count(RECALL_HEADER)
    if query is None or room <= header_tokens:
        return None
    text = "\n".join(shown).lower()
    novel = frozenset(term for term in query if not _holds(text, term))
    if not novel:
        return None
    records = view.records(max(view.first_seq, before - window), before)
    if not records:
        return None
    indexed = _window(records, inputs.mandate.first.seq if inputs.mandate is not None else None)
    # Previews: a recalled record shares the section with others.
    preview = msgspec.structs.replace(
        rules,
        tool_result_max_tokens=min(rules.tool_result_max_tokens, _RECALL_TOKENS),
        message_max_tokens=min(rules.message_max_tokens, _RECALL_TOKENS),
    )
    left = room - header_tokens
    chosen: dict[int, tuple[str, int, tuple[r.Omission, ...]]] = {}  # first seq -> text, tokens, cuts
    seen: set[str] = set()
    # The best few are tried: a render must not read every match of a common word.
    for at in indexed.ranked(query, novel)[: 2 * RECALL_LIMIT]:
        if len(chosen) == RECALL_LIMIT:
            break
        unit_records = _pair(records, at)
        if unit_records is None or unit_records[0].seq in chosen:
            continue
        units, _ = history_units(
            unit_records, inputs, count, preview, cleared_through=-1, capped=True, blob_text=view.blob_text
        )
        if len(units) != 1:
            continue
        unit = units[0]
        # The same text again (a command rerun, a message repeated): one is enough.
        body = unit.text.split("] ", 1)[-1]
        if body in seen or unit.tokens + 1 > left:
            continue
        seen.add(body)
        # What its preview leaves out, named as every shortened item is (the ref restores it).
        cuts = tuple(msgspec.structs.replace(cut, section="recalled") for cut in unit.cleared)
        chosen[unit.seq] = (unit.text, unit.tokens, cuts)
        left -= unit.tokens + 1
    if not chosen:
        return None
    order = sorted(chosen)
    text = "\n".join([RECALL_HEADER, *(chosen[seq][0] for seq in order)])
    omissions = tuple(cut for seq in order for cut in chosen[seq][2])
    form = Form(kind="full", text=text, tokens=count(text), omissions=omissions)
    return Recall(form=form, seqs=tuple(order))
