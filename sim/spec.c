/* servesim — speculative decoding in the engine: --spec, the draws and
 * the drafter's memory (spec.h, docs/speculation.md). */
#include "spec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "precision.h"
#include "rng.h"

static const char *const method_names[SPEC_METHODS] = {
	[SPEC_DRAFT] = "draft", [SPEC_EAGLE] = "eagle", [SPEC_EAGLE3] = "eagle3",
	[SPEC_MTP] = "mtp", [SPEC_MEDUSA] = "medusa", [SPEC_NGRAM] = "ngram",
};

const char *spec_method_name(enum spec_method m)
{
	return m < SPEC_METHODS ? method_names[m] : "?";
}

/* The keys of --spec METHOD:KEY=VALUE,...: the parser below, its errors
 * and the help and docs read this one list. */
enum spec_key {
	SK_K, SK_TREE, SK_DRAFT, SK_ACCEPT, SK_ALPHA, SK_DECAY, SK_ACCEPT_TENANT, SK_MAX_BATCH, SK_N
};

const struct spec_key_doc spec_keys[] = {
	[SK_K] = { "k", "K", "draft tokens per step, 1..16 (required)" },
	[SK_TREE] = { "tree", "N", "candidate tokens verified per sequence and step, k..64 "
		      "(default k: a chain)" },
	[SK_DRAFT] = { "draft", "MODEL", "the draft model, a catalog model (method draft only, "
		       "required there)" },
	[SK_ACCEPT] = { "accept", "NAME", "the acceptance model, an entry of `servesim list "
			"acceptance` (default METHOD-median)" },
	[SK_ALPHA] = { "alpha", "A", "acceptance of the first draft token, in (0, 1] "
		       "(instead of accept=)" },
	[SK_DECAY] = { "decay", "D", "conditional acceptance of each further position over "
		       "the one before, in (0, 1] (with alpha=; default 1)" },
	[SK_ACCEPT_TENANT] = { "accept_tenant", "T:NAME/T:NAME...",
			       "acceptance classes: the requests of tenant T (a trace's tenant "
			       "column, --tenants, a workload model's) accept by entry NAME; up to 8" },
	[SK_MAX_BATCH] = { "max_batch", "N", "no drafts in a step of more than N running "
			   "sequences (vLLM's disable_by_batch_size, TensorRT-LLM's "
			   "max_concurrency; default no limit)" },
	{ NULL, NULL, NULL },
};

static int bad(struct ss_error *err, const char *what)
{
	return ss_error_set(err, -EINVAL, NULL, 0, "--spec: %s", what);
}

/* A name value into dst (size bytes): -1 when empty or too long. */
static int copy_value(char *dst, size_t size, const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n >= size)
		return -1;
	memcpy(dst, v, n + 1);
	return 0;
}

/* The drafter's model: the draft model, or the target's one-layer slice
 * (its last layer: DeepSeek-V3's MTP module is a MoE block like its last
 * layers, and an EAGLE head is a decoder layer of the target's width). */
static int set_drafter(struct spec_config *c, const char *draft, const struct catalog *cat,
		       const struct model_spec *target, struct ss_error *err)
{
	char msg[256];

	if (c->method == SPEC_DRAFT) {
		const struct model_spec *d;

		if (!draft[0])
			return bad(err, "method draft needs draft=MODEL (a catalog model, `servesim list models`)");
		d = cat ? catalog_model(cat, draft) : NULL;
		if (!d) {
			snprintf(msg, sizeof(msg), "draft=%s: unknown model (see `servesim list models`)",
				 draft);
			return bad(err, msg);
		}
		c->draft = *d;
	} else {
		if (c->method == SPEC_MTP && target->mtp_layers < 1) {
			snprintf(msg, sizeof(msg),
				 "mtp: %s ships no MTP layers (models.json mtp_layers, a config's num_nextn_predict_layers); eagle3 or draft instead",
				 target->name);
			return bad(err, msg);
		}
		if (draft[0]) {
			snprintf(msg, sizeof(msg), "draft= is for method draft; %s drafts with %s",
				 spec_method_name(c->method),
				 c->method == SPEC_NGRAM ? "prompt lookup" : "the target's own layers");
			return bad(err, msg);
		}
		model_slice(target, target->n_layers - 1, c->method == SPEC_NGRAM ? 0 : 1, &c->draft);
		/* EAGLE-3 heads predict over a reduced draft vocabulary:
		 * draft_vocab_size 32,000 in the published heads' configs
		 * (Llama-3.1-8B's, Qwen3's); its LM head is that wide */
		if (c->method == SPEC_EAGLE3 && c->draft.vocab > 32000)
			c->draft.vocab = 32000;
	}
	c->draft_priced = c->method != SPEC_NGRAM;
	c->draft_passes = c->method == SPEC_MEDUSA ? 1 : c->method == SPEC_NGRAM ? 0 : c->k;
	return 0;
}

/* accept_tenant=T:NAME/T:NAME...: c's acceptance classes. */
static int parse_classes(struct spec_config *c, char *list, const struct catalog *cat,
			 struct ss_error *err)
{
	char msg[320], *save = NULL;

	for (char *it = strtok_r(list, "/", &save); it; it = strtok_r(NULL, "/", &save)) {
		char *colon = strchr(it, ':');
		const struct spec_accept *a;
		long t;

		if (!colon || (*colon = '\0', ss_parse_long_in(it, 0, INT32_MAX, &t)) || !colon[1]) {
			snprintf(msg, sizeof(msg),
				 "accept_tenant: '%.64s': expected T:NAME (T a tenant id >= 0, NAME an entry of `servesim list acceptance`), items separated by '/'",
				 it);
			return bad(err, msg);
		}
		for (int i = 0; i < c->n_classes; i++)
			if (c->class_tenant[i] == t) {
				snprintf(msg, sizeof(msg), "accept_tenant: tenant %ld given twice", t);
				return bad(err, msg);
			}
		if (c->n_classes == SPEC_MAX_CLASSES)
			return bad(err, "accept_tenant: at most 8 classes");
		a = cat ? catalog_acceptance(cat, colon + 1) : NULL;
		if (!a) {
			snprintf(msg, sizeof(msg),
				 "accept_tenant: %.64s: no such acceptance entry (see `servesim list acceptance`)",
				 colon + 1);
			return bad(err, msg);
		}
		c->class_tenant[c->n_classes] = (int32_t)t;
		c->class_accept[c->n_classes] = *a;
		if (spec_accept_positions(a, c->k, c->class_p[c->n_classes], err))
			return -EINVAL;
		c->n_classes++;
	}
	return 0;
}

int spec_config_parse(struct spec_config *c, const char *arg, const struct catalog *cat,
		      const struct model_spec *target, struct ss_error *err)
{
	char buf[256], msg[640], draft[64] = "", accept[64] = "", classes[192] = "";
	char *colon, *tok, *save = NULL;
	double alpha = 0, decay = 1;
	bool seen[SK_N] = { false };
	long k = 0, tree = 0, max_batch = 0;
	int m;

	memset(c, 0, sizeof(*c));
	if (strlen(arg) >= sizeof(buf))
		return bad(err, "too long");
	snprintf(c->text, sizeof(c->text), "%s", arg);
	snprintf(buf, sizeof(buf), "%s", arg);
	colon = strchr(buf, ':');
	if (colon)
		*colon = '\0';
	for (m = 0; m < SPEC_METHODS && strcmp(buf, method_names[m]); m++)
		;
	if (m == SPEC_METHODS) {
		snprintf(msg, sizeof(msg),
			 "unknown method '%.64s', expected draft, eagle, eagle3, mtp, medusa or ngram "
			 "(METHOD:k=K,...)", buf);
		return bad(err, msg);
	}
	c->method = (enum spec_method)m;
	for (tok = colon ? strtok_r(colon + 1, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		const char *val;
		int key = ss_keyval_take(tok, spec_keys, sizeof(*spec_keys), SK_N, seen, &val, msg,
					 sizeof(msg));
		int rc = 0;

		if (key < 0)
			return bad(err, msg);
		switch ((enum spec_key)key) {
		case SK_K: rc = ss_parse_long_in(val, 1, SPEC_MAX_K, &k); break;
		case SK_TREE: rc = ss_parse_long_in(val, 1, 64, &tree); break;
		case SK_MAX_BATCH: rc = ss_parse_long_in(val, 1, INT_MAX, &max_batch); break;
		case SK_ALPHA: rc = ss_parse_double_in(val, 0, 1, &alpha); break;
		case SK_DECAY: rc = ss_parse_double_in(val, 0, 1, &decay); break;
		case SK_DRAFT: rc = copy_value(draft, sizeof(draft), val); break;
		case SK_ACCEPT: rc = copy_value(accept, sizeof(accept), val); break;
		case SK_ACCEPT_TENANT: rc = copy_value(classes, sizeof(classes), val); break;
		case SK_N: break;
		}
		if (rc) {
			snprintf(msg, sizeof(msg), "%s=%s: expected %s, %s", tok, val,
				 spec_keys[key].arg, spec_keys[key].help);
			return bad(err, msg);
		}
	}
	if (!seen[SK_K])
		return bad(err, "k=K is required (draft tokens per step, 1..16)");
	c->k = (int)k;
	c->tree = seen[SK_TREE] ? (int)tree : c->k;
	if (c->tree < c->k) {
		snprintf(msg, sizeof(msg), "tree=%d: expected at least k (%d) candidate tokens",
			 c->tree, c->k);
		return bad(err, msg);
	}
	c->max_batch = (int)max_batch;
	if (seen[SK_ACCEPT] && (seen[SK_ALPHA] || seen[SK_DECAY]))
		return bad(err, "accept= and alpha=/decay= are alternatives; give one");
	if (seen[SK_DECAY] && !seen[SK_ALPHA])
		return bad(err, "decay= needs alpha=");
	if (seen[SK_ALPHA]) {
		snprintf(c->accept.name, sizeof(c->accept.name), "given");
		snprintf(c->accept.method, sizeof(c->accept.method), "%s", method_names[m]);
		c->accept.alpha = alpha;
		c->accept.decay = decay;
		snprintf(c->accept.source, sizeof(c->accept.source), "--spec alpha=, decay=");
	} else {
		const struct spec_accept *a;

		if (!accept[0])
			snprintf(accept, sizeof(accept), "%s-median", method_names[m]);
		a = cat ? catalog_acceptance(cat, accept) : NULL;
		if (!a) {
			snprintf(msg, sizeof(msg),
				 "accept=%s: no such acceptance entry (see `servesim list acceptance`)",
				 accept);
			return bad(err, msg);
		}
		c->accept = *a;
	}
	if (spec_accept_positions(&c->accept, c->k, c->p, err))
		return -EINVAL;
	if (classes[0] && parse_classes(c, classes, cat, err))
		return -EINVAL;
	return set_drafter(c, draft, cat, target, err);
}

int spec_accept_count(const double *p, uint64_t seed, uint32_t id, int32_t pos, int drafted)
{
	/* one splitmix64 round over (seed, request, position): well mixed
	 * for a uniform per key (its finaliser passes the avalanche tests);
	 * ss_splitmix64 adds the golden ratio first, so this hashes
	 * seed x golden + key */
	uint64_t h = ss_splitmix64((seed - 1) * 0x9e3779b97f4a7c15ULL +
				   ((uint64_t)id << 32 | (uint32_t)pos));
	double u = (double)(h >> 11) * 0x1.0p-53;
	int n = 0;

	/* the cumulative acceptances never rise: those above u are a prefix,
	 * counted without a branch (which way u falls is a coin toss a
	 * branch predictor loses: this runs once per sequence and step) */
	for (int i = 0; i < drafted; i++)
		n += u < p[i];
	return n;
}

double spec_draft_weight_bytes(const struct spec_config *c, enum ss_dtype weight_dtype)
{
	struct model_spec none;

	if (c->method == SPEC_DRAFT)
		return model_weight_bytes_as(&c->draft, weight_dtype);
	if (!c->draft_priced)
		return 0;
	/* the layer alone: embeddings and LM head are the target's */
	model_slice(&c->draft, 0, 0, &none);
	return model_weight_bytes_as(&c->draft, weight_dtype) - model_weight_bytes_as(&none, weight_dtype);
}

double spec_draft_kv_bytes_per_token(const struct spec_config *c, enum ss_dtype kv_dtype)
{
	if (!c->draft_priced || c->method == SPEC_MEDUSA)
		return 0;   /* medusa's heads keep no KV */
	return model_kv_bytes_per_token_as(&c->draft, kv_dtype);
}

void spec_stats_add(struct spec_stats *a, const struct spec_stats *b)
{
	a->verifies += b->verifies;
	a->drafted += b->drafted;
	a->accepted += b->accepted;
	a->spec_emitted += b->spec_emitted;
	a->draft_passes += b->draft_passes;
	a->draft_ns += b->draft_ns;
	a->draft_energy_j += b->draft_energy_j;
	a->verify_ns = a->verify_ns + b->verify_ns;
	a->rejected_energy_j += b->rejected_energy_j;
}
