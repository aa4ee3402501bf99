"""Making a pod's image present as a kubelet does, per ``imagePullPolicy``, without holding up the supervisor: a
copy from a Podman store or a pull runs on a thread of its own while the pod waits, and a failure leaves the pod
waiting with the kubelet's reasons (``ErrImagePull``, then ``ImagePullBackOff`` until the next try, 10 s doubling
to 5 min; ``ErrImageNeverPull`` for ``Never``). A pod whose image gets loaded meanwhile (``kubetrain images
load``) starts at the next try."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubetrain.api.errors import KubetrainError
from kubetrain.local.images import reference, sources
from kubetrain.local.images.store import ImageStore, StoredImage

ERR_PULL = "ErrImagePull"
BACKOFF = "ImagePullBackOff"
NEVER_PULL = "ErrImageNeverPull"
CREATING = "ContainerCreating"
_FIRST_BACKOFF, _MAX_BACKOFF = 10.0, 300.0

Event = Callable[[str, str, str], None]  # (type, reason, message)


@dataclass
class Waiting:
    reason: str
    message: str


def fix_for(image: str) -> str:
    return (
        f"load it with `kubetrain images load -i <archive>` (an archive of `docker save`/`podman save` {image}), "
        "put it in this user's Podman store (`podman pull`/`podman load`), log in to its registry (`podman login`, "
        "`skopeo login` or `docker login`), or map it to a Python environment in images.yaml"
    )


@dataclass
class _Attempt:
    thread: threading.Thread | None = None
    result: StoredImage | None = None
    error: str | None = None
    failures: int = 0
    retry_at: float = 0.0
    reported: bool = False


def policy_of(container: dict[str, object]) -> str:
    policy = str(container.get("imagePullPolicy") or "")
    return policy if policy in ("Always", "IfNotPresent", "Never") else reference.default_pull_policy(
        str(container.get("image") or "")
    )


class Puller:
    """One per supervisor: each image is made present once (``Always`` checks its digest once per run)."""

    def __init__(self, store: ImageStore, event: Event) -> None:
        self.store = store
        self.event = event
        self._attempts: dict[tuple[str, str], _Attempt] = {}
        self._lock = threading.Lock()

    def get(self, image: str, policy: str, *, in_podman: bool = False) -> StoredImage | Waiting:
        """The stored image to run, or why the pod waits (and the work that makes it present is under way)."""
        key = (image, policy)
        attempt = self._attempts.setdefault(key, _Attempt())
        if attempt.result is not None:
            return attempt.result
        stored = self.store.find(image)
        if stored is not None and policy != "Always":
            attempt.result = stored
            self.event("Normal", "Pulled", f'Container image "{image}" already present on machine')
            return stored
        if policy == "Never" and not in_podman:
            message = f'Container image "{image}" is not present with pull policy of Never'
            if not attempt.reported:
                attempt.reported = True
                self.event("Warning", NEVER_PULL, f"{message} (fix: {fix_for(image)})")
            return Waiting(NEVER_PULL, f"{message} (fix: {fix_for(image)})")
        with self._lock:
            if attempt.thread is not None and attempt.thread.is_alive():
                return Waiting(CREATING, f'pulling image "{image}"')
            if attempt.thread is not None:  # finished
                attempt.thread = None
                if attempt.result is not None:
                    return attempt.result
                if not attempt.reported:
                    attempt.reported = True
                    return Waiting(ERR_PULL, self._failed(image, attempt))
            if attempt.error is not None and time.monotonic() < attempt.retry_at:
                return Waiting(BACKOFF, f'Back-off pulling image "{image}": {attempt.error}')
            attempt.error, attempt.reported = None, False
            verb = "Copying image from the Podman store" if in_podman else "Pulling image"
            self.event("Normal", "Pulling", f'{verb} "{image}"')
            attempt.thread = threading.Thread(
                target=self._work, args=(image, policy, in_podman, attempt, stored), daemon=True,
                name=f"pull {image}",
            )
            attempt.thread.start()
        return Waiting(CREATING, f'pulling image "{image}"')

    def _failed(self, image: str, attempt: _Attempt) -> str:
        attempt.failures += 1
        delay = min(_FIRST_BACKOFF * 2 ** (attempt.failures - 1), _MAX_BACKOFF)
        attempt.retry_at = time.monotonic() + delay
        message = f'Failed to pull image "{image}": {attempt.error} (fix: {fix_for(image)})'
        self.event("Warning", "Failed", message)
        self.event("Warning", "Failed", f"Error: {ERR_PULL}")
        self.event("Normal", "BackOff", f'Back-off pulling image "{image}" (next try in {delay:g}s)')
        return message

    def _work(self, image: str, policy: str, in_podman: bool, attempt: _Attempt, stored: StoredImage | None) -> None:
        started = time.monotonic()
        try:
            if policy == "Always" and stored is not None:
                digest = sources.remote_digest(image)
                if digest in stored.digests or any(d.endswith("@" + digest) for d in stored.digests):
                    attempt.result = stored
                    self.event("Normal", "Pulled", f'Container image "{image}" already present on machine '
                               f"and matches the registry's {digest[:19]}")
                    return
            if in_podman:
                result = sources.import_containers_storage(self.store, image)
            else:
                result = sources.pull(self.store, image)
            attempt.result = result
            took = time.monotonic() - started
            self.event("Normal", "Pulled", f'Successfully pulled image "{image}" in {took:.1f}s. Image size: '
                       f"{result.size} bytes.")
        except KubetrainError as exc:
            attempt.error = str(exc)
        except Exception as exc:  # a thread must say what went wrong rather than die silently
            attempt.error = f"{type(exc).__name__}: {exc}"
