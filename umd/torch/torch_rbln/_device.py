# SPDX-License-Identifier: GPL-2.0
"""Devices: torch.cuda's device functions for rbln logical devices.

Queries (device_count, physical_device_count, is_available) plan the
device mapping from RBLN_VISIBLE_DEVICES, RBLN_NPUS_PER_DEVICE and
RBLN_DEVICE_MAP and commit nothing; the first real use (an operation on a
tensor, synchronize, a stream) fixes it, as in librbln.
"""

import torch

from . import _C

DEVICE_TYPE = _C.device_type_name()


def device_of(index):
    """torch.device of logical device ``index``."""
    return torch.device(DEVICE_TYPE, index)


def _index(dev=None, optional=True):
    """The logical device index ``dev`` names (None: the current one)."""
    if dev is None:
        return _C.current_device()
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != DEVICE_TYPE:
            raise ValueError(f"expected an {DEVICE_TYPE} device, got {dev}")
        return _C.current_device() if dev.index is None else dev.index
    if isinstance(dev, int):
        if dev < 0 and optional:
            return _C.current_device()
        return dev
    raise TypeError(f"expected a device, an index or None, got {dev!r}")


def device_count():
    """Logical devices visible to the process (0 without driver or cards)."""
    return _C.device_count()


def physical_device_count():
    """Visible NPUs, whatever their grouping into logical devices."""
    return _C.physical_device_count()


def is_available():
    return _C.is_available()


def current_device():
    return _C.current_device()


def set_device(device):
    """Makes ``device`` the calling thread's current device."""
    _C.set_device(_index(device, optional=False))


def synchronize(device=None):
    """Waits for every stream of ``device`` (default: the current device)."""
    _C.synchronize(_index(device))


class device:
    """Context manager that changes the current device (torch.cuda.device)."""

    def __init__(self, dev):
        self.idx = _index(dev, optional=True) if dev is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.prev_idx)
        return False
