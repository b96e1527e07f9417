"""Untrusted values in messages: shown short and safely, and the characters a name read
from a file may not hold.

Why: a value from a store or a command line can be megabytes, or a hostile ``__repr__``;
an error message only has to say which value it was.
"""

from __future__ import annotations

import math
import reprlib
import unicodedata
from typing import Any

MAX_SHOWN = 200
"""Characters of a value an error message repeats: a value from a store or a command line
can be megabytes, and the message only has to say which one it was."""


class _ShortRepr(reprlib.Repr):
    """``repr`` cut short, and safe where ``repr`` is not: an integer past ``str``'s digit
    limit (Python 3.11 raises ``ValueError`` for 4,300 digits) is described, not written."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, 12, 12, 12
        self.maxset = self.maxfrozenset = self.maxdeque = self.maxarray = 12
        self.maxstring = self.maxother = MAX_SHOWN
        self.maxlong = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 600:
            return f"<an integer of about {int(x.bit_length() * math.log10(2)) + 1:,} digits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()


def short(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for an error message: at most ``limit`` characters (then ``...``),
    nested values cut at a few levels, and never an exception of its own."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # a hostile __repr__, a digit limit: say what it was
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories a name read from a file may not hold: control characters, format
characters (a right-to-left override would show ``KO`` as another name), surrogates,
private-use, unassigned, and line or paragraph separators."""


def is_printable(text: str) -> bool:
    """Whether ``text`` holds no character of the :data:`UNPRINTABLE` categories.

    Why: a name read from a file (a method in a run log, a title) is printed to a
    terminal as it is, where ``\\x1b[2J`` clears the screen and an OSC sequence retitles
    the window or writes a link; refusing such a name keeps every view of it plain.
    """
    return not any(unicodedata.category(c) in UNPRINTABLE for c in text)
