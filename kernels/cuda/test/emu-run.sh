#!/bin/sh
# Flags and object lists are word lists, split on purpose:
# shellcheck disable=SC2086,SC2046
# Run the kernel conformance suite (tests/test-kernels.c; with no
# arguments also shapes.c, the device-switching check devices.c and
# tests/test-graph.c) against the CUDA
# backend's own code on the CPU, through the emulation in emu.h / emu.cpp:
# for checking kernels/cuda/ on a machine without a GPU (docs/kernels.md,
# "Testing without a GPU").  Not a substitute for a GPU run: it checks
# indexing, tiling, masking, the online softmax, barriers and shuffles, the
# cuBLAS call's layout and the host logic, not timing, occupancy or the
# memory model.  Needs g++, the CUDA headers, check and OpenBLAS (as the
# build does); takes a minute or two.
#
#   sh kernels/cuda/test/emu-run.sh [TEST-KERNELS ARGS]     (default: cuda)
#
# SERVESIM_CUDA_EMU_DIR sets the scratch directory (default: a temporary
# one, removed afterwards).
set -eu
cd "$(dirname "$0")/../../.."
CUDA_INC=${CUDA_INC:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/include}
W=${SERVESIM_CUDA_EMU_DIR:-$(mktemp -d)}
[ -n "${SERVESIM_CUDA_EMU_DIR:-}" ] || trap 'rm -rf "$W"' EXIT
mkdir -p "$W"

# Flags and object lists are word lists (no spaces in the paths).  The
# backend is built as the module servesim-cuda.so, as meson builds it, and
# the test programs load it through the registry (dlopen) from $W.
printf '#define SERVESIM_MODULEDIR "%s"\n' "$W" >"$W/config.h"
CFLAGS="-std=c11 -O1 -g -Wall -Wextra -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -fopenmp -I$W -Ikernels -Icommon $(pkg-config --cflags openblas check gsl)"
CXXFLAGS="-std=c++20 -O1 -g -fPIC -fno-strict-aliasing -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -fopenmp -include kernels/cuda/test/emu.h -Ikernels/cuda -Ikernels -Icommon -I$CUDA_INC"
LIBS="$(pkg-config --libs check gsl) -lm -ldl"
MOD=""
OBJS=""

# <<<...>>> launches and dynamic shared memory, rewritten for emu.h
for f in cuda elementwise attention; do
	sh kernels/cuda/test/emu-rewrite.sh "kernels/cuda/$f.cu" "$W/$f.cpp"
	g++ $CXXFLAGS -c "$W/$f.cpp" -o "$W/$f.o"
	MOD="$MOD $W/$f.o"
done
g++ $CXXFLAGS -c kernels/cuda/test/emu.cpp -o "$W/emu.o"
gcc $CFLAGS -fPIC -c common/ss-error.c -o "$W/mod-ss-error.o"
g++ -shared -fopenmp -o "$W/servesim-cuda.so" $MOD "$W/emu.o" "$W/mod-ss-error.o"
# the CPU backend as meson builds it, the module servesim-cpu.so (the
# suite's registry test loads it)
CPUMOD=""
for f in kernels/cpu/cpu.c kernels/cpu/attention.c kernels/host.c; do
	o="$W/cpumod-$(basename "$f" .c).o"
	gcc $CFLAGS -fPIC -c "$f" -o "$o"
	CPUMOD="$CPUMOD $o"
done
gcc -shared -fopenmp -Wl,--version-script=kernels/cpu/servesim-cpu.map -o "$W/servesim-cpu.so" \
	$CPUMOD "$W/mod-ss-error.o" $(pkg-config --libs openblas) -lm
# the kernels library as meson builds it (the registry dlopens the modules)
for f in kernels/backend.c kernels/host.c kernels/ref.c kernels/step.c \
	 common/ss-error.c common/rng.c; do
	o="$W/$(echo "$f" | tr / _).o"
	gcc $CFLAGS -c "$f" -o "$o"
	OBJS="$OBJS $o"
done
gcc $CFLAGS -c tests/test-kernels.c -o "$W/test-kernels.o"
gcc $CFLAGS -c kernels/cuda/test/shapes.c -o "$W/shapes.o"
gcc $CFLAGS -c tests/test-graph.c -o "$W/test-graph.o"
gcc -o "$W/test-kernels" $OBJS "$W/test-kernels.o" $LIBS
gcc -o "$W/shapes" $OBJS "$W/shapes.o" $LIBS
gcc $CFLAGS -c kernels/cuda/test/devices.c -o "$W/devices.o"
gcc -o "$W/devices" $OBJS "$W/devices.o" $LIBS -lpthread
gcc -o "$W/test-graph" $OBJS "$W/test-graph.o" $LIBS
export SERVESIM_MODULE_DIR="$W"
"$W/test-kernels" "${@:-cuda}"
[ $# -gt 0 ] || "$W/shapes"
[ $# -gt 0 ] || SERVESIM_CUDA_EMU_DEVICES=2 SERVESIM_CUDA_EMU_SMS=2 "$W/devices"
[ $# -gt 0 ] || "$W/test-graph" cuda exact
