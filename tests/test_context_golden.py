"""Golden prompts: each fixture ledger renders to the committed text and adapter forms."""

from __future__ import annotations

import pytest

from tests.golden import GENERATORS, GOLDEN

_FILES = GENERATORS["context"]()


def test_every_fixture_has_all_prompt_forms() -> None:
    fixtures = {path.split("/")[0] for path in _FILES}
    assert fixtures, "no fixture ledgers found"
    for fixture in fixtures:
        for suffix in ("txt", "anthropic.json", "openai-chat.json", "openai-responses.json", "rendered.json"):
            assert f"{fixture}/prompt.{suffix}" in _FILES


@pytest.mark.parametrize("relative", sorted(_FILES))
def test_golden_prompt_is_current(relative: str) -> None:
    path = GOLDEN / relative
    assert path.exists(), f"missing {relative}: run `make golden` and review the diff"
    assert path.read_bytes() == _FILES[relative], f"stale {relative}: run `make golden` and review the diff"
