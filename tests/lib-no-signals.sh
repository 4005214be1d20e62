# Signal handlers belong to the program, not to its libraries: only cli/
# installs them (cli/interrupt.c); the engine is stopped through the flag
# in engine_config.stop (docs/servesim.1.md "SIGNALS").  Fails on any
# signal / sigaction call in the library folders' sources (test programs
# under kernels/cuda/test/ excepted, as in lib-no-getenv).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
hits=$(grep -rnE '\b(signal|sigaction|sigset|bsd_signal|sysv_signal)[[:space:]]*\(' \
	--include='*.c' --include='*.h' --include='*.cu' --include='*.cpp' \
	common traces kernels calibrate policies sim analysis | grep -v '^kernels/cuda/test/')
if [ -n "$hits" ]; then
	echo "FAIL: signal handler installed in library code (set a flag from cli/ instead):" >&2
	echo "$hits" >&2
	exit 1
fi
# and cli/ does install one, through cli_interrupt_install: the check above
# would pass vacuously if the pattern matched nothing anywhere
grep -qE '\bsigaction[[:space:]]*\(' cli/interrupt.c ||
	{ echo "FAIL: the pattern finds no sigaction in cli/interrupt.c" >&2; exit 1; }
echo "ok: no signal handlers in common traces kernels calibrate policies sim analysis"
