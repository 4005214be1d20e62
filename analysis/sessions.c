/* servesim — session metrics (sessions.h, docs/metrics.md "Sessions").
 *
 * One pass over the records in workload order (a session's calls are
 * consecutive there): per session whether every call finished, whether one
 * was rejected, and its completion time; per turn (step index) its calls'
 * TTFT from their send, and their prompt and cached tokens.  O(calls)
 * time, O(calls) memory for the TTFTs sorted per turn.
 */
#include "sessions.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "metrics-int.h"

static uint32_t turn_slot(uint32_t step)
{
	return step < SESSION_TURNS_MAX - 1 ? step : SESSION_TURNS_MAX - 1;
}

int session_summary_compute(struct session_summary *ss, const struct workload *wl,
			    const struct req_record *rec, size_t n)
{
	double *done_s = NULL, *ttft[SESSION_TURNS_MAX] = { 0 };
	uint64_t n_ttft[SESSION_TURNS_MAX] = { 0 }, n_done = 0;
	int rc = -ENOMEM;

	memset(ss, 0, sizeof(*ss));
	ss->count = wl->n_sessions;
	ss->calls = n;
	done_s = malloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof(*done_s));
	for (size_t i = 0; i < n; i++)
		n_ttft[turn_slot(wl->sess[i].step)]++;
	for (uint32_t t = 0; t < SESSION_TURNS_MAX; t++) {
		if (!(ttft[t] = malloc((n_ttft[t] ? n_ttft[t] : 1) * sizeof(double))))
			goto out;
		n_ttft[t] = 0;
	}
	if (!done_s)
		goto out;
	for (size_t i = 0; i < n;) {
		uint32_t s = wl->sess[i].session;
		int64_t start = rec[i].arrival_ns, end = start;
		bool all = true, rejected = false;

		for (; i < n && wl->sess[i].session == s; i++) {
			const struct req_record *q = &rec[i];
			uint32_t t = turn_slot(wl->sess[i].step);
			struct session_turn *st = &ss->turn[t];

			if (t + 1 > ss->n_turns)
				ss->n_turns = t + 1;
			st->calls++;
			if (q->state == REQ_REJECTED) {
				rejected = true;
				all = false;
				if (q->reject_reason && !strncmp(q->reject_reason, "session "
										   "abandoned", 17))
					ss->calls_abandoned++;
				continue;
			}
			if (q->state != REQ_FINISHED) {
				all = false;
				continue;
			}
			st->completed++;
			st->prompt_tokens += (uint64_t)q->prompt_tokens;
			if (q->cached_tokens > 0)
				st->cached_tokens += (uint64_t)q->cached_tokens;
			if (q->first_token_ns >= 0)
				ttft[t][n_ttft[t]++] =
					(double)(q->first_token_ns - q->arrival_ns) / 1e6;
			if (q->finish_ns > end)
				end = q->finish_ns;
		}
		if (rejected)
			ss->dropped++;
		else if (all) {
			ss->completed++;
			done_s[n_done++] = (double)(end - start) / 1e9;
		} else
			ss->unfinished++;
	}
	metrics_dist(&ss->completion_s, done_s, n_done);
	for (uint32_t t = 0; t < ss->n_turns; t++)
		metrics_dist(&ss->turn[t].ttft_ms, ttft[t], n_ttft[t]);
	rc = 0;
out:
	free(done_s);
	for (uint32_t t = 0; t < SESSION_TURNS_MAX; t++)
		free(ttft[t]);
	return rc;
}

static int put(json_t *o, const char *k, json_t *v)
{
	return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *jnum(double x, bool present)
{
	return present && isfinite(x) ? json_real(x) : json_null();
}

json_t *session_summary_json(const struct session_summary *ss)
{
	json_t *o = json_object(), *c = json_object(), *tt = json_array(), *ch = json_array();
	const struct dist *d = &ss->completion_s;
	int bad = !o || !c || !tt || !ch;

	bad |= put(o, "count", json_integer((json_int_t)ss->count));
	bad |= put(o, "completed", json_integer((json_int_t)ss->completed));
	bad |= put(o, "dropped", json_integer((json_int_t)ss->dropped));
	bad |= put(o, "unfinished", json_integer((json_int_t)ss->unfinished));
	bad |= put(o, "calls", json_integer((json_int_t)ss->calls));
	bad |= put(o, "calls_abandoned", json_integer((json_int_t)ss->calls_abandoned));
	bad |= put(c, "n", json_integer((json_int_t)d->n));
	bad |= put(c, "mean", jnum(d->mean, d->n));
	bad |= put(c, "p50", jnum(d->p50, d->n));
	bad |= put(c, "p90", jnum(d->p90, d->n));
	bad |= put(c, "p99", jnum(d->p99, d->n));
	bad |= put(c, "max", jnum(d->max, d->n));
	bad |= put(o, "completion_s", c);
	for (uint32_t t = 0; t < ss->n_turns; t++) {
		const struct session_turn *st = &ss->turn[t];
		json_t *a = json_object(), *b = json_object();

		bad |= !a || !b;
		bad |= put(a, "turn", json_integer(t));
		bad |= put(a, "calls", json_integer((json_int_t)st->calls));
		bad |= put(a, "n", json_integer((json_int_t)st->ttft_ms.n));
		bad |= put(a, "mean", jnum(st->ttft_ms.mean, st->ttft_ms.n));
		bad |= put(a, "p50", jnum(st->ttft_ms.p50, st->ttft_ms.n));
		bad |= put(a, "p90", jnum(st->ttft_ms.p90, st->ttft_ms.n));
		bad |= put(a, "p99", jnum(st->ttft_ms.p99, st->ttft_ms.n));
		bad |= put(b, "turn", json_integer(t));
		bad |= put(b, "prompt_tokens", json_integer((json_int_t)st->prompt_tokens));
		bad |= put(b, "cached_tokens", json_integer((json_int_t)st->cached_tokens));
		bad |= put(b, "hit_ratio",
			   jnum((double)st->cached_tokens / (double)st->prompt_tokens,
				st->prompt_tokens > 0));
		bad |= tt && json_array_append_new(tt, a) ? 1 : 0;
		bad |= ch && json_array_append_new(ch, b) ? 1 : 0;
	}
	bad |= put(o, "ttft_ms_by_turn", tt);
	bad |= put(o, "cache_hit_by_turn", ch);
	bad |= put(o, "turns_pooled_from", json_integer(SESSION_TURNS_MAX - 1));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

void session_summary_text(FILE *f, const struct session_summary *ss)
{
	const struct dist *d = &ss->completion_s;

	fprintf(f, "sessions: %" PRIu64 " total, %" PRIu64 " completed, %" PRIu64
		" dropped (a call rejected; %" PRIu64 " calls never sent), %" PRIu64
		" unfinished\n", ss->count, ss->completed, ss->dropped, ss->calls_abandoned,
		ss->unfinished);
	if (d->n)
		fprintf(f, "  session completion: p50 %.3f s, p90 %.3f s, p99 %.3f s, max %.3f s\n",
			d->p50, d->p90, d->p99, d->max);
	fprintf(f, "  %-6s %8s %11s %11s %11s\n", "turn", "calls", "TTFT p50", "TTFT p99",
		"cache hit");
	for (uint32_t t = 0; t < ss->n_turns; t++) {
		const struct session_turn *st = &ss->turn[t];
		char name[16];

		snprintf(name, sizeof(name), t == SESSION_TURNS_MAX - 1 ? "%u+" : "%u", t);
		fprintf(f, "  %-6s %8" PRIu64 " %8.1f ms %8.1f ms %10.1f%%\n", name, st->calls,
			st->ttft_ms.n ? st->ttft_ms.p50 : 0.0,
			st->ttft_ms.n ? st->ttft_ms.p99 : 0.0,
			st->prompt_tokens ? 100.0 * (double)st->cached_tokens /
			(double)st->prompt_tokens : 0.0);
	}
}
