# SPDX-License-Identifier: GPL-2.0
"""The Python surface: the device module, torch.cuda's names and
signatures.  Runs on the host too (no card needed)."""

import inspect

import torch
import torch_rbln

CUDA_NAMES = [
    "device_count", "is_available", "current_device", "set_device", "device",
    "synchronize", "Stream", "Event", "stream", "current_stream", "default_stream",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_stats",
    "memory_summary", "empty_cache",
]


def test_import_registers_the_module_as_torch_privateuseone_and_torch_rbln():
    assert torch.privateuseone is torch_rbln
    assert torch.rbln is torch_rbln
    assert torch_rbln.DEVICE_TYPE in ("privateuseone", "rbln")


def test_the_device_api_has_torch_cudas_names_and_parameters():
    for name in CUDA_NAMES:
        ours = getattr(torch_rbln, name)
        theirs = getattr(torch.cuda, name)
        assert callable(ours), name
        if inspect.isfunction(theirs) and inspect.isfunction(ours):
            assert list(inspect.signature(ours).parameters) == \
                list(inspect.signature(theirs).parameters), name
    assert list(inspect.signature(torch_rbln.Event.__init__).parameters)[1:] == \
        ["enable_timing", "blocking", "interprocess"]
    for method in ("record", "query", "synchronize", "wait", "elapsed_time"):
        assert hasattr(torch_rbln.Event, method), method
    for method in ("query", "synchronize", "wait_event", "wait_stream", "record_event"):
        assert hasattr(torch_rbln.Stream, method), method
    for name in ("physical_device_count", "memory_stats_per_chiplet", "bind_device_memory",
                 "set_device_layout_like", "huge_host_empty", "offload", "explain",
                 "pin_memory", "empty_pinned"):
        assert callable(getattr(torch_rbln, name)), name


def test_device_strings_parse_to_logical_indices():
    from torch_rbln._device import _index
    t = torch_rbln.DEVICE_TYPE
    assert _index(f"{t}:3") == 3 and _index(torch.device(t, 2)) == 2 and _index(5) == 5
    assert _index(None) == torch_rbln.current_device()
