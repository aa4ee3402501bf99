#!/usr/bin/env bash
# kubetrain on the bed from this checkout, as docs/install.md says: the operator image is built by the bed's tool
# (up.sh does it), then the manager (CRDs, operator, RBAC, webhook), the CRDs Established, the runtimes; then a
# rollout restart so the operator runs the image just built, and wait until it leads and its webhook answers.
source "$(dirname "$0")/lib.sh"
[ "${1:-}" = --help ] && { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
t=$(now)
cd "$REPO"
k apply --server-side --force-conflicts -k manifests/overlays/manager >/dev/null
k wait --for condition=Established --timeout=60s crd/clustertrainingruntimes.trainer.kubeflow.org >/dev/null
k apply --server-side --force-conflicts -k manifests/overlays/runtimes >/dev/null
k -n kubeflow-system rollout restart deployment/kubetrain-operator >/dev/null
k -n kubeflow-system rollout status deployment/kubetrain-operator --timeout=300s >/dev/null
say "kubetrain installed and rolled out in $(( $(now) - t )) s"
