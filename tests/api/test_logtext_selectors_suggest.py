"""Log text helpers (lines, carriage returns, time formats), label selectors and not-found suggestions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import KubetrainError
from kubetrain.api.logtext import (
    LineSplitter,
    collapse_cr,
    lines_of,
    parse_duration,
    parse_rfc3339,
    rfc3339nano,
    step_prefix,
)
from kubetrain.api.selectors import parse, parse_fields
from kubetrain.api.suggest import close_matches, not_found_hint
from kubetrain.api.views import LogChunk, StateChange, StateView


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("plain", "plain"),
        (" 10%|#   |\r 50%|#####|\r100%|##########|", "100%|##########|"),
        ("windows line\r", "windows line"),
        ("a\r\r", "a"),
        ("\r", ""),
    ],
)
def test_collapse_cr_shows_the_last_state(line: str, shown: str) -> None:
    assert collapse_cr(line) == shown


def test_line_splitter_holds_the_unfinished_line() -> None:
    sp = LineSplitter()
    assert sp.feed("a\nb") == ["a"]
    assert sp.feed("c\n\nd") == ["bc", ""]
    assert sp.partial == "d"
    assert sp.flush() == ["d"]
    assert sp.flush() == []


@given(st.lists(st.text(alphabet="ab\n\r", max_size=20), max_size=10))
def test_line_splitter_loses_and_invents_nothing(chunks: list[str]) -> None:
    sp = LineSplitter()
    lines: list[str] = []
    for c in chunks:
        lines += sp.feed(c)
    lines += sp.flush()
    text = "".join(chunks)
    assert "\n".join(lines) == (text[:-1] if text.endswith("\n") else text)


def test_lines_of_prefixes_once_a_second_step_is_announced() -> None:
    items = [
        LogChunk("node-0-0", ""),
        LogChunk("node-1-0", ""),
        LogChunk("node-0-0", "a\nb"),
        None,
        StateChange(StateView("Running")),
        LogChunk("node-1-0", "c\n"),
        LogChunk("node-0-0", "\n"),
    ]
    assert list(lines_of(items)) == ["[node-0/0] a", "[node-1/0] c", "[node-0/0] b"]
    assert list(lines_of([LogChunk("node-0-0", "x\ny")])) == ["x", "y"]
    assert step_prefix("dataset-initializer-0-0") == "dataset-initializer-0/0"


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("7", 7)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5 minutes", "m5", "1d", "-3s"])
def test_bad_durations_say_what_is_expected(bad: str) -> None:
    with pytest.raises(KubetrainError, match=r"--since: invalid duration .* \(fix: a number with a unit"):
        parse_duration(bad)


def test_times() -> None:
    assert parse_rfc3339("2026-01-01T00:00:00Z") == 1_767_225_600.0
    assert parse_rfc3339("2026-01-01T01:00:00.5+01:00") == 1_767_225_600.5
    assert rfc3339nano(1_767_225_600.0) == "2026-01-01T00:00:00Z"
    assert rfc3339nano(1_767_225_600.25) == "2026-01-01T00:00:00.25Z"
    with pytest.raises(KubetrainError, match="not an RFC 3339 time"):
        parse_rfc3339("yesterday")


@pytest.mark.parametrize(
    ("selector", "labels", "match"),
    [
        ("team=a", {"team": "a"}, True),
        ("team==a", {"team": "b"}, False),
        ("team!=a", {}, True),
        ("team in (a, b),env", {"team": "b", "env": "x"}, True),
        ("team notin (a,b)", {"team": "a"}, False),
        ("!gpu", {"gpu": "1"}, False),
        ("gpu", {"gpu": ""}, True),
        ("", {"x": "y"}, True),
    ],
)
def test_selectors(selector: str, labels: dict[str, str], match: bool) -> None:
    assert parse(selector).matches(labels) is match


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), max_size=3),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["x", "y"]),
)
def test_equality_and_inequality_are_complements(labels: dict[str, str], key: str, value: str) -> None:
    assert parse(f"{key}={value}").matches(labels) != parse(f"{key}!={value}").matches(labels)
    assert parse(f"{key} in ({value})").matches(labels) == parse(f"{key}={value}").matches(labels)


@pytest.mark.parametrize("bad", ["=a", "a in b", "a in ()", "a b", "a=b=c"])
def test_bad_selectors(bad: str) -> None:
    with pytest.raises(KubetrainError, match=r"invalid label selector .*\(fix: use key=value"):
        parse(bad)


def test_suggestions_are_few_and_close() -> None:
    pool = [f"job-{i}" for i in range(150)] + ["mnist-ddp", "mnist-ddp-2"]
    assert close_matches("mnist-dpp", pool) == ["mnist-ddp", "mnist-ddp-2"]
    assert len(close_matches("job-1", pool)) == 3
    hint = not_found_hint("resnet", pool, "list them with X")
    assert hint == " (152 exist, none with a similar name; list them with X)"
    assert not_found_hint("a", [], "list them with X") == " (there are none; list them with X)"


POD = {
    "metadata": {"name": "job-node-0-0", "namespace": "ml"},
    "spec": {"nodeName": "w1", "restartPolicy": "OnFailure"},
    "status": {"phase": "Running", "podIP": "10.0.0.5"},
}
EVENT = {
    "metadata": {"name": "job.17a", "namespace": "ml"},
    "involvedObject": {"kind": "TrainJob", "name": "job"},
    "reason": "BackOff",
    "type": "Warning",
    "source": {"component": "kubetrain-local"},
}


@pytest.mark.parametrize(
    ("selector", "kind", "obj", "match"),
    [
        ("status.phase=Running", "Pod", POD, True),
        ("status.phase==Running", "Pod", POD, True),
        ("status.phase!=Running", "Pod", POD, False),
        ("metadata.name=job-node-0-0,spec.nodeName=w1", "Pod", POD, True),
        ("metadata.name=job-node-0-0,spec.nodeName=w2", "Pod", POD, False),
        ("spec.hostNetwork=false", "Pod", POD, True),  # unset reads as false, as on the API server
        ("status.nominatedNodeName=", "Pod", POD, True),
        ("involvedObject.name=job,type=Warning", "Event", EVENT, True),
        ("involvedObject.kind!=Pod", "Event", EVENT, True),
        ("source=kubetrain-local", "Event", EVENT, True),
        ("metadata.namespace=ml", "TrainJob", POD, True),
        ("", "Pod", POD, True),
    ],
)
def test_field_selectors(selector: str, kind: str, obj: dict[str, object], match: bool) -> None:
    assert parse_fields(selector, kind, "things").matches(obj) is match


def test_field_selector_values_may_escape_commas() -> None:
    sel = parse_fields("metadata.name=a\\,b", "Pod", "pods")
    assert [(r.field, r.value) for r in sel.requirements] == [("metadata.name", "a,b")]


@pytest.mark.parametrize(
    ("selector", "kind", "error"),
    [
        ("status.phase", "Pod", "cannot parse 'status.phase' (fix: use field=value, field==value or field!=value"),
        ("spec.containers=x", "Pod", "field label not supported for pods: 'spec.containers' (fix: use one of"),
        ("status.phase=Running", "TrainJob", "not supported for pods: 'status.phase' (fix: use one of "
         "metadata.name, metadata.namespace)"),
        ("reason=x,foo=y", "Event", "field label not supported for pods: 'foo'"),
    ],
)
def test_bad_field_selectors_name_the_field_and_the_ones_there_are(selector: str, kind: str, error: str) -> None:
    with pytest.raises(KubetrainError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_fields(selector, kind, "pods")
