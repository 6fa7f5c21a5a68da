"""Recent history: indivisible units, tool-result clearing, and the stable history anchor.

The history section is most of a long agent's prompt, and it is TurnScoped: it sits
after the cacheable prefix, so a provider's prefix cache keeps hitting inside it only
while its start stays byte-identical from one prompt to the next. A history re-filled
newest-first on every render would start one item later each time a tool call pushed
an old one out — a cache rewrite of the whole history on every model call. So the
history is *anchored*:

- Every ``PromptRendered`` records a :class:`~holon.records.HistoryAnchor`: the seq the
  history started at (``from_seq``) and the seq through which tool results were cleared
  for age (``cleared_through``).
- The next render starts at the same seq and clears through the same seq, so the units
  already shown render to the same bytes and new units are appended after them: between
  two moves the history only grows at its end.
- It moves only when it has to, and then far: a *clearing step* when the results older
  than the newest ``keep_tool_results`` that are not cleared yet add up to
  ``clear_batch_tokens``; a *re-layout* when the history no longer fits its room, or
  the projection's recent windows no longer reach back to the anchor. A re-layout
  clears every result it may and, if that is not enough, starts the history again at
  the newest units that fill ``history_refill`` of the room — the rest of the room is
  what the history grows into before the next move. Inside windows that have started
  dropping old entries, the new start is also kept in the newer half of the window,
  so the window slides a long way before it reaches the anchor again.

Everything is a pure function of the inputs (the previous anchor is part of them), so a
replay renders the same bytes.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Form, FormKind
from holon.context.inputs import ContextInputs
from holon.context.refs import blob_ref, ledger_ref
from holon.context.rounds import call_line, result_head
from holon.projections import ToolExecution

__all__ = [
    "HISTORY_HEADER",
    "TURN_WORK_HEADER",
    "HistoryPlan",
    "HistoryRules",
    "HistoryUnit",
    "clearing_cut",
    "history_units",
    "plan_history",
]

Counter = Callable[[str], int]

HISTORY_HEADER: Final = "## Recent history (oldest first)"
#: The line before the turn's own work, shown after its input (see :class:`HistoryPlan`).
TURN_WORK_HEADER: Final = "work on this input so far (oldest first):"


class HistoryUnit(msgspec.Struct, frozen=True, kw_only=True):
    """One indivisible history item: a message, a brief, or a tool call with its result."""

    seq: int
    text: str
    tokens: int
    refs: tuple[str, ...]
    cleared: tuple[r.Omission, ...] = ()
    turn: int | None = None
    #: The shortest head of ``text`` that keeps the unit whole: a tool call's line and its
    #: result's header. A unit cut to fit shows at least this much, or only its note.
    whole_from: int = 0


class HistoryRules(msgspec.Struct, frozen=True, kw_only=True):
    """The render knobs the history depends on (see :class:`~holon.context.RenderConfig`)."""

    keep_tool_results: int
    tool_result_max_tokens: int
    clear_batch_tokens: int
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
    """

    form: Form | None
    omissions: tuple[r.Omission, ...]
    anchor: r.HistoryAnchor | None
    turn_work: Form | None = None


def _output_size(result: r.ToolResult) -> int:
    return result.blob.size if result.blob is not None else len(result.output.encode())


def _result_ref(ex: ToolExecution) -> str:
    assert ex.result is not None and ex.result_seq is not None
    return blob_ref(ex.result.blob.hash) if ex.result.blob is not None else ledger_ref(ex.result_seq)


def _pairs(inputs: ContextInputs) -> list[ToolExecution]:
    return [ex for ex in inputs.tools if ex.intent is not None and ex.result is not None]


def clearing_cut(
    pairs: Sequence[ToolExecution],
    out_tokens: dict[int, int],
    *,
    previous: int,
    rules: HistoryRules,
    batch: int,
) -> int:
    """The seq through which tool results are cleared for age, moved on from ``previous``.

    Eligible are results after ``previous`` that are not among the newest
    ``keep_tool_results``, not of a protected tool and not over the size cap (those are
    cleared anyway). When they add up to ``batch`` tokens, the cut moves to the newest
    of them (all of them are cleared at once); otherwise it stays where it was.
    """
    keep = rules.keep_tool_results
    newest = {ex.result_seq for ex in pairs[-keep:]} if keep > 0 else set()
    eligible: list[int] = []
    tokens = 0
    for ex in pairs:
        seq = ex.result_seq
        assert seq is not None
        if seq <= previous or seq in newest or ex.tool in rules.protected_tools:
            continue
        if out_tokens[seq] > rules.tool_result_max_tokens:
            continue
        eligible.append(seq)
        tokens += out_tokens[seq]
    if eligible and tokens >= batch:
        return eligible[-1]
    return previous


def _orphan_omissions(inputs: ContextInputs) -> list[r.Omission]:
    """Results whose call fell out of the window: they cannot be shown as a pair."""
    return [
        r.Omission(
            section="history",
            ref=ledger_ref(ex.result_seq),
            reason=f"result of {ex.call_id} without its call",
        )
        for ex in inputs.tools
        if ex.intent is None and ex.result is not None and ex.result_seq is not None
    ]


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


def history_units(
    inputs: ContextInputs, count: Counter, rules: HistoryRules, *, cleared_through: int
) -> list[HistoryUnit]:
    """The recent windows as indivisible units in ledger order, tool results cleared.

    A result is cleared when it is over ``tool_result_max_tokens`` (its preview is kept),
    or when its seq is at or before ``cleared_through`` and its tool is not protected.
    Calls without a result are left to the current input's continuation context, and
    results without their call to :func:`_orphan_omissions`, so no call appears here
    without its result or vice versa.
    """
    units: list[HistoryUnit] = []
    current_seq = inputs.current_input.seq if inputs.current_input is not None else None
    preview_chars = rules.preview_chars

    for m in inputs.messages:
        if m.seq == current_seq:
            continue
        who = m.message.role + (f" {m.message.name}" if m.message.name else "")
        text, cleared = _capped("message", m.message.text, m.seq, count, rules)
        line = f"[{ledger_ref(m.seq)}] {who}: {text}"
        units.append(
            HistoryUnit(
                seq=m.seq,
                text=line,
                tokens=count(line),
                refs=(ledger_ref(m.seq),),
                cleared=cleared,
                turn=m.turn,
            )
        )
    for b in inputs.briefs:
        scope = f" ({b.brief.work_item_id})" if b.brief.work_item_id else ""
        # Capped like a message: the history is a contiguous run ending at its newest
        # unit, so one brief larger than the room (a pasted report) left out all of it.
        text, cut = _capped("brief", b.brief.text, b.seq, count, rules)
        line = f"[{ledger_ref(b.seq)}] brief {b.brief.status}{scope}: {text}"
        units.append(
            HistoryUnit(
                seq=b.seq, text=line, tokens=count(line), refs=(ledger_ref(b.seq),), cleared=cut, turn=b.turn
            )
        )

    cap = rules.tool_result_max_tokens
    for ex in _pairs(inputs):
        assert ex.intent is not None and ex.result is not None and ex.intent_seq is not None
        assert ex.result_seq is not None
        res = ex.result
        out_tokens = count(res.output)
        args = msgspec.json.encode(ex.intent.args, order="sorted").decode()
        omissions: list[r.Omission] = []
        if count(args) > rules.message_max_tokens:
            ref = ledger_ref(ex.intent_seq)
            args = args[: preview_chars * 2] + f"… [arguments truncated — restore with ref {ref}]"
            omissions.append(
                r.Omission(section="history", ref=ref, reason=f"arguments of {ex.call_id} over the cap")
            )
        call = call_line(ex.intent_seq, ex.intent, args)
        ref = _result_ref(ex)
        size = _output_size(res)
        over_cap = out_tokens > cap
        if over_cap or (ex.result_seq <= cleared_through and ex.tool not in rules.protected_tools):
            reason = "over the size cap" if over_cap else "older than the newest results"
            body = (
                f"[tool result cleared: {ex.tool} call {ex.call_id}, {size:,} bytes — restore with ref {ref}]"
            )
            if over_cap and preview_chars:
                body = res.output[:preview_chars] + "\n" + body
            omissions.append(
                r.Omission(section="history", ref=ref, reason=f"tool result {reason}", tokens=out_tokens)
            )
        elif res.blob is not None:
            # At most ``preview_chars`` of it, as for a cleared result: a preview of 0 shows
            # none (the blob's stored preview was shown whatever the setting).
            preview = (res.output or res.blob.preview)[:preview_chars]
            body = (preview + "\n" if preview else "") + (
                f"[output stored as blob, {size:,} bytes — restore with ref {ref}]"
            )
            # Only its preview is in the prompt; the output itself was never loaded, so
            # its tokens are not counted.
            omissions.append(
                r.Omission(section="history", ref=ref, reason="tool result stored as a blob (preview shown)")
            )
        else:
            body = res.output
        head = f"{call}\n{result_head(ex.result_seq, res)}"
        # Counted in parts (an upper bound: joining adds at most one token per newline),
        # so a large output is scanned once, not once per enclosing text.
        body_tokens = out_tokens if body is res.output else count(body)
        units.append(
            HistoryUnit(
                seq=ex.intent_seq,
                text=f"{head}\n{body}",
                tokens=count(head) + body_tokens + 1,
                refs=(ledger_ref(ex.intent_seq), ledger_ref(ex.result_seq)),
                cleared=tuple(omissions),
                turn=ex.turn,
                whole_from=len(head),
            )
        )
    units.sort(key=lambda u: u.seq)
    return units


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
    its header). ``anchor`` is set when evidence older than the shown units exists (in
    the windows or already dropped from them): a placeholder line then says where it went.
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
        )
    work: Form | None = None
    if after:
        tokens = count(TURN_WORK_HEADER) + 1 + sum(u.tokens + 1 for u in after)
        kind = "truncated" if any(u.cleared for u in after) else "full"
        work = Form(kind=kind, text="\n".join([TURN_WORK_HEADER, *(u.text for u in after)]), tokens=tokens)
    omissions = [
        r.Omission(section="history", ref=ref, reason="before the history anchor", tokens=u.tokens)
        for u in units[:start]
        for ref in u.refs
    ]
    for u in shown:
        omissions.extend(u.cleared)
    return history, work, omissions


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


class _Layout:
    """The units under one clearing cut, and the tokens of the history from each start."""

    def __init__(self, inputs: ContextInputs, count: Counter, rules: HistoryRules, cut: int) -> None:
        self.cut = cut
        self.units = history_units(inputs, count, rules, cleared_through=cut)
        current = inputs.current_input
        # Units after the current input are the turn's own work, shown after the input.
        split = current.seq if current is not None and current.seq is not None else _NO_SPLIT
        self.turn_from = next((i for i, u in enumerate(self.units) if u.seq > split), len(self.units))
        self._floor = inputs.history_floor
        self._count = count
        # suffix[i]: tokens of units[i:] plus one per line break.
        self._suffix = [0] * (len(self.units) + 1)
        for i in range(len(self.units) - 1, -1, -1):
            self._suffix[i] = self._suffix[i + 1] + self.units[i].tokens + 1

    def replace_newest(self, unit: HistoryUnit) -> None:
        """Show ``unit`` in place of the newest unit (the same item, cut to fit)."""
        delta = unit.tokens - self.units[-1].tokens
        self.units[-1] = unit
        for i in range(len(self.units)):
            self._suffix[i] += delta

    def anchor_at(self, start: int, anchor: int) -> int | None:
        """The anchor a placeholder names when the history starts at ``start``, if any."""
        return anchor if start > 0 or self._floor > 0 else None

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

    def fill(self, target: int, oldest: int) -> int:
        """The earliest start (not before ``oldest``) whose history, newest units, fits ``target``.

        The placeholder names the start's own seq, so its tokens change with the start:
        the search runs on an estimate (the placeholder naming the newest unit) and is
        then corrected with exact counts, a step or two, not one count per unit.
        """
        units = self.units
        n = len(units)
        if n == 0:
            return 0
        fixed = self._count(HISTORY_HEADER) + 1
        if self._floor > 0 or n > 1:
            fixed += self._count(_placeholder(units[-1].seq)) + 1
        if self.turn_from < n:
            fixed += self._count(TURN_WORK_HEADER) + 1
        start = n
        while start > oldest and fixed + self._suffix[start - 1] <= target:
            start -= 1
        while start < n and self.tokens(start, units[start].seq) > target:
            start += 1
        while start > oldest and self.tokens(start - 1, units[start - 1].seq) <= target:
            start -= 1
        return start


def plan_history(
    inputs: ContextInputs, count: Counter, rules: HistoryRules, *, allowance: int
) -> HistoryPlan:
    """The history section within ``allowance`` tokens, keeping the previous anchor if it can."""
    previous = inputs.previous.history if inputs.previous is not None else None
    cut = previous.cleared_through if previous is not None else -1
    kept = previous.from_seq if previous is not None and previous.from_seq >= inputs.history_floor else None
    pairs = _pairs(inputs)
    out_tokens: dict[int, int] = {}
    for ex in pairs:
        assert ex.result is not None and ex.result_seq is not None
        out_tokens[ex.result_seq] = count(ex.result.output)
    dropped = _orphan_omissions(inputs)

    layout: _Layout | None = None
    if kept is not None:
        step = clearing_cut(pairs, out_tokens, previous=cut, rules=rules, batch=rules.clear_batch_tokens)
        layout = _Layout(inputs, count, rules, step)
        start = _start_of(layout.units, kept)
        if layout.tokens(start, kept) <= allowance:
            return _plan(layout, start, kept, count, dropped)

    # A re-layout: clear every result that may be cleared; keep the anchor if that is enough.
    full = clearing_cut(pairs, out_tokens, previous=cut, rules=rules, batch=0)
    if layout is None or full != layout.cut:
        layout = _Layout(inputs, count, rules, full)
        if kept is not None:
            start = _start_of(layout.units, kept)
            if layout.tokens(start, kept) <= allowance:
                return _plan(layout, start, kept, count, dropped)
    units = layout.units
    # Start again at the newest units that fill the refill share of the room (or, if not
    # even one does, the whole room), inside the newer half of any window that has
    # started dropping entries.
    oldest = _start_of(units, inputs.history_slack)
    for target in (int(allowance * rules.history_refill), allowance):
        start = layout.fill(target, oldest)
        if start < len(units):
            return _plan(layout, start, units[start].seq, count, dropped)
    if units and oldest < len(units):
        # Not even the newest unit fits the whole room (the caps are absolute tokens, and
        # a unit under them, or one whose parts are not capped, can be larger than the
        # room): show it cut to fit, rather than no history at all.
        newest = units[-1]
        overhead = layout.tokens(len(units) - 1, newest.seq) - newest.tokens
        fitted = _cut_to_fit(newest, allowance - overhead, count)
        if fitted is not None:
            layout.replace_newest(fitted)
            return _plan(layout, len(units) - 1, newest.seq, count, dropped)
    omissions = [
        r.Omission(section="history", ref=ref, reason="history over budget", tokens=u.tokens)
        for u in units
        for ref in u.refs
    ]
    return HistoryPlan(form=None, omissions=(*dropped, *omissions), anchor=None)


#: A unit cut to fit is searched for within this many characters per token of its room:
#: a token is rarely longer (a run of blank lines is), and the search stays cheap for a
#: unit of megabytes.
_CUT_CHARS_PER_TOKEN: Final = 32

#: A placeholder a unit shows for what it left out (``[tool result cleared: … — restore
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
    cut = tuple(
        r.Omission(
            section="history", ref=ref, reason="history item cut to fit the room", tokens=unit.tokens - tokens
        )
        for ref in unit.refs
    )
    return msgspec.structs.replace(unit, text=shown, tokens=tokens, cleared=(*unit.cleared, *cut))


def _plan(
    layout: _Layout, start: int, anchor: int, count: Counter, dropped: Sequence[r.Omission]
) -> HistoryPlan:
    recorded = r.HistoryAnchor(from_seq=anchor, cleared_through=layout.cut)
    if start >= len(layout.units):
        # Nothing at or after the anchor yet: keep it, show nothing.
        return HistoryPlan(form=None, omissions=tuple(dropped), anchor=recorded)
    form, work, omissions = _render_units(
        layout.units, start, count, anchor=layout.anchor_at(start, anchor), turn_from=layout.turn_from
    )
    return HistoryPlan(form=form, omissions=(*dropped, *omissions), anchor=recorded, turn_work=work)
