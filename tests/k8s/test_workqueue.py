"""Work queue semantics: de-duplication, no concurrent processing of a key, lanes, backoff."""

from __future__ import annotations

import asyncio

from kubetrain.k8s.operator.workqueue import HIGH, LOW, WorkQueue
from tests.k8s.helpers import run


def test_a_queued_key_is_queued_once() -> None:
    async def body() -> None:
        q = WorkQueue()
        for _ in range(3):
            q.add("a")
        q.add("b")
        assert len(q) == 2
        assert [await q.get(), await q.get()] == ["a", "b"]

    run(body)


def test_key_added_while_processing_is_requeued_after_done_not_handed_out_twice() -> None:
    async def body() -> None:
        q = WorkQueue()
        q.add("a")
        key = await q.get()
        q.add("a")
        assert len(q) == 0  # not available to a second worker while the first holds it
        q.done(key)
        assert len(q) == 1 and await q.get() == "a"

    run(body)


def test_high_lane_is_served_before_low_and_promotion_works() -> None:
    async def body() -> None:
        q = WorkQueue(fairness=100)
        for i in range(3):
            q.add(f"old{i}", LOW)
        q.add("new", HIGH)
        q.add("old2", HIGH)  # promoted
        got = [await q.get() for _ in range(4)]
        assert got == ["new", "old2", "old0", "old1"]

    run(body)


def test_low_lane_is_not_starved_by_a_stream_of_high_priority_keys() -> None:
    async def body() -> None:
        q = WorkQueue(fairness=4)
        q.add("resync", LOW)
        for i in range(10):
            q.add(f"new{i}", HIGH)
        got = [await q.get() for _ in range(4)]
        assert "resync" in got

    run(body)


def test_backoff_doubles_per_failure_and_forget_resets_it() -> None:
    async def body() -> None:
        q = WorkQueue(base_delay=1.0, max_delay=5.0)
        delays = [q.add_rate_limited("a") for _ in range(5)]
        assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
        q.forget("a")
        assert q.failures("a") == 0
        q.close()

    run(body)


def test_add_after_delivers_later_and_keeps_the_earliest_timer() -> None:
    async def body() -> None:
        q = WorkQueue()
        q.add_after("a", 0.05)
        q.add_after("a", 10)
        assert len(q) == 0
        assert await asyncio.wait_for(q.get(), 5) == "a"
        q.close()

    run(body)


def test_close_wakes_waiting_workers() -> None:
    async def body() -> None:
        q = WorkQueue()
        waiter = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        q.close()
        done, _ = await asyncio.wait([waiter], timeout=5)
        assert waiter in done and waiter.cancelled()

    run(body)
