"""A newcomer's first steps with examples/daemon.py and the README's commands (second review).

``--fresh`` deleted whatever ``--ledger`` named; a wrong path or a ledger in use ended in a
traceback; running the example again after ``make demo`` printed an empty table and a
summary of zeros; the README's restore example named a record nothing had evicted, and
its kill-and-resume step could not be done by hand (tests/test_examples_newcomer.py runs
the step the README has now).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import holon
from holon import records as r
from holon.ledger import HEADER_NAME, Ledger
from holon.runtime import Agent
from tests.cli_support import invoke, tree_bytes
from tests.runtime_support import load_daemon

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = load_daemon().main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _readme_commands(prefix: str) -> list[str]:
    """The README's ```sh lines starting with ``prefix``, comments removed."""
    blocks = re.findall(r"^```sh\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(prefix)]


# ---------------------------------------------------------------- --fresh removes only an earlier run


def _notes(tmp: Path) -> Path:
    (tmp / "notes").mkdir()
    (tmp / "notes" / "todo.txt").write_text("keep me\n")
    return tmp / "notes"


def _other_agent(tmp: Path) -> Path:
    with Agent.open(tmp / "agent-7", agent_id="agent-7") as agent, agent.turn(input="hello"):
        pass
    return tmp / "agent-7"


def _foreign_workspace(tmp: Path) -> Path:
    load_daemon().run(tmp / "l", turns=3, quiet=True)
    (tmp / "l-workspace" / "my-notes.md").write_text("mine\n")
    return tmp / "l"


def _a_file(tmp: Path) -> Path:
    (tmp / "data.csv").write_text("a,b\n")
    return tmp / "data.csv"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_notes, "which is not a holon ledger"),
        (_other_agent, "the ledger of agent 'agent-7', not this example's 'inventory-agent'"),
        (_foreign_workspace, "holds files this example did not make (my-notes.md)"),
        (_a_file, "which is not a directory"),
    ],
)
def test_fresh_refuses_what_an_earlier_run_did_not_make(
    make: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--fresh --ledger ~/notes` ran shutil.rmtree(~/notes) and ~/notes-workspace.
    assert callable(make)
    target: Path = make(tmp_path)
    capsys.readouterr()
    before = tree_bytes(tmp_path)
    code, out, err = _main(capsys, "--fresh", "--quiet", "--turns", "3", "--ledger", target)
    assert code == 2 and out == ""
    assert err.startswith("daemon.py: error: --fresh would remove ") and says in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert tree_bytes(tmp_path) == before, "nothing is removed or written"


def test_fresh_refuses_a_ledger_a_process_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `make demo` (which passes --fresh) while the example still runs on .demo/ledger
    # removed the ledger under the running writer, which then failed writing a checkpoint.
    path = tmp_path / "l"
    load_daemon().run(path, turns=3, quiet=True)
    with Agent.open(path, agent_id="inventory-agent") as running:
        head = running.seq
        code, _, err = _main(capsys, "--fresh", "--quiet", "--ledger", path)
        assert code == 2
        assert f"--fresh would remove {path} while process {os.getpid()} writes to it" in err
        assert (path / HEADER_NAME).is_file() and running.seq == head
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok and ledger.head()[0] == head


def test_fresh_starts_over_from_an_earlier_or_damaged_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l"
    load_daemon().run(path, turns=6, quiet=True)
    assert _main(capsys, "--fresh", "--quiet", "--turns", "2", "--ledger", path)[0] == 0
    with Agent.open(path, agent_id="inventory-agent") as agent:
        assert agent.next_turn_index == 3, "the 6 turns were removed, 2 run"
    # A damaged ledger of the example is what --fresh is for, too.
    (path / HEADER_NAME).write_text("{not json")
    assert _main(capsys, "--fresh", "--quiet", "--turns", "2", "--ledger", path)[0] == 0
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok


# ---------------------------------------------------------------- first-step errors


def test_a_wrong_ledger_path_is_one_line_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each was a 20-line traceback; the not-a-ledger advice (holon init) does not apply here.
    target = _a_file(tmp_path)
    code, _, err = _main(capsys, "--ledger", target)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines() == [
        f"daemon.py: error: {target} is a file, not a holon ledger directory",
        "daemon.py: it creates its ledger at a path that does not exist yet: "
        "pass --ledger NEW_PATH (default .demo/ledger)",
    ]
    assert not (tmp_path / "data.csv-workspace").exists(), "no workspace beside what is not a ledger"
    notes = _notes(tmp_path)
    code, _, err = _main(capsys, "--ledger", notes)
    assert code == 2 and err.startswith(f"daemon.py: error: {notes} has no holon-ledger.json")
    assert code == 2 and "Traceback" not in err


def test_running_it_while_it_runs_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l"
    with Agent.open(path, agent_id="inventory-agent"):
        code, _, err = _main(capsys, "--ledger", path)
    assert code == 2
    assert err.splitlines() == [
        f"daemon.py: error: ledger {path} is locked for writing by process {os.getpid()}; "
        "open it read-only, or stop the other writer first"
    ]


def test_running_it_again_says_there_is_nothing_to_run(tmp_path: Path) -> None:
    # After `make demo`, `examples/daemon.py` printed a header over no turns and a summary
    # of zeros ("0 of 0 (0%)", "0 / 0 / 0"), which reads as a failure.
    daemon = load_daemon()
    path = tmp_path / "l"
    daemon.run(path, turns=5, quiet=True)
    lines: list[str] = []
    stats = daemon.run(path, turns=5, out=lines.append)
    assert stats.lines == []
    assert lines[1:] == [
        "nothing to run: the ledger holds 5 turns (--turns 5); pass --turns 205 to continue it, "
        "or --fresh to start over"
    ]
    assert lines[0].startswith(f"ledger {path}: resumed at seq ")


# ---------------------------------------------------------------- the README's commands


def test_the_readme_commands_run_on_the_demo_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's `holon get` named ledger:123, a working-memory delta nothing had
    # evicted; its ref is now one the turn-40 prompt shown just above it left out (the demo's
    # history fits its window: the plan's finished steps, which working memory collapses).
    monkeypatch.chdir(tmp_path)
    load_daemon().run(Path(".demo/ledger"), turns=200, fresh=True, quiet=True)  # as `make demo` does
    # The commands on the demo's ledger (the import and simulate ones need the reader's file).
    commands = [c for c in _readme_commands(".venv/bin/holon ") if " .demo/ledger" in c]
    assert [shlex.split(c)[1] for c in commands] == [
        "memory",
        "render",
        "explain",
        "get",
        "prompts",
        "audit",
        "report",
    ]
    outputs = {}
    for command in commands:
        args = shlex.split(command)[1:]
        result = invoke(*args)
        assert result.exit_code == 0, (command, result.output, result.stderr)
        outputs[args[0]] = result.stdout
    ref = shlex.split(commands[3])[-1]
    assert f"restore with ref {ref})" in outputs["render"], "the prompt of turn 40 names the ref"
    restored = outputs["get"]
    assert restored.startswith(f'{{"seq":{ref.split(":")[1]},') and '"kind":"work_plan"' in restored
    # A prompt a turn at least (a turn whose rounds outgrew its prompt rendered again), every
    # one reproduced.
    found = re.search(
        r"(\d+) recorded prompts rendered again\nreproduced (\d+) · DIFFERS 0 ", outputs["prompts"]
    )
    assert found is not None and int(found[1]) == int(found[2]) >= 200, outputs["prompts"]
    assert "--at-turn 40" in commands[1] and "--at-turn 40" in commands[2]
    assert Path(".demo/report.html").read_text().startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------- what the docs list


def _section(doc: str, heading: str) -> str:
    text = (ROOT / "docs" / doc).read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end != -1 else len(text)]


def _rows(section: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows."""
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row] for row in rows]
    return [row for row in cells[1:] if set("".join(row)) != {"-"}]  # not the header nor its rule


def test_ledger_format_lists_every_record_kind_with_its_fields() -> None:
    # No page listed the record kinds: a newcomer writing `holon append` input read
    # holon/records.py to learn what a line may hold.
    section = _section("ledger-format.md", "## Record kinds")
    listed = {}
    for kind, body, required, optional, what in _rows(section):
        listed[kind.strip("`")] = (body.strip("`"), required, optional, what)
    assert list(listed) == list(r.BODY_TYPES), "every kind, in the order holon.records declares them"
    for kind, cls in r.BODY_TYPES.items():
        body, required, optional, what = listed[kind]
        fields = msgspec.inspect.type_info(cls).fields  # type: ignore[attr-defined]
        assert body == cls.__name__ and getattr(holon, body) is cls
        assert required == ", ".join(f.name for f in fields if f.required), kind
        assert optional == ", ".join(f.name for f in fields if not f.required), kind
        group = "derived" if kind in r.DERIVED_KINDS else "runtime" if kind in RUNTIME_KINDS else "evidence"
        assert what.endswith(f"({group})"), kind
    example = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert example is not None
    record = r.decode_json_record(example.group(1).encode(), where="ledger-format.md")
    assert record.body == r.Message(role="user", text="hi") and record.v == r.SCHEMA_VERSION


RUNTIME_KINDS = ("turn_started", "turn_ended", "prompt_rendered", "model_call")


def test_architecture_lists_every_name_import_holon_gives() -> None:
    section = _section("architecture.md", "### The facade: `import holon`")
    names = [name for row in _rows(section) for name in re.findall(r"`(\w+)`", row[1])]
    assert len(names) == len(set(names)), "each name once"
    assert sorted(names) == sorted(holon.__all__)


def test_import_holon_does_not_load_duckdb() -> None:
    # architecture.md: holon.audit is kept out of the facade so that `import holon` does
    # not load DuckDB; `from holon.audit import connect` does.
    code = "import sys, holon; print('duckdb' in sys.modules, hasattr(holon, 'audit'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False", "False"]
