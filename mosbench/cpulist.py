"""The kernel's CPU list format ("0-3,8,10-11"), used by sysfs, cpusets and our own CLI output."""

from collections.abc import Iterable


def parse(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        start, end = int(lo), int(hi or lo)
        if end < start:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(range(start, end + 1))
    return cpus


def format(cpus: Iterable[int]) -> str:
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
