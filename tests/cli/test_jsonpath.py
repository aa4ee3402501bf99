"""kubectl's JSONPath (``kubetrain.cli.jsonpath``) against the example of kubectl's reference page
(https://kubernetes.io/docs/reference/kubectl/jsonpath/) and client-go's rules: what each template prints, which
fail and how, the relaxed paths of ``--sort-by``/``custom-columns``, and the order ``--sort-by`` gives."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.cli import jsonpath
from kubetrain.cli.jsonpath import JSONPathError

# The input of kubectl's JSONPath reference page, as written there.
DOC: dict[str, Any] = {
    "kind": "List",
    "items": [
        {
            "kind": "None",
            "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
            "status": {"capacity": {"cpu": "4"}, "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]},
        },
        {
            "kind": "None",
            "metadata": {"name": "127.0.0.2"},
            "status": {
                "capacity": {"cpu": "8"},
                "addresses": [
                    {"type": "LegacyHostIP", "address": "127.0.0.2"},
                    {"type": "another", "address": "127.0.0.3"},
                ],
            },
        },
    ],
    "users": [
        {"name": "myself", "user": {}},
        {"name": "e2e", "user": {"username": "admin", "password": "secret"}},
    ],
}


def run(template: str, data: Any = DOC, *, allow_missing: bool = False) -> str:
    return jsonpath.parse(template, "-o jsonpath").execute(data, allow_missing=allow_missing)


# The reference page's table: function, template, what kubectl prints. (The page shows maps the way old kubectl
# versions printed them, `map[cpu:4]`, and the wildcard's result in brackets; kubectl prints maps as JSON and a
# wildcard's values joined by spaces, which is what these assert.)
@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("kind is {.kind}", "kind is List"),  # text
        ("{.kind}", "List"),  # child operator
        ("{['kind']}", "List"),
        ("{..name}", "127.0.0.1 127.0.0.2 myself e2e"),  # recursive descent
        ("{.items[*].metadata.name}", "127.0.0.1 127.0.0.2"),  # wildcard
        ("{.users[0].name}", "myself"),  # subscript
        ("{.items[*]['metadata.name', 'status.capacity']}", '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}'),  # union
        ('{.users[?(@.name=="e2e")].user.password}', "secret"),  # filter
        (
            "{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}",
            '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] ',
        ),  # range
        ("{range .items[*]}{.metadata.name}{'\\t'}{end}", "127.0.0.1\t127.0.0.2\t"),  # quoted string
        ("{.items[0].metadata.labels.kubernetes\\.io/hostname}", "127.0.0.1"),  # escaped dot
    ],
)
def test_reference_page_examples(template: str, printed: str) -> None:
    assert run(template) == printed


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[-1].metadata.name}", "127.0.0.2"),
        ("{.items[0:1].metadata.name}", "127.0.0.1"),
        ("{.items[1:].metadata.name}", "127.0.0.2"),
        ("{.items[:2].metadata.name}", "127.0.0.1 127.0.0.2"),
        ("{.items[::2].metadata.name}", "127.0.0.1"),
        ("{.items[1:1]}", ""),  # asking for nothing is allowed
        ("{.users[0,1].name}", "myself e2e"),
        ("{.users[0]['name','user']}", "myself {}"),
        ("{.items[*].status.addresses[?(@.type!=\"LegacyHostIP\")].address}", "127.0.0.3"),
        ("{.items[?(@.status.capacity.cpu)].kind}", "None None"),  # existence
        ("{.users[?(@.user.username)].name}", "e2e"),
        ("{.items[?(@.metadata.labels)].metadata.name}", "127.0.0.1"),
        ("{.items[*].metadata.name}{\"\\n\"}", "127.0.0.1 127.0.0.2\n"),
        ("{.kind}\\n", "List\\n"),  # text outside {} is printed as written, as kubectl does
        ("{$.kind} {@.kind}", "List List"),
        ("{.users[1].user}", '{"password":"secret","username":"admin"}'),  # keys sorted, as Go writes them
        ("{range .users[*]}{.name}={.user.username}; {end}", "myself=; e2e=admin; "),
        ("{range .items[*]}{range .status.addresses[*]}{.address} {end}| {end}", "127.0.0.1 | 127.0.0.2 127.0.0.3 | "),
        ("{range .users[*]}{.name},", "myself,e2e,"),  # a range without {end} runs to the end, as in kubectl
        ("{.items[*].metadata.nothere}", ""),
    ],
)
def test_more_of_kubectls_dialect(template: str, printed: str) -> None:
    assert run(template, allow_missing=True) == printed


@pytest.mark.parametrize(
    ("data", "template", "printed"),
    [
        ({"n": [{"v": 1}, {"v": 5}, {"v": 10}]}, "{.n[?(@.v>1)].v}", "5 10"),
        ({"n": [{"v": 1}, {"v": 5}, {"v": 10}]}, "{.n[?(@.v<=5)].v}", "1 5"),
        ({"n": [{"v": 1}, {"v": 5}, {"v": 10}]}, "{.n[?(@.v>=10)].v}", "10"),
        ({"n": [{"v": 1.5}, {"v": 5}]}, "{.n[?(@.v<2)].v}", "1.5"),
        ({"n": [{"v": "a"}, {"v": "b"}]}, "{.n[?(@.v<\"b\")].v}", "a"),
        ({"n": [{"ok": True}, {"ok": False}]}, "{.n[?(@.ok==true)].ok}", "true"),
        ({"x": 1000000.0, "y": 0.5, "z": None, "b": False}, "{.x} {.y} {.z} {.b}", "1e+06 0.5 <nil> false"),
        ({"m": {"b": 1.0, "a": "<&>"}}, "{.m}", '{"a":"\\u003c\\u0026\\u003e","b":1}'),
        ({"a": {"b.c": "dot"}}, "{.a.b\\.c}", "dot"),
        ({"a": {"b": {"c": "path"}}}, "{.a['b.c']}", "path"),  # kubectl's quirk: a quoted key with dots is a path
    ],
)
def test_filters_and_how_values_print(data: Any, template: str, printed: str) -> None:
    assert run(template, data) == printed


def test_missing_keys_print_nothing_unless_they_are_not_allowed() -> None:
    assert run("{.nothere}", allow_missing=True) == ""
    assert run("a{.nothere}b", allow_missing=True) == "ab"
    with pytest.raises(JSONPathError, match=r"^nothere is not found$"):
        run("{.nothere}")
    with pytest.raises(JSONPathError, match=r"^password is not found$"):
        run("{.users[0].user.password}")


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{.items[5]}", "array index out of bounds: index 5, length 2"),  # even with missing keys allowed
        ("{.items[-3]}", "array index out of bounds: index -1, length 2"),
        ("{.items[0:9]}", "array index out of bounds: index 8, length 2"),
        ("{.items[1:0]}", "starting index 1 is greater than ending index 0"),
        ("{.kind[0]}", "string is not array or slice"),
        ("{.users[?(@.name>1)]}", "incompatible types for comparison"),
        ("{.users[*][?(@.x)]}", "is not array or slice and cannot be filtered"),
    ],
)
def test_evaluation_errors(template: str, error: str) -> None:
    with pytest.raises(JSONPathError, match=error.replace("[", r"\[")):
        run(template, allow_missing=True)


@pytest.mark.parametrize(
    ("template", "position", "why", "fix"),
    [
        ("{.metadata.name", 16, "unclosed action", "end the expression with '}'"),
        ("{.items[0}", 8, "unterminated array", "close it with ']'"),
        ('{.items[?(@.a=="x"}', 8, "unterminated filter", "close it with ')]'"),
        ("{.items[?(@.a=1)]}", 14, "unrecognized filter operator '='", "use == to compare"),
        ("{.items[?(@.a=~1)]}", 14, "unrecognized filter operator '=~'", "use ==, !=, <, >, <= or >="),
        ("{.items[x]}", 8, "invalid array index 'x'", "a quoted key (['name'])"),
        ("{end}", 2, "not in range, nothing to end", "start the loop first"),
        ("a {metadata}", 4, "unrecognized identifier 'metadata'", "a field is written with a dot ('{.metadata}')"),
        ('{.a}{"x}', 6, "unterminated quoted string", 'close the string with "'),
        ("{.a ! .b}", 5, "unrecognized character '!'", "fields start with '.'"),
        ("{....a}", 4, "invalid multiple recursive descent", "write '..' once"),
        ("{.a range .b}", 5, "'range' must stand alone at the start of an action", "{range EXPR}"),
    ],
)
def test_parse_errors_name_the_flag_show_where_and_the_fix(template: str, position: int, why: str, fix: str) -> None:
    with pytest.raises(JSONPathError) as exc:
        jsonpath.parse(template, "-o jsonpath")
    message = str(exc.value)
    first, shown, caret, fix_line = message.split("\n")
    assert first.startswith(f"-o jsonpath: cannot parse the template at position {position}: {why}"), message
    assert shown == f"  {template}"
    assert caret == "  " + " " * (position - 1) + "^"
    assert fix_line.startswith("  fix: ") and fix in fix_line


@pytest.mark.parametrize("path", [".metadata.name", "metadata.name", "{.metadata.name}", "{metadata.name}"])
def test_relaxed_paths_are_kubectls_four_spellings(path: str) -> None:
    t = jsonpath.parse_relaxed(path, "--sort-by")
    assert t.source == "{.metadata.name}"
    assert t.execute({"metadata": {"name": "x"}}) == "x"


def test_relaxed_path_errors() -> None:
    with pytest.raises(JSONPathError, match=r"--sort-by: unexpected path '\{\.a\}\{\.b\}', expected a 'name1\.name2'"):
        jsonpath.parse_relaxed("{.a}{.b}", "--sort-by")
    with pytest.raises(JSONPathError, match="--sort-by: cannot parse the template at position 4: unterminated array"):
        jsonpath.parse_relaxed(".a[0", "--sort-by")


def test_sort_order_is_kubectls() -> None:
    t = jsonpath.parse_relaxed(".v", "--sort-by")
    objs = [{"v": "node-10"}, {"v": "node-2"}, {}, {"v": "node-1"}]
    keys = [jsonpath.sort_key(*jsonpath.first_value(t, o)) for o in objs]
    assert [objs[i].get("v") for i in sorted(range(4), key=keys.__getitem__)] == [None, "node-1", "node-2", "node-10"]
    quantities = [{"v": "2"}, {"v": "500m"}, {"v": "1Gi"}, {"v": "1G"}]
    keys = [jsonpath.sort_key(*jsonpath.first_value(t, o)) for o in quantities]
    assert [quantities[i]["v"] for i in sorted(range(4), key=keys.__getitem__)] == ["500m", "2", "1G", "1Gi"]
    numbers = [{"v": 10}, {"v": 9.5}, {"v": -1}]
    keys = [jsonpath.sort_key(*jsonpath.first_value(t, o)) for o in numbers]
    assert [numbers[i]["v"] for i in sorted(range(3), key=keys.__getitem__)] == [-1, 9.5, 10]
    # several values: the first one counts, as kubectl sorts
    many = jsonpath.parse_relaxed(".v[*]", "--sort-by")
    assert jsonpath.first_value(many, {"v": ["b", "a"]}) == (True, "b")


def test_custom_columns_cells_are_go_sprint() -> None:
    assert jsonpath.go_sprint({"b": [1, "x"], "a": {"c": None}}) == "map[a:map[c:<nil>] b:[1 x]]"
    assert jsonpath.go_sprint(True) == "true"
