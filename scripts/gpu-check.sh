#!/usr/bin/env bash
# What a local TrainJob sees of this machine's NVIDIA GPUs: run it where there is at least one GPU.
#
#   scripts/gpu-check.sh                      # kubetrain on PATH (or .venv/bin), torch with CUDA in the same env
#   TRAIN_ENV=/opt/venvs/torch-cu12 scripts/gpu-check.sh   # pods run in that Python environment (images.yaml)
#
# 1. One node, `numProcPerNode: gpu`, `nvidia.com/gpu: 1`: a torch DDP job over NCCL through `kubetrain run`. It
#    prints what the pod saw (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, torch.cuda.device_count(), the device
#    name, /dev/nvidia*, the processes torchrun started, NCCL's version) and trains 20 DDP steps on the GPU.
# 2. With 2 GPUs or more: 2 nodes x 1 GPU, NCCL between two pods; NCCL_DEBUG=INFO shows the transport it chose
#    ("via P2P", "via SHM" or "via NET/Socket") and bandwidth of a 64 MiB all-reduce.
# Everything runs under a KUBETRAIN_HOME of its own, removed at the end; exit status 0 when every case passed.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
kt=${KUBETRAIN:-$(command -v kubetrain || echo "$here/.venv/bin/kubetrain")}
work=$(mktemp -d /tmp/kubetrain-gpu-check.XXXXXX)
chmod 755 "$work"
export KUBETRAIN_HOME="$work/home"
mkdir -p "$KUBETRAIN_HOME"
trap 'rm -rf "$work"' EXIT
if [ -n "${TRAIN_ENV:-}" ]; then
    printf '"*": %s\n' "$TRAIN_ENV" >"$KUBETRAIN_HOME/images.yaml"
fi

echo "== machine"
nvidia-smi -L || { echo "nvidia-smi found no GPU: nothing to check here"; exit 2; }
gpus=$(nvidia-smi -L | grep -c '^GPU ')
"$kt" version 2>/dev/null || true
echo "kubetrain: $kt; pods' Python environment: ${TRAIN_ENV:-the one kubetrain runs in}"

cat >"$work/ddp.py" <<'EOF'
import os, time, glob, subprocess, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
if local == 0:
    print("pod", os.environ.get("HOSTNAME"), "NVIDIA_VISIBLE_DEVICES=" + os.environ.get("NVIDIA_VISIBLE_DEVICES", "-"),
          "CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "-"),
          "NCCL_HOSTID=" + os.environ.get("NCCL_HOSTID", "-"), flush=True)
    print("pod sees", torch.cuda.device_count(), "GPU(s):", torch.cuda.get_device_name(local),
          "| /dev:", " ".join(sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*"))),
          "| torchrun started", os.environ["LOCAL_WORLD_SIZE"], "process(es) on this node",
          "| NCCL", ".".join(map(str, torch.cuda.nccl.version())), flush=True)
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    print("nvidia-smi -L in the pod:", smi.stdout.strip() or smi.stderr.strip(), flush=True)
model = DDP(torch.nn.Linear(1024, 1024).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(20):
    loss = model(torch.randn(64, 1024, device="cuda")).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
w = model.module.weight.detach().clone()
dist.all_reduce(w)
assert torch.allclose(w / world, model.module.weight.detach(), atol=1e-5), "replicas differ"
t = torch.ones(16 * 2**20, device="cuda")  # 64 MiB
for _ in range(3):
    dist.all_reduce(t)
torch.cuda.synchronize(); start = time.perf_counter()
for _ in range(20):
    dist.all_reduce(t)
torch.cuda.synchronize(); elapsed = time.perf_counter() - start
if rank == 0:
    print(f"GPU-CHECK OK world={world} allreduce 64 MiB: {20 * t.numel() * 4 / elapsed / 1e9:.2f} GB/s", flush=True)
dist.barrier()
dist.destroy_process_group()
EOF

trainjob() {  # name nodes
    cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: $1}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: $2
    numProcPerNode: gpu
    resourcesPerNode: {limits: {nvidia.com/gpu: 1}}
    command: [torchrun, ddp.py]
    env: [{name: NCCL_DEBUG, value: INFO}, {name: NCCL_DEBUG_SUBSYS, value: "INIT,P2P,SHM,NET"}]
EOF
}

failed=0
check() {  # name nodes
    echo "== $1: $2 node(s) x numProcPerNode gpu, nvidia.com/gpu: 1 each"
    trainjob "$1" "$2" >"$work/$1.yaml"
    (cd "$work" && timeout "${CHECK_TIMEOUT:-600}" "$kt" run -f "$1.yaml") >"$work/$1.out" 2>&1
    rc=$?
    grep -v "NCCL INFO" "$work/$1.out"
    echo "-- NCCL's transports and host view:"
    grep -E "NCCL INFO (Channel 00|NCCL_HOSTID|cudaDriverVersion|NCCL version|Using network|.*via (P2P|SHM|NET))" \
        "$work/$1.out" | sort -u | head -20
    "$kt" get pods -o wide 2>/dev/null | grep -E "^NAME|^$1-" || true
    if [ $rc -ne 0 ] || ! grep -q "GPU-CHECK OK" "$work/$1.out"; then
        echo "!! $1 FAILED (exit $rc)"; failed=1
    fi
}

check gpu-1 1
if [ "$gpus" -ge 2 ]; then
    check gpu-2pods 2
else
    echo "== gpu-2pods: skipped (one GPU: NCCL between pods needs two GPUs, one per pod)"
fi
exit $failed
