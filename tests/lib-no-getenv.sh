# Library code takes its configuration through config structs; only cli/
# reads the environment (docs/live.md, STYLE.md "Configuration through the
# context").  Fails on any getenv / secure_getenv call in the library
# folders' sources (test helpers under kernels/cuda/test/ excepted: they are
# test programs, not library code).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
hits=$(grep -rnE '\b(secure_)?getenv[[:space:]]*\(' --include='*.c' --include='*.h' \
	--include='*.cu' --include='*.cpp' common traces kernels calibrate policies sim analysis |
	grep -v '^kernels/cuda/test/')
if [ -n "$hits" ]; then
	echo "FAIL: getenv in library code (pass the value in through a config struct from cli/):" >&2
	echo "$hits" >&2
	exit 1
fi
echo "ok: no getenv in common traces kernels calibrate policies sim analysis"
