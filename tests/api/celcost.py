"""An offline estimate of what the API server charges a CRD's CEL rules, so an uninstallable CRD fails a test.

When a CRD is created, kube-apiserver estimates each ``x-kubernetes-validations`` rule's worst-case cost and
rejects the CRD if one rule could exceed 10,000,000 units ("estimated rule cost exceeds budget") or all rules
together 100,000,000. The estimate is static: sizes come from the schema (``maxItems``, ``maxLength``,
``maxProperties``; when absent, as many elements as fit in a 3 MiB request), and a rule's cost is multiplied by
how often it can run (the product of the ``maxItems`` of every list above it, or, when one is unbounded, how many
copies of the rule's node fit in a request).

This module follows the published cost model of CEL and of the API server's schema-to-CEL type mapping for the
subset of CEL the CRDs use (field selection, ``has``, comparisons, ``in``, ``size``, ``type``, ``matches``,
string functions, list literals, conditionals and the ``all``/``exists``/``exists_one``/``filter``/``map``
macros). Anything else raises ``Unsupported`` so the estimate can never be silently wrong. The e2e suite
installs the CRDs on a real API server, which stays the final word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

PER_RULE_LIMIT = 10_000_000
PER_CRD_LIMIT = 100_000_000
MAX_REQUEST = 3 * 1024 * 1024
UNBOUNDED = 2**64 - 1

# CEL's unit costs.
_SELECT = 1
_LIST_CREATE = 10
_STRING_FACTOR = 0.1
_REGEX_FACTOR = 0.25


class Unsupported(Exception):
    """The rule uses CEL this estimator does not model."""


# --- the schema as CEL sees it ---


@dataclass
class Decl:
    kind: str  # object, list, map, string, bytes, int, double, bool, dyn, timestamp, duration
    max_elements: int = 0
    min_size: int = 1
    fields: dict[str, Decl] = field(default_factory=dict)
    elem: Decl | None = None
    bounded: bool = True  # False: max_elements is the "fits in a request" guess, not a maxItems/maxProperties


def _max_string(schema: dict[str, Any]) -> int:
    if schema.get("maxLength") is not None:
        return int(schema["maxLength"]) * 4  # maxLength counts runes; the estimate counts bytes
    if schema.get("x-kubernetes-int-or-string"):
        return MAX_REQUEST - 2
    fmt = schema.get("format")
    if fmt in ("date-time", "duration"):
        return 32
    if fmt == "date":
        return 12
    if schema.get("enum"):
        return max(len(str(v)) for v in schema["enum"])
    return MAX_REQUEST - 2


def decl(schema: dict[str, Any], root: bool = False) -> Decl | None:
    """The CEL type of a schema node with its size bounds (the API server's schema-to-CEL mapping)."""
    if schema.get("x-kubernetes-int-or-string"):
        return Decl("dyn", _max_string(schema), 1)
    if root or schema.get("x-kubernetes-embedded-resource"):
        props = dict(schema.get("properties") or {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        meta = dict(props.get("metadata") or {"type": "object"})
        meta_props = dict(meta.get("properties") or {})
        meta_props.setdefault("name", {"type": "string"})
        meta_props.setdefault("generateName", {"type": "string"})
        props["metadata"] = {**meta, "type": "object", "properties": meta_props}
        schema = {**schema, "properties": props}
    t = schema.get("type")
    if t == "array":
        item = decl(schema["items"]) if isinstance(schema.get("items"), dict) else None
        if item is None:
            return None
        n = schema.get("maxItems")
        guess = (MAX_REQUEST - 2) // (item.min_size + 1)
        return Decl("list", int(n) if n is not None else guess, 2, elem=item, bounded=n is not None)
    if t == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            val = decl(extra)
            if val is None:
                return None
            n = schema.get("maxProperties")
            guess = (MAX_REQUEST - 2) // (val.min_size + 6)
            return Decl("map", int(n) if n is not None else guess, 2, elem=val, bounded=n is not None)
        required = set(schema.get("required") or [])
        out = Decl("object", 0, 2)
        for name, sub in (schema.get("properties") or {}).items():
            d = decl(sub)
            if d is None:
                continue
            out.fields[name] = d
            if name in required and "default" not in sub:
                out.min_size += len(name) + d.min_size + 4
        return out
    if t == "string":
        fmt = schema.get("format")
        if fmt == "byte":
            return Decl("bytes", int(schema["maxLength"]) if "maxLength" in schema else MAX_REQUEST - 2, 2)
        if fmt in ("date-time", "date"):
            return Decl("timestamp", _max_string(schema), 21 if fmt == "date-time" else 12)
        if fmt == "duration":
            return Decl("duration", 32, 3)
        return Decl("string", _max_string(schema), 2)
    if t == "integer":
        return Decl("int", 0, 1)
    if t == "number":
        return Decl("double", 0, 1)
    if t == "boolean":
        return Decl("bool", 0, 4)
    return None


# --- CEL syntax tree (macros expanded as CEL does) ---


@dataclass
class Node:
    op: str  # lit, ident, select, has, call, list, comp
    value: Any = None  # literal value, identifier, field name or function name
    args: list[Node] = field(default_factory=list)
    target: Node | None = None
    comp: dict[str, Any] = field(default_factory=dict)


_BINARY = {
    "relation_eq": "==", "relation_ne": "!=", "relation_lt": "<", "relation_le": "<=", "relation_gt": ">",
    "relation_ge": ">=", "relation_in": "in", "addition_add": "+", "addition_sub": "-",
    "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%",
}  # fmt: skip
_ACCU = "__result__"


def _literal(token: Token) -> Node:
    text = str(token)
    if token.type in ("STRING_LIT", "MLSTRING_LIT"):
        body = text.lstrip("rR")
        quote = 3 if body[:3] in ('"""', "'''") else 1
        return Node("lit", ("string", body[quote:-quote]))
    if token.type == "BYTES_LIT":
        return Node("lit", ("bytes", text))
    if token.type == "BOOL_LIT":
        return Node("lit", ("bool", text == "true"))
    if token.type == "NULL_LIT":
        return Node("lit", ("null", None))
    if token.type == "FLOAT_LIT":
        return Node("lit", ("double", float(text)))
    return Node("lit", ("int", text))


def _exprs(tree: Tree | None) -> list[Node]:
    if tree is None:
        return []
    return [to_ast(c) for c in tree.children if isinstance(c, Tree)]


def _macro(name: str, target: Node, args: list[Node]) -> Node | None:
    if name not in ("all", "exists", "exists_one", "filter", "map") or len(args) != 2:
        return None
    var = args[0]
    if var.op != "ident":
        raise Unsupported(f"macro {name} needs an identifier")
    body = args[1]
    accu = Node("ident", _ACCU)

    def call(fn: str, *xs: Node) -> Node:
        return Node("call", fn, list(xs))

    true, false, zero, one = (Node("lit", v) for v in (("bool", True), ("bool", False), ("int", "0"), ("int", "1")))
    if name == "all":
        init, cond, step, result = true, call("@not_strictly_false", accu), call("&&", accu, body), accu
    elif name == "exists":
        init, cond = false, call("@not_strictly_false", call("!", accu))
        step, result = call("||", accu, body), accu
    elif name == "exists_one":
        init, cond = zero, true
        step, result = call("?:", body, call("+", accu, one), accu), call("==", accu, one)
    elif name == "filter":
        init, cond = Node("list"), true
        step, result = call("?:", body, call("+", accu, Node("list", args=[var])), accu), accu
    else:
        init, cond = Node("list"), true
        step, result = call("+", accu, Node("list", args=[body])), accu
    return Node("comp", comp={
        "range": target, "var": var.value, "init": init, "cond": cond, "step": step, "result": result,
    })  # fmt: skip


def to_ast(tree: Tree | Token) -> Node:
    if isinstance(tree, Token):
        raise Unsupported(f"unexpected token {tree!r}")
    kind, kids = tree.data, tree.children
    trees = [k for k in kids if isinstance(k, Tree)]
    if kind == "expr":
        if len(trees) == 1:
            return to_ast(trees[0])
        return Node("call", "?:", [to_ast(t) for t in trees])
    if kind in ("conditionalor", "conditionaland"):
        if len(trees) == 1:
            return to_ast(trees[0])
        return Node("call", "||" if kind == "conditionalor" else "&&", [to_ast(trees[0]), to_ast(trees[1])])
    if kind in ("relation", "addition", "multiplication"):
        if len(trees) == 1:
            return to_ast(trees[0])
        op_tree, rhs = trees
        (lhs,) = [c for c in op_tree.children if isinstance(c, Tree)]
        return Node("call", _BINARY[op_tree.data], [to_ast(lhs), to_ast(rhs)])
    if kind == "unary":
        if len(trees) == 1:
            return to_ast(trees[0])
        return Node("call", "!" if trees[0].data == "unary_not" else "-_", [to_ast(trees[1])])
    if kind in ("member", "primary"):
        return to_ast(trees[0]) if trees else _literal(kids[0])  # type: ignore[arg-type]
    if kind == "literal":
        return _literal(kids[0])  # type: ignore[arg-type]
    if kind == "ident":
        return Node("ident", str(kids[0]))
    if kind == "paren_expr":
        return to_ast(trees[0])
    if kind == "list_lit":
        return Node("list", args=_exprs(trees[0] if trees else None))
    if kind == "member_dot":
        return Node("select", str(kids[1]), target=to_ast(kids[0]))
    if kind == "member_index":
        return Node("call", "_[_]", [to_ast(trees[0]), to_ast(trees[1])])
    if kind == "member_dot_arg":
        target, name = to_ast(kids[0]), str(kids[1])
        args = _exprs(trees[1] if len(trees) > 1 else None)
        return _macro(name, target, args) or Node("call", name, args, target=target)
    if kind == "ident_arg":
        name = str(kids[0])
        args = _exprs(trees[0] if trees else None)
        if name == "has":
            (sel,) = args
            if sel.op != "select":
                raise Unsupported("has() needs a field selection")
            return Node("has", sel.value, target=sel.target)
        return Node("call", name, args)
    raise Unsupported(f"CEL construct {kind!r}")


# --- the estimate ---


@dataclass
class Est:
    cost: int  # worst case
    kind: str  # CEL type kind of the value
    size: int | None = None  # worst-case size (elements, runes) when known
    path: tuple[str, ...] | None = None  # field path from self, for schema lookups
    elem: Est | None = None  # entry estimate of a list built by the expression
    bounded: bool = True  # a list or map whose size the schema does not bound


def _mul(x: int, y: int) -> int:
    return UNBOUNDED if y and x > UNBOUNDED // y else x * y


def _factor(x: int, f: float) -> int:
    return min(UNBOUNDED, math.ceil(x * f))


class Estimator:
    def __init__(self, root: Decl) -> None:
        self.root = root
        self.scopes: list[dict[str, Est]] = []
        self.unbounded_iterations: list[str] = []
        """Paths of lists and maps without maxItems/maxProperties that the rule iterates or compares."""

    def _lookup(self, path: tuple[str, ...]) -> Decl | None:
        node: Decl | None = self.root
        for part in path[1:]:
            if node is None:
                return None
            if part in ("@items", "@values", "@keys"):
                node = node.elem if part != "@keys" else Decl("string", MAX_REQUEST - 2, 2)
            else:
                node = node.fields.get(part)
        return node

    def _at(self, path: tuple[str, ...]) -> Est:
        d = self._lookup(path)
        if d is None:
            return Est(0, "dyn", None, path)
        return Est(0, d.kind, d.max_elements, path, bounded=d.bounded)

    def _iterates(self, e: Est) -> None:
        if not e.bounded:
            self.unbounded_iterations.append(".".join(e.path or ("?",)))

    def size(self, e: Est) -> int:
        if e.size is not None:
            return e.size
        if e.kind in ("int", "double", "bool", "timestamp", "duration", "type"):
            return 1
        return UNBOUNDED

    def run(self, n: Node) -> Est:
        if n.op == "lit":
            kind, value = n.value
            size = len(value) if kind == "string" else 1
            return Est(0, kind, size)
        if n.op == "ident":
            for scope in reversed(self.scopes):
                if n.value in scope:
                    var = scope[n.value]
                    return Est(_SELECT, var.kind, var.size, var.path, var.elem, var.bounded)
            if n.value in ("self", "oldSelf"):
                return Est(_SELECT, self.root.kind, self.root.max_elements, ("self",), bounded=self.root.bounded)
            if n.value in ("int", "string", "bool", "double", "list", "map", "uint", "bytes", "null_type"):
                return Est(_SELECT, "type", 1)
            raise Unsupported(f"identifier {n.value!r}")
        if n.op in ("select", "has"):
            assert n.target is not None
            operand = self.run(n.target)
            path = (*operand.path, n.value) if operand.path is not None else None
            if n.op == "has":
                return Est(operand.cost, "bool", 1)  # presence tests are free in Kubernetes' CEL environment
            extra = _SELECT if operand.kind in ("object", "map") else 0
            at = self._at(path) if path is not None else Est(0, "dyn")
            return Est(operand.cost + extra, at.kind, at.size, path, bounded=at.bounded)
        if n.op == "list":
            items = [self.run(a) for a in n.args]
            elem = items[0] if items else None
            if items:
                elem = Est(0, items[0].kind, max(self.size(i) for i in items))
            return Est(sum(i.cost for i in items) + _LIST_CREATE, "list", len(items), None, elem)
        if n.op == "comp":
            return self._comprehension(n)
        return self._call(n)

    def _comprehension(self, n: Node) -> Est:
        c = n.comp
        rng = self.run(c["range"])
        init = self.run(c["init"])
        if rng.kind == "list":
            item_path = (*rng.path, "@items") if rng.path is not None else None
        elif rng.kind == "map":
            item_path = (*rng.path, "@keys") if rng.path is not None else None
        else:
            raise Unsupported(f"iterating over {rng.kind}")
        self._iterates(rng)
        item = self._at(item_path) if item_path is not None else (rng.elem or Est(0, "dyn"))
        self.scopes.append({c["var"]: Est(0, item.kind, item.size, item.path), _ACCU: init})
        loop = self.run(c["cond"]).cost + self.run(c["step"]).cost
        self.scopes.pop()
        self.scopes.append({_ACCU: init})
        result = self.run(c["result"])
        self.scopes.pop()
        total = rng.cost + init.cost + result.cost + _mul(self.size(rng), loop)
        if c["init"].op == "list":
            return Est(total, "list", self.size(rng), None, item)
        return Est(total, result.kind, result.size)

    def _call(self, n: Node) -> Est:
        fn = n.value
        target = self.run(n.target) if n.target is not None else None
        args = [self.run(a) for a in n.args]
        arg_cost = sum(a.cost for a in args) + (target.cost if target else 0)
        if fn in ("&&", "||"):
            return Est(arg_cost, "bool", 1)
        if fn == "?:":
            cond, yes, no = args
            return Est(cond.cost + max(yes.cost, no.cost), yes.kind, max(self.size(yes), self.size(no)))
        if fn in ("==", "!=") or (fn in ("<", "<=", ">", ">=") and args[0].kind in ("string", "bytes")):
            for a in args:
                if a.kind in ("list", "map"):
                    self._iterates(a)
            smallest = min(self.size(args[0]), self.size(args[1]))
            return Est(_factor(smallest, _STRING_FACTOR) + arg_cost, "bool", 1)
        if fn == "in":
            if args[1].kind == "list":
                self._iterates(args[1])
                return Est(self.size(args[1]) + arg_cost, "bool", 1)
            return Est(1 + arg_cost, "bool", 1)
        if fn == "+":
            if args[0].kind in ("string", "bytes"):
                size = min(UNBOUNDED, self.size(args[0]) + self.size(args[1]))
                return Est(_factor(size, _STRING_FACTOR) + arg_cost, args[0].kind, size)
            if args[0].kind == "list":
                size = min(UNBOUNDED, self.size(args[0]) + self.size(args[1]))
                return Est(1 + arg_cost, "list", size, None, args[0].elem or args[1].elem)
            return Est(1 + arg_cost, args[0].kind, 1)
        if fn == "matches" and target is not None:
            text = _factor(min(UNBOUNDED, self.size(target) + 1), _STRING_FACTOR)
            regex = _factor(self.size(args[0]), _REGEX_FACTOR)
            return Est(_mul(text, regex) + arg_cost, "bool", 1)
        if fn in ("startsWith", "endsWith") and target is not None:
            return Est(_factor(self.size(args[0]), _STRING_FACTOR) + arg_cost, "bool", 1)
        if fn == "contains" and target is not None:
            cost = _mul(_factor(self.size(target), _STRING_FACTOR), _factor(self.size(args[0]), _STRING_FACTOR))
            return Est(cost + arg_cost, "bool", 1)
        if fn in ("size", "type", "!", "-_", "@not_strictly_false", "<", "<=", ">", ">=", "*", "/", "%", "-"):
            kind = {"size": "int", "type": "type", "!": "bool", "@not_strictly_false": "bool"}.get(fn, "int")
            if fn in ("<", "<=", ">", ">="):
                kind = "bool"
            return Est(1 + arg_cost, kind, 1)
        if fn == "double":
            # cel-go prices a conversion to double (from a string too) as one operation.
            return Est(1 + arg_cost, "double", 1)
        if fn == "_[_]":
            container, _ = args
            path = (*container.path, "@items") if container.path is not None else None
            at = self._at(path) if path is not None else (container.elem or Est(0, "dyn"))
            return Est(1 + arg_cost, at.kind, at.size, path)
        raise Unsupported(f"function {fn!r}")


def _estimate(rule: str, schema: dict[str, Any], root: bool) -> tuple[int, list[str]]:
    from celpy.celparser import CELParser

    d = decl(schema, root)
    if d is None:
        raise Unsupported("rule on a node CEL cannot see")
    est = Estimator(d)
    return est.run(to_ast(CELParser().parse(rule))).cost, est.unbounded_iterations


def rule_cost(rule: str, schema: dict[str, Any], *, root: bool = False) -> int:
    """Worst-case cost of one evaluation of ``rule`` at a node with ``schema``."""
    return _estimate(rule, schema, root)[0]


@dataclass(frozen=True)
class RuleCost:
    path: str
    rule: str
    cost: int  # one evaluation
    cardinality: int  # how often it can run per object
    total: int  # what the API server compares with PER_RULE_LIMIT
    unbounded_iterations: tuple[str, ...]  # lists/maps it iterates or compares that have no maxItems/maxProperties


def _elements(schema: dict[str, Any]) -> int | None:
    """How many children each child of this node can stand for (None: unbounded)."""
    if schema.get("type") == "array":
        return int(schema["maxItems"]) if "maxItems" in schema else None
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        return int(schema["maxProperties"]) if "maxProperties" in schema else None
    return 1


def crd_rule_costs(schema: dict[str, Any]) -> list[RuleCost]:
    """Every rule of a CRD's ``openAPIV3Schema`` with the cost the API server would estimate for it."""
    out: list[RuleCost] = []

    def walk(node: dict[str, Any], path: str, cardinality: int | None, is_root: bool) -> None:
        for rule in node.get("x-kubernetes-validations") or []:
            d = decl(node, is_root)
            assert d is not None, path
            cost, unbounded = _estimate(rule["rule"], node, is_root)
            card = cardinality if cardinality is not None else MAX_REQUEST // (d.min_size + 1)
            out.append(RuleCost(path or ".", rule["rule"], cost, card, _mul(cost, card), tuple(unbounded)))
        factor = _elements(node)
        child = None if cardinality is None or factor is None else _mul(cardinality, factor)
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{path}.{name}", child, False)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]", child, False)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*", child, False)

    walk(schema, "", 1, True)
    return out
