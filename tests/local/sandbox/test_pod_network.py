"""Each local pod has a network namespace of its own, as on a node: ``eth0`` with the pod's address on the
TrainJob's bridge, its own ``localhost``, ports of its own, and the TrainJob's gateway as ``status.hostIP``."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local import plan
from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox.netns import NetworkNamespace

from ..conftest import condition, container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

pytestmark = needs_namespaces

# Every pod reports what a pod-local program sees of its network, and binds the same wildcard port as its peers.
REPORT = r"""
import fcntl, json, os, socket, struct, subprocess, time
seen = {
    # SIOCGIFMTU of this network namespace's eth0 (the pod's /sys is the machine's, so not /sys/class/net).
    "mtu": struct.unpack("16si", fcntl.ioctl(socket.socket(), 0x8921, struct.pack("16si", b"eth0", 0)))[1],
    "hostname_I": subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
        if os.path.exists("/usr/bin/hostname") or os.path.exists("/bin/hostname") else None,
    "pod_ip": os.environ["POD_IP"],
    "host_ip": os.environ["HOST_IP"],
    "resolved_self": socket.gethostbyname(socket.gethostname()),
    "interfaces": [name for _, name in socket.if_nameindex()],
}
server = socket.create_server(("0.0.0.0", 29400))  # every pod: its own port space
first = os.environ["HOSTNAME"].endswith("-0")
if first:
    only_mine = socket.create_server(("127.0.0.1", 29401))  # the second pod's localhost must not reach it
peer = "net-node-0-1.net" if first else "net-node-0-0.net"
for _ in range(200):
    try:
        socket.create_connection((peer, 29400), timeout=1).close()
        seen["peer_reached"] = True
        break
    except OSError:
        time.sleep(0.05)
socket.create_connection(("localhost", 29400), timeout=5).close()
try:
    socket.create_connection(("localhost", 29401), timeout=5).close()
    seen["localhost_29401"] = "open"
except ConnectionRefusedError:
    seen["localhost_29401"] = "refused"
print("SEEN " + json.dumps(seen), flush=True)
time.sleep(1)  # the peer may still be connecting to us
"""


def _network_runtime() -> dict[str, object]:
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    return runtime("net", [rjob("node", [container(py(REPORT), env=env)], ancestor="trainer", parallelism=2)])


def _seen(backend: LocalBackend, step: str) -> dict[str, object]:
    lines = backend.logs("net", "default", step=step, follow=False)
    found = [json.loads(line.split("SEEN ", 1)[1]) for line in lines if "SEEN " in line]
    assert found, lines
    out: dict[str, object] = found[0]
    return out


def test_each_pod_has_its_own_address_port_space_and_localhost(backend: LocalBackend, tmp_path: Path) -> None:
    st = run_to_end(backend, [_network_runtime(), trainjob("net", "net")], tmp_path)
    assert condition(st, "Complete") is not None, st
    a, b = _seen(backend, "node-0-0"), _seen(backend, "node-0-1")
    assert a["pod_ip"] != b["pod_ip"]
    assert (a["localhost_29401"], b["localhost_29401"]) == ("open", "refused")  # localhost is the pod itself
    for seen in (a, b):
        assert str(seen["pod_ip"]).startswith("10.250."), seen
        assert seen["resolved_self"] == seen["pod_ip"], seen  # its hostname is its own address
        assert seen["host_ip"] == plan.GATEWAY, seen
        assert "eth0" in seen["interfaces"] and "lo" in seen["interfaces"], seen
        assert seen["peer_reached"] is True, seen  # by its Kubernetes hostname, through the bridge
        # Loopback's order of size, so pod-to-pod traffic costs about what it costs between local processes
        # (bench/pod_network.py); the holder's MTU is what the pods get.
        assert seen["mtu"] == _holder().MTU == 65520, seen
        if seen["hostname_I"] is not None:
            # What DeepSpeed's MPI discovery and many launch scripts read: exactly the pod's own address.
            assert seen["hostname_I"] == [seen["pod_ip"]], seen


def _holder() -> Any:
    holder = Path(plan.__file__).with_name("sandbox") / "_nsholder.py"
    sys.path.insert(0, str(holder.parent))  # the holder imports its sibling _netlink as a script would
    try:
        spec = importlib.util.spec_from_file_location("_kt_nsholder", holder)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(holder.parent))
    return module


def test_bridged_traffic_between_pods_skips_netfilter() -> None:
    """Inside the TrainJob's network namespace the bridge does not hand pod-to-pod packets to netfilter (the
    outbound NAT rule and its connection tracking are for routed traffic only)."""
    knob = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    if not knob.exists():
        pytest.skip("this kernel has no br_netfilter: bridged packets never reach netfilter")
    ns = NetworkNamespace.start().ready()
    try:
        seen = subprocess.run(
            [*ns.enter_argv(), "cat", str(knob), str(knob.with_name("bridge-nf-call-ip6tables"))],
            capture_output=True, text=True, check=True,
        ).stdout.split()
    finally:
        ns.close()
    assert seen == ["0", "0"]


def test_the_holder_and_the_plan_agree_on_the_gateway() -> None:
    module = _holder()
    assert module.GATEWAY == plan.GATEWAY
    assert plan.address(0).rsplit(".", 2)[0] == module.SUBNET.split(".0.0/")[0]
