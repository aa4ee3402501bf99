"""The client against the fake API server: the wire behaviours the operator relies on."""

from __future__ import annotations

import pytest

from kubetrain.k8s.client import Conflict, Gone, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.errors import ApiError
from tests.k8s.helpers import API, client_for, fake_env, run, trainjob


def cm(name: str, data: dict[str, str], owner_uid: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": API, "kind": "TrainJob", "name": "job", "uid": owner_uid, "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_create_get_list_and_already_exists() -> None:
    async def body() -> None:
        async with fake_env() as env:
            created = await env.client.create(cm("a", {"k": "v"}))
            assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
            got = await env.client.get(r.CONFIGMAP, "a", "default")
            assert got["data"] == {"k": "v"}
            with pytest.raises(Conflict) as exc:
                await env.client.create(cm("a", {"k": "other"}))
            assert exc.value.already_exists
            items, rv = await env.client.list(r.CONFIGMAP, "default")
            assert [i["metadata"]["name"] for i in items] == ["a"] and rv
            with pytest.raises(NotFound):
                await env.client.get(r.CONFIGMAP, "missing", "default")

    run(body)


def test_list_pages_with_continue_tokens() -> None:
    async def body() -> None:
        async with fake_env() as env:
            for i in range(7):
                await env.client.create(cm(f"c{i}", {}))
            from kubetrain.k8s.client import getting

            items, _ = await getting.list_(env.client.session, r.CONFIGMAP, "default", limit=3)
            assert len(items) == 7
            assert sum(1 for m, p in env.api.requests if "continue=" in p) == 2

    run(body)


def test_replace_with_stale_resource_version_conflicts() -> None:
    async def body() -> None:
        async with fake_env() as env:
            obj = await env.client.create(cm("a", {"k": "1"}))
            stale = dict(obj)
            obj["data"] = {"k": "2"}
            await env.client.replace(obj)
            stale["data"] = {"k": "3"}
            with pytest.raises(Conflict):
                await env.client.replace(stale)

    run(body)


def test_server_side_apply_ownership_conflict_and_force() -> None:
    async def body() -> None:
        async with fake_env() as env:
            other = client_for(env.api, qps=0, field_manager="someone-else")
            try:
                await other.apply(cm("a", {"k": "theirs"}))
                with pytest.raises(Conflict) as exc:
                    await env.client.apply(cm("a", {"k": "ours"}), force=False)
                assert "someone-else" in exc.value.message
                live = await env.client.apply(cm("a", {"k": "ours"}), force=True)
                assert live["data"]["k"] == "ours"
                managers = {m["manager"] for m in live["metadata"]["managedFields"]}
                assert "kubetrain" in managers
            finally:
                await other.close()

    run(body)


def test_apply_releases_fields_the_manager_stopped_sending() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.apply(cm("a", {"x": "1", "y": "2"}))
            live = await env.client.apply(cm("a", {"x": "1"}))
            assert live["data"] == {"x": "1"}

    run(body)


def test_identical_apply_keeps_resource_version() -> None:
    async def body() -> None:
        async with fake_env() as env:
            first = await env.client.apply(cm("a", {"x": "1"}))
            second = await env.client.apply(cm("a", {"x": "1"}))
            assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]

    run(body)


def test_status_subresource_separates_spec_and_status() -> None:
    async def body() -> None:
        async with fake_env() as env:
            tj = trainjob()
            tj["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
            created = await env.client.create(tj)
            assert "status" not in created  # status is ignored on create
            patched = await env.client.patch_status(r.TRAINJOB, "job", "default", {"jobsStatus": [{"name": "node"}]})
            assert patched["status"] == {"jobsStatus": [{"name": "node"}]}
            spec_patch = {"spec": {"suspend": True}, "status": {"jobsStatus": []}}
            after = await env.client.merge_patch(r.TRAINJOB, "job", "default", spec_patch)
            assert after["spec"]["suspend"] is True
            assert after["status"] == {"jobsStatus": [{"name": "node"}]}  # main resource cannot touch status
            assert after["metadata"]["generation"] == 2

    run(body)


def test_delete_garbage_collects_owned_objects() -> None:
    async def body() -> None:
        async with fake_env() as env:
            owner = await env.client.create(trainjob())
            await env.client.create(cm("child", {}, owner["metadata"]["uid"]))
            await env.client.create(cm("unrelated", {}))
            await env.client.delete(r.TRAINJOB, "job", "default")
            names = [i["metadata"]["name"] for i in (await env.client.list(r.CONFIGMAP, "default"))[0]]
            assert names == ["unrelated"]

    run(body)


def test_finalizers_and_foreground_deletion_keep_objects_until_their_dependents_are_gone() -> None:
    async def body() -> None:
        async with fake_env() as env:
            owner = await env.client.create(trainjob())
            child = cm("child", {}, owner["metadata"]["uid"])
            child["metadata"]["finalizers"] = ["test/hold"]
            await env.client.create(child)
            marked = await env.client.delete(r.TRAINJOB, "job", "default", propagation="Foreground")
            assert marked is not None and marked["metadata"]["deletionTimestamp"]
            assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
            # The dependent is being deleted but held by its finalizer; so is its owner, waiting for it.
            held = await env.client.get(r.CONFIGMAP, "child", "default")
            assert held["metadata"]["deletionTimestamp"]
            assert (await env.client.get(r.TRAINJOB, "job", "default"))["metadata"]["deletionTimestamp"]
            # An update cannot take the deletionTimestamp away; removing the last finalizer ends it.
            await env.client.merge_patch(r.CONFIGMAP, "child", "default",
                                         {"metadata": {"deletionTimestamp": None, "finalizers": None}})  # fmt: skip
            with pytest.raises(NotFound):
                await env.client.get(r.CONFIGMAP, "child", "default")
            with pytest.raises(NotFound):
                await env.client.get(r.TRAINJOB, "job", "default")

    run(body)


def test_held_watch_events_reach_open_watches_only_when_released() -> None:
    async def body() -> None:
        async with fake_env() as env:
            store = env.api.store
            _, queue = store.subscribe("", "configmaps", "default", store.rv)
            store.hold_watches("configmaps")
            await env.client.create(cm("a", {}))
            await env.client.create(cm("b", {}))
            assert queue.empty()  # a lagging watch: the objects exist, their events have not been sent
            assert store.held_from("", "configmaps") == int(store.get("", "configmaps", "default", "a")["metadata"][
                "resourceVersion"])  # bookmarks stop short of it  # fmt: skip
            store.release_watches("configmaps")
            events = [queue.get_nowait() for _ in range(queue.qsize())]
            assert [(t, o["metadata"]["name"]) for _, t, o in events] == [("ADDED", "a"), ("ADDED", "b")]
            assert store.held_from("", "configmaps") is None

    run(body)


def test_429_retry_after_is_honoured_then_succeeds() -> None:
    async def body() -> None:
        async with fake_env() as env:
            env.api.inject("GET", "/configmaps/a", 429, times=2, retry_after="0")
            await env.client.create(cm("a", {}))
            got = await env.client.get(r.CONFIGMAP, "a", "default")
            assert got["metadata"]["name"] == "a"
            assert sum(1 for m, p in env.api.requests if m == "GET" and "/configmaps/a" in p) == 3

    run(body)


def test_persistent_500_surfaces_after_retries() -> None:
    async def body() -> None:
        async with fake_env() as env:
            env.client.session.backoff_base = 0.001
            env.api.inject("GET", "/configmaps/a", 500, times=100)
            with pytest.raises(ApiError) as exc:
                await env.client.get(r.CONFIGMAP, "a", "default")
            assert exc.value.status == 500

    run(body)


def test_bearer_token_is_required_and_sent() -> None:
    async def body() -> None:
        async with fake_env(token="s3cret") as env:
            await env.client.create(cm("a", {}))
            bad = client_for(env.api, qps=0)
            bad.config.token = "wrong"
            try:
                with pytest.raises(ApiError) as exc:
                    await bad.get(r.CONFIGMAP, "a", "default")
                assert exc.value.status == 401
            finally:
                await bad.close()

    run(body)


def test_watch_resumes_from_resource_version_and_reports_gone_after_compaction() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(cm("a", {}))
            _, rv = await env.client.list(r.CONFIGMAP, "default")
            await env.client.create(cm("b", {}))
            seen = []
            async for ev in env.client.watch(r.CONFIGMAP, "default", resource_version=rv, timeout_seconds=1):
                seen.append((ev.type, ev.object["metadata"]["name"]))
                break
            assert seen == [("ADDED", "b")]
            env.api.store.compact()
            with pytest.raises(Gone):
                async for _ in env.client.watch(r.CONFIGMAP, "default", resource_version=rv, timeout_seconds=1):
                    pass

    run(body)


def test_label_selector_with_set_based_requirement() -> None:
    async def body() -> None:
        async with fake_env() as env:
            for name, role in (("p1", "node"), ("p2", "launcher"), ("p3", "other")):
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", "labels": {"role": role, "js": "job"}},
                }
                await env.client.create(pod)
            items, _ = await env.client.list(r.POD, "default", label_selector="js=job,role in (node, launcher)")
            assert sorted(i["metadata"]["name"] for i in items) == ["p1", "p2"]

    run(body)


def test_token_bucket_spaces_requests_beyond_the_burst() -> None:
    from kubetrain.k8s.client.ratelimit import TokenBucket

    now = [0.0]
    bucket = TokenBucket(qps=10, burst=2, clock=lambda: now[0])
    waits = [bucket.reserve() for _ in range(4)]
    assert waits[:2] == [0.0, 0.0]
    assert waits[2] == pytest.approx(0.1) and waits[3] == pytest.approx(0.2)
    now[0] = 10.0
    assert bucket.reserve() == 0.0


@pytest.mark.parametrize(("value", "sent"), [
    ("🌀 flux", '"\U0001f300 flux"'),  # UTF-8, never the surrogate pair go-yaml refuses
    ("café", '"café"'),
    ("a\x85b\x7f\x9f\ufffe", '"a\\u0085b\\u007f\\u009f\\ufffe"'),  # raw, go-yaml would refuse or fold them
    ("tab\tnew\n", '"tab\\tnew\\n"'),
])
def test_apply_bodies_are_json_the_api_servers_yaml_reader_takes_unchanged(value: str, sent: str) -> None:
    import json

    import yaml

    from kubetrain.k8s.client.applying import yaml_safe_json

    body = yaml_safe_json({"v": value})
    assert body.decode() == '{"v": ' + sent + "}"
    assert json.loads(body) == yaml.safe_load(body.decode()) == {"v": value}
