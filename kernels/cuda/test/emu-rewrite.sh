#!/bin/sh
# Rewrite one of kernels/cuda/*.cu into C++ that g++ compiles against the
# CPU emulation (emu.h, force-included): `k<<<grid, block, smem, stream>>>(`
# becomes `EMU_LAUNCH(k, grid, block, smem, stream)(` and `extern __shared__
# __align__(N) unsigned char name[];` a pointer to the launch's dynamic
# shared memory.  Used by emu-run.sh and by meson (kernels/cuda/test/meson.build).
# A kernel may be a template instance of several arguments (`k<64, fp8>`):
# EMU_LAUNCH's first macro argument then ends at the comma, and the rest
# comes back in its __VA_ARGS__ right after it, so `&k<64, fp8>` is rebuilt
# as written.
#
#   sh kernels/cuda/test/emu-rewrite.sh IN.cu OUT.cpp
set -eu
[ $# -eq 2 ] || { echo "usage: emu-rewrite.sh IN.cu OUT.cpp" >&2; exit 2; }
sed -e 's/\([A-Za-z_][A-Za-z0-9_]*\(<[A-Za-z0-9_, ]*>\)\{0,1\}\)<<<\(.*\)>>>(/EMU_LAUNCH(\1, \3)(/' \
    -e 's/extern __shared__ __align__([0-9]*) unsigned char \([a-z_]*\)\[\];/unsigned char *\1 = emu::dyn_smem();/' \
    "$1" >"$2.tmp"
if grep -q '<<<' "$2.tmp"; then
	rm -f "$2.tmp"
	echo "emu: a launch in $1 was not rewritten (keep <<<...>>>( on one line)" >&2
	exit 1
fi
mv "$2.tmp" "$2"
