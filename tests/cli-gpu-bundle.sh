#!/bin/sh
# The GPU bundle (scripts/gpu-bundle.sh; docs/kernels.md, "Running the GPU
# check from a bundle"), made from this build into a temporary directory
# (copying only: no rebuild), is self-contained: every bundled program and
# library resolves every shared library from the bundle except glibc and
# the GCC runtime (the machine's) and the driver's and toolkit's CUDA
# libraries (libcuda, libcudart, libcublas*), which the bundle must not
# carry; servesim runs from it in a scrubbed environment, also after the
# folder is moved; the script refuses bad inputs with one line; and a
# simulation needs no CUDA library: servesim and the test programs link
# none, and a run works where the loader cannot find libcudart at all.
# Skipped (77) where this build has no CUDA module, and in sanitized builds
# (whose programs need the sanitizer runtimes, which a bundle does not
# carry).
. "$(dirname "$0")/cli-lib.sh"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(dirname "$BIN")
[ -z "${SERVESIM_SANITIZED:-}" ] || { echo "skip: sanitized build (ASan's runtime is not bundled)"; exit 77; }
[ -z "$VG" ] || { echo "skip: the loader's behaviour is not observable under valgrind"; exit 77; }
command -v ldd >/dev/null || { echo "skip: ldd not found"; exit 77; }
[ -f "$BUILD/servesim-cuda.so" ] || { echo "skip: this build has no CUDA module (-Dcuda)"; exit 77; }

# glibc's libraries with the GCC runtime (the machine's: see the script),
# and the CUDA ones the GPU machine provides
GLIBC='^(linux-vdso\.so|ld-linux.*\.so|lib(c|m|dl|pthread|rt|mvec|resolv|util|anl|stdc\+\+|gcc_s)\.so)'
CUDA='^lib(cuda|cudart|cublas|cublasLt|nvidia-.*)\.so'

# 1. the bundle, from this build (its size is checked by the script)
B=$T/bundle
if sh "$ROOT/scripts/gpu-bundle.sh" "$BUILD" "$B" >"$T/out" 2>"$T/err"; then
	pass "$(cat "$T/out")"
else
	fail "gpu-bundle.sh failed: $(cat "$T/err")"
	finish
fi
for f in bin/servesim lib/servesim/servesim-cuda.so tests/test-kernels tests/test-kernel-shapes tests/test-graph \
	share/servesim/data/models.json share/servesim/data/gpus.json share/servesim/data/engines.json share/servesim/data/stacks.json share/servesim/data/intervals.json share/servesim/data/acceptance.json \
	share/servesim/data/calibration.db share/servesim/data/traces/azure_conv_2000.csv \
	gpu-check.sh kernel-class.py env.sh MANIFEST; do
	[ -f "$B/$f" ] || fail "the bundle has no $f"
done
cmp -s "$ROOT/scripts/gpu-check.sh" "$B/gpu-check.sh" && pass "gpu-check.sh is scripts/gpu-check.sh" ||
	fail "the bundle's gpu-check.sh is not scripts/gpu-check.sh"
(cd "$B" && awk '{ print $3 "  " $1 }' MANIFEST | sha256sum -c --quiet) >"$T/sum" 2>&1 &&
	pass "MANIFEST: $(wc -l <"$B/MANIFEST") files, sizes and sha256 match" || fail "MANIFEST: $(cat "$T/sum")"
[ "$(find "$B" -type f ! -name MANIFEST | wc -l)" -eq "$(wc -l <"$B/MANIFEST")" ] &&
	pass "MANIFEST lists every file" || fail "MANIFEST does not list every file"
# the modules the check does not use are left out (docs/kernels.md)
[ ! -e "$B/lib/servesim/servesim-cpu.so" ] && [ ! -e "$B/lib/servesim/servesim-mpi.so" ] &&
	pass "no cpu or mpi module in the bundle" || fail "the bundle carries the cpu or mpi module"
# nothing of the toolkit or the driver
find "$B/lib" -maxdepth 1 -type f -exec basename {} \; | grep -E "$CUDA" >"$T/cuda" &&
	fail "the bundle carries $(tr '\n' ' ' <"$T/cuda")" ||
	pass "the bundle carries no libcuda, libcudart or libcublas"
[ ! -e "$B/lib/libstdc++.so.6" ] && [ ! -e "$B/lib/libgcc_s.so.1" ] &&
	pass "the GCC runtime is the machine's" || fail "the bundle carries libstdc++ or libgcc_s"

# 2. every bundled ELF resolves from the bundle, glibc and CUDA aside, in a
# scrubbed environment with the bundle's library path
n=0
for f in "$B/bin/servesim" "$B"/lib/servesim/*.so "$B"/tests/* "$B"/lib/*.so*; do
	n=$((n + 1))
	env -i LD_LIBRARY_PATH="$B/lib" ldd "$f" >"$T/ldd" 2>&1 || { fail "ldd $f: $(cat "$T/ldd")"; continue; }
	while read -r name arrow path rest; do
		[ "$arrow" = "=>" ] || continue
		if echo "$name" | grep -E -q "$CUDA"; then
			continue   # from the GPU machine: found or not here, never bundled
		elif [ "$path" = not ]; then
			fail "$(basename "$f"): $name not found"
		elif echo "$name" | grep -E -q "$GLIBC"; then
			continue
		else
			case $path in
			"$B"/lib/*) ;;
			*) fail "$(basename "$f"): $name resolves outside the bundle, to $path" ;;
			esac
		fi
	done <"$T/ldd"
done
pass "ldd checked $n bundled ELF files"

# 3. servesim from the bundle with env.sh in a clean shell: bash finds the
# bundle from BASH_SOURCE, sh from the directory it runs in (or $G), and it
# still does after the folder moves
if command -v bash >/dev/null; then
	out=$(env -i bash -c ". '$B/env.sh' && \"\$G/bin/servesim\" --version" 2>&1) &&
		[ "$out" = "servesim $(sed -n "s/^  version: '\(.*\)',$/\1/p" "$ROOT/meson.build")" ] &&
		pass "bash, env -i, env.sh: $out" || fail "bash with env.sh: servesim --version: $out"
fi
mv "$B" "$T/moved"
B=$T/moved
# (sh cannot tell which file it sources: env.sh takes the directory of the
# script sourcing it, as gpu-check.sh does from beside it)
printf '. "$(dirname "$0")/env.sh" && echo "$G" && "$G/bin/servesim" --version\n' >"$B/probe.sh"
out=$(cd / && env -i sh "$B/probe.sh" 2>&1)
rm -f "$B/probe.sh"
[ "$(echo "$out" | head -1)" = "$B" ] && echo "$out" | tail -1 | grep -q "^servesim " &&
	pass "sh, env -i, moved bundle: G=$B; $(echo "$out" | tail -1)" || fail "sh with env.sh after a move: $out"
out=$(cd / && env -i G="$B" sh -c '. "$G/env.sh" && echo "$LD_LIBRARY_PATH|$SERVESIM_MODULE_DIR|$SERVESIM_DATA"' 2>&1)
case $out in
"$B/lib"*"|$B/lib/servesim|$B/share/servesim/data") pass "env.sh exports the bundle's library, module and data paths" ;;
*) fail "env.sh exports: $out" ;;
esac
# the bundle's servesim finds its CUDA module in lib/servesim (a run on the
# cuda backend loads it from there) ...
out=$(env -i "$B/bin/servesim" list backends 2>&1)
echo "$out" | grep -q "^cuda  *$B/bin/\.\./lib/servesim/servesim-cuda\.so " &&
	pass "the bundle's servesim finds servesim-cuda.so in lib/servesim" ||
	fail "list backends from the bundle: $out"
# ... and a missing module is still one clear line
mkdir "$T/alone" && cp "$B/bin/servesim" "$T/alone/"
! env -i SERVESIM_DATA="$B/share/servesim/data" "$T/alone/servesim" live --backend cuda \
	--num-requests 2 >/dev/null 2>"$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "servesim-cuda\.so" "$T/err" &&
	pass "servesim without lib/servesim: $(cat "$T/err")" || fail "live --backend cuda without the module: $(cat "$T/err")"

# 4. what the script refuses, each with one line and exit 1 (touching
# nothing outside OUT): a build without the CUDA module, an OUT that is not
# a bundle, a program whose library is not found, a bundle over the limit
bundle_fails() {
	pat=$1
	shift
	"$@" >/dev/null 2>"$T/err"
	st=$?
	if [ "$st" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -E -q -e "$pat" "$T/err"; then
		pass "gpu-bundle.sh refuses: $(cat "$T/err")"
	else
		fail "gpu-bundle.sh exited $st, expected 1 with one line matching '$pat': $(cat "$T/err")"
	fi
}
mkdir -p "$T/nocuda/tests"
cp "$BIN" "$T/nocuda/"
bundle_fails "no servesim-cuda\.so in $T/nocuda: configure it with -Dcuda=enabled" \
	sh "$ROOT/scripts/gpu-bundle.sh" "$T/nocuda" "$T/b2"
[ ! -e "$T/b2" ] && pass "nothing written" || fail "a failed bundle left $T/b2"
mkdir "$T/notbundle" && touch "$T/notbundle/keep"
bundle_fails "$T/notbundle is not empty and holds no bundle" \
	sh "$ROOT/scripts/gpu-bundle.sh" "$BUILD" "$T/notbundle"
[ -e "$T/notbundle/keep" ] && pass "a folder that is not a bundle is left alone" ||
	fail "gpu-bundle.sh emptied $T/notbundle"
bundle_fails "the bundle $T/b3 is [0-9.]+ MiB, over the 1 MiB limit" \
	env GPU_BUNDLE_LIMIT_MIB=1 sh "$ROOT/scripts/gpu-bundle.sh" "$BUILD" "$T/b3"
[ ! -e "$T/b3" ] && pass "a failed bundle is removed" || fail "a failed bundle left $T/b3"
# a test program linked with a library that is gone afterwards
if command -v cc >/dev/null; then
	mkdir -p "$T/gone/tests"
	for f in servesim servesim-cuda.so tests/test-kernels tests/test-graph; do cp "$BUILD/$f" "$T/gone/$f"; done
	echo 'int gone(void) { return 0; }' >"$T/gone.c"
	echo 'int gone(void); int main(void) { return gone(); }' >"$T/main.c"
	if cc -shared -fPIC -o "$T/libssgone.so" "$T/gone.c" &&
		cc -o "$T/gone/tests/test-kernel-shapes" "$T/main.c" -L"$T" -lssgone; then
		rm "$T/libssgone.so"
		bundle_fails "test-kernel-shapes needs libssgone\.so, which ldd does not find here" \
			sh "$ROOT/scripts/gpu-bundle.sh" "$T/gone" "$T/b4"
		[ ! -e "$T/b4" ] && pass "a failed bundle is removed" || fail "a failed bundle left $T/b4"
	else
		fail "cc could not build the program with a missing library"
	fi
fi

# 5. a simulation never needs CUDA: servesim and the test programs link no
# CUDA library (directly or through another) ...
for f in "$BIN" "$BUILD"/tests/test-*; do
	[ -f "$f" ] && [ -x "$f" ] || continue
	ldd "$f" 2>&1 | grep -E "lib(cudart|cublas|cublasLt|cuda)\.so" >"$T/l" &&
		fail "$(basename "$f") links CUDA: $(tr -s ' \t\n' ' ' <"$T/l")" ||
		pass "$(basename "$f"): no CUDA library in ldd"
done
# ... and the bundle's servesim runs a simulation where the dynamic loader
# cannot find libcudart (ld.so without its cache searches only the bundle
# and the system's own directories, not the toolkit's)
LDSO=$(ldd "$BIN" | awk '/ld-linux/ { print $1 }')
if [ -x "$LDSO" ]; then
	env -i "$LDSO" --inhibit-cache --library-path "$B/lib" --list "$B/lib/servesim/servesim-cuda.so" \
		>"$T/out" 2>&1 && fail "libcudart is still found without the loader's cache: $(cat "$T/out")" ||
		pass "without the cache the loader finds no CUDA: $(tail -1 "$T/out")"
	env -i SERVESIM_DATA="$B/share/servesim/data" "$LDSO" --inhibit-cache --library-path "$B/lib" \
		"$B/bin/servesim" run --num-requests 20 --json >"$T/s.json" 2>"$T/err" &&
		grep -q '"requests_completed": 20' "$T/s.json" &&
		pass "servesim run of 20 requests completes without any CUDA library" ||
		fail "run without CUDA: $(cat "$T/err") $(head -c 300 "$T/s.json")"
fi
finish
