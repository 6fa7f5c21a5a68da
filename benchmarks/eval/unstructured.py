"""Generated runs of unstructured work: runs that declare no work items, plans or decisions.

holon's structured scenario (:func:`benchmarks.eval.scenario.generate`) measures the state
an agent declares. Most real runs declare none of it: the state is in what the operator
asked, what the tools did and what came back. Three seeded generators plant facts there.

``coding-unstructured`` (:func:`generate_coding`): a coding session — operator requests,
continuations, 1-6 tool rounds per turn (``read_file``, ``bash``, test runs, ``edit_file``
/ ``write_file`` with ``touched_files``) and assistant messages. Planted facts:

=========================  ===========================================  ==============================
kind                       text                                         lifetime
=========================  ===========================================  ==============================
constraint                 a constraint sentence of an operator         live from its request to the
                           request (the first has 2-3, some later       end of the session
                           requests add one)
instruction                an operator instruction a later request      live from its request until
                           corrects ("format the code with black")      the correction
correction                 the correcting sentence ("stop using black;  live from the correction to
                           format with ruff format instead")            the end
last_edit                  the path in ``touched_files`` of the         live from that result until
                           newest successful edit result                another file is edited
failing_test               the test id in the short summary of a        live from that result until a
                           failing test run (``FAILED <id> - ...``)     later run of the same command
                                                                        (tool and args) succeeds
superseded_instruction     the instruction, once corrected              stale after the correction
=========================  ===========================================  ==============================

An edited path occurs only in its edit's call and result (the files read and the commands
run never name one), a test id only in the output of a run that failed on it, a
correction never repeats the instruction it replaces.

``conversation-sessions`` (:func:`generate_conversation`): a long conversation over
several sessions (user and assistant messages, a few searches), each session opened by an
``ExecutionEnvironment`` whose ``extra`` is ``{"session_id": "s<n>"}``, as holon's
importers mark one. The early sessions plant one personal detail each in a user message
("my sister's dog is called Biscuit"); the closing session asks about each in a turn of
its own, with a question that shares words with the detail's message but not the detail
("What is my sister's dog called again?"). The detail is *evidence* at the call that
answers its question (and at no other call): not a live or stale fact, a metric of its own.

``tasks-subagents`` (:func:`generate_tasks`): a run whose agent starts background jobs and
sub-agents (``TaskStarted``, a model output) which finish 1-10 turns later, at the start
of a turn of their own (trigger ``task``) or during a turn, between two tool rounds; now
and then it fans out 4-6 different jobs at once, which all finish within two turns. Each
result's summary carries a distinctive phrase (``412 passed, 3 failed on staging (run
7)``), the planted fact. A job runs again from time to time; its newer result supersedes
the older one. With ``T`` the turn the ``TaskResult`` record arrived in:

- ``task_result`` (live) — from the first model call after the record, through the last
  call of turn ``T + 1`` (so at least the next call after it arrived, and the whole turn
  after it); and after that, while the result is among the newest 4 results to arrive
  (all tasks counted); in both cases only while no newer result of the same job arrived.
- ``superseded_task`` (stale) — from the first call after a newer result of the same job
  arrived: carried over when the older phrase is in the prompt and the newer result's
  phrase does not follow it.

The sub-agents' own work is shown as their ``TaskResult.output``. :data:`SUBAGENT_RECORDS`
switches it to records of their own (messages, tool calls and results carrying
``task_id=<task id>``, which are not the main agent's output, so no model call of the run
answers them) once holon.records has the field (schema 4); it is on exactly when
``ToolIntent`` has a ``task_id``.

Every figure is seeded; fact texts occur only in the records that establish them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import msgspec

import holon.records as r
from benchmarks.eval.scenario import Fact, FactKind, Scenario
from benchmarks.eval.trace import call_positions

__all__ = [
    "CONVERSATION_DETAILS",
    "SUBAGENT_RECORDS",
    "generate_coding",
    "generate_conversation",
    "generate_tasks",
]

#: Whether sub-agents' work is emitted as records carrying ``task_id`` (holon.records schema 4).
SUBAGENT_RECORDS: Final = "task_id" in r.ToolIntent.__struct_fields__

_START_TS: Final = 1_700_000_000_000
#: How many of the newest task results stay live after their arrival window (see the docstring).
NEWEST_TASKS: Final = 4


# --------------------------------------------------------------------------- ground truth


@dataclass
class _World:
    """Planted facts, and which are live, stale or asked about right now."""

    facts: list[Fact] = field(default_factory=list)
    by_key: dict[tuple[str, str], int] = field(default_factory=dict)
    live: set[int] = field(default_factory=set)
    stale: set[int] = field(default_factory=set)
    asked: set[int] = field(default_factory=set)

    def fact(self, kind: FactKind, text: str, *, superseded_by: int | None = None) -> int:
        found = self.by_key.get((kind, text))
        if found is not None:
            return found
        for other in self.facts:
            # A fact contained in another would be found where only the other is.
            if other.text != text and (other.text in text or text in other.text):
                raise ValueError(f"planted facts overlap: {text!r} / {other.text!r}")
        fid = len(self.facts)
        self.facts.append(Fact(fid, kind, text, superseded_by))
        self.by_key[(kind, text)] = fid
        return fid

    def snapshot(self) -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
        return frozenset(self.live), frozenset(self.stale), frozenset(self.asked)


class _Stream:
    """Records in the order a daemon appends them, with the ground truth after each."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.world = _World()
        self.records: list[r.Record] = []
        self.after: list[tuple[frozenset[int], frozenset[int], frozenset[int]]] = []
        self.ts = _START_TS
        self.turn: int | None = None
        self.calls = 0
        self.counter = 0

    def emit(self, body: r.Body, *, in_turn: bool = True) -> None:
        self.ts += 1000
        self.records.append(r.Record(body=body, ts=self.ts, turn=self.turn if in_turn else None))
        self.after.append(self.world.snapshot())

    def chatter(self) -> str:
        return self.words(_CODE_WORDS, 3, 8)

    def amount(self) -> str:
        return f"{self.rng.randrange(100, 999)}.{self.rng.randrange(10, 99)}"

    def unique(self) -> int:
        self.counter += 1
        return self.counter

    def call_id(self) -> str:
        self.calls += 1
        return f"c{self.calls}"

    def words(self, pool: Sequence[str], low: int, high: int) -> str:
        return " ".join(self.rng.choice(pool) for _ in range(self.rng.randrange(low, high)))

    def output(self, lines: int, pool: Sequence[str]) -> str:
        return "\n".join(f"{i:04d} {self.words(pool, 4, 14)}" for i in range(lines))

    def output_lines(self) -> int:
        roll = self.rng.random()
        if roll < 0.70:
            return self.rng.randrange(2, 30)
        if roll < 0.95:
            return self.rng.randrange(30, 150)
        return self.rng.randrange(150, 700)  # tens of kilobytes

    def operator_turn(self, text: str) -> None:
        """A turn on the operator's ``text``, as ``holon.Agent.turn(input=text, role="operator")`` does."""
        self.emit(r.TurnStarted(trigger="operator"))
        self.emit(r.Message(role="operator", text=text))

    def scenario(self, name: str, description: str, family: str) -> Scenario:
        records = tuple(self.records)
        calls = call_positions(records)
        truth = [self.after[p - 1] for p in calls]
        return Scenario(
            name=name,
            description=description,
            records=records,
            calls=calls,
            facts=tuple(self.world.facts),
            live=tuple(t[0] for t in truth),
            stale=tuple(t[1] for t in truth),
            evidence=tuple(t[2] for t in truth),
            family=family,
        )


def _tool(name: str, description: str, *params: str) -> r.ToolDefinition:
    return r.ToolDefinition(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {p: {"type": "string"} for p in params}},
    )


# --------------------------------------------------------------------------- coding session

_CODE_WORDS: Final = (
    *("rounding", "decimal", "fee", "ledger", "export", "currency", "settlement", "refund", "invoice"),
    *("payout", "batch", "cursor", "queue", "retry", "timeout", "fixture", "schema", "cache"),
    *("serializer", "validator", "handler", "migration", "assert", "traceback", "locale", "quantize"),
)
_CONSTRAINTS: Final = (
    "keep the public function signatures of the billing package unchanged",
    "add no new third-party dependency without asking first",
    "every money amount stays a Decimal and never becomes a float",
    "the unit tests must make no network calls",
    "leave the database migrations folder untouched",
    "the refund CSV export keeps its column order exactly as it is",
    "never write a customer's email address to the logs",
    "keep each commit under two hundred changed lines",
    "run the whole test suite before you call anything done",
    "ask before you delete any file",
)
#: An instruction and the later correction that replaces it (which never repeats it).
_CORRECTED: Final = (
    ("format the code with black", "stop using black; format with ruff format instead"),
    (
        "write the test doubles with unittest.mock",
        "drop unittest.mock; hand-write small fake classes for the tests instead",
    ),
    (
        "print debug output with plain print calls",
        "no more print calls; send debug output through the structlog logger",
    ),
    ("name new branches after the ticket number", "name new branches after the feature, not the ticket"),
)
_ASKS: Final = (
    "make the refund export handle partial refunds",
    "fix the rounding of refunds in foreign currencies",
    "add a settlement report for the finance team",
    "speed up the nightly refund reconciliation",
    "clean up the fee calculation in the refund path",
    "support refunds on split payments",
    "add an idempotency key to the refund endpoint",
    "handle chargebacks that arrive after a refund",
)
#: Files edited (never read or named by a command, so a path is in a prompt only with its edit).
_EDITED: Final = (
    "billing/refunds.py",
    "billing/rounding.py",
    "billing/export/csv_writer.py",
    "billing/fees.py",
    "billing/api/refund_views.py",
    "billing/tasks/settlement.py",
    "billing/models/refund.py",
    "billing/currency.py",
)
_READ: Final = (
    "README.md",
    "pyproject.toml",
    "docs/refund-policy.md",
    "billing/settings.py",
    "tests/conftest.py",
    "billing/api/urls.py",
    "CHANGELOG.md",
    "billing/__init__.py",
)
_COMMANDS: Final = (
    "ruff check billing",
    "git status --short",
    "python -m mypy billing",
    "git log --oneline -8",
    "grep -rn quantize billing",
    "grep -rn ROUND_HALF billing",
)
#: Test modules and their tests; a test command is ``pytest tests/test_<module>.py -q``.
_TESTS: Final = (
    ("refunds", ("test_refund_rounds_half_even", "test_partial_refund_keeps_the_fee")),
    ("export", ("test_export_keeps_column_order", "test_export_escapes_quotes")),
    ("settlement", ("test_settlement_totals_match", "test_settlement_skips_voided_payouts")),
)


class _Coding(_Stream):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.constraints = list(_CONSTRAINTS)
        self.rng.shuffle(self.constraints)
        self.last_edit: int | None = None
        self.failing: dict[str, tuple[str, int]] = {}  # command -> (test id, fact)

    def constraint(self) -> str:
        text = self.constraints.pop()
        self.world.live.add(self.world.fact("constraint", text))
        return text

    def read(self) -> None:
        cid = self.call_id()
        self.emit(r.ToolIntent(call_id=cid, tool="read_file", args={"path": self.rng.choice(_READ)}))
        output = self.output(self.output_lines(), _CODE_WORDS)
        self.emit(r.ToolResult(call_id=cid, tool="read_file", status="ok", output=output))

    def command(self) -> None:
        cid = self.call_id()
        command = self.rng.choice(_COMMANDS)
        self.emit(r.ToolIntent(call_id=cid, tool="bash", args={"command": command}))
        failed = self.rng.random() < 0.06
        self.emit(
            r.ToolResult(
                call_id=cid,
                tool="bash",
                status="error" if failed else "ok",
                output=self.output(self.output_lines(), _CODE_WORDS),
                exit_code=1 if failed else 0,
            )
        )

    def edit(self) -> None:
        rng = self.rng
        cid = self.call_id()
        path = rng.choice(_EDITED)
        if rng.random() < 0.15:
            tool = "write_file"
            args: dict[str, r.JSON] = {
                "path": path,
                "content": self.output(rng.randrange(5, 60), _CODE_WORDS),
            }
            said = "wrote the file"
        else:
            tool = "edit_file"
            args = {
                "path": path,
                "old_string": self.words(_CODE_WORDS, 3, 9),
                "new_string": self.words(_CODE_WORDS, 3, 9),
            }
            said = "1 replacement made"
        self.emit(r.ToolIntent(call_id=cid, tool=tool, args=args))
        if self.last_edit is not None:
            self.world.live.discard(self.last_edit)
        self.last_edit = self.world.fact("last_edit", path)
        self.world.live.add(self.last_edit)
        self.emit(
            r.ToolResult(call_id=cid, tool=tool, status="ok", output=said, exit_code=0, touched_files=(path,))
        )

    def test(self) -> None:
        rng = self.rng
        cid = self.call_id()
        if self.failing and rng.random() < 0.7:
            command = rng.choice(sorted(self.failing))
        else:
            module, _tests = rng.choice(_TESTS)
            command = f"pytest tests/test_{module}.py -q"
        module = command.split("tests/test_", 1)[1].split(".py", 1)[0]
        names = dict(_TESTS)[module]
        self.emit(r.ToolIntent(call_id=cid, tool="bash", args={"command": command}))
        passed = rng.randrange(8, 40)
        failing = self.failing.get(command)
        fails = rng.random() < (0.55 if failing else 0.3)
        if not fails:
            if failing is not None:
                self.world.live.discard(failing[1])
                del self.failing[command]
            output = f"{'.' * passed} [100%]\n{passed} passed in 0.{rng.randrange(10, 99)}s"
            self.emit(r.ToolResult(call_id=cid, tool="bash", status="ok", output=output, exit_code=0))
            return
        if failing is None:
            name = rng.choice(names)
            test_id = f"tests/test_{module}.py::{name}[case-{self.unique()}]"
            failing = (test_id, self.world.fact("failing_test", test_id))
            self.failing[command] = failing
        test_id, fid = failing
        self.world.live.add(fid)
        case = test_id.split("::", 1)[1]
        trace = self.output(rng.randrange(4, 80), _CODE_WORDS)
        output = "\n".join(
            (
                f"{'.' * (passed // 2)}F{'.' * (passed - passed // 2)} [100%]",
                "=================================== FAILURES ===================================",
                f"_______________________________ {case} _______________________________",
                trace,
                "=========================== short test summary info ============================",
                f"FAILED {test_id} - AssertionError: assert Decimal('{self.amount()}')"
                f" == Decimal('{self.amount()}')",
                f"1 failed, {passed} passed in 0.{rng.randrange(10, 99)}s",
            )
        )
        self.emit(r.ToolResult(call_id=cid, tool="bash", status="error", output=output, exit_code=1))

    def tool_round(self) -> None:
        rng = self.rng
        if rng.random() < 0.2:
            # The model's words before its call, in the same response (no call of their own).
            self.emit(
                r.Message(role="assistant", text=f"Let me look at the {self.words(_CODE_WORDS, 1, 3)} part.")
            )
        roll = rng.random()
        if roll < 0.35:
            self.read()
        elif roll < 0.52:
            self.command()
        elif roll < 0.74:
            self.test()
        else:
            self.edit()


def generate_coding(name: str, turns: int, *, seed: int, max_rounds: int = 6) -> Scenario:
    """A seeded coding session of ``turns`` turns with no declared work (see the module docstring)."""
    run = _Coding(seed)
    rng = run.rng
    world = run.world
    run.emit(
        r.SystemPolicy(
            text="You are a careful coding agent working in the billing repository. Keep changes small.",
            tools=(
                _tool("bash", "Run a shell command in the repository.", "command"),
                _tool("read_file", "Read a file.", "path"),
                _tool("edit_file", "Replace a string in a file.", "path", "old_string", "new_string"),
                _tool("write_file", "Write a whole file.", "path", "content"),
            ),
        ),
        in_turn=False,
    )
    run.emit(
        r.ExecutionEnvironment(workspace="/src/billing", cwd="/src/billing", branch="main"), in_turn=False
    )
    pairs = list(_CORRECTED)
    rng.shuffle(pairs)
    pending: tuple[str, str, int, int] | None = None  # instruction, correction, its fact, turn due
    next_instruction = 1
    next_request = rng.randrange(8, 20)
    spacing = (max(4, turns // 12), max(8, turns // 5))

    def instruct(turn: int) -> str:
        nonlocal pending, next_instruction
        instruction, correction = pairs.pop()
        fid = world.fact("instruction", instruction)
        world.live.add(fid)
        pending = (instruction, correction, fid, turn + rng.randrange(*spacing))
        next_instruction = pending[3] + rng.randrange(*spacing)
        return instruction

    for turn in range(1, turns + 1):
        run.turn = turn
        if turn == 1:
            rules = "; ".join(run.constraint() for _ in range(rng.randrange(2, 4)))
            ask = rng.choice(_ASKS)
            text = f"Please {ask} (ticket RF-{run.unique()}). Ground rules: {rules}. Also, {instruct(turn)}."
            run.operator_turn(text)
        elif pending is not None and turn >= pending[3]:
            instruction, correction, fid, _due = pending
            world.live.discard(fid)
            fixed = world.fact("correction", correction)
            world.live.add(fixed)
            world.stale.add(world.fact("superseded_instruction", instruction, superseded_by=fixed))
            pending = None
            run.operator_turn(f"Change of plan on the tooling: {correction}.")
        elif turn >= next_request:
            parts = [f"Next, {rng.choice(_ASKS)} (ticket RF-{run.unique()})."]
            if run.constraints and rng.random() < 0.4:
                parts.append(f"One more rule: {run.constraint()}.")
            if pending is None and pairs and turn >= next_instruction:
                parts.append(f"And from now on, {instruct(turn)}.")
            next_request = turn + rng.randrange(*spacing)
            run.operator_turn(" ".join(parts))
        elif rng.random() < 0.12:
            run.operator_turn(f"How is the {rng.choice(_CODE_WORDS)} part going? Keep at it.")
        else:
            run.emit(r.TurnStarted(trigger="continue"))
        for _ in range(rng.randrange(1, max_rounds + 1)):
            run.tool_round()
        run.emit(
            r.Message(
                role="assistant",
                text=f"Turn {turn}: worked on the {run.words(_CODE_WORDS, 1, 3)} code; {run.chatter()}.",
            )
        )
        run.emit(r.TurnEnded(outcome="completed"))
        run.turn = None
    described = (
        f"generated, seed {seed}: a coding session of {turns:,} turns with no work items, plans or "
        f"decisions; 1-{max_rounds} tool rounds per turn, operator constraints and corrections, edits, "
        "failing tests"
    )
    return run.scenario(name, described, "coding-unstructured")


# --------------------------------------------------------------------------- conversation

_CHAT_WORDS: Final = (
    *("garden", "recipe", "train", "budget", "novel", "weekend", "museum", "jacket", "coffee", "printer"),
    *("spreadsheet", "hiking", "tomatoes", "podcast", "neighbour", "holiday", "laptop", "bread", "rain"),
    *("meeting", "cousin", "concert", "paint", "window", "bicycle", "market", "letter", "oven", "map"),
)
#: A personal detail an early session mentions, and the closing session's question about it.
CONVERSATION_DETAILS: Final = (
    ("my sister's dog is called Biscuit", "What is my sister's dog called again?"),
    ("I parked the camper van at the Alder Creek campground", "Where did I park the camper van?"),
    ("my landlord is Mrs. Okonkwo from the second floor", "Who is my landlord, do you remember?"),
    ("the wifi password at the cabin is heron-lantern-42", "What was the wifi password at the cabin?"),
    ("my flight to Lisbon leaves on the 14th of March", "When does my flight to Lisbon leave?"),
    ("I am allergic to cashews but fine with almonds", "Which nuts am I allergic to?"),
    ("my bike lock code is 3719", "What is my bike lock code?"),
    ("my daughter's piano teacher is Mr. Varga", "Who is my daughter's piano teacher?"),
    ("our book club is reading The Left Hand of Darkness", "Which book is our book club reading?"),
    ("my gym locker is number 218", "What number is my gym locker?"),
    ("the plumber comes on Thursday at eight", "When does the plumber come?"),
    ("my grandmother's soup recipe uses smoked paprika", "What spice does my grandmother's soup recipe use?"),
)


class _Conversation(_Stream):
    def sentence(self) -> str:
        return self.words(_CHAT_WORDS, 6, 16).capitalize() + "."

    def exchange(self, text: str, *, answer_sentences: tuple[int, int]) -> None:
        rng = self.rng
        self.emit(r.TurnStarted(trigger="user"))
        self.emit(r.Message(role="user", text=text))
        if rng.random() < 0.08:
            cid = self.call_id()
            query = self.words(_CHAT_WORDS, 2, 5)
            self.emit(r.ToolIntent(call_id=cid, tool="web_search", args={"query": query}))
            self.emit(
                r.ToolResult(
                    call_id=cid,
                    tool="web_search",
                    status="ok",
                    output=self.output(rng.randrange(5, 40), _CHAT_WORDS),
                )
            )
        reply = " ".join(self.sentence() for _ in range(rng.randrange(*answer_sentences)))
        # The answer is the model's output: the question's evidence is no longer asked about.
        self.world.asked.clear()
        self.emit(r.Message(role="assistant", text=reply))
        self.emit(r.TurnEnded(outcome="completed"))


def generate_conversation(name: str, sessions: int, *, seed: int) -> Scenario:
    """A seeded conversation of ``sessions`` sessions whose last asks about the early ones."""
    if sessions < 3:
        raise ValueError(
            f"a conversation needs at least 3 sessions (got {sessions}): early, middle and closing"
        )
    run = _Conversation(seed)
    rng = run.rng
    world = run.world
    run.emit(
        r.SystemPolicy(
            text="You are a friendly personal assistant. Remember what the user tells you across sessions.",
            tools=(_tool("web_search", "Search the web.", "query"),),
        ),
        in_turn=False,
    )
    details = list(CONVERSATION_DETAILS)
    rng.shuffle(details)
    planted: list[tuple[int, str]] = []  # evidence fact, question
    early = min(len(details), max(1, (sessions - 1) // 3))
    turn = 0
    for session in range(1, sessions + 1):
        run.emit(r.ExecutionEnvironment(extra={"session_id": f"s{session}"}), in_turn=False)
        if session == sessions:
            rng.shuffle(planted)
            for fid, question in planted:
                turn += 1
                run.turn = turn
                world.asked = {fid}
                run.exchange(f"Quick question before we start: {question}", answer_sentences=(2, 5))
            run.turn = None
            break
        exchanges = rng.randrange(6, 15)
        plant_at = rng.randrange(exchanges) if session <= early else -1
        for i in range(exchanges):
            turn += 1
            run.turn = turn
            topic = f"the {rng.choice(_CHAT_WORDS)} and the {rng.choice(_CHAT_WORDS)}"
            text = f"Can you help me with {topic}? {run.sentence()}"
            if i == plant_at:
                detail, question = details.pop()
                fid = world.fact("evidence", detail)
                planted.append((fid, question))
                text += f" Unrelated, but {detail}, just so you know."
            run.exchange(text, answer_sentences=(4, 16))
            run.turn = None
    described = (
        f"generated, seed {seed}: a conversation of {sessions} sessions ({turn:,} turns) with no work "
        f"declared; {len(planted)} personal details planted early and asked about in the closing session"
    )
    return run.scenario(name, described, "conversation-sessions")


# --------------------------------------------------------------------------- tasks and sub-agents


@dataclass(frozen=True)
class _Job:
    """A background job or sub-agent the agent starts, and how its result reads."""

    description: str
    label: str
    subagent: bool
    phrase: str  # str.format with n (the run) and a, b (numbers)


_JOBS: Final = (
    _Job(
        "run the integration suite against staging",
        "integration suite",
        False,
        "{a} passed, {b} failed on staging",
    ),
    _Job("build the API reference docs", "docs build", False, "API docs built with {b} broken links"),
    _Job(
        "profile the CSV export on the March data",
        "export profile",
        False,
        "the March export took {a} seconds",
    ),
    _Job(
        "rebuild the refunds search index",
        "search index",
        False,
        "search index rebuilt over {a}{b:03d} refunds",
    ),
    _Job(
        "sub-agent: find every caller of round_money",
        "callers survey",
        True,
        "found {a} callers of round_money, {b} outside billing",
    ),
    _Job(
        "sub-agent: review the open diff for float arithmetic",
        "diff review",
        True,
        "the diff has {b} float conversions left in fee code",
    ),
    _Job(
        "sub-agent: summarise the refund-policy thread",
        "thread summary",
        True,
        "the refund-policy thread settled on a {a}-day window",
    ),
)


@dataclass
class _Task:
    id: str
    job: _Job
    due: int
    at_start: bool
    fact: int | None = None
    arrived: int | None = None  # turn of the TaskResult record
    superseded: bool = False


class _Tasks(_Stream):
    def __init__(self, seed: int, *, subagent_records: bool) -> None:
        super().__init__(seed)
        self.subagent_records = subagent_records
        self.finished: list[_Task] = []  # in order of arrival

    def refresh(self) -> None:
        """Which task results are live now (the rule of the module docstring)."""
        newest = {t.id for t in self.finished[-NEWEST_TASKS:]}
        for task in self.finished:
            assert task.fact is not None and task.arrived is not None
            window = self.turn is not None and self.turn <= task.arrived + 1
            if not task.superseded and (window or task.id in newest):
                self.world.live.add(task.fact)
            else:
                self.world.live.discard(task.fact)

    def start_turn(self, turn: int, trigger: str) -> None:
        self.turn = turn
        self.refresh()
        self.emit(r.TurnStarted(trigger=trigger))

    def work(self, task: _Task, lines: int) -> str:
        rng = self.rng
        if not task.job.subagent:
            return self.output(lines, _CODE_WORDS)
        out = []
        for _ in range(max(1, lines // 6)):
            tool = rng.choice(("read_file", "bash"))
            out.append(f"sub-agent call {tool}: {self.words(_CODE_WORDS, 2, 6)}")
            out.append(self.output(rng.randrange(1, 8), _CODE_WORDS))
        out.append(f"sub-agent: {self.words(_CODE_WORDS, 5, 12)}")
        return "\n".join(out)

    def subagent_work(self, task: _Task) -> None:
        """The sub-agent's own records, carrying ``task_id`` (only with :data:`SUBAGENT_RECORDS`)."""
        rng = self.rng
        for _ in range(rng.randrange(2, 6)):
            cid = f"{task.id}-{self.call_id()}"
            intent = r.ToolIntent(call_id=cid, tool="read_file", args={"path": rng.choice(_READ)})
            result = r.ToolResult(
                call_id=cid,
                tool="read_file",
                status="ok",
                output=self.output(rng.randrange(3, 40), _CODE_WORDS),
            )
            for body in (intent, result):
                self.emit(msgspec.structs.replace(body, task_id=task.id))
        said = r.Message(role="assistant", text=f"sub-agent: {self.words(_CODE_WORDS, 5, 12)}")
        self.emit(msgspec.structs.replace(said, task_id=task.id))

    def arrive(self, task: _Task) -> None:
        rng = self.rng
        n = self.unique()
        phrase = task.job.phrase.format(a=rng.randrange(10, 450), b=rng.randrange(0, 9)) + f" (run {n})"
        fid = self.world.fact("task_result", phrase)
        for older in self.finished:
            if older.job is task.job and not older.superseded:
                assert older.fact is not None
                older.superseded = True
                self.world.stale.add(
                    self.world.fact("superseded_task", self.world.facts[older.fact].text, superseded_by=fid)
                )
        task.fact = fid
        task.arrived = self.turn
        self.finished.append(task)
        if self.subagent_records and task.job.subagent:
            self.subagent_work(task)
            output = ""
        else:
            output = self.work(task, rng.randrange(4, 90))
        self.refresh()
        self.emit(r.TaskResult(id=task.id, status="ok", summary=f"{task.job.label}: {phrase}", output=output))

    def tool_round(self) -> None:
        rng = self.rng
        cid = self.call_id()
        if rng.random() < 0.5:
            tool, args = "read_file", {"path": rng.choice(_READ)}
        else:
            tool, args = "bash", {"command": rng.choice(_COMMANDS)}
        self.emit(r.ToolIntent(call_id=cid, tool=tool, args=args))
        status: Literal["ok", "error"] = "error" if rng.random() < 0.06 else "ok"
        self.emit(
            r.ToolResult(
                call_id=cid,
                tool=tool,
                status=status,
                output=self.output(self.output_lines(), _CODE_WORDS),
                exit_code=None if tool == "read_file" else (0 if status == "ok" else 1),
            )
        )


def generate_tasks(
    name: str, turns: int, *, seed: int, max_rounds: int = 6, subagent_records: bool = SUBAGENT_RECORDS
) -> Scenario:
    """A seeded run of ``turns`` turns whose agent starts background tasks and sub-agents."""
    if subagent_records and not SUBAGENT_RECORDS:
        raise ValueError(
            "subagent_records=True needs records with a task_id field (holon.records schema 4), which this "
            "holon does not have; leave it at SUBAGENT_RECORDS"
        )
    run = _Tasks(seed, subagent_records=subagent_records)
    rng = run.rng
    run.emit(
        r.SystemPolicy(
            text="You are a coding agent. Start long jobs and investigations as background tasks.",
            tools=(
                _tool("bash", "Run a shell command in the repository.", "command"),
                _tool("read_file", "Read a file.", "path"),
                _tool("start_task", "Start a background job or a sub-agent.", "description"),
            ),
        ),
        in_turn=False,
    )
    run.emit(
        r.ExecutionEnvironment(workspace="/src/billing", cwd="/src/billing", branch="main"), in_turn=False
    )
    running: list[_Task] = []
    for turn in range(1, turns + 1):
        due = [t for t in running if t.due == turn]
        for task in due:
            running.remove(task)
        at_start = [t for t in due if t.at_start]
        if at_start:
            run.start_turn(turn, "task")
            for task in at_start:
                run.arrive(task)
        elif turn == 1 or rng.random() < 0.3:
            run.start_turn(turn, "operator")
            run.emit(
                r.Message(role="operator", text=f"Please look into the {run.words(_CODE_WORDS, 1, 3)} next.")
            )
        else:
            run.start_turn(turn, "continue")
        rounds = rng.randrange(1, max_rounds + 1)
        # Each result arriving during the turn comes after one of its tool rounds.
        during = {t.id: rng.randrange(rounds) for t in due if not t.at_start}
        # One task now and then; or, with none running, a fan-out of 4-6 different jobs that
        # all finish within two turns (so more results arrive in a turn than the newest 4).
        if not running and rng.random() < 0.08:
            jobs = rng.sample(_JOBS, rng.randrange(4, 7))
            spans = (1, 3)
        elif len(running) < 3 and rng.random() < 0.25:
            jobs, spans = [rng.choice(_JOBS)], (1, 11)
        else:
            jobs, spans = [], (1, 11)
        start_round = rng.randrange(rounds)
        for i in range(rounds):
            if i == start_round:
                for job in jobs:
                    task = _Task(
                        id=f"task-{run.unique()}",
                        job=job,
                        due=turn + rng.randrange(*spans),
                        at_start=rng.random() < 0.4,
                    )
                    running.append(task)
                    # Started in the same response as the round's tool call.
                    run.emit(r.TaskStarted(id=task.id, description=job.description))
            run.tool_round()
            for task in due:
                if during.get(task.id) == i:
                    run.arrive(task)
        run.emit(
            r.Message(
                role="assistant",
                text=f"Turn {turn}: checked the {run.words(_CODE_WORDS, 1, 3)} code; {run.chatter()}.",
            )
        )
        run.emit(r.TurnEnded(outcome="completed"))
        run.turn = None
    described = (
        f"generated, seed {seed}: {turns:,} turns with no work declared; background jobs and sub-agents "
        "finishing 1-10 turns after they start, at a turn's start or between its tool rounds; "
        f"1-{max_rounds} tool rounds per turn"
    )
    return run.scenario(name, described, "tasks-subagents")
