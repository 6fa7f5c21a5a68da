"""The TurnScoped sections of what was asked: the operator's requests of the session (the
mandate) and this turn's input with its continuation context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Candidate, Form
from holon.context.inputs import ContextInputs
from holon.context.refs import ledger_ref
from holon.context.sections.bounds import (
    PINNED_CALLS,
    PINNED_ID_CHARS,
    PINNED_TEXT_CHARS,
    bound_text,
    cite,
    clipped_line,
    ref_list,
    shrunk,
)
from holon.context.sections.layout import Counter, section_candidate, section_form
from holon.projections import ToolExecution
from holon.projections.state import RequestEntry

__all__ = [
    "MANDATE_HEADER",
    "MANDATE_HEADER_BEFORE_HISTORY",
    "current_input_candidate",
    "mandate_candidate",
]


def _unknown_call(ex: ToolExecution, count: Counter, *, bounded: bool) -> tuple[str, list[r.Omission]]:
    """The line of a tool call whose outcome is unknown, and what it clipped; ``bounded``,
    its id, tool and arguments to the pinned minimum's bounds."""
    assert ex.intent is not None
    clipped: list[r.Omission] = []
    encoded = msgspec.json.encode(ex.intent.args, order="sorted").decode()
    args, cut = clipped_line(encoded, 160)
    call_id, tool, named_cut = ex.call_id, ex.tool, False
    if bounded and ex.intent_seq is not None:
        # Arguments of emoji clipped to 160 characters still took over 400 tokens.
        args, cut = bound_text(encoded, 160, count)
        call_id, id_cut = bound_text(ex.call_id, PINNED_ID_CHARS, count)
        tool, tool_cut = bound_text(ex.tool, PINNED_ID_CHARS, count)
        named_cut = id_cut or tool_cut
    line = (
        f"- tool call {call_id} ({tool} {args}) was started {cite(ex.intent_seq)} "
        "and its outcome is unknown: check its effects before retrying"
    )
    if cut and ex.intent_seq is not None:
        clipped.append(
            r.Omission(
                section="current_input",
                ref=ledger_ref(ex.intent_seq),
                reason=f"arguments of {call_id} clipped",
                tokens=max(0, count(encoded) - count(args)),
            )
        )
    if named_cut and ex.intent_seq is not None:
        full = f"{ex.call_id} ({ex.tool}"
        clipped.append(
            shrunk(
                "current_input",
                ledger_ref(ex.intent_seq),
                f"id or tool of {call_id} clipped",
                [full],
                [f"{call_id} ({tool}"],
                count=count,
            )
        )
    return line, clipped


def _unknown_calls(
    inputs: ContextInputs, count: Counter, *, bounded: bool
) -> tuple[list[str], list[r.Omission]]:
    """The tool calls whose outcome is unknown, one line each; ``bounded``, the newest
    :data:`PINNED_CALLS` of them and a line naming the rest."""
    unknown_calls = [
        ex
        for ex in inputs.tools
        # No result yet, or the runtime recorded on resume that the outcome was lost in a
        # crash (status "unknown"): either way the model must check before retrying.
        if (ex.result is None or ex.result.status == "unknown") and ex.intent is not None
    ]
    hidden_calls: list[ToolExecution] = []
    if bounded and len(unknown_calls) > PINNED_CALLS:
        # The newest ones: a crash leaves the last calls open.
        hidden_calls = [ex for ex in unknown_calls[:-PINNED_CALLS] if ex.intent_seq is not None]
        unknown_calls = [ex for ex in unknown_calls if ex not in hidden_calls]
    lines: list[str] = []
    clipped: list[r.Omission] = []
    for ex in unknown_calls:
        line, cut = _unknown_call(ex, count, bounded=bounded)
        lines.append(line)
        clipped.extend(cut)
    if hidden_calls:
        call_refs = [ledger_ref(ex.intent_seq) for ex in hidden_calls if ex.intent_seq is not None]
        lines.append(
            f"- +{len(hidden_calls)} earlier tool calls whose outcome is unknown are not shown: check their "
            f"effects before retrying them — restore with ref {ref_list(call_refs)}"
        )
        clipped.extend(
            r.Omission(section="current_input", ref=ref, reason="unknown-outcome call not shown")
            for ref in call_refs
        )
    return lines, clipped


def _resolved_waits(
    inputs: ContextInputs, count: Counter, *, bounded: bool
) -> tuple[list[str], list[r.Omission]]:
    """The waits resolved since working memory was derived, one line each citing the
    resolution; ``bounded``, each text clipped (the line then cites the wait too)."""
    lines: list[str] = []
    clipped: list[r.Omission] = []
    for wait in inputs.resolved_waits:
        ident, waiting_on, detail = wait.id, wait.waiting_on, wait.detail or ""
        refs = cite(wait.resolved_seq)
        if bounded and wait.resolved_seq is not None:
            ident, id_cut = bound_text(wait.id, PINNED_ID_CHARS, count)
            waiting_on, on_cut = bound_text(wait.waiting_on, PINNED_TEXT_CHARS, count)
            detail, detail_cut = bound_text(detail, PINNED_TEXT_CHARS, count)
            # What the wait was on is on its intent, how it ended on its resolution.
            for seq, cut, what in (
                (wait.seq, id_cut or on_cut, "wait"),
                (wait.resolved_seq, detail_cut, "resolution"),
            ):
                if cut:
                    full = f"{wait.id} ({wait.waiting_on}) {wait.detail}"
                    short = f"{ident} ({waiting_on}) {detail}"
                    reason = f"{what} of wait {ident} clipped"
                    clipped.append(
                        shrunk("current_input", ledger_ref(seq), reason, [full], [short], count=count)
                    )
            if id_cut or on_cut:
                refs = cite(wait.seq, wait.resolved_seq)
        lines.append(
            f"- wait {ident} ({waiting_on}) {wait.resolution}{f': {detail}' if detail else ''} {refs}"
        )
    return lines, clipped


def _continuation(
    inputs: ContextInputs, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """Continuation context (an interrupted turn, unknown-outcome calls, resolved waits) and
    what it clipped; ``bounded``, ids and texts are clipped too, each line citing its records."""
    continuation: list[str] = []
    if inputs.previous_outcome in ("interrupted", "failed"):
        # Without this line a turn that died would leave the next prompt unchanged: the
        # model could not tell that its last turn did not finish.
        how = {"interrupted": "was interrupted (the process stopped while it was open)"}.get(
            inputs.previous_outcome, "failed"
        )
        continuation.append(f"- the previous turn {how}: check what it left done before going on")
    calls, calls_clipped = _unknown_calls(inputs, count, bounded=bounded)
    waits, waits_clipped = _resolved_waits(inputs, count, bounded=bounded)
    continuation.extend([*calls, *waits])
    return (["continuation:", *continuation] if continuation else []), [*calls_clipped, *waits_clipped]


MANDATE_HEADER: Final = (
    "## Operator's requests (this session, oldest first; where a later request changes an "
    "earlier one, the later one holds)"
)
#: The header before a history: the requests it shows are not repeated here, and the model
#: must not read this section as all of them.
MANDATE_HEADER_BEFORE_HISTORY: Final = (
    "## Operator's requests (this session, oldest first — any later ones are in the history "
    "below, where they were sent; where a later request changes an earlier one, the later one holds)"
)
#: Newest requests the compact form keeps whole when they fit (besides the first).
_COMPACT_REQUESTS: Final = 3
#: What the compact form keeps of an older request, and the minimum of the first and newest.
_REQUEST_LINE_CHARS: Final = 400
_REQUEST_PREVIEW_CHARS: Final = 400
#: Tokens the compact form keeps back for the line that names the requests it leaves out.
_MANDATE_COUNT_LINE: Final = 48


def _asked(q: RequestEntry) -> str:
    return f" (asked {q.asked} times)" if q.asked > 1 else ""


def _request_whole(q: RequestEntry) -> str:
    rest = (
        f"\n[request continues: {q.chars - len(q.text):,} more chars — restore with ref {ledger_ref(q.seq)}]"
        if q.clipped
        else ""
    )
    return f"[{ledger_ref(q.seq)}] {q.text}{_asked(q)}{rest}"


def _request_short(q: RequestEntry, limit: int, count: Counter) -> tuple[str, r.Omission | None]:
    """A request clipped to ``limit`` characters (and a third as many tokens), naming its record."""
    shown, cut = bound_text(q.text, limit, count)
    if not cut and not q.clipped:
        return _request_whole(q), None
    ref = ledger_ref(q.seq)
    line = f"[{ref}] {shown}{_asked(q)} [request shortened: {q.chars:,} chars — restore with ref {ref}]"
    omission = shrunk("mandate", ledger_ref(q.seq), "request shortened", [q.text], [shown], count=count)
    return line, omission


def _requests_left_out(
    left: Sequence[RequestEntry], not_held: int, count: Counter
) -> tuple[list[str], list[r.Omission]]:
    """The line naming the requests a form leaves out, and their omissions."""
    if not left and not not_held:
        return [], []
    refs = [ledger_ref(q.seq) for q in left]
    where = f" — restore with ref {ref_list(refs)}" if refs else ""
    shown_not = len(left) + not_held
    line = f"(+{shown_not} more requests of this session not shown{where}; `holon search` finds them)"
    omissions = [
        r.Omission(section="mandate", ref=ref, reason="request not shown", tokens=count(_request_whole(q)))
        for q, ref in zip(left, refs, strict=True)
    ]
    return [line], omissions


class _Shown(msgspec.Struct, frozen=True, kw_only=True):
    """The requests the mandate section shows: the first, the later ones before the history
    (``rest``, oldest first), under ``header``, with the line for those not held (``gap``)."""

    header: str
    first: RequestEntry
    rest: list[RequestEntry]
    gap: list[str]


def _compact_requests(shown: _Shown, room_for: int, count: Counter) -> Form:
    """The first request (shortened past half of ``room_for``) and the newest later ones
    ``room_for`` holds, the rest counted in a line naming their refs."""
    header, first, rest = shown.header, shown.first, shown.rest
    cut_here: list[r.Omission] = []
    first_line = _request_whole(first)
    if count(first_line) > room_for // 2:
        first_line, cut = _request_short(first, _REQUEST_PREVIEW_CHARS * 4, count)
        cut_here.extend([cut] if cut is not None else [])
    room = room_for - count(header) - count(first_line) - _MANDATE_COUNT_LINE
    later_lines: list[str] = []
    kept = 0
    for age, q in enumerate(reversed(rest)):
        line, cut = (_request_whole(q), None) if age < _COMPACT_REQUESTS else (None, None)
        if line is None or count(line) > room:
            line, cut = _request_short(q, _REQUEST_LINE_CHARS, count)
        cost = count(line)
        if cost > room:
            break
        room -= cost
        later_lines.append(line)
        cut_here.extend([cut] if cut is not None else [])
        kept += 1
    left, left_cut = _requests_left_out(rest[: len(rest) - kept], 0, count)
    # Requests the projection no longer holds are older than every one held: the gap line
    # says so where they were, the left-out line counts the held ones the form leaves out.
    cut_here.extend(left_cut)
    return section_form(
        "compact", [header, first_line, *shown.gap, *left, *reversed(later_lines)], count, cut_here
    )


def _minimum_requests(shown: _Shown, not_held: int, count: Counter) -> Form:
    """The pinned minimum: the first and the newest request as previews, and one line naming
    the others' refs (``not_held``: how many the projection no longer holds)."""
    minimum = [shown.header]
    minimum_cut: list[r.Omission] = []
    for q in (shown.first, *shown.rest[-1:]):
        line, cut = _request_short(q, _REQUEST_PREVIEW_CHARS, count)
        minimum.append(line)
        minimum_cut.extend([cut] if cut is not None else [])
    more, more_cut = _requests_left_out(shown.rest[:-1], not_held, count)
    minimum.extend(more)
    minimum_cut.extend(more_cut)
    return section_form("truncated", minimum, count, minimum_cut)


def mandate_candidate(
    inputs: ContextInputs, count: Counter, *, sub_budget: int, before: int | None = None
) -> Candidate | None:
    """The operator's requests the history does not show, verbatim within ``sub_budget`` (pinned).

    The first request is the session's mandate and every later one may correct it or add a
    constraint: none of them may stop binding because the history moved on. Shown: the
    requests before seq ``before`` — where the history starts (``None``: no history, all
    of them); a request the history shows is read there, in its place, the first one
    too (``None`` when the history shows them all). The current input is shown as the
    input, not here. The section comes right before the history, so the requests read
    oldest first through to the newest, and it changes only when the history moves its
    start.

    Full: every such request the projection holds (it holds the first and the newest
    ``requests_window`` distinct ones), whole; compact: the first whole (a preview when it
    alone takes half the sub-budget), then as many of the others as the sub-budget holds,
    newest first — the newest three whole, older ones clipped to a line each — and one
    line naming the refs of the oldest it leaves out; truncated (the pinned minimum,
    bounded whatever the requests hold): the first and the newest as previews and one line
    naming the others' refs. Forms over the sub-budget are not offered, but the smallest
    always is.
    """
    mandate = inputs.mandate
    if mandate is None:
        return None
    current = inputs.current_input.seq if inputs.current_input is not None else None
    requests = [q for q in mandate.requests if q.seq != current]
    if not requests:
        return None
    first = requests[0]
    if before is not None and first.seq >= before:
        # The history shows every request, the first included, in its place: a copy here
        # would only change at each new session's first turns, re-sending all after it.
        return None
    rest = [q for q in requests[1:] if before is None or q.seq < before]
    header = MANDATE_HEADER if before is None else MANDATE_HEADER_BEFORE_HISTORY
    gap: list[str] = []
    if mandate.omitted:
        later = mandate.recent[0].seq
        gap = [
            f"(+{mandate.omitted} more requests between {ledger_ref(first.seq)} and {ledger_ref(later)} "
            "not held — find them with `holon search`)"
        ]
    full = [header, _request_whole(first), *gap, *(_request_whole(q) for q in rest)]
    shown = _Shown(header=header, first=first, rest=rest, gap=gap)
    # The sub-budget bounds the mandate; the minimum is bounded by construction. It is the
    # smallest form, whatever the sub-budget: short requests can make the compact form
    # smaller than the truncated one, and a minimum that changed with the room would make
    # BudgetExceeded's figure depend on the budget it was raised at. So the compact form
    # the minimum is chosen against is the one no sub-budget makes smaller (built for a
    # sub-budget of 0), not the sub-budget's own: that one grows with the room, and a
    # budget of exactly the minimum BudgetExceeded named raised again, a token short.
    # On a tie the fuller form: the whole requests, else the compact ones.
    whole = section_form("full", full, count)
    smallest = min(
        (whole, _compact_requests(shown, 0, count), _minimum_requests(shown, mandate.omitted, count)),
        key=lambda f: f.tokens,
    )
    offered: list[Form] = []
    # The fuller forms first, as far as the smallest.
    for f in (whole, _compact_requests(shown, sub_budget, count)):
        if f is smallest:
            break
        if f.tokens <= sub_budget and f.text != smallest.text:
            offered.append(f)
    offered.append(smallest)
    return section_candidate("mandate", offered)


def current_input_candidate(inputs: ContextInputs, count: Counter, *, max_tokens: int) -> Candidate:
    """This turn's input plus continuation context (unknown-outcome calls, resolved waits).

    The truncated form (the pinned minimum) keeps the input's head and tail when it is over
    ``max_tokens``, and the continuation context and trigger clipped like the other
    minimums' texts.
    """
    current = inputs.current_input
    trigger = current.trigger if current is not None else "continue"
    header = f"## Current input ({trigger})"
    header_min, header_cut = header, []
    if current is not None and current.trigger_seq is not None:
        shown, cut = bound_text(trigger, PINNED_ID_CHARS, count)
        if cut:
            header_min = f"## Current input ({shown} {cite(current.trigger_seq)})"
            ref = ledger_ref(current.trigger_seq)
            header_cut = [
                shrunk("current_input", ref, "trigger clipped", [header], [header_min], count=count)
            ]
    tail, clipped = _continuation(inputs, count)
    tail_min, clipped_min = _continuation(inputs, count, bounded=True)
    if current is not None:
        text = current.text
    elif inputs.active_work is not None or inputs.plan is not None:
        text = "(no new input: continue the active work)"
    else:
        # Nothing asked and nothing active: "continue the active work" pointed at nothing.
        text = "(no new input, and no work is active: report what was done, or wait for input)"
    forms = [section_form("full", [header, text, *tail], count, clipped)]
    body, body_cut = [text], []
    if current is not None and current.seq is not None and count(text) > max_tokens:
        ref = ledger_ref(current.seq)
        keep = max(200, max_tokens * 2)
        if 2 * keep >= len(text):
            # A dense text over the cap in fewer chars: head and tail must not overlap.
            keep = len(text) // 3
        head, middle, end = text[:keep], text[keep : len(text) - keep], text[len(text) - keep :]
        hidden = f"{len(middle):,} of {len(text):,} chars"
        note = f"[input truncated: {hidden} not shown — restore with ref {ref}]"
        omission = r.Omission(
            section="current_input", ref=ref, reason="current input over its cap", tokens=count(middle)
        )
        body, body_cut = [head, note, end], [omission]
    forms.append(
        section_form(
            "truncated", [header_min, *body, *tail_min], count, [*header_cut, *clipped_min, *body_cut]
        )
    )
    return section_candidate("current_input", forms)
