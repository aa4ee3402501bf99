"""kubectl's JSONPath dialect (client-go's ``util/jsonpath``), for ``get -o jsonpath=...``, ``-o custom-columns``,
``--sort-by`` and ``wait --for=jsonpath=...``.

A template mixes literal text with ``{...}`` actions: ``{.a.b}``, ``{.items[*].metadata.name}``, ``[0]``, ``[-1]``,
``[1:3]``, ``[*]``, unions ``[0,2]`` and ``['a','b']``, recursive descent ``..``, filters ``[?(@.x=="y")]`` (``==``,
``!=``, ``<``, ``>``, ``<=``, ``>=``, existence ``[?(@.x)]``), ``{range EXPR}...{end}`` and string literals
``{"\\n"}``. No Python library speaks this dialect (jsonpath-ng and friends implement Goessner's or RFC 9535's
syntax: no templates, no ``range``), so it is parsed here into a small tree and evaluated the way kubectl does:

- the results of one action are joined by a space; maps and lists print as compact JSON, scalars as Go prints them;
- a missing key is an error (``X is not found``) unless missing keys are allowed (kubectl's
  ``--allow-missing-template-keys``, true by default: then it prints nothing); an index out of range is always one;
- ``['a.b']`` is the path ``a`` → ``b`` (kubectl's quirk); ``\\.`` escapes a dot in a key (``kubernetes\\.io/x``);
- literal text outside ``{...}`` is printed as written (``\\n`` there stays two characters, as with kubectl: write
  ``{"\\n"}`` for a newline).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from kubetrain.api import KubetrainError

FILTER_OPS = ("==", "!=", "<=", ">=", "<", ">")


class JSONPathError(KubetrainError):
    """A template that cannot be parsed (the message shows where) or evaluated."""


class _Missing(JSONPathError):
    """A key is not there (allowed away by ``allow_missing``)."""


# -- the tree ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str


@dataclass(frozen=True)
class Wildcard:
    pass


@dataclass(frozen=True)
class Recursive:
    pass


@dataclass(frozen=True)
class Index:
    """``[start:end:step]`` as client-go keeps it: ``end_derived`` marks ``[i]`` (end = start + 1)."""

    start: int | None
    end: int | None
    step: int | None
    end_derived: bool = False


@dataclass(frozen=True)
class Union:
    branches: tuple[tuple[Step, ...], ...]


@dataclass(frozen=True)
class Filter:
    left: tuple[Step, ...]
    op: str  # one of FILTER_OPS, or "exists"
    right: tuple[Step, ...]


@dataclass(frozen=True)
class Literal:
    value: str | int | float | bool


@dataclass(frozen=True)
class Keyword:
    name: str  # range | end (only while parsing: the template turns them into Range)
    pos: int


Step = Field | Wildcard | Recursive | Index | Union | Filter | Literal | Keyword


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Action:
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Range:
    steps: tuple[Step, ...]
    body: tuple[Node, ...]


Node = Text | Action | Range


# -- parsing ----------------------------------------------------------------------------------------------------

_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")
_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_DICT_KEY = re.compile(r"^'([^']*)'$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=~]+)(.+?)$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f",
            "v": "\v", "0": "\0"}


class _Syntax(Exception):
    def __init__(self, pos: int, why: str, fix: str) -> None:
        super().__init__(why)
        self.pos, self.why, self.fix = pos, why, fix


class _Parser:
    """client-go's recursive-descent parser, over one action's text; ``base`` is where that text starts in the
    template the user wrote, so errors point there."""

    def __init__(self, text: str, base: int = 0) -> None:
        self.text, self.pos, self.base = text, 0, base

    def error(self, why: str, fix: str, at: int | None = None) -> _Syntax:
        return _Syntax(self.base + (self.pos if at is None else at), why, fix)

    def steps(self, *, until_brace: bool) -> list[Step]:
        """Steps up to the closing ``}`` (consumed) or, inside a union or filter, to the end of the text."""
        out: list[Step] = []
        t = self.text
        while True:
            if self.pos >= len(t) or t[self.pos] in "\r\n":
                if until_brace:
                    raise self.error("unclosed action: a '{' without its '}'", "end the expression with '}', "
                                     "e.g. '{.metadata.name}'")
                return out
            ch = t[self.pos]
            if ch == "}" and until_brace:
                self.pos += 1
                return out
            if t.startswith("[?(", self.pos):
                out.append(self._filter())
            elif t.startswith("..", self.pos):
                if out and isinstance(out[-1], Recursive):
                    raise self.error("invalid multiple recursive descent", "write '..' once, e.g. '{..name}'")
                self.pos += 2
                out.append(Recursive())
                if self.pos < len(t) and (t[self.pos].isalnum() or t[self.pos] == "_"):
                    out.append(self._field())
            elif ch in " \t@$":  # '@' and '$' are the current object: nothing to do
                self.pos += 1
            elif ch == "[":
                out.extend(self._bracket())
            elif ch in "\"'":
                out.append(Literal(self._quoted(ch)))
            elif ch == ".":
                self.pos += 1
                out.append(self._field())
            elif ch in "+-" or ch.isdigit():
                out.append(self._number())
            elif ch.isalnum() or ch == "_":
                out.append(self._identifier())
            else:
                raise self.error(
                    f"unrecognized character {ch!r} in action",
                    "fields start with '.', indexes and filters are in '[...]', text goes in quotes: "
                    "'{.metadata.name}', '{.items[0]}', '{\"text\"}'",
                )

    def _field(self) -> Step:
        start = self.pos
        t = self.text
        while self.pos < len(t) and t[self.pos] not in _TERMINATORS:
            self.pos += 2 if t[self.pos] == "\\" else 1
        self.pos = min(self.pos, len(t))
        name = t[start : self.pos].replace("\\", "")
        return Wildcard() if name == "*" else Field(name)

    def _identifier(self) -> Step:
        start = self.pos
        t = self.text
        while self.pos < len(t) and t[self.pos] not in _TERMINATORS:
            self.pos += 1
        word = t[start : self.pos]
        if word in ("true", "false"):
            return Literal(word == "true")
        if word in ("range", "end"):
            return Keyword(word, self.base + start)
        raise self.error(
            f"unrecognized identifier {word!r}",
            f"a field is written with a dot ('{{.{word}}}'); the only keywords are range and end "
            "('{range .items[*]}{.metadata.name}{\"\\n\"}{end}')",
            at=start,
        )

    def _number(self) -> Step:
        start = self.pos
        t = self.text
        if t[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(t) and (t[self.pos].isdigit() or t[self.pos] == "."):
            self.pos += 1
        word = t[start : self.pos]
        try:
            return Literal(int(word))
        except ValueError:
            pass
        try:
            return Literal(float(word))
        except ValueError:
            raise self.error(f"cannot parse number {word!r}", "write a number such as 2 or 0.5", at=start) from None

    def _quoted(self, quote: str) -> str:
        start = self.pos
        t = self.text
        self.pos += 1
        while True:
            if self.pos >= len(t) or t[self.pos] in "\r\n":
                raise self.error("unterminated quoted string", f"close the string with {quote}", at=start)
            if t[self.pos] == "\\":
                self.pos += 2
                continue
            if t[self.pos] == quote:
                self.pos += 1
                return self._unquote(t[start + 1 : self.pos - 1], start)
            self.pos += 1

    def _unquote(self, body: str, at: int) -> str:
        out, i = [], 0
        while i < len(body):
            ch = body[i]
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            nxt = body[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
            elif nxt in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                digits = body[i + 2 : i + 2 + width]
                if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise self.error(f"invalid escape \\{nxt}{digits} in a string", "e.g. \\x41, \\u00e9", at=at)
                out.append(chr(int(digits, 16)))
                i += 2 + width
            else:
                raise self.error(
                    f"invalid escape \\{nxt} in a string", "use \\n, \\t, \\r, \\\\, \\' or \\\"", at=at
                )
        return "".join(out)

    def _bracket(self) -> list[Step]:
        start = self.pos
        end = self.text.find("]", start)
        newline = min((i for i in (self.text.find("\n", start), self.text.find("\r", start)) if i >= 0), default=-1)
        if end < 0 or 0 <= newline < end:
            raise self.error("unterminated array: a '[' without its ']'", "close it with ']', e.g. '[0]'", at=start)
        inner = self.text[start + 1 : end]
        self.pos = end + 1
        if inner == "*":
            inner = ":"
        if "," in inner:
            branches = []
            offset = start + 1
            for part in inner.split(","):
                sub = _Parser(f"[{part.strip()}]", self.base + offset + len(part) - len(part.lstrip()) - 1)
                branches.append(tuple(sub.steps(until_brace=False)))
                offset += len(part) + 1
            return [Union(tuple(branches))]
        key = _DICT_KEY.match(inner)
        if key:
            # kubectl reads ['a.b'] as the path .a.b (escape the dot, ['a\.b'], for a key with one)
            sub = _Parser("." + key.group(1), self.base + start + 1)
            return sub.steps(until_brace=False)
        m = _SLICE.match(inner)
        if m is None:
            raise self.error(
                f"invalid array index {inner!r}",
                "an index is a number ([0], [-1]), a slice ([1:3]), [*], a quoted key (['name']) or a filter "
                "([?(@.type==\"Ready\")])",
                at=start,
            )
        a, b, c = m.group(1), (m.group(2) or "")[1:], (m.group(3) or "")[1:]
        begin = int(a) if a else None
        if m.group(2) is None:  # [i]: one element
            return [Index(begin or 0, (begin or 0) + 1, None, end_derived=True)]
        return [Index(begin, int(b) if b else None, int(c) if c else None)]

    def _filter(self) -> Step:
        start = self.pos
        self.pos += 3
        t = self.text
        quote: str | None = None
        body_start = self.pos
        while True:
            if self.pos >= len(t) or t[self.pos] in "\r\n":
                raise self.error("unterminated filter", "close it with ')]', e.g. '[?(@.type==\"Ready\")]'", at=start)
            ch = t[self.pos]
            if quote is not None:
                if ch == "\\":
                    self.pos += 1
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == ")":
                break
            self.pos += 1
        body = t[body_start : self.pos]
        self.pos += 1
        if self.pos >= len(t) or t[self.pos] != "]":
            raise self.error("unclosed filter: expected ']' after ')'", "write '[?(@.x==\"y\")]'")
        self.pos += 1
        m = _FILTER.match(body)
        if m is None:
            left = _Parser(body, self.base + body_start).steps(until_brace=False)
            return Filter(tuple(left), "exists", ())
        op = m.group(2)
        if op not in FILTER_OPS:
            fix = "use == to compare" if op == "=" else "use ==, !=, <, >, <= or >="
            raise self.error(f"unrecognized filter operator {op!r}", fix, at=body_start + m.start(2))
        left = _Parser(m.group(1), self.base + body_start).steps(until_brace=False)
        right = _Parser(m.group(3), self.base + body_start + m.start(3)).steps(until_brace=False)
        return Filter(tuple(left), op, tuple(right))


@dataclass(frozen=True)
class Template:
    source: str
    nodes: tuple[Node, ...]

    def execute(self, data: Any, *, allow_missing: bool = True) -> str:
        """The text kubectl prints for ``data``; raises ``JSONPathError`` (``X is not found``, an index out of
        range, an incomparable filter) as kubectl fails."""
        return "".join(_print(r) for r in self.find(data, allow_missing=allow_missing))

    def find(self, data: Any, *, allow_missing: bool = True) -> list[list[Any]]:
        """The results of each action in order (a range's body once per item): client-go's ``FindResults``."""
        out: list[list[Any]] = []
        _run(self.nodes, data, allow_missing, out)
        return out


def parse(template: str, flag: str) -> Template:
    """A whole template (``-o jsonpath=``); errors name ``flag``, show where and say how to fix it."""
    nodes: list[Node] = []
    stack: list[tuple[tuple[Step, ...], list[Node], int]] = []
    pos = 0
    try:
        while pos < len(template):
            brace = template.find("{", pos)
            if brace < 0:
                nodes.append(Text(template[pos:]))
                break
            if brace > pos:
                nodes.append(Text(template[pos:brace]))
            p = _Parser(template, 0)
            p.pos = brace + 1
            steps = p.steps(until_brace=True)
            pos = p.pos
            keywords = [s for s in steps if isinstance(s, Keyword)]
            if not keywords:
                nodes.append(Action(tuple(steps)))
                continue
            first = steps[0]
            if isinstance(first, Keyword) and first.name == "range" and len(keywords) == 1:
                stack.append((tuple(steps[1:]), nodes, first.pos))
                nodes = []
            elif isinstance(first, Keyword) and first.name == "end" and len(steps) == 1:
                if not stack:
                    raise _Syntax(first.pos, "not in range, nothing to end", "start the loop first: "
                                  "'{range .items[*]}{.metadata.name}{\"\\n\"}{end}'")
                range_steps, outer, _ = stack.pop()
                outer.append(Range(range_steps, tuple(nodes)))
                nodes = outer
            else:
                raise _Syntax(keywords[0].pos, f"{keywords[0].name!r} must stand alone at the start of an action",
                              "write '{range EXPR}' ... '{end}', e.g. '{range .items[*]}{.metadata.name}{end}'")
        # kubectl runs a range without its {end} to the end of the template; so do we.
        while stack:
            range_steps, outer, _ = stack.pop()
            outer.append(Range(range_steps, tuple(nodes)))
            nodes = outer
    except _Syntax as exc:
        raise JSONPathError(_syntax_message(flag, template, exc)) from None
    return Template(template, tuple(nodes))


_RELAXED = re.compile(r"^\{\.?([^{}]+)\}$|^\.?([^{}]+)$")


def parse_relaxed(expr: str, flag: str) -> Template:
    """One path as ``--sort-by``, ``custom-columns`` and ``wait`` take it (kubectl's ``RelaxedJSONPathExpression``):
    ``a.b``, ``.a.b``, ``{a.b}`` and ``{.a.b}`` all mean ``{.a.b}``."""
    m = _RELAXED.match(expr.strip())
    if m is None:
        raise JSONPathError(
            f"{flag}: unexpected path {expr!r}, expected a 'name1.name2' or '.name1.name2' or '{{name1.name2}}' or "
            "'{.name1.name2}' (fix: one path, such as '{.metadata.creationTimestamp}' or .status.conditions[0].type)"
        )
    return parse("{." + (m.group(1) or m.group(2)) + "}", flag)


def _syntax_message(flag: str, template: str, exc: _Syntax) -> str:
    line = template.replace("\n", " ").replace("\r", " ")
    return (
        f"{flag}: cannot parse the template at position {exc.pos + 1}: {exc.why}\n"
        f"  {line}\n  {' ' * exc.pos}^\n  fix: {exc.fix}"
    )


# -- evaluation -------------------------------------------------------------------------------------------------


def _run(nodes: tuple[Node, ...], data: Any, allow: bool, out: list[list[Any]]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append([node.text])
        elif isinstance(node, Action):
            out.append(_walk(node.steps, [data], allow))
        else:
            for item in _walk(node.steps, [data], allow):
                _run(node.body, item, allow, out)


def _walk(steps: tuple[Step, ...], values: list[Any], allow: bool) -> list[Any]:
    for step in steps:
        values = _step(step, values, allow)
    return values


def _step(step: Step, values: list[Any], allow: bool) -> list[Any]:
    if isinstance(step, Field):
        if not values:
            return []
        found = [v[step.name] for v in values if isinstance(v, dict) and step.name in v]
        if not found and not allow:
            raise _Missing(f"{step.name} is not found")
        return found
    if isinstance(step, Index):
        out: list[Any] = []
        for v in values:
            if v is not None:
                out += _index(v, step)
        return out
    if isinstance(step, Wildcard):
        out = []
        for v in values:
            out += _children(v)
        return out
    if isinstance(step, Recursive):
        return _descend(values)
    if isinstance(step, Union):
        out = []
        for branch in step.branches:
            out += _walk(branch, values, allow)
        return out
    if isinstance(step, Filter):
        return _filter(step, values, allow)
    if isinstance(step, Literal):
        # client-go gives a text literal once, and a number or boolean once per value
        return [step.value] if isinstance(step.value, str) else [step.value for _ in values]
    raise JSONPathError(f"unexpected {step!r}")  # keywords never reach evaluation: parse() consumed them


def _children(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, list):
        return list(v)
    return []


def _descend(values: list[Any]) -> list[Any]:
    """``..``: every map and list below (and including) each value, parents before children."""
    out: list[Any] = []
    for v in values:
        kids = _children(v)
        if kids:
            out.append(v)
            out += _descend(kids)
    return out


def _index(v: Any, ix: Index) -> list[Any]:
    if not isinstance(v, list):
        raise JSONPathError(f"{_type_name(v)} is not array or slice")
    n = len(v)
    start = 0 if ix.start is None else ix.start
    if start < 0:
        start += n
    end = n if ix.end is None else ix.end
    if end < 0 or (ix.end_derived and end == 0):
        end += n
    if end == start:  # asking for nothing is allowed
        return []
    if start >= n or start < 0:
        raise JSONPathError(f"array index out of bounds: index {start}, length {n}")
    if end > n or end < 0:
        raise JSONPathError(f"array index out of bounds: index {end - 1}, length {n}")
    if start > end:
        raise JSONPathError(f"starting index {start} is greater than ending index {end}")
    if ix.step is not None and ix.step <= 0:
        raise JSONPathError("step must be > 0")
    return v[start:end : ix.step or 1]


def _filter(f: Filter, values: list[Any], allow: bool) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not isinstance(v, list):
            raise JSONPathError(f"{_print_one(v)} is not array or slice and cannot be filtered")
        for item in v:
            if f.op == "exists":
                try:
                    if _walk(f.left, [item], allow):
                        out.append(item)
                except JSONPathError:
                    pass  # client-go: a path that fails to resolve does not exist
                continue
            lefts = _walk(f.left, [item], allow)
            if not lefts:
                continue
            rights = _walk(f.right, [item], allow)
            if not rights:
                continue
            if len(lefts) > 1 or len(rights) > 1:
                raise JSONPathError("can only compare one element at a time")
            if _compare(lefts[0], f.op, rights[0]):
                out.append(item)
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(a: Any, op: str, b: Any) -> bool:
    """Go template's eq/ne/lt/le/gt/ge: like kinds only (a number compares with a number, whether int or float)."""
    if not ((_number(a) and _number(b)) or (type(a) is type(b) and isinstance(a, str | bool))):
        raise JSONPathError(
            f"incompatible types for comparison: {_print_one(a)} ({_type_name(a)}) {op} {_print_one(b)} "
            f"({_type_name(b)})"
        )
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if isinstance(a, bool):
        raise JSONPathError(f"invalid type for comparison: {op} on booleans")
    return bool({"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op])


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "map", list: "array", str: "string", bool: "bool", int: "int64", float: "float64"}.get(
        type(v), type(v).__name__
    )


# -- printing ---------------------------------------------------------------------------------------------------


def _print(results: list[Any]) -> str:
    """One action's results as client-go's ``PrintResults`` writes them: joined by a space."""
    return " ".join(_print_one(v) for v in results)


def _print_one(v: Any) -> str:
    if isinstance(v, dict | list):
        return go_json(v)
    return go_text(v)


def go_text(v: Any) -> str:
    """A scalar as Go's ``fmt.Print`` writes it (``true``, ``3``, ``0.5``, ``1e+06``, ``<nil>``)."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v, json_style=False)
    return str(v)


def go_sprint(v: Any) -> str:
    """Any value as Go's ``fmt.Sprint`` writes it (``custom-columns`` cells): ``map[a:1 b:x]``, ``[a b]``."""
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_sprint(x) for x in v) + "]"
    return go_text(v)


def go_json(v: Any) -> str:
    """Compact JSON as Go's ``encoding/json`` writes it: keys sorted, ``<>&`` escaped, ``1`` for ``1.0``."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    if isinstance(v, str):
        text = json.dumps(v, ensure_ascii=False)
        for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                        ("\u2029", "\\u2029")):
            text = text.replace(ch, esc)
        return text
    if isinstance(v, float) and not isinstance(v, bool):
        return _go_float(v, json_style=True)
    return json.dumps(v)


def _go_float(f: float, *, json_style: bool) -> str:
    """Go's shortest float text: ``%v`` switches to an exponent from 1e+06 (and below 1e-04), ``encoding/json``
    from 1e+21 (and below 1e-6, which it writes without the padding zero)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 and not json_style else "0"
    digits, exp = _shortest(abs(f))
    sign = "-" if f < 0 else ""
    x = exp + len(digits) - 1  # the decimal exponent of the first digit
    if json_style:
        use_exp = abs(f) < 1e-6 or abs(f) >= 1e21
    else:
        use_exp = x < -4 or x >= 6
    if use_exp:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        width = 1 if json_style and x < 0 else 2
        return f"{sign}{mantissa}e{'-' if x < 0 else '+'}{abs(x):0{width}d}"
    if exp >= 0:
        return sign + digits + "0" * exp
    point = len(digits) + exp
    if point > 0:
        return sign + digits[:point] + "." + digits[point:]
    return sign + "0." + "0" * (-point) + digits


def _shortest(f: float) -> tuple[str, int]:
    """The shortest round-tripping digits of ``f`` and their exponent: ``0.5`` -> (``5``, -1)."""
    mantissa, _, e = f"{f!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    frac = "" if frac == "0" else frac
    digits = (whole + frac).lstrip("0") or "0"
    exp = (int(e) if e else 0) - len(frac)
    stripped = digits.rstrip("0")
    return stripped, exp + len(digits) - len(stripped)


# -- sorting (``--sort-by``) --------------------------------------------------------------------------------------


def first_value(template: Template, obj: Any) -> tuple[bool, Any]:
    """``(found, value)``: the first result of the path, as kubectl sorts by (missing keys allowed)."""
    results = template.find(obj, allow_missing=True)
    if results and results[0]:
        return True, results[0][0]
    return False, None


def sort_key(found: bool, value: Any) -> tuple[Any, ...]:
    """kubectl's order: objects without the field first; numbers by value; strings as quantities when both are
    (``500m`` < ``2``), else in natural order (``node-2`` < ``node-10``)."""
    if not found or value is None:
        return (0,)
    if isinstance(value, bool):
        return (3, str(value).lower())
    if _number(value):
        return (1, value)
    if isinstance(value, str):
        q = _quantity(value)
        if q is not None:
            return (1, q)
        return (2, _natural(value))
    return (4, go_json(value))


def _quantity(text: str) -> Any:
    from kubetrain.api.quantity import Quantity, QuantityError

    if not text or not (text[0].isdigit() or text[0] in "+-."):
        return None  # cheap check first: most names and timestamps are no quantity
    try:
        return Quantity.parse(text).value
    except QuantityError:
        return None


def _natural(text: str) -> tuple[tuple[int, Any], ...]:
    """``node-10`` after ``node-2``: runs of digits compare as numbers (sortorder.NaturalLess)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)
