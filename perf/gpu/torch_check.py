#!/usr/bin/env python3
"""torch.distributed through topocoll's interposer, results checked exactly.

Run under torchrun with LD_PRELOAD=libnccl-topocoll.so and TOPOCOLL_TOPO_FILE (perf/gpu/run_all.sh
does). All ranks may share one GPU: each sets NCCL_HOSTID=s<rank> before NCCL starts, so NCCL
(and the topology) treat every rank as its own host. Checks all_reduce, reduce_scatter_tensor,
all_gather_into_tensor and all_to_all_single for several dtypes and uneven sizes against values
computed on the CPU; inputs are small integers so every result is exact in every dtype.
Exit status 0 only if everything matched.
"""
import os
import sys

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
os.environ.setdefault("NCCL_HOSTID", f"s{rank}")
os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
os.environ.setdefault("NCCL_IB_DISABLE", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)

failures = 0
checks = 0


def values(r, n, salt):
    i = torch.arange(n, dtype=torch.int64)
    return ((r * 7 + i * 13 + salt * 5) % 5) - 2


def check(name, got, want):
    global failures, checks
    checks += 1
    if not torch.equal(got.cpu(), want.cpu()):
        failures += 1
        bad = (got.cpu() != want.cpu()).nonzero()
        print(f"FAIL rank {rank} {name}: first mismatch at {bad[0].tolist()}", flush=True)


for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32):
    for n in (1, 7, 1031, 65536 + 13, (1 << 20) + 5):
        # all_reduce (sum, max) in place, as PyTorch calls it.
        for op, ref in ((dist.ReduceOp.SUM, lambda t: t.sum(0)), (dist.ReduceOp.MAX, lambda t: t.max(0).values)):
            x = values(rank, n, 1).to(dtype).to(device)
            dist.all_reduce(x, op=op)
            want = ref(torch.stack([values(r, n, 1) for r in range(world)])).to(dtype)
            check(f"all_reduce {dtype} {op} n={n}", x, want)
        # reduce_scatter_tensor: n elements per rank.
        inp = values(rank, n * world, 2).to(dtype).to(device)
        out = torch.empty(n, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, inp)
        want = torch.stack([values(r, n * world, 2) for r in range(world)]).sum(0)[rank * n:(rank + 1) * n]
        check(f"reduce_scatter_tensor {dtype} n={n}", out, want.to(dtype))
        # all_gather_into_tensor.
        inp = values(rank, n, 3).to(dtype).to(device)
        out = torch.empty(n * world, dtype=dtype, device=device)
        dist.all_gather_into_tensor(out, inp)
        want = torch.cat([values(r, n, 3) for r in range(world)])
        check(f"all_gather_into_tensor {dtype} n={n}", out, want.to(dtype))
        # all_to_all_single with equal splits: block p of rank r goes to rank p.
        inp = values(rank, n * world, 4).to(dtype).to(device)
        out = torch.empty(n * world, dtype=dtype, device=device)
        dist.all_to_all_single(out, inp)
        want = torch.cat([values(r, n * world, 4)[rank * n:(rank + 1) * n] for r in range(world)])
        check(f"all_to_all_single {dtype} n={n}", out, want.to(dtype))

torch.cuda.synchronize()
print(f"rank {rank}/{world}: {checks - failures} checks passed, {failures} failed", flush=True)
dist.destroy_process_group()
sys.exit(1 if failures else 0)
