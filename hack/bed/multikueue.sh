#!/usr/bin/env bash
# MultiKueue across two clusters on this machine: a manager control plane without nodes (its own K8S_HOME and
# ports) dispatches TrainJobs to the bed, which runs them with its own Kueue and kubetrain's operator.
#
#   hack/bed/multikueue.sh up [--fresh]   # manager up (--fresh: empty etcd), its operator + Kueue, queues on both
#   hack/bed/multikueue.sh status         # processes, MultiKueueCluster/AdmissionCheck/ClusterQueue conditions
#   hack/bed/multikueue.sh down [--wipe]  # stop the manager (--wipe: its etcd data too); remove the bed's side
#
# Manager (MK_HOME, default ~/k8s-manager): shared/tools/k8s-node's start.sh without --node on other ports, its
# binaries hard-linked from the bed's bin/. It gets kubetrain's CRDs and built-in runtimes, JobSet's CRD (Kueue's
# TrainJob integration watches JobSets), kubetrain's operator as a host process (with its webhook, by URL), Kueue
# as a host process (hack/bed/kueue.sh, only the TrainJob integration) and the MultiKueue objects: a Secret with
# the worker's kubeconfig (inline certificates: Kueue refuses file paths), MultiKueueCluster, MultiKueueConfig,
# AdmissionCheck, ClusterQueue and LocalQueue MK_QUEUE in MK_NAMESPACE.
# Worker (the bed, K8S_HOME, default ~/k8s-node): needs its Kueue running (hack/bed/kueue.sh up) and kubetrain
# installed. Gets a client certificate for the manager's Kueue with the RBAC MultiKueue needs there, and the same
# ClusterQueue/LocalQueue names. The bed's Kueue is never restarted here.
# Env: MK_HOME, K8S_HOME, MK_APISERVER_PORT=7443 MK_ETCD_PORT=12379 MK_ETCD_PEER_PORT=12380 MK_KCM_PORT=11257,
#      MK_KUEUE_WEBHOOK_PORT=9543 MK_KUEUE_HEALTH_PORT=18092 MK_KUEUE_METRICS_PORT=18543,
#      MK_OPERATOR_HEALTH_PORT=18093 MK_OPERATOR_WEBHOOK_PORT=9643, MK_WORKER=bed (the MultiKueueCluster's name),
#      MK_QUEUE=multikueue (ClusterQueue and LocalQueue), MK_NAMESPACE=default, MK_CPU=8 MK_MEMORY=16Gi (quotas),
#      KUBETRAIN_PYTHON (default $REPO/.venv/bin/python; the operator runs this checkout's src/).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WORKER_HOME=$K8S_HOME
MK_HOME=${MK_HOME:-$HOME/k8s-manager}
WKC=$WORKER_HOME/kubeconfig
MKC=$MK_HOME/kubeconfig
MK_APISERVER_PORT=${MK_APISERVER_PORT:-7443}
MK_ETCD_PORT=${MK_ETCD_PORT:-12379}
MK_ETCD_PEER_PORT=${MK_ETCD_PEER_PORT:-12380}
MK_KCM_PORT=${MK_KCM_PORT:-11257}
MK_KUEUE_WEBHOOK_PORT=${MK_KUEUE_WEBHOOK_PORT:-9543}
MK_KUEUE_HEALTH_PORT=${MK_KUEUE_HEALTH_PORT:-18092}
MK_KUEUE_METRICS_PORT=${MK_KUEUE_METRICS_PORT:-18543}
MK_OPERATOR_HEALTH_PORT=${MK_OPERATOR_HEALTH_PORT:-18093}
MK_OPERATOR_WEBHOOK_PORT=${MK_OPERATOR_WEBHOOK_PORT:-9643}
MK_WORKER=${MK_WORKER:-bed}
MK_QUEUE=${MK_QUEUE:-multikueue}
MK_NAMESPACE=${MK_NAMESPACE:-default}
MK_CPU=${MK_CPU:-8}
MK_MEMORY=${MK_MEMORY:-16Gi}
PYTHON=${KUBETRAIN_PYTHON:-$REPO/.venv/bin/python}
MK_DIR=$MK_HOME/bed           # what this script generates for the manager (certificates, kubeconfigs, configs)
MK_RUN=$MK_HOME/run
MK_LOGS=$MK_HOME/logs
OPERATOR=kubetrain-operator   # the manager's operator process (pid in $MK_RUN, log in $MK_LOGS)
KUEUE=kueue-manager           # the manager's Kueue process
FLAVOR=kubetrain-multikueue   # ResourceFlavor on both clusters
CHECK=kubetrain-multikueue    # AdmissionCheck and MultiKueueConfig on the manager
WORKER_USER=kubetrain:multikueue
SECRET=$MK_WORKER-kubeconfig

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
kw() { "$KUBECTL" --kubeconfig "$WKC" "$@"; }
km() { "$KUBECTL" --kubeconfig "$MKC" "$@"; }
elapsed() { echo "$(( $(now) - $1 ))"; }
# The manager's host processes are launched with lib.sh's launch/halt/alive, pointed at the manager's run/logs.
mk_launch() { RUN=$MK_RUN LOGS=$MK_LOGS launch "$@"; }
mk_halt() { RUN=$MK_RUN halt "$@"; }
mk_alive() { RUN=$MK_RUN alive "$@"; }

guard() {
  [ "$(readlink -f "$MK_HOME")" != "$(readlink -f "$WORKER_HOME")" ] || die "MK_HOME must not be the bed's K8S_HOME ($WORKER_HOME)"
}

# The manager's home: its own pki/data/run/logs, the bed's binaries as hard links (start.sh and stop.sh check that
# a pid runs \$K8S_HOME/bin/NAME, which a symlink would not satisfy) and the bed's extracted sources (read only).
manager_home() {
  mkdir -p "$MK_HOME/bin" "$MK_DIR" "$MK_RUN" "$MK_LOGS"
  local b
  for b in etcd kube-apiserver kube-controller-manager kubectl kueue-manager; do
    [ -x "$BIN/$b" ] || die "no $BIN/$b: build the bed (shared/tools/k8s-node/build.sh) and Kueue (hack/bed/kueue.sh build)"
    [ "$MK_HOME/bin/$b" -ef "$BIN/$b" ] && continue
    ln -f "$BIN/$b" "$MK_HOME/bin/$b" 2>/dev/null || cp -f "$BIN/$b" "$MK_HOME/bin/$b"
  done
  [ -e "$MK_HOME/src" ] || ln -s "$SRC" "$MK_HOME/src"
}

manager_up() { # [--fresh]
  need_tool
  if curl -sf --max-time 2 --cacert "$MK_HOME/pki/ca.crt" -H "Authorization: Bearer $(cat "$MK_HOME/pki/admin.token" 2>/dev/null)" \
      "https://127.0.0.1:$MK_APISERVER_PORT/readyz" >/dev/null 2>&1 && [ "${1:-}" != --fresh ]; then
    say "manager control plane already up (https://127.0.0.1:$MK_APISERVER_PORT)"
    return 0
  fi
  if [ "${1:-}" = --fresh ]; then K8S_HOME=$MK_HOME "$TOOL/stop.sh" >/dev/null || true; fi
  K8S_HOME=$MK_HOME APISERVER_PORT=$MK_APISERVER_PORT ETCD_PORT=$MK_ETCD_PORT ETCD_PEER_PORT=$MK_ETCD_PEER_PORT \
    KCM_PORT=$MK_KCM_PORT unlocked "$TOOL/start.sh" --wait-controllers ${1:+"$1"}
}

# A kubeconfig with everything inline (Kueue accepts no file paths in a MultiKueueCluster's kubeconfig): the
# bed's API server and CA, and a client certificate the bed's CA signs for $WORKER_USER.
worker_kubeconfig() {
  local server
  PKI=$WORKER_HOME/pki BED=$MK_DIR/worker client_cert multikueue "$WORKER_USER"
  server=$(kw config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$MK_DIR/worker.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: $MK_WORKER, cluster: {server: "$server", certificate-authority-data: $(base64 -w0 "$WORKER_HOME/pki/ca.crt")}}]
users: [{name: $WORKER_USER, user: {client-certificate-data: $(base64 -w0 "$MK_DIR/worker/pki/multikueue.crt"), client-key-data: $(base64 -w0 "$MK_DIR/worker/pki/multikueue.key")}}]
contexts: [{name: $MK_WORKER, context: {cluster: $MK_WORKER, user: $WORKER_USER}}]
current-context: $MK_WORKER
EOT
  chmod 600 "$MK_DIR/worker.kubeconfig"
}

# What the manager's Kueue does on the worker: creates and deletes the TrainJob copies and their prebuilt Workloads,
# watches both and reads the worker's queues (Kueue's MultiKueue documentation lists these rights).
worker_rbac() {
  kw apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kubetrain-multikueue-worker}
rules:
- apiGroups: [trainer.kubeflow.org]
  resources: [trainjobs]
  verbs: [create, delete, get, list, watch]
- apiGroups: [trainer.kubeflow.org]
  resources: [trainjobs/status]
  verbs: [get]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [create, delete, get, list, watch, update, patch]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [get, update, patch]
- apiGroups: [kueue.x-k8s.io]
  resources: [clusterqueues, localqueues]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubetrain-multikueue-worker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubetrain-multikueue-worker}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "$WORKER_USER"}]
EOT
}

# queues KUBECTL_FN [ADMISSION_CHECK]: ResourceFlavor, ClusterQueue $MK_QUEUE (with the check on the manager) and
# LocalQueue $MK_QUEUE in $MK_NAMESPACE, the same names on both clusters as MultiKueue expects.
queues() {
  local kc=$1 check=${2:-} checks=""
  [ -n "$check" ] && checks="admissionChecksStrategy: {admissionChecks: [{name: $check}]}"
  "$kc" apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $FLAVOR}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $MK_QUEUE}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: $FLAVOR
      resources: [{name: cpu, nominalQuota: "$MK_CPU"}, {name: memory, nominalQuota: "$MK_MEMORY"}]
  $checks
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $MK_QUEUE, namespace: $MK_NAMESPACE}
spec: {clusterQueue: $MK_QUEUE}
EOT
}

multikueue_objects() {
  km create secret generic "$SECRET" -n kueue-system --from-file=kubeconfig="$MK_DIR/worker.kubeconfig" \
    --dry-run=client -o yaml | km apply --server-side --force-conflicts -f - >/dev/null
  km apply --server-side --force-conflicts -f - >/dev/null <<EOT
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: $MK_WORKER}
spec: {clusterSource: {kubeConfig: {locationType: Secret, location: $SECRET}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: $CHECK}
spec: {clusters: [$MK_WORKER]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: $CHECK}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: $CHECK}
EOT
  queues km "$CHECK"
}

operator_up() {
  [ -x "$PYTHON" ] || die "no Python at $PYTHON: set KUBETRAIN_PYTHON to the environment kubetrain is installed in"
  local certs=$MK_DIR/kubetrain-webhook
  # The API server calls the webhook at 127.0.0.1: a certificate the manager's CA signs, so the operator must not
  # make its own (KUBETRAIN_WEBHOOK_CERT_MODE=cert-manager: it only loads the files).
  PKI=$MK_HOME/pki serving_cert "$certs"
  km create namespace kubeflow-system --dry-run=client -o yaml | km apply --server-side -f - >/dev/null
  if mk_alive "$OPERATOR"; then mk_halt "$OPERATOR"; fi
  KUBETRAIN_WEBHOOK_CERT_MODE=cert-manager PYTHONPATH="$REPO/src" mk_launch "$OPERATOR" "$PYTHON" -m kubetrain.cli.main \
    operator --kubeconfig "$MKC" --lease-namespace kubeflow-system --health-port "$MK_OPERATOR_HEALTH_PORT" \
    --status-port -1 --webhook-port "$MK_OPERATOR_WEBHOOK_PORT" --webhook-cert-dir "$certs" --log-format text
  wait_for "manager operator /readyz" 120 curl -sf --max-time 2 "http://127.0.0.1:$MK_OPERATOR_HEALTH_PORT/readyz"
  python3 "$HERE/webhooks_by_url.py" "$REPO/manifests/base/webhook/mutating.yaml" \
    "https://127.0.0.1:$MK_OPERATOR_WEBHOOK_PORT" "$MK_HOME/pki/ca.crt" "" > "$MK_DIR/kubetrain-webhooks.yaml"
  echo --- >> "$MK_DIR/kubetrain-webhooks.yaml"
  python3 "$HERE/webhooks_by_url.py" "$REPO/manifests/base/webhook/validating.yaml" \
    "https://127.0.0.1:$MK_OPERATOR_WEBHOOK_PORT" "$MK_HOME/pki/ca.crt" "" >> "$MK_DIR/kubetrain-webhooks.yaml"
  km apply --server-side --force-conflicts -f "$MK_DIR/kubetrain-webhooks.yaml" >/dev/null
}

kueue_up() {
  # kueue.sh with the manager as its home (its CA signs Kueue's client and webhook certificates) and cluster.
  K8S_HOME=$MK_HOME KUEUE_KUBECONFIG=$MKC KUEUE_NAME=$KUEUE KUEUE_WEBHOOK_PORT=$MK_KUEUE_WEBHOOK_PORT \
    KUEUE_HEALTH_PORT=$MK_KUEUE_HEALTH_PORT KUEUE_METRICS_PORT=$MK_KUEUE_METRICS_PORT \
    KUEUE_FRAMEWORKS="trainer.kubeflow.org/trainjob" KUEUE_EXTRA_CONFIG="multiKueue: {origin: kubetrain-manager, gcInterval: 30s}" \
    "$HERE/kueue.sh" up
}

condition() { # KUBECTL_FN KIND NAME TYPE -> prints the condition's status (empty if none)
  "$1" get "$2" "$3" -o jsonpath="{.status.conditions[?(@.type==\"$4\")].status}" 2>/dev/null
}
active() { [ "$(condition "$@")" = True ]; }

up() {
  local fresh="" t t0
  for a in "$@"; do case $a in --fresh) fresh=--fresh ;; *) die "up: unknown argument $a" ;; esac; done
  guard; need_tool
  t0=$(now)
  kw get --raw /readyz >/dev/null 2>&1 || die "the bed ($WKC) does not answer: start it first (shared/tools/k8s-node)"
  kw get crd trainjobs.trainer.kubeflow.org >/dev/null 2>&1 || die "kubetrain is not installed on the bed (docs/operator.md, 'The e2e suite')"
  kw get crd multikueueclusters.kueue.x-k8s.io >/dev/null 2>&1 && curl -sf --max-time 2 "http://127.0.0.1:${KUEUE_HEALTH_PORT:-18082}/readyz" >/dev/null \
    || die "the bed's Kueue is not running: hack/bed/kueue.sh up (hold /root/bedlogs/bed.lock on a shared bed)"

  t=$(now); manager_home; manager_up $fresh; say "manager control plane: $(elapsed "$t") s"
  t=$(now)
  km apply --server-side --force-conflicts -k "$REPO/manifests/base/crds" >/dev/null
  km apply --server-side --force-conflicts -f "$SRC/jobset/config/components/crd/bases" >/dev/null
  km wait --for condition=Established --timeout=60s crd/trainjobs.trainer.kubeflow.org \
    crd/clustertrainingruntimes.trainer.kubeflow.org crd/jobsets.jobset.x-k8s.io >/dev/null
  km apply --server-side --force-conflicts -k "$REPO/manifests/overlays/runtimes" >/dev/null
  say "manager CRDs (kubetrain, JobSet) and built-in runtimes: $(elapsed "$t") s"
  t=$(now); operator_up; say "manager operator ready: $(elapsed "$t") s (log $MK_LOGS/$OPERATOR.log)"
  t=$(now); kueue_up; say "manager Kueue ready: $(elapsed "$t") s"

  t=$(now)
  worker_rbac; worker_kubeconfig; queues kw
  multikueue_objects
  wait_for "MultiKueueCluster $MK_WORKER Active" 120 active km multikueuecluster "$MK_WORKER" Active
  wait_for "AdmissionCheck $CHECK Active" 60 active km admissioncheck "$CHECK" Active
  wait_for "manager ClusterQueue $MK_QUEUE Active" 60 active km clusterqueue "$MK_QUEUE" Active
  wait_for "worker ClusterQueue $MK_QUEUE Active" 60 active kw clusterqueue "$MK_QUEUE" Active
  say "MultiKueue connected to $MK_WORKER: $(elapsed "$t") s"
  say "up in $(elapsed "$t0") s. Manager: KUBECONFIG=$MKC; worker: $WKC; TrainJobs labelled kueue.x-k8s.io/queue-name=$MK_QUEUE in $MK_NAMESPACE run on $MK_WORKER"
}

down() {
  local wipe=""
  for a in "$@"; do case $a in --wipe) wipe=--wipe ;; *) die "down: unknown argument $a" ;; esac; done
  guard
  local t; t=$(now)
  K8S_HOME=$MK_HOME KUEUE_KUBECONFIG=$MKC KUEUE_NAME=$KUEUE "$HERE/kueue.sh" down >/dev/null 2>&1 || true
  mk_halt "$OPERATOR"
  # The bed's side: what up added there (TrainJobs on the bed that MultiKueue made are left to their owners).
  kw delete --ignore-not-found localqueue "$MK_QUEUE" -n "$MK_NAMESPACE" >/dev/null 2>&1 || true
  kw delete --ignore-not-found clusterqueue "$MK_QUEUE" >/dev/null 2>&1 || true
  kw delete --ignore-not-found resourceflavor "$FLAVOR" >/dev/null 2>&1 || true
  kw delete --ignore-not-found clusterrolebinding,clusterrole kubetrain-multikueue-worker >/dev/null 2>&1 || true
  K8S_HOME=$MK_HOME "$TOOL/stop.sh" $wipe
  say "down in $(elapsed "$t") s"
}

status() {
  local rc=0 p
  for p in etcd kube-apiserver kube-controller-manager "$OPERATOR" "$KUEUE"; do
    if mk_alive "$p"; then say "$p runs (pid $(cat "$MK_RUN/$p.pid"))"; else say "$p is not running"; rc=1; fi
  done
  [ $rc = 0 ] || return $rc
  say "MultiKueueCluster $MK_WORKER Active=$(condition km multikueuecluster "$MK_WORKER" Active)" \
    "$(km get multikueuecluster "$MK_WORKER" -o jsonpath='{.status.conditions[?(@.type=="Active")].message}')"
  say "AdmissionCheck $CHECK Active=$(condition km admissioncheck "$CHECK" Active)"
  say "ClusterQueue $MK_QUEUE Active: manager=$(condition km clusterqueue "$MK_QUEUE" Active) worker=$(condition kw clusterqueue "$MK_QUEUE" Active)"
  say "manager: KUBECONFIG=$MKC (https://127.0.0.1:$MK_APISERVER_PORT)"
}

# Sourced (to run one step by hand), it only defines the steps.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
case ${1:-} in
  up) shift; up "$@" ;;
  down) shift; down "$@" ;;
  status) status ;;
  -h|--help|help|"") usage ;;
  *) die "unknown command $1 (up, down, status)" ;;
esac
