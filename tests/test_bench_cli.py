"""The benchmark runners' command lines: ``python -m benchmarks`` and ``python -m benchmarks.eval``.

Nothing here runs a benchmark: the suites and the evaluation's scenarios are replaced by
stubs that fail if reached when a command should have been refused first.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import benchmarks.__main__ as runner
from benchmarks import bench_dir
from benchmarks.eval import run as eval_run
from benchmarks.eval.scenario import SAMPLES

ROOT = Path(__file__).resolve().parents[1]


def _fake_suites(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []

    def load(name: str) -> ModuleType:
        module = ModuleType(name)
        module.main = lambda: ran.append(name.removeprefix("benchmarks."))  # type: ignore[attr-defined]
        return module

    monkeypatch.setattr(runner, "importlib", SimpleNamespace(import_module=load))
    return ran


def test_help_prints_the_usage_and_the_suites(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        runner.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m benchmarks")
    assert "not present" not in out
    assert all(name in out for name in runner.SUITES)


def test_an_unknown_suite_is_a_usage_error_and_nothing_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = _fake_suites(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        runner.main(["estimator", "serach"])
    assert exit_.value.code == 2
    assert ran == [], "a typo must not run the suites named before it"
    err = capsys.readouterr().err
    assert "no suite 'serach'" in err and ", ".join(runner.SUITES) in err


def test_no_names_runs_every_suite_in_order_and_names_run_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _fake_suites(monkeypatch)
    assert runner.main([]) == 0
    assert ran == list(runner.SUITES)
    ran.clear()
    assert runner.main(["search", "ledger"]) == 0
    assert ran == ["search", "ledger"]


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_an_unusable_bench_dir_stops_the_run_before_any_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # A HOLON_BENCH_DIR that did not exist crashed `make bench` with a FileNotFoundError
    # traceback, minutes in (the ledger suite's first temporary directory). It is refused
    # before any suite runs, and not created: under a missing mount point it would be made,
    # and measured, on another disk.
    target = tmp_path / "bench"
    if kind == "file":
        target.write_text("")
    monkeypatch.setenv("HOLON_BENCH_DIR", str(target))
    ran = _fake_suites(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        runner.main(["ledger"])
    message = str(exit_.value.code)
    assert message.startswith(f"python -m benchmarks: HOLON_BENCH_DIR={target} ")
    assert ("does not exist: create it" if kind == "missing" else "is not a directory") in message
    assert "unset HOLON_BENCH_DIR" in message
    assert ran == []
    assert target.is_file() if kind == "file" else not target.exists()


def test_a_suite_run_alone_refuses_an_unusable_bench_dir(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.append_cost"],
        cwd=ROOT,
        env={**os.environ, "HOLON_BENCH_DIR": str(missing)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"python -m benchmarks: HOLON_BENCH_DIR={missing} does not exist")


def test_an_existing_bench_dir_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLON_BENCH_DIR", str(tmp_path))
    assert bench_dir() == str(tmp_path)
    monkeypatch.delenv("HOLON_BENCH_DIR")
    assert bench_dir() is None


def test_every_benchmark_module_is_a_suite_make_bench_runs() -> None:
    here = ROOT / "benchmarks"
    modules = {p.stem for p in here.glob("*.py") if "def main(" in p.read_text(encoding="utf-8")}
    modules |= {p.parent.name for p in here.glob("*/__init__.py")}
    # An optional suite (it needs what holon does not install) runs only when named.
    assert modules - {"__main__"} == set(runner.SUITES) | set(runner.OPTIONAL)
    assert not set(runner.SUITES) & set(runner.OPTIONAL)


# ---------------------------------------------------------------- python -m benchmarks.eval


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail fast if the evaluation starts: these commands must be refused before it."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the evaluation ran instead of refusing its arguments")

    monkeypatch.setattr(eval_run, "generate", refuse)


@pytest.mark.usefixtures("no_run")
@pytest.mark.parametrize("turns", ["0", "-3", "many"])
def test_turns_must_be_a_positive_number(turns: str, capsys: pytest.CaptureFixture[str]) -> None:
    # 0 was read as "not given": the full two-minute run, and docs/evaluation.md rewritten.
    with pytest.raises(SystemExit) as exit_:
        eval_run.main(["--turns", turns, "--no-docs"])
    assert exit_.value.code == 2
    assert f"{turns!r} is not a number of turns" in capsys.readouterr().err


@pytest.mark.usefixtures("no_run")
def test_a_samples_folder_holding_none_of_the_transcripts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, it ran: "0 real transcripts from DIR" one line among the tables, and a
    # fingerprint unlike the published one. (A folder that does not exist still skips them.)
    (tmp_path / "claude-code").mkdir()
    with pytest.raises(SystemExit) as exit_:
        eval_run.main(["--samples", str(tmp_path), "--quick"])  # one level too high, say
    assert exit_.value.code == 2
    assert f"holds none of the real transcripts (such as {SAMPLES[0][0]})" in capsys.readouterr().err


def test_a_partial_samples_folder_names_the_transcripts_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fingerprint covers the samples: a partial folder must say why it differs.
    kept = SAMPLES[3][0]
    (tmp_path / kept).parent.mkdir(parents=True)
    (tmp_path / kept).touch()
    monkeypatch.setattr(eval_run, "load_samples", lambda _folder: iter(()))  # nothing is imported here
    monkeypatch.setattr(eval_run, "GENERATED", ())
    monkeypatch.setattr(eval_run, "verdicts", lambda _runs: [])
    assert eval_run.main(["--samples", str(tmp_path), "--no-docs"]) == 0
    missing = ", ".join(rel for rel, _ in SAMPLES if rel != kept)
    assert f" (4 of 5 not found: {missing})" in capsys.readouterr().out


def test_the_generated_doc_shows_the_harness_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        eval_run.main(["--help"])
    help_text = capsys.readouterr().out
    usage = " ".join(help_text.split("\n\n")[0].split()).removeprefix("usage: ")
    for option in ("--samples", "--quick", "--turns", "--no-docs"):
        assert option in usage
    assert usage == eval_run.command_line()
    doc = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    line = re.search(r"^make eval +# = \.venv/bin/(.*)$", doc, re.MULTILINE)
    assert line is not None, "docs/evaluation.md shows the make eval command"
    assert line.group(1) == usage, "regenerate docs/evaluation.md: python -m benchmarks.eval"
