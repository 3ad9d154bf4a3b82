#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Installs librbln from a build tree into a staging directory and builds two
# consumers against the installed files only: a C program through
# pkg-config (rbln.pc, rbln.h) and a C++ program through find_package(rbln)
# (rbln::rbln and rbln::rbln_static) that uses the umbrella header as a
# framework would (devices, streams, storages, operators, the allocator's
# statistics).  Runs them and checks the version.
#
# The public surface: exactly the headers of umd/include/rbln are
# installed (none of umd/src's internal ones), each compiles on its own
# against the install alone, and librbln.so exports no internal symbol
# (check_exports.sh, which also prints how many it exports).
#
#   install_test.sh BUILD_DIR EXPECTED_VERSION
#
# The install goes to DESTDIR=<tmp>/stage with --prefix /opt/rbln, so the
# files are used from a place other than the prefix they were installed
# for: rbln.pc and rblnConfig.cmake have to be relocatable.
set -euo pipefail

build=$1
want=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/rbln-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "install_test: $*" >&2
	exit 1
}

DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/rbln >"$tmp/install.log" ||
	{ cat "$tmp/install.log"; fail "cmake --install failed"; }
prefix=$tmp/stage/opt/rbln
pc=$(find "$prefix" -path '*/pkgconfig/rbln.pc' | head -n1)
[ -n "$pc" ] || fail "no rbln.pc installed"
libdir=$(dirname "$(dirname "$pc")")

for f in include/rbln/rbln.h include/rbln/rbln.hpp; do
	[ -f "$prefix/$f" ] || fail "$f not installed"
done
# The installed headers are the public ones, no more, no less.
src=$(cd "$here/../.." && pwd)/umd
want_headers=$(cd "$src/include" && find rbln -type f | sort)
got_headers=$(cd "$prefix/include" && find rbln -type f | sort)
[ "$got_headers" = "$want_headers" ] ||
	fail "installed headers differ from umd/include/rbln:
$(diff <(echo "$want_headers") <(echo "$got_headers") | sed -n 's/^[<>]/   &/p')"
while read -r internal; do
	name=$(basename "$internal")
	[ -z "$(find "$prefix/include" -name "$name")" ] || fail "internal header $name installed"
done < <(find "$src/src" -name '*.hpp' -o -name '*.h')
# Each header compiles alone against the install (no source tree, no
# uAPI or firmware-iface headers); the C ones as C too.
for h in $got_headers; do
	echo "#include <$h>" >"$tmp/one.cpp"
	c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/one.cpp" ||
		fail "$h does not compile on its own against the installed headers"
	case $h in
	*.h)
		printf '#include <%s>\nint one;\n' "$h" >"$tmp/one.c"
		cc -std=c11 -pedantic -Wall -Werror -fsyntax-only -I"$prefix/include" "$tmp/one.c" ||
			fail "$h does not compile as C on its own"
		;;
	esac
done
[ -f "$libdir/librbln.a" ] || fail "librbln.a not installed"
soname=$(readelf -d "$libdir/librbln.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "librbln.so.${want%%.*}" ] || fail "soname '$soname', want librbln.so.${want%%.*}"
[ -f "$libdir/$soname" ] || fail "$soname not installed"
"$here/check_exports.sh" "$libdir/$soname" "$prefix/include"

# C through pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
got=$(pkg-config --modversion rbln)
[ "$got" = "$want" ] || fail "pkg-config --modversion rbln: '$got', want '$want'"
# shellcheck disable=SC2046 # word splitting of the flags is intended
cc -std=c11 -Wall -Werror -o "$tmp/consumer_c" "$here/consumer/consumer.c" \
	$(pkg-config --cflags --libs rbln) -Wl,-rpath,"$(pkg-config --variable=libdir rbln)" ||
	fail "the C consumer did not build"
readelf -d "$tmp/consumer_c" | grep "NEEDED.*\[$soname\]" >/dev/null ||
	fail "the C consumer does not need $soname"
# A static link takes its extra libraries (libdrm, liburing, the C++
# runtime) from rbln.pc's private fields; libdir points at a directory that
# holds only librbln.a, so -lrbln cannot pick the shared library.
mkdir "$tmp/static-only"
ln -s "$libdir/librbln.a" "$tmp/static-only/librbln.a"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$tmp/consumer_c_static" "$here/consumer/consumer.c" \
	$(pkg-config --define-variable=libdir="$tmp/static-only" --static --cflags --libs rbln) ||
	fail "the static C consumer did not link with pkg-config --static"

# C++ through find_package.
cmake -S "$here/consumer" -B "$tmp/cxx" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_BUILD_TYPE=Release >"$tmp/cxx.log" 2>&1 ||
	{ cat "$tmp/cxx.log"; fail "find_package(rbln) failed"; }
cmake --build "$tmp/cxx" -j2 >>"$tmp/cxx.log" 2>&1 ||
	{ cat "$tmp/cxx.log"; fail "the C++ consumers did not build"; }
readelf -d "$tmp/cxx/consumer_shared" | grep "NEEDED.*\[$soname\]" >/dev/null ||
	fail "consumer_shared does not need $soname"
if readelf -d "$tmp/cxx/consumer_static" | grep 'NEEDED.*librbln' >/dev/null; then
	fail "consumer_static needs librbln.so"
fi

for exe in "$tmp/consumer_c" "$tmp/consumer_c_static" "$tmp/cxx/consumer_shared" "$tmp/cxx/consumer_static"; do
	out=$("$exe") || fail "$(basename "$exe") exited with $?"
	echo "$out"
	case $out in
	*"librbln $want, "*" logical devices"*) ;;
	*) fail "$(basename "$exe") printed '$out'" ;;
	esac
done
# The shared consumer must have run the installed library, not the build's.
LD_DEBUG=libs "$tmp/cxx/consumer_shared" 2>&1 >/dev/null | grep "calling init: $libdir/$soname" >/dev/null ||
	fail "consumer_shared did not load $libdir/$soname"
echo "install_test: ok"
