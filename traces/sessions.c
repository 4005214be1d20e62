/* servesim — session workloads: multi-turn conversations and agent call
 * chains (docs/workloads.md, "Sessions and agents").
 *
 * A session is a chain of steps; a step is one call, or F parallel calls
 * (fan-out).  Step s + 1 is sent think time after every call of step s has
 * completed (the engine releases it: sim/engine.c), and its prompt re-sends
 * the conversation so far plus its new tokens:
 *   ctx_0 = 0;  prompt(s, b) = ctx_s + new(s, b);
 *   ctx_{s+1} = ctx_s + new(s, 0) + out(s, 0) + sum_{b > 0} out(s, b)
 * i.e. the conversation goes on from branch 0, and the other branches'
 * answers are appended to it (as tool results are) before the next step's
 * new tokens.
 *
 * Prefix hashes: a session's conversation is one append-only token stream,
 * so one hash id per NATIVE_BLOCK_TOKENS-token block of the stream, and
 * every call on the stream (branch 0) takes the stream's first ids covering
 * its prompt and its output: consecutive calls then share their whole
 * common prefix, the previous call's output included (the workload says so
 * with hashes_cover_output, and the engine registers those blocks).  A
 * branch b > 0 copies the ids of the stream's whole blocks before ctx_s and
 * takes fresh ids for the rest (its own new tokens and output).
 *
 * Three sources build the rows the assembler lays out: the generator
 * (--sessions rate=R,turns=T,think_s=S,...), the native session CSV and the
 * exgentic agent CSV.  Each session's requests are consecutive in the
 * workload, step after step, sessions in order of their start (ties in
 * source order), so the array stays sorted by arrival_ns (a later step's
 * arrival_ns is the session's start, a lower bound; the engine records the
 * time it is sent).
 */
#include "workload-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <csv.h>
#include <gsl/gsl_randist.h>

#include "params.h"
#include "rng.h"

/* One call as a source gives it. */
struct srow {
	uint32_t session;     /* source session index (order of first appearance) */
	uint32_t step;
	int32_t new_tokens;   /* >= 1 */
	int32_t output_tokens;/* >= 1 */
	int64_t think_ns;     /* step > 0 */
	int64_t arrival_ns;   /* step 0: the session's start */
	long line;            /* source line, 0 for the generator */
	size_t order;         /* source order, for stable sorting */
};

struct srows {
	struct srow *r;
	size_t n, cap;
	uint32_t n_sessions;
};

static int srows_push(struct srows *s, const struct srow *r)
{
	if (s->n == s->cap) {
		size_t c = s->cap ? 2 * s->cap : 256;
		struct srow *p = realloc(s->r, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->r = p;
		s->cap = c;
	}
	s->r[s->n] = *r;
	s->r[s->n].order = s->n;
	s->n++;
	return 0;
}

/* ---- options (--sessions) ---------------------------------------------- */

enum think_from { THINK_FROM_NET, THINK_FROM_GAP, THINK_FROM_NONE };
enum dist_kind { DIST_NONE, DIST_FIXED, DIST_EXP, DIST_GEOMETRIC };

struct sess_opts {
	/* generator */
	double rate;            /* sessions/s */
	enum dist_kind turns_kind;
	double turns;           /* mean (geometric) or fixed count */
	enum dist_kind think_kind;
	double think_s;         /* mean (exponential) or fixed, s */
	uint32_t fanout;        /* calls per step after the first, >= 1 */
	/* both */
	uint32_t max_turns;     /* steps kept per session, 0 = all */
	/* traces (exgentic): think time from completion gaps */
	enum think_from think_from;
	double remote_tps;      /* output tokens/s of the remote model (net) */
};

#define SESS_DEFAULT_SESSIONS 100
#define SESS_DEFAULT_LENGTHS \
	"lognormal:prompt_mean=500,prompt_cv=1,output_mean=250,output_cv=1," \
	"prompt_max=8192,output_max=2048"
#define EXGENTIC_REMOTE_TPS 250.0
#define SESS_FANOUT_MAX 1024
#define SESS_THINK_MAX_S 3.6e6   /* 1000 hours */

static const char usage_gen[] =
	"rate=R,turns=T|turns=fixed:N,think_s=S|think=fixed:S|think=none"
	"[,fanout=F][,max_turns=N]";
static const char usage_trace[] = "think=net|gap|none[,remote_tps=T][,max_turns=N]";

static int opt_bad(struct ss_error *err, bool trace, const char *fmt, const char *a,
		   const char *b)
{
	char what[256];

	snprintf(what, sizeof(what), fmt, a, b);
	return ss_error_set(err, -EINVAL, NULL, 0, "--sessions%s: %s (expected %s)",
			    trace ? " with --trace" : "", what, trace ? usage_trace : usage_gen);
}

static bool num_in(const char *s, double lo, double hi, double *out)
{
	return ss_parse_double(s, out) && *out >= lo && *out <= hi;
}

/* Parse "key=value,..." (values may hold ':'); trace: the options a
 * session trace takes. */
static int opts_parse(const char *spec, bool trace, struct sess_opts *o, struct ss_error *err)
{
	char buf[1024], *save = NULL, *item;
	bool has_rate = false, has_turns = false, has_think = false;
	double v;

	*o = (struct sess_opts){ .turns_kind = DIST_GEOMETRIC, .think_kind = DIST_NONE,
				 .fanout = 1, .think_from = THINK_FROM_NET,
				 .remote_tps = EXGENTIC_REMOTE_TPS };
	if (!spec)
		return 0;
	if (strlen(spec) >= sizeof(buf))
		return opt_bad(err, trace, "spec longer than %s%s bytes", "1023", "");
	snprintf(buf, sizeof(buf), "%s", spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *val = strchr(item, '=');

		if (!val)
			return opt_bad(err, trace, "'%s' is not key=value%s", item, "");
		*val++ = '\0';
		if (trace && strcmp(item, "think") && strcmp(item, "remote_tps") &&
		    strcmp(item, "max_turns"))
			return opt_bad(err, trace, "'%s' does not apply to a trace%s", item,
				       " (it gives the sessions)");
		if (!strcmp(item, "rate")) {
			if (!num_in(val, 1e-9, 1e9, &v) || !(v > 0))
				return opt_bad(err, trace, "rate: expected sessions/s in (0, 1e9], "
							   "got '%s'%s",
					       val, "");
			o->rate = v;
			has_rate = true;
		} else if (!strcmp(item, "turns")) {
			o->turns_kind = DIST_GEOMETRIC;
			if (!strncmp(val, "fixed:", 6)) {
				o->turns_kind = DIST_FIXED;
				val += 6;
			} else if (!strncmp(val, "geometric:", 10)) {
				val += 10;
			}
			if (!num_in(val, 1, 1e6, &v) ||
			    (o->turns_kind == DIST_FIXED && v != floor(v)))
				return opt_bad(err, trace, "turns: expected a mean >= 1 (or "
							   "fixed:N, N a whole number), got '%s'%s",
					       val, "");
			o->turns = v;
			has_turns = true;
		} else if (!strcmp(item, "think_s")) {
			if (!num_in(val, 0, SESS_THINK_MAX_S, &v))
				return opt_bad(err, trace, "think_s: expected a mean think time in "
							   "s, 0..3.6e6, got '%s'%s",
					       val, "");
			o->think_kind = v > 0 ? DIST_EXP : DIST_NONE;
			o->think_s = v;
			has_think = true;
		} else if (!strcmp(item, "think") && trace) {
			if (!strcmp(val, "net"))
				o->think_from = THINK_FROM_NET;
			else if (!strcmp(val, "gap"))
				o->think_from = THINK_FROM_GAP;
			else if (!strcmp(val, "none"))
				o->think_from = THINK_FROM_NONE;
			else
				return opt_bad(err, trace, "think: expected net, gap or none, got "
							   "'%s'%s",
					       val, "");
		} else if (!strcmp(item, "think")) {
			enum dist_kind k = DIST_NONE;

			if (!strcmp(val, "none")) {
				v = 0;
			} else {
				if (!strncmp(val, "fixed:", 6))
					k = DIST_FIXED;
				else if (!strncmp(val, "exp:", 4) ||
					 !strncmp(val, "exponential:", 12))
					k = DIST_EXP;
				if (k == DIST_NONE ||
				    !num_in(strchr(val, ':') + 1, 0, SESS_THINK_MAX_S, &v))
					return opt_bad(err, trace, "think: expected fixed:S, exp:S "
						"(s, 0..3.6e6) or none, got '%s'%s",
						       val, "");
			}
			o->think_kind = v > 0 ? k : DIST_NONE;
			o->think_s = v;
			has_think = true;
		} else if (!strcmp(item, "remote_tps")) {
			if (!num_in(val, 1e-3, 1e9, &v))
				return opt_bad(err, trace, "remote_tps: expected output tokens/s > "
							   "0, got '%s'%s",
					       val, "");
			o->remote_tps = v;
		} else if (!strcmp(item, "fanout")) {
			if (!num_in(val, 1, SESS_FANOUT_MAX, &v) || v != floor(v))
				return opt_bad(err, trace, "fanout: expected an integer in "
							   "1..1024, got '%s'%s",
					       val, "");
			o->fanout = (uint32_t)v;
		} else if (!strcmp(item, "max_turns")) {
			if (!num_in(val, 1, 1e6, &v) || v != floor(v))
				return opt_bad(err, trace, "max_turns: expected an integer in "
							   "1..1000000, got '%s'%s",
					       val, "");
			o->max_turns = (uint32_t)v;
		} else {
			return opt_bad(err, trace, "unknown key '%s'%s", item, "");
		}
	}
	if (!trace && (!has_rate || !has_turns || !has_think))
		return opt_bad(err, trace, "missing %s%s", !has_rate ? "rate" :
			       !has_turns ? "turns" : "think_s (or think)", "");
	return 0;
}

/* ---- the assembler ------------------------------------------------------ */

static int cmp_row(const void *a, const void *b)
{
	const struct srow *x = a, *y = b;

	if (x->session != y->session)
		return x->session < y->session ? -1 : 1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

struct sess_span {
	size_t first, n;      /* rows of the session (sorted) */
	int64_t start;
	uint32_t src;
};

static int cmp_span(const void *a, const void *b)
{
	const struct sess_span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->src < y->src ? -1 : x->src > y->src;
}

static uint32_t ceil_div(int64_t a, uint32_t b)
{
	return (uint32_t)((a + b - 1) / b);
}

/* Lay rows out in wl (empty): validate steps (0, 1, 2, ... in each
 * session; equal think times across a step's calls), drop steps past
 * max_turns, order sessions by start, compute prompts and hashes. */
static int assemble(struct workload *wl, struct srows *rows, uint32_t max_turns,
		    const char *path, struct ss_error *err)
{
	const uint32_t H = NATIVE_BLOCK_TOKENS;
	struct sess_span *sp = NULL;
	size_t n_sp = 0, n_keep = 0, k;
	uint64_t next_id = 1;
	int rc = 0;

	if (rows->n == 0)
		return ss_error_set(err, -EINVAL, path, 0, "no calls: expected at least one "
							   "session");
	qsort(rows->r, rows->n, sizeof(*rows->r), cmp_row);
	sp = calloc(rows->n, sizeof(*sp));
	if (!sp)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	for (k = 0; k < rows->n;) {
		size_t j = k;
		uint32_t step = 0;

		while (j < rows->n && rows->r[j].session == rows->r[k].session) {
			const struct srow *r = &rows->r[j];

			if (r->step != step && r->step != step + 1) {
				rc = ss_error_set(err, -EINVAL, path, r->line,
						  "session's call %u follows call %u: expected "
						  "calls 0, 1, 2, ... without a gap",
						  r->step, step);
				goto out;
			}
			if (j == k && r->step != 0) {
				rc = ss_error_set(err, -EINVAL, path, r->line,
						  "session starts at call %u: expected a call 0",
						  r->step);
				goto out;
			}
			if (j > k && r->step == step && r->step > 0 &&
			    r->think_ns != rows->r[j - 1].think_ns) {
				rc = ss_error_set(err, -EINVAL, path, r->line,
						  "parallel calls of one step with different think "
						  "times: expected the same think_ms on every row "
						  "of a (session, call)");
				goto out;
			}
			if (j > k && r->step == 0 && r->arrival_ns != rows->r[j - 1].arrival_ns) {
				rc = ss_error_set(err, -EINVAL, path, r->line,
						  "parallel first calls with different arrival_ms: "
						  "expected the same on every row of call 0");
				goto out;
			}
			step = r->step;
			j++;
		}
		sp[n_sp] = (struct sess_span){ k, j - k, rows->r[k].arrival_ns,
					       rows->r[k].session };
		if (max_turns) {
			size_t m = 0;

			while (m < sp[n_sp].n && rows->r[k + m].step < max_turns)
				m++;
			sp[n_sp].n = m;
		}
		n_keep += sp[n_sp].n;
		n_sp++;
		k = j;
	}
	if (n_keep > WL_MAX_REQUESTS || n_keep >= UINT32_MAX) {
		rc = ss_error_set(err, -E2BIG, path, 0, "more than %u calls", WL_MAX_REQUESTS);
		goto out;
	}
	qsort(sp, n_sp, sizeof(*sp), cmp_span);
	wl->sess = calloc(n_keep, sizeof(*wl->sess));
	if (!wl->sess || wl_reserve(wl, n_keep)) {
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory for %zu calls", n_keep);
		goto out;
	}
	for (size_t s = 0; s < n_sp; s++) {
		const struct srow *r = rows->r + sp[s].first;
		size_t n = sp[s].n, main_off;
		int64_t ctx = 0, len = 0;
		uint32_t main_n;

		/* the stream's final length: the last step's branch-0 call */
		for (size_t i = 0; i < n;) {
			size_t j = i;
			int64_t grow = 0;

			while (j < n && r[j].step == r[i].step) {
				grow += r[j].output_tokens + (j == i ? r[j].new_tokens : 0);
				j++;
			}
			len = ctx + r[i].new_tokens + r[i].output_tokens;
			ctx += grow;
			i = j;
		}
		main_n = ceil_div(len, H);
		main_off = wl->n_hashes;
		if (wl->n_hashes + main_n >= UINT32_MAX ||
		    wl_reserve_hashes(wl, wl->n_hashes + main_n)) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory for prefix hashes");
			goto out;
		}
		for (uint32_t h = 0; h < main_n; h++)
			wl->hashes[wl->n_hashes++] = (uint32_t)next_id++;
		ctx = 0;
		for (size_t i = 0; i < n;) {
			size_t j = i, first = wl->n;
			int64_t grow = 0;

			while (j < n && r[j].step == r[i].step)
				j++;
			for (size_t b = i; b < j; b++) {
				struct wl_request *q = &wl->req[wl->n];
				int64_t prompt = ctx + r[b].new_tokens;
				int64_t total = prompt + r[b].output_tokens;

				if (total > INT32_MAX) {
					rc = ss_error_set(err, -EINVAL, path, r[b].line,
							  "a session's context grows past %d "
							  "tokens at call %u",
							  INT32_MAX, r[b].step);
					goto out;
				}
				*q = (struct wl_request){
					.arrival_ns = sp[s].start, .prompt_tokens = (int32_t)prompt,
					.output_tokens = r[b].output_tokens,
				};
				if (b == i) {
					q->prefix_off = (uint32_t)main_off;
					q->prefix_n = ceil_div(total, H);
				} else {
					uint32_t keep = (uint32_t)(ctx / H);
					uint32_t nb = ceil_div(total, H);

					if (wl->n_hashes + nb >= UINT32_MAX ||
					    wl_reserve_hashes(wl, wl->n_hashes + nb)) {
						rc = ss_error_set(err, -ENOMEM, path, 0,
								  "out of memory");
						goto out;
					}
					q->prefix_off = (uint32_t)wl->n_hashes;
					q->prefix_n = nb;
					for (uint32_t h = 0; h < nb; h++) {
						uint32_t id = h < keep ? wl->hashes[main_off + h]
								       : (uint32_t)next_id++;

						wl->hashes[wl->n_hashes++] = id;
					}
				}
				wl->sess[wl->n] = (struct wl_call){
					.session = (uint32_t)s, .step = r[b].step,
					.step_first = (uint32_t)first, .step_n = (uint32_t)(j - i),
					.think_ns = r[b].step ? r[b].think_ns : 0,
				};
				grow += r[b].output_tokens + (b == i ? r[b].new_tokens : 0);
				wl->n++;
			}
			ctx += grow;
			i = j;
		}
		if (next_id >= UINT32_MAX) {
			rc = ss_error_set(err, -E2BIG, path, 0,
					  "more than 2^32 prefix blocks: expected fewer or shorter "
					  "sessions");
			goto out;
		}
	}
	wl->n_sessions = n_sp;
	wl->has_arrivals = true;
	wl->hash_block_tokens = H;
	wl->hashes_cover_output = true;
out:
	free(sp);
	return rc;
}

/* ---- the generator ------------------------------------------------------ */

int sessions_generate_from(struct workload *wl, size_t n, const int64_t *start,
			   const struct sess_draw *d, uint64_t seed, struct ss_error *err)
{
	struct srows rows = { 0 };
	gsl_rng *rs = ss_rng_new(seed, SS_RNG_SESSION_SHAPE);
	gsl_rng *rl = ss_rng_new(seed, SS_RNG_SESSION_LENGTHS);
	int rc = 0;

	if (!rs || !rl) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	/* session by session: its turns, then step by step its think time
	 * and fan-out (from rs), then each call's lengths (from rl) */
	for (size_t s = 0; s < n; s++) {
		uint32_t turns = d->turns(d->ctx, rs);

		if (d->max_turns && turns > d->max_turns)
			turns = d->max_turns;
		for (uint32_t k = 0; k < turns; k++) {
			double think = k ? d->think_s(d->ctx, rs) : 0;
			uint32_t f = k ? d->fanout(d->ctx, rs) : 1;

			for (uint32_t b = 0; b < f; b++) {
				struct srow r = { .session = (uint32_t)s, .step = k,
						  .think_ns = llround(think * 1e9),
						  .arrival_ns = start[s] };

				d->lengths(d->ctx, rl, s, k, b, &r.new_tokens, &r.output_tokens);
				if (rows.n >= WL_MAX_REQUESTS) {
					rc = ss_error_set(err, -E2BIG, NULL, 0,
							  "sessions: more than %u calls; "
							  "expected a smaller --num-requests or "
							  "--duration",
							  WL_MAX_REQUESTS);
					goto out;
				}
				if (srows_push(&rows, &r)) {
					rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
					goto out;
				}
			}
		}
		rows.n_sessions++;
	}
	rc = assemble(wl, &rows, 0, NULL, err);
	if (!rc)
		wl->format = TRACE_AUTO;
out:
	gsl_rng_free(rs);
	gsl_rng_free(rl);
	free(rows.r);
	return rc;
}

/* The --sessions generator's draws: sess_opts and a lengths generator. */
struct opts_draw {
	const struct sess_opts *o;
	const struct lengths_gen *lg;
};

static uint32_t opts_turns(void *ctx, gsl_rng *r)
{
	const struct sess_opts *o = ((struct opts_draw *)ctx)->o;

	return o->turns_kind == DIST_FIXED || o->turns <= 1 ? (uint32_t)o->turns :
	       gsl_ran_geometric(r, 1 / o->turns);
}

static double opts_think(void *ctx, gsl_rng *r)
{
	const struct sess_opts *o = ((struct opts_draw *)ctx)->o;

	if (o->think_kind == DIST_EXP)
		return gsl_ran_exponential(r, o->think_s);
	return o->think_kind == DIST_FIXED ? o->think_s : 0;
}

static uint32_t opts_fanout(void *ctx, gsl_rng *r)
{
	(void)r;
	return ((struct opts_draw *)ctx)->o->fanout;
}

static void opts_lengths(void *ctx, gsl_rng *r, size_t s, uint32_t step, uint32_t b,
			 int32_t *new_tokens, int32_t *output_tokens)
{
	(void)s;
	(void)step;
	(void)b;
	wl_lengths_draw(((struct opts_draw *)ctx)->lg, r, new_tokens, output_tokens);
}

int sessions_generate(struct workload *wl, const struct workload_spec *spec,
		      struct ss_error *err)
{
	struct sess_opts o;
	struct lengths_gen *lg = NULL;
	struct opts_draw od;
	struct sess_draw d;
	int64_t *start = NULL;
	size_t n = 0, cap = 0;
	gsl_rng *ra = NULL;
	double scale = spec->rate_scale > 0 ? spec->rate_scale : 1, t = 0;
	uint64_t max_s = spec->num_requests;
	int rc;

	rc = opts_parse(spec->sessions, false, &o, err);
	if (rc)
		return rc;
	if (!max_s && !spec->duration_ns)
		max_s = SESS_DEFAULT_SESSIONS;
	rc = wl_lengths_new(spec->lengths ? spec->lengths : SESS_DEFAULT_LENGTHS, &lg, err);
	if (rc)
		return rc;
	ra = ss_rng_new(spec->seed, SS_RNG_SESSION_STARTS);
	if (!ra) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	/* session 0 starts at 0, then exponential gaps of mean 1 / (rate x
	 * --rate-scale) */
	for (uint64_t s = 0; !max_s || s < max_s; s++) {
		int64_t st;

		if (s > 0)
			t += gsl_ran_exponential(ra, 1 / (o.rate * scale));
		if (!(t * 1e9 < 9.2e18)) {
			rc = ss_error_set(err, -ERANGE, NULL, 0,
					  "--sessions: start times beyond 292 years; lower "
					  "--num-requests or --duration");
			goto out;
		}
		st = llround(t * 1e9);
		if (spec->duration_ns && st >= spec->duration_ns)
			break;
		if (s >= WL_MAX_REQUESTS) {
			rc = ss_error_set(err, -E2BIG, NULL, 0, "--sessions: more than %u sessions",
					  WL_MAX_REQUESTS);
			goto out;
		}
		if (n == cap) {
			size_t c = cap ? 2 * cap : 256;
			int64_t *p = realloc(start, c * sizeof(*p));

			if (!p) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				goto out;
			}
			start = p;
			cap = c;
		}
		start[n++] = st;
	}
	od = (struct opts_draw){ &o, lg };
	d = (struct sess_draw){ .ctx = &od, .turns = opts_turns, .think_s = opts_think,
				.fanout = opts_fanout, .lengths = opts_lengths,
				.max_turns = o.max_turns };
	rc = sessions_generate_from(wl, n, start, &d, spec->seed, err);
	if (!rc)
		snprintf(wl->source, sizeof(wl->source), "sessions:%s x %s", spec->sessions,
			 spec->lengths ? spec->lengths : "default lengths");
out:
	gsl_rng_free(ra);
	wl_lengths_free(lg);
	free(start);
	return rc;
}

/* ---- the readers -------------------------------------------------------- */

#define SCOLS_MAX 16

/* Columns of the two CSV formats. */
enum scol { C_SESSION, C_CALL, C_NEW, C_OUT, C_THINK, C_ARRIVAL,     /* sessions */
	    C_DONE, C_PROMPT, C_COMPL, C_BENCH, C_N };

static const char *const col_name[C_N] = {
	"session", "call", "new_tokens", "output_tokens", "think_ms", "arrival_ms",
	"completed_at_s", "prompt_tokens", "completion_tokens", "benchmark",
};

static const char expect_sessions[] =
	"session,call,new_tokens,output_tokens,think_ms,arrival_ms";
static const char expect_exgentic[] =
	"benchmark,session,call,completed_at_s,prompt_tokens,completion_tokens";

/* A session name as a source index (the order of first appearance). */
struct name_map {
	char **name;
	size_t n, cap;
	uint32_t *slot;   /* open addressing over name indices + 1, 0 = empty */
	size_t n_slot;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static int name_index(struct name_map *m, const char *s, uint32_t *out)
{
	size_t i;

	if (2 * (m->n + 1) > m->n_slot) {
		size_t ns = m->n_slot ? 2 * m->n_slot : 1024;
		uint32_t *slot = calloc(ns, sizeof(*slot));

		if (!slot)
			return -ENOMEM;
		for (size_t k = 0; k < m->n; k++) {
			i = str_hash(m->name[k]) & (ns - 1);
			while (slot[i])
				i = (i + 1) & (ns - 1);
			slot[i] = (uint32_t)k + 1;
		}
		free(m->slot);
		m->slot = slot;
		m->n_slot = ns;
	}
	for (i = str_hash(s) & (m->n_slot - 1); m->slot[i]; i = (i + 1) & (m->n_slot - 1))
		if (!strcmp(m->name[m->slot[i] - 1], s)) {
			*out = m->slot[i] - 1;
			return 0;
		}
	if (m->n == m->cap) {
		size_t c = m->cap ? 2 * m->cap : 256;
		char **p = realloc(m->name, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		m->name = p;
		m->cap = c;
	}
	if (!(m->name[m->n] = strdup(s)))
		return -ENOMEM;
	m->slot[i] = (uint32_t)m->n + 1;
	*out = (uint32_t)m->n++;
	return 0;
}

static void name_map_free(struct name_map *m)
{
	for (size_t k = 0; k < m->n; k++)
		free(m->name[k]);
	free(m->name);
	free(m->slot);
}

struct sreader {
	enum trace_format fmt;
	const struct sess_opts *o;
	const char *path;
	struct ss_error *err;
	int rc;
	long line;
	bool after_cr, header_done;
	int col[C_N];             /* field index of each column, -1 absent */
	char *fld[SCOLS_MAX + 1];
	size_t nf;
	struct srows rows;
	struct name_map names;
	/* exgentic: the previous call of the session being read */
	double *prev_done;        /* per session: completion time, s (NAN: none) */
	int32_t *prev_prompt, *prev_out;
	uint32_t *prev_call;
	size_t cap_prev;
	double first_start;       /* earliest session start, s */
	size_t shrunk;            /* calls whose prompt shrank */
	char buf[1 << 16];
};

static void on_sfield(void *s, size_t len, void *data)
{
	struct sreader *st = data;
	char *f;

	if (st->rc)
		return;
	if (memchr(s, '\0', len)) {
		/* C strings would silently cut the field at the NUL (as the
		 * trace readers, traces/readers.c) */
		st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
				      "NUL byte in field %zu (expected text; is this a binary file?)",
				      st->nf + 1);
		return;
	}
	if (st->nf >= SCOLS_MAX) {
		st->nf++;
		return;
	}
	f = malloc(len + 1);
	if (!f) {
		st->rc = ss_error_set(st->err, -ENOMEM, st->path, st->line,
				      "out of memory");
		return;
	}
	memcpy(f, s, len);
	f[len] = '\0';
	st->fld[st->nf++] = f;
}

static const char *fld(const struct sreader *st, enum scol c)
{
	return st->col[c] >= 0 && (size_t)st->col[c] < st->nf ? st->fld[st->col[c]] : NULL;
}

static int need_count(struct sreader *st, enum scol c, int32_t min, int32_t *out)
{
	const char *s = fld(st, c);
	int64_t v;

	if (!s || !ss_parse_int64(s, &v) || v < min || v > INT32_MAX)
		return st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
					     "%s: expected an integer >= %d, got '%s'", col_name[c],
					     (int)min, s ? s : "");
	*out = (int32_t)v;
	return 0;
}

static int need_time(struct sreader *st, enum scol c, double scale, bool required,
		     int64_t *ns)
{
	const char *s = fld(st, c);
	double v;

	if (!s || !*s) {
		if (required)
			return st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
						     "%s: expected a time >= 0, got nothing",
						     col_name[c]);
		*ns = 0;
		return 0;
	}
	if (!ss_parse_double(s, &v) || v < 0 || v * scale > 4.6e18)
		return st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
					     "%s: expected a time >= 0 (and below 146 years), got "
					     "'%s'",
					     col_name[c], s);
	*ns = llround(v * scale);
	return 0;
}

static void header_row(struct sreader *st)
{
	static const enum scol need_s[] = { C_SESSION, C_CALL, C_NEW, C_OUT, C_THINK, C_ARRIVAL };
	static const enum scol need_x[] = { C_SESSION, C_CALL, C_DONE, C_PROMPT, C_COMPL };
	const enum scol *need = st->fmt == TRACE_SESSIONS ? need_s : need_x;
	size_t n_need = st->fmt == TRACE_SESSIONS ? 6 : 5;

	for (int c = 0; c < C_N; c++)
		st->col[c] = -1;
	for (size_t i = 0; i < st->nf && i < SCOLS_MAX; i++)
		for (int c = 0; c < C_N; c++)
			if (!strcasecmp(st->fld[i], col_name[c]) && st->col[c] < 0)
				st->col[c] = (int)i;
	for (size_t k = 0; k < n_need; k++)
		if (st->col[need[k]] < 0) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
					      "missing column '%s' in the header (expected %s)",
					      col_name[need[k]],
					      st->fmt == TRACE_SESSIONS ? expect_sessions
							     : expect_exgentic);
			return;
		}
	st->header_done = true;
}

static int grow_prev(struct sreader *st, uint32_t s)
{
	if (s < st->cap_prev)
		return 0;
	size_t c = st->cap_prev ? 2 * st->cap_prev : 256;

	while (c <= s)
		c *= 2;
	double *d = realloc(st->prev_done, c * sizeof(*d));
	if (d)
		st->prev_done = d;
	int32_t *p = realloc(st->prev_prompt, c * sizeof(*p));
	if (p)
		st->prev_prompt = p;
	int32_t *o = realloc(st->prev_out, c * sizeof(*o));
	if (o)
		st->prev_out = o;
	uint32_t *k = realloc(st->prev_call, c * sizeof(*k));
	if (k)
		st->prev_call = k;
	if (!d || !p || !o || !k)
		return -ENOMEM;
	for (size_t i = st->cap_prev; i < c; i++)
		st->prev_done[i] = NAN;
	st->cap_prev = c;
	return 0;
}

static void data_srow(struct sreader *st)
{
	struct srow r = { .line = st->line };
	const char *name = fld(st, C_SESSION);
	int32_t call;

	if (st->nf > SCOLS_MAX) {
		st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
				      "more than %d fields: expected %s", SCOLS_MAX,
				      st->fmt == TRACE_SESSIONS ? expect_sessions
							     : expect_exgentic);
		return;
	}
	if (!name || !*name) {
		st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
				      "session: expected a session id, got nothing");
		return;
	}
	if (name_index(&st->names, name, &r.session)) {
		st->rc = ss_error_set(st->err, -ENOMEM, st->path, st->line,
				      "out of memory");
		return;
	}
	if (need_count(st, C_CALL, 0, &call))
		return;
	r.step = (uint32_t)call;
	if (st->fmt == TRACE_SESSIONS) {
		if (need_count(st, C_NEW, 1, &r.new_tokens) ||
		    need_count(st, C_OUT, 1, &r.output_tokens) ||
		    need_time(st, C_THINK, 1e6, r.step > 0, &r.think_ns) ||
		    need_time(st, C_ARRIVAL, 1e6, r.step == 0, &r.arrival_ns))
			return;
	} else {
		/* exgentic: completion times and whole prompts (see the file
		 * comment of docs/workloads.md "Agent traces") */
		const char *s = fld(st, C_DONE);
		double done, remote;
		int32_t prompt, out;

		if (need_count(st, C_PROMPT, 1, &prompt) || need_count(st, C_COMPL, 1, &out))
			return;
		if (!s || !ss_parse_double(s, &done) || !(fabs(done) < 4.6e9)) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
					      "completed_at_s: expected a time in s, got '%s'",
					      s ? s : "");
			return;
		}
		if (grow_prev(st, r.session)) {
			st->rc = ss_error_set(st->err, -ENOMEM, st->path, st->line,
					      "out of memory");
			return;
		}
		remote = out / st->o->remote_tps;
		r.output_tokens = out;
		if (isnan(st->prev_done[r.session])) {
			if (r.step != 0) {
				st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
						      "session '%s' starts at call %u: expected "
						      "call 0 first",
						      name, r.step);
				return;
			}
			r.new_tokens = prompt;
			/* the session starts when its first call was sent:
			 * its completion less the remote call's estimate */
			r.arrival_ns = llround((done - remote) * 1e9);
		} else {
			int64_t grow = (int64_t)prompt - st->prev_prompt[r.session] -
				       st->prev_out[r.session];
			double gap = done - st->prev_done[r.session];

			if (r.step != st->prev_call[r.session] + 1) {
				st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
						      "session '%s': call %u after call %u: "
						      "expected consecutive calls in completion "
						      "order",
						      name, r.step, st->prev_call[r.session]);
				return;
			}
			if (gap < 0) {
				st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
						      "session '%s': completed_at_s goes back by "
						      "%g s: expected calls in completion order",
						      name, -gap);
				return;
			}
			if (grow < 1)
				st->shrunk++;
			r.new_tokens = grow < 1 ? 1 : grow > INT32_MAX ? INT32_MAX : (int32_t)grow;
			gap = st->o->think_from == THINK_FROM_NONE ? 0 :
			      st->o->think_from == THINK_FROM_GAP ? gap :
			      gap - remote > 0 ? gap - remote : 0;
			r.think_ns = llround(gap * 1e9);
		}
		st->prev_done[r.session] = done;
		st->prev_prompt[r.session] = prompt;
		st->prev_out[r.session] = out;
		st->prev_call[r.session] = r.step;
	}
	if (st->rows.n >= WL_MAX_REQUESTS) {
		st->rc = ss_error_set(st->err, -E2BIG, st->path, st->line, "more than %u calls",
				      WL_MAX_REQUESTS);
		return;
	}
	if (srows_push(&st->rows, &r))
		st->rc = ss_error_set(st->err, -ENOMEM, st->path, st->line,
				      "out of memory");
}

static void on_srecord(int c, void *data)
{
	struct sreader *st = data;
	size_t nf = st->nf < SCOLS_MAX ? st->nf : SCOLS_MAX;

	if (c == '\n' && st->after_cr && st->nf == 0) {
		st->after_cr = false;
		return;
	}
	st->after_cr = c == '\r';
	if (st->nf > 0 && !st->rc) {
		if (!st->header_done)
			header_row(st);
		else
			data_srow(st);
	}
	for (size_t i = 0; i < nf; i++)
		free(st->fld[i]);
	st->nf = 0;
	st->line++;
}

static int sessions_parse(struct workload *wl, FILE *f, const char *path, enum trace_format fmt,
			  const struct sess_opts *o, struct ss_error *err)
{
	const unsigned char copts = CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL | CSV_APPEND_NULL;
	struct sreader *st = calloc(1, sizeof(*st));
	struct csv_parser p;
	size_t n, run = 0;
	bool first = true;
	int rc;

	if (!st || csv_init(&p, copts)) {
		free(st);
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	*st = (struct sreader){ .fmt = fmt, .o = o, .path = path, .err = err, .line = 1 };
	while (!st->rc && (n = fread(st->buf, 1, sizeof(st->buf), f)) > 0) {
		size_t off = first && n >= 3 && !memcmp(st->buf, "\xef\xbb\xbf", 3) ? 3 : 0;
		size_t ok;

		first = false;
		ok = ss_line_bounded(st->buf + off, n - off, &run, SS_LINE_MAX);
		if (csv_parse(&p, st->buf + off, ok, on_sfield, on_srecord, st) != ok && !st->rc)
			st->rc = ss_error_set(err, -EINVAL, path, st->line,
					      "malformed CSV: %s (expected comma-separated fields)",
					      csv_strerror(csv_error(&p)));
		if (ok < n - off && !st->rc)
			st->rc = ss_error_set(err, -EINVAL, path, st->line,
					      "line longer than %u bytes (expected one call per "
					      "line)",
					      SS_LINE_MAX);
	}
	if (!st->rc && ferror(f))
		st->rc = ss_error_set(err, -EIO, path, 0, "read error");
	if (!st->rc && csv_fini(&p, on_sfield, on_srecord, st) && !st->rc)
		st->rc = ss_error_set(err, -EINVAL, path, st->line,
				      "truncated last line: unterminated quoted field");
	for (size_t i = 0; i < st->nf && i < SCOLS_MAX; i++)
		free(st->fld[i]);
	csv_free(&p);
	rc = st->rc;
	if (!rc && !st->header_done)
		rc = ss_error_set(err, -EINVAL, path, 0, "empty file: expected a header line (%s)",
				  fmt == TRACE_SESSIONS ? expect_sessions : expect_exgentic);
	if (!rc && st->rows.n == 0)
		rc = ss_error_set(err, -EINVAL, path, 1,
				  "header only: expected at least one call after the header");
	if (!rc) {
		/* start times relative to the earliest session start */
		int64_t min = INT64_MAX;

		for (size_t i = 0; i < st->rows.n; i++)
			if (st->rows.r[i].step == 0 && st->rows.r[i].arrival_ns < min)
				min = st->rows.r[i].arrival_ns;
		for (size_t i = 0; i < st->rows.n; i++)
			st->rows.r[i].arrival_ns -= min;
		st->rows.n_sessions = (uint32_t)st->names.n;
		rc = assemble(wl, &st->rows, o->max_turns, path, err);
	}
	free(st->rows.r);
	name_map_free(&st->names);
	free(st->prev_done);
	free(st->prev_prompt);
	free(st->prev_out);
	free(st->prev_call);
	free(st);
	return rc;
}

static int read_sessions(struct workload *wl, FILE *f, const char *path, void *priv,
			 struct ss_error *err)
{
	struct sess_opts o;

	(void)priv;
	opts_parse(NULL, true, &o, err);
	return sessions_parse(wl, f, path, TRACE_SESSIONS, &o, err);
}

static int read_exgentic(struct workload *wl, FILE *f, const char *path, void *priv,
			 struct ss_error *err)
{
	struct sess_opts o;

	(void)priv;
	opts_parse(NULL, true, &o, err);
	return sessions_parse(wl, f, path, TRACE_EXGENTIC, &o, err);
}

/* Detected before the native CSV, whose columns a session CSV may also have. */
static bool detect_sessions(const struct trace_sniff *sn)
{
	return trace_sniff_col(sn, "session") && trace_sniff_col(sn, "call") &&
	       trace_sniff_col(sn, "new_tokens");
}

static bool detect_exgentic(const struct trace_sniff *sn)
{
	return trace_sniff_col(sn, "session") && trace_sniff_col(sn, "completed_at_s") &&
	       trace_sniff_col(sn, "prompt_tokens") && trace_sniff_col(sn, "completion_tokens");
}

const struct trace_reader reader_sessions = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_SESSIONS, "sessions",
		  "servesim session CSV: session, call, new_tokens, output_tokens, think_ms, arrival_ms "
		  "(multi-turn / agent calls)" },
	.expect = "session,call,new_tokens,output_tokens,think_ms,arrival_ms",
	.detect = detect_sessions,
	.read = read_sessions,
};

const struct trace_reader reader_exgentic = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_EXGENTIC, "exgentic",
		  "agent sessions CSV: benchmark, session, call, completed_at_s, prompt_tokens, "
		  "completion_tokens" },
	.expect = "session,call,completed_at_s,prompt_tokens,completion_tokens",
	.detect = detect_exgentic,
	.read = read_exgentic,
};

int sessions_trace_read(struct workload *wl, const struct workload_spec *spec,
			struct ss_error *err)
{
	enum trace_format fmt = spec->format;
	struct sess_opts o;
	FILE *f;
	int rc;

	rc = opts_parse(spec->sessions, true, &o, err);
	if (rc)
		return rc;
	if (!strcmp(spec->trace, "-"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--sessions with --trace -: expected a file (the options "
				    "re-read it)");
	if (fmt == TRACE_AUTO && (rc = trace_detect(spec->trace, &fmt, err)))
		return rc;
	if (fmt != TRACE_SESSIONS && fmt != TRACE_EXGENTIC)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--sessions with a %s trace: expected a session trace "
				    "(sessions or exgentic format)",
				    trace_format_name(fmt));
	f = fopen(spec->trace, "rb");
	if (!f) {
		rc = -errno;
		return ss_error_set(err, rc, spec->trace, 0, "cannot open trace: %s",
				    strerror(-rc));
	}
	rc = sessions_parse(wl, f, spec->trace, fmt, &o, err);
	fclose(f);
	if (!rc) {
		wl->format = fmt;
		snprintf(wl->source, sizeof(wl->source), "%s", spec->trace);
	}
	return rc;
}

int sessions_replay(struct workload *wl, const struct workload_spec *spec,
		    struct ss_error *err)
{
	double scale = spec->rate_scale > 0 ? spec->rate_scale : 1;
	size_t n = wl->n;
	uint32_t keep = UINT32_MAX;

	if (spec->target_rate > 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate with a session trace: not supported (its calls are "
				    "sent by their sessions); expected --rate-scale X, which "
				    "scales the session starts");
	for (size_t i = 0; i < n; i++) {
		double ns = (double)wl->req[i].arrival_ns / scale;

		if (!(ns <= 9.2e18))
			return ss_error_set(err, -ERANGE, wl->source, 0,
					    "--rate-scale %g: session starts beyond 292 years",
					    scale);
		wl->req[i].arrival_ns = llround(ns);
	}
	if (spec->num_requests && spec->num_requests < wl->n_sessions)
		keep = (uint32_t)spec->num_requests;
	for (size_t i = 0; i < n; i++)
		if (wl->sess[i].session >= keep ||
		    (spec->duration_ns && wl->req[i].arrival_ns >= spec->duration_ns)) {
			keep = wl->sess[i].session;
			n = i;
			break;
		}
	if (n == 0)
		return ss_error_set(err, -EINVAL, wl->source, 0,
				    "--duration keeps no session: expected a longer --duration");
	if (keep != UINT32_MAX)
		wl->n_sessions = keep;
	wl->n = n;
	return 0;
}
