"""Regressions found in an adversarial review of holon.context (one test per bug)."""

from __future__ import annotations

import pytest

from holon.context import parse_ref
from holon.errors import InvalidRef


@pytest.mark.parametrize("scheme", ["ledger", "episode"])
def test_a_ref_with_more_digits_than_int_converts_is_an_invalid_ref(scheme: str) -> None:
    # Python refuses to convert more than 4300 digits (sys.int_info.str_digits_check_threshold):
    # a model's or user's garbage ref must still be an InvalidRef (the recall tool and
    # `holon get` handle that), not a bare ValueError reported as an internal error.
    ref = f"{scheme}:" + "9" * 5000
    with pytest.raises(InvalidRef, match="too many digits"):
        parse_ref(ref)
