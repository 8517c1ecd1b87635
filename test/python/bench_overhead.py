"""The cost Python adds per call: an 8-byte float32 allreduce, in place,
timed from Python through the package and through a bare ctypes call, in
alternating trials (median per call of the slowest rank). Compare with
hcomm_perf allreduce -b 8 -e 8 at the same rank count.

    mpirun -np 2 python3 test/python/bench_overhead.py [iterations]
"""
import statistics
import sys
import time

import numpy as np

import hcomm
from hcomm import _lib

try:
    import torch
    import hcomm.torch as ht
except ImportError:
    torch = None

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
comm = hcomm.Comm.world()
x = np.ones(2, np.float32)
ptr = x.ctypes.data
raw = _lib.calls["allreduce"]
cases = {
    "ctypes call": lambda: raw(ptr, ptr, 2, 8, 0, comm._h),
    "Comm.allreduce(ndarray)": lambda: comm.allreduce(x),
    "Comm.iallreduce(ndarray).wait()": lambda: comm.iallreduce(x).wait(),
}
if torch is not None:
    t = torch.ones(2)
    ht.init_process_group()
    cases["Comm.allreduce(tensor)"] = lambda: comm.allreduce(t)
    cases["hcomm.torch.all_reduce"] = lambda: ht.all_reduce(t)
times = {k: [] for k in cases}
for trial in range(5):
    for name, f in cases.items():
        for _ in range(n // 10):  # warm-up
            f()
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = np.array([(time.perf_counter() - t0) / n * 1e6])
        comm.allreduce(dt, op=hcomm.MAX)
        times[name].append(dt[0])
if comm.rank == 0:
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{comm.size} ranks, 8 B: {name:32s} {med:7.2f} us/call "
              f"(trials {' '.join(f'{v:.2f}' for v in ts)})")
