"""kubeconfig exec credential plugins (v1 and v1beta1): what the plugin gets, caching, expiry, refresh on 401,
client certificates, and clear errors (including for the removed auth-provider)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import ClusterConfig, ConfigError, from_kubeconfig
from kubetrain.k8s.client.errors import CredentialError
from kubetrain.testing.fakeapi import FakeApiServer
from tests.k8s.helpers import run, trainjob
from tests.k8s.test_client_tls import b64, pki, server_context  # noqa: F401  (pki is a fixture)

PLUGIN = str(Path(__file__).with_name("fake_exec_plugin.py"))
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


class Plugin:
    """The fake plugin's plan and the calls it recorded."""

    def __init__(self, state: Path) -> None:
        self.state = state
        state.mkdir(exist_ok=True)
        self.plan({"token": "tok-{n}"})

    def plan(self, plan: dict[str, Any]) -> None:
        (self.state / "plan.json").write_text(json.dumps(plan))

    @property
    def calls(self) -> list[dict[str, Any]]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return Plugin(tmp_path / "plugin")


def exec_section(plugin: Plugin, api_version: str = V1, **extra: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "apiVersion": api_version,
        "command": sys.executable,
        "args": [PLUGIN],
        "env": [{"name": "FAKE_EXEC_DIR", "value": str(plugin.state)}, {"name": "FAKE_EXTRA", "value": "yes"}],
    }
    if api_version == V1:
        section["interactiveMode"] = "Never"
    section.update(extra)
    return section


def kubeconfig(tmp_path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
        "current-context": "prod",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def exec_client(tmp_path: Path, api: FakeApiServer, section: dict[str, Any]) -> Client:
    return Client(from_kubeconfig(kubeconfig(tmp_path, api.url, {"exec": section})), qps=0)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_token_from_the_plugin_is_sent_and_cached(tmp_path: Path, plugin: Plugin, api_version: str) -> None:
    async def body() -> None:
        async with FakeApiServer(token="tok-1") as api:
            path = kubeconfig(tmp_path, api.url, {"exec": exec_section(plugin, api_version)})
            async with Client(from_kubeconfig(path), qps=0) as client:
                for _ in range(3):
                    assert (await client.list(r.CONFIGMAP, "default"))[0] == []
        (call,) = plugin.calls  # one run: no expiry means the token is kept
        assert call["info"] == {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        assert call["extra_env"] == "yes"
        assert call["stdin_tty"] is False

    run(body)


def test_cluster_info_is_passed_when_asked_for(tmp_path: Path, plugin: Plugin) -> None:
    async def body() -> None:
        async with FakeApiServer(token="tok-1") as api:
            cluster = {
                "certificate-authority-data": b64(b"CA"),
                "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}}],
            }
            path = kubeconfig(tmp_path, api.url, {"exec": exec_section(plugin, provideClusterInfo=True)}, cluster)
            async with Client(from_kubeconfig(path), qps=0) as client:
                await client.list(r.CONFIGMAP, "default")
        (call,) = plugin.calls
        assert call["info"]["spec"]["cluster"] == {
            "server": api.url,
            "certificate-authority-data": b64(b"CA"),
            "config": {"audience": "x"},
        }

    run(body)


def test_an_expired_token_is_refreshed_before_the_request(tmp_path: Path, plugin: Plugin) -> None:
    plugin.plan({"token": "tok-{n}", "ttl": 3600})

    async def body() -> None:
        async with FakeApiServer(token="tok-1") as api:
            cfg = from_kubeconfig(kubeconfig(tmp_path, api.url, {"exec": exec_section(plugin)}))
            assert cfg.exec is not None
            now = dt.datetime.now(dt.UTC)
            cfg.exec.clock = lambda: now
            async with Client(cfg, qps=0) as client:
                await client.list(r.CONFIGMAP, "default")
                await client.list(r.CONFIGMAP, "default")
                assert len(plugin.calls) == 1
                now += dt.timedelta(seconds=3600 - 5)  # inside the refresh margin before the expiry
                api.token = "tok-2"
                await client.list(r.CONFIGMAP, "default")
                assert len(plugin.calls) == 2

    run(body)


def test_a_refused_token_makes_the_plugin_run_once_more(tmp_path: Path, plugin: Plugin) -> None:
    async def body() -> None:
        async with FakeApiServer(token="tok-1") as api, exec_client(tmp_path, api, exec_section(plugin)) as c:
            await c.list(r.CONFIGMAP, "default")
            api.token = "tok-2"  # the server revoked tok-1 (or it expired early)
            assert (await c.list(r.CONFIGMAP, "default"))[0] == []
            assert len(plugin.calls) == 2
            api.token = "never-issued"
            with pytest.raises(ApiError) as exc:
                await c.list(r.CONFIGMAP, "default")
            assert exc.value.status == 401
            assert len(plugin.calls) == 3  # one more try, not a loop

    run(body)


def test_client_certificate_from_the_plugin(tmp_path: Path, plugin: Plugin, pki: dict) -> None:  # noqa: F811
    plugin.plan({"cert": pki["client_cert"].decode(), "key": pki["client_key"].decode()})

    async def body() -> None:
        async with FakeApiServer(ssl_context=server_context(pki, require_client_cert=True)) as api:
            cluster = {"certificate-authority-data": b64(pki["ca"])}
            path = kubeconfig(tmp_path, api.url, {"exec": exec_section(plugin)}, cluster)
            async with Client(from_kubeconfig(path), qps=0) as client:
                assert (await client.list(r.CONFIGMAP, "default"))[0] == []

    run(body)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"exit": 3, "stderr": "login expired"}, "exited with code 3"),
        ({"stdout": "not json"}, "did not print an ExecCredential as JSON"),
        ({"token": "t", "api_version": V1BETA1}, "answered with apiVersion 'client.authentication.k8s.io/v1beta1'"),
        ({"stdout": json.dumps({"apiVersion": V1, "kind": "ExecCredential", "status": {}})}, "neither a token"),
    ],
)
def test_plugin_failures_are_clear_errors(tmp_path: Path, plugin: Plugin, plan: dict[str, Any], message: str) -> None:
    plugin.plan(plan)

    async def body() -> None:
        async with FakeApiServer(token="t") as api, exec_client(tmp_path, api, exec_section(plugin)) as c:
            with pytest.raises(CredentialError, match=message) as exc:
                await c.list(r.CONFIGMAP, "default")
            assert exc.value.status == 401
            assert not api.requests  # nothing was sent without a credential

    run(body)


def test_a_missing_plugin_shows_the_install_hint(tmp_path: Path, plugin: Plugin) -> None:
    section = exec_section(plugin, command="aws-iam-nope", args=[], installHint="Install the AWS CLI: see docs")

    async def body() -> None:
        async with FakeApiServer(token="t") as api, exec_client(tmp_path, api, section) as c:
            with pytest.raises(CredentialError, match=r"'aws-iam-nope' not found.*\nInstall the AWS CLI"):
                await c.list(r.CONFIGMAP, "default")

    run(body)


def test_interactive_mode_always_needs_a_terminal(tmp_path: Path, plugin: Plugin) -> None:
    cfg = from_kubeconfig(kubeconfig(tmp_path, "https://x", {"exec": exec_section(plugin, interactiveMode="Always")}))
    assert cfg.exec is not None
    cfg.exec.stdin_is_tty = lambda: False
    with pytest.raises(Exception, match="needs an interactive terminal"):
        cfg.exec.credential()
    assert plugin.calls == []


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"apiVersion": V1, "command": "x"}, "interactiveMode is required"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}, "v1alpha1 was removed"),
        ({"apiVersion": V1BETA1}, "command is missing"),
        ({"apiVersion": V1BETA1, "command": "x", "interactiveMode": "Sometimes"}, "interactiveMode is 'Sometimes'"),
    ],
)
def test_bad_exec_sections_fail_when_loading(tmp_path: Path, section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_kubeconfig(kubeconfig(tmp_path, "https://x", {"exec": section}))


def test_relative_command_resolves_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    section = {"apiVersion": V1BETA1, "command": "./bin/plugin"}
    cfg = from_kubeconfig(kubeconfig(tmp_path, "https://x", {"exec": section}))
    assert cfg.exec is not None and cfg.exec.command == str(tmp_path / "bin" / "plugin")
    bare = from_kubeconfig(kubeconfig(tmp_path, "https://x", {"exec": {**section, "command": "aws"}}))
    assert bare.exec is not None and bare.exec.command == "aws"  # looked up on PATH


@pytest.mark.parametrize(
    ("provider", "fix"),
    [("gcp", "gke-gcloud-auth-plugin"), ("azure", "kubelogin convert-kubeconfig"), ("oidc", "kubelogin")],
)
def test_auth_provider_says_which_exec_plugin_replaces_it(tmp_path: Path, provider: str, fix: str) -> None:
    path = kubeconfig(tmp_path, "https://x", {"auth-provider": {"name": provider, "config": {}}})
    with pytest.raises(ConfigError) as exc:
        from_kubeconfig(path)
    assert f"uses auth-provider '{provider}'" in str(exc.value)
    assert "removed in 1.26" in str(exc.value) and fix in str(exc.value)


def test_cli_verbs_work_with_an_exec_kubeconfig(tmp_path: Path, plugin: Plugin) -> None:
    """`kubetrain get trainjobs --context prod` with an EKS/GKE-style kubeconfig."""
    from kubetrain.cli.main import cli

    async def body() -> None:
        async with FakeApiServer(token="tok-1") as api:
            async with Client(ClusterConfig(server=api.url, token="tok-1"), qps=0) as admin:
                await admin.create(trainjob("from-eks", namespace="team-a"))
            path = kubeconfig(tmp_path, api.url, {"exec": exec_section(plugin)})
            result = await _invoke(cli, ["get", "trainjobs", "--kubeconfig", path, "--context", "prod", "-A"])
            assert result.exit_code == 0, result.output
            assert "team-a" in result.output and "from-eks" in result.output
            assert len(plugin.calls) == 1

    run(body)


async def _invoke(cli: Any, args: list[str]) -> Any:
    # The CLI runs its own event loop; keep it off this one (the fake API server lives here).
    import asyncio

    return await asyncio.to_thread(CliRunner().invoke, cli, args)
