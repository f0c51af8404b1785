"""How random a byte sequence looks: the tests of Veal & Foong's Table 3, as John Walker's `ent` does them.

Veal & Foong (paper 002) took the low 8 bits of each connection's RSS hash and ran `ent` over them to
show that the NIC's Toeplitz hash spreads flows like a random function would. The figures here are
ent's, computed the way ent computes them (its sums, its order of operations, its conventions), so that
each agrees with ent's printout to the digit it prints:

- entropy in bits per byte, Σ p·log2(1/p) over the 256 values, log2 taken as log10 × log2(10);
- the chi-square statistic against 256 equally likely values, and the probability that a random
  sequence exceeds it (255 degrees of freedom; here scipy's, where ent uses Perlman's approximation);
- the arithmetic mean;
- π by Monte Carlo: each successive 6 bytes are a point, X from the first three and Y from the last
  three (24-bit big-endian integers), counted inside when X² + Y² ≤ (256³ − 1)²; a trailing group
  shorter than 6 bytes is left out, and with no group at all there is no value (ent prints -nan);
- the serial correlation coefficient of each byte with the next, the last byte's successor being
  the first (a cyclic lag-1 autocorrelation), undefined when every byte is the same.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

LOG2_OF_10 = 3.32192809488736234787  # ent's constant: its log2(x) is this × log10(x)
MONTE_CARLO_BYTES = 6
# A point's coordinates are 24-bit; inside the quarter circle of radius 256³ − 1 (ent: ≤, squared).
IN_CIRCLE = (256**3 - 1) ** 2
DEGREES_OF_FREEDOM = 255


@dataclass(frozen=True)
class Randomness:
    count: int  # bytes tested
    entropy: float  # bits per byte, 0 to 8
    chi_square: float
    chi_square_p: float  # probability that a random sequence's statistic would exceed chi_square
    mean: float  # 127.5 for random bytes
    monte_carlo_pi: float | None  # None with fewer than 6 bytes
    monte_carlo_error: float | None  # percent of π, as ent prints it
    serial_correlation: float | None  # None when all bytes are equal (ent: "undefined")

    @property
    def compression(self) -> int:
        """ent's "optimum compression would reduce the size by N percent": (8 − entropy)/8, truncated."""
        return int(100 * (8 - self.entropy) / 8.0)

    def printed(self) -> Randomness:
        """These figures as ent prints them: rounded to its digits, and the probability, which ent only
        bounds below 0.01% and above 99.99%, as 0.0 and 1.0 there. Equal to `parse_ent` of ent's report
        of the same bytes."""
        def at(x: float | None, digits: int) -> float | None:
            return None if x is None else float(f"{x:.{digits}f}")

        p = self.chi_square_p
        return replace(
            self,
            entropy=float(f"{self.entropy:f}"),
            chi_square=float(f"{self.chi_square:.2f}"),
            chi_square_p=0.0 if p < 0.0001 else 1.0 if p > 0.9999 else float(f"{p * 100:.2f}") / 100,
            mean=float(f"{self.mean:.4f}"),
            monte_carlo_pi=at(self.monte_carlo_pi, 9),
            monte_carlo_error=at(self.monte_carlo_error, 2),
            serial_correlation=at(self.serial_correlation, 6))

    def ent_text(self) -> str:
        """The report `ent` (no options) prints for the same bytes, character for character."""
        p = self.chi_square_p
        exceed = "less than 0.01" if p < 0.0001 else "more than than 99.99" if p > 0.9999 else f"{p * 100:.2f}"
        # ent divides 0 points inside by 0 points: glibc prints that NaN as -nan, its error as nan
        pi = "-nan" if self.monte_carlo_pi is None else f"{self.monte_carlo_pi:.9f}"
        error = "nan" if self.monte_carlo_error is None else f"{self.monte_carlo_error:.2f}"
        scc = ("undefined (all values equal!)" if self.serial_correlation is None
               else f"{self.serial_correlation:.6f} (totally uncorrelated = 0.0)")
        return (f"Entropy = {self.entropy:f} bits per byte.\n\n"
                f"Optimum compression would reduce the size\n"
                f"of this {self.count} byte file by {self.compression} percent.\n\n"
                f"Chi square distribution for {self.count} samples is {self.chi_square:.2f}, and randomly\n"
                f"would exceed this value {exceed} percent of the times.\n\n"
                f"Arithmetic mean value of data bytes is {self.mean:.4f} (127.5 = random).\n"
                f"Monte Carlo value for Pi is {pi} (error {error} percent).\n"
                f"Serial correlation coefficient is {scc}.\n")


def low_bytes(hashes: Iterable[int]) -> bytes:
    """The low 8 bits of each hash, the sequence Veal & Foong tested."""
    return bytes(h & 0xFF for h in hashes)


def randomness(data: bytes | bytearray | memoryview) -> Randomness:
    """ent's figures for a byte sequence (at least one byte)."""
    import numpy as np  # here: the command line imports this module, and starts without numpy

    a = np.frombuffer(bytes(data), dtype=np.uint8).astype(np.int64)
    n = int(a.size)
    if n == 0:
        raise ValueError("no bytes to test")
    counts = np.bincount(a, minlength=256).tolist()

    # Bin by bin in ent's order and arithmetic, so rounding lands where ent's does.
    expected = n / 256.0
    chi_square = 0.0
    entropy = 0.0
    for c in counts:
        chi_square += (c - expected) * (c - expected) / expected
        if c:
            p = c / n
            entropy += p * (LOG2_OF_10 * math.log10(1 / p))
    mean = sum(i * c for i, c in enumerate(counts)) / n

    groups = n // MONTE_CARLO_BYTES
    pi = error = None
    if groups:
        g = a[:groups * MONTE_CARLO_BYTES].reshape(groups, MONTE_CARLO_BYTES)
        x = (g[:, 0] << 16) | (g[:, 1] << 8) | g[:, 2]
        y = (g[:, 3] << 16) | (g[:, 4] << 8) | g[:, 5]
        inside = int(np.count_nonzero(x * x + y * y <= IN_CIRCLE))  # < 2^50: exact in int64
        pi = 4.0 * (inside / groups)
        error = 100.0 * (abs(math.pi - pi) / math.pi)

    # ent's sums are of integers and exact in a double up to ~10^11 bytes; its last steps are not,
    # and are done here in the same floating-point order.
    pairs = int(np.dot(a[:-1], a[1:])) + int(a[-1]) * int(a[0])
    total = int(a.sum())
    squares = int(np.dot(a, a))
    total_squared = float(total) * float(total)
    denominator = n * float(squares) - total_squared
    serial = None if denominator == 0.0 else (n * float(pairs) - total_squared) / denominator

    from scipy import stats  # here: the CLI imports this module, and scipy.stats takes a second to import

    return Randomness(
        count=n, entropy=entropy, chi_square=chi_square,
        chi_square_p=float(stats.chi2.sf(chi_square, DEGREES_OF_FREEDOM)),
        mean=mean, monte_carlo_pi=pi, monte_carlo_error=error, serial_correlation=serial)


_NUMBER = r"(-?nan|-?\d+(?:\.\d+)?)"
_ENT = {
    "entropy": rf"Entropy = {_NUMBER} bits per (byte|character|bit)\.",
    "compression": r"of this (\d+) (?:byte|character|bit) file by (-?\d+) percent\.",
    "chi_square": rf"Chi square distribution for (\d+) samples is {_NUMBER}, and randomly",
    # ent 1.2 says "more than than 99.99"; accept it fixed too
    "exceed": r"would exceed this value (less than 0\.01|more than (?:than )?99\.99|-?nan|\d+\.\d+) percent of the",
    "mean": rf"Arithmetic mean value of data (?:byte|character|bit)s is {_NUMBER} \(",
    "monte_carlo": rf"Monte Carlo value for Pi is {_NUMBER} \(error {_NUMBER} percent\)\.",
    "serial": r"Serial correlation coefficient is (undefined \(all values equal!\)|-?\d+\.\d+)",
}


def parse_ent(text: str) -> Randomness:
    """ent's default report (not -t, not -b) read back, in `Randomness.printed`'s terms: what ent
    prints as -nan or "undefined" is None, a probability it only bounds is 0.0 or 1.0."""
    if text.lstrip().startswith("0,File-"):
        raise ValueError("ent -t (terse CSV) output; parse_ent reads ent's default report")
    found: dict[str, re.Match[str]] = {}
    for name, pattern in _ENT.items():
        m = re.search(pattern, text)
        if m is None:
            raise ValueError(f"ent's report has no {name.replace('_', ' ')} line")
        found[name] = m
    if found["entropy"].group(2) == "bit":
        raise ValueError("ent -b (bit stream) output; parse_ent reads the byte report")
    count = int(found["chi_square"].group(1))
    if count == 0:
        raise ValueError("ent's report of an empty input")

    def number(text: str) -> float | None:
        return None if text.lstrip("-") == "nan" else float(text)

    exceed = found["exceed"].group(1)
    p = 0.0 if exceed.startswith("less") else 1.0 if exceed.startswith("more") else float(exceed) / 100
    serial = found["serial"].group(1)
    entropy, chi_square, mean = (number(found[k].group(i)) for k, i in (("entropy", 1), ("chi_square", 2),
                                                                         ("mean", 1)))
    if entropy is None or chi_square is None or mean is None:
        raise ValueError("ent's report gives nan where a non-empty input has a figure")
    return Randomness(
        count=count, entropy=entropy, chi_square=chi_square, chi_square_p=p, mean=mean,
        monte_carlo_pi=number(found["monte_carlo"].group(1)),
        monte_carlo_error=number(found["monte_carlo"].group(2)),
        serial_correlation=None if serial.startswith("undefined") else float(serial))
