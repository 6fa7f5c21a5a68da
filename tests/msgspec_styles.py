"""msgspec as another version raises and words its errors: holon must decide the same under each.

msgspec 0.23 reports text that is not UTF-8 as a ``DecodeError`` ("Invalid UTF-8 encoded
string") where older versions raised ``UnicodeDecodeError``, and any release may reword a
message. :func:`use_style` puts holon's decoders (the record codec's and the importers')
behind a wrapper that raises the same failures another way; a test run under every style
shows that what holon refuses, and what it says of it, follows the input's bytes.

Styles:

* ``installed``: msgspec as installed, unchanged;
* ``reworded``: every message in other words, the path (`` - at `$.body.role` ``) kept;
* ``pathless``: every message in other words with no path at all;
* ``unicode-decode-error``: every refusal of the bytes themselves (not of a value the schema
  does not accept) raised as ``UnicodeDecodeError``, as msgspec before 0.23 raises it for
  text that is not UTF-8. Only faithful for input whose bytes are sound but for their text
  (or cut off): holon must look at the bytes rather than trust the exception's class.

The two venvs of issue 27 run the real versions (0.22, the last raising UnicodeDecodeError,
and the newest); these styles keep the suite honest on whichever one is installed.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
import pytest

from holon.importers import _shape
from holon.records import wire

__all__ = ["STYLES", "styled", "use_style"]

STYLES: Final = ("installed", "reworded", "pathless", "unicode-decode-error")

_PATH: Final = re.compile(r" - at `\$[^`]*`$")


class _Styled:
    """A msgspec decoder whose failures are raised in ``style``."""

    def __init__(self, decoder: Any, style: str) -> None:
        self._decoder = decoder
        self._style = style

    def decode(self, data: Any) -> Any:
        try:
            return self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(self._reworded(str(exc))) from None
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            if self._style == "unicode-decode-error":
                raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "as msgspec before 0.23 raised it") from None
            raise msgspec.DecodeError(self._reworded(str(exc))) from None

    def _reworded(self, text: str) -> str:
        if self._style == "unicode-decode-error":
            return text
        path = _PATH.search(text)
        kept = path.group() if path is not None and self._style == "reworded" else ""
        return f"the decoder would not have these bytes{kept}"


def styled(decoder: Any, style: str) -> Any:
    """``decoder`` raising its failures in ``style`` (itself for ``installed``)."""
    assert style in STYLES, style
    return decoder if style == "installed" else _Styled(decoder, style)


def use_style(monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    """Make holon's record codec and importers decode through msgspec raising in ``style``."""
    assert style in STYLES, style
    if style == "installed":
        return
    for name in ("_MSGPACK_FAST", "_JSON_FAST", "_MSGPACK_ENVELOPE", "_JSON_ENVELOPE"):
        monkeypatch.setattr(wire, name, _Styled(getattr(wire, name), style))
    monkeypatch.setattr(wire, "_decode_msgpack_fast", wire._MSGPACK_FAST.decode)
    for bodies in (wire._MSGPACK_BODIES, wire._JSON_BODIES):
        for kind, decoder in list(bodies.items()):
            monkeypatch.setitem(bodies, kind, _Styled(decoder, style))
    monkeypatch.setattr(_shape, "_JSON_DECODER", _Styled(_shape._JSON_DECODER, style))
