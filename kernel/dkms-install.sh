#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel/dkms-install.sh [--build-only | --remove] [KVER]
#
# Copies exactly what DKMS needs (dkms.conf, kernel/ sources, include/uapi/,
# firmware-iface/, tools/scripts/kernel-features.sh) to /usr/src/rbln-<ver>/
# and runs dkms add, build and install for KVER (default: build/kver, else
# the running kernel).  An earlier registration of the same version is
# removed first, so the installed module always matches this tree.
#
#   --build-only  add + build, do not install
#   --remove      remove rbln-<ver> from DKMS and /usr/src
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
mode=install
case ${1:-} in
--build-only) mode=build; shift ;;
--remove) mode=remove; shift ;;
-h | --help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

die() {
	echo "dkms-install: $*" >&2
	exit 1
}

kver=${1:-${KVER:-}}
[ -n "$kver" ] || kver=$(cat "$top/build/kver" 2>/dev/null || true)
[ -n "$kver" ] || kver=$(uname -r)

ver=$(sed -n 's/^#define RBLN_DRIVER_VERSION[[:space:]]*"\(.*\)"$/\1/p' "$top/kernel/rbln_drv.h")
[ -n "$ver" ] || die "cannot read RBLN_DRIVER_VERSION from kernel/rbln_drv.h"
conf_ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
[ "$ver" = "$conf_ver" ] ||
	die "dkms.conf PACKAGE_VERSION ($conf_ver) differs from MODULE_VERSION ($ver)"

command -v dkms >/dev/null || die "dkms is not installed (tools/scripts/install-deps.sh installs it)"
[ "$(id -u)" = 0 ] || die "must run as root"

src=/usr/src/rbln-$ver

if dkms status -m rbln -v "$ver" 2>/dev/null | grep -q .; then
	dkms remove -m rbln -v "$ver" --all >/dev/null
fi
rm -rf "$src"
if [ "$mode" = remove ]; then
	echo "dkms-install: removed rbln $ver"
	exit 0
fi

[ -d "/lib/modules/$kver/build" ] ||
	die "no headers for kernel $kver (/lib/modules/$kver/build); install linux-headers-$kver"

mkdir -p "$src/kernel" "$src/include/uapi/drm" "$src/firmware-iface" "$src/tools/scripts"
cp "$top/dkms.conf" "$src/"
cp "$top/kernel/Kbuild" "$top/kernel/Makefile" "$src/kernel/"
for f in "$top"/kernel/*.c "$top"/kernel/*.h; do
	case $(basename "$f") in
	*.mod.c | rbln_config.h) ;;
	*) cp "$f" "$src/kernel/" ;;
	esac
done
cp "$top/include/uapi/drm/rbln_accel.h" "$src/include/uapi/drm/"
cp "$top"/firmware-iface/*.h "$src/firmware-iface/"
cp "$top/tools/scripts/kernel-features.sh" "$src/tools/scripts/"
chmod 0755 "$src/tools/scripts/kernel-features.sh"

dkms add -m rbln -v "$ver"
if ! dkms build -m rbln -v "$ver" -k "$kver"; then
	log=/var/lib/dkms/rbln/$ver/build/make.log
	[ -r "$log" ] && tail -n 30 "$log" >&2
	die "dkms build failed for $kver"
fi
if [ "$mode" = install ]; then
	dkms install -m rbln -v "$ver" -k "$kver"
	echo "dkms-install: rbln $ver installed for $kver: $(modinfo -k "$kver" -n rbln 2>/dev/null || echo '?')"
else
	echo "dkms-install: rbln $ver built for $kver (not installed)"
fi
