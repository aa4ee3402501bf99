"""Kubeconfig loading and JSON log lines."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
import yaml

from kubetrain.k8s.client.config import ConfigError, from_kubeconfig, load
from kubetrain.k8s.operator.jsonlog import JsonFormatter


def write(tmp_path: Path, doc: dict) -> str:
    p = tmp_path / "config"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def doc(user: dict, cluster: dict | None = None) -> dict:
    return {
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://1.2.3.4:6443/"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "ns1"}},
            {"name": "two", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "one",
    }


def test_token_namespace_and_context_selection(tmp_path: Path) -> None:
    path = write(tmp_path, doc({"token": "abc"}))
    cfg = from_kubeconfig(path)
    assert (cfg.server, cfg.namespace, cfg.bearer()) == ("https://1.2.3.4:6443", "ns1", "abc")
    assert from_kubeconfig(path, "two").namespace == "default"


def test_token_file_is_reread_and_relative_paths_resolve(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("first\n")
    path = write(tmp_path, doc({"tokenFile": "tok"}, {"server": "https://x", "certificate-authority": "ca.crt"}))
    cfg = from_kubeconfig(path)
    assert cfg.bearer() == "first" and cfg.ca_file == str(tmp_path / "ca.crt")
    (tmp_path / "tok").write_text("rotated")
    assert cfg.bearer() == "rotated"


def test_inline_client_cert_is_written_to_private_files(tmp_path: Path) -> None:
    data = base64.b64encode(b"PEM").decode()
    cfg = from_kubeconfig(write(tmp_path, doc({"client-certificate-data": data, "client-key-data": data})))
    assert cfg.cert_file and Path(cfg.cert_file).read_bytes() == b"PEM"
    assert oct(Path(cfg.cert_file).stat().st_mode)[-3:] == "600"


def test_unknown_context_and_bad_exec_sections_are_clear_errors(tmp_path: Path) -> None:
    path = write(tmp_path, doc({"exec": {"command": "aws"}}))
    with pytest.raises(ConfigError, match=r"exec\.apiVersion is None; expected one of"):
        from_kubeconfig(path)
    with pytest.raises(ConfigError, match="no context named 'nope'"):
        from_kubeconfig(path, "nope")


def test_explicit_kubeconfig_wins(tmp_path: Path) -> None:
    assert load(write(tmp_path, doc({"token": "t"}))).bearer() == "t"


def test_json_log_line_carries_the_object_reference() -> None:
    record = logging.LogRecord("kubetrain.operator", logging.WARNING, __file__, 1, "failed %s", ("x",), None)
    record.object = "TrainJob default/job"
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "failed x" and line["object"] == "TrainJob default/job" and line["level"] == "warning"


def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubetrain.k8s.client import config

    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "namespace").write_text("kubeflow-system")
    monkeypatch.setattr(config, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load()
    assert (cfg.server, cfg.namespace, cfg.bearer()) == ("https://10.0.0.1:443", "kubeflow-system", "sa-token")
    assert cfg.ca_file == str(tmp_path / "ca.crt")


def test_impersonation_from_the_kubeconfig_becomes_headers(tmp_path: Path) -> None:
    import asyncio

    from kubetrain.k8s.client.session import ApiSession

    user = {
        "token": "t",
        "as": "system:serviceaccount:kubeflow-system:kubetrain-operator",
        "as-groups": ["system:serviceaccounts", "system:authenticated"],
        "as-user-extra": {"scopes": ["a", "b"]},
    }
    cfg = from_kubeconfig(write(tmp_path, doc(user)))

    async def headers() -> list[tuple[str, str]]:
        session = ApiSession(cfg)
        try:
            _, sent = await session._prepare(None)
            return list(sent.items())
        finally:
            await session.close()

    assert asyncio.run(headers()) == [
        ("Impersonate-User", "system:serviceaccount:kubeflow-system:kubetrain-operator"),
        ("Impersonate-Group", "system:serviceaccounts"),
        ("Impersonate-Group", "system:authenticated"),
        ("Impersonate-Extra-scopes", "a"),
        ("Impersonate-Extra-scopes", "b"),
        ("Authorization", "Bearer t"),
    ]
    with pytest.raises(ConfigError, match="needs `as`"):
        from_kubeconfig(write(tmp_path, doc({"token": "t", "as-groups": ["g"]})))
