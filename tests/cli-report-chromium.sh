# report.html rendered by a real browser: headless Chromium (Debian's
# chromium package) loads the run, plan and compare pages from file:// and
#  - its DOM (--dump-dom) has the tables, the figures and, with gnuplot,
#    one <img> per plot with a data: URI, and a label with markup stays text;
#  - its screenshot (--screenshot) is a PNG of the window's size that is
#    neither blank nor all ink, and, with gnuplot, shows the plots' lines
#    (pixels near gnuplot's first three line colours) -- which a page made
#    without gnuplot does not, so the check can fail.
# Skipped (77) where no Chromium is installed.  Chromium is slow to start
# and noisy on stderr: each call gets a time limit, a fresh profile and a
# HOME of its own, and its stderr is kept only for a failure's message.
. "$(dirname "$0")/cli-lib.sh"

CHROME=
for c in chromium chromium-browser google-chrome; do
	CHROME=$(command -v "$c") && break
done
[ -n "$CHROME" ] || { echo "skip: no chromium"; exit 77; }
PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }
GNUPLOT=$(command -v gnuplot || true)

# chrome N ARGS...: Chromium on a fresh profile, stdout to $T/chrome.N.out
chrome() {
	n=$1
	shift
	mkdir -p "$T/home.$n"
	HOME="$T/home.$n" XDG_CONFIG_HOME="$T/home.$n" XDG_CACHE_HOME="$T/home.$n" \
		timeout -k 5 120 "$CHROME" --headless=new --no-sandbox --disable-gpu \
		--disable-dev-shm-usage --no-first-run --disable-extensions --hide-scrollbars \
		--user-data-dir="$T/profile.$n" "$@" >"$T/chrome.$n.out" 2>"$T/chrome.$n.err"
}

# dom NAME PAGE IMAGES WANT...: the rendered DOM has the page's tables, IMAGES
# <img> elements with data: URIs (when gnuplot made them) and each WANT
dom() {
	name=$1 page=$2 imgs=$3
	shift 3
	if ! chrome "dom-$name" --dump-dom "file://$page"; then
		fail "$name: chromium --dump-dom failed: $(tail -3 "$T/chrome.dom-$name.err")"
		return
	fi
	r=$("$PY" - "$page" "$T/chrome.dom-$name.out" "$imgs" "$@" <<'EOF'
import re, sys
src, dom, imgs, want = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3]), sys.argv[4:]
bad = []
ns, nd = src.count("<table"), dom.count("<table")
if nd == 0 or nd != ns:
    bad.append("%d tables in the DOM, %d in the page" % (nd, ns))
ni = len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom))
if ni != imgs:
    bad.append("%d data: images in the DOM, expected %d" % (ni, imgs))
# the text at the end of the page survived the parse (nothing swallowed it)
if "</pre>" not in dom.split("<h2 id=\"text\">")[-1]:
    bad.append("the text summary is missing")
for w in want:
    if w not in dom:
        bad.append("missing " + w)
print("; ".join(bad))
EOF
)
	[ -z "$r" ] && pass "$name: the rendered DOM has its tables, images and figures" || fail "$name: $r"
}

# shot NAME PAGE PLOTS: a screenshot of a 1200 x 2400 window at half scale
# (600 x 1200 pixels: a quarter of the pixels to decode in Python), not
# blank; PLOTS 1: the plots' colours must show, 0: must not
shot() {
	name=$1 page=$2 purple=$3
	if ! chrome "shot-$name" --window-size=1200,2400 --force-device-scale-factor=0.5 --screenshot="$T/$name.png" "file://$page" ||
		[ ! -s "$T/$name.png" ]; then
		fail "$name: chromium --screenshot failed: $(tail -3 "$T/chrome.shot-$name.err")"
		return
	fi
	r=$("$PY" - "$T/$name.png" "$purple" <<'EOF'
import struct, sys, zlib
data, want_plot = open(sys.argv[1], "rb").read(), sys.argv[2] == "1"
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, hdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        hdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
w, h, depth, ctype, _, _, interlace = hdr
bad = []
if (w, h) != (600, 1200):
    bad.append("screenshot %dx%d, expected 600x1200" % (w, h))
if depth != 8 or ctype not in (2, 6) or interlace:
    print("unexpected PNG format depth %d colour type %d interlace %d" % (depth, ctype, interlace))
    sys.exit(0)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, ink, plot, colours = bytearray(stride), 0, 0, set()
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x + 1], line[x + 2]
        if r < 200 or g < 200 or bl < 200:
            ink += 1
        # near one of gnuplot's first three line colours: #9400d3, #009e73, #56b4e9
        for pr, pg, pb in ((148, 0, 211), (0, 158, 115), (86, 180, 233)):
            if abs(r - pr) + abs(g - pg) + abs(bl - pb) < 90:
                plot += 1
        if y % 16 == 0:
            colours.add((r, g, bl))
    prev = line
share = ink / (w * h)
if not 0.005 < share < 0.6:
    bad.append("%.2f%% of the pixels inked: blank or unreadable" % (100 * share))
if len(colours) < 8:
    bad.append("only %d colours" % len(colours))
if want_plot and plot < 20:
    bad.append("%d pixels of the plots' colours: the plots do not show" % plot)
if not want_plot and plot:
    bad.append("%d pixels of the plots' colours without plots" % plot)
print("; ".join(bad))
EOF
)
	[ -z "$r" ] && pass "$name: the screenshot shows the page$([ "$purple" = 1 ] && echo ' and its plots')" ||
		fail "$name: $r"
}

# ---- the pages ---------------------------------------------------------------------
"$BIN" run --num-requests 150 --out "$T/run" --quiet || fail "run"
"$BIN" run --num-requests 150 --policy sarathi --out "$T/run2" --quiet || fail "run2"
mkdir -p "$T/nobin"
PATH="$T/nobin" "$BIN" run --num-requests 50 --out "$T/nogp" --quiet || fail "run without gnuplot"
"$BIN" plan --num-requests 100 --max-gpus 2 --policies vllm,sarathi --cost-model roofline \
	--out "$T/plan" --quiet || fail "plan"
"$BIN" compare "$T/run" "$T/run2" --label 'x<y>&z' --label sarathi --out "$T/cmp" >/dev/null ||
	fail "compare"

ttft=$("$PY" -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["ttft_ms"]["p99"])' \
	"$T/run/summary.json")
p1=0 p2=0 p3=0 purple=0
[ -n "$GNUPLOT" ] && p1=3 p2=2 p3=3 purple=1

dom run "$T/run/report.html" $p1 "<td class=\"n\">$ttft</td>" "<caption>Latency (ms)</caption>"
dom plan "$T/plan/report.html" $p2 "Pareto frontier</h3>" "<caption>The plan</caption>"
# the label is text in the DOM (serialized escaped), never an element <y>
dom compare "$T/cmp/report.html" $p3 "x&lt;y&gt;&amp;z (ref)" "Per-request errors of sarathi"
grep -q "<y>" "$T/chrome.dom-compare.out" && fail "compare: the label became markup" ||
	pass "compare: the label stays text in the DOM"

shot run "$T/run/report.html" $purple
shot plan "$T/plan/report.html" $purple
shot compare "$T/cmp/report.html" $purple
shot nogp "$T/nogp/report.html" 0

finish
