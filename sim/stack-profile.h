/* servesim — serving stacks: what lies between a client and an engine.
 *
 * An engine profile (engine-profile.h) holds what the engine does per
 * step.  What a request meets before it reaches the engine's queue and
 * what each token meets on its way back to the client belongs to the
 * deployment, not to the engine: the client-server network, an HTTP or
 * gRPC front end, tokenisation, detokenisation and streaming, a gateway
 * or router hop.  A stack holds those terms; stacks are catalog entries
 * (data/stacks.json, docs/engines.md "The serving stack"), so one engine
 * profile is reused behind any deployment (`--stack NAME|key=value,...`).
 *
 * On a request's way in, the engine sees it
 *   api_in  = gateway_ms + rtt_ms / 2 + frontend_ms
 *             + tokenize_us_per_token x prompt tokens
 * after its arrival (in arrival order: the front end is a FIFO); on the
 * way out, every token reaches the client
 *   api_out = rtt_ms / 2 + detok_us_per_token
 * after the engine emitted it.  Each is the mean of a log-normal draw
 * with coefficient of variation cv (0: constant), keyed by the seed, the
 * request and the direction (sim/engine.c).
 */
#ifndef SS_STACK_PROFILE_H
#define SS_STACK_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog-field.h"
#include "ss-error.h"

struct stack_profile {
	char name[64];            /* catalog name: "local-vllm", "gateway", ... */
	char describes[256];      /* the deployment the stack stands for */
	/* The terms (stack_profile_fields: every one optional, absent = 0). */
	double rtt_ms;            /* client-server network round trip, ms: half in, half per token out */
	double gateway_ms;        /* router / gateway hop per request on the way in, ms */
	double frontend_ms;       /* HTTP/gRPC front end per request (parse, template, set-up, IPC), ms */
	double tokenize_us_per_token;  /* tokenisation, us per prompt token, on the way in */
	double detok_us_per_token;     /* detokenisation and streaming, us on every token's way out */
	double cv;                /* coefficient of variation of the draws; 0 = constant */
	char source[1024];        /* where each number came from */
	/* Derived by stack_profile_resolve, never read from JSON: the means
	 * the engine draws from.  in_ms and in_ms_per_token: the way in, ms
	 * per request and ms per prompt token; out_ms: the way out, ms per
	 * token.  A stack built from a legacy engine profile's api_in_ms /
	 * api_out_ms (stack_profile_from_legacy) sets them to those values
	 * exactly, so its draws are the legacy profile's to the bit. */
	double in_ms, in_ms_per_token, out_ms;
	bool legacy;              /* built from an engine profile's api_* keys */
};

/* The stack's keys (stacks.json's), one entry each: type, unit, bounds,
 * offset in struct stack_profile, whether fit-engine may fit it, help
 * text and how it reads in the description (catalog-field.h).  The
 * catalog's reader and writer, `list stacks`, --stack's key=value,
 * fit-engine's --free and stack_profile_describe all read this table. */
extern const struct catalog_field stack_profile_fields[];
extern const size_t stack_profile_n_fields;

/* Compute s's derived means from its terms (after any term changed). */
void stack_profile_resolve(struct stack_profile *s);

/* A stack named name holding a legacy engine profile's serving-stack keys
 * (api_in_ms: the way in, per request; api_out_ms: the way out, per
 * token; api_cv), resolved so that its draws are those keys' exactly:
 * frontend_ms = api_in_ms, detok_us_per_token = 1000 x api_out_ms, cv =
 * api_cv. */
void stack_profile_from_legacy(struct stack_profile *s, const char *name, double api_in_ms,
			       double api_out_ms, double api_cv);

/* True when s adds nothing (every mean 0). */
bool stack_profile_empty(const struct stack_profile *s);

/* Mean of the way in for a request of prompt_tokens tokens, ms. */
static inline double stack_profile_in_ms(const struct stack_profile *s, double prompt_tokens)
{
	return s->in_ms + s->in_ms_per_token * prompt_tokens;
}

/* The fittable term named key of s (a field flagged fit: "frontend_ms",
 * ...), or NULL when there is none. */
double *stack_profile_param(struct stack_profile *s, const char *key);

/* Every described field of s, "name: key=value ...", into buf (len
 * bytes): what a plan's fingerprint and a summary record of the stack. */
void stack_profile_describe(const struct stack_profile *s, char *buf, size_t len);

#endif
