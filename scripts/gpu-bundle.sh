#!/bin/sh
# The GPU bundle (issue 13, section 1; docs/kernels.md, "Running the GPU
# check from a bundle"): everything the GPU check (scripts/gpu-check.sh)
# runs, built here, for a GPU machine where nothing can be installed or
# compiled (the CUDA toolkit and driver are there, apt and network are not).
#
#   sh scripts/gpu-bundle.sh [BUILD_DIR] [OUT]
#
# Without BUILD_DIR it configures and builds a release build with CUDA in
# build-bundle/ (meson setup -Dbuildtype=release -Dcuda=enabled); with it,
# it only copies from that build, which must have the CUDA module.  OUT
# (default .gpu/ in the checkout) gets:
#
#   bin/servesim                         the binary
#   lib/servesim/servesim-cuda.so        the CUDA backend module
#   lib/*.so*                            every shared library those programs
#                                        need that is not glibc (nor the GCC
#                                        runtime), the NVIDIA driver or the
#                                        CUDA toolkit
#   tests/test-kernels                   the conformance suite (`cuda`)
#   tests/test-kernel-shapes             kernels/cuda/test/shapes.c
#   tests/test-graph                     graphed decode steps against eager (tests/test-graph.c)
#   share/servesim/data/                 catalogs, calibration.db, the trace
#   gpu-check.sh                         a copy of scripts/gpu-check.sh
#   kernel-class.py                      a copy of scripts/kernel-class.py (the check's kernel-class step)
#   env.sh                               sourced by the check: LD_LIBRARY_PATH,
#                                        SERVESIM_MODULE_DIR, SERVESIM_DATA
#   MANIFEST                             file, size, sha256
#
# The libraries are found by walking `ldd` of every bundled program.  Left
# out on purpose: the CPU backend (servesim-cpu.so: OpenBLAS alone, built
# for every x86 core, is 36 MB, with libgfortran and OpenMP over the 40 MiB
# limit by itself) and the MPI module (servesim plan across ranks): the check
# runs the CUDA backend, the reference backend built into the programs, and
# simulations, none of which loads either.  Fails, with one line, when nvcc
# is missing, a library is not found, or the bundle exceeds 40 MiB.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd) || exit 1
# the issue's limit; GPU_BUNDLE_LIMIT_MIB changes it (tests)
LIMIT_MIB=${GPU_BUNDLE_LIMIT_MIB:-40}

# one line, and no half-made bundle left behind (OUT is ours once made)
MADE=
die() {
	echo "gpu-bundle: $*" >&2
	[ -n "$MADE" ] && rm -rf "$OUT"
	exit 1
}

BUILD=${1:-}
OUT=${2:-$ROOT/.gpu}
[ $# -le 2 ] || { echo "usage: gpu-bundle.sh [BUILD_DIR] [OUT]" >&2; exit 2; }

if [ -z "$BUILD" ]; then
	BUILD=$ROOT/build-bundle
	# meson finds the toolkit through nvcc on PATH
	if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
		PATH=/usr/local/cuda/bin:$PATH
		export PATH
	fi
	command -v nvcc >/dev/null 2>&1 || die "nvcc not found (install the CUDA toolkit or put its bin/ on PATH)"
	if [ -f "$BUILD/build.ninja" ]; then
		set -- --reconfigure
	else
		set --
	fi
	mkdir -p "$BUILD" || die "cannot create $BUILD"
	LOG=$BUILD/gpu-bundle.log
	(cd "$ROOT" && meson setup "$@" -Dbuildtype=release -Dcuda=enabled -Dtests=enabled \
		"$BUILD" >"$LOG" 2>&1) || die "meson setup of $BUILD failed (see $LOG)"
	nice meson compile -C "$BUILD" >>"$LOG" 2>&1 || die "the build in $BUILD failed (see $LOG)"
fi
[ -d "$BUILD" ] || die "no build directory $BUILD"
BUILD=$(cd "$BUILD" && pwd)

# what goes in, as "source destination" (destination relative to OUT)
PROGS="servesim bin/servesim
servesim-cuda.so lib/servesim/servesim-cuda.so
tests/test-kernels tests/test-kernels
tests/test-kernel-shapes tests/test-kernel-shapes
tests/test-graph tests/test-graph"
echo "$PROGS" | while read -r src dst; do
	[ -f "$BUILD/$src" ] || { echo "$src"; break; }
done | {
	read -r missing || exit 0
	case $missing in
	servesim-cuda.so) die "no servesim-cuda.so in $BUILD: configure it with -Dcuda=enabled" ;;
	tests/*) die "no $missing in $BUILD: configure it with -Dtests=enabled" ;;
	*) die "no $missing in $BUILD" ;;
	esac
} || exit 1

# OUT is replaced whole; refuse a directory that is not an earlier bundle
if [ -e "$OUT" ]; then
	[ -d "$OUT" ] || die "$OUT exists and is not a directory"
	if [ -n "$(ls -A "$OUT")" ] && [ ! -f "$OUT/MANIFEST" ]; then
		die "$OUT is not empty and holds no bundle (no MANIFEST): not replacing it"
	fi
	rm -rf "$OUT" || die "cannot remove the old bundle $OUT"
fi
mkdir -p "$OUT/bin" "$OUT/lib/servesim" "$OUT/tests" "$OUT/share/servesim/data/traces" ||
	die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
MADE=1

echo "$PROGS" | while read -r src dst; do
	cp "$BUILD/$src" "$OUT/$dst" || exit 1
done || die "cannot copy the programs into $OUT"

# The shared libraries: what ldd resolves for every bundled ELF (its list
# is transitive), less glibc, the driver and the toolkit, which the GPU
# machine has and which must match its driver.  The GCC runtime (libstdc++,
# libgcc_s) is the machine's too: cuBLAS needs it from there anyway, the
# CUDA module asks only for its oldest symbol versions (CXXABI_1.3,
# GCC_3.0), and this system's copies would need glibc 2.36 and, first on
# LD_LIBRARY_PATH, would replace the machine's newer ones in every program
# the check starts.
is_system_lib() {
	case $1 in
	linux-vdso.so* | ld-linux*.so* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
	librt.so.* | libmvec.so.* | libresolv.so.* | libutil.so.* | libanl.so.*) return 0 ;;
	libstdc++.so.* | libgcc_s.so.*) return 0 ;;
	libcuda.so.* | libnvidia-*.so* | libcudart.so.* | libcublas.so.* | libcublasLt.so.*) return 0 ;;
	esac
	return 1
}
for f in "$OUT/bin/servesim" "$OUT"/lib/servesim/*.so "$OUT"/tests/*; do
	ldd "$f" >"$OUT/.ldd" 2>&1 || die "ldd $f failed: $(head -1 "$OUT/.ldd")"
	while read -r name arrow path rest; do
		# "name => path (addr)", "name => not found", "/path/ld-linux (addr)"
		[ "$arrow" = "=>" ] || continue
		is_system_lib "$name" && continue
		[ "$path" = not ] && die "$(basename "$f") needs $name, which ldd does not find here"
		[ -e "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name" ||
			die "cannot copy $path into $OUT/lib"
	done <"$OUT/.ldd"
done
rm -f "$OUT/.ldd"

# The data a run and the check read (SERVESIM_DATA): the catalogs, the
# shipped calibration store, the trace the check replays, their licences.
for f in models.json gpus.json engines.json stacks.json intervals.json acceptance.json calibration.db LICENSE-aiconfigurator-APACHE \
	LICENSE-vidur-MIT traces/azure_conv_2000.csv traces/LICENSE_CC-BY-4.0.txt; do
	cp "$ROOT/data/$f" "$OUT/share/servesim/data/$f" || die "cannot copy data/$f"
done
cp "$ROOT/LICENSE" "$ROOT/NOTICE" "$OUT/share/servesim/" || die "cannot copy LICENSE and NOTICE"
cp "$ROOT/scripts/gpu-check.sh" "$OUT/gpu-check.sh" && chmod +x "$OUT/gpu-check.sh" ||
	die "cannot copy scripts/gpu-check.sh"
cp "$ROOT/scripts/kernel-class.py" "$OUT/kernel-class.py" || die "cannot copy scripts/kernel-class.py"

# env.sh finds the bundle from its own location, so the folder can be
# copied anywhere.  Under bash that is BASH_SOURCE; a POSIX sh cannot tell
# which file it sources, so there it is the directory of the script that
# sources env.sh ($0: gpu-check.sh, beside it), or $G when set.
cat >"$OUT/env.sh" <<'EOF'
# servesim GPU bundle: sourced (`. env.sh`) by gpu-check.sh and by a shell
# that runs the bundled programs.  Sets G, the bundle's absolute directory.
# shellcheck disable=SC3028 # bash's; empty in a POSIX sh, which takes $0
_ss_src=${BASH_SOURCE:-$0}
_ss_dir=$(cd "$(dirname -- "$_ss_src")" 2>/dev/null && pwd)
if [ -n "$_ss_dir" ] && [ -x "$_ss_dir/bin/servesim" ]; then
	G=$_ss_dir
elif [ -n "${G:-}" ] && [ -x "$G/bin/servesim" ]; then
	G=$(cd "$G" && pwd)
else
	echo "env.sh: cannot tell where the bundle is: source it from bash or from a script beside it, or set G=/path/to/bundle" >&2
	unset _ss_src _ss_dir
	return 1 2>/dev/null || exit 1
fi
unset _ss_src _ss_dir
# The bundle's libraries first; then whatever the machine set (the CUDA
# toolkit's libcudart and libcublas are not in the bundle: they come from
# the machine, through ld.so.conf, LD_LIBRARY_PATH or the toolkit's lib).
LD_LIBRARY_PATH=$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for _ss_d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib"; do
	[ -d "$_ss_d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$_ss_d
done
unset _ss_d
SERVESIM_MODULE_DIR=$G/lib/servesim
SERVESIM_DATA=$G/share/servesim/data
export G LD_LIBRARY_PATH SERVESIM_MODULE_DIR SERVESIM_DATA
EOF

# MANIFEST: every file, its size and sha256, to check a copy against
(cd "$OUT" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort |
	while read -r f; do
		printf '%s %s %s\n' "$f" "$(wc -c <"$f" | tr -d ' ')" "$(sha256sum "$f" | cut -d' ' -f1)"
	done >MANIFEST) || die "cannot write $OUT/MANIFEST"

bytes=$(awk '{ s += $2 } END { print s + 0 }' "$OUT/MANIFEST")
size=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
nlib=$(find "$OUT/lib" -maxdepth 1 -name '*.so*' | wc -l)
if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
	die "the bundle $OUT is $size MiB, over the $LIMIT_MIB MiB limit"
fi
echo "gpu-bundle: $OUT: $size MiB, $(wc -l <"$OUT/MANIFEST") files, shared libraries bundled: $nlib; from $BUILD"
