"""Kubernetes resource quantities (``500m``, ``4Gi``, ``2.5``): parse, add, scale, format."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


class QuantityError(ValueError):
    pass


@dataclass(frozen=True)
class Quantity:
    value: Decimal
    binary: bool = False

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        if isinstance(raw, bool):
            raise QuantityError(f"{raw!r} is not a quantity")
        if isinstance(raw, int | float):
            return cls(Decimal(str(raw)))
        text = str(raw).strip()
        m = _RE.match(text)
        if not m:
            raise QuantityError(f"{raw!r} is not a quantity (expected e.g. 2, 500m, 4Gi)")
        number, suffix = m.group(1), m.group(2) or ""
        try:
            base = Decimal(number)
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
            raise QuantityError(f"{raw!r} is not a quantity") from exc
        if suffix in _BINARY:
            return cls(base * _BINARY[suffix], binary=True)
        if suffix[:1] in ("e", "E"):
            return cls(base * (Decimal(10) ** int(suffix[1:])))
        return cls(base * _DECIMAL[suffix])

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.binary or other.binary)

    def scaled(self, n: int) -> Quantity:
        return Quantity(self.value * n, self.binary)

    def ceil(self) -> int:
        """``Value()`` in Kubernetes: rounded up to an integer (``2500m`` -> 3)."""
        return math.ceil(self.value)

    def format(self) -> str:
        v = self.value
        if v == 0:
            return "0"
        if self.binary and v == v.to_integral_value():
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                unit = _BINARY[suffix]
                if v % unit == 0:
                    return f"{int(v // unit)}{suffix}"
            return str(int(v))
        if v == v.to_integral_value():
            return str(int(v))
        milli = v * 1000
        if milli == milli.to_integral_value():
            return f"{int(milli)}m"
        return format(v.normalize(), "f")


def sum_requests(resources: list[dict[str, Quantity]]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for r in resources:
        for k, q in r.items():
            out[k] = out[k] + q if k in out else q
    return out
