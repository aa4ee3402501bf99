"""A container that runs in its image: prepared as a container runtime and the kubelet set it up, and started on
an overlayfs of the image's layers (``_rootfs``) in the same sandbox as every local pod (``pods``)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from kubetrain.local import paths
from kubetrain.local.images.rootfs import ImageRoot
from kubetrain.local.plan import GATEWAY, PodPlan
from kubetrain.local.sandbox import gpus as gpus_
from kubetrain.local.sandbox import tools
from kubetrain.local.sandbox.env import container_env, expand
from kubetrain.local.sandbox.namespaces import Bind, bwrap_image_argv
from kubetrain.local.sandbox.pods import (
    Container,
    PodContext,
    PodError,
    check_exec_size,
    check_program,
    container_security,
    host_path,
)
from kubetrain.local.sandbox.volumes import container_binds


def prepare_container(
    pod: PodPlan,
    c: dict[str, Any],
    ctx: PodContext,
    image: ImageRoot,
    *,
    restart_attempt: int,
    where: str,
    gpus: gpus_.Grant | None,
    scratch: Path | None,
) -> Container:
    """A container that runs in its image, as a container runtime and the kubelet set it up: the image's Env under
    the container's env, its User (unless runAsUser/runAsGroup say otherwise), its WorkingDir unless the container
    sets workingDir, ``HOME`` from the image's passwd, and the command by the kubelet's rules (``command``
    replaces the Entrypoint, ``args`` the Cmd; ``$(VAR)`` is expanded in what the pod spec gives)."""
    tools_bind, setpriv = tools.setpriv()
    security = dataclasses.replace(container_security(pod, c, ctx, where, image), setpriv=setpriv)
    meta = pod.meta(ctx.namespace, ctx.uid, restart_attempt)
    env = container_env(c, meta, ctx.index, base=image.env(), pod_ip=pod.address, host_ip=GATEWAY, where=where)
    env.update(ctx.extra_env)
    env["HOSTNAME"] = pod.name
    env.setdefault("HOME", security.home or "/")
    env.update(gpus_.visible_env(gpus.own if gpus is not None else None))
    # The image's NCCL version is not looked up (its Python may be anywhere in its layers): NCCL then gets the
    # settings that work with every version (legacy CUDA IPC over the shared /dev/shm).
    for name, value in gpus_.nccl_env(gpus, prefix=None).items():
        env.setdefault(name, value)  # the container's own setting wins
    first, rest = image.command(c)
    if c.get("command"):
        argv = [expand(a, env) for a in first + rest]
    else:
        argv = first + [expand(a, env) for a in rest] if c.get("args") else first + rest
    if not argv:
        raise PodError(
            f"{where}: no command: image {c.get('image')} has neither an Entrypoint nor a Cmd, and the container "
            "sets no command. Fix: set command on the container (spec.trainer.command for the trainer)"
        )
    if scratch is None:
        raise PodError(f"{where}: a container in an image needs the pod's scratch directory")
    return Container(
        name=c.get("name", ""), spec=c, argv=argv, env=env, program=argv[0], security=security,
        enter=ctx.network(pod.name, pod.address) if ctx.network is not None else [], binds=[tools_bind],
        image=image, rootfs=scratch / "rootfs" / (c.get("name") or "container"),
        workdir=c.get("workingDir") or image.working_dir(),
        devices=gpus_.device_view(gpus),
        shared_shm=bool(gpus is not None and gpus.own and not gpus.shared),
    )


ROOTFS_HELPER = str(Path(__file__).with_name("_rootfs.py"))
CLUSTER_DOMAIN = "cluster.local"


def sandbox_argv(
    pod: PodPlan, container: Container, ctx: PodContext, *, volumes: dict[str, Path], where: str
) -> tuple[list[str], list[str]]:
    """The container's own overlay on its image's layers (a fresh writable layer at every start, as a new
    container gets), and the sandbox on it with the files a kubelet writes for a pod: ``/etc/hosts`` (every pod
    of the TrainJob by its hostname), ``/etc/resolv.conf`` (the cluster's search path; the outbound network's DNS
    when there is one) and ``/etc/hostname``."""
    image, rootfs, security = container.image, container.rootfs, container.security
    assert image is not None and rootfs is not None
    chdir = container.workdir or "/"
    binds = container_binds(container.spec, volumes, where)
    paths.remove_tree(rootfs)
    for d in ("upper", "work", "merged"):
        (rootfs / d).mkdir(parents=True)
    (rootfs / "hostname").write_text(f"{pod.name}\n")
    search = f"{ctx.namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}"
    server = ""
    if ctx.resolv_conf is not None:
        server = "".join(x + "\n" for x in Path(ctx.resolv_conf).read_text().splitlines() if x.startswith("nameserver"))
    (rootfs / "resolv.conf").write_text(f"search {search}\n{server}options ndots:5\n")
    files = [
        Bind(ctx.hosts_file, "/etc/hosts", True),
        Bind(str(rootfs / "resolv.conf"), "/etc/resolv.conf", True),
        Bind(str(rootfs / "hostname"), "/etc/hostname", True),
    ]
    all_binds = files + container.binds + binds
    if container.program:
        check_program(
            container.program, container.env.get("PATH", ""), chdir, binds, where,
            locate=lambda p: _locate(p, binds, image), image=container.spec.get("image"),
        )
    check_exec_size(container.argv, container.env, where)
    command = [*(security.exec_prefix() if security is not None else []), *container.argv]
    layers_root = str(image.image.root / "layers")
    spec = {
        "layers_root": layers_root,
        "layers": [os.path.basename(x) for x in image.layers],
        "upper": str(rootfs / "upper"),
        "work": str(rootfs / "work"),
        "merged": str(rootfs / "merged"),
        "path": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    helper = [sys.executable, "-S", "-E", ROOTFS_HELPER, json.dumps(spec), "--"]
    sandbox = bwrap_image_argv(
        merged=str(rootfs / "merged"),
        hostname=pod.name,
        binds=all_binds,
        chdir=chdir,
        make_chdir=not image.has_dir(chdir) and not any(b.dest == chdir for b in binds),
        command=command,
        security=security,
        devices=container.devices,
        shared_shm=container.shared_shm,
    )
    return command, [*container.enter, *helper, *sandbox]


def _locate(path: str, binds: list[Bind], image: ImageRoot) -> str | None:
    """Where ``path`` inside the pod is on this machine: in a volume, else in the image's layers."""
    on_host = host_path(path, binds)
    return on_host if on_host != path else image.resolve(path)
