# kubetrain developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-deps demo test test-fast lint bench crds clean fuzz image

# Debian packages the local backend uses: OpenMPI for real mpirun (Intel MPI and MPICH come with the Python
# environment standing in for their runtime's image: the pyproject extras intel-mpi and mpich; Debian's MPICH 4.0.2
# can hang in MPI_Finalize across nodes), bubblewrap for per-pod mount namespaces; chromium and its driver for the
# tests of `kubetrain ui` in a real (headless) browser; skopeo for images pulled or copied from a Podman store
# (`kubetrain images`), and Podman and the distribution registry (docker-registry) for the tests that run them.
system-deps:
	@if ! command -v mpirun >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! command -v nsenter >/dev/null 2>&1 || ! command -v slirp4netns >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1 || ! command -v podman >/dev/null 2>&1 || ! command -v docker-registry >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing openmpi-bin, libopenmpi-dev, bubblewrap, iproute2, util-linux, slirp4netns, nftables, chromium, chromium-driver, skopeo, podman, docker-registry (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev bubblewrap iproute2 util-linux slirp4netns nftables chromium chromium-driver skopeo podman docker-registry >/dev/null \
	      || echo "warning: apt-get failed; the local backend needs bubblewrap, iproute2 and util-linux, the UI's browser tests chromium and chromium-driver (those tests will be skipped)"; \
	  else \
	    echo "note: mpirun/bwrap/chromium missing and not root; MPI, mount-namespace and browser tests will be skipped"; \
	  fi; \
	fi

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,train,initializers,torchtune,ui]'
	touch $(STAMP)

install: system-deps $(STAMP)

demo: install
	$(BIN)/kubetrain run --replace -f examples/quickstart/trainjob.yaml

test: install
	$(BIN)/pytest -q

test-fast: install
	$(BIN)/pytest -q -m "not slow"

# Every path a manifest can take -- the loader (current and legacy apiVersions, core kinds), validation and the
# compiler, `kubetrain validate` (with the Pod Security lint), `render`, `apply`, `run` (up to submitting) and the
# webhook's review handlers -- under 10,000 generated manifests each; fails on any crash. `make test` runs a fixed
# sample of the same tests. Memory is capped (6 GB of address space): an input that makes kubetrain allocate
# without bound fails its test with a MemoryError instead of taking a shared machine's memory.
FUZZ_TESTS := tests/api/test_fuzz.py tests/cli/test_fuzz_entry_points.py tests/k8s/webhook/test_fuzz_review.py
fuzz: install
	ulimit -v 6000000 && KUBETRAIN_FUZZ_PROFILE=fuzz $(BIN)/pytest -q -p no:cacheprovider --timeout=0 $(FUZZ_TESTS)

lint: install
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install
	$(BIN)/python bench/run_all.py

# The operator image as a docker-archive, without a Docker daemon (debootstrap, umoci, skopeo; needs root):
# load it with `ctr -n k8s.io images import`, `docker load -i` or `podman load -i` (docs/install.md).
# IMAGE_OUT and IMAGE_TAG override the archive's path and the image's name.
IMAGE_OUT ?=
IMAGE_TAG ?=
image: install
	$(BIN)/python scripts/build_image.py $(if $(IMAGE_OUT),--output $(IMAGE_OUT)) $(if $(IMAGE_TAG),--tag $(IMAGE_TAG))

crds: install
	KUBETRAIN_UPDATE_MANIFESTS=1 $(BIN)/pytest -q tests/api/test_k8sschema.py
	$(BIN)/kubetrain crds --output-dir manifests/base/crds
	KUBETRAIN_UPDATE_MANIFESTS=1 $(BIN)/pytest -q tests/k8s/manifests

clean:
	rm -rf $(VENV) build dist *.egg-info
