# SPDX-License-Identifier: GPL-2.0
"""torch.distributed ``rbln`` backend bench (make bench-dist, in the VM of
two Rebel100 cards): two ranks, each on its own card.

all_reduce (SUM, fp32) of rbln tensors through the ``rbln`` backend against
gloo's all_reduce of CPU tensors of the same size in the same run (the
``rbln`` group's own gloo group): the ratio is the staging's cost (device
to pinned host, gloo, host to device).  Then one DistributedDataParallel
step (forward, backward with the gradient all_reduce, SGD) against one
process's step of the same model and batch.  Bandwidth is algorithm
bandwidth: bytes / time per all_reduce.  Each figure is the best of three
interleaved rounds (dist_worker.py's best_of).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_distributed import run_ranks  # noqa: E402


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main():
    reports = run_ranks("bench", timeout=1800)
    b = reports[0]["bench"]  # rank 0's timings (ranks run in lock step)
    print("| size | rbln all_reduce | gloo all_reduce (CPU) | rbln / gloo time |")
    print("| ---: | ---: | ---: | ---: |")
    for row in b["allreduce"]:
        n, tr, tg = row["bytes"], row["rbln_s"], row["gloo_s"]
        print(f"| {size_name(n)} | {tr * 1e3:.2f} ms ({n / tr / 2**20:.1f} MiB/s) "
              f"| {tg * 1e3:.2f} ms ({n / tg / 2**20:.1f} MiB/s) | {tr / tg:.2f} |")
    d, s = b["ddp_step_s"], b["single_step_s"]
    print()
    print("| step | time | ratio |")
    print("| --- | ---: | ---: |")
    print(f"| one process (no DDP) | {s * 1e3:.1f} ms | 1.00 |")
    print(f"| DDP, 2 ranks on 2 cards | {d * 1e3:.1f} ms | {d / s:.2f} |")


if __name__ == "__main__":
    main()
