# SPDX-License-Identifier: GPL-2.0
"""One rank of the torch.distributed ``rbln`` backend's checks and bench.

Run by test_distributed.py (and bench_dist.py), one process per rank:
    RANK=r WORLD_SIZE=n MASTER_ADDR=.. MASTER_PORT=.. dist_worker.py test|bench
Each rank drives its own card: torch_rbln.set_device(RBLN_DIST_CARD, default
the rank).  It prints one JSON line: {"rank": r, "results": {name: "ok" |
"<error>"}, ...}; the test asserts on every rank's results.
"""

import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch_rbln

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
CARD = int(os.environ.get("RBLN_DIST_CARD", RANK))
DEV = torch_rbln.device_of(CARD)


def data(rank, shape, dtype=torch.float32, salt=0):
    """Rank ``rank``'s input: every rank can compute every rank's."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)


def expect_equal(got, want, what):
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        diff = ((got.double() - want.double()).abs().max().item()
                if got.shape == want.shape else None)
        raise AssertionError(f"{what}: got {got.dtype}{tuple(got.shape)}, want "
                             f"{want.dtype}{tuple(want.shape)}, max |diff| {diff}")


# --- collectives --------------------------------------------------------------
# Two addends (world size 2): IEEE addition is commutative, so gloo's sum
# of the staged copies is bitwise the CPU's x0 + x1 (AVG: then / 2, exact);
# bfloat16 is staged as float32 and rounded once, as the CPU's bf16 add.

def reference_reduce(op, xs):
    acc = xs[0].clone()
    for x in xs[1:]:
        if op in ("sum", "avg"):
            acc = acc + x
        elif op == "max":
            acc = torch.maximum(acc, x)
        else:
            acc = torch.minimum(acc, x)
    return acc / len(xs) if op == "avg" else acc


OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
       "min": dist.ReduceOp.MIN}


def check_all_reduce(op, dtype):
    shape = (129, 33)
    xs = [data(r, shape, dtype, salt=1) for r in range(WORLD)]
    t = xs[RANK].to(DEV)
    work = dist.all_reduce(t, op=OPS[op], async_op=True)
    work.wait()
    assert t.device == DEV
    expect_equal(t, reference_reduce(op, xs), f"all_reduce {op} {dtype}")


def check_broadcast():
    for src in range(WORLD):
        xs = [data(r, (77, 5), salt=2 + src) for r in range(WORLD)]
        t = xs[RANK].to(DEV)
        dist.broadcast(t, src=src)
        expect_equal(t, xs[src], f"broadcast from {src}")


def check_all_gather():
    xs = [data(r, (31, 7), torch.float16, salt=5) for r in range(WORLD)]
    outs = [torch.empty((31, 7), dtype=torch.float16, device=DEV) for _ in range(WORLD)]
    dist.all_gather(outs, xs[RANK].to(DEV))
    for r in range(WORLD):
        expect_equal(outs[r], xs[r], f"all_gather part {r}")
    flat = torch.empty((WORLD * 31, 7), dtype=torch.float16, device=DEV)
    dist.all_gather_into_tensor(flat, xs[RANK].to(DEV))
    expect_equal(flat, torch.cat(xs), "all_gather_into_tensor")


def check_reduce_scatter():
    # ys[r][k]: rank r's input chunk for rank k.
    ys = [[data(r, (45, 3), salt=10 + k) for k in range(WORLD)] for r in range(WORLD)]
    out = torch.empty((45, 3), device=DEV)
    dist.reduce_scatter(out, [y.to(DEV) for y in ys[RANK]], op=dist.ReduceOp.SUM)
    expect_equal(out, reference_reduce("sum", [ys[r][RANK] for r in range(WORLD)]),
                 "reduce_scatter")
    out2 = torch.empty((45, 3), device=DEV)
    dist.reduce_scatter_tensor(out2, torch.cat(ys[RANK]).to(DEV), op=dist.ReduceOp.MAX)
    expect_equal(out2, reference_reduce("max", [ys[r][RANK] for r in range(WORLD)]),
                 "reduce_scatter_tensor max")


def check_barrier():
    # The last rank arrives 1.5 s late: every other rank waits for it.
    if RANK == WORLD - 1:
        time.sleep(1.5)
    t0 = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - t0
    if RANK != WORLD - 1 and waited < 1.0:
        raise AssertionError(f"barrier returned after {waited:.2f}s, before the late rank came")


def check_int64_sum():
    xs = [data(r, (64,), torch.int64, salt=20) for r in range(WORLD)]
    t = xs[RANK].to(DEV)
    dist.all_reduce(t)
    expect_equal(t, reference_reduce("sum", xs), "all_reduce int64")


def check_errors():
    try:
        dist.all_reduce(torch.ones(4))
    except TypeError as e:
        assert "rbln device" in str(e) and "cpu" in str(e), str(e)
    else:
        raise AssertionError("all_reduce of a CPU tensor was accepted")
    if torch_rbln.device_count() > 1:
        other = torch_rbln.device_of((CARD + 1) % torch_rbln.device_count())
        outs = [torch.empty(4, device=DEV), torch.empty(4, device=other)][:WORLD]
        try:
            dist.all_gather(outs, torch.ones(4).to(DEV))
        except ValueError as e:
            assert "one rbln device" in str(e), str(e)
        else:
            raise AssertionError("all_gather into tensors on two devices was accepted")
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.int32).to(DEV), op=dist.ReduceOp.AVG)
    except TypeError as e:
        assert "AVG needs a floating-point tensor" in str(e), str(e)
    else:
        raise AssertionError("AVG of an int32 tensor was accepted")
    # The group still works after the refusals (nothing was half-sent).
    check_int64_sum()


# --- DistributedDataParallel --------------------------------------------------

STEPS = 5
LR = 0.05
BATCH = 8  # per rank


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def batches():
    """Every step's combined batch (WORLD * BATCH rows)."""
    g = torch.Generator().manual_seed(77)
    return [(torch.randn(WORLD * BATCH, 16, generator=g),
             torch.randn(WORLD * BATCH, 4, generator=g))
            for _ in range(STEPS)]


def train(model, steps, rows):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for x, y in steps:
        x, y = x[rows].to(DEV), y[rows].to(DEV)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


# fp32 on the card: the combined batch's gradient is one MATMUL over 2*BATCH
# rows; DDP's is the mean of two MATMULs over BATCH rows each, summed by
# gloo and divided by 2.  Only the summation order differs (a few ulp of
# each gradient, ~1e-7 relative), compounding over STEPS small SGD steps:
# atol 2e-5 / rtol 1e-4 is ~100x that, while training on one rank's half
# of the batch alone moves the parameters >1e-3 away (checked as a control).
ATOL, RTOL = 2e-5, 1e-4


def check_ddp():
    steps = batches()
    model = make_model(seed=RANK).to(DEV)  # ranks start apart: DDP broadcasts rank 0's
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
    start = [p.detach().cpu() for p in model.parameters()]
    ref_start = [p.detach() for p in make_model(seed=0).parameters()]
    for a, b in zip(start, ref_start):
        expect_equal(a, b, "DDP's start (rank 0's parameters)")
    mine = slice(RANK * BATCH, (RANK + 1) * BATCH)
    got = train(ddp, steps, mine)
    want = train(make_model(seed=0).to(DEV), steps, slice(0, WORLD * BATCH))
    alone = train(make_model(seed=0).to(DEV), steps, mine)
    worst = max((g - w).abs().max().item() for g, w in zip(got, want))
    for i, (g, w) in enumerate(zip(got, want)):
        if not torch.allclose(g, w, atol=ATOL, rtol=RTOL):
            raise AssertionError(f"DDP parameter {i} differs from one process on the combined "
                                 f"batch by {(g - w).abs().max().item():.3g}")
    control = max((a - w).abs().max().item() for a, w in zip(alone, want))
    if control < 1e-3:
        raise AssertionError(f"control: one rank's half batch alone is only {control:.3g} "
                             "from the combined batch; the check could not fail")
    # Every rank holds the same parameters (gathered through the backend).
    flat = torch.cat([p.reshape(-1) for p in got])
    parts = [torch.empty_like(flat).to(DEV) for _ in range(WORLD)]
    dist.all_gather(parts, flat.to(DEV))
    for r in range(WORLD):
        expect_equal(parts[r], flat, f"rank {r}'s parameters after DDP")
    # DDP's logging data names the process group's backend.
    stats = ddp._get_ddp_logging_data()
    return {"ddp_max_diff": worst, "half_batch_diff": control,
            "ddp_backend_name": stats.get("backend_name")}


# --- bench ----------------------------------------------------------------------

def timed(fn, min_time=0.5, max_iters=50):
    fn()  # warm: commits, pinned blocks cached, gloo pairs connected
    dist.barrier()
    iters, t0 = 0, time.perf_counter()
    while True:
        fn()
        iters += 1
        el = time.perf_counter() - t0
        # Every rank must run the same count: rank 0 decides.
        done = torch.tensor([1 if (el >= min_time or iters >= max_iters) else 0])
        GLOO.broadcast([done]).wait()  # root 0
        if done.item():
            return el / iters


ROUNDS = 3


def best_of(fns):
    """Each of ``fns`` timed ROUNDS times, interleaved (the host's load hits
    them alike); the best time of each (the noise of a shared TCG host
    only adds)."""
    best = [float("inf")] * len(fns)
    for _ in range(ROUNDS):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timed(fn, min_time=0.3, max_iters=20))
    return best


def bench():
    out = {"allreduce": [], "rounds": ROUNDS}
    for nbytes in [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]:
        n = nbytes // 4
        dev_t = torch.ones(n).to(DEV)
        cpu_t = torch.ones(n)
        # Both through their group objects (the gloo group is not registered
        # with torch.distributed's group map, so no dist.all_reduce(group=)).
        t_rbln, t_gloo = best_of([lambda: PG.allreduce([dev_t]).wait(),
                                  lambda: GLOO.allreduce([cpu_t]).wait()])
        out["allreduce"].append({"bytes": nbytes, "rbln_s": t_rbln, "gloo_s": t_gloo})
        dev_t = None  # the device tensor goes before the next size's
    # One DDP step against one process's step of the same model on its batch.
    steps = batches()
    x, y = steps[0][0][:BATCH].to(DEV), steps[0][1][:BATCH].to(DEV)

    def step_fn(m, opt):
        def f():
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            torch_rbln.synchronize()
        return f
    single = make_model(0).to(DEV)
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(0).to(DEV))
    out["ddp_step_s"], out["single_step_s"] = best_of(
        [step_fn(ddp, torch.optim.SGD(ddp.parameters(), lr=LR)),
         step_fn(single, torch.optim.SGD(single.parameters(), lr=LR))])
    return out


def main():
    global GLOO, PG
    mode = sys.argv[1] if len(sys.argv) > 1 else "test"
    torch_rbln.set_device(CARD)
    t0 = time.monotonic()
    dist.init_process_group("rbln", rank=RANK, world_size=WORLD)
    PG = dist.distributed_c10d._get_default_group()
    GLOO = torch_rbln.distributed.staging_group()
    report = {"rank": RANK, "card": CARD, "backend": dist.get_backend()}
    if mode == "bench":
        report["bench"] = bench()
    else:
        checks = [("all_reduce_" + op + "_" + str(dt).split(".")[1], check_all_reduce, (op, dt))
                  for op in OPS for dt in (torch.float32, torch.float16, torch.bfloat16)]
        checks += [("all_reduce_int64_sum", check_int64_sum, ()),
                   ("broadcast", check_broadcast, ()),
                   ("all_gather", check_all_gather, ()),
                   ("reduce_scatter", check_reduce_scatter, ()),
                   ("barrier", check_barrier, ()),
                   ("errors", check_errors, ()),
                   ("ddp", check_ddp, ())]
        results = {}
        for name, fn, args in checks:
            try:
                extra = fn(*args)
                results[name] = "ok"
                if extra:
                    report.update(extra)
            except Exception:  # noqa: BLE001 - reported to the test with its traceback
                results[name] = traceback.format_exc(limit=4)
        report["results"] = results
    report["seconds"] = time.monotonic() - t0
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
