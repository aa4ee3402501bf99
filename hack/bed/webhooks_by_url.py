"""Rewrite a controller's webhook configurations (kubebuilder's ``config/components/webhook/manifests.yaml``) so the
API server calls a host process at ``https://HOST:PORT<path>`` instead of an in-cluster Service, as the bed runs
Kueue and the JobSet controller as host processes.

Usage: webhooks_by_url.py MANIFESTS URL_BASE CA_FILE PREFIX > out.yaml
PREFIX is put before each configuration's name, so two controllers' defaults (``mutating-webhook-configuration``)
do not collide.
"""

from __future__ import annotations

import base64
import sys

import yaml


def main() -> None:
    manifests, base, ca_file, prefix = sys.argv[1:5]
    with open(ca_file, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    with open(manifests) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"].get("path", "")
            hook["clientConfig"] = {"url": base.rstrip("/") + path, "caBundle": ca}
            hook.setdefault("timeoutSeconds", 10)
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
