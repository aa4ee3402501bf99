"""Container images on this machine: a store of unpacked layers under ``$KUBETRAIN_HOME/images`` that local pods
run in (``kubetrain images load``, a Podman/Buildah store, a pull with skopeo), and the rule that says, per image,
whether a pod runs in the real image or in the Python environment ``images.yaml`` maps it to."""
