"""Status rules as pure functions (reference §5 and §8.2)."""

from __future__ import annotations

import datetime as dt

from kubetrain.k8s.operator import status as st

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def tj(**spec) -> dict:
    return {
        "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"runtimeRef": {"name": "x"}, **spec},
    }


def test_never_suspended_job_gets_no_condition() -> None:
    update = st.compute(tj(), None, T0)
    assert update.status == {} and not update.changed


def test_suspend_then_resume_and_transition_time_moves_only_on_flip() -> None:
    job = tj(suspend=True)
    first = st.compute(job, None, T0)
    job["status"] = first.status
    again = st.compute(job, None, T0 + dt.timedelta(minutes=5))
    assert not again.changed
    job["spec"]["suspend"] = False
    resumed = st.compute(job, None, T0 + dt.timedelta(minutes=10))
    cond = resumed.status["conditions"][0]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Resumed", "TrainJob is resumed")
    assert cond["lastTransitionTime"] == "2026-01-01T00:10:00Z"


def test_jobset_conditions_other_than_completed_failed_are_ignored() -> None:
    js = {
        "status": {
            "conditions": [
                {"type": "StartupPolicyCompleted", "status": "True"},
                {"type": "Failed", "status": "False"},
            ]
        }
    }
    assert st.compute(tj(), js, T0).status == {}


def test_deadline_requeues_for_the_remaining_time_then_fails() -> None:
    job = tj(activeDeadlineSeconds=600)
    pending = st.compute(job, None, T0 + dt.timedelta(seconds=100))
    assert pending.deadline.requeue_after == 500 and not pending.deadline.exceeded
    over = st.compute(job, None, T0 + dt.timedelta(seconds=601))
    assert over.deadline.exceeded
    assert over.status["conditions"][0]["reason"] == "DeadlineExceeded"


def test_deadline_clock_restarts_at_resume_and_stops_while_suspended() -> None:
    job = tj(activeDeadlineSeconds=60, suspend=True)
    assert st.compute(job, None, T0 + dt.timedelta(hours=1)).deadline.requeue_after is None
    job["spec"]["suspend"] = False
    job["status"] = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "lastTransitionTime": "2026-01-01T01:00:00Z",
            }
        ]
    }
    update = st.compute(job, None, T0 + dt.timedelta(hours=1, seconds=30))
    assert update.deadline.requeue_after == 30


def test_deadline_failure_survives_a_later_jobset_sync() -> None:
    job = tj(activeDeadlineSeconds=1)
    job["status"] = {
        "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "m"}],
        "trainerStatus": {"progressPercentage": 42},
    }
    js = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "x"}]}}
    update = st.compute(job, js, T0)
    cond = update.status["conditions"][0]
    assert cond["reason"] == "DeadlineExceeded"
    assert update.status["trainerStatus"] == {"progressPercentage": 42}  # not ours: passed through


def test_resources_error_condition_is_set_and_then_removed() -> None:
    job = tj()
    failing = st.compute(job, None, T0, resources_error=("BuildFailed", "runtime missing"))
    cond = failing.status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "ResourcesCreationFailed",
        "True",
        "BuildFailed",
        "runtime missing",
    )
    job["status"] = failing.status
    healed = st.compute(job, None, T0)
    assert healed.changed and "conditions" not in healed.status


def test_long_error_messages_are_truncated_in_the_condition() -> None:
    update = st.compute(tj(), None, T0, resources_error=("ApplyFailed", "x" * 5000))
    message = update.status["conditions"][0]["message"]
    assert len(message) == 954 and message.endswith(" ...")


def test_jobset_condition_without_reason_still_yields_a_valid_condition() -> None:
    js = {"status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    cond = st.compute(tj(), js, T0).status["conditions"][0]
    assert cond["type"] == "Complete" and cond["reason"] == "Completed"


def _held_jobset(queue: str | None = "team-a") -> dict:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "metadata": {"labels": labels, "annotations": {"kubetrain.dev/suspend-applied": "false"}},
        "spec": {"suspend": True},
    }


def test_a_jobset_held_by_kueue_shows_as_queued_then_resumed() -> None:
    job = tj()
    queued = st.compute(job, _held_jobset(), T0)
    cond = queued.status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Suspended", "True", "Queued")
    assert cond["message"] == 'TrainJob is queued: Kueue holds its JobSet suspended until LocalQueue "team-a" admits it'
    job["status"] = queued.status
    admitted = {**_held_jobset(), "spec": {"suspend": False}}
    resumed = st.compute(job, admitted, T0 + dt.timedelta(minutes=3))
    cond = resumed.status["conditions"][0]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == ("False", "Resumed", "2026-01-01T00:03:00Z")


def test_a_jobset_the_operator_suspended_itself_is_not_held() -> None:
    ours = _held_jobset()
    ours["metadata"]["annotations"]["kubetrain.dev/suspend-applied"] = "true"
    assert st.compute(tj(), ours, T0).status == {}
    # Applied by an operator that did not record what it asked for: upstream's rule (not held) applies.
    del ours["metadata"]["annotations"]
    assert st.compute(tj(), ours, T0).status == {}


def test_a_jobset_held_without_a_queue_label_names_no_queue() -> None:
    cond = st.compute(tj(), _held_jobset(queue=None), T0).status["conditions"][0]
    assert (cond["reason"], cond["message"]) == (
        "JobSetSuspended",
        "TrainJob is suspended: another controller suspended its JobSet",
    )


def test_the_deadline_clock_waits_while_queued_and_starts_at_admission() -> None:
    job = tj(activeDeadlineSeconds=60)
    queued = st.compute(job, _held_jobset(), T0 + dt.timedelta(hours=2))
    assert not queued.deadline.exceeded and queued.deadline.requeue_after is None
    job["status"] = queued.status
    admitted = {**_held_jobset(), "spec": {"suspend": False}}
    running = st.compute(job, admitted, T0 + dt.timedelta(hours=2, seconds=10))
    assert running.deadline.requeue_after == 60


def test_a_failed_trainjob_stays_failed_whatever_its_jobset_shows_later() -> None:
    """Upstream #3891: nothing in a status sync takes ``Failed`` away, with the JobSet gone or running again."""
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "m",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    job = tj()
    job["status"] = {"conditions": [failed]}
    running = {"status": {"conditions": [{"type": "Failed", "status": "False"}], "restarts": 0}}
    for jobset in (None, running):
        update = st.compute(job, jobset, T0 + dt.timedelta(hours=1))
        assert update.status["conditions"] == [failed] and not update.changed


def test_jobset_finished_names_the_terminal_condition() -> None:
    def js(*conds: tuple[str, str]) -> dict:
        return {"status": {"conditions": [{"type": t, "status": s} for t, s in conds]}}

    assert st.jobset_finished(None) is None
    assert st.jobset_finished(js(("StartupPolicyCompleted", "True"), ("Failed", "False"))) is None
    assert st.jobset_finished(js(("Suspended", "False"), ("Failed", "True"))) == "Failed"
    assert st.jobset_finished(js(("Completed", "True"))) == "Completed"
