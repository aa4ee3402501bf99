# Sourced by hack/bed/add-node.sh and hack/bed/remove-node.sh: where an extra node of the bed lives and how its
# parts are named. The bed is the one-node cluster of shared/tools/k8s-node (its README and lib/node.sh); an extra
# node is one more kubelet with a containerd of its own on the same machine, in the same network namespace.
#
# Node N (default 2; --index N) gets, derived from N unless set in the environment:
#   name         NODE2_NAME       <main node>-N          (the main node is $(hostname), as lib/node.sh names it)
#   address      NODE2_IP         10.201.0.N on lo       (the main node is 10.201.0.1)
#   pod CIDR     NODE2_POD_CIDR   10.244.(N-1).0/24      on bridge cni(N-1), host-local IPAM of its own
#   state        NODE2_STATE      $K8S_HOME/nodeN        containerd root, kubelet root dir, CNI config and IPAM, pod logs
#   runtime      NODE2_RUN        /run/containerd-nodeN  containerd state, socket, runc root
#   kubelet      10250 on its own address; healthz 127.0.0.1:NODE2_HEALTHZ_PORT (10248 + 100*(N-1))
#   cgroups      NODE2_CGROUP_ROOT /kt-nodeN            (kubepods below it; the main kubelet owns /kubepods)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export K8S_HOME=${K8S_HOME:-$HOME/k8s-node}
BIN=$K8S_HOME/bin
PKI=$K8S_HOME/pki
RUN=$K8S_HOME/run
LOGS=$K8S_HOME/logs
KUBECTL="$BIN/kubectl --kubeconfig $K8S_HOME/kubeconfig"
TAINT_KEY=bed.kubetrain.io/extra-node   # NoSchedule: only pods that tolerate it run on an extra node
LABEL_KEY=bed.kubetrain.io/extra-node

PROG=$(basename "$0")
say() { echo "$PROG: $*"; }
die() { echo "$PROG: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# node_vars INDEX: every name below, from the index (environment overrides win)
node_vars() {
  local n=$1
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 50 ] || die "--index must be a number from 2 to 50, got '$n'"
  MAIN_NODE=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
  IDX=$n
  N_NAME=${NODE2_NAME:-$MAIN_NODE-$n}
  N_IP=${NODE2_IP:-10.201.0.$n}
  N_POD_CIDR=${NODE2_POD_CIDR:-10.244.$((n - 1)).0/24}
  N_POD_GW=${N_POD_CIDR%.*}.1
  N_BRIDGE=${NODE2_BRIDGE:-cni$((n - 1))}
  N_STATE=${NODE2_STATE:-$K8S_HOME/node$n}
  N_RUNDIR=${NODE2_RUN:-/run/containerd-node$n}
  N_SOCK=$N_RUNDIR/containerd.sock
  N_HEALTHZ=${NODE2_HEALTHZ_PORT:-$((10248 + 100 * (n - 1)))}
  N_CGROUP=${NODE2_CGROUP_ROOT:-/kt-node$n}
  N_ETC=$N_STATE/etc
  N_TAG=node$n                     # pid files and logs: run/node2-kubelet.pid, logs/node2-kubelet.log
  CRICTL="$BIN/crictl --runtime-endpoint unix://$N_SOCK --image-endpoint unix://$N_SOCK --timeout 30s"
  CTR="ctr --address $N_SOCK -n k8s.io"
}

exe_of() { case $1 in containerd) echo /usr/bin/containerd ;; kubelet) echo "$BIN/kubelet" ;; esac; }
# pid_of COMPONENT -> the pid in run/nodeN-COMPONENT.pid if that process is this node's (its binary, and a
# command line naming this node's state dir: the main kubelet runs the same binary)
pid_of() {
  local f=$RUN/$N_TAG-$1.pid pid exe
  [ -f "$f" ] || return 1
  pid=$(cat "$f"); [[ $pid =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${exe% (deleted)}" = "$(exe_of "$1")" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$N_STATE/" || return 1
  echo "$pid"
}
alive() { pid_of "$1" >/dev/null; }

# spawn NAME ARGS...: the component as a daemon in a session of its own, logging to logs/nodeN-NAME.log, its pid in
# run/nodeN-NAME.pid. Every file descriptor but 0-2 is closed first: a lock held around this script (flock
# bed.lock add-node.sh) must not be inherited by the daemons and outlive the script.
spawn() {
  local n=$1; shift
  echo "=== $(date -Is) start" >> "$LOGS/$N_TAG-$n.log"
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
    done
    exec setsid "$(exe_of "$n")" "$@" >> "$LOGS/$N_TAG-$n.log" 2>&1 < /dev/null
  ) &
  echo $! > "$RUN/$N_TAG-$n.pid"
}

# stop_component NAME [SIGNAL]: TERM (or SIGNAL), then KILL after 10 s
stop_component() {
  local pid sig=${2:-TERM}
  pid=$(pid_of "$1") || { rm -f "$RUN/$N_TAG-$1.pid"; return 0; }
  kill -"$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  if [ -d "/proc/$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$RUN/$N_TAG-$1.pid"
  say "stopped $N_TAG $1 (pid $pid)"
}

# the guard of lib/node.sh (mangle KT-GUARD, filter KT-GUARD-IN), told about this node's bridge and address
guard_rules() { # add|del
  local op=$1 ipt="iptables -w 5"
  guard1() { # table chain position rule...
    local t=$1 c=$2 pos=$3; shift 3
    if [ "$op" = add ]; then
      $ipt -t "$t" -C "$c" "$@" 2>/dev/null && return 0
      if [ "$pos" = first ]; then $ipt -t "$t" -I "$c" 1 "$@"; else $ipt -t "$t" -A "$c" "$@"; fi
    else
      while $ipt -t "$t" -D "$c" "$@" 2>/dev/null; do :; done
    fi
  }
  if ! $ipt -t mangle -nL KT-GUARD >/dev/null 2>&1 || ! $ipt -nL KT-GUARD-IN >/dev/null 2>&1; then
    [ "$op" = del ] && return 0
    die "the bed's guard chains (KT-GUARD, KT-GUARD-IN) are missing: is the bed up (start.sh --node)?"
  fi
  # this bridge is a pod network like cni0: let it through (before the drops of the pod/service/node ranges)
  guard1 mangle KT-GUARD first -o "$N_BRIDGE" -j RETURN
  guard1 filter KT-GUARD-IN first -i "$N_BRIDGE" -j RETURN
  # and nothing from this node's address or pod CIDR leaves through a real interface (lib/node.sh already drops
  # 10.244.0.0/16; the rules below also cover an overridden NODE2_POD_CIDR)
  guard1 mangle KT-GUARD last -s "$N_IP/32" -j DROP
  guard1 mangle KT-GUARD last -d "$N_IP/32" -j DROP
  guard1 mangle KT-GUARD last -s "$N_POD_CIDR" -j DROP
  guard1 mangle KT-GUARD last -d "$N_POD_CIDR" -j DROP
}

# the cgroup root of this node's kubelet, in every cgroup v1 hierarchy (the kubelet refuses a missing one)
cgroups_make() {
  local h d
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -f "$h/cgroup.procs" ] || continue
    [ "$(basename "$h")" = unified ] && continue
    d=$h$N_CGROUP
    mkdir -p "$d"
    if [ -f "$d/cpuset.cpus" ]; then   # a new cpuset cgroup starts empty: give it the parent's cpus and mems
      [ -n "$(cat "$d/cpuset.cpus")" ] || cat "$h/cpuset.cpus" > "$d/cpuset.cpus"
      [ -n "$(cat "$d/cpuset.mems")" ] || cat "$h/cpuset.mems" > "$d/cpuset.mems"
    fi
  done
}
cgroups_remove() {
  local h
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -d "$h$N_CGROUP" ] && find "$h$N_CGROUP" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# stop (and unless "keep", remove) every pod sandbox of this node's containerd: kills their containers; removing
# them frees their IPs and lets a kubelet start them afresh
remove_pods() {
  alive containerd || return 0
  local pods; pods=$($CRICTL pods -q 2>/dev/null || true)
  [ -n "$pods" ] || return 0
  say "stopping $(echo "$pods" | wc -l) pod sandbox(es) of $N_NAME through the CRI"
  # shellcheck disable=SC2086
  $CRICTL stopp $pods >/dev/null 2>&1 || true
  [ "${1:-}" = keep ] && return 0
  # shellcheck disable=SC2086
  $CRICTL rmp -f $pods >/dev/null 2>&1 || true
}
