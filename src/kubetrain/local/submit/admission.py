"""What a TrainJob's pods may ask of this machine, checked when it is submitted so that nothing is recorded when
the answer is no: ``hostPath`` volumes only below ``security.allowedHostPaths`` (none by default), ``privileged``
containers only when kubetrain runs as root and they are allowed (``--allow-privileged`` or
``security.allowPrivileged``), and, for a pod that waits for other steps, resources and programs this machine has.
The supervisor checks the same again when it starts each pod. Refused too, at once: what only a cluster provides,
Flux without a ``flux`` command here and a ``cache://`` dataset (``check_local_support``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from kubetrain.local import config, paths
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.sandbox.volumes import VolumeError, check_host_path


def privileged_refusal(where: str) -> str | None:
    """Why a privileged container cannot be submitted here, or None when it can."""
    if os.geteuid() != 0:
        return sc.privileged_needs_root(where)
    if sc.privileged_allowed(config.load().security.allow_privileged):
        return None
    return (
        f"{where}: privileged containers are refused by default: running as root, such a pod gets every "
        "capability and write access to /sys of this machine. Fix: pass --allow-privileged to `kubetrain run` or "
        f"`kubetrain apply`, or set `security: {{allowPrivileged: true}}` in {paths.config_file()}"
    )


def check(objects: list[dict[str, Any]]) -> None:
    """Raise ``SecurityContextError`` listing every refused volume and container of the compiled JobSet."""
    problems: list[str] = []
    allowed: list[str] | None = None
    for name, rj, pod in _replicated_job_pods(objects):
        base = f"JobSet {name} spec.replicatedJobs[{rj.get('name')}].template.spec.template.spec"
        for i, vol in enumerate(pod.get("volumes") or []):
            if "hostPath" not in vol:
                continue
            if allowed is None:
                allowed = config.load().security.allowed_host_paths
            try:
                check_host_path(
                    str((vol["hostPath"] or {}).get("path", "")),
                    allowed,
                    f"{base}.volumes[{i}]",
                    str(vol.get("name", "")),
                    str(paths.config_file()),
                )
            except VolumeError as exc:
                problems.append(str(exc))
        for kind in ("initContainers", "containers"):
            for c in pod.get(kind) or []:
                if (c.get("securityContext") or {}).get("privileged"):
                    refusal = privileged_refusal(f"{base}.{kind}[{c.get('name')}].securityContext.privileged")
                    if refusal is not None:
                        problems.append(refusal)
    if problems:
        raise sc.SecurityContextError("; ".join(dict.fromkeys(problems)))
    check_local_support(objects)
    check_waiting_pods(objects)


# Where upstream's flux-view images keep their Flux install, which the flux-installer init container copies (as
# root filesystems are the host's locally, a view installed on this machine at that path is what it copies here).
FLUX_VIEWS = "/opt/views/._view"


def flux_found(image: str | None) -> bool:
    """A Flux TrainJob's node container finds ``flux``: in the environment standing in for its image, on this
    machine's PATH, or in a Flux view the flux-installer init container copies into the pod."""
    import glob
    import shutil

    from kubetrain.local.sandbox import pods

    path = f"{pods.image_env_prefix(image)}/bin:{os.environ.get('PATH', '')}"
    return shutil.which("flux", path=path) is not None or bool(glob.glob(f"{FLUX_VIEWS}/*/bin/flux"))


def _fetches_from_cache(container: dict[str, Any]) -> str | None:
    """The ``cache://`` URI a container of upstream's initializer image (run by its entrypoint) would fetch."""
    from kubetrain.local.sandbox import known_images

    if container.get("command") or known_images.lookup(container.get("image")) is None:
        return None  # a command of its own: whatever the user put in its environment runs, as for any program
    for item in container.get("env") or []:
        value = str(item.get("value") or "")
        if item.get("name") == "STORAGE_URI" and value.lower().startswith("cache://"):
            return value
    return None


def _replicated_job_pods(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each replicated job of the compiled JobSets, as (JobSet name, replicated job, its pod spec)."""
    for o in objects:
        if o.get("kind") != "JobSet":
            continue
        name = (o.get("metadata") or {}).get("name", "")
        for rj in (o.get("spec") or {}).get("replicatedJobs") or []:
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            yield name, rj, pod


def check_local_support(objects: list[dict[str, Any]]) -> None:
    """Refuse at submit, in one message, what needs a cluster: a Flux TrainJob where no ``flux`` can be found
    (Flux is not packaged for Debian 12) and a ``cache://`` dataset (the data cache is a service that runs on a
    cluster). Otherwise its pods would start, run the initializers, and fail at the first Flux or cache call."""
    from kubetrain.api import constants as c
    from kubetrain.api.errors import KubetrainError

    problems: list[str] = []
    fixes: list[str] = []
    name = ""
    for jobset, rj, pod in _replicated_job_pods(objects):
        name = jobset  # the message names the TrainJob (its JobSet's name)
        flux = any(x.get("name") == c.FLUX_INSTALLER_CONTAINER for x in pod.get("initContainers") or [])
        node = next((x for x in pod.get("containers") or [] if x.get("name") == c.NODE), None)
        if flux and node is not None and not flux_found(node.get("image")):
            from kubetrain.local.sandbox import pods

            problems.append(
                f"replicated job {rj.get('name')} runs under Flux (mlPolicy.flux), and the Flux binaries are "
                f"missing: no `flux` command in the Python environment standing in for image "
                f"{node.get('image')} ({pods.image_env_prefix(node.get('image'))}), on this machine's PATH, or "
                f"in a Flux view under {FLUX_VIEWS} (Flux is not packaged for Debian 12)"
            )
            fixes.append(
                "install Flux (flux-core and flux-sched, e.g. built from source or with `spack install "
                "flux-sched`) so that `flux` is on the PATH, or map the image to an environment whose bin/ has it "
                f"in {paths.home() / 'images.yaml'}"
            )
        for cont in pod.get("containers") or []:
            uri = _fetches_from_cache(cont)
            if uri is not None:
                problems.append(
                    f"replicated job {rj.get('name')} fetches STORAGE_URI {uri}: the data cache (cache://) is a "
                    "Kubeflow Trainer service on a cluster (the initializer starts a LeaderWorkerSet of "
                    "data-cache pods), which does not run on this machine"
                )
                fixes.append("copy the table to this machine and name it with file:///<path> in "
                             "spec.initializer.dataset.storageUri")
    if problems:
        raise KubetrainError(
            f"TrainJob {name} cannot run on this machine, so it was not created: {'; '.join(problems)}. Fix: "
            f"{'; '.join(dict.fromkeys(fixes))}; or run it on a cluster (--context)"
        )


def check_waiting_pods(objects: list[dict[str, Any]]) -> None:
    """A replicated job that waits for others (``dependsOn``) and can never start here is refused at submit: its
    shortfall would only show once the steps before it had run, e.g. after initializers downloaded a model for a
    trainer that asks for GPUs this machine lacks. Checked: resources no pod of it could ever get, and a command
    whose program is not installed in the environment standing in for its image. Raises one ``KubetrainError``
    naming all of it."""
    import shutil

    from kubetrain.api.errors import KubetrainError
    from kubetrain.local.images import choose
    from kubetrain.local.sandbox import known_images, pods
    from kubetrain.local.scheduling import resources
    from kubetrain.local.scheduling.gang import OVERCOMMIT_ENV

    capacity: resources.Capacity | None = None
    problems: list[str] = []
    name = ""
    for jobset, rj, pod in _replicated_job_pods(objects):
        name = jobset  # the message names the TrainJob (its JobSet's name)
        waits_for = [str(d.get("name")) for d in rj.get("dependsOn") or []]
        if not waits_for:
            continue
        behind = f"replicated job {rj.get('name')} (it waits for {', '.join(waits_for)})"
        try:
            requests = resources.pod_requests(pod)
        except KubetrainError:
            continue  # a malformed quantity is the scheduler's to report, with its field
        if requests:
            capacity = capacity or resources.Capacity.of_machine(config.load().capacity, str(paths.home()))
            short = resources.never_fits(requests, capacity, os.environ.get(OVERCOMMIT_ENV) == "1")
            if short:
                problems.append(f"{behind} asks for {'; '.join(short)}")
        for c in pod.get("containers") or []:
            program = (known_images.with_entrypoint(c).get("command") or [""])[0]
            if not program or "/" in program or "$(" in program or any(e.get("name") == "PATH" for e in
                                                                         c.get("env") or []):
                continue
            if choose.choose(c.get("image")).in_image:
                continue  # runs in its image: what it holds is checked when the pod starts, as on a node
            prefix = pods.image_env_prefix(c.get("image"))
            if shutil.which(program, path=f"{prefix}/bin:{os.environ.get('PATH', '')}") is None:
                problems.append(
                    f"{behind}: its container {c.get('name')} runs `{program}`, which is not installed in the "
                    f"Python environment standing in for image {c.get('image')} ({prefix}; map images to "
                    f"environments in {paths.home() / 'images.yaml'})"
                )
    if problems:
        raise KubetrainError(
            f"TrainJob {name} cannot run on this machine, so it was not created (the steps before would run for "
            f"nothing): {'; '.join(problems)}. Fix: ask for what this machine has (spec.trainer.resourcesPerNode "
            "sets the trainer's requests and limits; 0 drops one), install what is missing, or run it on a cluster "
            "(--context)"
        )
