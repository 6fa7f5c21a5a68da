"""The benchmark runners' command lines: ``python -m benchmarks`` and ``python -m benchmarks.eval``.

Nothing here runs a benchmark: the suites and the evaluation's scenarios are replaced by
stubs that fail if reached when a command should have been refused first.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import benchmarks.__main__ as runner

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


def test_every_benchmark_module_is_a_suite_make_bench_runs() -> None:
    here = ROOT / "benchmarks"
    modules = {p.stem for p in here.glob("*.py") if "def main(" in p.read_text(encoding="utf-8")}
    modules |= {p.parent.name for p in here.glob("*/__init__.py")}
    assert modules - {"__main__"} == set(runner.SUITES)
