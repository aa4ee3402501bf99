#!/usr/bin/env bash
# scheduler-plugins' Coscheduling as a second scheduler on the bed, built from a snapshot of a scheduler-plugins tree
# with vendor/ (openshift-kni/scheduler-plugins has one; kubernetes-sigs/scheduler-plugins does not and cannot build
# offline). Runs as two host processes: the scheduler (profile "scheduler-plugins-scheduler", Coscheduling on,
# leader election on its Lease in namespace scheduler-plugins, which is how the e2e suite knows it runs) and the
# PodGroup controller (PodGroup phases).
#
#   hack/bed/coscheduling.sh build --source GITDIR   # ~6-10 min on 2 cores with a cold Go cache
#   hack/bed/coscheduling.sh up | down | status
#
# Env: K8S_HOME, COSCHED_PERMIT_WAIT (Coscheduling's permitWaitingTimeSeconds, default 10),
#      COSCHED_SECURE_PORT=10269, COSCHED_PROBE_PORT=18083.
source "$(dirname "$0")/lib.sh"

SSRC=$SRC/scheduler-plugins
DIR=$BED/coscheduling
NAMESPACE=scheduler-plugins
SCHEDULER=scheduler-plugins-scheduler
SECURE_PORT=${COSCHED_SECURE_PORT:-10269}
PROBE_PORT=${COSCHED_PROBE_PORT:-18083}

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

build() {
  extract_source scheduler-plugins "${SCHEDULER_PLUGINS_REV:-HEAD}" "$@"
  [ -d "$SSRC/vendor" ] || die "$SSRC has no vendor/ directory: it cannot be built offline (use a tree that vendors its modules, e.g. openshift-kni/scheduler-plugins)"
  go_build scheduler-plugins "$SSRC" ./cmd/scheduler "$BIN/scheduler-plugins-scheduler"
  go_build scheduler-plugins "$SSRC" ./cmd/controller "$BIN/scheduler-plugins-controller"
}

up() {
  [ -x "$BIN/scheduler-plugins-scheduler" ] || die "no $BIN/scheduler-plugins-scheduler: run '$0 build --source GITDIR' first"
  local t; t=$(now)
  mkdir -p "$DIR"
  client_cert scheduler-plugins system:scheduler-plugins
  kubeconfig_for "$DIR/kubeconfig" scheduler-plugins
  k apply --server-side --force-conflicts -f "$SSRC/manifests/crds/scheduling.x-k8s.io_podgroups.yaml" >/dev/null
  k apply --server-side --force-conflicts -f "$SSRC/manifests/crds/scheduling.x-k8s.io_elasticquotas.yaml" >/dev/null
  k apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: v1
kind: Namespace
metadata: {name: $NAMESPACE}
---
# The rules of the project's own "as-a-second-scheduler" chart, for one user that both processes run as.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scheduler-plugins-bed}
rules:
- {apiGroups: [""], resources: [namespaces, replicationcontrollers, services], verbs: [get, list, watch]}
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create, get, update]}
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch, patch]}
- {apiGroups: [""], resources: [pods], verbs: [delete, get, list, watch, update]}
- {apiGroups: [""], resources: [bindings, pods/binding], verbs: [create]}
- {apiGroups: [""], resources: [pods/status], verbs: [patch, update]}
- {apiGroups: [apps, extensions], resources: [replicasets, statefulsets], verbs: [get, list, watch]}
- {apiGroups: [policy], resources: [poddisruptionbudgets], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [persistentvolumeclaims, persistentvolumes], verbs: [get, list, watch, patch, update]}
- {apiGroups: [authentication.k8s.io], resources: [tokenreviews], verbs: [create]}
- {apiGroups: [authorization.k8s.io], resources: [subjectaccessreviews], verbs: [create]}
- {apiGroups: [resource.k8s.io], resources: [deviceclasses, resourceclaims, resourceslices], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [csinodes, storageclasses, csidrivers, csistoragecapacities, volumeattachments], verbs: [get, list, watch]}
- {apiGroups: [scheduling.x-k8s.io], resources: [podgroups, elasticquotas, podgroups/status, elasticquotas/status], verbs: [get, list, watch, create, delete, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scheduler-plugins-bed}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scheduler-plugins-bed}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:scheduler-plugins"}]
EOT
  cat > "$DIR/scheduler-config.yaml" <<EOT
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $DIR/kubeconfig}
leaderElection:
  leaderElect: true
  resourceNamespace: $NAMESPACE
  resourceName: $SCHEDULER
profiles:
- schedulerName: $SCHEDULER
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: ${COSCHED_PERMIT_WAIT:-10}}
EOT
  halt scheduler-plugins-scheduler; halt scheduler-plugins-controller
  launch scheduler-plugins-scheduler "$BIN/scheduler-plugins-scheduler" --config "$DIR/scheduler-config.yaml" \
    --authentication-kubeconfig "$DIR/kubeconfig" --authorization-kubeconfig "$DIR/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SECURE_PORT" --profiling=false
  KUBECONFIG=$DIR/kubeconfig launch scheduler-plugins-controller "$BIN/scheduler-plugins-controller" \
    --metricsAddr 0 --probeAddr "127.0.0.1:$PROBE_PORT"
  wait_for "scheduler /healthz" 120 curl -skf --max-time 2 "https://127.0.0.1:$SECURE_PORT/healthz"
  wait_for "the scheduler's Lease" 120 k -n "$NAMESPACE" get lease "$SCHEDULER"
  wait_for "PodGroup controller /readyz" 120 curl -sf --max-time 2 "http://127.0.0.1:$PROBE_PORT/readyz"
  say "coscheduling ready in $(( $(now) - t )) s (logs $LOGS/scheduler-plugins-*.log)"
}

down() { halt scheduler-plugins-scheduler; halt scheduler-plugins-controller; say "coscheduling stopped"; }
status() {
  local rc=0 n
  for n in scheduler-plugins-scheduler scheduler-plugins-controller; do
    if alive "$n"; then say "$n runs (pid $(cat "$RUN/$n.pid"))"; else say "$n is not running"; rc=1; fi
  done
  return $rc
}

dispatch "$@"
