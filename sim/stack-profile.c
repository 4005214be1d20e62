/* servesim — serving stacks: their keys, declared once, and the means the
 * engine draws from (stack-profile.h, docs/engines.md "The serving
 * stack"). */
#include "stack-profile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SS(f) offsetof(struct stack_profile, f)
#define STR(k, f, h) .key = k, .kind = CF_STR, .off = SS(f), \
	.size = sizeof(((struct stack_profile *)0)->f), .help = h
/* a latency term: fittable, always described */
#define TERM(k, f, u, h) .key = k, .kind = CF_NONNEG, .off = SS(f), .optional = true, \
	.lo = 1e-6, .hi = 1e6, .unit = u, .fit = true, .show = CF_SHOW_ALWAYS, .help = h

/* The order is the description's (stack_profile_describe). */
const struct catalog_field stack_profile_fields[] = {
	{ STR("name", name, "catalog name") },
	{ STR("describes", describes, "the deployment the stack stands for") },
	{ TERM("rtt_ms", rtt_ms, "ms", "client-server network round trip: half on the way in, half on every token out") },
	{ TERM("gateway_ms", gateway_ms, "ms", "gateway or router hop per request, on the way in") },
	{ TERM("frontend_ms", frontend_ms, "ms", "HTTP/gRPC front end per request (parse, chat template, set-up, IPC to the engine)") },
	{ TERM("tokenize_us_per_token", tokenize_us_per_token, "us", "tokenisation per prompt token, on the way in") },
	{ TERM("detok_us_per_token", detok_us_per_token, "us", "detokenisation and streaming, on every token's way out") },
	{ .key = "cv", .kind = CF_NONNEG, .off = SS(cv), .optional = true, .lo = 1e-6, .hi = 10,
	  .unit = "", .fit = true, .show = CF_SHOW_ALWAYS,
	  .help = "coefficient of variation of the per-request draws (0: constant)" },
	{ STR("source", source, "where each number came from") },
};

const size_t stack_profile_n_fields = sizeof(stack_profile_fields) / sizeof(stack_profile_fields[0]);

#undef SS
#undef STR
#undef TERM

void stack_profile_resolve(struct stack_profile *s)
{
	/* with only frontend_ms set the sums are frontend_ms itself (x + 0
	 * is x): a stack of one term draws what a legacy api_in_ms did */
	s->in_ms = s->gateway_ms + s->rtt_ms / 2 + s->frontend_ms;
	s->in_ms_per_token = s->tokenize_us_per_token / 1e3;
	s->out_ms = s->rtt_ms / 2 + s->detok_us_per_token / 1e3;
	s->legacy = false;
}

void stack_profile_from_legacy(struct stack_profile *s, const char *name, double api_in_ms,
			       double api_out_ms, double api_cv)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->describes, sizeof(s->describes), "an engine profile's api_in_ms, api_out_ms and api_cv");
	s->frontend_ms = api_in_ms;
	s->detok_us_per_token = api_out_ms * 1e3;
	s->cv = api_cv;
	stack_profile_resolve(s);
	/* 1000 x api_out_ms / 1000 is not always api_out_ms to the bit */
	s->out_ms = api_out_ms;
	s->legacy = true;
}

bool stack_profile_empty(const struct stack_profile *s)
{
	return !(s->in_ms > 0.0) && !(s->in_ms_per_token > 0.0) && !(s->out_ms > 0.0);
}

double *stack_profile_param(struct stack_profile *s, const char *key)
{
	return catalog_fields_fit_param(stack_profile_fields, stack_profile_n_fields, s, key);
}

void stack_profile_describe(const struct stack_profile *s, char *buf, size_t len)
{
	size_t at;

	if (!len)
		return;
	at = (size_t)snprintf(buf, len, "%s:", s->name);
	catalog_fields_describe(stack_profile_fields, stack_profile_n_fields, s, buf, len, at);
}
