#!/usr/bin/env bash
# One command: the e2e bed with every part, from source snapshots (bare git directories of public repositories).
#
#   hack/bed/up.sh [--fresh] [--skip PART]...
#
# Parts, in order (each is skipped with a note when its source is not given and it was never built):
#   cluster       shared/tools/k8s-node: build.sh (sources MICROSHIFT_GIT JOBSET_GIT COREDNS_GIT CRI_TOOLS_GIT),
#                 images.sh (pause, training image, this checkout's operator image), start.sh --node
#   kubetrain     installed from this checkout as docs/install.md says (manager, then runtimes)
#   kueue         hack/bed/kueue.sh (KUEUE_GIT: kubernetes-sigs/kueue)
#   coscheduling  hack/bed/coscheduling.sh (SCHEDULER_PLUGINS_GIT: a scheduler-plugins tree with vendor/)
#   node2         hack/bed/add-node.sh: a second kubelet, when that script is present
#   multikueue    hack/bed/multikueue.sh: a manager control plane for MultiKueue, when that script is present
#   mpi-images    hack/bed/mpi-images.sh: the training image with Intel MPI / with MPICH, each when it is missing
#                 (~5 min each the first time; run that script again after a change of their pins)
# Then `hack/bed/e2e.sh` runs the suite against it.
#
# Time on 2 cores: 60-90 min the first time on a shared machine (Kubernetes from source ~25-45 min, Kueue ~25,
# scheduler-plugins ~10, images ~10, MPI images ~10); ~2 min when everything is built (start, install, Kueue,
# coscheduling).
source "$(dirname "$0")/lib.sh"

FRESH=""; SKIP=" "
while [ $# -gt 0 ]; do
  case $1 in
    --fresh) FRESH=--fresh; shift ;;
    --skip) SKIP="$SKIP$2 "; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--fresh, --skip PART)" ;;
  esac
done
wants() { [[ $SKIP != *" $1 "* ]]; }
T0=$(now)
step() { say "== $1 ($(( $(now) - T0 )) s)"; }
need_tool

if wants cluster; then
  step cluster
  if [ ! -x "$BIN/kube-apiserver" ] || [ -n "${MICROSHIFT_GIT:-}" ]; then
    "$TOOL/build.sh" --apt
  fi
  image=$(awk '/image:/ {print $2; exit}' "$REPO/manifests/base/operator/deployment.yaml")
  { [ -f "$K8S_HOME/images/train.tar" ] && [ -f "$K8S_HOME/images/pause.tar" ]; } || "$TOOL/images.sh" pause train
  if ! alive kubelet; then
    # start.sh checks each component's executable right after starting it; on a busy machine a component can be
    # still between fork and exec then (a tool race: "exited during startup" with an empty log), so once more
    unlocked "$TOOL/start.sh" --node $FRESH ||
      { say "start.sh failed; starting the cluster once more"; unlocked "$TOOL/start.sh" --node $FRESH; }
  fi
  (cd "$REPO" && "$TOOL/images.sh" project --project "$REPO" --tag "$image")
fi

# A cluster started with its data kept still has the webhooks of a Kueue that no longer runs: they would refuse
# every create they match (the operator's Deployment included) until Kueue is back, so they go first.
if ! alive "${KUEUE_NAME:-kueue}"; then "$HERE/kueue.sh" down >/dev/null; fi

if wants kubetrain; then
  step kubetrain
  "$HERE/install-kubetrain.sh"
fi

if wants kueue; then
  step kueue
  if [ -n "${KUEUE_GIT:-}" ] || [ ! -x "$BIN/kueue-manager" ]; then
    if [ -n "${KUEUE_GIT:-}" ] || [ -d "$SRC/kueue" ]; then "$HERE/kueue.sh" build ${KUEUE_GIT:+--source "$KUEUE_GIT"}; fi
  fi
  if [ -x "$BIN/kueue-manager" ]; then "$HERE/kueue.sh" up; else say "kueue: skipped (set KUEUE_GIT)"; fi
fi

if wants coscheduling; then
  step coscheduling
  if [ -n "${SCHEDULER_PLUGINS_GIT:-}" ] || [ ! -x "$BIN/scheduler-plugins-scheduler" ]; then
    if [ -n "${SCHEDULER_PLUGINS_GIT:-}" ] || [ -d "$SRC/scheduler-plugins" ]; then
      "$HERE/coscheduling.sh" build ${SCHEDULER_PLUGINS_GIT:+--source "$SCHEDULER_PLUGINS_GIT"}
    fi
  fi
  if [ -x "$BIN/scheduler-plugins-scheduler" ]; then "$HERE/coscheduling.sh" up
  else say "coscheduling: skipped (set SCHEDULER_PLUGINS_GIT)"; fi
fi

if wants node2 && [ -x "$HERE/add-node.sh" ]; then step node2; "$HERE/add-node.sh"; fi
if wants multikueue && [ -x "$HERE/multikueue.sh" ]; then step multikueue; "$HERE/multikueue.sh" up; fi
if wants mpi-images; then
  step mpi-images
  missing=()
  for i in intel mpich; do [ -f "$K8S_HOME/images/train-$i.tar" ] || missing+=("$i"); done
  if [ ${#missing[@]} -gt 0 ]; then "$HERE/mpi-images.sh" "${missing[@]}"; else say "mpi-images: already built"; fi
fi

say "bed up in $(( $(now) - T0 )) s: export KUBECONFIG=$K8S_HOME/kubeconfig; hack/bed/e2e.sh runs the suite"
