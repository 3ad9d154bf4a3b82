#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the test importer module against a kernel build tree and prints
# the .ko's path:  build.sh <kernel build dir> <output dir>
set -euo pipefail
kdir=$1 out=$2
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cp "$src/Kbuild" "$src/rbln_dmabuf_importer.c" "$out/"
make -s -C "$kdir" M="$(cd "$out" && pwd)" modules >/dev/null
echo "$(cd "$out" && pwd)/rbln_dmabuf_importer.ko"
