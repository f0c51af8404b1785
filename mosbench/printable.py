"""Text from the store made safe to print: whoever can store a run (every machine of a lab writing one
PostgreSQL store) chooses its label, hostname and command, and a terminal obeys the escapes in them
(colours, the window's title, hidden text, cursor moves), a mail header takes a line break as a new
header. Stored text stays as it was given; only what is printed is changed."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the other characters that move or hide text without being control codes:
# Unicode's line and paragraph separators and the bidirectional overrides and isolates ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """text with every character that a terminal or a mail would act on written as its escape (ESC as
    \\x1b, a newline as \\x0a), so the reader sees what is stored rather than what it would do."""
    return _UNSAFE.sub(_escaped, text)


def one_line(text: str, limit: int = 200) -> str:
    """printable(text), cut to about limit characters with the count of what was left out: a 100 KB name
    in an error or a header is one readable line."""
    safe = printable(text)
    if len(safe) <= limit:
        return safe
    return f"{safe[:limit]}… ({len(safe) - limit} more characters)"

