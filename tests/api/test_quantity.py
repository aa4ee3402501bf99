"""Quantities parsed as the API server parses them: a table derived from Kubernetes' documented grammar
(``<signedNumber><suffix>``, binary Ki..Ei, decimal n..E, ``e``/``E`` exponents) and its canonical form
(1.5 -> 1500m, 1.5Gi -> 1536Mi), plus the leniencies and limits of the implementation."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubetrain.api.quantity import FORMAT_ERROR, SUFFIX_ERROR, Format, Quantity, QuantityError, canonical
from kubetrain.api.resources import CRD_PATTERN, format_problem

F = Fraction
VALID = [
    # (input, exact value, canonical text, format)
    ("0", F(0), "0", Format.DECIMAL_SI),
    ("1", F(1), "1", Format.DECIMAL_SI),
    ("+1", F(1), "1", Format.DECIMAL_SI),
    ("-1", F(-1), "-1", Format.DECIMAL_SI),
    ("007", F(7), "7", Format.DECIMAL_SI),
    ("1.", F(1), "1", Format.DECIMAL_SI),  # <digits>. is a number
    (".5", F(1, 2), "500m", Format.DECIMAL_SI),  # .<digits> is a number
    ("1.5", F(3, 2), "1500m", Format.DECIMAL_SI),  # the documented example
    ("-1.5", F(-3, 2), "-1500m", Format.DECIMAL_SI),
    ("100m", F(1, 10), "100m", Format.DECIMAL_SI),
    ("1000m", F(1), "1", Format.DECIMAL_SI),
    ("2500m", F(5, 2), "2500m", Format.DECIMAL_SI),
    ("1000", F(1000), "1k", Format.DECIMAL_SI),  # the largest suffix that loses nothing
    ("1001", F(1001), "1001", Format.DECIMAL_SI),
    ("1n", F(1, 10**9), "1n", Format.DECIMAL_SI),
    ("1u", F(1, 10**6), "1u", Format.DECIMAL_SI),
    ("0.1m", F(1, 10**4), "100u", Format.DECIMAL_SI),
    ("1k", F(10**3), "1k", Format.DECIMAL_SI),
    ("1M", F(10**6), "1M", Format.DECIMAL_SI),
    ("1G", F(10**9), "1G", Format.DECIMAL_SI),
    ("10G", F(10**10), "10G", Format.DECIMAL_SI),
    ("1T", F(10**12), "1T", Format.DECIMAL_SI),
    ("1P", F(10**15), "1P", Format.DECIMAL_SI),
    ("1E", F(10**18), "1E", Format.DECIMAL_SI),  # a lone E is exa, not an exponent
    ("1000E", F(10**21), "1000E", Format.DECIMAL_SI),
    ("1Ki", F(1024), "1Ki", Format.BINARY_SI),
    ("1024Ki", F(2**20), "1Mi", Format.BINARY_SI),
    ("1.5Gi", F(3 * 2**29), "1536Mi", Format.BINARY_SI),  # the documented example
    ("0.5Gi", F(2**29), "512Mi", Format.BINARY_SI),
    ("0.9Gi", F(9 * 2**30, 10), "966367641600m", Format.BINARY_SI),  # not whole: printed as decimal
    ("1Ti", F(2**40), "1Ti", Format.BINARY_SI),
    ("1Pi", F(2**50), "1Pi", Format.BINARY_SI),
    ("1Ei", F(2**60), "1Ei", Format.BINARY_SI),
    ("1024Ei", F(2**63 - 1), "9223372036854775807", Format.BINARY_SI),  # binary quantities are capped
    ("1e3", F(1000), "1e3", Format.DECIMAL_EXPONENT),
    ("1E3", F(1000), "1e3", Format.DECIMAL_EXPONENT),
    ("1e+3", F(1000), "1e3", Format.DECIMAL_EXPONENT),
    ("1e-3", F(1, 1000), "1e-3", Format.DECIMAL_EXPONENT),
    ("1.5e3", F(1500), "1500", Format.DECIMAL_EXPONENT),
    ("12e2", F(1200), "1200", Format.DECIMAL_EXPONENT),
    # Rounded up (away from zero) to the nano unit.
    ("0.0000000001", F(1, 10**9), "1n", Format.DECIMAL_SI),
    ("-0.0000000001", F(-1, 10**9), "-1n", Format.DECIMAL_SI),
    ("1.0000000001", F(10**9 + 1, 10**9), "1000000001n", Format.DECIMAL_SI),
    # The API server's leniencies: an empty number is zero, and JSON strings are trimmed first.
    ("-", F(0), "0", Format.DECIMAL_SI),
    ("+.", F(0), "0", Format.DECIMAL_SI),
    ("Gi", F(0), "0", Format.BINARY_SI),
    (" 2 ", F(2), "2", Format.DECIMAL_SI),
]

INVALID = [
    ("", FORMAT_ERROR),
    ("lots", FORMAT_ERROR),
    ("10XB", FORMAT_ERROR),
    ("1Kb", FORMAT_ERROR),
    ("1.2.3", FORMAT_ERROR),
    ("1 Gi", FORMAT_ERROR),
    ("--1", SUFFIX_ERROR),  # the second sign is read as the start of a suffix
    ("0x10", FORMAT_ERROR),
    ("1,5", FORMAT_ERROR),
    ("1e1.5", FORMAT_ERROR),  # exponents are integers
    ("NaN", FORMAT_ERROR),
    ("1K", SUFFIX_ERROR),  # kilo is a lower-case k
    ("1Kii", SUFFIX_ERROR),
    ("1mi", SUFFIX_ERROR),
    ("1e", SUFFIX_ERROR),
    ("1e+", SUFFIX_ERROR),
    ("1ee3", SUFFIX_ERROR),
    ("1Mi2", SUFFIX_ERROR),
]


@pytest.mark.parametrize(("text", "value", "canon", "fmt"), VALID, ids=[v[0] or "empty" for v in VALID])
def test_valid_quantities(text: str, value: Fraction, canon: str, fmt: Format) -> None:
    q = Quantity.parse(text)
    assert (q.value, q.format(), q.fmt) == (value, canon, fmt)


@pytest.mark.parametrize(("text", "reason"), INVALID, ids=[i[0] or "empty" for i in INVALID])
def test_invalid_quantities(text: str, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        Quantity.parse(text)
    assert str(info.value) == reason


@pytest.mark.parametrize(("number", "canon"), [(2, "2"), (1.5, "1500m"), (0.25, "250m"), (1e-05, "10e-6"),
                                               (1000, "1k")])
def test_json_numbers(number: float, canon: str) -> None:
    assert Quantity.parse(number).format() == canon


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_non_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(bad)


def test_absurd_sizes_are_refused_not_computed() -> None:
    with pytest.raises(QuantityError, match="exponent"):
        Quantity.parse("1e999999999")
    with pytest.raises(QuantityError, match="digits"):
        Quantity.parse("1" * 5000)


def test_sums_keep_the_first_non_zero_format() -> None:
    total = Quantity.parse("0") + Quantity.parse("1Gi") + Quantity.parse("512Mi")
    assert total.format() == "1536Mi"
    assert (Quantity.parse("1") + Quantity.parse("500m")).format() == "1500m"
    assert canonical(Fraction(3, 2), Format.BINARY_SI) == "1500m"


# The CRD schemas put a pattern on every quantity: strings must match it as well as parse.
@pytest.mark.parametrize("text", ["1", "1.5", "500m", "4Gi", "1e3", "+1", "-1", "1.", ".5", "1.5e3", "1E"])
def test_crd_pattern_accepts(text: str) -> None:
    assert CRD_PATTERN.match(text)
    assert format_problem(text) is None


@pytest.mark.parametrize(("text", "reason"), [
    ("-", "the CRD schema requires"), (".", "the CRD schema requires"), ("Gi", "the CRD schema requires"),
    (" 1", "the CRD schema requires"), ("1e1.5", "not a quantity"), ("1K", "unable to parse quantity's suffix"),
    ("lots", "not a quantity"),
])
def test_crd_fields_reject(text: str, reason: str) -> None:
    problem = format_problem(text)
    assert problem is not None and reason in problem[0]
    assert problem[0].startswith(f"invalid quantity {text!r}")


def test_a_float_in_a_crd_field_is_explained() -> None:
    assert format_problem(1.5) == (
        "expected a quantity as a string or an integer, got the number 1.5",
        'quote it ("1.5") or write it without a fraction (e.g. 1500m for 1.5)',
    )
