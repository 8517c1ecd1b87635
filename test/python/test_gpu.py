"""hcomm and hcomm.torch on GPU memory: CuPy arrays (CUDA array interface)
and torch CUDA tensors, blocking, non-blocking and stream-ordered, and
DDP on CUDA with the HCOMM hook against Gloo. Skips (77) without a GPU or
without both CuPy and torch; runs on the GPU machine (test/gpu/run_gpu.sh
python). Exits 1 if a check failed on this rank."""

import sys

try:
    import torch
    have_torch = torch.cuda.is_available()
except ImportError:
    have_torch = False
try:
    import cupy
    have_cupy = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy, or no device
    have_cupy = False
if not (have_torch or have_cupy):
    print("SKIP: no GPU (neither torch.cuda nor CuPy sees one)")
    sys.exit(77)

import hcomm  # noqa: E402

comm = hcomm.Comm.world()
rank, size = comm.rank, comm.size
total = size * (size + 1) // 2
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print(f"rank {rank}: FAILED {what}", file=sys.stderr)


def test_cupy():
    for dt in ("int8", "int32", "int64", "float16", "float32", "float64"):
        for n in (0, 1, 1000, 1 << 20):
            x = cupy.full(n, rank + 1, dtype=dt)
            y = cupy.zeros_like(x)
            comm.allreduce(x, y)
            check(bool((y == total).all()), f"cupy allreduce {dt} n={n}")
            comm.iallreduce(x, op=hcomm.MAX).wait()
            check(bool((x == size).all()), f"cupy iallreduce {dt} n={n}")
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.arange(1 << 16, dtype=cupy.float32) * (rank + 1)
        comm.allreduce(x, stream=s)  # after the arange on s
        want = cupy.arange(1 << 16, dtype=cupy.float32) * total
        check(bool((x == want).all()), "cupy allreduce on a stream")
    g = cupy.zeros(4 * size, cupy.float32)
    comm.allgather(cupy.full(4, rank, cupy.float32), g)
    want = cupy.repeat(cupy.arange(size, dtype=cupy.float32), 4)
    check(bool((g == want).all()), "cupy allgather")
    b = cupy.full(8, rank, cupy.float64)
    comm.broadcast(b, size - 1)
    check(bool((b == size - 1).all()), "cupy broadcast")
    try:  # refused on every rank before anything is sent
        comm.allreduce(cupy.ones(4, cupy.float32), bytearray(16),
                       dtype="float32")
        check(False, "device and pageable host buffers must be refused")
    except hcomm.HcommError as e:
        check("memory" in e.message, f"device and host buffers: {e}")
    comm.barrier()


def test_torch():
    import hcomm.torch as ht
    ht.init_process_group()
    dev = torch.device("cuda", 0)
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        t = torch.full((1 << 18,), rank + 1, dtype=dt, device=dev)
        t.mul_(1)  # queued on the current stream before the collective
        ht.all_reduce(t)
        check(bool((t == total).all()), f"torch cuda all_reduce {dt}")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.ones(1 << 20, device=dev) * (rank + 1)
        w = ht.all_reduce(t, async_op=True)
        w.wait()
        t.add_(1)  # after the collective, on the same stream
    s.synchronize()
    check(bool((t == total + 1).all()), "all_reduce on a side stream")
    out = torch.zeros(2 * size, device=dev)
    ht.all_gather_into_tensor(out, torch.full((2,), float(rank), device=dev))
    want = torch.arange(size, device=dev).float().repeat_interleave(2)
    check(bool((out == want).all()), "torch cuda all_gather_into_tensor")
    out = torch.zeros(3, device=dev)
    ht.reduce_scatter_tensor(out, torch.ones(3 * size, device=dev))
    check(bool((out == size).all()), "torch cuda reduce_scatter_tensor")
    t = torch.full((5,), float(rank), device=dev)
    ht.broadcast(t, 0)
    check(bool((t == 0).all()), "torch cuda broadcast")
    test_ddp(ht, dev)
    ht.destroy_process_group()


def test_ddp(ht, dev):
    """DDP on CUDA with the HCOMM hook and with Gloo: the same losses."""
    import torch.distributed as dist
    DDP = torch.nn.parallel.DistributedDataParallel
    gloo = dist.new_group(backend="gloo")
    runs = {}
    for name in ("hcomm", "gloo"):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1)).to(dev)
        if name == "hcomm":
            ddp = DDP(m, device_ids=[dev])
            ddp.register_comm_hook(None, ht.allreduce_hook)
        else:
            ddp = DDP(m, device_ids=[dev], process_group=gloo)
        torch.manual_seed(1 + rank)
        x, y = torch.randn(32, 64, device=dev), torch.randn(32, 1, device=dev)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        losses = []
        for _ in range(10):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs[name] = losses
    check(all(abs(a - b) <= 1e-4 * abs(b) for a, b in
              zip(runs["hcomm"], runs["gloo"])), f"DDP on CUDA: {runs}")


if have_cupy:
    test_cupy()
if have_torch:
    test_torch()
comm.free()
if rank == 0 or failures:
    print(f"rank {rank}: test_gpu at {size} ranks (cupy {have_cupy}, torch "
          f"{have_torch}): {checks - len(failures)} passed, "
          f"{len(failures)} failed")
sys.exit(1 if failures else 0)
