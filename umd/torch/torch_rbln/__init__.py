# SPDX-License-Identifier: GPL-2.0
"""torch_rbln: RBLN NPUs as a PyTorch device, over librbln.

``import torch_rbln`` registers the device module, so that both
``torch.privateuseone.<fn>`` and ``torch.rbln.<fn>`` are this module.  The
device API has ``torch.cuda``'s names, signatures and semantics; CUDA code
ports by changing the module name and the device string.  In PyTorch 1.13
the device string is ``privateuseone:N`` (``torch_rbln.DEVICE_TYPE``); from
PyTorch 2.1 on, ``torch.utils.rename_privateuse1_backend('rbln')`` is called
and it is ``rbln:N``.  See umd/torch/README.md.
"""

import atexit
import logging
import sys

import torch

from . import _C
from ._compile import compile
from . import _distributed as distributed
from ._device import (DEVICE_TYPE, current_device, device, device_count,
                      device_of, is_available, physical_device_count,
                      set_device, synchronize)
from ._memory import (bind_device_memory, empty_cache, empty_pinned, explain,
                      huge_host_empty, is_pinned, max_memory_allocated,
                      max_memory_reserved, memory_allocated, memory_reserved,
                      memory_stats, memory_stats_per_chiplet, memory_summary,
                      offload, pin_memory, reset_accumulated_memory_stats,
                      reset_peak_memory_stats, set_device_layout_like,
                      set_per_process_memory_fraction, storage_info)
from ._streams import (Event, Stream, StreamContext, current_stream,
                       default_stream, set_stream, stream)

__all__ = [
    "DEVICE_TYPE", "Event", "Stream", "StreamContext", "bind_device_memory",
    "compile",
    "current_device", "current_stream", "default_stream", "device",
    "device_count", "device_of", "distributed", "empty_cache", "empty_pinned", "explain",
    "fallback_ops", "huge_host_empty", "is_available", "is_pinned",
    "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_stats_per_chiplet",
    "memory_summary", "offload", "physical_device_count", "pin_memory",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats",
    "set_device", "set_device_layout_like",
    "set_per_process_memory_fraction", "set_stream", "storage_info",
    "stream", "synchronize",
]

logger = logging.getLogger("torch_rbln")


def fallback_ops():
    """Names of the operators that ran through the CPU fallback so far."""
    return list(_C.fallback_ops())


def _log_fallback(name):
    logger.info("%s is not implemented for rbln devices: it runs on the "
                "CPU (inputs downloaded, outputs uploaded); explain() "
                "counts it as cpu_fallback", name)


def _register():
    module = sys.modules[__name__]
    rename = getattr(torch.utils, "rename_privateuse1_backend", None)
    if rename is not None:  # PyTorch >= 2.1: the device is called rbln
        rename("rbln")
    for name in ("privateuseone", "rbln"):
        if getattr(torch, name, None) is None:
            setattr(torch, name, module)
            sys.modules["torch." + name] = module
    _C.set_fallback_logger(_log_fallback)
    # The logger holds Python objects: drop it before the interpreter goes.
    atexit.register(_C.set_fallback_logger, None)


_register()
