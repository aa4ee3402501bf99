"""Where the API server is and how to authenticate: kubeconfig files and in-cluster service accounts.

Credentials: a bearer token, a token file (re-read on every request), a client certificate, or an ``exec``
credential plugin (``exec_auth``). ``auth-provider`` (removed from kubectl in 1.26) is refused with the plugin
that replaces it.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetrain.k8s.client.exec_auth import Credential, ExecAuthenticator, ExecConfigError

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """The kubeconfig (or in-cluster environment) cannot be used."""


@dataclass
class ClusterConfig:
    """Everything needed to open connections to one API server as one identity."""

    server: str
    namespace: str = "default"
    token: str | None = None
    token_file: str | None = None
    """Re-read on every request: projected service-account tokens rotate."""
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    exec: ExecAuthenticator | None = None
    """An exec credential plugin; its token or certificate is asked for per request (:meth:`ApiSession`)."""
    impersonate: dict[str, list[str]] = field(default_factory=dict)
    """Impersonation headers (kubeconfig ``as``, ``as-uid``, ``as-groups``, ``as-user-extra``; kubectl's
    ``--as``): requests are authorised as that user, e.g. the operator's service account."""
    _tempfiles: list[str] = field(default_factory=list, repr=False)

    def bearer(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip()
        return self.token

    def ssl_context(self, credential: Credential | None = None) -> ssl.SSLContext | bool:
        """``False`` for plain HTTP servers (the test fake), else a context with CA and client cert (the
        kubeconfig's, or the one an exec plugin returned in ``credential``)."""
        if not self.server.startswith("https://"):
            return False
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        exec_files = self.exec.cert_files(credential) if self.exec is not None and credential is not None else None
        if exec_files is not None:
            ctx.load_cert_chain(*exec_files)
        elif self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _b64_to_file(data: str, cfg: ClusterConfig) -> str:
    # ssl.load_cert_chain only takes paths, so inline client certs are written to private temp files.
    fd, path = tempfile.mkstemp(prefix="kubetrain-", suffix=".pem")
    with os.fdopen(fd, "wb") as fh:
        fh.write(base64.b64decode(data))
    cfg._tempfiles.append(path)
    return path


def _named(items: list[dict[str, Any]] | None, name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return dict(item.get(what) or {})
    raise ConfigError(f"kubeconfig has no {what} named {name!r}")


def _resolve(base: Path, value: str | None) -> str | None:
    if not value:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def from_kubeconfig(path: str | None = None, context: str | None = None) -> ClusterConfig:
    """Load ``path`` (else ``$KUBECONFIG``'s first entry, else ``~/.kube/config``) for ``context``."""
    raw_path = path or (os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")
    file = Path(raw_path).expanduser()
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {file}: {exc}") from exc
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise ConfigError(f"kubeconfig {file} has no current-context; pass --context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "cluster")
    user = _named(doc.get("users"), ctx["user"], "user") if ctx.get("user") else {}
    if "auth-provider" in user:
        raise ConfigError(_auth_provider_message(str(ctx.get("user")), user["auth-provider"]))
    base = file.parent
    cfg = ClusterConfig(
        server=str(cluster.get("server", "")).rstrip("/"),
        namespace=ctx.get("namespace") or "default",
        token=user.get("token"),
        token_file=_resolve(base, user.get("tokenFile")),
        ca_file=_resolve(base, cluster.get("certificate-authority")),
        ca_data=base64.b64decode(cluster["certificate-authority-data"])
        if cluster.get("certificate-authority-data")
        else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        cert_file=_resolve(base, user.get("client-certificate")),
        key_file=_resolve(base, user.get("client-key")),
    )
    if user.get("client-certificate-data"):
        cfg.cert_file = _b64_to_file(user["client-certificate-data"], cfg)
    if user.get("client-key-data"):
        cfg.key_file = _b64_to_file(user["client-key-data"], cfg)
    cfg.impersonate = _impersonation(user)
    if user.get("exec"):
        try:
            cfg.exec = ExecAuthenticator.from_kubeconfig(
                user["exec"], base=base, user=str(ctx.get("user")), cluster=cluster
            )
        except ExecConfigError as exc:
            raise ConfigError(str(exc)) from exc
    if not cfg.server:
        raise ConfigError(f"cluster of context {ctx_name!r} has no server")
    return cfg


def _impersonation(user: dict[str, Any]) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    if user.get("as"):
        headers["Impersonate-User"] = [str(user["as"])]
    if user.get("as-uid"):
        headers["Impersonate-Uid"] = [str(user["as-uid"])]
    if user.get("as-groups"):
        headers["Impersonate-Group"] = [str(g) for g in user["as-groups"]]
    for key, values in (user.get("as-user-extra") or {}).items():
        headers[f"Impersonate-Extra-{key}"] = [str(v) for v in values]
    if headers and "Impersonate-User" not in headers:
        raise ConfigError("kubeconfig impersonation (as-groups, as-uid, as-user-extra) needs `as` (the user) too")
    return headers


# What replaced each auth-provider when kubectl dropped them (1.26): all are exec plugins now.
_AUTH_PROVIDER_REPLACEMENTS = {
    "gcp": "GKE: install gke-gcloud-auth-plugin and run `gcloud container clusters get-credentials <cluster>`",
    "azure": "AKS: install kubelogin and run `kubelogin convert-kubeconfig`",
    "oidc": "OIDC: use an exec plugin such as kubelogin (`kubectl oidc-login setup`)",
}


def _auth_provider_message(user: str, provider: Any) -> str:
    name = str((provider or {}).get("name") or "") if isinstance(provider, dict) else ""
    how = _AUTH_PROVIDER_REPLACEMENTS.get(name, "regenerate the kubeconfig with your provider's current tooling")
    return (
        f"kubeconfig user {user!r} uses auth-provider {name!r}, which kubectl removed in 1.26 and kubetrain does "
        f"not support; switch to its exec credential plugin ({how})"
    )


def in_cluster() -> ClusterConfig:
    """The pod's service account, as client-go's ``rest.InClusterConfig``."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (SA_DIR / "token").exists():
        raise ConfigError("not running in a cluster (no KUBERNETES_SERVICE_HOST or service-account token)")
    if ":" in host:
        host = f"[{host}]"
    ns_file = SA_DIR / "namespace"
    return ClusterConfig(
        server=f"https://{host}:{port}",
        namespace=ns_file.read_text().strip() if ns_file.exists() else "default",
        token_file=str(SA_DIR / "token"),
        ca_file=str(SA_DIR / "ca.crt"),
    )


def load(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """Explicit kubeconfig/context first, then in-cluster, then the default kubeconfig."""
    if kubeconfig or context:
        return from_kubeconfig(kubeconfig, context)
    try:
        return in_cluster()
    except ConfigError:
        return from_kubeconfig()
