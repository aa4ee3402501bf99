# kubetrain operator image: `docker build -t ghcr.io/kubetrain/kubetrain:0.1.0 .`
# The operator, admission webhook and CLI are one Python package; the image installs it without the training
# extras (torch, mpi4py), which run in the training pods' own images.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.3.0
COPY pyproject.toml README.md* ./
COPY src ./src
RUN python -m build --wheel --outdir /dist

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kubetrain" \
      org.opencontainers.image.description="Kubeflow Trainer v2 compatible operator and admission webhook" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /dist/*.whl /tmp/
# Dependencies are pinned in pyproject.toml; the wheel carries them as exact requirements.
RUN pip install /tmp/*.whl && rm -f /tmp/*.whl
# A numeric non-root user, so the pod's runAsNonRoot can be verified by the kubelet.
USER 65532:65532
WORKDIR /tmp
EXPOSE 9443 8081 10443
ENTRYPOINT ["kubetrain"]
CMD ["operator"]
