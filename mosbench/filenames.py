"""One rule for a name that becomes part of a file's name: a figure's, a report directory's, a process's log."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def file_stem(name: str) -> str:
    """`name` with each run of characters other than letters, digits, `_`, `.` and `-` made one `_`
    ("user@[::1]" → "user_1_"): nothing a shell or a URL would read otherwise."""
    return _UNSAFE.sub("_", name)
