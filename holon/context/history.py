"""Recent history: indivisible units, filled by tokens, cleared only when the budget needs it.

The history holds what the budget leaves after the pinned sections: the newest evidence
first, down to the oldest that fits, read from the ledger through an
:class:`~holon.context.evidence.EvidenceView` (so it is not bounded by what the
projections keep in memory). A transcript that fits is sent whole, every unit as it was
written. The history is TurnScoped, after the cacheable prefix, so a provider's prefix
cache keeps hitting inside it only while its start stays byte-identical; so it is
*anchored*:

- Every ``PromptRendered`` records a :class:`~holon.records.HistoryAnchor`: the seq the
  history started at (``from_seq``) and the seq through which tool results were cleared
  (``cleared_through``). The next render starts at the same seq and clears through the
  same seq, so the units already shown render to the same bytes and new units are
  appended after them: between two moves the history only grows at its end.
- It moves only when it no longer fits its room, and then by at least a step — at least
  ``clear_at_least`` tokens, and at least ``1 - history_refill`` of the room — so that it
  can grow again for a while before the next move (Anthropic's context editing clears at
  least ``clear_at_least`` tokens or nothing, for the same reason: each move rewrites the
  cache from where it changes). A move first applies the size caps (a history that was
  whole shows every unit in full), then clears tool results oldest first — never one of
  the newest ``keep_tool_results``, never a protected tool's, never one whose placeholder
  would be longer than it —, and only when that is not enough starts the history later.

Everything is a pure function of the inputs and the view (the previous anchor is part of
the inputs), so a replay renders the same bytes.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

import holon.records as r
from holon.context.budget import Form, FormKind, ToolExchange
from holon.context.evidence import EvidenceView, window_view
from holon.context.inputs import ContextInputs
from holon.context.refs import blob_ref, ledger_ref
from holon.context.rounds import call_line, result_head

__all__ = [
    "HISTORY_HEADER",
    "TURN_WORK_HEADER",
    "HistoryPlan",
    "HistoryRules",
    "HistoryUnit",
    "history_units",
    "plan_history",
]

Counter = Callable[[str], int]

HISTORY_HEADER: Final = "## Recent history (oldest first)"
#: The line before the turn's own work, shown after its input (see :class:`HistoryPlan`).
TURN_WORK_HEADER: Final = "work on this input so far (oldest first):"

#: Why a tool result is cleared, as its omission says (``holon.context.causes`` counts by it).
CLEARED_FOR_ROOM: Final = "tool result cleared: the history needed the room"
OVER_SIZE_CAP: Final = "tool result over the size cap"


class HistoryUnit(msgspec.Struct, frozen=True, kw_only=True):
    """One indivisible history item: a message, a brief, or a tool call with its result.

    ``clearable`` is the tokens clearing its result would free (0: it may not be cleared),
    and ``result_seq`` the result's seq, for a tool call. ``call`` is a tool call's
    exchange with offsets in ``text`` (its ``end`` is set where the unit is placed: a cut
    shortens the text), ``None`` for a message or when only a cut's note is shown.
    """

    seq: int
    text: str
    tokens: int
    refs: tuple[str, ...]
    cleared: tuple[r.Omission, ...] = ()
    turn: int | None = None
    #: The shortest head of ``text`` that keeps the unit whole: a tool call's line and its
    #: result's header. A unit cut to fit shows at least this much, or only its note.
    whole_from: int = 0
    result_seq: int | None = None
    clearable: int = 0
    call: ToolExchange | None = None


class HistoryRules(msgspec.Struct, frozen=True, kw_only=True):
    """The render knobs the history depends on (see :class:`~holon.context.RenderConfig`)."""

    keep_tool_results: int
    tool_result_max_tokens: int
    clear_at_least: int
    protected_tools: frozenset[str]
    message_max_tokens: int
    preview_chars: int
    history_refill: float


class HistoryPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The rendered history (``None`` if nothing fits), its omissions and its anchor.

    ``turn_work`` is the part of the shown units that came after the current input (the
    turn's own work, when its prompt is rendered again within it): it is shown after the
    input, under :data:`TURN_WORK_HEADER`, not in the history section, so the prompt
    reads in the order things happened. Its tokens are part of what the plan fitted.
    ``whole``: every unit of the view is shown as it was written (nothing capped,
    cleared or left before the start).
    """

    form: Form | None
    omissions: tuple[r.Omission, ...]
    anchor: r.HistoryAnchor | None
    turn_work: Form | None = None
    whole: bool = False


def _output_size(result: r.ToolResult) -> int:
    return result.blob.size if result.blob is not None else len(result.output.encode())


def _result_ref(result: r.ToolResult, seq: int) -> str:
    return blob_ref(result.blob.hash) if result.blob is not None else ledger_ref(seq)


def _capped(
    kind: str, text: str, seq: int, count: Counter, rules: HistoryRules
) -> tuple[str, tuple[r.Omission, ...]]:
    """``text`` of a message or brief over ``message_max_tokens`` cut to its start and a
    note naming the ref that restores it, with the omission; otherwise as it is."""
    if count(text) <= rules.message_max_tokens:
        return text, ()
    ref = ledger_ref(seq)
    note = f"[{kind} truncated: {len(text):,} chars — restore with ref {ref}]"
    cut = (r.Omission(section="history", ref=ref, reason=f"{kind} over its cap"),)
    return text[: rules.preview_chars * 2] + "\n" + note, cut


def _cleared_note(size: int, ref: str) -> str:
    # One id (the ref; the call's line above names the call and its tool), and the size.
    return f"[cleared: {size:,} bytes — restore with ref {ref}]"


def _declares_plan(records: Sequence[r.Record], at: int) -> r.Record | None:
    """The plan the tool call at ``records[at]`` declared: a work plan recorded right after it.

    An importer records a plan-writing tool (Claude Code's TodoWrite, OpenHands'
    task_tracker) as the call and, right after it, the plan it declares; an agent declares
    its plan the same way through the runtime.
    """
    nxt = at + 1
    if (
        nxt < len(records)
        and isinstance(records[nxt].body, r.WorkPlan)
        and records[nxt].seq == records[at].seq + 1
    ):
        return records[nxt]
    return None


class _Pair(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call joined with its result inside the records read."""

    intent: r.ToolIntent
    intent_seq: int
    result: r.ToolResult
    result_seq: int
    turn: int | None
    plan: r.Record | None = None


def _evidence(
    records: Sequence[r.Record], inputs: ContextInputs
) -> tuple[list[r.Record], list[_Pair], list[r.Omission]]:
    """The messages and briefs, the tool calls with their results, and the results without
    their call among ``records``.

    A call without a result is left to the current input's continuation context, and a
    result whose call is before the records to an omission, so no call appears without its
    result or vice versa. The current input's own message is shown as the input.
    """
    current = inputs.current_input.seq if inputs.current_input is not None else None
    talk: list[r.Record] = []
    pairs: list[_Pair] = []
    orphans: list[r.Omission] = []
    open_calls: dict[str, tuple[int, r.Record]] = {}
    for i, rec in enumerate(records):
        body = rec.body
        if isinstance(body, r.Message | r.Brief):
            if rec.seq != current:
                talk.append(rec)
        elif isinstance(body, r.ToolIntent):
            open_calls[body.call_id] = (i, rec)
        elif isinstance(body, r.ToolResult):
            opened = open_calls.pop(body.call_id, None)
            if opened is None:
                orphans.append(
                    r.Omission(
                        section="history",
                        ref=ledger_ref(rec.seq),
                        reason=f"result of {body.call_id} without its call",
                    )
                )
                continue
            at, intent = opened
            assert isinstance(intent.body, r.ToolIntent)
            pairs.append(
                _Pair(
                    intent=intent.body,
                    intent_seq=intent.seq,
                    result=body,
                    result_seq=rec.seq,
                    turn=intent.turn,
                    plan=_declares_plan(records, at),
                )
            )
    return talk, pairs, orphans


def history_units(
    records: Sequence[r.Record],
    inputs: ContextInputs,
    count: Counter,
    rules: HistoryRules,
    *,
    cleared_through: int,
    capped: bool,
    blob_text: Callable[[str], str | None] = lambda _hash: None,
) -> tuple[list[HistoryUnit], list[r.Omission]]:
    """``records`` as indivisible units in ledger order, and the results shown without a call.

    ``capped``: messages, briefs and arguments over ``message_max_tokens`` are cut to their
    start, and results over ``tool_result_max_tokens`` to a preview (a history sent whole
    shows every unit as written). A result is cleared when its seq is at or before
    ``cleared_through`` and it may be: not of a protected tool, not among the newest
    ``keep_tool_results``, and larger than its placeholder. A call that declared a plan
    shows a one-line stub instead of its arguments: working memory shows the current plan,
    and an older one's steps would read as current. ``blob_text`` reads an output moved to
    the blob store (``None``: its preview is shown).
    """
    talk, pairs, orphans = _evidence(records, inputs)
    units = [_talk_unit(rec, count, rules, capped=capped) for rec in talk]
    keep = rules.keep_tool_results
    newest = {p.result_seq for p in pairs[-keep:]} if keep > 0 else set()
    units.extend(
        _call_unit(
            p,
            count,
            rules,
            newest=p.result_seq in newest,
            cleared_through=cleared_through,
            capped=capped,
            blob_text=blob_text,
        )
        for p in pairs
    )
    units.sort(key=lambda u: u.seq)
    return units, orphans


def _talk_unit(rec: r.Record, count: Counter, rules: HistoryRules, *, capped: bool) -> HistoryUnit:
    """A message's or brief's unit: one line citing it (``capped``, cut to its cap)."""
    body = rec.body
    if isinstance(body, r.Message):
        who = body.role + (f" {body.name}" if body.name else "")
        label, kind = who, "message"
    else:
        assert isinstance(body, r.Brief)
        scope = f" ({body.work_item_id})" if body.work_item_id else ""
        label, kind = f"brief {body.status}{scope}", "brief"
    text, cut = _capped(kind, body.text, rec.seq, count, rules) if capped else (body.text, ())
    line = f"[{ledger_ref(rec.seq)}] {label}: {text}"
    return HistoryUnit(
        seq=rec.seq,
        text=line,
        tokens=count(line),
        refs=(ledger_ref(rec.seq),),
        cleared=cut,
        turn=rec.turn,
    )


def _call_arguments(
    p: _Pair, count: Counter, rules: HistoryRules, *, capped: bool
) -> tuple[str, dict[str, Any], list[r.Omission]]:
    """A call's arguments as its line shows them and as the provider's tool block sends
    them: a stub for one that declared a plan, cut to the cap (``capped``) when over it."""
    if p.plan is not None:
        plan = p.plan.body
        assert isinstance(plan, r.WorkPlan)
        n = len(plan.steps)
        args = (
            f"[declares plan {ledger_ref(p.plan.seq)}: {n} step{'' if n == 1 else 's'}; working memory "
            f"shows the current plan — restore with ref {ledger_ref(p.intent_seq)}]"
        )
        return args, {"holon_note": args}, []
    args = msgspec.json.encode(p.intent.args, order="sorted").decode()
    if capped and count(args) > rules.message_max_tokens:
        ref = ledger_ref(p.intent_seq)
        args = args[: rules.preview_chars * 2] + f"… [arguments truncated — restore with ref {ref}]"
        omission = r.Omission(
            section="history", ref=ref, reason=f"arguments of {p.intent.call_id} over the cap"
        )
        return args, {"holon_note": args}, [omission]
    return args, p.intent.args, []


def _call_unit(
    p: _Pair,
    count: Counter,
    rules: HistoryRules,
    *,
    newest: bool,
    cleared_through: int,
    capped: bool,
    blob_text: Callable[[str], str | None],
) -> HistoryUnit:
    """A tool call's unit: its line, its result's header and the result — in full, as its
    preview (over its cap, or a blob the view cannot read) or cleared to a placeholder —
    with what clearing it would free (``newest``: one of the newest results, kept)."""
    res = p.result
    preview_chars = rules.preview_chars
    # An output the ledger moved to its blob store is shown as any other when the view
    # can read it: a history sent whole shows what the tool returned.
    output = res.output
    loaded = blob_text(res.blob.hash) if res.blob is not None else None
    if loaded is not None:
        output = loaded
    out_tokens = count(output)
    args, arguments, omissions = _call_arguments(p, count, rules, capped=capped)
    call = call_line(p.intent_seq, p.intent, args)
    ref = _result_ref(res, p.result_seq)
    size = _output_size(res)
    note = _cleared_note(size, ref)
    # The output the unit shows, and whether clearing it would free anything.
    if res.blob is not None and loaded is None:
        # At most ``preview_chars`` of it: the output itself could not be loaded.
        preview = (res.output or res.blob.preview)[:preview_chars]
        shown = (
            preview + "\n" if preview else ""
        ) + f"[output stored as blob, {size:,} bytes — restore with ref {ref}]"
        shown_tokens = count(shown)
    else:
        shown, shown_tokens = output, out_tokens
    may_clear = not newest and res.tool not in rules.protected_tools and len(note.encode()) < size
    over_cap = capped and out_tokens > rules.tool_result_max_tokens and len(note.encode()) < size
    if over_cap:
        text = (output[:preview_chars] + "\n" if preview_chars else "") + note
        omissions.append(r.Omission(section="history", ref=ref, reason=OVER_SIZE_CAP, tokens=out_tokens))
    elif may_clear and p.result_seq <= cleared_through:
        text = note
        # What clearing it freed: `holon explain` lists each cleared result by it.
        freed = max(0, shown_tokens - count(note))
        omissions.append(r.Omission(section="history", ref=ref, reason=CLEARED_FOR_ROOM, tokens=freed))
    else:
        text = shown
        if res.blob is not None and loaded is None:
            omissions.append(
                r.Omission(section="history", ref=ref, reason="tool result stored as a blob (preview shown)")
            )
    head = f"{call}\n{result_head(p.result_seq, res)}"
    # Counted in parts (an upper bound: joining adds at most one token per newline),
    # so a large output is scanned once, not once per enclosing text.
    body_tokens = shown_tokens if text is shown else count(text)
    clearable = 0
    if may_clear and not over_cap and p.result_seq > cleared_through:
        clearable = max(0, body_tokens - count(note))
    return HistoryUnit(
        seq=p.intent_seq,
        text=f"{head}\n{text}",
        tokens=count(head) + body_tokens + 1,
        refs=(ledger_ref(p.intent_seq), ledger_ref(p.result_seq)),
        cleared=tuple(omissions),
        turn=p.turn,
        whole_from=len(head),
        result_seq=p.result_seq,
        clearable=clearable,
        call=ToolExchange(
            call_id=p.intent.call_id,
            tool=p.intent.tool,
            arguments=dict(arguments),
            start=0,
            result=len(call) + 1,
            end=0,
        ),
    )


def _placeholder(anchor: int) -> str:
    # Names only the anchor, so it reads the same for as long as the anchor holds.
    return (
        f"[earlier history (before ledger:{anchor}) is not shown — restore any ref with "
        "`holon get <ref>` or find it with `holon search`]"
    )


def _render_units(
    units: Sequence[HistoryUnit], start: int, count: Counter, *, anchor: int | None, turn_from: int
) -> tuple[Form | None, Form | None, list[r.Omission]]:
    """The history section showing ``units[start:]``, the turn's work, and the omissions.

    ``units[turn_from:]`` (those after the current input) are the turn's own work,
    returned as the second form; the rest are the history section (``None`` when it would hold only
    its header). ``anchor`` is set when evidence older than the shown units exists: a
    placeholder line then says where it went.
    """
    shown = units[start:]
    before = units[start:turn_from]
    after = units[max(start, turn_from) :]
    head = [HISTORY_HEADER]
    if anchor is not None:
        head.append(_placeholder(anchor))
    history: Form | None = None
    if before or anchor is not None:
        # Section tokens are the sum of the parts plus one per line break: an upper bound
        # for the estimator, which never merges tokens across a newline.
        tokens = sum(count(line) + 1 for line in head) + sum(u.tokens + 1 for u in before)
        cut = anchor is not None or any(u.cleared for u in before)
        kind: FormKind = "truncated" if cut else "full"
        history = Form(
            kind=kind,
            text="\n".join([*head, *(u.text for u in before)]),
            tokens=tokens,
            cuts=_turn_cuts(head, before, anchored=anchor is not None),
            calls=_calls(head, before),
        )
    work: Form | None = None
    if after:
        tokens = count(TURN_WORK_HEADER) + 1 + sum(u.tokens + 1 for u in after)
        kind = "truncated" if any(u.cleared for u in after) else "full"
        work = Form(
            kind=kind,
            text="\n".join([TURN_WORK_HEADER, *(u.text for u in after)]),
            tokens=tokens,
            calls=_calls([TURN_WORK_HEADER], after),
        )
    # The units read but left before the start: what this prompt moved out of view (the
    # placeholder names everything older; reading it all back would cost the ledger's size).
    omissions = [
        r.Omission(section="history", ref=ref, reason="before the history anchor", tokens=u.tokens)
        for u in units[:start]
        for ref in u.refs
    ]
    for u in shown:
        omissions.extend(u.cleared)
    return history, work, omissions


def _calls(head: Sequence[str], units: Sequence[HistoryUnit]) -> tuple[ToolExchange, ...]:
    """The tool exchanges of ``units`` joined by line breaks after the ``head`` lines, placed."""
    calls: list[ToolExchange] = []
    offset = sum(len(line) + 1 for line in head)
    for unit in units:
        if unit.call is not None:
            placed = unit.call.shifted(offset)
            calls.append(msgspec.structs.replace(placed, end=offset + len(unit.text)))
        offset += len(unit.text) + 1
    return tuple(calls)


def _turn_cuts(head: Sequence[str], units: Sequence[HistoryUnit], *, anchored: bool) -> tuple[int, ...]:
    """Offsets in the history text of the line break before each unit that starts a new turn.

    A provider that caches whole content blocks (Anthropic) finds the previous prompt's
    history again only where one of the new prompt's blocks ends: the next turn's history
    is this one plus the last turn's units, so cutting blocks before every turn's first
    unit keeps the previous history's end a block boundary. The cuts depend only on the
    units before them, so they stay where they were while the history grows at its end.

    An ``anchored`` history (its head names where it starts) is also cut before its first
    unit: a prompt whose units all came after its input showed the head alone, and the
    next turn's history is that head and the units — without the cut, the head's block
    was never a block of the next request, which re-sent every TurnScoped section.
    """
    cuts: list[int] = []
    offset = sum(len(line) + 1 for line in head) - 1
    previous: int | None = None
    for i, unit in enumerate(units):
        if (i > 0 and unit.turn != previous) or (i == 0 and anchored):
            cuts.append(offset)
        previous = unit.turn
        offset += 1 + len(unit.text)
    return tuple(cuts)


# The split of a prompt with no current input (or one without a seq): everything is history.
_NO_SPLIT: Final = 1 << 62


def _start_of(units: Sequence[HistoryUnit], seq: int) -> int:
    return next((i for i, u in enumerate(units) if u.seq >= seq), len(units))


#: The units (and orphaned results) of the records read from ``from_seq`` to ``to_seq``
#: under a clearing cut, capped or not — keyed so; they depend on nothing else of a render.
UnitsMemo = dict[tuple[int, int, int, bool], tuple[list[HistoryUnit], list[r.Omission]]]


class _Layout:
    """The units read from ``from_seq`` under one clearing cut, and the tokens of the
    history from each start."""

    def __init__(
        self,
        view: EvidenceView,
        inputs: ContextInputs,
        count: Counter,
        rules: HistoryRules,
        *,
        from_seq: int,
        to_seq: int,
        cut: int,
        capped: bool,
        memo: UnitsMemo | None = None,
    ) -> None:
        self.cut = cut
        self.capped = capped
        self.from_seq = from_seq
        key = (from_seq, to_seq, cut, capped)
        found = memo.get(key) if memo is not None else None
        if found is None:
            found = history_units(
                view.records(from_seq, to_seq),
                inputs,
                count,
                rules,
                cleared_through=cut,
                capped=capped,
                blob_text=view.blob_text,
            )
            if memo is not None:
                memo[key] = found
        # Copies: a refill may replace the newest unit of this layout, not of the memo's.
        self.units, self.orphans = list(found[0]), list(found[1])
        current = inputs.current_input
        # Units after the current input are the turn's own work, shown after the input.
        split = current.seq if current is not None and current.seq is not None else _NO_SPLIT
        self.turn_from = next((i for i, u in enumerate(self.units) if u.seq > split), len(self.units))
        # Evidence older than the records read may exist unless they start at the beginning.
        self._older = from_seq > 0
        self._count = count
        # suffix[i]: tokens of units[i:] plus one per line break.
        self._suffix = [0] * (len(self.units) + 1)
        for i in range(len(self.units) - 1, -1, -1):
            self._suffix[i] = self._suffix[i + 1] + self.units[i].tokens + 1

    def turn_work(self, turn: int | None) -> int:
        """Tokens of the newest turn's units before ``turn`` (the turn being rendered; its
        own units are left out): how much one turn's work took, as the history shows it."""
        newest: int | None = None
        total = 0
        for u in reversed(self.units):
            if u.turn is None or (turn is not None and u.turn >= turn):
                continue
            if newest is None:
                newest = u.turn
            elif u.turn != newest:
                break
            total += u.tokens + 1
        return total

    def replace_newest(self, unit: HistoryUnit) -> None:
        """Show ``unit`` in place of the newest unit (the same item, cut to fit)."""
        delta = unit.tokens - self.units[-1].tokens
        self.units[-1] = unit
        for i in range(len(self.units)):
            self._suffix[i] += delta

    def anchor_at(self, start: int, anchor: int) -> int | None:
        """The anchor a placeholder names when the history starts at ``start``, if any."""
        return anchor if start > 0 or self._older else None

    def tokens(self, start: int, anchor: int) -> int:
        """Tokens of what :func:`_render_units` shows from ``start``: both of its parts."""
        count = self._count
        tokens = self._suffix[start]
        named = self.anchor_at(start, anchor)
        if start < self.turn_from or named is not None:
            tokens += count(HISTORY_HEADER) + 1
        if named is not None:
            tokens += count(_placeholder(named)) + 1
        if start < len(self.units) and self.turn_from < len(self.units):
            tokens += count(TURN_WORK_HEADER) + 1
        return tokens

    def whole(self) -> int:
        """Tokens of the history from the first unit, naming the layout's ``from_seq``."""
        return self.tokens(0, self.from_seq)

    def fill(self, target: int) -> int:
        """The earliest start whose history, newest units, fits ``target`` (``len(units)``: none).

        The placeholder names the start's own seq, so its tokens change with the start:
        the search runs on an estimate (the placeholder naming the newest unit) and is
        then corrected with exact counts, a step or two, not one count per unit.
        """
        units = self.units
        n = len(units)
        if n == 0:
            return 0
        fixed = self._count(HISTORY_HEADER) + 1 + self._count(_placeholder(units[-1].seq)) + 1
        if self.turn_from < n:
            fixed += self._count(TURN_WORK_HEADER) + 1
        start = n
        while start > 0 and fixed + self._suffix[start - 1] <= target:
            start -= 1
        while start < n and self.tokens(start, units[start].seq) > target:
            start += 1
        while start > 0 and self.tokens(start - 1, units[start - 1].seq) <= target:
            start -= 1
        return start

    def clearing_cut(self, free: int) -> int:
        """The cut, at or after this one, that clears results oldest first until at least
        ``free`` tokens are freed (every result it may clear, when they free less)."""
        cut = self.cut
        freed = 0
        for u in self.units:
            if u.clearable and u.result_seq is not None:
                cut = max(cut, u.result_seq)
                freed += u.clearable
                if freed >= free:
                    break
        return cut


def _step(allowance: int, rules: HistoryRules) -> int:
    """The least a move frees: ``clear_at_least``, and ``1 - history_refill`` of the room
    (never more than the room)."""
    return min(allowance, max(rules.clear_at_least, int(allowance * (1.0 - rules.history_refill))))


#: Records read at first when the history is filled from the newest back; each further
#: read takes four times as many, until the history is full or the view starts.
_FIRST_READ: Final = 256


class _Reading(msgspec.Struct, frozen=True, kw_only=True):
    """What one history plan reads: the evidence from ``first`` to ``head`` in the view, under
    one counter and one set of rules, in ``allowance`` tokens less the rounds' ``reserve``."""

    inputs: ContextInputs
    view: EvidenceView
    count: Counter
    rules: HistoryRules
    first: int
    head: int
    allowance: int
    reserve: int
    memo: UnitsMemo | None

    def layout(self, from_seq: int, cut: int, *, capped: bool) -> _Layout:
        return _Layout(
            self.view,
            self.inputs,
            self.count,
            self.rules,
            from_seq=from_seq,
            to_seq=self.head,
            cut=cut,
            capped=capped,
            memo=self.memo,
        )

    def room_beside(self, read: _Layout) -> int:
        """What a history that is not sent whole grows into: the rest is the turn's rounds'."""
        return max(0, self.allowance - min(self.reserve, read.turn_work(self.inputs.turn)))


def plan_history(
    inputs: ContextInputs,
    count: Counter,
    rules: HistoryRules,
    *,
    allowance: int,
    reserve: int = 0,
    view: EvidenceView | None = None,
    memo: UnitsMemo | None = None,
) -> HistoryPlan:
    """The history section within ``allowance`` tokens, keeping the previous anchor if it can.

    Unless the history is sent whole, it leaves the turn's rounds as much room as the
    newest finished turn's units took, up to ``reserve`` tokens: it grows only into the
    rest, and a move refills that (:class:`~holon.context.RenderConfig`'s
    ``rounds_reserve`` says why).

    ``view`` is where the evidence is read (default: the inputs' own windows,
    :func:`~holon.context.evidence.window_view`). ``memo`` keeps the units read across
    the plans of one render (the same inputs, view, counter and rules): a render plans
    its history once per pass, and reading and counting the units is most of a pass.
    """
    view = view if view is not None else window_view(inputs)
    first = view.first_seq
    head = inputs.position
    if head is None:
        # Inputs made without a ledger: their view holds little, and all of it is read.
        held = view.records(first, _NO_SPLIT)
        head = held[-1].seq + 1 if held else first
    previous = inputs.previous.history if inputs.previous is not None else None
    reading = _Reading(
        inputs=inputs,
        view=view,
        count=count,
        rules=rules,
        first=first,
        head=head,
        allowance=allowance,
        reserve=reserve,
        memo=memo,
    )
    if previous is not None and previous.from_seq >= first:
        return _from_anchor(reading, previous)
    return _from_newest(reading)


def _from_anchor(reading: _Reading, previous: r.HistoryAnchor) -> HistoryPlan:
    """The history from the previous prompt's anchor: kept as it was while it fits, else moved."""
    count, allowance = reading.count, reading.allowance
    anchor, cut = previous.from_seq, previous.cleared_through
    was_whole = anchor <= reading.first and cut < 0
    kept = reading.layout(anchor, cut, capped=not was_whole)
    room = reading.room_beside(kept)
    target = room - _step(room, reading.rules)
    if kept.whole() <= (allowance if was_whole else room):
        return _plan(kept, 0, anchor, count, whole=was_whole)
    # A move: the caps first, then clearing oldest first, then a later start.
    capped = kept if not was_whole else reading.layout(anchor, cut, capped=True)
    if was_whole and capped.whole() <= target:
        return _plan(capped, 0, anchor, count)
    cleared = reading.layout(anchor, capped.clearing_cut(capped.whole() - target), capped=True)
    if cleared.whole() <= target:
        return _plan(cleared, 0, anchor, count)
    return _refill(cleared, target, allowance, count)


def _from_newest(reading: _Reading) -> HistoryPlan:
    """No anchor to keep: the newest evidence back to the oldest that fits, whole if it can."""
    count, allowance, first, head = reading.count, reading.allowance, reading.first, reading.head
    read_from = max(first, head - _FIRST_READ)
    while True:
        fresh = reading.layout(read_from, -1, capped=False)
        if read_from <= first and fresh.whole() <= allowance:
            return _plan(fresh, 0, first, count, whole=True)
        if read_from <= first or fresh.whole() > allowance:
            break
        read_from = max(first, head - (head - read_from) * 4)
    room = reading.room_beside(fresh)
    target = room - _step(room, reading.rules)
    # A first history is placed like a moved one: it leaves the step to grow into (the turn's
    # rounds come after the prompt, and the next turns' evidence after them).
    capped = reading.layout(read_from, -1, capped=True)
    start = capped.fill(target)
    if not 0 < start < len(capped.units) or not any(u.clearable for u in capped.units[:start]):
        return _refill(capped, target, allowance, count)
    # The units that did not fit are older than every unit shown: with their results
    # cleared (oldest first, as a move clears), older evidence may fit in what is left.
    cut = capped.units[start].seq - 1
    while True:
        cleared = reading.layout(read_from, cut, capped=True)
        if read_from <= first or cleared.fill(target) > 0:
            return _refill(cleared, target, allowance, count)
        read_from = max(first, head - (head - read_from) * 4)


def _refill(layout: _Layout, target: int, allowance: int, count: Counter) -> HistoryPlan:
    """The history started again at the newest units that fill ``target`` (or, if not even
    one does, the whole room; or the newest unit cut to fit it)."""
    units = layout.units
    for room in (target, allowance):
        start = layout.fill(room)
        if start < len(units):
            return _plan(layout, start, units[start].seq, count)
    if units:
        # Not even the newest unit fits the whole room (the caps are absolute tokens, and
        # a unit under them, or one whose parts are not capped, can be larger than the
        # room): show it cut to fit, rather than no history at all.
        newest = units[-1]
        overhead = layout.tokens(len(units) - 1, newest.seq) - newest.tokens
        fitted = _cut_to_fit(newest, allowance - overhead, count)
        if fitted is not None:
            layout.replace_newest(fitted)
            return _plan(layout, len(units) - 1, newest.seq, count)
    omissions = [
        r.Omission(section="history", ref=ref, reason="history over budget", tokens=u.tokens)
        for u in units
        for ref in u.refs
    ]
    return HistoryPlan(form=None, omissions=(*layout.orphans, *omissions), anchor=None)


#: A unit cut to fit is searched for within this many characters per token of its room:
#: a token is rarely longer (a run of blank lines is), and the search stays cheap for a
#: unit of megabytes.
_CUT_CHARS_PER_TOKEN: Final = 32

#: A placeholder a unit shows for what it left out (``[cleared: … — restore
#: with ref ledger:1234]``, ``[output stored as blob, … — restore with ref blob:<hash>]``,
#: a truncated message's or arguments'), on one line and far shorter than this margin.
_PLACEHOLDER: Final = re.compile(r"\[[^\[\]\n]*restore with ref [^\[\]\n]*\]")
_PLACEHOLDER_MARGIN: Final = 1024


def _cut_to_fit(unit: HistoryUnit, room: int, count: Counter) -> HistoryUnit | None:
    """``unit`` as its longest head that fits ``room`` tokens with a note naming the refs that
    restore it; ``None`` when not even the note fits. A head shorter than the unit's
    ``whole_from`` (a call without its result's header) is not shown: only the note is.
    A head never ends inside a placeholder: it ends before it."""
    refs = ", ".join(unit.refs)
    limit = min(len(unit.text), room * _CUT_CHARS_PER_TOKEN)
    # Cut inside a placeholder, a head showed its ref cut short: a blob's 64 hex digits
    # cost more than the cut's note, so a head could end in `blob:a81f19ad`, which
    # restores nothing (and `holon_get` refuses as malformed).
    spans = [(m.start(), m.end()) for m in _PLACEHOLDER.finditer(unit.text, 0, limit + _PLACEHOLDER_MARGIN)]
    starts = [start for start, _ in spans]

    def whole(keep: int) -> int:
        i = bisect.bisect_left(starts, keep) - 1
        return spans[i][0] if i >= 0 and keep < spans[i][1] else keep

    def text(keep: int) -> str:
        note = (
            f"[history item cut to fit the room: {keep:,} of {len(unit.text):,} chars shown — "
            f"restore with ref {refs}]"
        )
        return f"{unit.text[:keep]}\n{note}" if keep else note

    lo, hi = -1, limit
    # The largest head that fits: counts grow with the head (give or take a token at the
    # cut), and ``whole`` with it, so a bisection finds it in a few dozen counts of at
    # most the room.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text(whole(mid))) <= room:
            lo = mid
        else:
            hi = mid - 1
    if lo < 0:
        return None
    lo = whole(lo)
    if lo < unit.whole_from:
        # A head ending before the result's header shows the call without its result:
        # the pair is never split, so only the note is shown, naming both.
        lo = 0
    shown = text(lo)
    tokens = count(shown)
    # Only the note shown: no call line is left to send as the provider's tool blocks.
    call = unit.call if lo else None
    cut = tuple(
        r.Omission(
            section="history", ref=ref, reason="history item cut to fit the room", tokens=unit.tokens - tokens
        )
        for ref in unit.refs
    )
    return msgspec.structs.replace(unit, text=shown, tokens=tokens, cleared=(*unit.cleared, *cut), call=call)


def _plan(layout: _Layout, start: int, anchor: int, count: Counter, *, whole: bool = False) -> HistoryPlan:
    recorded = r.HistoryAnchor(from_seq=anchor, cleared_through=layout.cut)
    if start >= len(layout.units):
        # Nothing at or after the anchor yet: keep it, show nothing.
        return HistoryPlan(form=None, omissions=tuple(layout.orphans), anchor=recorded, whole=whole)
    form, work, omissions = _render_units(
        layout.units, start, count, anchor=layout.anchor_at(start, anchor), turn_from=layout.turn_from
    )
    return HistoryPlan(
        form=form, omissions=(*layout.orphans, *omissions), anchor=recorded, turn_work=work, whole=whole
    )
