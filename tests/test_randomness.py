"""The randomness figures of Veal & Foong's Table 3 against John Walker's `ent` itself (Debian's package),
figure by figure to the digits it prints, and the invariants they keep for any bytes."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosbench.analysis import randomness as rn
from mosbench.machine import rss

ENT = shutil.which("ent")
needs_ent = pytest.mark.skipif(ENT is None, reason="Debian's ent is not installed (apt-get install ent): "
                                                   "these figures are only checked against its own")


def _toeplitz_low_bytes() -> bytes:
    """Veal & Foong's input: the low 8 bits of each flow's hash, here 5000 client ports to one server."""
    return rn.low_bytes(rss.toeplitz(rss.MICROSOFT_KEY, rss.flow_input("10.0.0.1", "10.0.0.2", port, 11211))
                        for port in range(20000, 25000))


INPUTS = {
    "uniform-random": np.random.default_rng(2008).integers(0, 256, 100_000, dtype=np.uint8).tobytes(),
    "all-zeros": bytes(1000),
    "short": b"abc",  # no Monte Carlo point at all: ent prints -nan
    "one-point": b"\xff\x00\x10\x00\x00\x01\x7f",  # one 6-byte point, one byte left over
    "every-value-equally": bytes(range(256)) * 4,  # chi-square 0: ent's "more than than 99.99"
    "digits-and-spaces": " ".join(str(i) for i in range(3000)).encode(),  # 11 values, far from random
    "toeplitz-low-bytes": _toeplitz_low_bytes(),
}


def _ent(data: bytes, tmp_path: Path) -> str:
    path = tmp_path / "input.bin"
    path.write_bytes(data)
    return subprocess.run([ENT or "ent", str(path)], capture_output=True, text=True, check=True, timeout=60).stdout


@needs_ent
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_figure_as_ent_prints_it(name: str, tmp_path: Path) -> None:
    data = INPUTS[name]
    printed = _ent(data, tmp_path)
    ours = rn.randomness(data)
    assert ours.printed() == rn.parse_ent(printed)
    assert ours.ent_text() == printed


@needs_ent
def test_what_the_inputs_exercise(tmp_path: Path) -> None:
    """The cases above cover each of ent's special outputs, seen in its own text."""
    assert "Monte Carlo value for Pi is -nan (error nan percent)." in _ent(INPUTS["short"], tmp_path)
    assert "undefined (all values equal!)" in _ent(INPUTS["all-zeros"], tmp_path)
    assert "less than 0.01 percent" in _ent(INPUTS["all-zeros"], tmp_path)
    assert "more than than 99.99 percent" in _ent(INPUTS["every-value-equally"], tmp_path)


def test_known_figures() -> None:
    r = rn.randomness(bytes(range(256)) * 4)
    assert r.entropy == pytest.approx(8.0) and r.chi_square == 0.0 and r.chi_square_p == 1.0 and r.mean == 127.5
    zeros = rn.randomness(bytes(60))
    # every point (0, 0) is inside the circle: π = 4
    assert (zeros.entropy, zeros.mean, zeros.monte_carlo_pi, zeros.serial_correlation) == (0.0, 0.0, 4.0, None)
    assert zeros.compression == 100
    # alternating 0 and 255, wrapped around: each byte's successor is the other value
    assert rn.randomness(b"\x00\xff" * 50).serial_correlation == -1.0
    assert rn.randomness(b"abc").serial_correlation == -0.5
    assert rn.low_bytes([0x51CCC178, 0x1FF, 7]) == b"\x78\xff\x07"
    with pytest.raises(ValueError, match="no bytes"):
        rn.randomness(b"")


# Recorded from Debian's ent 1.2debian on an empty file, and in its -t and -b forms.
EMPTY = """Entropy = 0.000000 bits per byte.

Optimum compression would reduce the size
of this 0 byte file by 100 percent.

Chi square distribution for 0 samples is -nan, and randomly
would exceed this value nan percent of the times.

Arithmetic mean value of data bytes is -nan (127.5 = random).
Monte Carlo value for Pi is -nan (error nan percent).
Serial correlation coefficient is undefined (all values equal!).
"""
TERSE = ("0,File-bytes,Entropy,Chi-square,Mean,Monte-Carlo-Pi,Serial-Correlation\n"
         "1,3,1.584963,253.000000,98.000000,-nan,-0.500000\n")  # ent -t of b"abc"
BITS = """Entropy = 0.979869 bits per bit.

Optimum compression would reduce the size
of this 24 bit file by 2 percent.

Chi square distribution for 24 samples is 0.67, and randomly
would exceed this value 41.42 percent of the times.

Arithmetic mean value of data bits is 0.4167 (0.5 = random).
Monte Carlo value for Pi is -nan (error nan percent).
Serial correlation coefficient is -0.028571 (totally uncorrelated = 0.0).
"""  # ent -b of b"abc"


@pytest.mark.parametrize(("text", "message"), [
    (EMPTY, "empty input"),
    (TERSE, "ent -t"),
    (BITS, "ent -b"),
    ("Entropy = 7.9 bits per byte.\n", "no compression line"),
    (EMPTY.replace("Monte Carlo value for Pi", "Monte Carlo estimate"), "no monte carlo line"),
])
def test_what_parse_ent_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rn.parse_ent(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=3000))
def test_invariants(data: bytes) -> None:
    r = rn.randomness(data)
    n = len(data)
    assert r.count == n
    assert -1e-12 <= r.entropy <= min(8.0, math.log2(n)) + 1e-9
    assert r.chi_square >= 0 and 0.0 <= r.chi_square_p <= 1.0
    assert min(data) <= r.mean <= max(data)
    assert (r.monte_carlo_pi is None) == (n < 6) == (r.monte_carlo_error is None)
    if r.monte_carlo_pi is not None:
        assert 0.0 <= r.monte_carlo_pi <= 4.0
        assert r.monte_carlo_pi * (n // 6) / 4 == pytest.approx(round(r.monte_carlo_pi * (n // 6) / 4))
    assert (r.serial_correlation is None) == (len(set(data)) == 1)
    if r.serial_correlation is not None:
        assert -1 - 1e-9 <= r.serial_correlation <= 1 + 1e-9

    # The byte counts alone make entropy, chi-square and mean: the same in any order.
    ordered = rn.randomness(bytes(sorted(data)))
    assert (ordered.entropy, ordered.chi_square, ordered.mean) == (r.entropy, r.chi_square, r.mean)
    # ent's serial correlation wraps the last byte round to the first: a cyclic lag-1 correlation,
    # the same rotated or reversed (its sums are exact integers, so exactly the same).
    for turned in (data[1:] + data[:1], data[::-1]):
        assert rn.randomness(turned).serial_correlation == r.serial_correlation

    # What ent would print reads back as the figures it prints.
    assert rn.parse_ent(r.ent_text()) == r.printed()
