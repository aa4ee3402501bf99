#!/usr/bin/env bash
# Remove the node hack/bed/add-node.sh added (the main node and the rest of the bed are left alone).
#
#   hack/bed/remove-node.sh [--index N] [--wipe]
#       drain it (evictions, 60 s at most), stop its kubelet, remove its pods through its CRI, stop its containerd,
#       delete the Node object (and pods still bound to it), unmount its volumes, delete its bridge, address,
#       guard rules and cgroups. Its state ($K8S_HOME/nodeN: imported images, certificate) stays for a fast
#       add-node.sh, unless --wipe.
#   hack/bed/remove-node.sh [--index N] --crash
#       the node dies instead: its kubelet is killed (SIGKILL) and every container of its pods is stopped through
#       its CRI, nothing else; the Node object stays and goes NotReady. add-node.sh brings it back.
#
# Needs root. On a shared bed hold its lock: flock /root/bedlogs/bed.lock hack/bed/remove-node.sh
source "$(dirname "$0")/_node.sh"

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }
INDEX=2; WIPE=0; CRASH=0
while [ $# -gt 0 ]; do
  case $1 in
    --index) INDEX=${2:-}; shift 2 ;;
    --index=*) INDEX=${1#*=}; shift ;;
    --wipe) WIPE=1; shift ;;
    --crash) CRASH=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$PROG: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
node_vars "$INDEX"
[ "$(id -u)" = 0 ] || die "must run as root"
T0=$(now)

if [ $CRASH = 1 ]; then
  alive kubelet || die "$N_TAG's kubelet is not running"
  stop_component kubelet KILL
  remove_pods keep   # stopped, not removed: the restarted kubelet finds them exited, as after a power loss
  say "node $N_NAME crashed: kubelet killed, its containers stopped (Node object left; add-node.sh restarts it) in $(since "$T0") s"
  exit 0
fi

api=0; $KUBECTL get --raw /readyz >/dev/null 2>&1 && api=1
if [ $api = 1 ] && $KUBECTL get node "$N_NAME" >/dev/null 2>&1 && alive kubelet; then
  $KUBECTL drain "$N_NAME" --ignore-daemonsets --delete-emptydir-data --force --grace-period 5 --timeout 60s >/dev/null 2>&1 ||
    say "drain of $N_NAME did not finish in 60 s; its remaining pods are removed below"
fi
stop_component kubelet
remove_pods
stop_component containerd
if [ $api = 1 ]; then
  pods=$($KUBECTL get pods -A --field-selector "spec.nodeName=$N_NAME" -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' 2>/dev/null || true)
  for p in $pods; do $KUBECTL delete pod -n "${p%%/*}" "${p#*/}" --force --grace-period 0 --wait=false >/dev/null 2>&1 || true; done
  $KUBECTL delete node "$N_NAME" --ignore-not-found >/dev/null && say "deleted Node $N_NAME"
else
  say "the API server does not answer: Node $N_NAME left in the API"
fi
# kubelet volume mounts (deepest first), network, cgroups
awk -v p="$N_STATE/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done
ip link del "$N_BRIDGE" 2>/dev/null && say "deleted bridge $N_BRIDGE" || true
ip addr del "$N_IP/32" dev lo 2>/dev/null && say "removed $N_IP from lo" || true
guard_rules del
cgroups_remove
rm -rf "${N_STATE:?}/cni/ipam" "$N_RUNDIR"
if [ $WIPE = 1 ]; then rm -rf "${N_STATE:?}"; say "wiped $N_STATE"; fi
say "node $N_NAME removed in $(since "$T0") s"
