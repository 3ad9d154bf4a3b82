#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the rbln test VM's initramfs: static busybox, tools/vm/init, and
# the 9p modules of the VM kernel (decompressed; busybox insmod reads no xz).
# usage: mkinitramfs.sh KVER OUT.cpio.gz [MODROOT]
# MODROOT: the modules are under MODROOT/lib/modules/KVER (a kernel built in
# the tree, e.g. the debug kernel) instead of /lib/modules/KVER.
set -euo pipefail
kver=$1
out=$2
modroot=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
# Runs started at once may rebuild the same initramfs: each writes its own
# file next to OUT and renames it into place.
part=""
trap 'rm -rf "$tmp" ${part:+"$part"}' EXIT
part=$(mktemp "$out.XXXXXX")

mkdir -p "$tmp"/{bin,dev,proc,sys,host,lib/modules}
cp /bin/busybox "$tmp/bin/busybox"
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' ||
	ldd /bin/busybox 2>&1 | grep -q 'not a dynamic' ||
	{ echo "mkinitramfs: /bin/busybox is not static (install busybox-static)" >&2; exit 1; }
install -m 0755 "$here/init" "$tmp/init"
for m in netfs 9pnet 9pnet_virtio 9p; do
	f=$(modinfo ${modroot:+-b "$modroot"} -k "$kver" -n "$m")
	case "$f" in
	*.xz) xz -dc "$f" > "$tmp/lib/modules/$m.ko" ;;
	*.zst) zstd -dc "$f" > "$tmp/lib/modules/$m.ko" ;;
	*) cp "$f" "$tmp/lib/modules/$m.ko" ;;
	esac
done
(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) > "$part"
chmod 0644 "$part"
mv "$part" "$out"
