# SPDX-License-Identifier: GPL-2.0
"""torch.distributed backend ``rbln`` for tensors on rbln devices.

``import torch_rbln`` registers it, so that::

    torch.distributed.init_process_group("rbln", ...)
    torch_rbln.set_device(local_rank)            # one card per process
    torch.distributed.all_reduce(t)              # t on torch_rbln.device_of(local_rank)

works like NCCL for CUDA: all_reduce (SUM, AVG, MAX, MIN, PRODUCT),
broadcast, all_gather (and into one tensor), reduce_scatter (and from one
tensor), reduce, send / recv, barrier, and DistributedDataParallel over
it.  The process group is a C++ ``c10d::ProcessGroup`` (csrc/distributed.cpp)
that stages each tensor through librbln pinned host memory into a gloo
process group made on the same store (TCP; ``GLOO_SOCKET_IFNAME`` picks
the interface between machines).  Collectives are synchronous: the
returned work is complete.
"""

import datetime

import torch.distributed as dist

from . import _C

BACKEND = "rbln"


def _create_process_group(store, rank, size, timeout):
    """The creator ``Backend.register_backend`` calls (store, rank, world
    size, timeout): a gloo group on a prefix of the same store, wrapped."""
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("rbln.staging/", store), rank, size,
                                 timeout)
    return _C.new_process_group(gloo, rank, size)


def staging_group(group=None):
    """The gloo process group under an ``rbln`` group (default: the
    default group): the same ranks, for CPU tensors."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    return _C.staging_group(group)


def _register():
    if not dist.is_available() or hasattr(dist.Backend, BACKEND.upper()):
        return
    dist.Backend.register_backend(BACKEND, _create_process_group)


_register()
