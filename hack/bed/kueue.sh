#!/usr/bin/env bash
# Kueue on the bed, built from a snapshot of kubernetes-sigs/kueue (its vendor/ makes the build offline) and run as a
# host process next to the bed's JobSet controller, with its webhooks registered by URL.
#
#   hack/bed/kueue.sh build --source GITDIR   # extract + go build -mod=vendor ./cmd/kueue  (~4-6 min on 2 cores)
#   hack/bed/kueue.sh up                      # CRDs, RBAC, webhooks, Configuration; start; wait ready
#   hack/bed/kueue.sh down                    # stop the process and remove its webhooks (CRDs and objects stay)
#   hack/bed/kueue.sh status
#
# Integrations: Kueue's defaults, i.e. trainer.kubeflow.org/trainjob *and* jobset.x-k8s.io/jobset (a TrainJob must
# still get exactly one Workload). waitForPodsReady is on (timeout KUEUE_PODS_READY_TIMEOUT, default 60s) so the
# e2e suite can see Kueue read PodsReady from a TrainJob's status (KUEUE_PODS_READY=off leaves it out, as a default
# Kueue install has it).
# Env: K8S_HOME (the bed), KUEUE_WEBHOOK_PORT=9443, KUEUE_HEALTH_PORT=18082, KUEUE_METRICS_PORT=18443,
#      KUEUE_KUBECONFIG (another cluster, e.g. MultiKueue's manager), KUEUE_NAME (process name, default kueue),
#      KUEUE_EXTRA_CONFIG (YAML appended to the Configuration), KUEUE_FEATURE_GATES,
#      KUEUE_FRAMEWORKS (space-separated integrations; default "batch/job jobset.x-k8s.io/jobset
#      trainer.kubeflow.org/trainjob", e.g. "batch/job jobset.x-k8s.io/jobset" for a Kueue older than v0.14).
source "$(dirname "$0")/lib.sh"

NAME=${KUEUE_NAME:-kueue}
WEBHOOK_PORT=${KUEUE_WEBHOOK_PORT:-9443}
HEALTH_PORT=${KUEUE_HEALTH_PORT:-18082}
METRICS_PORT=${KUEUE_METRICS_PORT:-18443}
TARGET_KUBECONFIG=${KUEUE_KUBECONFIG:-$K8S_HOME/kubeconfig}
DIR=$BED/$NAME
KSRC=$SRC/kueue
kt() { "$KUBECTL" --kubeconfig "$TARGET_KUBECONFIG" "$@"; }

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

build() {
  extract_source kueue "${KUEUE_REV:-HEAD}" "$@"
  # The chart's appVersion is the last release; a snapshot of main is that plus the commit.
  local version commit; commit=$(cat "$KSRC/.commit")
  version=$(sed -n 's/^appVersion: "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$KSRC/charts/kueue/Chart.yaml")
  go_build kueue "$KSRC" ./cmd/kueue "$BIN/kueue-manager" \
    "-X sigs.k8s.io/kueue/pkg/version.GitCommit=$commit -X sigs.k8s.io/kueue/pkg/version.GitVersion=${version:-v0.0.0}-main+${commit:0:12}"
}

up() {
  [ -x "$BIN/kueue-manager" ] || die "no $BIN/kueue-manager: run '$0 build --source GITDIR' first"
  local t; t=$(now)
  mkdir -p "$DIR"
  client_cert kueue system:kueue
  kubeconfig_for "$DIR/kubeconfig" kueue "$(kt config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  serving_cert "$DIR/webhook-certs"
  # Kueue reads its metrics certificate from this fixed path when it does not manage certificates itself.
  serving_cert /etc/kueue/metrics/certs

  kt apply --server-side --force-conflicts -f "$KSRC/config/components/crd/bases" >/dev/null
  kt create namespace kueue-system --dry-run=client -o yaml | kt apply --server-side -f - >/dev/null
  sed 's/name: manager-role/name: kueue-manager-role/' "$KSRC/config/components/rbac/role.yaml" \
    | kt apply --server-side --force-conflicts -f - >/dev/null
  kt apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kueue-manager-rolebinding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kueue-manager-role}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kueue"}]
EOT
  # Kueue caches Secrets in its own namespace (MultiKueue's worker kubeconfigs, on by default). Without this Role
  # that cache never syncs and Kueue exits two minutes after its start ("Could not wait for Cache to sync").
  kt apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kueue-manager-secrets, namespace: kueue-system}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get, list, update, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kueue-manager-secrets, namespace: kueue-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kueue-manager-secrets}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kueue"}]
EOT
  # v1beta1 and v1beta2 differ: the API server converts through Kueue's /convert, as Kueue's own install does.
  local cab patch crd; cab=$(base64 -w0 "$PKI/ca.crt")
  for patch in "$KSRC"/config/components/crd/patches/webhook_in_*.yaml; do
    grep -qxF -- "- path: patches/$(basename "$patch")" "$KSRC/config/components/crd/kustomization.yaml" || continue
    crd=$(sed -n 's/^  name: //p' "$patch" | head -1)
    kt patch crd "$crd" --type merge -p "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"url\":\"https://127.0.0.1:$WEBHOOK_PORT/convert\",\"caBundle\":\"$cab\"}}}}}" >/dev/null
  done
  python3 "$HERE/webhooks_by_url.py" "$KSRC/config/components/webhook/manifests.yaml" \
    "https://127.0.0.1:$WEBHOOK_PORT" "$PKI/ca.crt" "kueue-" > "$DIR/webhooks.yaml"
  kt wait --for condition=Established --timeout=60s -f "$KSRC/config/components/crd/bases" >/dev/null

  cat > "$DIR/config.yaml" <<EOT
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$HEALTH_PORT"}
metrics: {bindAddress: "127.0.0.1:$METRICS_PORT"}
webhook: {host: 127.0.0.1, port: $WEBHOOK_PORT, certDir: $DIR/webhook-certs}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
clientConnection: {qps: 300, burst: 500}
$( [ "${KUEUE_PODS_READY:-on}" = off ] || printf '%s\n' "waitForPodsReady:" \
  "  timeout: ${KUEUE_PODS_READY_TIMEOUT:-60s}" "  blockAdmission: false" \
  "  requeuingStrategy: {timestamp: Eviction, backoffBaseSeconds: 5, backoffMaxSeconds: 30}" )
integrations:
  frameworks: [$(echo "${KUEUE_FRAMEWORKS:-batch/job jobset.x-k8s.io/jobset trainer.kubeflow.org/trainjob}" | sed 's/ /, /g')]
${KUEUE_EXTRA_CONFIG:-}
EOT
  if alive "$NAME"; then halt "$NAME"; fi
  launch "$NAME" "$BIN/kueue-manager" --config "$DIR/config.yaml" --kubeconfig "$DIR/kubeconfig" \
    --feature-gates "VisibilityOnDemand=false${KUEUE_FEATURE_GATES:+,$KUEUE_FEATURE_GATES}" --zap-log-level="${KUEUE_LOG_LEVEL:-info}"
  wait_for "$NAME /readyz" 120 curl -sf --max-time 2 "http://127.0.0.1:$HEALTH_PORT/readyz"
  # Both versions answer once its conversion webhook does.
  wait_for "$NAME's conversion webhook" 60 kt get clusterqueues.v1beta1.kueue.x-k8s.io
  alive "$NAME" || die "$NAME exited: see $LOGS/$NAME.log"
  # The webhooks only once the server answers, so no create is refused in between.
  kt apply --server-side --force-conflicts -f "$DIR/webhooks.yaml" >/dev/null
  say "$NAME ready in $(( $(now) - t )) s (pid $(cat "$RUN/$NAME.pid"), log $LOGS/$NAME.log)"
}

down() {
  [ -f "$DIR/webhooks.yaml" ] && kt delete --ignore-not-found -f "$DIR/webhooks.yaml" >/dev/null 2>&1 || true
  halt "$NAME"
  say "$NAME stopped"
}

status() {
  if alive "$NAME"; then say "$NAME runs (pid $(cat "$RUN/$NAME.pid"))"; else say "$NAME is not running"; return 1; fi
}

dispatch "$@"
