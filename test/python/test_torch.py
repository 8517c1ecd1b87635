"""hcomm and hcomm.torch on torch CPU tensors: the tensor fast path and
DLPack, torch.distributed's calls through hcomm.torch and through the
"hcomm" backend, and DDP trained with the HCOMM hook, the hcomm backend and
Gloo, which must agree. Run under mpirun; exits 1 if a check failed."""

import sys

import torch
import torch.distributed as dist

import hcomm
import hcomm.torch as ht

ht.init_process_group()  # torch.distributed's default group: hcomm
comm = ht.world()
rank, size = comm.rank, comm.size
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print(f"rank {rank}: FAILED {what}", file=sys.stderr)


DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
total = size * (size + 1) // 2  # sum over ranks of rank + 1


class OnlyDLPack:
    """An object that exposes its memory through DLPack alone."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_hcomm_on_tensors():
    for dt in DTYPES:
        t = torch.full((5,), rank + 1, dtype=dt)
        out = torch.zeros(5, dtype=dt)
        check(comm.allreduce(t, out) is out and (out == total).all(),
              f"allreduce {dt}: {out}")
        comm.iallreduce(t, op=hcomm.MAX).wait()
        check((t == size).all(), f"iallreduce max {dt} in place: {t}")
        d = torch.full((3,), rank + 1, dtype=dt)
        comm.allreduce(OnlyDLPack(d))
        check((d == total).all(), f"DLPack {dt}: {d}")
    big = torch.zeros(4, 6)
    big[:, 2] = 1  # a column: not contiguous
    try:
        comm.allreduce(big[:, 2])
        check(False, "a non-contiguous tensor must be refused")
    except ValueError as e:
        check("not contiguous" in str(e), f"non-contiguous: {e}")
    row = big[1]  # a contiguous view: reduced in big's memory
    row.fill_(2)
    comm.allreduce(row)
    check((big[1] == 2 * size).all() and (big[0, 2] == 1), "view of big")
    try:
        comm.allreduce(torch.zeros(2, dtype=torch.complex64))
        check(False, "complex must be refused")
    except TypeError as e:
        check("no data type" in str(e), f"complex: {e}")


def test_functions():
    ops = [(dist.ReduceOp.SUM, total), (dist.ReduceOp.MAX, size),
           (dist.ReduceOp.MIN, 1)]
    for op, want in ops:
        for async_op in (False, True):
            t = torch.full((7,), float(rank + 1))
            w = ht.all_reduce(t, op=op, async_op=async_op)
            if async_op:
                check(w.wait() and w.is_completed(), "Work.wait")
            check((t == want).all(), f"all_reduce {op} {async_op}: {t}")
    t = torch.full((3,), float(rank + 1))
    ht.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    fact = 1
    for r in range(1, size + 1):
        fact *= r
    check((t == fact).all(), f"all_reduce product: {t}")
    try:
        ht.all_reduce(t, op=dist.ReduceOp.BAND)
        check(False, "BAND must be refused")
    except ValueError as e:
        check("not supported" in str(e), f"BAND: {e}")
    for src in range(size):
        t = torch.arange(4.0) * (rank == src) + src
        ht.broadcast(t, src)
        check((t == torch.arange(4.0) + src).all(), f"broadcast {src}")
    mine = torch.full((2,), float(rank))
    want = torch.arange(size, dtype=torch.float32).repeat_interleave(2)
    lst = [torch.zeros(2) for _ in range(size)]  # separate: copied out
    ht.all_gather(lst, mine)
    check((torch.cat(lst) == want).all(), f"all_gather list: {lst}")
    flat = torch.zeros(2 * size)
    lst = list(flat.chunk(size))  # views of flat: no copy
    ht.all_gather(lst, mine, async_op=True).wait()
    check((flat == want).all(), f"all_gather views: {flat}")
    out = torch.zeros(2 * size)
    ht.all_gather_into_tensor(out, mine)
    check((out == want).all(), "all_gather_into_tensor")
    ins = [torch.full((3,), float(r + rank)) for r in range(size)]
    out = torch.zeros(3)
    ht.reduce_scatter(out, ins)
    check((out == size * rank + total - size).all(),
          f"reduce_scatter: {out}")
    out = torch.zeros(3)
    ht.reduce_scatter_tensor(out, torch.cat(ins), async_op=True).wait()
    check((out == size * rank + total - size).all(), "reduce_scatter_tensor")
    for dst in range(size):
        t = torch.ones(2)
        ht.reduce(t, dst)
        check(rank != dst or (t == size).all(), f"reduce {dst}")
    ht.barrier()
    check(ht.get_rank() == rank and ht.get_world_size() == size, "ranks")


def test_backend():
    """torch.distributed's own functions on the hcomm backend."""
    check(dist.get_backend() == "hcomm", f"backend {dist.get_backend()}")
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    check((t == total).all(), f"dist.all_reduce: {t}")
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
    w.wait()
    check((t == total).all(), "dist.all_reduce async")
    t = torch.full((2,), float(rank))
    dist.broadcast(t, size - 1)
    check((t == size - 1).all(), "dist.broadcast")
    lst = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(lst, torch.tensor([float(rank)]))
    check([x.item() for x in lst] == list(range(size)), "dist.all_gather")
    out = torch.zeros(1)
    dist.reduce_scatter(out, [torch.ones(1) * r for r in range(size)])
    check(out.item() == rank * size, f"dist.reduce_scatter: {out}")
    dist.barrier()


def train(ddp, steps=6):
    """Losses of a few SGD steps; every rank gets its own slice of one
    batch, so averaged gradients equal those of the whole batch."""
    torch.manual_seed(1)
    x, y = torch.randn(8 * size, 16), torch.randn(8 * size, 1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        part = slice(8 * rank, 8 * rank + 8)
        loss = torch.nn.functional.mse_loss(ddp(x[part]), y[part])
        loss.backward()
        opt.step()
        whole = torch.nn.functional.mse_loss(ddp.module(x), y).detach()
        losses.append(whole.item())
    return losses


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 1))


def test_ddp():
    DDP = torch.nn.parallel.DistributedDataParallel
    hooked = DDP(model())
    hooked.register_comm_hook(None, ht.allreduce_hook)
    on_hcomm = train(hooked)
    on_backend = train(DDP(model()))  # the hcomm backend, no hook
    gloo = dist.new_group(backend="gloo")
    on_gloo = train(DDP(model(), process_group=gloo))
    one = model()  # the whole batch in one process
    torch.manual_seed(1)
    x, y = torch.randn(8 * size, 16), torch.randn(8 * size, 1)
    opt = torch.optim.SGD(one.parameters(), lr=0.1)
    alone = []
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.mse_loss(one(x), y).backward()
        opt.step()
        alone.append(torch.nn.functional.mse_loss(one(x), y).item())
    for name, losses in [("hook", on_hcomm), ("backend", on_backend),
                         ("gloo", on_gloo)]:
        close = all(abs(a - b) <= 1e-5 * abs(b) for a, b in
                    zip(losses, alone))
        check(close, f"DDP {name}: {losses} vs one process {alone}")


for t in [test_hcomm_on_tensors, test_functions, test_backend, test_ddp]:
    t()
ht.destroy_process_group()
if rank == 0 or failures:
    print(f"rank {rank}: test_torch ({torch.__version__}) at {size} ranks: "
          f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
