#!/usr/bin/env bash
# Training images with Intel MPI or MPICH for the bed: the bed's training image (shared/tools/k8s-node images.sh:
# Debian 12, OpenMPI 4.1, sshd, mpi4py in /opt/venv) with one more layer that installs the MPI from PyPI into
# /opt/venv, pinned by this checkout's pyproject.toml extras, so its mpirun/mpiexec.hydra come first on PATH and
# mpi4py loads its library:
#   intel   localhost/kubetrain-train-intel:dev   extra `intel-mpi` (impi-rt, mpi4py)
#   mpich   localhost/kubetrain-train-mpich:dev   extra `mpich` (mpich, mpi4py)
#
#   hack/bed/mpi-images.sh [intel] [mpich]        (default: both)
#
# Built as the tool builds its images, without Docker or a registry: the training image's archive
# ($K8S_HOME/images/train.tar) unpacked with skopeo + umoci, pip run in a chroot on wheels downloaded with the bed's
# venv (Python 3.11, as the image's), the change packed as a layer of its own (umoci repack: containerd shares the
# training image's layer), written next to the tool's archives as images/train-NAME.tar + .refs, imported into the
# running containerd with the tool's lib/import-image.sh (start.sh --node imports it again after a wipe) and into an
# extra node's (add-node.sh --images). Needs root, umoci, skopeo, the bed's venv and training image, pip's index.
# About 2 minutes per image the first time (wheels are cached in $K8S_HOME/cache), most of it packing.
source "$(dirname "$0")/lib.sh"

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    intel|mpich) targets+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (intel, mpich; see --help)" ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(intel mpich)
[ "$(id -u)" = 0 ] || die "must run as root (umoci unpack keeps the image's owners; pip runs in a chroot)"
for c in umoci skopeo; do command -v $c >/dev/null || die "missing $c (apt-get install umoci skopeo)"; done
need_tool
IMG=$K8S_HOME/images CACHE=${K8S_IMAGE_CACHE:-$K8S_HOME/cache}
PYV=$K8S_HOME/venv/bin/python
[ -x "$PYV" ] || die "missing $K8S_HOME/venv: build the bed first (hack/bed/up.sh)"
[ -f "$IMG/train.tar" ] || die "no training image at $IMG/train.tar: run hack/bed/up.sh (or the tool's images.sh train)"

# pins EXTRA: the requirements of this checkout's optional dependency EXTRA (one source for the pins)
pins() {
  "$PYV" -c 'import sys, tomllib
extras = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]
print(" ".join(extras[sys.argv[2]]))' "$REPO/pyproject.toml" "$1"
}

W=$(mktemp -d "$IMG/.mpi.XXXX")
cleanup() {
  local m
  for m in "$W"/*/rootfs/proc; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  rm -rf --one-file-system "$W"
}
trap cleanup EXIT
in_chroot() { # ROOTFS command...: with /proc, without the host's environment
  local r=$1 rc=0; shift
  mount -t proc proc "$r/proc"
  env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 /usr/sbin/chroot "$r" "$@" || rc=$?
  umount "$r/proc"
  return $rc
}

t=$(now)
skopeo copy --quiet "docker-archive:$IMG/train.tar" "oci:$W/oci:train"
say "training image $(head -n1 "$IMG/train.refs") unpacked as OCI in $(( $(now) - t )) s"

build() { # NAME EXTRA LIBRARY-VERSION-PREFIX
  local name=$1 extra=$2 expect=$3 spec ref wheels b r t; t=$(now)
  spec=$(pins "$extra"); ref=localhost/kubetrain-train-$name:dev
  wheels=$CACHE/wheels-train-$name b=$W/$name r=$W/$name/rootfs
  mkdir -p "$wheels"
  # shellcheck disable=SC2086
  (cd "$wheels" && PIP_DISABLE_PIP_VERSION_CHECK=1 "$K8S_HOME/venv/bin/pip" download -q -d . $spec)
  umoci unpack --image "$W/oci:train" "$b" >/dev/null
  mkdir -p "$r/tmp/wheels"; cp "$wheels"/*.whl "$r/tmp/wheels/"
  in_chroot "$r" pip install -q --no-index --find-links /tmp/wheels $spec
  rm -rf "$r/tmp/wheels" "$r/root/.cache"
  # what a pod will run: the implementation's launcher first on PATH, and mpi4py loading that implementation
  in_chroot "$r" python -c 'import shutil, sys
import mpi4py
mpi4py.rc.initialize = False  # the library and its version only: no MPI_Init in a chroot without /dev/shm
from mpi4py import MPI
version = MPI.Get_library_version().strip().splitlines()[0]
launcher, hydra = shutil.which("mpirun"), shutil.which("mpiexec.hydra")
print(f"mpirun {launcher}, mpiexec.hydra {hydra}; mpi4py loads: {version}")
if not version.startswith(sys.argv[1]) or not (launcher or "").startswith("/opt/venv/bin/"):
    sys.exit(f"expected {sys.argv[1]} with its mpirun in /opt/venv/bin")' "$expect"
  umoci repack --image "$W/oci:$name" "$b" >/dev/null
  umoci config --image "$W/oci:$name" --config.label "org.opencontainers.image.title=kubetrain-train-$name" \
    --config.label "org.opencontainers.image.description=the bed's training image with $spec in /opt/venv"
  umoci gc --layout "$W/oci"
  rm -f "$IMG/train-$name.tar.part"
  skopeo copy --quiet "oci:$W/oci:$name" "docker-archive:$IMG/train-$name.tar.part:$ref"
  mv -f "$IMG/train-$name.tar.part" "$IMG/train-$name.tar"
  echo "$ref" > "$IMG/train-$name.refs"
  rm -rf --one-file-system "$b"
  say "$ref ($spec) -> $IMG/train-$name.tar in $(( $(now) - t )) s"
  if alive containerd; then
    "$TOOL/lib/import-image.sh" "$IMG/train-$name.tar" "$IMG/train-$name.refs" \
      "${K8S_NODE_STATE:-$K8S_HOME/node}/containerd/imported-train-$name.stamp"
    say "$ref imported into the bed's containerd"
  fi
}

for target in "${targets[@]}"; do
  case $target in
    intel) build intel intel-mpi "Intel(R) MPI Library" ;;
    mpich) build mpich mpich "MPICH Version:" ;;
  esac
done
# an extra node has a containerd of its own
if [ -x "$HERE/add-node.sh" ] && "$HERE/add-node.sh" --check >/dev/null 2>&1; then "$HERE/add-node.sh" --images; fi
