"""Trains a small model with DistributedDataParallel, gradients averaged by
HCOMM (or by Gloo with --gloo), and prints the loss per epoch.

    mpirun -np 4 python3 examples/ddp_train.py [--gloo] [--cuda]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import hcomm.torch as ht

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=5)
p.add_argument("--gloo", action="store_true", help="Gloo, not HCOMM")
p.add_argument("--cuda", action="store_true", help="train on the GPU")
args = p.parse_args()
dev = torch.device("cuda" if args.cuda else "cpu")

ht.init_process_group("gloo" if args.gloo else "hcomm")  # ranks from MPI
rank, size = ht.get_rank(), ht.get_world_size()
torch.manual_seed(0)  # the same data and initial weights on every rank
x = torch.randn(4096, 32, device=dev)
y = torch.sin(x @ torch.randn(32, 1, device=dev))
model = torch.nn.Sequential(
    torch.nn.Linear(32, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 1)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model)
if not args.gloo:
    ddp.register_comm_hook(None, ht.allreduce_hook)  # buckets to HCOMM
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
mine = torch.arange(rank, len(x) - len(x) % size, size)  # this rank's part

step_times = []
for epoch in range(args.epochs):
    loss_sum = torch.zeros(1, device=dev)
    for i in range(0, len(mine), 32):
        t0 = time.perf_counter()
        batch = mine[i:i + 32]
        opt.zero_grad()
        loss = F.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()
        opt.step()
        loss_sum += loss.detach()
        if args.cuda:
            torch.cuda.synchronize()
        step_times.append(time.perf_counter() - t0)
    ht.all_reduce(loss_sum)  # the mean over every rank's batches
    steps = (len(mine) + 31) // 32
    if rank == 0:
        print(f"epoch {epoch}: loss {loss_sum.item() / steps / size:.6f}")
if rank == 0:
    print(f"{size} ranks, {'Gloo' if args.gloo else 'HCOMM'}: median step "
          f"{statistics.median(step_times) * 1e3:.3f} ms")
ht.destroy_process_group()
