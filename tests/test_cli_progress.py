"""Progress bars: on stderr for every long pass, and only when stderr is a terminal."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

import holon.progress
from holon import records as r
from holon.progress import progress_callback, progress_items, progress_total
from tests.cli_support import build_ledger, invoke, live_records, write_jsonl

IMPORTERS = Path(__file__).resolve().parent.parent / "fixtures" / "importers"


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal, so click draws real bars into it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("progress") / "L", "boundary_turn_cap")


def _passes(ledger: Path, tmp: Path) -> dict[str, tuple[list[str | Path], tuple[str, ...]]]:
    """Each long pass: its command line and the labels of the bars it shows on a terminal."""
    export = write_jsonl(tmp / "export.jsonl", live_records("boundary_turn_cap"))
    evidence = write_jsonl(
        tmp / "evidence.jsonl", [r.Record(body=r.Message(role="user", text="hello"), ts=1, turn=None)]
    )
    for name in ("A", "B", "C"):
        assert invoke("init", tmp / name, "--agent-id", "boundary_turn_cap").exit_code == 0
    return {
        "replay": (["replay", ledger, "--check"], ("replaying", "verifying")),
        "render": (["render", ledger, "--json"], ("reading",)),
        "verify": (["verify", ledger], ("verifying storage", "verifying derivations")),
        "import jsonl": (["import", tmp / "A", export, "--from", "jsonl"], ("importing",)),
        "import openai-chat": (
            ["import", tmp / "B", IMPORTERS / "openai-chat" / "conversation.json", "--from", "openai-chat"],
            ("folding", "importing"),
        ),
        "append": (["append", tmp / "C", evidence], ("folding",)),
        "export jsonl": (["export", ledger, tmp / "out.jsonl"], ("exporting",)),
        "export parquet": (
            ["export", ledger, tmp / "pq", "--format", "parquet", "--overwrite"],
            ("exporting",),
        ),
        "audit": (["audit", ledger, "--json"], ("loading",)),
    }


PASSES = [
    "replay",
    "render",
    "verify",
    "import jsonl",
    "import openai-chat",
    "append",
    "export jsonl",
    "export parquet",
    "audit",
]


@pytest.mark.parametrize("name", PASSES)
def test_no_bar_when_stderr_is_not_a_terminal(name: str, ledger: Path, tmp_path: Path) -> None:
    args, labels = _passes(ledger, tmp_path)[name]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert not any(label in result.stdout for label in labels)


@pytest.mark.parametrize("name", PASSES)
def test_bars_are_shown_when_stderr_is_a_terminal(
    name: str, ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, labels = _passes(ledger, tmp_path)[name]
    monkeypatch.setattr(holon.progress, "stderr_is_terminal", lambda: True)
    monkeypatch.setenv("TERM", "xterm-256color")
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    # CliRunner's stderr is not a real terminal, so click writes each bar's label once.
    for label in labels:
        assert label in result.stderr, (name, label, result.stderr)
    assert not any(label in result.stdout for label in labels)


def test_the_helpers_draw_bars_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert list(progress_items(range(4), length=lambda: 4, label="reading")) == [0, 1, 2, 3]
    with progress_total("verifying storage") as advance:
        assert advance is not None
        advance(10, 40)
        advance(40, 40)
    with progress_callback(3, "importing") as step:
        assert step is not None
        step(3)
    drawn = terminal.getvalue()
    for label in ("reading", "verifying storage", "importing"):
        assert f"{label}  [####################################]  100%" in drawn, drawn
    assert "verifying storage  [#########---------------------------]   25%" in drawn


def test_the_helpers_draw_nothing_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    length_asked = []
    items = progress_items(range(3), length=lambda: length_asked.append(1) or 3, label="reading")
    assert list(items) == [0, 1, 2]
    assert not length_asked  # counting the items is not paid off a terminal
    with progress_total("verifying storage") as advance:
        assert advance is None
    with progress_callback(3, "importing") as step:
        assert step is None
    assert pipe.getvalue() == ""


@pytest.mark.parametrize("term", ["dumb", None])
def test_a_terminal_that_cannot_redraw_gets_no_bars(
    term: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TERM=dumb (Emacs' shell, some CI consoles) cannot move the cursor back: every redraw
    # would be a new line. An unset TERM is not that promise, and keeps the bars.
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    if term is None:
        monkeypatch.delenv("TERM", raising=False)
    else:
        monkeypatch.setenv("TERM", term)
    assert list(progress_items(range(3), length=lambda: 3, label="reading")) == [0, 1, 2]
    with progress_total("verifying storage") as advance:
        if term is None:
            assert advance is not None
            advance(1, 1)
        else:
            assert advance is None
    assert ("reading" in terminal.getvalue()) is (term is None)


def test_a_bar_whose_total_grows_is_drawn_with_what_click_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bar's length was reset on click's ProgressBar (its `length` attribute, and the class
    # imported from click._termui_impl): neither is click's API. A bar with only what click
    # documents (a context manager whose update() advances it) must do.
    drawn: list[float] = []

    class DocumentedBar:
        __slots__ = ("_of", "_pos")  # no attribute of click's own ProgressBar

        def __init__(self, length: int) -> None:
            self._of, self._pos = length, 0

        def __enter__(self) -> DocumentedBar:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def update(self, n_steps: int, current_item: int | None = None) -> None:
            self._pos += n_steps
            drawn.append(self._pos / self._of)

    def progressbar(*, length: int, **_: object) -> DocumentedBar:
        return DocumentedBar(length)

    monkeypatch.setattr(holon.progress, "_draws_bars", lambda: True)
    monkeypatch.setattr(holon.progress.click, "progressbar", progressbar)
    with progress_total("verifying storage") as advance:
        assert advance is not None
        advance(10, 40)
        advance(20, 80)  # more to verify than counted at first: the bar holds still
        advance(60, 80)
        advance(80, 80)
    assert drawn == [0.25, 0.75, 1.0]
