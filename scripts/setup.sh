#!/bin/sh
# servesim set-up: install the Debian 12 packages servesim needs (when
# missing), then configure and build into ./build.  Safe to run again.
# clang and libclang-rt-14-dev (libFuzzer) are for scripts/fuzz.sh and the
# fuzzing step of scripts/test.sh; the build itself uses gcc.  g++ builds
# the CUDA backend's CPU emulation for the kernels-cuda-emu tests (with the
# CUDA toolkit's headers, which are not a Debian package here); shellcheck
# is for the scripts-lint test; gcovr for scripts/coverage.sh.  chromium
# renders report.html headless for the cli-report-chromium test (skipped
# without it): 24 packages, 118 MiB downloaded, 395 MiB installed, about a
# minute on a 2-core machine.
set -eu
cd "$(dirname "$0")/.."

PKGS="gcc pkg-config meson ninja-build libgsl-dev libsqlite3-dev libcsv-dev libjansson-dev check gnuplot-nox libopenblas-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev g++ shellcheck gcovr chromium"
t0=$(date +%s)
# one line per step on stderr, with the seconds since the start
say() { echo "servesim setup: $* ($(($(date +%s) - t0)) s)" >&2; }

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	say "installing$missing (on a fresh Debian 12 about 120 MiB from the Debian mirrors)"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
	say "packages installed"
else
	say "the Debian packages are installed already"
fi

if [ -f build/build.ninja ]; then
	meson setup --reconfigure build >/dev/null
else
	meson setup build >/dev/null
fi
say "configured ./build; compiling (about a minute on 2 cores)"
meson compile -C build >/dev/null
say "built ./build/servesim"
