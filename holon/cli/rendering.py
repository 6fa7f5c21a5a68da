"""What the model saw: ``holon render``, ``holon explain`` and ``holon prompts``."""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click
import msgspec

from holon.cli.failures import CheckFailed, _Failure
from holon.cli.group import _MAX_TOKENS, F, _common, _given
from holon.cli.ledgers import _passes, _reading, _records_upto
from holon.cli.printing import _count, _echo, _echo_json, _echo_json_list, _n, _report, _table, _write_bytes
from holon.context import DEFAULT_BUDGET, available_estimators
from holon.errors import BudgetExceeded
from holon.progress import progress_items, stderr_is_terminal

if TYPE_CHECKING:
    import holon.records as r
    from holon.context import AssemblyPlan
    from holon.replay import PromptAt, PromptCheck, PromptsSummary


def _render_options(func: F) -> F:
    """Options choosing which prompt to render and with which budget/config."""
    options = [
        click.option(
            "--at-turn",
            type=int,
            metavar="N",
            help="The prompt of turn N (default: the prompt for the next model call).",
        ),
        click.option(
            "--call",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            metavar="K",
            help="With --at-turn: which model call of the turn, when it recorded several prompts.",
        ),
        click.option(
            "--budget",
            "window",
            type=click.IntRange(min=1, max=_MAX_TOKENS),
            metavar="TOKENS",
            help="Context window to render into (default: the newest recorded one, else "
            f"{DEFAULT_BUDGET.context_window:,}). Overrides skip the hash check.",
        ),
        click.option(
            "--output-reserve",
            "reserve",
            type=click.IntRange(min=0, max=_MAX_TOKENS),
            metavar="TOKENS",
            help="Tokens kept free for the answer (default: the newest recorded one, else "
            f"{DEFAULT_BUDGET.output_reserve:,}).",
        ),
        click.option(
            "--cache-key", metavar="KEY", help="Prompt cache key to render with (default: the recorded one)."
        ),
        click.option(
            "--estimator",
            type=click.Choice(available_estimators()),
            help="Token estimator to render with (default: the recorded one).",
        ),
        click.option(
            "--no-check",
            is_flag=True,
            help="Render even when a recorded prompt cannot be reproduced; skip the hash check.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _resolve_prompt(
    *,
    path: Path,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
    input_text: str | None = None,
) -> PromptAt:
    """Render the requested prompt and enforce the recorded-hash check."""
    from holon.replay import RenderOverrides, next_prompt_of, prompt_of

    if at_turn is None and _given("call"):
        raise click.UsageError("--call applies to --at-turn only: the next model call is a single prompt")
    overrides = RenderOverrides(
        context_window=window, output_reserve=reserve, prompt_cache_key=cache_key, estimator=estimator
    )
    try:
        with _reading(path) as ledger:
            read, resume = _passes(ledger)
            agent = ledger.agent_id
            if at_turn is None:
                return next_prompt_of(
                    read,
                    agent_id=agent,
                    overrides=overrides,
                    resume=resume,
                    blobs=ledger.get_blob,
                    older=_records_upto(ledger),
                    input=input_text,
                )
            found = prompt_of(
                read,
                at_turn,
                agent_id=agent,
                call=call,
                overrides=overrides,
                blobs=ledger.get_blob,
                older=_records_upto(ledger),
            )
    except BudgetExceeded as exc:
        # The library says "context window" and "output reserve"; name this command's options.
        raise _Failure(
            f"{exc} (--budget sets the context window, --output-reserve the reserve)",
            error_type=type(exc).__name__,
        ) from None
    if found.recorded is None or no_check:
        return found
    if not found.reproducible and overrides.empty:
        raise CheckFailed(
            f"the prompt recorded at seq {found.recorded_seq} (turn {at_turn}) cannot be reproduced: it has "
            f"no render_config, so it was not rendered by holon.context (estimator "
            f"{found.recorded.estimator!r}); pass --no-check or --budget to render the ledger at that point"
        )
    if found.checked and not found.matches:
        reasons = found.mismatch_reasons()
        why = f" ({'; '.join(reasons)})" if reasons else ""
        raise CheckFailed(
            f"turn {at_turn} call {call}: re-rendering the ledger up to seq {found.recorded_seq} gives "
            f"prompt_hash {found.prompt.prompt_hash[:16]}…, but the record says "
            f"{found.recorded.prompt_hash[:16]}…{why}; pass --no-check to see the re-rendered prompt"
        )
    return found


def _prompt_header(found: PromptAt) -> str:
    where = "the next model call" if found.turn is None and found.recorded is None else f"turn {found.turn}"
    if found.recorded is None:
        rendered = f"seq 0..{found.before_seq - 1}" if found.before_seq > 0 else "an empty ledger"
        return f"prompt for {where}, rendered from {rendered}"
    status = (
        "reproduced byte for byte (prompt_hash matches)"
        if found.matches
        else "not checked against the record"
    )
    return f"prompt of {where}, recorded at seq {found.recorded_seq}: {status}"


# --------------------------------------------------------------------------- render / explain


_FORMATS: Final = ("text", "json", "anthropic", "openai", "openai-responses")
#: The model a provider request body names when --model is not given: current ones that
#: the providers' SDKs (anthropic 2.14, openai 3.57) do not list as deprecated.
_ANTHROPIC_MODEL: Final = "claude-sonnet-5-5"
_OPENAI_MODEL: Final = "gpt-5.5"


@click.command()
@_common
@_render_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_FORMATS),
    default="text",
    show_default=True,
    help="text: the exact prompt bytes; json: sections, cache identity and plan (what --json prints "
    "unless a provider format is chosen); anthropic / openai / openai-responses: the provider request body.",
)
@click.option(
    "--model",
    metavar="NAME",
    help=f"Model name for provider formats (default {_ANTHROPIC_MODEL} / {_OPENAI_MODEL}).",
)
@click.option(
    "--input",
    "input_text",
    metavar="TEXT",
    help="Render the first prompt of a new turn whose input is TEXT (a user message), without "
    "appending anything: what the next turn's model call would see for it.",
)
def render(
    *,
    path: Path,
    as_json: bool,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
    fmt: str,
    model: str | None,
    input_text: str | None,
) -> None:
    """Print the prompt the model saw at a past turn, or the one for the next call.

    With --at-turn N, the ledger is folded up to turn N's recorded prompt (its
    prompt_rendered record) and rendered again with the recorded budget and render
    config; the result must hash to the recorded prompt_hash, or the command exits 1.
    A turn without a recorded prompt is rendered as its first model call would see it.
    Without --at-turn, the prompt for the next model call is rendered from the whole
    ledger (with the newest recorded config, or --budget etc.).

    With --input TEXT, the prompt of a new turn's first model call for that input, as
    holon.Agent.preview renders it: the turn is folded after the ledger, never written
    (the ledger is opened read-only), and its records take the last record's timestamp.

    --format text writes exactly the prompt's bytes to a pipe or file, so `holon render
    L --at-turn 4 | b3sum` gives the recorded hash; on a terminal, control characters
    are shown as escapes (\\x1b) and a newline is added.

    Example: holon render runs/agent-7 --at-turn 12 --format anthropic
    """
    if model is not None and fmt in ("text", "json"):
        # Checked before the ledger is read: a text or json prompt names no model.
        raise click.UsageError(
            "--model applies to the provider formats only (--format anthropic, openai or openai-responses)"
        )
    if input_text is not None and at_turn is not None:
        raise click.UsageError(
            "--input renders a new turn after the ledger's last; it cannot be given with --at-turn"
        )
    found = _resolve_prompt(
        path=path,
        at_turn=at_turn,
        call=call,
        window=window,
        reserve=reserve,
        cache_key=cache_key,
        estimator=estimator,
        no_check=no_check,
        input_text=input_text,
    )
    if as_json and fmt == "text":
        fmt = "json"  # the provider formats are JSON already: --json keeps them
    if fmt == "text":
        # As bytes: click strips ANSI escapes from text written to a pipe or file, and a
        # tool output's colours are part of the prompt (and of its prompt_hash).
        _write_bytes(found.prompt.text.encode(), newline=True)
        if stderr_is_terminal():
            _echo(f"holon: {_prompt_header(found)}", err=True)
        return
    _echo_json(_prompt_document(found, fmt, model))


def _prompt_document(found: PromptAt, fmt: str, model: str | None) -> Any:
    """What `holon render` prints for a JSON ``fmt``: the prompt and its check, or a provider's request."""
    from holon.context import to_anthropic_messages, to_openai_chat, to_openai_responses

    prompt = found.prompt
    reserve_used = int(prompt.render_config.get("budget", {}).get("output_reserve") or 0)
    max_tokens = reserve_used if reserve_used > 0 else 4096
    if fmt == "json":
        return {
            "turn": found.turn,
            "rendered_before_seq": found.before_seq,
            "recorded_seq": found.recorded_seq,
            "checked": found.checked,
            "matches": found.matches,
            "prompt_hash": prompt.prompt_hash,
            "recorded_prompt_hash": found.recorded.prompt_hash if found.recorded else None,
            "cache_key": prompt.cache_key,
            "prompt": prompt,
        }
    if fmt == "anthropic":
        return to_anthropic_messages(prompt, model=model or _ANTHROPIC_MODEL, max_tokens=max_tokens)
    if fmt == "openai":
        return to_openai_chat(prompt, model=model or _OPENAI_MODEL)
    return to_openai_responses(prompt, model=model or _OPENAI_MODEL)


class _SectionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One section of an assembly plan, as `holon explain` shows it."""

    section: str
    stability: str
    priority: int | None
    tokens: int
    form: str
    status: str
    cache_breakpoint: bool
    why: str


#: Distinct omission reasons `holon explain` shows in a section's "why" cell.
_WHY_REASONS: Final = 3
_STATUS: Final = {"full": "kept", "compact": "compacted", "truncated": "truncated", "omitted": "omitted"}


@click.command()
@_common
@_render_options
def explain(
    *,
    path: Path,
    as_json: bool,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
) -> None:
    """Show how a prompt was assembled: each section's tokens and form, and what was left out.

    The prompt is chosen and checked exactly as in `holon render`. For each section:
    stability class, priority, tokens and whether it was kept, compacted, truncated or
    omitted, and why; then every omitted or shortened item with the ref that restores
    it (`holon get PATH REF`).

    Example: holon explain runs/agent-7 --at-turn 12
    """
    found = _resolve_prompt(
        path=path,
        at_turn=at_turn,
        call=call,
        window=window,
        reserve=reserve,
        cache_key=cache_key,
        estimator=estimator,
        no_check=no_check,
    )
    rows = _section_rows(found)
    if as_json:
        _echo_json(_explain_json(found, rows))
        return
    for line in (*_explain_lines(found, rows), *_omitted_lines(found.prompt.plan)):
        _echo(line)


def _section_rows(found: PromptAt) -> list[_SectionRow]:
    """Each section of the prompt's plan as `holon explain` shows it, with why it was shortened."""
    from holon.context import SECTION_PRIORITY

    prompt = found.prompt
    plan = prompt.plan
    reasons: dict[str, list[str]] = {}
    for o in plan.omitted:
        bucket = reasons.setdefault(o.section, [])
        if o.reason not in bucket:
            bucket.append(o.reason)
    rendered = {s.name: s for s in prompt.sections}
    rows: list[_SectionRow] = []
    for s in plan.sections:
        section = rendered.get(s.section)
        named = reasons.get(s.section, [])
        # Some reasons name their item (an episode, a decision, a call's arguments): a section
        # that left out dozens made one table cell of them all; the list below has each one.
        why = "; ".join(named[:_WHY_REASONS])
        if len(named) > _WHY_REASONS:
            why += f"; +{len(named) - _WHY_REASONS} more (listed below)"
        if not why and s.form != "full":
            why = "did not fit the budget in full"
        if s.section == "pending_delta" and found.delta_confirmed and s.form != "omitted":
            confirmed = (
                f"already confirmed: revision {prompt.identity.working_memory_revision}'s delta shown "
                "again in the same bytes, unpinned, so the cached prefix holds"
            )
            why = f"{confirmed}; {why}" if why else confirmed
        rows.append(
            _SectionRow(
                section=s.section,
                stability=section.stability if section else "-",
                priority=SECTION_PRIORITY.get(s.section),
                tokens=s.tokens,
                form=s.form,
                status=_STATUS[s.form],
                cache_breakpoint=bool(section and section.breakpoint),
                why=why,
            )
        )
    return rows


def _explain_json(found: PromptAt, rows: Sequence[_SectionRow]) -> dict[str, Any]:
    """What `holon explain --json` prints: the prompt's identity, its plan and its sections."""
    prompt = found.prompt
    plan = prompt.plan
    return {
        "turn": found.turn,
        "recorded_seq": found.recorded_seq,
        "checked": found.checked,
        "matches": found.matches,
        "cache_key": prompt.cache_key,
        "working_memory_revision": prompt.identity.working_memory_revision,
        "compression_epoch": prompt.identity.compression_epoch,
        "budget": plan.budget,
        "available": plan.available,
        "total_tokens": plan.total_tokens,
        "degraded": plan.degraded,
        "episodes": plan.episodes,
        "recalled": plan.recalled,
        "sections": rows,
        "omitted": plan.omitted,
        "evicted_refs": plan.evicted_refs,
    }


def _explain_lines(found: PromptAt, rows: Sequence[_SectionRow]) -> list[str]:
    """The text of `holon explain` down to its section table: the prompt, its budget and identity."""
    prompt = found.prompt
    plan = prompt.plan
    lines = [
        _prompt_header(found),
        f"budget {_n(plan.budget)} - output reserve {_n(plan.budget - plan.available)} "
        f"= {_n(plan.available)} "
        f"available · used {_n(plan.total_tokens)} · estimator {prompt.estimator}"
        + (" · DEGRADED (prefix planned jointly with the turn)" if plan.degraded else ""),
        f"cache key {prompt.cache_key} (revision {prompt.identity.working_memory_revision}, "
        f"epoch {prompt.identity.compression_epoch})",
        f"episodes selected: {', '.join(f'episode:{e}' for e in plan.episodes) or 'none'}",
        # The records the recalled section brought back for this input (holon.context.recall).
        f"recalled: {', '.join(plan.recalled) or 'none'}",
        "",
    ]
    lines += _table(
        ["section", "stability", "priority", "tokens", "status", "why"],
        [
            [
                row.section + (" ◆" if row.cache_breakpoint else ""),
                row.stability,
                row.priority if row.priority is not None else "-",
                _n(row.tokens),
                row.status,
                row.why or "-",
            ]
            for row in rows
        ],
        right=(2, 3),
    )
    return [*lines, "(◆ = cache breakpoint: the prefix up to here is what a provider caches)", ""]


def _omitted_lines(plan: AssemblyPlan) -> list[str]:
    """The end of `holon explain`'s text: every item left out or shortened, and its ref."""
    if not plan.omitted:
        return ["nothing was omitted or shortened"]
    lines = [f"omitted or shortened ({len(plan.omitted)}); restore any with `holon get PATH REF`:"]
    # Identical rows are one row with a count: results with the same output share one blob
    # (`ls` run twice), and two rows alike read as a mistake. --json keeps every omission.
    same = Counter((o.section, o.ref, o.tokens, o.reason) for o in plan.omitted)
    table = _table(
        ["section", "ref", "tokens", "reason"],
        [
            [section, ref, _n(tokens), reason if n == 1 else f"{reason} ({n} items share this ref)"]
            for (section, ref, tokens, reason), n in same.items()
        ],
        right=(2,),
    )
    return [*lines, *("  " + line for line in table)]


# --------------------------------------------------------------------------- prompts

#: How many prompts that differ `holon prompts` names without --each.
_PROMPTS_NAMED: Final = 20

_STATUS_TEXT: Final = {
    "reproduced": "reproduced",
    "differs": "DIFFERS",
    "not_comparable": "not comparable",
    "unconfigured": "no render config",
}


@click.command()
@_common
@click.option("--from-turn", type=int, metavar="N", help="Check the prompts of turn N and later only.")
@click.option("--until-turn", type=int, metavar="N", help="Check the prompts up to turn N only.")
@click.option("--each", is_flag=True, help="List every prompt, not only those that do not reproduce.")
@click.option("--check", is_flag=True, help="Exit 1 when a prompt does not reproduce.")
def prompts(
    *, path: Path, as_json: bool, from_turn: int | None, until_turn: int | None, each: bool, check: bool
) -> None:
    """Render every recorded prompt again: does it reproduce, and where did its cached prefix break?

    Each prompt_rendered record is rendered from the records before it with the budget and
    config it records, as `holon render --at-turn` renders one, and its hash compared. A
    prompt recorded by another renderer or estimator version is "not comparable", not a
    failure; one recorded without a render config cannot be rendered again.

    Each prompt is also compared with the previous one: the whole lines they share (at most
    what a provider's cache can serve) and the section where they first differ. The table
    sums the tokens not shared by that section, at a turn's first prompt and later in it;
    "(appended)" is a prompt that only added to the previous one.

    --from-turn and --until-turn must select some of the ledger's turns: a range past its
    last turn or before its first is a usage error naming the turns it holds.

    Example: holon prompts runs/agent-7 --from-turn 100 --check
    """
    from holon.replay import PromptsSummary, check_prompts_of

    summary = PromptsSummary()
    named: list[PromptCheck] = []
    with _reading(path) as ledger:
        agent = ledger.agent_id
        count = ledger.head()[0] + 1
        # No bar while the prompts print to the same terminal: it would be drawn between them.
        passes = ("reading",) if each and not as_json and sys.stdout.isatty() else ("reading", "rendering")
        labels = iter(passes)

        def read() -> Iterator[r.Record]:
            label = next(labels, None)
            records = ledger.read(0, count)
            return records if label is None else progress_items(records, length=count, label=label)

        checks = check_prompts_of(
            read,
            agent_id=agent,
            from_turn=from_turn,
            until_turn=until_turn,
            blobs=ledger.get_blob,
            older=_records_upto(ledger),
        )

        def counted() -> Iterator[PromptCheck]:
            for item in checks:
                summary.add(item)
                if item.status == "differs" and len(named) < _PROMPTS_NAMED:
                    named.append(item)
                yield item

        with _report():
            if as_json:
                _echo_json_list({"agent_id": agent}, "prompts", counted(), lambda: {"summary": summary})
            else:
                for item in counted():
                    if each:
                        _echo(_prompt_line(item))
    if not as_json:
        ranged = from_turn is not None or until_turn is not None
        for line in _prompts_text(agent, summary, [] if each else named, listed=each, ranged=ranged):
            _echo(line)
    if check and summary.first_difference is not None:
        raise _not_reproduced(path, named[0])  # the differing prompts, first one first


def _not_reproduced(path: Path, first: PromptCheck) -> CheckFailed:
    """The failure of `holon prompts --check`: the first prompt that differs, and how to look at it."""
    # A prompt_rendered outside any turn (`holon append` takes one) has no --at-turn to
    # name: the hint was `--at-turn None`, which click refuses.
    where, hint = (
        (
            f"turn {first.turn}, call {first.call}",
            f"`holon explain {shlex.quote(str(path))} --at-turn "
            f"{first.turn} --call {first.call}` shows how it is rendered now",
        )
        if first.turn is not None
        else (
            "outside any turn",
            "it names no turn, so `holon render` and `holon explain` cannot select it",
        )
    )
    return CheckFailed(
        f"the prompt at seq {first.seq} ({where}) does not reproduce: "
        f"this holon renders {first.rendered_hash}, the ledger records {first.recorded_hash}, with the "
        f"same renderer and estimator versions; {hint}"
    )


def _prompt_line(item: PromptCheck) -> str:
    """One prompt of `holon prompts`: where it is, whether it reproduced, what it shared."""
    from holon.replay import APPENDED

    turn = f"turn {item.turn}" if item.turn is not None else "no turn"
    parts = [f"{turn} call {item.call}", f"seq {item.seq}", _STATUS_TEXT[item.status]]
    if item.tokens is not None:
        parts.insert(2, f"{item.tokens:,} tokens")
    if item.shared is not None and item.breaks_at is not None:
        changed = f" ({', '.join(item.changed)})" if item.changed else ""
        where = "only added to the previous" if item.breaks_at == APPENDED else f"breaks at {item.breaks_at}"
        parts.append(f"shares {item.shared:,} · {where}{changed}")
    line = " · ".join(parts)
    return f"{line}: {'; '.join(item.reasons)}" if item.reasons and item.status != "differs" else line


def _prompts_text(
    agent: str, summary: PromptsSummary, named: Sequence[PromptCheck], *, listed: bool, ranged: bool
) -> list[str]:
    """The summary of `holon prompts`: statuses, the shared share and the table of breaks."""
    statuses = " · ".join(
        f"{_STATUS_TEXT[status]} {summary.by_status.get(status, 0):,}" for status in _STATUS_TEXT
    )
    # After a list of every prompt, a blank line first.
    lines = [""] if listed else []
    lines.append(f"agent {agent} · {_count(summary.prompts, 'recorded prompt')} rendered again")
    if not summary.prompts:
        where = "the turns asked for" if ranged else "this ledger"
        return [*lines, f"nothing to check: no prompt_rendered record in {where}"]
    lines.append(statuses)
    lines += [
        f"  {_count(n, 'prompt')}: {reason}"
        for reason, n in sorted(summary.reasons.items(), key=lambda x: (-x[1], x[0]))
    ]
    share = summary.shared_share
    if share is None:
        return lines
    lines.append(
        f"shared with the previous prompt: {share:.1%} of {summary.compared_tokens:,} tokens "
        f"({_count(summary.compared, 'prompt')} compared)"
    )
    total = summary.compared_tokens

    def cell(tokens: int) -> str:
        return f"{tokens / total:.1%}" if tokens else "-"

    rows = sorted(summary.unshared.items(), key=lambda item: (-sum(item[1]), item[0]))
    lines += ["", "tokens not shared, by the section where a prompt first differs from the previous one:"]
    lines += [
        "  " + line
        for line in _table(
            ["section", "turn start", "later in turn", "all"],
            [[name, cell(first), cell(later), cell(first + later)] for name, (first, later) in rows],
            right=(1, 2, 3),
        )
    ]
    if named:
        lines += [
            "",
            "prompts that differ from what the ledger records (same renderer and estimator versions):",
        ]
        lines += [f"  {_prompt_line(item)}" for item in named]
        more = summary.by_status.get("differs", 0) - len(named)
        if more > 0:
            lines.append(f"  … and {more:,} more (--each lists every prompt)")
    return lines
