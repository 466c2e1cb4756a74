"""Text that people type and that ends up in a file: what may go there.

A string from a JSON request may hold a lone surrogate (``"\\ud800"``: JSON allows the
escape, UTF-8 cannot encode it) or control characters that make a line-based file say
something else (a carriage return, NUL, an escape sequence). Every writer of text that
people type (screening reasons, notes, captions, QA pairs, passwords) checks it with
:func:`check_text` before anything is stored; :func:`repair_text` mends text stored before
the check existed (``microg4m team rebuild``).
"""

from __future__ import annotations

import re

# lone surrogates (Unicode category Cs) and control characters (Cc) other than tab and newline
_SURROGATE = "\ud800-\udfff"
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_BAD = re.compile(f"[{_SURROGATE}{_CONTROL}]")
_BAD_SURROGATE = re.compile(f"[{_SURROGATE}]")
REPLACEMENT = "\ufffd"


class TextError(ValueError):
    """Text that cannot go into a file; the message names the field and the character."""


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot go into a UTF-8 file as it is (None when it can)."""
    m = _BAD.search(text)
    if m is None:
        return None
    code, at = ord(m.group()), m.start() + 1
    if _BAD_SURROGATE.match(m.group()):
        return f"a lone surrogate U+{code:04X} at character {at} (not encodable as UTF-8)"
    return f"the control character U+{code:04X} at character {at} (only tab and newline are allowed)"


def check_text(text: str, what: str) -> str:
    """``text`` unchanged, or :class:`TextError` naming ``what`` and the reason."""
    problem = text_problem(text)
    if problem is not None:
        raise TextError(f"{what} holds {problem}")
    return text


def repair_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD and other control characters by a space."""
    return _BAD.sub(lambda m: REPLACEMENT if _BAD_SURROGATE.match(m.group()) else " ", text)


def repair_value(value):
    """A JSON value (str, list, dict, number...) with every string repaired; keys too."""
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        return [repair_value(v) for v in value]
    if isinstance(value, dict):
        return {repair_text(k): repair_value(v) for k, v in value.items()}
    return value


def value_problem(value) -> str | None:
    """Why a JSON value (its strings and keys, at any depth) cannot go into a file, or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if problem := text_problem(v):
                return f"{problem} in {v!r}"
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return None
