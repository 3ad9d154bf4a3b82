# SPDX-License-Identifier: GPL-2.0
"""Memory: the caching allocator's statistics under torch.cuda's names,
pinned and huge host memory, device layouts, offload scopes and explain.

A device tensor's storage is a librbln lazy storage from the caching
allocator: creating a tensor commits no device memory (memory_allocated()
does not move) until a device operation uses it.  Statistics never commit
the device mapping.
"""

import collections
import contextlib
import sys

import torch

from . import _C
from ._device import _index


def memory_stats(device=None):
    """The allocator's statistics (torch.cuda.memory_stats keys)."""
    stats = _C.memory_stats(_index(device))
    return collections.OrderedDict(sorted(stats.items()))


def memory_stats_per_chiplet(device=None):
    """Every chiplet's statistics, keys prefixed ``npu.<n>.chiplet.<c>.``."""
    stats = _C.memory_stats_per_chiplet(_index(device))
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device=None):
    return _C.memory_allocated(_index(device))


def memory_reserved(device=None):
    return _C.memory_reserved(_index(device))


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_index(device))


def max_memory_reserved(device=None):
    return _C.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    _C.reset_accumulated_memory_stats(_index(device))


def memory_summary(device=None, abbreviated=False):
    """The per-chiplet table: one row per NPU and chiplet and a total row."""
    return _C.memory_summary(_index(device))


def empty_cache():
    """Gives the cached, unused device memory of the current device back."""
    _C.empty_cache(_index(None))


def set_per_process_memory_fraction(fraction, device=None):
    _C.set_per_process_memory_fraction(fraction, _index(device))


def storage_info(tensor):
    """The librbln storage behind a device tensor: residency, coherence,
    transfers (for tests and diagnostics)."""
    return _C.storage_info(tensor)


def bind_device_memory(tensor):
    """Gives ``tensor`` its device memory now, as one flat region, so that
    non-blocking copies from pinned memory into it are asynchronous."""
    _C.bind_device_memory(tensor)
    return tensor


def set_device_layout_like(tensor, ref):
    """Gives ``tensor``'s storage the device layout of ``ref`` (no data moves)."""
    _C.set_device_layout_like(tensor, ref)
    return tensor


def _sizes(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        return list(size[0])
    return list(size)


def empty_pinned(*size, dtype=None, device=None):
    """An uninitialised CPU tensor in pinned memory of ``device``: copies
    between it and the device can be asynchronous (non_blocking=True).
    PyTorch 1.13's Tensor.pin_memory() is CUDA's; this is rbln's."""
    dtype = dtype or torch.get_default_dtype()
    return _C.empty_pinned(_sizes(size), dtype, _index(device))


def pin_memory(tensor, device=None):
    """A pinned copy of the CPU tensor ``tensor`` (Tensor.pin_memory())."""
    out = empty_pinned(tensor.shape, dtype=tensor.dtype, device=device)
    out.copy_(tensor)
    return out


def is_pinned(tensor, device=None):
    return _C.is_pinned(tensor, _index(device))


def huge_host_empty(*size, dtype=None, device=None):
    """A CPU tensor in a 2 MiB-aligned, NUMA-local, pinned buffer backed by
    huge pages where the system has them (``tensor.rbln_backing`` says
    which: hugetlb, thp or small-pages)."""
    dtype = dtype or torch.get_default_dtype()
    tensor, backing = _C.huge_host_empty(_sizes(size), dtype, _index(device))
    tensor.rbln_backing = backing
    return tensor


@contextlib.contextmanager
def offload(directory=""):
    """Host copies of the tensors created in the block go to a file at the
    block's end and come back when used (librbln offload scopes)."""
    scope = _C.OffloadScope(directory)
    try:
        yield scope
    finally:
        scope.close()


class explain:
    """What torch_rbln did behind the caller's back in a block: pushes,
    downloads, host bounces, waits and CPU fallbacks.

        with torch_rbln.explain("step") as e:
            ...
        print(e.report())   # "[clean]" when nothing crossed the host
    """

    def __init__(self, name=""):
        self.name = name
        self._region = None

    def __enter__(self):
        caller = sys._getframe(1)
        self._region = _C.Explain(self.name, caller.f_code.co_filename, caller.f_lineno)
        return self

    def __exit__(self, *exc):
        self._region.close()
        return False

    def report(self):
        return self._region.report()

    @property
    def counts(self):
        return self._region.counts()

    @property
    def clean(self):
        return self.counts["signals"] == 0

    @property
    def cpu_fallbacks(self):
        return list(self._region.fallbacks)

    def __str__(self):
        return self.report()
