"""``kubetrain operator``: run the TrainJob operator (in a cluster, or locally against one)."""

from __future__ import annotations

import asyncio
import signal
import sys

import click


def register(group: click.Group) -> None:
    @group.command("operator")
    @click.option("--kubeconfig", default=None, help="kubeconfig to use (default: in-cluster, then ~/.kube/config).")
    @click.option("--context", default=None, help="kubeconfig context.")
    @click.option("--namespace", default=None, help="Watch only this namespace (default: all namespaces).")
    @click.option("--qps", default=50.0, show_default=True, help="Client-side API request rate limit.")
    @click.option("--burst", default=100, show_default=True, help="Requests allowed at once above --qps.")
    @click.option("--concurrency", default=5, show_default=True, help="TrainJobs reconciled in parallel.")
    @click.option(
        "--leader-elect/--no-leader-elect", default=True, show_default=True, help="Lease-based leader election."
    )
    @click.option(
        "--lease-namespace",
        default=None,
        help="Namespace of the Lease (default: $POD_NAMESPACE, the pod's, kubeflow-system).",
    )
    @click.option("--lease-name", default="kubetrain-operator", show_default=True)
    @click.option("--identity", default=None, help="Leader-election identity (default: hostname_pid).")
    @click.option(
        "--health-port", default=8081, show_default=True, help="Port of /healthz, /readyz, /metrics (-1: off)."
    )
    @click.option("--webhook-port", default=None, type=int, help="Also serve the admission webhook on this port.")
    @click.option("--webhook-cert-dir", default=None, help="Directory with the webhook's tls.crt and tls.key.")
    @click.option(
        "--status-port",
        default=10443,
        show_default=True,
        help="HTTPS port of the status endpoint pods report progress to (status.trainerStatus); -1: off, and "
        "new TrainJobs' pods are not wired to it.",
    )
    @click.option(
        "--status-cert-dir",
        default=None,
        help="tls.crt/tls.key (+ ca.crt) of the status endpoint (default: the webhook's, else self-signed).",
    )
    @click.option(
        "--status-url",
        default=None,
        help="Base URL pods reach the status endpoint at (default: https://<service>.<namespace>.svc:<port>).",
    )
    @click.option(
        "--pod-failures/--no-pod-failures",
        default=True,
        show_default=True,
        help="Watch the TrainJobs' pods and record their failures on the TrainJob (status.podFailures, PodFailed "
        "events, the Failed message); needs pods list/watch and pods/log get.",
    )
    @click.option(
        "--failure-log-qps",
        default=1.0,
        show_default=True,
        help="Log reads of failed pods per second (last lines), all TrainJobs together; 0: unlimited.",
    )
    @click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
    @click.option("--log-format", default="json", show_default=True, type=click.Choice(["json", "text"]))
    def operator(
        kubeconfig: str | None,
        context: str | None,
        namespace: str | None,
        qps: float,
        burst: int,
        concurrency: int,
        leader_elect: bool,
        lease_namespace: str | None,
        lease_name: str,
        identity: str | None,
        health_port: int,
        webhook_port: int | None,
        webhook_cert_dir: str | None,
        status_port: int,
        status_cert_dir: str | None,
        status_url: str | None,
        pod_failures: bool,
        failure_log_qps: float,
        log_level: str,
        log_format: str,
    ) -> None:
        """Run the TrainJob operator: TrainJob + runtime -> JobSet (+ PodGroup, MPI objects), status back.

        \b
        Examples:
          kubetrain operator                                   # in a pod: in-cluster service account
          kubetrain operator --kubeconfig ~/.kube/config --no-leader-elect --health-port 18081
          kubetrain operator --context prod --namespace team-a --qps 100 --burst 200 --concurrency 10
          kubetrain operator --status-port 10443 --status-url https://127.0.0.1:10443   # progress endpoint
        """
        from kubetrain.k8s.client import Client, ConfigError
        from kubetrain.k8s.client.config import load
        from kubetrain.k8s.operator import OperatorSettings, run_operator
        from kubetrain.k8s.operator.jsonlog import setup
        from kubetrain.k8s.operator.leader import LeaseNamespaceMissing

        setup(log_level, json_format=log_format == "json")
        try:
            config = load(kubeconfig, context)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        settings = OperatorSettings(
            qps=qps,
            burst=burst,
            concurrency=concurrency,
            namespace=namespace,
            leader_election=leader_elect,
            lease_name=lease_name,
            health_port=None if health_port < 0 else health_port,
            webhook_port=webhook_port,
            webhook_cert_dir=webhook_cert_dir,
            status_port=None if status_port < 0 else status_port,
            status_cert_dir=status_cert_dir,
            status_url=status_url,
            pod_failures=pod_failures,
            failure_log_qps=failure_log_qps,
        )
        if identity:
            settings.identity = identity
        if lease_namespace:
            settings.lease_namespace = lease_namespace

        async def main() -> int:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)  # graceful: finish in-flight work, release the lease
            client = Client(config, qps=qps, burst=burst)
            try:
                return await run_operator(client, settings, stop)
            finally:
                await client.close()

        try:
            code = asyncio.run(main())
        except LeaseNamespaceMissing as exc:
            raise click.ClickException(str(exc)) from exc
        sys.exit(code)
