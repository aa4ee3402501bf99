"""Kubernetes resource quantities, parsed, compared and printed the way the API server does.

The grammar is Kubernetes' documented one::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>          <sign> ::= "+" | "-"
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer exponent)

with the API server's own leniencies (a bare sign or ``.`` is zero, ``1.`` is one), its rounding (up, away from
zero, to the nano unit), its cap (binary quantities stop at 2^63-1) and its canonical form (``1.5`` -> ``1500m``,
``1.5Gi`` -> ``1536Mi``, ``1000`` -> ``1k``). Values are exact fractions, so nothing is lost to floats.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from fractions import Fraction

# The texts the API server answers with (k8s.io/apimachinery resource.ErrFormatWrong / ErrSuffix).
FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

_DIGITS = "0123456789"
_SUFFIX_CHARS = "eEinumkKMGTP"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of ten
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL.items()}
_BINARY_BY_STEP = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_NANO = Fraction(1, 10**9)
# Beyond these the API server still parses (its decimals are unbounded) but no resource means anything; the bounds
# keep a hostile manifest from making us compute with million-digit numbers.
MAX_DIGITS = 1000
MAX_EXPONENT = 1000
_MAX_BINARY = Fraction(2**63 - 1)


class Format(enum.Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """Not a quantity; the message is the API server's reason."""


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    fmt: Format = Format.DECIMAL_SI

    @property
    def binary(self) -> bool:
        return self.fmt is Format.BINARY_SI

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        """A quantity from a manifest value: a string as the API server reads it, or a JSON number.

        Surrounding whitespace is allowed (the API server trims a JSON string before parsing); nothing else is.
        """
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            names = {type(None): "null", bool: "true/false", list: "a list", dict: "an object"}
            got = names.get(type(raw), "another type")
            raise QuantityError(f"expected a quantity (a string or a number), got {got}")
        if isinstance(raw, float):
            if not math.isfinite(raw):
                raise QuantityError(FORMAT_ERROR)
            text = repr(raw)  # the shortest text that round-trips, as a JSON encoder writes it
        else:
            text = str(raw).strip()
        return _parse(text)

    def __add__(self, other: Quantity) -> Quantity:
        # Like apimachinery's Add: the sum keeps the receiver's format unless the receiver is zero.
        fmt = other.fmt if self.value == 0 else self.fmt
        return Quantity(self.value + other.value, fmt)

    def scaled(self, n: int) -> Quantity:
        return Quantity(self.value * n, self.fmt)

    def ceil(self) -> int:
        """``Value()`` in Kubernetes: rounded up to an integer (``2500m`` -> 3)."""
        return math.ceil(self.value)

    def is_whole(self) -> bool:
        """A whole number: what the API server requires of extended resources such as GPUs."""
        return self.value.denominator == 1

    def format(self) -> str:
        """The canonical text (``1536Mi``, ``1500m``), as the API server stores it."""
        return canonical(self.value, self.fmt)

    def __str__(self) -> str:
        return self.format()


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Quantity(Fraction(0))
    negative, integer, fraction, suffix = _split(text)
    if len(integer) + len(fraction) > MAX_DIGITS:
        raise QuantityError(f"more than {MAX_DIGITS} digits")
    scale, fmt = _interpret(suffix)
    value = Fraction(int(integer or "0") * 10 ** len(fraction) + int(fraction or "0"), 10 ** len(fraction)) * scale
    if value and value.denominator != 1 and (value / _NANO).denominator != 1:
        value = Fraction(math.ceil(value / _NANO)) * _NANO  # up to the next nano, as the API server rounds
    if negative:
        value = -value
    if fmt is Format.BINARY_SI and value > _MAX_BINARY:
        value = _MAX_BINARY
    return Quantity(value, fmt)


def _split(text: str) -> tuple[bool, str, str, str]:
    """``-1.5Gi`` -> (negative, "1", "5", "Gi"), scanning the way the API server does."""
    pos, end = 0, len(text)
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    integer = text[start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(FORMAT_ERROR)
    return negative, integer, fraction, text[suffix_start:]


def _interpret(suffix: str) -> tuple[Fraction, Format]:
    if suffix in _DECIMAL:
        return Fraction(10) ** _DECIMAL[suffix], Format.DECIMAL_SI
    if suffix in _BINARY:
        return Fraction(2 ** _BINARY[suffix]), Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if digits and all(ch in _DIGITS for ch in digits) and len(digits) <= 19:
            if abs(int(exponent)) > MAX_EXPONENT:
                raise QuantityError(f"exponent {exponent} is out of range (at most {MAX_EXPONENT} either way)")
            return Fraction(10) ** int(exponent), Format.DECIMAL_EXPONENT
    raise QuantityError(SUFFIX_ERROR)


def canonical(value: Fraction, fmt: Format = Format.DECIMAL_SI) -> str:
    """The API server's canonical text: no fraction digits, the largest suffix that loses nothing."""
    if value == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        if -1024 < value < 1024 or value.denominator != 1:
            fmt = Format.DECIMAL_SI  # small or fractional binary values print as decimal, without rounding
        else:
            mantissa, step = int(value), 0
            while step < len(_BINARY_BY_STEP) - 1 and mantissa % 1024 == 0:
                mantissa //= 1024
                step += 1
            return f"{mantissa}{_BINARY_BY_STEP[step]}"
    # value = mantissa * 10**exponent with an integer mantissa and the largest exponent that is a multiple of 3.
    exponent = 0
    scaled = value
    while scaled.denominator != 1:
        scaled *= 1000
        exponent -= 3
    mantissa = int(scaled)
    while mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    while exponent > 18:  # beyond E there is no decimal suffix
        mantissa *= 1000
        exponent -= 3
    return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def sum_requests(resources: list[dict[str, Quantity]]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for r in resources:
        for k, q in r.items():
            out[k] = out[k] + q if k in out else q
    return out
