"""The operator's status endpoint (KEP-2779) against the in-memory API server: the pods' wiring, the official
SDK's ``update_trainjob_status`` unchanged (in a subprocess: its throttle is per process), the auth rules (401,
403), bad reports (422), the rate limit (429), the TokenReview cache and the Prometheus gauges.

The fake plays the kubelet: the test creates the pod the JobSet would get and asks the TokenRequest API for a
token bound to it, exactly what the projected volume would hold.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubetrain.api import progress as P
from kubetrain.k8s.client import resources as r
from tests.k8s.helpers import (
    add_pod,
    fake_env,
    operator_env,
    run,
    running_operator,
    token_for,
    torch_runtime,
    trainjob,
    wait_for,
)

pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed")

JS = "jobset.x-k8s.io"


def env_of(jobset: dict[str, Any]) -> dict[str, str]:
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return {e["name"]: e.get("value", "") for e in pod["containers"][0].get("env") or []}


async def post(port: int, ca: str, path: str, body: Any, token: str | None) -> tuple[int, dict[str, Any]]:
    ctx = ssl.create_default_context(cadata=ca)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, http.post(
        f"https://127.0.0.1:{port}{path}", data=body if isinstance(body, bytes) else json.dumps(body),
        headers=headers, ssl=ctx,
    ) as resp:  # fmt: skip
        return resp.status, await resp.json(content_type=None)


def report(pct: int = 42) -> dict[str, Any]:
    return {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": pct,
                              "estimatedRemainingSeconds": 120,
                              "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]}}


def sdk_report(url: str, ca_file: Path, token_file: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING)\n"
        "from kubeflow.trainer import update_trainjob_status\n"
        "ok = update_trainjob_status(progress_percent=42, estimated_remaining_seconds=120,"
        " metrics={'loss': 0.123, 'accuracy': 0.95})\n"
        "print('sent' if ok else 'not sent'); sys.exit(0 if ok else 3)\n"
    )
    env = dict(os.environ)
    for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    env.update({P.ENV_URL: url, P.ENV_CA_CERT: str(ca_file), P.ENV_TOKEN: str(token_file)})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_pods_are_wired_and_the_official_sdk_reports_into_status(tmp_path: Path) -> None:
    async def body() -> None:
        async with operator_env(status_port=0) as (env, op):
            assert op.status_endpoint is not None
            port = op.status_endpoint.port
            await env.client.create(trainjob("train"))
            js = await wait_for(lambda: env.find("jobsets", "train", group=JS), what="JobSet")
            cm = await wait_for(lambda: env.find("configmaps", "train-tls-config", group=""), what="CA")
            # Every container: the SDK's variables, the projected token (our audience) and the CA volume.
            wired = env_of(js)
            path = P.status_path("default", "train")
            assert wired[P.ENV_URL] == f"https://kubetrain-operator.kubeflow-system.svc:{port}{path}"
            assert wired[P.ENV_TOKEN] == "/var/run/secrets/kubeflow/trainer/token"
            assert wired[P.ENV_CA_CERT] == "/var/run/secrets/kubeflow/trainer/ca.crt"
            pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            (vol,) = [v for v in pod_spec["volumes"] if v["name"] == P.VOLUME_NAME]
            sources = vol["projected"]["sources"]
            assert sources[0]["serviceAccountToken"]["audience"] == "trainer.kubeflow.org"
            assert sources[1]["configMap"]["name"] == "train-tls-config"
            assert cm["data"]["ca.crt"] == op.status_endpoint.certs.ca_pem
            assert cm["metadata"]["ownerReferences"][0]["name"] == "train"

            pod = await add_pod(env, "train")
            token = await token_for(env, pod)
            (tmp_path / "ca.crt").write_text(cm["data"]["ca.crt"])
            (tmp_path / "token").write_text(token)
            import asyncio

            done = await asyncio.to_thread(
                sdk_report, f"https://127.0.0.1:{port}{path}", tmp_path / "ca.crt", tmp_path / "token"
            )
            assert done.returncode == 0, done.stdout + done.stderr
            ts = await wait_for(lambda: env.get("trainjobs", "train").get("status", {}).get("trainerStatus"))
            assert ts["progressPercentage"] == 42 and ts["estimatedRemainingSeconds"] == 120
            assert ts["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
            assert ts["lastUpdatedTime"].endswith("Z")

    run(body)


def test_auth_rules_limits_cache_and_metrics() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            async with running_operator(env, status_port=0, status_rate=1.0, status_rate_burst=3,
                                        health_port=0) as op:  # fmt: skip
                assert op.status_endpoint is not None
                port, ca = op.status_endpoint.port, op.status_endpoint.certs.ca_pem
                await env.client.create(trainjob("a"))
                await env.client.create(trainjob("b"))
                await wait_for(lambda: env.find("jobsets", "b", group=JS), what="JobSets")
                pod_a = await add_pod(env, "a")
                good = await token_for(env, pod_a)
                path_a, path_b = P.status_path("default", "a"), P.status_path("default", "b")

                code, status = await post(port, ca, path_a, report(), None)
                assert code == 401 and status["reason"] == "Unauthorized"
                code, status = await post(port, ca, path_a, report(), "not-a-token")
                assert code == 401 and "invalid token" in status["message"]
                wrong_audience = await token_for(env, pod_a, audience="https://kubernetes.default.svc")
                assert (await post(port, ca, path_a, report(), wrong_audience))[0] == 401
                # Another TrainJob's pod; a token bound to no pod.
                code, status = await post(port, ca, path_b, report(), good)
                assert code == 403 and "does not belong to TrainJob default/b" in status["message"]
                code, status = await post(port, ca, path_a, report(), await token_for(env, None))
                assert code == 403 and "not bound to a pod" in status["message"]
                assert "trainerStatus" not in (env.get("trainjobs", "b").get("status") or {})

                reviews = env.api.tokens.reviews
                bad = {"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "2026-01-01T00:00:00Z"}}
                code, status = await post(port, ca, path_a, bad, good)
                assert code == 422 and "trainerStatus.progressPercentage: 101 is outside 0..100" in status["message"]
                assert env.api.tokens.reviews == reviews  # the valid token's review was cached

                # The subject's burst is spent (3 requests with the valid token so far): 429 with Retry-After.
                code, status = await post(port, ca, path_a, report(), good)
                assert code == 429 and "too many reports from system:serviceaccount:default:default" in str(status)

                op.status_endpoint.limiter.rate = 1000.0  # refill at once
                code, echoed = await post(port, ca, path_a, report(77), good)
                assert code == 200 and echoed["trainerStatus"]["progressPercentage"] == 77
                await wait_for(lambda: op.metrics.progress._jobs.get(("default", "a")), what="gauges")
                async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{op.health.port}/metrics") as m:
                    text = await m.text()
                assert 'kubetrain_trainjob_progress_percent{namespace="default",trainjob="a"} 77.0' in text
                assert 'kubetrain_trainjob_metric{metric="loss",namespace="default",trainjob="a"} 0.123' in text
                assert 'kubetrain_status_reports_total{code="401"} 3.0' in text
                # A deleted TrainJob's series go with it.
                await env.client.delete(r.TRAINJOB, "a", "default")
                await wait_for(lambda: ("default", "a") not in op.metrics.progress._jobs, what="series dropped")
                # A report for a TrainJob that is gone (its pod remains): 404.
                assert (await post(port, ca, path_a, report(), good))[0] == 404

    run(body)
