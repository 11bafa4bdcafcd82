"""Reference points for bench/averaging.ts: one all-reduce (sum) of a float32 vector among N
processes on loopback, timed the same way for each library: a barrier, then the collective; a
round's time is the slowest rank's; median and p90 of the timed rounds after the warm-up ones.

    python3 all_reduce.py gloo RANKS PARAMS ROUNDS WARMUP     # PyTorch's gloo over TCP on 127.0.0.1
    mpirun -np RANKS python3 all_reduce.py mpi RANKS PARAMS ROUNDS WARMUP   # Open MPI (mpi4py)

Prints one JSON line: {"library", "ranks", "params", "rounds", "warmup", "medianMs", "p90Ms"}.
"""
import json
import os
import socket
import statistics
import sys
import time


def quantile(values, q):
    ordered = sorted(values)
    at = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[at]


def report(library, ranks, params, rounds, warmup, slowest_ms):
    timed = slowest_ms[warmup:]
    print(json.dumps({
        "library": library, "ranks": ranks, "params": params, "rounds": len(timed), "warmup": warmup,
        "medianMs": statistics.median(timed), "p90Ms": quantile(timed, 0.9),
    }), flush=True)


def gloo_rank(rank, ranks, params, rounds, warmup, port):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    vector = torch.rand(params, dtype=torch.float32)
    slowest = []
    for _ in range(warmup + rounds):
        dist.barrier()
        started = time.perf_counter()
        dist.all_reduce(vector)
        elapsed = torch.tensor([(time.perf_counter() - started) * 1000], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        slowest.append(float(elapsed[0]))
        vector.mul_(1.0 / ranks)  # keep the values bounded across rounds
    if rank == 0:
        report("gloo", ranks, params, rounds, warmup, slowest)
    dist.destroy_process_group()


def gloo(ranks, params, rounds, warmup):
    import torch.multiprocessing as mp
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(gloo_rank, args=(ranks, params, rounds, warmup, port), nprocs=ranks, join=True)


def mpi(ranks, params, rounds, warmup):
    import numpy
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    assert comm.Get_size() == ranks, f"mpirun started {comm.Get_size()} processes, expected {ranks}"
    vector = numpy.random.rand(params).astype(numpy.float32)
    slowest = []
    for _ in range(warmup + rounds):
        comm.Barrier()
        started = MPI.Wtime()
        comm.Allreduce(MPI.IN_PLACE, vector, op=MPI.SUM)
        elapsed = (MPI.Wtime() - started) * 1000
        slowest.append(comm.allreduce(elapsed, op=MPI.MAX))
        vector *= 1.0 / ranks
    if comm.Get_rank() == 0:
        report("mpi", ranks, params, rounds, warmup, slowest)


if __name__ == "__main__":
    library, ranks, params, rounds, warmup = sys.argv[1], *map(int, sys.argv[2:6])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"gloo": gloo, "mpi": mpi}[library](ranks, params, rounds, warmup)
