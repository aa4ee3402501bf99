"""``kubetrain.api.progress`` (the report both status servers accept, and how it is shown) and
``kubetrain.api.logprogress`` (progress derived from log lines)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import progress as P
from kubetrain.api.logprogress import MAX_METRICS, LogProgress

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def body(ts: object) -> bytes:
    return json.dumps({"trainerStatus": ts}).encode()


def test_the_sdk_payload_is_accepted_and_normalised() -> None:
    # What kubeflow.trainer.update_trainjob_status sends: isoformat() with microseconds and +00:00.
    sent = {"lastUpdatedTime": "2026-01-01T12:00:00.123456+00:00", "progressPercentage": 45,
            "estimatedRemainingSeconds": 795, "metrics": [{"name": "loss", "value": "0.2347"}]}  # fmt: skip
    assert P.parse_report(body(sent)) == {
        "lastUpdatedTime": "2026-01-01T12:00:00Z",
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 795,
        "metrics": [{"name": "loss", "value": "0.2347"}],
    }
    assert P.parse_report(b'{"trainerStatus": null}') is None
    # A fractional percentage from training code is taken whole rather than losing the report.
    assert P.parse_report(body({"lastUpdatedTime": "2026-01-01T12:00:00Z", "progressPercentage": 45.7}))[
        "progressPercentage"
    ] == 45


@pytest.mark.parametrize(
    ("payload", "code", "message"),
    [
        (b"not json", 422, "the body is not JSON"),
        (b"[]", 422, "the body must be a JSON object"),
        (b'{"trainerstatus": {}}', 422, "trainerstatus: unknown field"),
        (body({"progressPercentage": 3}), 422, "trainerStatus.lastUpdatedTime: required"),
        (body({"lastUpdatedTime": "yesterday"}), 422, "trainerStatus.lastUpdatedTime: 'yesterday' is not an RFC 3339"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00"}), 422, "has no time zone"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 101}), 422,
         "trainerStatus.progressPercentage: 101 is outside 0..100"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": "50"}), 422,
         'expected an integer from 0 to 100, got "50"'),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "estimatedRemainingSeconds": -1}), 422,
         "estimatedRemainingSeconds: -1 is outside"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "metrics": [{"name": "loss", "value": 0.5}]}), 422,
         "trainerStatus.metrics[0].value: expected a string of 1 to 64 characters"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "metrics": [{"name": "", "value": "1"}]}), 422,
         "trainerStatus.metrics[0].name"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "metrics": [{"name": "a", "value": "1"}] * 257}), 422,
         "257 metrics, at most 256"),
        (body({"lastUpdatedTime": "2026-01-01T00:00:00Z", "progress": 5}), 422, "trainerStatus.progress: unknown"),
        (b"{" + b" " * P.MAX_BODY + b"}", 413, "at most 65536 bytes"),
    ],
)
def test_bad_reports_name_the_field(payload: bytes, code: int, message: str) -> None:
    with pytest.raises(P.ReportError) as exc:
        P.parse_report(payload)
    assert exc.value.code == code
    assert message in exc.value.message


@given(st.binary(max_size=300))
def test_any_body_is_either_a_report_or_a_report_error(data: bytes) -> None:
    try:
        P.parse_report(data)
    except P.ReportError as exc:
        assert exc.code in (413, 422) and exc.message


@given(
    st.integers(0, 100),
    st.integers(0, P.INT32_MAX),
    st.lists(st.tuples(st.text(min_size=1, max_size=64), st.text(min_size=1, max_size=64)), max_size=20),
)
def test_valid_reports_round_trip(pct: int, eta: int, metrics: list[tuple[str, str]]) -> None:
    ts = {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": pct, "estimatedRemainingSeconds": eta,
          "metrics": [{"name": n, "value": v} for n, v in metrics]}  # fmt: skip
    assert P.parse_report(body(ts)) == ts


def test_paths() -> None:
    path = P.status_path("team-a", "mnist")
    assert path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status"
    assert P.parse_path(path) == ("team-a", "mnist")
    assert P.parse_path("/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b") is None
    assert P.parse_path("/apis/trainer.kubeflow.org/v1alpha1/namespaces/A/trainjobs/b/status") is None


def test_display_helpers() -> None:
    ts = {"lastUpdatedTime": "2026-01-01T11:59:48Z", "progressPercentage": 45, "estimatedRemainingSeconds": 785,
          "metrics": [{"name": "loss", "value": "0.23"}]}  # fmt: skip
    status = {"trainerStatus": ts}
    assert P.progress_column(status) == "45%"
    assert P.progress_column({}) == "-"
    p = P.progress_of(status)
    assert p is not None
    assert P.summary_text(p, now=NOW, width=10) == "[####......] 45% · ETA 13m05s · loss=0.23 · 12s ago"
    assert P.summary_text(p, width=10, finished=True) == "[####......] 45% · loss=0.23"
    assert [P.duration_text(s) for s in (5, 65, 3700, 90000)] == ["5s", "1m05s", "1h01m", "1d01h"]
    many = tuple((f"m{i}", "1") for i in range(8))
    assert P.metrics_text(many, limit=2) == "m0=1 m1=1 (+6 more)"
    assert P.log_progress_enabled(None) and not P.log_progress_enabled("False") and P.log_progress_enabled("true")


# -- progress from log lines -----------------------------------------------------------------------------------


def derived(*chunks: tuple[str, float]) -> dict[str, object] | None:
    lp = LogProgress()
    for text, t in chunks:
        lp.feed(text, t)
    return lp.trainer_status(NOW)


def test_tqdm_bar_with_eta_and_postfix_metrics() -> None:
    ts = derived((" 45%|████▌     | 450/1000 [01:23<01:40,  5.41it/s, loss=0.23, lr=1e-4]", 0.0))
    assert ts == {"lastUpdatedTime": "2026-01-01T12:00:00Z", "progressPercentage": 45, "estimatedRemainingSeconds": 100,
                  "metrics": [{"name": "loss", "value": "0.23"}, {"name": "lr", "value": "1e-4"}]}  # fmt: skip


def test_carriage_return_redraws_count_by_their_last_state() -> None:
    ts = derived(("\r  3%|▎ | 30/1000 [00:10<05:23,  3.00it/s]\r  4%|▍ | 40/1000 [00:13<05:20,  3.00it/s]", 1.0))
    assert ts is not None and ts["progressPercentage"] == 4 and ts["estimatedRemainingSeconds"] == 320
    # Thousands of redraws on one "line" (no newline for minutes) still count by the last one.
    redraws = "".join(f"\r{i // 10:3d}%|#   | {i}/1000 [00:01<00:02,  9.00it/s]" for i in range(1000))
    ts = derived((redraws + "\r", 0.0))
    assert len(redraws) > 4096 and ts is not None and ts["progressPercentage"] == 99


def test_hf_trainer_dicts_and_bars_that_are_not_training_are_ignored() -> None:
    ts = derived(
        ("{'loss': 0.2347, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.45}\n", 0.0),
        ("Map: 100%|██████████| 100000/100000 [00:01<00:00, 50000.00 examples/s]\n", 0.0),
        ("model.safetensors: 100%|██████████| 2.47G/2.47G [00:20<00:00, 120MB/s]\n", 0.0),
        (" 20%|██        | 200/1000 [00:40<02:40,  5.00it/s]\n", 1.0),
        ("Validation DataLoader 0: 50%|█████     | 5/10 [00:00<00:00, 50.00it/s]\n", 2.0),
    )
    assert ts is not None
    assert ts["progressPercentage"] == 20 and ts["estimatedRemainingSeconds"] == 160
    assert [m["name"] for m in ts["metrics"]] == ["loss", "grad_norm", "learning_rate", "epoch"]  # type: ignore[index]


def test_lightning_bars() -> None:
    tqdm = derived(("Epoch 3:  45%|████▌     | 450/1000 [01:23<01:40,  5.41it/s, v_num=0, train_loss=0.234]", 0))
    assert tqdm is not None and tqdm["progressPercentage"] == 45
    assert tqdm["metrics"] == [{"name": "epoch", "value": "3"}, {"name": "train_loss", "value": "0.234"}]
    # Rich: epoch 1 of 0..9 with 45% of it done → 14% overall; ETA = this epoch's rest + 8 epochs at its pace.
    rich = derived(("Epoch 1/9  ━━━━━━━━━━━━━━━━ 450/1000 0:01:23 • 0:01:40 5.41it/s v_num: 0 train_loss: 0.234", 0))
    assert rich is not None and rich["progressPercentage"] == 14
    assert rich["estimatedRemainingSeconds"] == 100 + 8 * 183


def test_epoch_and_step_lines_get_an_eta_from_their_pace() -> None:
    ts = derived(("Epoch 3/10\n", 0.0), ("Epoch 4/10\n", 100.0))
    assert ts is not None and ts["progressPercentage"] == 30 and ts["estimatedRemainingSeconds"] == 700
    ts = derived(("step 100/1000 loss=2.3\n", 0.0), ("step 200/1000 loss=2.1\n", 10.0))
    assert ts == {"lastUpdatedTime": "2026-01-01T12:00:00Z", "progressPercentage": 20, "estimatedRemainingSeconds": 80,
                  "metrics": [{"name": "loss", "value": "2.1"}]}  # fmt: skip


def test_nothing_recognised_and_bounded_metrics() -> None:
    assert derived(("hello\nworld 50% done\n", 0.0)) is None
    lp = LogProgress()
    lp.feed(", ".join(f"m{i}=1" for i in range(100)).join(["step 1/2 ", "\n"]), 0.0)
    ts = lp.trainer_status(NOW)
    assert ts is not None and len(ts["metrics"]) == MAX_METRICS


@given(st.text(max_size=400))
def test_any_text_is_safe(text: str) -> None:
    lp = LogProgress()
    lp.feed(text, 0.0)
    ts = lp.trainer_status(NOW)
    if ts is not None:
        assert P.validate_trainer_status(ts) == ts  # always a valid trainerStatus
