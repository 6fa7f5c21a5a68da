"""docs/evaluation.md, written from the measured runs (never edited by hand)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.eval.metrics import PolicyRun
from benchmarks.eval.report import Verdict, breaks_table, ceiling_table, evidence_table, markdown_tables

__all__ = ["write_doc"]

_TEMPLATE = Path(__file__).with_name("template.md")
_ANALYSIS = Path(__file__).with_name("analysis.md")


def write_doc(
    path: Path,
    *,
    generated: Sequence[PolicyRun],
    samples: Sequence[PolicyRun],
    sample_note: str,
    checks: Sequence[Verdict],
    digest: str,
    chart: str,
    elapsed: float,
    command: str,
) -> None:
    """Write the evaluation page from the runs; ``command`` is the harness's usage line."""
    minutes = f"{elapsed / 60:.1f} min"
    template = _TEMPLATE.read_text(encoding="utf-8")
    parts = [template.format(minutes=minutes, digest=digest, sample_note=sample_note, command=command)]
    parts.append("## Targets\n")
    parts.append("Checked on the generated scenarios, from the figures below:\n")
    for check in checks:
        parts.append(f"- **{'met' if check.met else 'missed'}** — {check.target}: {check.detail}")
    parts.append("\n## Results: generated scenarios\n")
    parts.append(f"![tokens per call and cached share over the run, {chart}](evaluation.svg)\n")
    parts.append(markdown_tables(generated, facts=True))
    evidence = evidence_table(generated)
    if evidence:
        parts.append("\n\n## Answer evidence in the prompt\n")
        parts.append(
            "For each run with questions (`conversation-sessions`): at each call that answers a closing "
            "question, whether the early detail that answers it is in the prompt — the share of those "
            "calls, policy by policy at the same budget (found / asked).\n"
        )
        parts.append(evidence)
    parts.append("\n\n## Results: real transcripts\n")
    parts.append(markdown_tables(samples, facts=False) if samples else f"\n{sample_note}\n")
    parts.append("\n\n## Where holon's cacheable prefix breaks\n")
    parts.append(
        "For each holon run, split into each turn's first call and the turn's later calls: the "
        "section in which a call's prompt first differs from the previous call's, as the share of "
        "those calls / the prompt tokens from that point on as a share of *all* the run's prompt "
        "tokens (what a cache of the previous call cannot serve; `all` adds them up). `rounds`: "
        "the call only appended the turn's new rounds to the previous call's prompt — what follows "
        "is new content (a tool's output, the model's own message), which no cache can serve.\n"
    )
    parts.append(breaks_table(generated))
    ceilings = ceiling_table(generated)
    if ceilings:
        parts.append("\n\n## The cached share's ceiling at each budget\n")
        parts.append(
            "A layout whose history is a suffix of the run (every policy here, holon's two layouts "
            "included) sends each call's new evidence once, uncached, and when its history no "
            "longer fits sends everything after its head again. The *ceiling* is the cached share "
            "(prefix blocks) of the best such layout with holon's own head — the sections before "
            "its history, taken as always cached — at the same budget, with nothing after the "
            "history, over the share of the history's room a move keeps (0-90%; keeping nothing "
            "wins at these budgets: it puts the next move furthest away). See "
            "`benchmarks.eval.metrics.suffix_ceiling`. It forgets more than any policy here may, "
            "and still caches less than 90% where a call's new evidence is a large part of the "
            "window: a move then comes every few calls whatever the layout does.\n"
        )
        parts.append(ceilings)
    parts.append("\n" + _ANALYSIS.read_text(encoding="utf-8").format(digest=digest))
    path.write_text("\n".join(parts).rstrip() + "\n", encoding="utf-8")
