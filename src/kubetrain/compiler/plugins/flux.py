"""Flux (``mlPolicy.flux``, Kubeflow Trainer v2.2+): every trainer pod runs a Flux broker, and the lead pod hands
the TrainJob's command to ``flux run`` across all of them.

What upstream's plugin does, object for object: an init container (``flux-installer``) copies a Flux install from
its image into an emptyDir; a ConfigMap ``<trainjob>-flux-entrypoint`` carries that container's ``init.sh`` (it
writes the broker configuration and the host list) and the node's ``entrypoint.sh`` (it starts the brokers); a
Secret ``<trainjob>-flux-curve`` holds the CURVE certificate the brokers authenticate each other with; the node
container's command becomes ``/bin/bash /etc/flux-config/entrypoint.sh "<the TrainJob's command and args>"``.
"""

from __future__ import annotations

import base64
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import CompileError, Result
from kubetrain.api.runtime import FluxPolicy
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.framework import object_meta, trainjob_uid
from kubetrain.compiler.info import Info, build_info
from kubetrain.compiler.keys import CurveKeyGen, KeyGen, uid_curve_keygen
from kubetrain.compiler.plugins import flux_scripts as s

_NPROC = "spec.trainer.numProcPerNode"


def policy(info: Info) -> FluxPolicy | None:
    return info.ml_policy.flux if info.ml_policy is not None else None


def config_map_name(info: Info) -> str:
    return f"{info.name}-flux-entrypoint"


def curve_secret_name(info: Info) -> str:
    return f"{info.name}-flux-curve"


def span(size: int, start: int = 0) -> str:
    """A Flux idset: ``0`` for one, ``0-3`` for four, ``10-12`` for three from ten."""
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def hostlist(prefix: str, size: int) -> str:
    """The trainer pods' hostnames as a Flux hostlist, ``<trainjob>-node-0-[0-3]``."""
    return f"{prefix}-{c.NODE}-0-[{span(size)}]"


def settings(info: Info) -> dict[str, str]:
    """The broker settings: the defaults, then the runtime node container's plain env, then the TrainJob's env
    (an env entry of the TrainJob with ``valueFrom`` sets the setting to "", as upstream reads only ``value``)."""
    out = dict(c.FLUX_SETTINGS)
    ps = info.trainer()
    node = ps.container(c.NODE) if ps is not None else None
    for item in (node or {}).get("env") or []:
        if item.get("name") in out and item.get("value") is not None:
            out[item["name"]] = item["value"]
    trainer = info.trainjob.spec.trainer
    for var in (trainer.env if trainer is not None else None) or []:
        if var.name in out:
            out[var.name] = var.value or ""
    return out


def original_command(info: Info) -> str:
    """What the wrapped application runs: the runtime node container's command, replaced by the TrainJob's command
    and followed by the TrainJob's args, joined by spaces (the shell splits it again)."""
    ps = info.trainer()
    node = ps.container(c.NODE) if ps is not None else None
    command = list((node or {}).get("command") or [])
    args: list[str] = []
    trainer = info.trainjob.spec.trainer
    if trainer is not None:
        if trainer.command is not None:
            command = list(trainer.command)
        if trainer.args is not None:
            args = list(trainer.args)
    return " ".join(command + args).strip()


def _num_nodes(info: Info) -> int:
    """Upstream sizes the broker from the TrainJob's numNodes alone (its plugin dereferences it unguarded)."""
    trainer = info.trainjob.spec.trainer
    if trainer is None or trainer.num_nodes is None:
        raise CompileError(
            "spec.trainer.numNodes",
            f'must be set for Flux runtime "{info.runtime.name}": the Flux brokers\' host list is made from it',
            "set spec.trainer.numNodes (e.g. numNodes: 2)",
        )
    return trainer.num_nodes


def _tasks_per_node(info: Info) -> int:
    trainer = info.trainjob.spec.trainer
    value = trainer.num_proc_per_node if trainer is not None else None
    if value is None:
        pol = policy(info)
        value = pol.num_proc_per_node if pol is not None and pol.num_proc_per_node is not None else 1
    if not isinstance(value, int):
        raise CompileError(_NPROC, f"must be an integer for a Flux runtime, got {value!r}",
                           "set the number of Flux tasks per node, e.g. numProcPerNode: 4")
    return value


def broker_config(info: Info, hosts: str, opts: dict[str, str]) -> str:
    fqdn = f"{info.name}.{info.namespace}.svc.{c.CLUSTER_DOMAIN}"
    bind = f"tcp://{opts['FLUX_NETWORK_DEVICE']}:%p"
    connect = f"tcp://%h.{fqdn}:%p"
    return s.fill(s.BROKER_TOML, bind, connect, hosts, opts["FLUX_QUEUE_POLICY"])


def init_script(info: Info, opts: dict[str, str]) -> str:
    hosts = hostlist(info.name, _num_nodes(info))
    return s.fill(s.INIT_SH, "/opt/view", f"{info.name}-0", hosts, broker_config(info, hosts, opts))


def entrypoint_script(info: Info) -> str:
    nodes, tasks = _num_nodes(info), _tasks_per_node(info)
    flags = f"-N {nodes} -n {tasks * nodes}"
    resources = f"--cores={span(tasks)}"
    gpus = info.gpu_count()
    if gpus > 0:
        flags += f" -g {gpus}"  # flux run's -g is GPUs per task
        resources += f" --gpu={span(gpus)}"
    return s.fill(s.ENTRYPOINT_SH, resources, f"{info.name}-{c.NODE}-0-0", flags)


def curve_certificate(name: str, public: str, secret: str) -> str:
    """The certificate as ``flux keygen`` writes it (CZMQ's format: four-space indents)."""
    return (
        "#  ZeroMQ CURVE Secret Certificate\n"
        "#  Generated by Kubeflow Trainer\n\n"
        "metadata\n"
        f'    name = "{name}"\n'
        "curve\n"
        f'    public-key = "{public}"\n'
        f'    secret-key = "{secret}"\n'
    )


def _volumes(info: Info) -> list[dict[str, Any]]:
    cm = config_map_name(info)
    return [
        {"name": c.FLUX_SPACK_VOLUME, "emptyDir": {}},
        {"name": c.FLUX_INSTALL_VOLUME, "emptyDir": {}},
        {"name": cm, "configMap": {"name": cm, "defaultMode": 0o755}},
        {"name": c.FLUX_MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": c.FLUX_CURVE_VOLUME, "secret": {"secretName": curve_secret_name(info), "defaultMode": 0o400}},
    ]


def _installer(config_map: str, image: str) -> dict[str, Any]:
    return {
        "name": c.FLUX_INSTALLER_CONTAINER,
        "image": image,
        "command": list(c.FLUX_INIT),
        "volumeMounts": [
            {"name": c.FLUX_INSTALL_VOLUME, "mountPath": c.FLUX_INSTALL_PATH},
            {"name": config_map, "readOnly": True, "mountPath": c.FLUX_CONFIG_PATH},
        ],
    }


class Flux:
    name = "Flux"

    def __init__(self, curve_keygen: CurveKeyGen = uid_curve_keygen) -> None:
        self.curve_keygen = curve_keygen

    def enforce_ml_policy(self, info: Info) -> None:
        if policy(info) is None:
            return
        _num_nodes(info)  # fail here, before anything is built, when the broker cannot be sized
        _tasks_per_node(info)
        cm = config_map_name(info)
        opts = settings(info)
        # Upstream rewrites the TrainJob's command and drops its args (the runtime's args, if any, stay); the
        # TrainJob is kept as written here and the JobSet builder is told instead.
        info.trainer_command = [*c.FLUX_ENTRYPOINT, original_command(info)]
        info.trainer_args_dropped = True
        # Upstream's rule: the replicated job *named* node, and its container named node.
        for ps in info.pod_sets:
            if ps.name != c.NODE:
                continue
            for volume in _volumes(info):
                e.add_volume(ps.pod_spec, volume)
            ps.init_containers().append(_installer(cm, opts["FLUX_VIEW_IMAGE"]))
            node = ps.container(c.NODE)
            if node is None:
                continue
            e.add_mount(node, c.FLUX_INSTALL_VOLUME, c.FLUX_INSTALL_PATH)
            e.add_mount(node, c.FLUX_SPACK_VOLUME, c.FLUX_SPACK_PATH)
            e.add_mount(node, cm, c.FLUX_CONFIG_PATH, read_only=True)
            e.add_mount(node, c.FLUX_CURVE_VOLUME, c.FLUX_CURVE_PATH, read_only=True)
            e.add_mount(node, c.FLUX_MEMORY_VOLUME, c.FLUX_MEMORY_PATH, read_only=True)

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        if policy(info) is None:
            return []
        opts = settings(info)
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(info, config_map_name(info)),
            "data": {"entrypoint.sh": entrypoint_script(info), "init.sh": init_script(info, opts)},
        }
        keys = self.curve_keygen(trainjob_uid(info.trainjob))
        cert = curve_certificate(info.name, keys.public_z85, keys.secret_z85)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(info, curve_secret_name(info)),
            "data": {"curve.cert": base64.b64encode(cert.encode()).decode()},
        }
        return [config_map, secret]

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        """Upstream's admission checks, on the pods as the runtime and the TrainJob's patches make them (before
        this plugin adds its own init container)."""
        result = Result()
        pol = policy(info)
        if pol is None:
            return result
        trainer = info.trainjob.spec.trainer
        value = trainer.num_proc_per_node if trainer is not None and trainer.num_proc_per_node is not None else (
            pol.num_proc_per_node)
        if isinstance(value, int) and value < 1:
            result.error(_NPROC, f"must be greater than or equal to 1 for Flux TrainJob, got {value}",
                         "set numProcPerNode to the Flux tasks each node runs, e.g. numProcPerNode: 1")
        for ps in build_info(info.trainjob, info.runtime).pod_sets:
            if ps.name != c.NODE:
                continue
            for init in ps.pod_spec.get("initContainers") or []:
                if init.get("name") == c.FLUX_INSTALLER_CONTAINER:
                    result.error(
                        "spec.trainer.initContainers",
                        f"InitContainer '{c.FLUX_INSTALLER_CONTAINER}' is reserved: the Flux runtime adds it to "
                        f'replicated job "{ps.name}"',
                        f"rename the init container of runtime \"{info.runtime.name}\" (or of the TrainJob's "
                        "patches) that is called flux-installer",
                    )
        return result
