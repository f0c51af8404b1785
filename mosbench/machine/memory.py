"""The machine's memory as /proc/meminfo gives it: read in one place for the environment, the file
systems a point mounts and the workloads that size their data by it."""

from __future__ import annotations

from pathlib import Path


def meminfo_kb(field: str, text: str | None = None) -> int | None:
    """/proc/meminfo's FIELD (MemTotal, MemAvailable) in kB; None where it is absent or unreadable."""
    if text is None:
        try:
            text = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field and value.split():
            return int(value.split()[0])
    return None
