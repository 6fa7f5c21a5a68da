"""Golden CLI output: replay, render (every format), explain and memory of every fixture ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon.projections import PROJECTION_VERSION
from tests.cli_support import fixture_names
from tests.golden import CLI_RUNS, GOLDEN, cli_outputs

_NAMES = fixture_names()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    directory = tmp_path_factory.mktemp("golden-cli")
    for name in _NAMES:
        files.update(cli_outputs(name, directory))
    return files


def test_there_are_fixture_ledgers() -> None:
    assert len(_NAMES) >= 6


@pytest.mark.parametrize("name", _NAMES)
def test_every_fixture_has_every_golden_cli_file(name: str) -> None:
    missing = [file for file in CLI_RUNS if not (GOLDEN / name / file).exists()]
    assert not missing, f"missing golden files for {name}: {missing}; run `make golden` and review the diff"


@pytest.mark.parametrize("relative", [f"{n}/{f}" for n in _NAMES for f in CLI_RUNS])
def test_golden_cli_output_is_current(relative: str, outputs: dict[str, bytes]) -> None:
    path: Path = GOLDEN / relative
    assert path.exists(), f"missing {relative}: run `make golden` and review the diff"
    assert outputs[relative] == path.read_bytes(), f"stale {relative}: run `make golden` and review the diff"


def test_golden_replay_shows_memory_and_prompts() -> None:
    text = (GOLDEN / "session_multi_work" / "cli-replay.txt").read_text()
    assert "turn 220 ·" in text
    assert "memory   revision" in text and "→" in text
    assert "episode  " in text and "finalized" in text
    assert "cache key changed" in text and "cache key unchanged" in text
    assert text.rstrip().endswith(f"(projection version {PROJECTION_VERSION})")
