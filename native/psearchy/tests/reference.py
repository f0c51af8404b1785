#!/usr/bin/env python3
"""The indexer's reference: a plain word -> places map of a corpus, checked against the index's answers.

  reference.py corpus DIR [--files N] [--seed S]   writes a small corpus with the awkward cases
  reference.py check DIR QUERY-COMMAND...            queries every word of DIR (plus some non-words)
                                                    and compares every answer with the reference

A word is a maximal run of ASCII letters and digits, lower-cased; runs longer than 100 are not
indexed. Answers are "WORD<TAB>PATH<TAB>OFFSET", by path then offset.
"""

import os
import random
import re
import subprocess
import sys
from collections import defaultdict

WORD = re.compile(rb"[A-Za-z0-9]+")
MAX_WORD = 100


def make_corpus(root: str, files: int, seed: int) -> None:
    rng = random.Random(seed)
    vocab = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                   for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    seps = [b" ", b"\n", b"_", b"->", b"(", b"\t", b".", b"\xc3\xa9", b"\x00"]
    for i in range(files):
        d = os.path.join(root, f"d{i % 7}", f"e{i % 3}")
        os.makedirs(d, exist_ok=True)
        size = int(rng.paretovariate(1.2) * 1000)
        parts: list[bytes] = []
        written = 0
        while written < size:
            # Half Zipf-like (a few words very often), half spread over the whole vocabulary.
            if rng.random() < 0.5:
                word = vocab[min(int(rng.paretovariate(0.8)) - 1, len(vocab) - 1)]
            else:
                word = rng.choice(vocab)
            sep = rng.choice(seps)
            parts += (word, sep)
            written += len(word) + len(sep)
        if i % 11 == 0:
            parts.append(b"x" * MAX_WORD + b" " + b"y" * (MAX_WORD + 1) + b" ")
        if i % 13 == 0:
            parts.pop()  # a word right at the end of the file
        with open(os.path.join(d, f"f{i}.txt"), "wb") as f:
            f.write(b"".join(parts))
    open(os.path.join(root, "empty"), "wb").close()
    os.symlink("d0", os.path.join(root, "link-not-followed"))


def reference(root: str) -> dict[bytes, list[tuple[bytes, int]]]:
    places: dict[bytes, list[tuple[bytes, int]]] = defaultdict(list)
    root = os.path.realpath(root)
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            path = os.path.join(d, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            for m in WORD.finditer(data):
                if len(m.group()) <= MAX_WORD:
                    places[m.group().lower()].append((os.fsencode(path), m.start()))
    for v in places.values():
        v.sort()
    return places


def check(root: str, command: list[str]) -> int:
    ref = reference(root)
    words = sorted(ref)
    absent = [b"notaword_", b"zzzznotthere", b"x" * (MAX_WORD + 1), b""]
    q = subprocess.run(command, input=b"\n".join(words + absent) + b"\n", capture_output=True)
    if q.returncode != 0:
        print(f"query failed ({q.returncode}): {q.stderr.decode(errors='replace')}")
        return 1
    got: dict[bytes, list[tuple[bytes, int]]] = defaultdict(list)
    for line in q.stdout.splitlines():
        w, path, off = line.split(b"\t")
        got[w].append((path, int(off)))
    bad = [w for w in words if got.get(w) != ref[w]]
    extra = [w for w in got if w not in ref]
    if bad or extra:
        for w in (bad + extra)[:5]:
            print(f"word {w!r}: reference {ref.get(w, [])[:4]}, index {got.get(w, [])[:4]}")
        print(f"{len(bad)} of {len(words)} words answered wrongly, {len(extra)} answered that do not occur")
        return 1
    occurrences = sum(map(len, ref.values()))
    print(f"all {len(words)} words ({occurrences} places) answered as the reference")
    return 0


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "corpus":
        files = int(sys.argv[sys.argv.index("--files") + 1]) if "--files" in sys.argv else 120
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
        make_corpus(sys.argv[2], files, seed)
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
