#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan in
# build/fuzz and runs each one: first over its seeds (well-formed inputs
# and every input a fuzzer once failed on, written by the target itself),
# then for FUZZ_SECONDS of fuzzing from the seeds and the corpus kept in
# build/fuzz/corpus/<target>.  A crash, a sanitizer report, a broken
# invariant or an input slower than 20 s fails the run; the input is left
# in build/fuzz/artifacts/ and its libFuzzer log printed.  See
# tests/fuzz/README.md.
#
#   fuzz.sh [TARGET...]      emu_cmd, emu_admin, emu_control, emu_graph,
#                            umd_parse (default: all five)
#   fuzz.sh --configure-only configure build/fuzz (for clang-tidy), no build
#   fuzz.sh --build-only     configure and build, run nothing (the VM tier
#                            runs rbln_uapi_fuzz inside the VM)
#   FUZZ_SECONDS=N           fuzzing time per target (default 30)
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
b=$top/build/fuzz
mkdir -p "$b"

configure() {
	# One configure at a time: clang-tidy (lint-user.sh) may ask too.
	exec 9> "$b/.configure.lock"
	flock 9
	if [ ! -f "$b/CMakeCache.txt" ]; then
		CC=clang CXX=clang++ cmake -S "$top" -B "$b" -G "Unix Makefiles" \
			-DRBLN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$b/configure.log" 2>&1 ||
			{ cat "$b/configure.log" >&2; rm -f "$b/CMakeCache.txt"; exit 1; }
	fi
	exec 9>&-
}

configure
[ "${1:-}" = --configure-only ] && exit 0

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(emu_cmd emu_admin emu_control emu_graph umd_parse)
secs=${FUZZ_SECONDS:-30}

cmake --build "$b" -j"$(nproc)" > "$b/build.log" 2>&1 ||
	{ grep -E 'error|Error' "$b/build.log" >&2 || tail -n 40 "$b/build.log" >&2; exit 1; }
[ "${1:-}" = --build-only ] && exit 0

mkdir -p "$b/artifacts"
for t in "${targets[@]}"; do
	bin=$b/tests/fuzz/rbln_${t}_fuzz
	[ -x "$bin" ] || { echo "fuzz: no target '$t'" >&2; exit 2; }
	[ "$t" != uapi ] || { echo "fuzz: uapi runs in the VM (tools/scripts/test-vm.sh)" >&2; exit 2; }
	seeds=$b/seeds/$t
	corpus=$b/corpus/$t
	rm -rf "$seeds"
	mkdir -p "$corpus"
	RBLN_FUZZ_SEEDS=$seeds "$bin"
	log=$b/$t.log
	start=$(date +%s)
	if ! "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix="$b/artifacts/$t-" \
		"$corpus" "$seeds" > "$log" 2>&1; then
		grep -v '^#[0-9]' "$log" | tail -n 60 >&2
		echo "fuzz: $t failed; the input: $(ls -t "$b/artifacts/$t-"* 2>/dev/null | head -n 1)" >&2
		exit 1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
	echo "fuzz: $t clean: ${runs:-?} inputs in $(( $(date +%s) - start ))s, $cov," \
		"corpus $(find "$corpus" -type f | wc -l) + $(find "$seeds" -type f | wc -l) seeds"
done
