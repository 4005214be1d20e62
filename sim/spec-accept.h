/* servesim — speculative decoding: how many draft tokens the target accepts.
 *
 * One speculative decode step drafts k tokens, verifies k + 1 positions
 * with one target forward and keeps the longest accepted prefix plus the
 * target's own next token.  The acceptance model (docs/speculation.md
 * "Acceptance") gives draft position i (1-based), once positions 1..i-1
 * were accepted, the conditional acceptance
 *     c_i = alpha x decay^(i-1)
 * so the cumulative acceptance of position i is p_i = c_1 x ... x c_i and
 * the expected acceptance length AL(k) = 1 + p_1 + ... + p_k.  alpha is
 * the first draft token's acceptance; decay < 1 says a draft strays
 * further from the target with each token it drafts on its own guesses.
 * Entries are catalog entries (data/acceptance.json, fitted by
 * bench/acceptance-fit.py from published measurements).
 */
#ifndef SS_SPEC_ACCEPT_H
#define SS_SPEC_ACCEPT_H

#include <stddef.h>

#include "catalog-field.h"
#include "ss-error.h"

#define SPEC_MAX_K 16   /* most draft tokens per step */

/* One catalog entry, data/acceptance.json "acceptance": [...]. */
struct spec_accept {
	char name[64];            /* "vllm-eagle3-llama-3.1-8b-instruct-mt-bench", ... */
	char method[16];          /* draft | eagle | eagle3 | mtp | medusa | ngram */
	char target[64], draft[64], dataset[64];   /* as the source names them ("" unknown) */
	double alpha;             /* first draft token's acceptance, (0, 1] */
	double decay;             /* conditional acceptance ratio from one position to the next, (0, 1] */
	int k_ref;                /* deepest k the source measured, 1..SPEC_MAX_K (8 where it states none; 0 absent) */
	double al_ref;            /* measured AL at k_ref, tokens per step (informational; 0 absent) */
	char source[1024];        /* where every number came from */
};

/* The entry's keys (acceptance.json's), one entry each (catalog-field.h):
 * the catalog's reader and writer and `list acceptance` read this table. */
extern const struct catalog_field spec_accept_fields[];
extern const size_t spec_accept_n_fields;

/* The methods spec_accept.method may name, NULL-terminated. */
extern const char *const spec_accept_methods[];

/* Check a read entry (its method one of spec_accept_methods): 0 or
 * -EINVAL, err naming path and where ("entry 3 ('x')"). */
int spec_accept_validate(const struct spec_accept *a, const char *path, const char *where,
			 struct ss_error *err);

/* Cumulative per-position acceptance for k draft tokens: p[i] =
 * P(draft token i+1 accepted), i < k, non-increasing; the expected
 * acceptance length AL = 1 + sum p[i].  0, or -EINVAL when k is outside
 * 1..SPEC_MAX_K (err says so; p untouched). */
int spec_accept_positions(const struct spec_accept *a, int k, double *p, struct ss_error *err);

/* Expected acceptance length for k draft tokens, tokens per step
 * (1 + sum of spec_accept_positions), in [1, k + 1]; NAN when k is
 * outside 1..SPEC_MAX_K. */
double spec_accept_length(const struct spec_accept *a, int k);

/* Accepted draft tokens of one sequence's step, 0..k, from u, a uniform
 * draw in [0, 1) the caller takes from the request's own seeded stream:
 * the number of positions i with u < p_i, so that P(at least i accepted)
 * = p_i and the mean over u is AL(k) - 1.  One draw per sequence and step
 * (positions are accepted as a prefix, so one number decides them all).
 * -EINVAL when k is outside 1..SPEC_MAX_K. */
int spec_accept_draw(const struct spec_accept *a, int k, double u);

/* "name: alpha=... decay=..." of a, into buf (len bytes). */
void spec_accept_describe(const struct spec_accept *a, char *buf, size_t len);

#endif
