"""Text from the store made safe to print: whoever can store a run (every machine of a lab writing one
PostgreSQL store) chooses its label, hostname and command, and a terminal obeys the escapes in them
(colours, the window's title, hidden text, cursor moves), a mail header takes a line break as a new
header. Stored text stays as it was given; only what is printed is changed."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the other characters that move or hide text without being control codes:
# Unicode's line and paragraph separators and the bidirectional overrides and isolates ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# A run of characters with no space or quote in it: a name as an error quotes it.
_RUN = re.compile("[^\\s'\"]+")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """text with every character that a terminal or a mail would act on written as its escape (ESC as
    \\x1b, a newline as \\x0a), so the reader sees what is stored rather than what it would do. `keep`:
    characters left as they are where the output means them (the newlines of a page or of several lines)."""
    if keep:
        return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escaped(m), text)
    return _UNSAFE.sub(_escaped, text)


def _cut(safe: str, limit: int) -> str:
    return safe if len(safe) <= limit else f"{safe[:limit]}… ({len(safe) - limit} more characters)"


def one_line(text: str, limit: int = 200) -> str:
    """printable(text), cut to about limit characters with the count of what was left out: a 100 KB name
    in an error or a header is one readable line."""
    return _cut(printable(text), limit)


def quoted(value: object, limit: int = 100) -> str:
    """A value a user gave, quoted in an error as repr quotes it, printable and cut (one_line)."""
    return f"'{one_line(str(value), limit)}'"


def error_line(text: str, name_limit: int = 200, limit: int = 2000) -> str:
    """An error's text as the one line the command line prints: printable, each name in it (a run of
    characters without a space or a quote) cut at name_limit and the whole at limit, whichever module
    wrote it and however long the name the user gave it."""
    safe = _RUN.sub(lambda m: _cut(m.group(), name_limit), printable(text))
    return _cut(safe, limit)
