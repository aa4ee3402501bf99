"""kubeconfig ``exec`` credential plugins (``client.authentication.k8s.io`` v1 and v1beta1).

EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``), AKS and OIDC (``kubelogin``) kubeconfigs do not
hold a credential: they name a program that prints an ``ExecCredential`` with a bearer token or a client
certificate, usually with an expiry. This module runs that program the way kubectl does and caches what it
returns until the expiry (or until the API server answers 401, see :meth:`ExecAuthenticator.invalidate`).

The program gets ``KUBERNETES_EXEC_INFO`` (an ``ExecCredential`` whose ``spec`` says whether it may prompt and,
with ``provideClusterInfo``, which cluster it is for), the kubeconfig's ``env`` on top of ours, our stderr (for
its prompts and warnings) and, in interactive mode only, our stdin.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
REFRESH_BEFORE = dt.timedelta(seconds=10)
"""Re-run the plugin this long before the credential expires, so no request goes out with a token that expires
on the way."""


class ExecConfigError(Exception):
    """The kubeconfig's ``exec`` section cannot be used (raised while loading the kubeconfig)."""


class ExecPluginError(Exception):
    """Running the plugin failed or it printed something that is not a usable ``ExecCredential``."""


@dataclass(frozen=True)
class Credential:
    token: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    expires: dt.datetime | None = None

    def fresh(self, now: dt.datetime) -> bool:
        return self.expires is None or now < self.expires - REFRESH_BEFORE


@dataclass
class ExecAuthenticator:
    """Runs one kubeconfig user's ``exec`` plugin on demand and caches its credential. Thread-safe."""

    api_version: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    interactive_mode: str = "IfAvailable"
    install_hint: str | None = None
    cluster: dict[str, Any] | None = None
    """What ``provideClusterInfo: true`` passes to the plugin; None when the kubeconfig does not ask for it."""
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC), repr=False)
    stdin_is_tty: Callable[[], bool] = field(default=lambda: sys.stdin is not None and sys.stdin.isatty(), repr=False)
    runs: int = 0
    """How often the plugin ran (tests and logs read it)."""
    _cached: Credential | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cert_files: tuple[str, str] | None = field(default=None, repr=False)

    @classmethod
    def from_kubeconfig(
        cls, section: dict[str, Any], *, base: Path, user: str, cluster: dict[str, Any]
    ) -> ExecAuthenticator:
        """Validate a kubeconfig ``user.exec`` section (``base``: the kubeconfig's directory)."""
        where = f"kubeconfig user {user!r}: exec"
        version = section.get("apiVersion")
        if version not in API_VERSIONS:
            hint = (
                "client.authentication.k8s.io/v1alpha1 was removed in Kubernetes 1.24; "
                if version == "client.authentication.k8s.io/v1alpha1"
                else ""
            )
            raise ExecConfigError(
                f"{where}.apiVersion is {version!r}; expected one of {', '.join(API_VERSIONS)} "
                f"({hint}update the plugin and set apiVersion, e.g. by re-running the provider's "
                "'get-credentials' or 'update-kubeconfig' command)"
            )
        command = section.get("command")
        if not isinstance(command, str) or not command:
            raise ExecConfigError(f"{where}.command is missing; name the credential plugin to run")
        mode = section.get("interactiveMode")
        if mode is None:
            if version.endswith("/v1"):
                raise ExecConfigError(
                    f"{where}.interactiveMode is required with {version}; set it to one of "
                    f"{', '.join(INTERACTIVE_MODES)}"
                )
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise ExecConfigError(
                f"{where}.interactiveMode is {mode!r}; expected one of {', '.join(INTERACTIVE_MODES)}"
            )
        env = {}
        for i, item in enumerate(section.get("env") or []):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ExecConfigError(f"{where}.env[{i}] needs a name and a value")
            env[item["name"]] = str(item.get("value") or "")
        # kubectl resolves a relative command that contains a path separator against the kubeconfig's directory;
        # a bare name is looked up on PATH.
        if os.sep in command and not os.path.isabs(command):
            command = str(base / command)
        return cls(
            api_version=version,
            command=command,
            args=[str(a) for a in section.get("args") or []],
            env=env,
            interactive_mode=mode,
            install_hint=section.get("installHint"),
            cluster=_cluster_info(cluster) if section.get("provideClusterInfo") else None,
        )

    # --- credentials ---

    def cached(self) -> Credential | None:
        """The cached credential if it is still fresh (no plugin run, no lock wait beyond a read)."""
        cached = self._cached
        return cached if cached is not None and cached.fresh(self.clock()) else None

    def credential(self) -> Credential:
        """The cached credential, or a new one from the plugin when there is none or it (nearly) expired."""
        with self._lock:
            cached = self._cached
            if cached is not None and cached.fresh(self.clock()):
                return cached
            self._cached = self._run()
            return self._cached

    def invalidate(self, token: str | None = None) -> None:
        """Forget the credential (the API server refused it); with ``token``, only if it is still that one."""
        with self._lock:
            if self._cached is not None and (token is None or self._cached.token == token):
                self._cached = None

    def cert_files(self, cred: Credential) -> tuple[str, str] | None:
        """The credential's client certificate and key as private files (``ssl`` only loads files)."""
        if cred.cert_pem is None or cred.key_pem is None:
            return None
        paths = []
        for data, suffix in ((cred.cert_pem, ".crt"), (cred.key_pem, ".key")):
            fd, path = tempfile.mkstemp(prefix="kubetrain-exec-", suffix=suffix)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            paths.append(path)
        old, self._cert_files = self._cert_files, (paths[0], paths[1])
        for p in old or ():
            Path(p).unlink(missing_ok=True)
        return self._cert_files

    # --- running the plugin ---

    def _interactive(self) -> bool:
        if self.interactive_mode == "Never":
            return False
        tty = self.stdin_is_tty()
        if self.interactive_mode == "Always" and not tty:
            raise ExecPluginError(
                f"exec plugin {self.command!r} needs an interactive terminal (interactiveMode: Always), but "
                "standard input is not one; run the command once in a terminal, or use a kubeconfig whose plugin "
                "does not prompt"
            )
        return tty

    def _run(self) -> Credential:
        interactive = self._interactive()
        spec: dict[str, Any] = {"interactive": interactive}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        exe = shutil.which(self.command, path=env.get("PATH")) if os.sep not in self.command else self.command
        if exe is None or not os.path.exists(exe):
            hint = f"\n{self.install_hint.strip()}" if self.install_hint else ""
            raise ExecPluginError(
                f"exec credential plugin {self.command!r} not found (is it installed and on PATH?){hint}"
            )
        self.runs += 1
        try:
            proc = subprocess.run(
                [exe, *self.args],
                env=env,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None,  # the plugin's own messages (prompts, warnings) go to the user as kubectl does
                timeout=None if interactive else 120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ExecPluginError(f"exec credential plugin {self.command!r} could not run: {exc}") from exc
        if proc.returncode != 0:
            raise ExecPluginError(
                f"exec credential plugin {self.command!r} exited with code {proc.returncode} (its messages are "
                "above); try running it by hand"
            )
        return self._parse(proc.stdout)

    def _parse(self, out: bytes) -> Credential:
        name = f"exec credential plugin {self.command!r}"
        try:
            doc = json.loads(out)
        except ValueError as exc:
            raise ExecPluginError(f"{name} did not print an ExecCredential as JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise ExecPluginError(f"{name} printed something other than an ExecCredential")
        if doc.get("apiVersion") != self.api_version:
            raise ExecPluginError(
                f"{name} answered with apiVersion {doc.get('apiVersion')!r}, but the kubeconfig asked for "
                f"{self.api_version!r}; set exec.apiVersion to what the plugin speaks"
            )
        status = doc.get("status")
        if not isinstance(status, dict):
            raise ExecPluginError(f"{name} returned an ExecCredential without status")
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise ExecPluginError(f"{name} returned a client certificate without its key (or a key without one)")
        if not token and not cert:
            raise ExecPluginError(f"{name} returned neither a token nor a client certificate")
        expires = None
        if status.get("expirationTimestamp"):
            try:
                expires = dt.datetime.fromisoformat(str(status["expirationTimestamp"]))
            except ValueError as exc:
                raise ExecPluginError(f"{name} returned an unreadable expirationTimestamp: {exc}") from exc
            if expires.tzinfo is None:
                expires = expires.replace(tzinfo=dt.UTC)
        return Credential(
            token=str(token) if token else None,
            cert_pem=str(cert).encode() if cert else None,
            key_pem=str(key).encode() if key else None,
            expires=expires,
        )


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """The kubeconfig cluster as ``ExecCredential.spec.cluster`` (``provideClusterInfo: true``)."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    elif cluster.get("certificate-authority"):
        try:
            info["certificate-authority-data"] = base64.b64encode(
                Path(cluster["certificate-authority"]).expanduser().read_bytes()
            ).decode()
        except OSError:
            pass
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if key in cluster:
            info[key] = cluster[key]
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == EXEC_EXTENSION:
            info["config"] = ext.get("extension")
    return info
