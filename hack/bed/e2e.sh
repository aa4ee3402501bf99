#!/usr/bin/env bash
# Run the e2e suite against the bed (hack/bed/up.sh): `hack/bed/e2e.sh [pytest args]`, e.g.
# `hack/bed/e2e.sh tests/e2e/test_kueue.py -x`. Rebuild the operator image from this checkout first with
# `hack/bed/install-kubetrain.sh` after `images.sh project` (up.sh does both). The header printed before the
# results says what ran against what (API server, nodes, JobSet, Kueue, coscheduling, the operator's image).
source "$(dirname "$0")/lib.sh"
[ "${1:-}" = --help ] && { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
export KUBETRAIN_E2E_KUBECONFIG=${KUBETRAIN_E2E_KUBECONFIG:-$K8S_HOME/kubeconfig}
export KUBETRAIN_E2E_KUBECTL=${KUBETRAIN_E2E_KUBECTL:-$BIN/kubectl}
if [ -z "${KUBETRAIN_E2E_MANAGER_KUBECONFIG:-}" ] && [ -f "${K8S_MANAGER_HOME:-$HOME/k8s-manager}/kubeconfig" ]; then
  export KUBETRAIN_E2E_MANAGER_KUBECONFIG=${K8S_MANAGER_HOME:-$HOME/k8s-manager}/kubeconfig
fi
cd "$REPO"
[ $# -gt 0 ] || set -- tests/e2e
exec "$REPO/.venv/bin/pytest" -q "$@"
