#!/usr/bin/env bash
# Add a second node to the bed (shared/tools/k8s-node, started with start.sh --node): one more kubelet, with a
# containerd of its own, on this machine. Idempotent: run it again to repair or restart what is down (after the
# bed's start.sh, which rebuilds the iptables guard without this node's bridge, run it again).
#
#   hack/bed/add-node.sh [--index N] [--no-taint]
#   hack/bed/add-node.sh --check        # say what runs; exit 0 only if the node is Ready
#   hack/bed/add-node.sh --images       # only import the bed's new or rebuilt images into the node's containerd
#   hack/bed/remove-node.sh             # the reverse (see its --help)
#
# What node N (default 2) gets (hack/bed/_node.sh; each can be overridden by env NODE2_*):
#   * containerd (/usr/bin/containerd, the bed's 1.6) with its own config, root ($K8S_HOME/nodeN/containerd),
#     state and socket (/run/containerd-nodeN/containerd.sock) and runc root; the bed's images
#     ($K8S_HOME/images/*.tar: pause, training image, operator image) imported into it, again when a tar is newer
#   * bridge CNI on cniN-1 with pod CIDR 10.244.(N-1).0/24 and host-local IPAM of its own; address 10.201.0.N on lo
#   * a kubelet named <main node>-N: root dir, pod log dir, cert dir under $K8S_HOME/nodeN, healthz port
#     10248+100*(N-1), cgroup root /kt-nodeN; credentials: a client certificate CN=system:node:<name>,
#     O=system:nodes signed by the bed's CA (the API server trusts it already: no restart)
#   * the bed's iptables guard told about the bridge (pods reach the API server and each other) and the address
#     (dropped on real interfaces like the bed's own)
#   * taint bed.kubetrain.io/extra-node=true:NoSchedule (unless --no-taint) and label
#     bed.kubetrain.io/extra-node=N: only pods that tolerate the taint run there, so the shared bed's other
#     users (and the operator) keep to the main node. Tolerate it with
#       tolerations: [{key: bed.kubetrain.io/extra-node, operator: Exists, effect: NoSchedule}]
# No kube-proxy: the bed's one kube-proxy already programs the iptables of the network namespace both nodes share;
# a second one would rewrite the same KUBE-* chains from another node's point of view. CoreDNS (10.201.0.1) and
# the JobSet controller serve both nodes.
# Limits: both kubelets share the machine (each reports all its CPUs and memory) and the kubelet's fixed
# /var/lib/kubelet/device-plugins (no device plugins here); the bed's kube-proxy has clusterCIDR 10.244.0.0/24, so
# this node's pods reach ClusterIP Services masqueraded (headless Services, pod IPs and DNS are direct); an image
# the bed rebuilds (images.sh) reaches this node only when add-node.sh runs again (--images does only that).
# Needs root and the bed up. On a shared bed hold its lock: flock /root/bedlogs/bed.lock hack/bed/add-node.sh
source "$(dirname "$0")/_node.sh"

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }
INDEX=2; TAINT=1; CHECK=0; IMAGES=0
while [ $# -gt 0 ]; do
  case $1 in
    --index) INDEX=${2:-}; shift 2 ;;
    --index=*) INDEX=${1#*=}; shift ;;
    --no-taint) TAINT=0; shift ;;
    --check) CHECK=1; shift ;;
    --images) IMAGES=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$PROG: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
node_vars "$INDEX"

node_ready() {
  [ "$($KUBECTL get node "$N_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# Each archive the bed imported ($K8S_HOME/images: images.sh, mpi-images.sh), again when it is newer than this
# node's last import of it.
import_images() {
  local have refs name tar stamp need t primary ref
  have=$($CTR images ls -q)
  for refs in "$K8S_HOME"/images/*.refs; do
    [ -f "$refs" ] || continue
    name=$(basename "$refs" .refs); tar=$K8S_HOME/images/$name.tar; stamp=$N_STATE/containerd/imported-$name.stamp
    [ -f "$tar" ] || continue
    need=0
    while read -r ref; do [ -z "$ref" ] || grep -qxF "$ref" <<< "$have" || need=1; done < "$refs"
    { [ -f "$stamp" ] && ! [ "$tar" -nt "$stamp" ]; } || need=1
    [ $need = 1 ] || continue
    t=$(now)
    primary=$(head -n1 "$refs")
    $CTR images import "$tar" >/dev/null
    # grep reads all of it: with pipefail, an early `grep -q` kills ctr with SIGPIPE and fails a found image
    $CTR images ls -q | grep -xF "$primary" >/dev/null || die "$primary not found after importing $tar"
    tail -n +2 "$refs" | while read -r r; do [ -z "$r" ] || $CTR images tag --force "$primary" "$r" >/dev/null; done
    touch -r "$tar" "$stamp"
    say "imported $(paste -sd' ' "$refs") in $(since "$t") s"
  done
}

if [ $IMAGES = 1 ]; then
  alive containerd || die "$N_TAG's containerd is not running: run $PROG without --images"
  import_images
  exit 0
fi

if [ $CHECK = 1 ]; then
  rc=0
  for c in containerd kubelet; do
    if p=$(pid_of $c); then say "$N_TAG $c: running (pid $p)"; else say "$N_TAG $c: not running"; rc=1; fi
  done
  if node_ready; then say "node $N_NAME: Ready"; else say "node $N_NAME: not Ready"; rc=1; fi
  exit $rc
fi

T0=$(now)
[ "$(id -u)" = 0 ] || die "must run as root (containerd, a kubelet, iptables, cgroups)"
for b in kubelet kubectl crictl; do [ -x "$BIN/$b" ] || die "missing $BIN/$b: build the bed first (shared/tools/k8s-node)"; done
for b in /usr/bin/containerd /usr/sbin/runc /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/portmap; do
  [ -x "$b" ] || die "missing $b (the bed's Debian packages: containerd runc containernetworking-plugins)"
done
[ -f "$PKI/ca.key" ] || die "no $PKI/ca.key: the bed's PKI (gen-pki.sh) is missing"
$KUBECTL get --raw /readyz >/dev/null 2>&1 || die "the bed's API server does not answer: start the bed first (start.sh --node)"
[ "$N_NAME" != "$MAIN_NODE" ] || die "node name $N_NAME is the main node's"
mkdir -p "$RUN" "$LOGS" "$N_ETC" "$N_STATE"/{containerd,kubelet,cni/net.d,cni/ipam,pod-logs,pki}
say "node $N_NAME: $N_IP, pods $N_POD_CIDR on $N_BRIDGE, containerd $N_SOCK, state $N_STATE"

# --- credentials: client certificate signed by the bed's CA (the API server has --client-ca-file pki/ca.crt) ---
cert=$N_STATE/pki/kubelet-client.crt key=$N_STATE/pki/kubelet-client.key
subject="/O=system:nodes/CN=system:node:$N_NAME"
if ! [ -f "$cert" ] || ! openssl x509 -in "$cert" -noout -subject -nameopt compat 2>/dev/null | grep -qF "$subject" ||
   ! openssl verify -CAfile "$PKI/ca.crt" "$cert" >/dev/null 2>&1; then
  (
    umask 077; cd "$N_STATE/pki"
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > client.ext
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out client.csr -subj "$subject" 2>/dev/null
    openssl x509 -req -in client.csr -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -CAserial client.srl \
      -out kubelet-client.crt -days 3650 -extfile client.ext 2>/dev/null
    rm -f client.csr client.ext client.srl
  )
  say "client certificate $subject signed by the bed's CA"
fi
server=$($KUBECTL config view --minify -o jsonpath='{.clusters[0].cluster.server}')
(
  umask 077
  cat > "$N_ETC/kubelet.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: bed
  cluster: {server: "$server", certificate-authority: "$PKI/ca.crt"}
users:
- name: "system:node:$N_NAME"
  user: {client-certificate: "$cert", client-key: "$key"}
contexts:
- name: node
  context: {cluster: bed, user: "system:node:$N_NAME"}
current-context: node
EOT
)

# --- network: address on lo, guard rules; cgroups ---
ip -4 addr show dev lo | grep -q " $N_IP/32" || ip addr add "$N_IP/32" dev lo
[ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || die "ip_forward is off: the bed's network is not set up (start.sh --node)"
guard_rules add
cgroups_make

# --- configs (rewritten on every run) ---
cat > "$N_ETC/containerd.toml" <<EOT
# containerd of bed node $N_NAME (hack/bed/add-node.sh); the main node's is $K8S_HOME/etc/node/containerd.toml
version = 2
root = "$N_STATE/containerd/root"
state = "$N_RUNDIR"
[grpc]
  address = "$N_SOCK"
[ttrpc]
  address = "$N_SOCK.ttrpc"
[debug]
  level = "info"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/pause:3.10"
    enable_selinux = false
    restrict_oom_score_adj = true
    max_container_log_line_size = 16384
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      discard_unpacked_layers = false
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = "$N_RUNDIR/runc"
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$N_STATE/cni/net.d"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
  [plugins."io.containerd.internal.v1.opt"]
    path = "$N_STATE/containerd/opt"
EOT
cat > "$N_STATE/cni/net.d/10-bridge.conflist" <<EOT
{
  "cniVersion": "1.0.0",
  "name": "k8s-$N_TAG-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$N_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$N_STATE/cni/ipam",
        "ranges": [[{"subnet": "$N_POD_CIDR", "gateway": "$N_POD_GW"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT
taints="[]"
[ $TAINT = 1 ] && taints="[{key: $TAINT_KEY, value: \"true\", effect: NoSchedule}]"
cat > "$N_ETC/kubelet-config.yaml" <<EOT
# kubelet of bed node $N_NAME (hack/bed/add-node.sh): the main node's settings (shared/tools/k8s-node/lib/node.sh)
# with this node's address, ports, runtime, cgroup root and pod log dir
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $N_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $N_HEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 2m0s}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 5m0s, cacheUnauthorizedTTL: 30s}
containerRuntimeEndpoint: unix://$N_SOCK
cgroupDriver: cgroupfs
cgroupRoot: $N_CGROUP
failCgroupV1: false
failSwapOn: false
clusterDNS: [10.201.0.1]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podCIDR: $N_POD_CIDR
# its own: each kubelet removes the log dirs of pods it does not know
podLogsDir: $N_STATE/pod-logs
maxPods: 110
registerNode: true
registerWithTaints: $taints
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
nodeStatusReportFrequency: 1m0s
nodeStatusUpdateFrequency: 10s
syncFrequency: 30s
fileCheckFrequency: 20s
oomScoreAdj: 0
rotateCertificates: false
serverTLSBootstrap: false
streamingConnectionIdleTimeout: 30m0s
shutdownGracePeriod: 0s
logging: {format: text}
EOT

# --- containerd ---
t=$(now)
if ! alive containerd; then
  if [ -S "$N_SOCK" ] && ctr --address "$N_SOCK" version >/dev/null 2>&1; then
    die "another containerd serves $N_SOCK but run/$N_TAG-containerd.pid does not name it; stop it first"
  fi
  spawn containerd --config "$N_ETC/containerd.toml"
  for _ in $(seq 300); do ctr --address "$N_SOCK" version >/dev/null 2>&1 && break; alive containerd || break; sleep 0.1; done
  ctr --address "$N_SOCK" version >/dev/null 2>&1 || { tail -n 20 "$LOGS/$N_TAG-containerd.log" >&2; die "containerd did not start"; }
  say "containerd ready in $(since "$t") s (pid $(pid_of containerd))"
else
  say "containerd already running (pid $(pid_of containerd))"
fi

import_images
$CTR images ls -q | grep -xF localhost/pause:3.10 >/dev/null || die "no localhost/pause:3.10 in $N_TAG's containerd (run the bed's images.sh pause)"

# --- kubelet ---
t=$(now)
if ! alive kubelet; then
  spawn kubelet --config "$N_ETC/kubelet-config.yaml" --kubeconfig "$N_ETC/kubelet.kubeconfig" \
    --hostname-override "$N_NAME" --node-ip "$N_IP" --node-labels "$LABEL_KEY=$IDX" \
    --root-dir "$N_STATE/kubelet" --cert-dir "$N_STATE/kubelet/pki" -v="${K8S_VERBOSITY:-1}"
  started=1
else
  started=0
  say "kubelet already running (pid $(pid_of kubelet))"
fi
deadline=$(( $(date +%s) + ${START_TIMEOUT:-120} ))
until curl -sf --max-time 2 "http://127.0.0.1:$N_HEALTHZ/healthz" >/dev/null 2>&1; do
  alive kubelet || { tail -n 30 "$LOGS/$N_TAG-kubelet.log" >&2; die "the kubelet exited during startup (log: $LOGS/$N_TAG-kubelet.log)"; }
  [ "$(date +%s)" -lt "$deadline" ] || die "kubelet healthz not ready in time (log: $LOGS/$N_TAG-kubelet.log)"
  sleep 0.2
done
[ $started = 1 ] && say "kubelet healthy in $(since "$t") s (pid $(pid_of kubelet))"
until node_ready; do
  alive kubelet || die "the kubelet exited (log: $LOGS/$N_TAG-kubelet.log)"
  [ "$(date +%s)" -lt "$deadline" ] || die "node $N_NAME not Ready in time (log: $LOGS/$N_TAG-kubelet.log)"
  sleep 0.5
done
# a node brought back is in service again: a non-graceful-shutdown taint someone put on it while it was down goes
if $KUBECTL get node "$N_NAME" -o jsonpath='{.spec.taints[*].key}' | tr ' ' '\n' | grep -qx node.kubernetes.io/out-of-service; then
  $KUBECTL taint node "$N_NAME" node.kubernetes.io/out-of-service- >/dev/null
  say "removed the taint node.kubernetes.io/out-of-service from $N_NAME"
fi
# taint and label on an existing Node object too (the kubelet sets them only when it registers the node)
if [ $TAINT = 1 ]; then
  $KUBECTL taint node "$N_NAME" "$TAINT_KEY=true:NoSchedule" --overwrite >/dev/null
else
  $KUBECTL taint node "$N_NAME" "$TAINT_KEY-" >/dev/null 2>&1 || true
fi
$KUBECTL label node "$N_NAME" "$LABEL_KEY=$IDX" --overwrite >/dev/null
say "node $N_NAME Ready$([ $TAINT = 1 ] && echo " (taint $TAINT_KEY=true:NoSchedule)"); done in $(since "$T0") s"
