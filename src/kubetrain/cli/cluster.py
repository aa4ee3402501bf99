"""Cluster-only verbs: ``kubetrain cluster install-check``."""

from __future__ import annotations

import asyncio
import os

import click


def register(group: click.Group) -> None:
    @group.group("cluster")
    def cluster() -> None:
        """Commands that only make sense against a Kubernetes cluster.

        \b
        Examples:
          kubetrain cluster install-check --context prod
        """

    @cluster.command("install-check")
    @click.option("--kubeconfig", default=None, help="kubeconfig to use.")
    @click.option("--context", default=None, help="kubeconfig context.")
    @click.option(
        "--system-namespace",
        default=lambda: os.environ.get("KUBEFLOW_SYSTEM_NAMESPACE", "kubeflow-system"),
        show_default="$KUBEFLOW_SYSTEM_NAMESPACE or kubeflow-system",
        help="Where the Kubeflow SDK looks for the kubeflow-trainer-public ConfigMap.",
    )
    @click.option("--lease-namespace", default=None, help="Namespace of the operator's Lease (default: as above).")
    def install_check(
        kubeconfig: str | None, context: str | None, system_namespace: str, lease_namespace: str | None
    ) -> None:
        """Check that a cluster has what the operator and the Kubeflow SDK need.

        \b
        Examples:
          kubetrain cluster install-check --context prod
          KUBEFLOW_SYSTEM_NAMESPACE=kubetrain-system kubetrain cluster install-check
        """
        from kubetrain.k8s.backend.install_check import run_checks

        ok = True
        for passed, line in asyncio.run(
            run_checks(kubeconfig, context, system_namespace, lease_namespace or system_namespace)
        ):
            ok = ok and passed
            click.echo(f"{'ok  ' if passed else 'FAIL'}  {line}")
        if not ok:
            raise SystemExit(1)
