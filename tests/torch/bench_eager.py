# SPDX-License-Identifier: GPL-2.0
"""Eager op rate through torch vs librbln's own ops on the same card, and
the cost of the CPU fallback, as ratios of one run (tests/torch/README.md).

    tools/vm/rbln-vm -q -- env PYTHONPATH=build/torch /usr/bin/python3 \\
        tests/torch/bench_eager.py
"""

import time

import torch
import torch_rbln


def rate(fn, iters):
    """Operations per second of fn() (synchronized at the end)."""
    fn()
    torch_rbln.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch_rbln.synchronize()
    return iters / (time.perf_counter() - t0)


def main():
    dev = torch_rbln.device_of(0)
    iters = 300
    print(f"torch_rbln eager bench, {iters} iterations per row (ops/s)")
    for n in (64, 512):
        x = torch.randn(n, n).to(dev)
        y = torch.randn(n, n).to(dev)
        own = iters / torch_rbln._C.bench_librbln_add(0, n * n, iters)
        alloc = rate(lambda: x + y, iters)
        inplace = rate(lambda: x.add_(y), iters)
        print(f"  add {n}x{n} fp32: librbln ops::add {own:8.0f}   torch x + y {alloc:8.0f} "
              f"({alloc / own:.2f}x)   torch x.add_(y) {inplace:8.0f} ({inplace / own:.2f}x)")
    for n in (64, 512):
        x = torch.randn(n, n).to(dev)
        xc = x.cpu()
        card = rate(lambda: torch.relu(x), iters // 3)
        fallback = rate(lambda: torch.sigmoid(x), iters // 3)
        cpu = rate(lambda: torch.sigmoid(xc), iters // 3)
        print(f"  {n}x{n} fp32: relu on the card {card:8.0f}   sigmoid by CPU fallback "
              f"{fallback:8.0f} ({card / fallback:.1f}x slower)   sigmoid on the CPU {cpu:8.0f}")


if __name__ == "__main__":
    main()
