"""Admission while the operator is disrupted (real cluster): how many TrainJob creates the API server refuses.

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (cluster-admin, a cluster with nodes and the operator image available to the
kubelet) and kubectl (PATH or ``KUBETRAIN_E2E_KUBECTL``); without them the section says why it was skipped. It
measures the installed kubetrain, installing it from ``manifests/`` (the manager overlay, then the runtimes
overlay) first when there is none.

A load generator creates a TrainJob every 50 ms (server-side dry run: both webhooks run, nothing is stored; its
client never retries) while, one after another:

(a) one operator pod is force-deleted (``kubectl delete pod --grace-period=0 --force``);
(b) the Deployment is restarted (``kubectl rollout restart``: a rolling upgrade, every pod replaced);
(c) one pod is evicted through the Eviction API (what ``kubectl drain`` does), and at once the other one too,
    which the PodDisruptionBudget must refuse until the replacement is ready;
(d) with ``--kill9`` and when run on the node itself: the operator process of one pod gets SIGKILL (an OOM kill).

Each phase lasts from its disruption until every replica is Ready again, plus ``--settle`` seconds.

    python bench/admission_ha.py [--interval 0.05] [--settle 5] [--kill9]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402

from kubetrain.testing import cluster  # noqa: E402

TITLE = "## Admission while the operator is disrupted (`bench/admission_ha.py`)"


def operator_pid(pod: dict[str, Any]) -> int | None:
    """The PID of the pod's operator process, when this runs on its node (its cgroup names the pod's UID)."""
    uid = pod["metadata"]["uid"]
    keys = (uid, uid.replace("-", "_"))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(k in cgroup for k in keys) and b"operator" in cmdline and any(b"kubetrain" in c for c in cmdline):
            return int(entry.name)
    return None


def restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def scenario(kc: str, ns: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    load = cluster.AdmissionLoad(kc, ns, interval=args.interval)
    phases: list[dict[str, Any]] = []

    def phase(name: str, disrupt: Callable[[], str]) -> None:
        start = load.now()
        note = disrupt()
        cluster.wait_all_ready(kc)
        time.sleep(args.settle)
        phases.append({"name": name, "answers": load.between(start, load.now()), "note": note,
                       "seconds": load.now() - start, "leaders": cluster.leaders(kc)})  # fmt: skip

    def quiet() -> str:
        time.sleep(args.settle)
        return ""

    def force_delete() -> str:
        return f"force-deleted {cluster.force_delete_one(kc)}"

    def rolling() -> str:
        cluster.rolling_restart(kc)
        return "every pod replaced"

    def drain() -> str:
        names = [p["metadata"]["name"] for p in cluster.operator_pods(kc)]
        ok1, msg1 = cluster.evict(kc, names[0])
        if not ok1:
            raise RuntimeError(f"evicting {names[0]} failed: {msg1}")
        if len(names) < 2:
            return f"evicted {names[0]} (the only replica)"
        ok2, msg2 = cluster.evict(kc, names[1])
        blocked = "refused by the PodDisruptionBudget" if not ok2 and "disruption budget" in msg2 else (
            f"NOT refused ({msg2 or 'evicted'})"
        )
        return f"evicted {names[0]}; evicting {names[1]} at once: {blocked}"

    def kill9() -> str:
        for pod in cluster.operator_pods(kc):
            pid = operator_pid(pod)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                name = pod["metadata"]["name"]
                # Wait for the kubelet to notice (the pod turns unready) before waiting for it to recover.
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    now = [p for p in cluster.operator_pods(kc) if p["metadata"]["name"] == name]
                    if not now or not cluster.is_ready(now[0]) or restarts(now[0]) > restarts(pod):
                        break
                    time.sleep(0.1)
                return f"SIGKILL to the operator process of {name}"
        raise RuntimeError("no operator process found on this machine")

    with load.in_background():
        time.sleep(1.0)  # the load's first creates: its connection to the API server is warm
        phase("steady load (no disruption)", quiet)
        phase("(a) force-delete one pod", force_delete)
        phase("(b) rolling restart", rolling)
        phase("(c) evict one pod, then the other", drain)
        if args.kill9:
            phase("(d) SIGKILL one operator process", kill9)
    return phases


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The section's text and the number of refused creates (-1: skipped)."""
    kc = cluster.kubeconfig_from_env()
    if not kc:
        return f"{TITLE}\n\nSkipped: set KUBETRAIN_E2E_KUBECONFIG to a cluster-admin kubeconfig of a cluster with " \
               "kubetrain installed.\n", -1  # fmt: skip
    if cluster.kubectl_path() is None:
        return f"{TITLE}\n\nSkipped: kubectl not found (PATH or KUBETRAIN_E2E_KUBECTL).\n", -1
    installed = cluster.kubectl(
        kc, "-n", cluster.SYSTEM_NAMESPACE, "get", "deploy", cluster.DEPLOYMENT, check=False
    )  # fmt: skip
    if installed.returncode != 0:
        cluster.install(kc, HERE.parent / "manifests")  # as docs/install.md says
    cluster.wait_all_ready(kc)
    replicas, _ = cluster.replicas(kc)
    if args.kill9 and not any(operator_pid(p) for p in cluster.operator_pods(kc)):
        args.kill9 = False  # not on the node: the table says so
    ns = cluster.uniq("bench-admission")
    cluster.kubectl(kc, "create", "namespace", ns)
    try:
        phases = scenario(kc, ns, args)
    finally:
        cluster.kubectl(kc, "delete", "namespace", ns, "--wait=false", check=False)
    refused_total = 0
    lines = [
        TITLE,
        "",
        f"A TrainJob create every {args.interval * 1000:.0f} ms (server-side dry run: the API server calls both "
        f"webhooks, stores nothing; the client never retries) against the install of `manifests/overlays` "
        f"({replicas} replicas), while the operator is disrupted. Each phase runs from the disruption until every "
        f"replica is Ready again, plus {args.settle:.0f} s.",
        "",
        "| phase | duration | creates | refused | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for p in phases:
        answers = p["answers"]
        refused = cluster.AdmissionLoad.refused(answers)
        refused_total += len(refused)
        lat = [a.latency * 1000 for a in answers]
        lines.append(
            f"| {p['name']} | {p['seconds']:.1f} s | {len(answers)} | **{len(refused)}** | "
            f"{cluster.percentile(lat, 50):.0f} ms | {cluster.percentile(lat, 99):.0f} ms | "
            f"{max(lat, default=0):.0f} ms |"
        )
        if p["note"]:
            notes.append(f"- {p['name']}: {p['note']}.")
        leading = sorted(name for name, v in p["leaders"].items() if v == 1)
        if len(p["leaders"]) > 1 or len(leading) != 1:
            notes.append(f"- {p['name']}, afterwards: leader gauge {p['leaders']}.")
        for reason, n in cluster.AdmissionLoad.reasons(answers).most_common(3):
            notes.append(f"- {p['name']}: {n} × `{reason}`")
    if not args.kill9:
        notes.append("- (d) SIGKILL of an operator process: not measured (needs `--kill9` on the node itself).")
    one_leader = all(sum(1 for v in p["leaders"].values() if v == 1) == 1 for p in phases)
    lines += ["", *notes, "",
              "After every phase exactly one replica reports `kubetrain_leader 1`: "
              f"{'yes' if one_leader else '**no**'}.",
              f"Refused creates in total: **{refused_total}** (target: 0)."]  # fmt: skip
    return "\n".join(lines) + "\n", refused_total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between creates")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of load after each recovery")
    parser.add_argument("--kill9", action="store_true", help="also SIGKILL one operator process (on the node only)")
    args = parser.parse_args(argv if argv is not None else [])
    text, _ = run(args)
    print(text)
    write_section("admission_ha", text)


if __name__ == "__main__":
    main(sys.argv[1:])
