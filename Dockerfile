# kubetrain operator image: `docker build -t ghcr.io/kubetrain/kubetrain:0.1.0 .`
# Without a Docker daemon, `make image` (scripts/build_image.py) builds the same image from this file's final
# stage with debootstrap, umoci and skopeo (docs/install.md#the-operator-image); a test keeps the two equal.
# The operator, admission webhook and CLI are one Python package; the image installs it without the training
# extras (torch, mpi4py), which run in the training pods' own images. Debian's own python3 with a virtual
# environment in /opt/venv: the same layout either way, since a debootstrap root filesystem has no python:slim.

ARG DEBIAN_IMAGE=debian:12.15-slim

FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md* ./
COPY src ./src
# Dependencies are pinned in pyproject.toml; the wheel carries them as exact requirements.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /dist . \
 && /opt/venv/bin/pip install --no-cache-dir /dist/*.whl

FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
LABEL org.opencontainers.image.title="kubetrain" \
      org.opencontainers.image.description="Kubeflow Trainer v2 compatible operator and admission webhook" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# A numeric non-root user, so the pod's runAsNonRoot can be verified by the kubelet.
USER 65532:65532
WORKDIR /tmp
EXPOSE 9443 8081 10443
ENTRYPOINT ["kubetrain"]
CMD ["operator"]
