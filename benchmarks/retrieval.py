"""Retrieval benchmark: does memory search find the record a question needs, against plain BM25?

Run: ``python -m benchmarks.retrieval`` (also part of ``make bench``; a few seconds).

Generated, seeded ledgers, each with questions whose evidence records are known:

- ``conversation`` — the long multi-session conversations of
  :func:`benchmarks.eval.unstructured.generate_conversation`: the early sessions plant a
  personal detail in a user message ("my bike lock code is 3719"), the closing session asks
  about it ("What is my bike lock code?"). The evidence is the message that planted it; the
  index holds every record before the closing session.
- ``agent-runs`` — coding runs over several sessions (:func:`agent_run`): each session's
  operator request names a PR (``PR #412``, or its URL), a branch and a file; the agent
  restates its plan with a TodoWrite call and the plan it declares after every round (the
  PR and branch in its steps), runs tests (an error code in a failing run), reads and edits
  files. Questions: the PR as ``#412`` and as ``pull/412``, the branch, the edited path, the
  error code; the evidence is the request that named it, the edit's call and result, the
  failing runs. These are issue #30's cases: plan restatements crowding out the request,
  identifiers that must match as written.

For every question both rankers search the same records: holon's
:class:`holon.search.MemorySearch` (its analyzer, field weights, near-duplicate folding and
recency prior; a hit counts by its own ref, not the refs folded into it) and a plain Okapi
BM25 (k1 1.2, b 0.75; tokens are the runs of letters and digits, lowercased: split on
whitespace and punctuation; no stop words) over each record's searchable text
(:func:`holon.search.evidence_text`). Printed: recall@5 and recall@10 (the share of
questions with an evidence record among the first 5 / 10 hits) per family and in all, and
holon's over plain BM25's. Target: recall@5 at least 1.25x plain BM25's.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

import holon.records as r
from benchmarks.eval.scenario import Scenario
from benchmarks.eval.unstructured import generate_conversation
from holon.search import MemorySearch, evidence_text

SEEDS: Final = (1, 2, 3, 4, 5)
CONVERSATION_SESSIONS: Final = 24
RUN_SESSIONS: Final = 8
TARGET: Final = 1.25
_TOKEN: Final = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Question:
    """A query and the seqs of the records that answer it."""

    family: str
    kind: str
    query: str
    evidence: frozenset[int]


@dataclass(frozen=True)
class Corpus:
    """Records (seq = position) and the questions asked of them."""

    records: tuple[r.Record, ...]
    questions: tuple[Question, ...]


def _numbered(records: Sequence[r.Record]) -> tuple[r.Record, ...]:
    return tuple(msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(records))


# --------------------------------------------------------------------------- conversations


def conversation(seed: int) -> Corpus:
    """A generated multi-session conversation: the closing session's questions, asked of the ones before."""
    scenario = generate_conversation("retrieval", CONVERSATION_SESSIONS, seed=seed)
    records = _numbered(scenario.records)
    last_session = max(seq for seq, rec in enumerate(records) if isinstance(rec.body, r.ExecutionEnvironment))
    before = records[:last_session]
    questions: list[Question] = []
    for rec in records[last_session:]:
        body = rec.body
        if isinstance(body, r.Message) and body.role == "user":
            asked = body.text.removeprefix("Quick question before we start: ")
            detail = next(f.text for f in scenario.facts if f.id in _evidence_of(scenario, rec.seq))
            found = frozenset(
                old.seq
                for old in before
                if isinstance(old.body, r.Message) and old.body.role == "user" and detail in old.body.text
            )
            questions.append(Question("conversation", "personal detail", asked, found))
    return Corpus(before, tuple(questions))


def _evidence_of(scenario: Scenario, seq: int) -> frozenset[int]:
    """The fact ids the scenario's first model call after ``seq`` is asked about."""
    at = next(i for i, position in enumerate(scenario.calls) if position > seq)
    return scenario.evidence[at]


# --------------------------------------------------------------------------- agent runs

_WORDS: Final = (
    "cache", "retry", "worker", "queue", "schema", "token", "timeout", "config", "handler", "batch",
    "session", "index", "report", "export", "parser", "client", "server", "metrics", "checkout",
    "invoice", "ledger", "refund", "payment", "search", "upload", "render", "deploy", "build",
)  # fmt: skip
_PACKAGES: Final = ("shop", "billing", "api", "core", "web", "jobs")
_ERRORS: Final = ("connection refused", "invalid token", "schema mismatch", "lock timeout")


class _Run:
    """One generated coding run and the questions about it."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.records: list[r.Record] = []
        self.questions: list[Question] = []
        self.turn = 0
        self.calls = 0

    def emit(self, body: r.Body) -> int:
        self.records.append(
            r.Record(body=body, ts=1_700_000_000_000 + 1000 * len(self.records), turn=self.turn)
        )
        return len(self.records) - 1

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randrange(low, high)))

    def call(self, tool: str, args: dict[str, r.JSON], output: str, *, touched: tuple[str, ...] = ()) -> int:
        self.calls += 1
        cid = f"toolu_{self.calls:05d}"
        self.emit(r.ToolIntent(call_id=cid, tool=tool, args=args))
        failed = output.startswith("FAILED")
        result = r.ToolResult(
            call_id=cid, tool=tool, status="error" if failed else "ok", output=output, touched_files=touched
        )
        return self.emit(result)

    def session(self, number: int) -> None:
        rng = self.rng
        self.emit(r.ExecutionEnvironment(extra={"session_id": f"s{number}"}))
        pr = rng.randrange(100, 9999)
        slug = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}"
        branch = f"feat/{slug}"
        package = rng.choice(_PACKAGES)
        module = rng.choice(_WORDS)
        path = f"src/{package}/{module}.py"
        code = f"E{rng.randrange(1000, 9999)}"
        url = rng.random() < 0.5
        named = f"https://github.com/acme/{package}/pull/{pr}" if url else f"PR #{pr}"
        self.turn += 1
        self.emit(r.TurnStarted(trigger="user"))
        request = self.emit(
            r.Message(
                role="user",
                text=(
                    f"Please pick up {named}: the {self.words(3, 8)} is broken. Work on the branch "
                    f"{branch}; the bug is in {path}. {self.words(6, 20).capitalize()}."
                ),
            )
        )
        steps = [
            f"Check out {branch} for PR #{pr}",
            f"Reproduce the {module} failure",
            f"Fix {module} in {package}",
            "Run the test suite",
            f"Push and update PR #{pr}",
        ]
        edit: set[int] = set()
        failing: set[int] = set()
        rounds = rng.randrange(5, 10)
        for round_ in range(rounds):
            if round_:
                self.emit(r.TurnEnded(outcome="completed"))
                self.turn += 1
                self.emit(r.TurnStarted(trigger="user"))
                self.emit(r.Message(role="user", text=f"continue, {self.words(2, 6)}"))
            done = min(len(steps), round_ * len(steps) // rounds)
            todos: list[r.JSON] = [
                {"content": text, "status": "completed" if i < done else "pending"}
                for i, text in enumerate(steps)
            ]
            plan_call = self.emit(
                r.ToolIntent(call_id=f"todo{self.turn}", tool="TodoWrite", args={"todos": todos})
            )
            assert plan_call >= 0
            self.emit(
                r.WorkPlan(
                    work_item_id=None,
                    steps=tuple(
                        r.PlanStep(id=str(i + 1), text=text, status="done" if i < done else "pending")
                        for i, text in enumerate(steps)
                    ),
                )
            )
            other = f"src/{rng.choice(_PACKAGES)}/{rng.choice(_WORDS)}.py"
            self.call(
                "read_file",
                {"path": other},
                "\n".join(self.words(4, 12) for _ in range(rng.randrange(3, 20))),
            )
            test = f"tests/test_{module}.py"
            if rng.random() < 0.5:
                output = (
                    f"FAILED {test}::test_{rng.choice(_WORDS)} - {code}: {rng.choice(_ERRORS)}\n"
                    + "\n".join(self.words(4, 12) for _ in range(rng.randrange(2, 12)))
                )
                failing.add(self.call("bash", {"command": f"pytest -x {test}"}, output))
                failing.add(len(self.records) - 2)
            else:
                self.call("bash", {"command": f"pytest -x {test}"}, f"{rng.randrange(5, 90)} passed in 1.2s")
            if round_ == rounds // 2:
                result = self.call(
                    "edit_file",
                    {"path": path, "old": self.words(2, 5), "new": self.words(2, 5)},
                    "edited 1 hunk",
                    touched=(path,),
                )
                edit = {result - 1, result}
            self.emit(r.Message(role="assistant", text=f"{self.words(5, 18).capitalize()}, for {pr}."))
        self.emit(r.TurnEnded(outcome="completed"))
        family = "agent-runs"
        self.questions.append(Question(family, "PR as #N", f"#{pr}", frozenset({request})))
        self.questions.append(Question(family, "PR as pull/N", f"pull/{pr}", frozenset({request})))
        self.questions.append(Question(family, "branch", branch, frozenset({request})))
        if edit:
            self.questions.append(Question(family, "edited path", path, frozenset(edit)))
        if failing:
            self.questions.append(Question(family, "error code", code, frozenset(failing)))


def agent_run(seed: int) -> Corpus:
    """A generated coding run of :data:`RUN_SESSIONS` sessions and its questions."""
    run = _Run(seed)
    for number in range(1, RUN_SESSIONS + 1):
        run.session(number)
    return Corpus(_numbered(run.records), tuple(run.questions))


# --------------------------------------------------------------------------- the rankers


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class PlainBM25:
    """Okapi BM25 (k1 1.2, b 0.75) over each record's searchable text, whitespace-and-punctuation tokens."""

    def __init__(self, records: Sequence[r.Record]) -> None:
        self.docs: list[tuple[int, Counter[str], int]] = []
        self.df: Counter[str] = Counter()
        for rec in records:
            text = evidence_text(rec.body)
            if not text:
                continue
            counts = Counter(_tokens(text))
            if counts:
                self.docs.append((rec.seq, counts, counts.total()))
                self.df.update(counts.keys())
        self.avg = sum(length for _, _, length in self.docs) / max(1, len(self.docs))

    def search(self, query: str, limit: int) -> list[int]:
        n = len(self.docs)
        wanted = sorted(set(_tokens(query)))
        scored: list[tuple[float, int]] = []
        for seq, counts, length in self.docs:
            score = 0.0
            for term in wanted:
                tf = counts.get(term, 0)
                if tf:
                    df = self.df[term]
                    idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / self.avg))
            if score:
                scored.append((-score, -seq))
        return [-seq for _, seq in sorted(scored)[:limit]]


@dataclass
class Recall:
    """Questions answered within 5 and 10 hits, per ranker."""

    questions: int = 0
    holon5: int = 0
    holon10: int = 0
    plain5: int = 0
    plain10: int = 0

    def add(self, question: Question, holon: list[int], plain: list[int]) -> None:
        self.questions += 1
        self.holon5 += bool(question.evidence.intersection(holon[:5]))
        self.holon10 += bool(question.evidence.intersection(holon[:10]))
        self.plain5 += bool(question.evidence.intersection(plain[:5]))
        self.plain10 += bool(question.evidence.intersection(plain[:10]))


def evaluate(corpora: Sequence[Corpus]) -> dict[str, Recall]:
    """Recall of both rankers by family and question kind, and ``all``."""
    out: dict[str, Recall] = {}
    for corpus in corpora:
        holon = MemorySearch(corpus.records)
        plain = PlainBM25(corpus.records)
        for question in corpus.questions:
            ours = [hit.seq for hit in holon.search(question.query, limit=10)]
            theirs = plain.search(question.query, 10)
            for key in ("all", question.family, f"{question.family}: {question.kind}"):
                out.setdefault(key, Recall()).add(question, ours, theirs)
    return out


def _ratio(ours: int, theirs: int) -> str:
    return f"{ours / theirs:.2f}x" if theirs else ("=" if not ours else "inf")


def main() -> None:
    corpora = [conversation(seed) for seed in SEEDS] + [agent_run(seed) for seed in SEEDS]
    records = sum(len(c.records) for c in corpora)
    questions = sum(len(c.questions) for c in corpora)
    print(f"{len(corpora)} generated ledgers ({records:,} records), {questions} questions, seeds {SEEDS}")
    print(f"{'questions':<34} {'n':>4} {'holon @5':>9} {'plain @5':>9} {'ratio':>6} {'holon @10':>10} "
          f"{'plain @10':>10} {'ratio':>6}")  # fmt: skip
    results = evaluate(corpora)
    for key in sorted(results, key=lambda k: (k != "all", k)):
        got = results[key]
        n = got.questions
        at5 = f"{got.holon5 / n:>9.2f} {got.plain5 / n:>9.2f} {_ratio(got.holon5, got.plain5):>6}"
        at10 = f"{got.holon10 / n:>10.2f} {got.plain10 / n:>10.2f} {_ratio(got.holon10, got.plain10):>6}"
        print(f"{key:<34} {n:>4} {at5} {at10}")
    total = results["all"]
    ratio = total.holon5 / total.plain5 if total.plain5 else math.inf
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(f"holon recall@5 / plain BM25 recall@5 = {ratio:.2f}x: {verdict} the target of {TARGET}x")


if __name__ == "__main__":
    main()
