#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Soft-RoCE for the RDMA tests, inside the VM: rdma_rxe on a dummy netdev
# (rbln-rdma0, 10.77.0.1/24) as device rxe0.  RoCE v2 between processes of
# one machine loops back inside rxe.  rxe needs the crc32 shash, which the
# VM's kernel cannot load on demand (no module loader behind it): it is
# loaded here first.
set -euo pipefail
modprobe crc32_generic
modprobe rdma_rxe
modprobe dummy
ip link show rbln-rdma0 >/dev/null 2>&1 || ip link add rbln-rdma0 type dummy
ip addr replace 10.77.0.1/24 dev rbln-rdma0
ip link set rbln-rdma0 up
rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev rbln-rdma0
