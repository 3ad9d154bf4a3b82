#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Lint of everything outside kernel/: clang-format and clang-tidy on the
# user-space C/C++ (umd/, tools/, tests/), checkpatch --strict on the C that
# follows kernel style (kselftests, the runner's test modules).
# usage: lint-user.sh CMAKE_BUILD_DIR
# RBLN_LINT_TIDY=skip runs all but clang-tidy, =only clang-tidy alone (make
# test runs the two apart, clang-tidy beside the build and the tests).
set -uo pipefail
mode=${RBLN_LINT_TIDY:-all}
case $mode in all | skip | only) ;; *)
	echo "lint-user.sh: RBLN_LINT_TIDY=$mode: use all, skip or only" >&2
	exit 2 ;;
esac
top=$(cd "$(dirname "$0")/../.." && pwd)
bdir=${1:-$top/build/cmake}
cd "$top"
status=0

kstyle='^(tests/kselftest/|tests/runner/(warn|debug)-module/|tests/runner/buddy-repro/|tests/dmabuf-importer/)'
mapfile -t user < <(git ls-files 'umd/*' 'tools/*' 'tests/*' |
	grep -E '\.(c|cc|cpp|h|hpp)$' | grep -Ev "$kstyle")
mapfile -t kfiles < <(git ls-files 'tests/*' | grep -E '\.(c|h)$' | grep -E "$kstyle")

if [ "${#user[@]}" -gt 0 ]; then
	if [ "$mode" != only ] && ! clang-format --dry-run --Werror "${user[@]}"; then
		echo "lint: clang-format findings (fix with clang-format -i)" >&2
		status=1
	fi
	mapfile -t tus < <(printf '%s\n' "${user[@]}" | grep -E '\.(c|cc|cpp)$')
	batches=()
	if [ "$mode" != skip ] && [ "${#tus[@]}" -gt 0 ]; then
		[ -f "$bdir/compile_commands.json" ] ||
			cmake -S "$top" -B "$bdir" -G "Unix Makefiles" >/dev/null
		# tests/fuzz builds only in the clang fuzzing build: its flags
		# come from there (configured here if need be, no build).
		export RBLN_FUZZ_BUILD=$top/build/fuzz
		if grep -q '^tests/fuzz/' <<<"$(printf '%s\n' "${tus[@]}")"; then
			"$top/tools/scripts/fuzz.sh" --configure-only >/dev/null
		fi
		# Test binaries built in unity batches (RBLN_UNITY_TESTS): the
		# batches are what compile_commands.json lists, and what gets
		# linted, in place of their member files (diagnostics still name
		# the member file and line).
		mapfile -t batches < <(sed -n 's/^ *"file": "\(.*\/Unity\/unity_[^"]*\)",\{0,1\}$/\1/p' \
			"$bdir/compile_commands.json")
		if [ "${#batches[@]}" -gt 0 ]; then
			mapfile -t members < <(sed -n 's|^#include "'"$top"'/\(.*\)"$|\1|p' "${batches[@]}")
			mapfile -t tus < <(printf '%s\n' "${tus[@]}" |
				grep -vxF -f <(printf '%s\n' "${members[@]}"))
		fi
		# umd/torch (torch_rbln, its own CMake project): clang-format
		# only.  clang 14 cannot parse PyTorch 1.13's headers as C++20
		# (std::vector<c10::IValue> of an incomplete type fails its
		# static_asserts), and librbln's public headers need C++20; g++
		# builds it with -Wall -Wextra.
		mapfile -t tus < <(printf '%s\n' "${tus[@]}" | grep -v '^umd/torch/')
		# Product code gets every check; test code (GoogleTest macros make
		# the static analyzer slow and say little) all but clang-analyzer.
		# One queue for all, longest runs first (the batches, then product
		# code with its analyzer runs), so neither core idles at the end.
		out=$( {
			[ "${#batches[@]}" -eq 0 ] || printf '%s\n' "${batches[@]}"
			printf '%s\n' "${tus[@]}" | grep -v '^tests/'
			printf '%s\n' "${tus[@]}" | grep '^tests/'
		} | xargs -r -P "$(nproc)" -n 1 sh -c '
				case $1 in
				tests/fuzz/*) exec clang-tidy -p "$RBLN_FUZZ_BUILD" --quiet --checks="-clang-analyzer-*" "$1" ;;
				tests/*) exec clang-tidy -p "$0" --quiet --checks="-clang-analyzer-*" "$1" ;;
				*/Unity/*) exec clang-tidy -p "$0" --quiet --checks="-clang-analyzer-*,-bugprone-suspicious-include" "$1" ;;
				*) exec clang-tidy -p "$0" --quiet "$1" ;;
				esac' "$bdir" 2>/dev/null)
		if echo "$out" | grep -Eq '(warning|error):'; then
			echo "$out" >&2
			echo "lint: clang-tidy findings" >&2
			status=1
		fi
	fi
fi

if [ "$mode" != only ] && [ "${#kfiles[@]}" -gt 0 ]; then
	# CAMELCASE, PREFER_KERNEL_TYPES: the tests call user-space libraries
	# (libdrm's drmSyncobj* take uint64_t arrays).
	if ! perl "$top/build/linux-src/scripts/checkpatch.pl" --strict --no-tree \
		--terse --show-types --ignore CAMELCASE,PREFER_KERNEL_TYPES -f "${kfiles[@]}" > /tmp/rbln-cp.$$ 2>&1; then
		cat /tmp/rbln-cp.$$ >&2
		echo "lint: checkpatch findings in kernel-style test code" >&2
		status=1
	fi
	rm -f /tmp/rbln-cp.$$
fi

# torch_rbln's Python (umd/torch, tests/torch): flake8 where installed.
if [ "$mode" != only ] && /usr/bin/python3 -m flake8 --version >/dev/null 2>&1; then
	mapfile -t py < <(git ls-files 'umd/torch/*.py' 'tests/torch/*.py')
	if [ "${#py[@]}" -gt 0 ] && ! /usr/bin/python3 -m flake8 --max-line-length 100 "${py[@]}" >&2; then
		echo "lint: flake8 findings" >&2
		status=1
	fi
fi

[ "$status" = 0 ] && case $mode in
	all) echo "lint: user space clean (${#user[@]} files), kernel-style tests clean (${#kfiles[@]} files)" ;;
	skip) echo "lint: clang-format clean (${#user[@]} files), kernel-style tests clean (${#kfiles[@]} files); clang-tidy not run" ;;
	only) echo "lint: clang-tidy clean (${#tus[@]} files, ${#batches[@]} test batches)" ;;
	esac
exit "$status"
