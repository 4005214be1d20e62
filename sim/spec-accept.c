/* servesim — speculative decoding acceptance: the entry's keys, declared
 * once, and the per-position model (spec-accept.h, docs/speculation.md
 * "Acceptance"). */
#include "spec-accept.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define SA(f) offsetof(struct spec_accept, f)
#define STR(k, f, opt, h) .key = k, .kind = CF_STR, .off = SA(f), \
	.size = sizeof(((struct spec_accept *)0)->f), .optional = opt, .help = h

/* The order is the description's (spec_accept_describe). */
const struct catalog_field spec_accept_fields[] = {
	{ STR("name", name, false, "catalog name") },
	{ STR("method", method, false, "draft, eagle, eagle3, mtp, medusa or ngram") },
	{ STR("target", target, true, "target model, as the source names it") },
	{ STR("draft", draft, true, "draft model or head, as the source names it") },
	{ STR("dataset", dataset, true, "prompts the acceptance was measured on") },
	{ .key = "alpha", .kind = CF_POS, .off = SA(alpha), .lo = 1e-6, .hi = 1.0, .unit = "",
	  .show = CF_SHOW_ALWAYS, .help = "acceptance of the first draft token, (0, 1]" },
	{ .key = "decay", .kind = CF_POS, .off = SA(decay), .lo = 1e-6, .hi = 1.0, .unit = "",
	  .show = CF_SHOW_ALWAYS,
	  .help = "conditional acceptance of position i+1 over that of position i, (0, 1]" },
	{ .key = "k_ref", .kind = CF_INT, .off = SA(k_ref), .min = 1, .max = SPEC_MAX_K,
	  .optional = true, .help = "deepest k the source measured (8 where it states none)" },
	{ .key = "al_ref", .kind = CF_NONNEG, .off = SA(al_ref), .lo = 1.0, .hi = SPEC_MAX_K + 1,
	  .optional = true, .unit = "tokens/step", .help = "measured acceptance length at k_ref" },
	{ STR("source", source, false, "where every number came from") },
};

const size_t spec_accept_n_fields = sizeof(spec_accept_fields) / sizeof(spec_accept_fields[0]);

#undef SA
#undef STR

const char *const spec_accept_methods[] = { "draft", "eagle", "eagle3", "mtp", "medusa", "ngram",
					    NULL };

int spec_accept_validate(const struct spec_accept *a, const char *path, const char *where,
			 struct ss_error *err)
{
	for (size_t i = 0; spec_accept_methods[i]; i++)
		if (!strcmp(a->method, spec_accept_methods[i]))
			return 0;
	return ss_error_set(err, -EINVAL, path, 0,
			    "%s: method '%s', expected draft, eagle, eagle3, mtp, medusa or ngram",
			    where, a->method);
}

int spec_accept_positions(const struct spec_accept *a, int k, double *p, struct ss_error *err)
{
	double cum = 1.0, c;

	if (k < 1 || k > SPEC_MAX_K)
		return ss_error_set(err, -EINVAL, NULL, 0, "%s: k %d, expected 1..%d draft tokens",
				    a->name, k, SPEC_MAX_K);
	/* alpha and decay are in (0, 1] (the reader's bounds), so each
	 * conditional c is too and p never rises; fmin keeps it so for an
	 * entry built in code */
	c = fmin(1.0, fmax(0.0, a->alpha));
	for (int i = 0; i < k; i++) {
		cum *= c;
		p[i] = cum;
		c *= fmin(1.0, fmax(0.0, a->decay));
	}
	return 0;
}

double spec_accept_length(const struct spec_accept *a, int k)
{
	double p[SPEC_MAX_K], al = 1.0;

	if (spec_accept_positions(a, k, p, NULL))
		return NAN;
	for (int i = 0; i < k; i++)
		al += p[i];
	return al;
}

int spec_accept_draw(const struct spec_accept *a, int k, double u)
{
	double p[SPEC_MAX_K];
	int n = 0;

	if (spec_accept_positions(a, k, p, NULL))
		return -EINVAL;
	/* p never rises, so the positions with u < p_i are a prefix */
	while (n < k && u < p[n])
		n++;
	return n;
}

void spec_accept_describe(const struct spec_accept *a, char *buf, size_t len)
{
	size_t at;

	if (!len)
		return;
	at = (size_t)snprintf(buf, len, "%s:", a->name);
	catalog_fields_describe(spec_accept_fields, spec_accept_n_fields, a, buf, len, at);
}
