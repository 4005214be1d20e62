/* servesim — model, GPU and engine catalogs read from JSON
 * (docs/catalogs.md, docs/engines.md).
 *
 * Each entry is parsed through a field table (catalog-field.h: key, kind,
 * offset, range; the engine profile's is engine-profile.c's), so the rules
 * "every field is required", "a wrong type names the field" and "unknown
 * keys are typos" live in one loop instead of one if-chain per field; the
 * same table writes an entry back (catalog_entry_json) and describes it
 * (catalog_fields_describe).  A file is parsed completely into a scratch array before anything
 * is merged, so a bad file leaves the catalog as it was.
 */
#include "catalog.h"
#include "catalog-field.h"
#include "ss-sort.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <unistd.h>

#include <jansson.h>

_Static_assert(sizeof(enum mlp_kind) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum norm_kind) == sizeof(int), "enum stored as int");

static const char *const mlp_names[] = { "gated", "plain", NULL };
static const char *const norm_names[] = { "rmsnorm", "layernorm", NULL };
/* model_spec.weight_dtype: the index is the enum ss_dtype (precision.h) */
static const char *const weight_dtype_names[] = { "dtype_bytes", "bf16", "fp8", "fp4", NULL };

#define MS(f) offsetof(struct model_spec, f)
#define GS(f) offsetof(struct gpu_spec, f)
#define INT(k, f, lo, hi) { .key = k, .kind = CF_INT, .off = MS(f), .min = lo, .max = hi }
#define OPT_INT(k, f, lo, hi) { .key = k, .kind = CF_INT, .off = MS(f), .min = lo, .max = hi, \
				.optional = true }
#define NUM(k, kd, f, l, h, u) { .key = k, .kind = kd, .off = GS(f), .lo = l, .hi = h, .unit = u }

static const struct catalog_field model_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = MS(name),
	  .size = sizeof(((struct model_spec *)0)->name) },
	{ .key = "hf_id", .kind = CF_STR, .off = MS(hf_id),
	  .size = sizeof(((struct model_spec *)0)->hf_id) },
	INT("n_layers", n_layers, 1, 100000),
	INT("hidden", hidden, 1, 1 << 20),
	INT("n_heads", n_heads, 1, 1 << 16),
	INT("n_kv_heads", n_kv_heads, 1, 1 << 16),
	INT("head_dim", head_dim, 1, 1 << 16),
	INT("intermediate", intermediate, 1, 1 << 22),
	INT("vocab", vocab, 1, 1 << 24),
	INT("max_context", max_context, 1, 1 << 30),
	{ .key = "mlp", .kind = CF_ENUM, .off = MS(mlp), .names = mlp_names },
	{ .key = "tied_embeddings", .kind = CF_BOOL, .off = MS(tied_embeddings) },
	{ .key = "qkv_bias", .kind = CF_BOOL, .off = MS(qkv_bias) },
	{ .key = "norm", .kind = CF_ENUM, .off = MS(norm), .names = norm_names },
	{ .key = "linear_bias", .kind = CF_BOOL, .off = MS(linear_bias) },
	INT("pos_embeddings", pos_embeddings, 0, 1 << 30),
	INT("dtype_bytes", dtype_bytes, 1, 8),
	{ .key = "weight_dtype", .kind = CF_ENUM, .off = MS(weight_dtype),
	  .names = weight_dtype_names, .optional = true },
	{ .key = "source", .kind = CF_STR, .off = MS(source),
	  .size = sizeof(((struct model_spec *)0)->source) },
	/* issue 12: optional, absent = 0 (a dense model, full attention) */
	{ .key = "qk_norm", .kind = CF_BOOL, .off = MS(qk_norm), .optional = true },
	{ .key = "sandwich_norm", .kind = CF_BOOL, .off = MS(sandwich_norm), .optional = true },
	OPT_INT("mtp_layers", mtp_layers, 0, 16),
	OPT_INT("n_experts", n_experts, 0, 1 << 16),
	OPT_INT("experts_per_token", experts_per_token, 0, 1 << 16),
	OPT_INT("moe_intermediate", moe_intermediate, 0, 1 << 22),
	OPT_INT("n_shared_experts", n_shared_experts, 0, 1 << 10),
	OPT_INT("shared_intermediate", shared_intermediate, 0, 1 << 22),
	OPT_INT("moe_first_dense", moe_first_dense, 0, 100000),
	OPT_INT("moe_step", moe_step, 0, 100000),
	{ .key = "router_bias", .kind = CF_BOOL, .off = MS(router_bias), .optional = true },
	{ .key = "moe_dense_layers", .kind = CF_INTS, .off = MS(moe_dense_layers),
	  .size = MODEL_DENSE_LAYERS_MAX, .count_off = MS(n_moe_dense_layers), .min = 0,
	  .max = 99999, .optional = true },
	OPT_INT("sliding_window", sliding_window, 0, 1 << 30),
	OPT_INT("attn_chunk", attn_chunk, 0, 1 << 30),
	OPT_INT("local_period", local_period, 0, 100000),
	{ .key = "attn_sinks", .kind = CF_BOOL, .off = MS(attn_sinks), .optional = true },
	OPT_INT("kv_lora_rank", kv_lora_rank, 0, 1 << 20),
	OPT_INT("q_lora_rank", q_lora_rank, 0, 1 << 20),
	OPT_INT("qk_nope_head_dim", qk_nope_head_dim, 0, 1 << 16),
	OPT_INT("qk_rope_head_dim", qk_rope_head_dim, 0, 1 << 16),
	OPT_INT("v_head_dim", v_head_dim, 0, 1 << 16),
};

static const struct catalog_field gpu_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = GS(name),
	  .size = sizeof(((struct gpu_spec *)0)->name) },
	NUM("bf16_flops", CF_POS, bf16_flops, 1e9, 1e18, "FLOP/s"),
	NUM("hbm_bytes", CF_POS, hbm_bytes, 1e6, 1e15, "bytes"),
	NUM("hbm_bw", CF_POS, hbm_bw, 1e6, 1e16, "bytes/s"),
	NUM("nvlink_bw", CF_NONNEG, nvlink_bw, 1e6, 1e15, "bytes/s"),
	NUM("pcie_bw", CF_POS, pcie_bw, 1e6, 1e15, "bytes/s"),
	NUM("tdp_w", CF_POS, tdp_w, 1, 1e5, "W"),
	NUM("idle_w", CF_NONNEG, idle_w, 1e-3, 1e5, "W"),
	NUM("cost_per_hour", CF_NONNEG, cost_per_hour, 1e-6, 1e6, "USD/h"),
	{ .key = "rdma_bw", .kind = CF_NONNEG, .off = GS(rdma_bw), .optional = true,
	  .lo = 1e6, .hi = 1e15, .unit = "bytes/s" },
	{ .key = "nvlink_latency_us", .kind = CF_NONNEG, .off = GS(nvlink_latency_us),
	  .optional = true, .lo = 1e-6, .hi = 1e6, .unit = "us" },
	{ .key = "rdma_latency_us", .kind = CF_NONNEG, .off = GS(rdma_latency_us),
	  .optional = true, .lo = 1e-6, .hi = 1e6, .unit = "us" },
	{ .key = "host_gap_w", .kind = CF_NONNEG, .off = GS(host_gap_w), .optional = true,
	  .lo = 1e-3, .hi = 1e5, .unit = "W" },
	{ .key = "mem_power_lo", .kind = CF_NONNEG, .off = GS(mem_power_lo), .optional = true,
	  .lo = 1e-3, .hi = 1.0, .unit = "of tdp_w - idle_w" },
	{ .key = "mem_power_hi", .kind = CF_NONNEG, .off = GS(mem_power_hi), .optional = true,
	  .lo = 1e-3, .hi = 1.0, .unit = "of tdp_w - idle_w" },
	{ .key = "mem_power_batch", .kind = CF_NONNEG, .off = GS(mem_power_batch),
	  .optional = true, .lo = 1e-3, .hi = 1e6, .unit = "requests" },
	{ .key = "source", .kind = CF_STR, .off = GS(source),
	  .size = sizeof(((struct gpu_spec *)0)->source) },
	{ .key = "fp8_flops", .kind = CF_NONNEG, .off = GS(fp8_flops), .optional = true,
	  .lo = 1e9, .hi = 1e18, .unit = "FLOP/s" },
	{ .key = "fp4_flops", .kind = CF_NONNEG, .off = GS(fp4_flops), .optional = true,
	  .lo = 1e9, .hi = 1e18, .unit = "FLOP/s" },
	{ .key = "link_peers", .kind = CF_INT, .off = GS(link_peers), .optional = true,
	  .min = 0, .max = 1023, .unit = "direct links per GPU (0: a switch)" },
	{ .key = "family", .kind = CF_STR, .off = GS(family), .optional = true,
	  .size = sizeof(((struct gpu_spec *)0)->family) },
};

double gpu_link_share(const struct gpu_spec *g, int n)
{
	if (g->link_peers <= 0 || n < 2 || n - 1 >= g->link_peers)
		return 1.0;
	return (double)(n - 1) / g->link_peers;
}

/* data/intervals.json (docs/metrics.md "Intervals"): every bound optional,
 * a pair's absence meaning "take the prior entry's"; each a ratio measured
 * / predicted, within 1e-3 .. 1e3 (beyond it no figure means anything). */
#define IS(f) offsetof(struct interval_entry, f)
#define BOUND(k, f, which) { .key = k, .kind = CF_POS, .off = IS(f), .optional = true, \
			     .lo = 1e-3, .hi = 1e3, .unit = "(measured / predicted)", \
			     .help = which " bound on a predicted figure, as a ratio measured / predicted" }
#define BOUNDS(m, idx) BOUND(m "_lo", lo[idx], "lower"), BOUND(m "_hi", hi[idx], "upper")
static const struct catalog_field interval_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = IS(name),
	  .size = sizeof(((struct interval_entry *)0)->name) },
	{ .key = "sources", .kind = CF_INT, .off = IS(sources), .min = 0, .max = 1000,
	  .optional = true },
	BOUNDS("ttft", INTERVAL_TTFT),
	BOUNDS("tpot", INTERVAL_TPOT),
	BOUNDS("itl", INTERVAL_ITL),
	BOUNDS("e2e", INTERVAL_E2E),
};
#undef BOUNDS
#undef BOUND
#undef IS

#undef MS
#undef GS
#undef INT
#undef OPT_INT
#undef NUM

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* What one catalog file holds; every kind shares the loader. */
struct kind {
	const char *top;                /* top-level key: "models" / "gpus" */
	const struct catalog_field *fields;
	size_t n_fields;
	size_t entry_size;              /* sizeof the spec struct */
	/* Cross-field checks after every field parsed; 0 or -EINVAL (NULL:
	 * none). */
	int (*validate)(const void *entry, const char *path, const char *where,
			struct ss_error *err);
	/* An entry naming one already in the catalog may give only some
	 * fields, merged into that entry (a price or a bandwidth overridden
	 * without copying the rest); a new entry still needs every field. */
	bool partial;
};

void catalog_init(struct catalog *c)
{
	memset(c, 0, sizeof(*c));
}

void catalog_release(struct catalog *c)
{
	if (!c)
		return;
	free(c->models);
	free(c->gpus);
	free(c->engines);
	free(c->engine_shipped);
	free(c->intervals);
	free(c->stacks);
	free(c->acceptance);
	memset(c, 0, sizeof(*c));
}

/* Lowercase letters, digits, '.', '-'; starts with a letter or digit. */
static int check_name(const char *name)
{
	const char *p;

	if (!name[0] || name[0] == '-' || name[0] == '.')
		return -EINVAL;
	for (p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '.'))
			return -EINVAL;
	return 0;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:  return "an object";
	case JSON_ARRAY:   return "an array";
	case JSON_STRING:  return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL:    return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:   return "a boolean";
	case JSON_NULL:    return "null";
	}
	return "?";
}

static int parse_field(const struct catalog_field *f, const json_t *v, void *entry,
		       const char *path, const char *where, struct ss_error *err)
{
	char *dst = (char *)entry + f->off;
	const char *s;
	json_int_t i;
	double d;

	switch (f->kind) {
	case CF_STR:
		if (!json_is_string(v))
			goto wrong_type;
		s = json_string_value(v);
		if (strlen(s) >= f->size)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: field \"%s\" is longer than %zu characters",
					    where, f->key, f->size - 1);
		memcpy(dst, s, strlen(s) + 1);
		return 0;
	case CF_INT:
		if (!json_is_integer(v))
			goto wrong_type;
		i = json_integer_value(v);
		if (i < f->min || i > f->max)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: field \"%s\" is %lld, expected %ld..%ld",
					    where, f->key, (long long)i, f->min, f->max);
		*(int *)(void *)dst = (int)i;
		return 0;
	case CF_POS:
	case CF_NONNEG:
		if (!json_is_number(v))
			goto wrong_type;
		d = json_number_value(v);
		if (f->kind == CF_POS ? !(d > 0.0) : !(d >= 0.0))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: field \"%s\" is %g, expected %s",
					    where, f->key, d,
					    f->kind == CF_POS ? "a number > 0" : "a number >= 0");
		if (f->hi > 0 && (d < f->lo || d > f->hi) && !(f->kind == CF_NONNEG && d == 0))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: field \"%s\" is %g %s, expected %s%g to %g %s",
					    where, f->key, d, f->unit,
					    f->kind == CF_NONNEG ? "0 or " : "", f->lo, f->hi, f->unit);
		*(double *)(void *)dst = d;
		return 0;
	case CF_BOOL:
		if (!json_is_boolean(v))
			goto wrong_type;
		*(bool *)(void *)dst = json_is_true(v);
		return 0;
	case CF_ENUM:
		if (!json_is_string(v))
			goto wrong_type;
		s = json_string_value(v);
		for (int k = 0; f->names[k]; k++) {
			if (strcmp(s, f->names[k]) == 0) {
				*(int *)(void *)dst = k;
				return 0;
			}
		}
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: field \"%s\" is \"%s\", expected \"%s\" or \"%s\"",
				    where, f->key, s, f->names[0], f->names[1]);
	case CF_INTS:
		if (!json_is_array(v))
			goto wrong_type;
		if (json_array_size(v) > f->size)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: field \"%s\" has %zu entries, expected at most %zu",
					    where, f->key, json_array_size(v), f->size);
		for (size_t k = 0; k < json_array_size(v); k++) {
			const json_t *x = json_array_get(v, k);

			if (!json_is_integer(x) || json_integer_value(x) < f->min ||
			    json_integer_value(x) > f->max)
				return ss_error_set(err, -EINVAL, path, 0,
						    "%s: field \"%s\" entry %zu is not an integer in %ld..%ld",
						    where, f->key, k, f->min, f->max);
			((int32_t *)(void *)dst)[k] = (int32_t)json_integer_value(x);
		}
		*(int32_t *)(void *)((char *)entry + f->count_off) = (int32_t)json_array_size(v);
		return 0;
	}
	return -EINVAL;

wrong_type:
	return ss_error_set(err, -EINVAL, path, 0, "%s: field \"%s\" is %s, expected %s",
			    where, f->key, type_name(v),
			    f->kind == CF_STR || f->kind == CF_ENUM ? "a string" :
			    f->kind == CF_INT ? "an integer" :
			    f->kind == CF_INTS ? "an array of integers" :
			    f->kind == CF_BOOL ? "true or false" : "a number");
}

/* ---- an entry written and described through its fields ------------------- */

double catalog_field_number(const struct catalog_field *f, const void *entry)
{
	const char *src = (const char *)entry + f->off;

	switch (f->kind) {
	case CF_STR:
		return (double)strlen(src);
	case CF_INT:
	case CF_ENUM:
		return *(const int *)(const void *)src;
	case CF_POS:
	case CF_NONNEG:
		return *(const double *)(const void *)src;
	case CF_BOOL:
		return *(const bool *)(const void *)src;
	case CF_INTS:
		return *(const int32_t *)(const void *)((const char *)entry + f->count_off);
	}
	return 0;
}

/* Whether f shows in the description of entry (enum catalog_field_show). */
static bool field_shows(const struct catalog_field *fields, size_t n,
			const struct catalog_field *f, const void *entry)
{
	if (f->show != CF_SHOW_SET)
		return f->show == CF_SHOW_ALWAYS;
	if (!f->group)
		return catalog_field_number(f, entry) > f->quiet;
	for (size_t i = 0; i < n; i++)
		if (fields[i].group == f->group && fields[i].lead &&
		    catalog_field_number(&fields[i], entry) > fields[i].quiet)
			return true;
	return false;
}

/* " TAG=VALUE" of one field at buf + at; the new at (see snprintf). */
static size_t describe_field(const struct catalog_field *f, const void *entry, char *buf,
			     size_t len, size_t at)
{
	const char *src = (const char *)entry + f->off;
	double v = catalog_field_number(f, entry);

	at += (size_t)snprintf(buf + at, len - at, " %s=", f->tag ? f->tag : f->key);
	if (at >= len)
		return at;
	switch (f->kind) {
	case CF_STR:
		return at + (size_t)snprintf(buf + at, len - at, "%s",
					     !src[0] && f->empty_as ? f->empty_as : src);
	case CF_POS:
	case CF_NONNEG:
		return at + (size_t)snprintf(buf + at, len - at, "%.17g",
					     v == 0.0 && f->zero_as ? f->zero_as : v);
	case CF_ENUM:
		return at + (size_t)snprintf(buf + at, len - at, "%s", f->names[(int)v]);
	case CF_INT:
	case CF_BOOL:
		return at + (size_t)snprintf(buf + at, len - at, "%d", (int)v);
	case CF_INTS:
		for (int32_t i = 0; i < (int32_t)v && at < len; i++)
			at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "",
					       (int)((const int32_t *)(const void *)src)[i]);
		return at;
	}
	return at;
}

double *catalog_fields_fit_param(const struct catalog_field *fields, size_t n, void *entry,
				 const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (fields[i].fit && !strcmp(fields[i].key, key))
			return (double *)(void *)((char *)entry + fields[i].off);
	return NULL;
}

size_t catalog_fields_describe(const struct catalog_field *fields, size_t n, const void *entry,
			       char *buf, size_t len, size_t at)
{
	for (size_t i = 0; i < n && at < len; i++)
		if (field_shows(fields, n, &fields[i], entry))
			at = describe_field(&fields[i], entry, buf, len, at);
	return at;
}

/* f's value as JSON, or NULL (out of memory). */
static json_t *field_json(const struct catalog_field *f, const void *entry)
{
	const char *src = (const char *)entry + f->off;
	double v = catalog_field_number(f, entry);
	json_t *arr;

	switch (f->kind) {
	case CF_STR:
		return json_string(src);
	case CF_INT:
		return json_integer((json_int_t)v);
	case CF_POS:
	case CF_NONNEG:
		return json_real(v);
	case CF_BOOL:
		return json_boolean(v != 0);
	case CF_ENUM:
		return json_string(f->names[(int)v]);
	case CF_INTS:
		arr = json_array();
		for (int32_t i = 0; arr && i < (int32_t)v; i++)
			if (json_array_append_new(arr, json_integer(((const int32_t *)(const void *)src)[i]))) {
				json_decref(arr);
				return NULL;
			}
		return arr;
	}
	return NULL;
}

/* Whether the reader takes f's absent value back when it is written
 * (CATALOG_JSON_EVERY): not a 0 below a field's minimum, nor "". */
static bool zero_readable(const struct catalog_field *f)
{
	return f->kind != CF_POS && f->kind != CF_STR && !(f->kind == CF_INT && f->min > 0);
}

struct json_t *catalog_entry_json(const struct catalog_field *fields, size_t n, const void *entry,
				  unsigned flags)
{
	json_t *obj = json_object();

	for (size_t i = 0; obj && i < n; i++) {
		const struct catalog_field *f = &fields[i];

		if (f->optional && catalog_field_number(f, entry) == 0 &&
		    !((flags & CATALOG_JSON_EVERY) && zero_readable(f)))
			continue;   /* absent means 0 */
		if (json_object_set_new(obj, f->key, field_json(f, entry))) {
			json_decref(obj);
			obj = NULL;
		}
	}
	return obj;
}

/* The issue-12 fields hang together: experts need a width and a top-k,
 * local attention one window kind, MLA its head dimensions. */
static int model_check_shape(const struct model_spec *m, const char *path, const char *where,
			     struct ss_error *err)
{
	if (m->n_experts > 0 && (m->moe_intermediate < 1 || m->experts_per_token < 1 ||
				 m->experts_per_token > m->n_experts))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: n_experts is %d, expected moe_intermediate >= 1 and experts_per_token in 1..%d",
				    where, m->n_experts, m->n_experts);
	if (m->n_experts == 0 && (m->experts_per_token || m->moe_intermediate || m->n_shared_experts))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: experts_per_token, moe_intermediate or n_shared_experts without n_experts",
				    where);
	if (m->sliding_window > 0 && m->attn_chunk > 0)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: sliding_window and attn_chunk both set, expected at most one",
				    where);
	if (m->kv_lora_rank > 0 && (m->qk_rope_head_dim < 1 || m->qk_nope_head_dim < 1 ||
				    m->v_head_dim < 1))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: kv_lora_rank is %d, expected qk_nope_head_dim, qk_rope_head_dim and v_head_dim >= 1",
				    where, m->kv_lora_rank);
	return 0;
}

static int validate_model(const void *entry, const char *path, const char *where,
			  struct ss_error *err)
{
	const struct model_spec *m = entry;

	if (m->n_heads % m->n_kv_heads)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: n_heads (%d) is not a multiple of n_kv_heads (%d)",
				    where, m->n_heads, m->n_kv_heads);
	if (m->dtype_bytes != 1 && m->dtype_bytes != 2 && m->dtype_bytes != 4)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: dtype_bytes is %d, expected 1, 2 or 4",
				    where, m->dtype_bytes);
	return model_check_shape(m, path, where, err);
}

static int validate_gpu(const void *entry, const char *path, const char *where,
			struct ss_error *err)
{
	/* Each figure's plausible range is declared with its field above. */
	const struct gpu_spec *g = entry;

	if (g->idle_w > g->tdp_w)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: idle_w (%g) is above tdp_w (%g)",
				    where, g->idle_w, g->tdp_w);
	if (g->host_gap_w > 0 && !(g->host_gap_w >= g->idle_w && g->host_gap_w <= g->tdp_w))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: host_gap_w (%g) is outside idle_w..tdp_w (%g..%g)",
				    where, g->host_gap_w, g->idle_w, g->tdp_w);
	if (g->mem_power_lo > 0 && g->mem_power_hi > 0 && g->mem_power_lo > g->mem_power_hi)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: mem_power_lo (%g) is above mem_power_hi (%g)",
				    where, g->mem_power_lo, g->mem_power_hi);
	return 0;
}

static const struct kind model_kind = {
	.top = "models",
	.fields = model_fields,
	.n_fields = ARRAY_SIZE(model_fields),
	.entry_size = sizeof(struct model_spec),
	.validate = validate_model,
	.partial = true,
};

static int validate_engine(const void *entry, const char *path, const char *where,
			   struct ss_error *err)
{
	return engine_profile_validate(entry, path, where, err);
}

/* The profile's keys are engine-profile.c's table, whose length is not a
 * constant here. */
static struct kind engine_kind(void)
{
	return (struct kind){
		.top = "engines",
		.fields = engine_profile_fields,
		.n_fields = engine_profile_n_fields,
		.entry_size = sizeof(struct engine_profile),
		.validate = validate_engine,
		.partial = true,
	};
}

const char *interval_metric_name(enum interval_metric m)
{
	static const char *const names[INTERVAL_METRICS] = { "ttft", "tpot", "itl", "e2e" };

	return (unsigned)m < INTERVAL_METRICS ? names[m] : "none";
}

/* Each pair whole (both or neither) and around 1: a bound is a ratio of
 * the measured figure to the predicted one, and the prediction itself
 * (ratio 1) lies inside its own interval. */
static int validate_interval(const void *entry, const char *path, const char *where,
			     struct ss_error *err)
{
	const struct interval_entry *e = entry;

	for (int m = 0; m < INTERVAL_METRICS; m++) {
		const char *n = interval_metric_name((enum interval_metric)m);

		if ((e->lo[m] > 0) != (e->hi[m] > 0))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: %s_%s without %s_%s, expected both bounds or neither",
					    where, n, e->lo[m] > 0 ? "lo" : "hi", n,
					    e->lo[m] > 0 ? "hi" : "lo");
		if (e->lo[m] > 0 && !(e->lo[m] <= 1.0 && e->hi[m] >= 1.0))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: %s_lo %g, %s_hi %g, expected 0 < %s_lo <= 1 <= %s_hi",
					    where, n, e->lo[m], n, e->hi[m], n, n);
	}
	return 0;
}

static const struct kind interval_kind = {
	.top = "intervals",
	.fields = interval_fields,
	.n_fields = ARRAY_SIZE(interval_fields),
	.entry_size = sizeof(struct interval_entry),
	.validate = validate_interval,
};

/* The stack's keys are stack-profile.c's table. */
static struct kind stack_kind(void)
{
	return (struct kind){
		.top = "stacks",
		.fields = stack_profile_fields,
		.n_fields = stack_profile_n_fields,
		.entry_size = sizeof(struct stack_profile),
		/* no .validate: the terms are independent, their ranges the
		 * field table's */
	};
}

static int validate_acceptance(const void *entry, const char *path, const char *where,
			       struct ss_error *err)
{
	return spec_accept_validate(entry, path, where, err);
}

/* The acceptance entry's keys are spec-accept.c's table. */
static struct kind acceptance_kind(void)
{
	return (struct kind){
		.top = "acceptance",
		.fields = spec_accept_fields,
		.n_fields = spec_accept_n_fields,
		.entry_size = sizeof(struct spec_accept),
		.validate = validate_acceptance,
	};
}

static const struct kind gpu_kind = {
	.top = "gpus",
	.fields = gpu_fields,
	.n_fields = ARRAY_SIZE(gpu_fields),
	.entry_size = sizeof(struct gpu_spec),
	.validate = validate_gpu,
	.partial = true,
};

/* Every entry's name is the first field of its spec struct. */
_Static_assert(offsetof(struct model_spec, name) == 0, "name first");
_Static_assert(offsetof(struct gpu_spec, name) == 0, "name first");
_Static_assert(offsetof(struct engine_profile, name) == 0, "name first");
_Static_assert(offsetof(struct interval_entry, name) == 0, "name first");
_Static_assert(offsetof(struct stack_profile, name) == 0, "name first");
_Static_assert(offsetof(struct spec_accept, name) == 0, "name first");

/* base: the catalog's entry of the same name, which a partial entry
 * (k->partial) is merged into; NULL for a new one. */
static int parse_entry(const struct kind *k, const json_t *obj, size_t idx, void *entry,
		       const void *base, const char *path, struct ss_error *err)
{
	char where[128];
	const json_t *name = json_object_get(obj, "name");
	const char *key;
	json_t *v;
	int rc;

	if (json_is_string(name))
		snprintf(where, sizeof(where), "%s[%zu] \"%.64s\"", k->top, idx,
			 json_string_value(name));
	else
		snprintf(where, sizeof(where), "%s[%zu]", k->top, idx);
	if (!json_is_object(obj))
		return ss_error_set(err, -EINVAL, path, 0, "%s is %s, expected an object",
				    where, type_name(obj));

	json_object_foreach((json_t *)obj, key, v) {
		size_t f;

		if (key[0] == '_')      /* "_comment" and friends */
			continue;
		for (f = 0; f < k->n_fields; f++)
			if (strcmp(key, k->fields[f].key) == 0)
				break;
		if (f == k->n_fields)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: unknown field \"%s\"", where, key);
	}
	if (base)
		memcpy(entry, base, k->entry_size);
	else
		memset(entry, 0, k->entry_size);
	for (size_t f = 0; f < k->n_fields; f++) {
		v = json_object_get(obj, k->fields[f].key);
		if (!v && (k->fields[f].optional || base))
			continue;
		if (!v && k->partial)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: missing field \"%s\" (a new entry needs every field; one named like an entry of the catalog gives only those it changes)",
					    where, k->fields[f].key);
		if (!v)
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: missing field \"%s\"", where, k->fields[f].key);
		rc = parse_field(&k->fields[f], v, entry, path, where, err);
		if (rc)
			return rc;
	}
	if (check_name(entry))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: bad name, expected lowercase letters, digits, '.' and '-'",
				    where);
	return k->validate ? k->validate(entry, path, where, err) : 0;
}

/* json_load_file(path, flags, jerr), the file read whole first: the
 * parser then takes its characters from memory, not one getc() each (of a
 * run's start-up, the catalog's three files were half, and getc a tenth
 * of that).  A file that cannot be read is json_load_file's, for its
 * error; a parse error is the same either way (text, line, column). */
static json_t *load_json_file(const char *path, size_t flags, json_error_t *jerr)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *root = NULL;
	bool ok = f != NULL;

	while (ok) {
		size_t got;

		if (len == cap) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 64 * 1024);

			if (!nb) {
				ok = false;
				break;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			ok = !ferror(f);
			break;
		}
	}
	if (f)
		fclose(f);
	root = ok ? json_loadb(buf, len, flags, jerr) : json_load_file(path, flags, jerr);
	free(buf);
	return root;
}

/* A sorted index of the names of n entries (each entry's name is its
 * first field, so an entry's address is its name's): lookups in O(log n),
 * so that loading n entries over a catalog of m costs O((n + m) log(n +
 * m)), not O(n m) (a user's catalog of 100,000 engines loaded in minutes
 * when every entry was compared with every other).  Rejected: a hash map
 * (one more structure to own, for a lookup done once per entry loaded). */
static bool name_before(const void *ctx, const char *const *a, const char *const *b)
{
	(void)ctx;
	return strcmp(*a, *b) < 0;
}
SS_SORT_DEFINE(sort_names, const char *, name_before);

/* *names (transfer full) the n names of arr's entries of size bytes, sorted
 * (stably: equal names keep their order); 0 or -ENOMEM. */
static int names_sorted(const void *arr, size_t n, size_t size, const char ***names)
{
	const char **v = malloc((n ? n : 1) * sizeof(*v)), **tmp = malloc((n ? n : 1) * sizeof(*tmp));

	if (!v || !tmp) {
		free(v);
		free(tmp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = (const char *)arr + i * size;
	sort_names(v, tmp, n, NULL);
	free(tmp);
	*names = v;
	return 0;
}

/* The entry named name among the n sorted names, or NULL. */
static const char *names_find(const char *const *names, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(names[mid], name);

		if (c == 0)
			return names[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Parse path into a fresh array of *n entries (transfer full); with
 * k->partial, an entry named like one of the n_have in have is merged into
 * it. */
static int parse_file(const struct kind *k, const char *path, const void *have, size_t n_have,
		      void **out, size_t *n, struct ss_error *err)
{
	json_error_t jerr;
	json_t *root, *arr;
	char *entries = NULL;
	const char **have_names = NULL, **names = NULL;
	size_t len = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (k->partial && n_have && names_sorted(have, n_have, k->entry_size, &have_names))
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	root = load_json_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_cannot_open_file) {
			free(have_names);
			return ss_error_set(err, -ENOENT, path, 0, "cannot open: %s", jerr.text);
		}
		free(have_names);
		return ss_error_set(err, -EINVAL, path, jerr.line > 0 ? jerr.line : 0,
				    "invalid JSON: %s", jerr.text);
	}
	arr = json_object_get(root, k->top);
	if (!json_is_object(root) || !json_is_array(arr)) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "expected an object {\"%s\": [ ... ]}", k->top);
		goto out;
	}
	len = json_array_size(arr);
	if (len) {
		entries = calloc(len, k->entry_size);
		if (!entries) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < len; i++) {
		char *e = entries + i * k->entry_size;
		const json_t *obj = json_array_get(arr, i);
		const char *name = json_string_value(json_object_get(obj, "name"));
		const void *base = have_names && name ? names_find(have_names, n_have, name) : NULL;

		rc = parse_entry(k, obj, i, e, base, path, err);
		if (rc)
			goto out;
	}
	/* a name given twice: the first entry that repeats an earlier one */
	if (len > 1) {
		size_t dup = SIZE_MAX, first = 0;

		if (names_sorted(entries, len, k->entry_size, &names)) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
		for (size_t g = 0; g + 1 < len; g++) {
			size_t at = (size_t)(names[g + 1] - entries) / k->entry_size;

			/* stable: the group's first is its earliest entry */
			if (!strcmp(names[g], names[g + 1]) && at < dup &&
			    (g == 0 || strcmp(names[g - 1], names[g]))) {
				dup = at;
				first = (size_t)(names[g] - entries) / k->entry_size;
			}
		}
		if (dup != SIZE_MAX) {
			rc = ss_error_set(err, -EINVAL, path, 0,
					  "%s[%zu]: name \"%s\" already used by %s[%zu]",
					  k->top, dup, entries + dup * k->entry_size, k->top, first);
			goto out;
		}
	}
	*out = entries;
	*n = len;
	entries = NULL;
out:
	free(entries);
	free(names);
	free(have_names);
	json_decref(root);
	return rc;
}

/* Replace same-named entries of *arr, append the others (add's names are
 * distinct: parse_file).  pos (n_add entries, or NULL) gets where each of
 * add's entries now is in *arr. */
static int merge(void **arr, size_t *n, const void *add, size_t n_add, size_t size,
		 size_t *pos, struct ss_error *err)
{
	const char **names = NULL;
	size_t *at = malloc((n_add ? n_add : 1) * sizeof(*at)), n_new = 0;
	char *base;

	if (!at || names_sorted(*arr, *n, size, &names)) {
		free(at);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (size_t i = 0; i < n_add; i++) {
		const char *hit = names_find(names, *n, (const char *)add + i * size);

		at[i] = hit ? (size_t)(hit - (const char *)*arr) / size : *n + n_new++;
	}
	free(names);
	if (n_new) {
		base = realloc(*arr, (*n + n_new) * size);
		if (!base) {
			free(at);
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		}
		*arr = base;
	}
	base = *arr;
	for (size_t i = 0; i < n_add; i++) {
		memcpy(base + at[i] * size, (const char *)add + i * size, size);
		if (pos)
			pos[i] = at[i];
	}
	*n += n_new;
	free(at);
	return 0;
}

static int load(const struct kind *k, void **arr, size_t *n, const char *path,
		struct ss_error *err)
{
	void *add;
	size_t n_add;
	int rc;

	rc = parse_file(k, path, *arr, *n, &add, &n_add, err);
	if (rc)
		return rc;
	rc = merge(arr, n, add, n_add, k->entry_size, NULL, err);
	free(add);
	return rc;
}

int catalog_load_models(struct catalog *c, const char *path, struct ss_error *err)
{
	return load(&model_kind, (void **)&c->models, &c->n_models, path, err);
}

int catalog_load_gpus(struct catalog *c, const char *path, struct ss_error *err)
{
	return load(&gpu_kind, (void **)&c->gpus, &c->n_gpus, path, err);
}

/* After n_add entries were merged into c->engines at pos[0..n_add)
 * (merge): mark each of them shipped (the data folder's) or not (a
 * user's). */
static int mark_engines(struct catalog *c, const size_t *pos, size_t n_add, bool shipped,
			struct ss_error *err)
{
	bool *m = realloc(c->engine_shipped, (c->n_engines ? c->n_engines : 1) * sizeof(*m));

	if (!m)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	c->engine_shipped = m;
	for (size_t i = 0; i < n_add; i++)
		m[pos[i]] = shipped;
	return 0;
}

static int load_engines(struct catalog *c, const char *path, bool shipped, struct ss_error *err)
{
	struct kind k = engine_kind();
	size_t n_add, *pos = NULL;
	void *add;
	int rc;

	rc = parse_file(&k, path, c->engines, c->n_engines, &add, &n_add, err);
	if (!rc && !(pos = malloc((n_add ? n_add : 1) * sizeof(*pos))))
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	if (!rc)
		rc = merge((void **)&c->engines, &c->n_engines, add, n_add, k.entry_size, pos, err);
	if (!rc)
		rc = mark_engines(c, pos, n_add, shipped, err);
	free(pos);
	free(add);
	return rc;
}

int catalog_load_engines(struct catalog *c, const char *path, struct ss_error *err)
{
	return load_engines(c, path, false, err);
}

int catalog_load_intervals(struct catalog *c, const char *path, struct ss_error *err)
{
	return load(&interval_kind, (void **)&c->intervals, &c->n_intervals, path, err);
}

const struct interval_entry *catalog_interval(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_intervals; i++)
		if (strcmp(c->intervals[i].name, name) == 0)
			return &c->intervals[i];
	return NULL;
}

bool catalog_engine_shipped(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_engines; i++)
		if (strcmp(c->engines[i].name, name) == 0)
			return c->engine_shipped && c->engine_shipped[i];
	return false;
}

int catalog_load_stacks(struct catalog *c, const char *path, struct ss_error *err)
{
	struct kind k = stack_kind();
	void *add;
	size_t n_add;
	int rc;

	rc = parse_file(&k, path, c->stacks, c->n_stacks, &add, &n_add, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n_add; i++)
		stack_profile_resolve((struct stack_profile *)add + i);
	rc = merge((void **)&c->stacks, &c->n_stacks, add, n_add, k.entry_size, NULL, err);
	free(add);
	return rc;
}

int catalog_load_acceptance(struct catalog *c, const char *path, struct ss_error *err)
{
	struct kind k = acceptance_kind();

	return load(&k, (void **)&c->acceptance, &c->n_acceptance, path, err);
}

const struct spec_accept *catalog_acceptance(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_acceptance; i++)
		if (strcmp(c->acceptance[i].name, name) == 0)
			return &c->acceptance[i];
	return NULL;
}

int catalog_field_set_text(const struct catalog_field *fields, size_t n, void *entry,
			   const char *key, const char *text, const char *where,
			   struct ss_error *err)
{
	const struct catalog_field *f = NULL;
	char *end;
	double d;
	json_t *v;
	int rc;

	for (size_t i = 0; i < n && !f; i++)
		if (!strcmp(fields[i].key, key) &&
		    (fields[i].kind == CF_POS || fields[i].kind == CF_NONNEG))
			f = &fields[i];
	if (!f)
		return -ENOENT;
	d = strtod(text, &end);
	if (!text[0] || *end || !isfinite(d))
		return ss_error_set(err, -EINVAL, NULL, 0, "%s: %s=%s: expected a number%s%s",
				    where, key, text, f->unit && f->unit[0] ? ", " : "",
				    f->unit ? f->unit : "");
	v = json_real(d);
	if (!v)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = parse_field(f, v, entry, NULL, where, err);
	json_decref(v);
	return rc;
}

int catalog_add_engine_text(struct catalog *c, const char *text, const char *origin,
			    struct ss_error *err)
{
	struct kind k = engine_kind();
	struct engine_profile p;
	json_error_t jerr;
	json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	size_t at;
	int rc;

	if (!obj)
		return ss_error_set(err, -EINVAL, origin, 0, "invalid JSON: %s", jerr.text);
	rc = parse_entry(&k, obj, 0, &p, NULL, origin, err);
	json_decref(obj);
	if (!rc)
		rc = merge((void **)&c->engines, &c->n_engines, &p, 1, sizeof(p), &at, err);
	return rc ? rc : mark_engines(c, &at, 1, false, err);
}

int catalog_load_dir(struct catalog *c, const char *dir, struct ss_error *err)
{
	char path[4096];
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/models.json", dir) >= sizeof(path))
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "path too long");
	rc = catalog_load_models(c, path, err);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/gpus.json", dir);
	rc = catalog_load_gpus(c, path, err);
	if (rc)
		return rc;
	/* engines.json is optional in a data folder (one written by
	 * `calibrate run` has none); the shipped one has it */
	snprintf(path, sizeof(path), "%s/engines.json", dir);
	if (access(path, F_OK) == 0 && (rc = load_engines(c, path, true, err)))
		return rc;
	/* stacks.json likewise (the shipped one has it) */
	snprintf(path, sizeof(path), "%s/stacks.json", dir);
	if (access(path, F_OK) == 0 && (rc = catalog_load_stacks(c, path, err)))
		return rc;
	/* acceptance.json likewise (speculative decoding; the shipped one has it) */
	snprintf(path, sizeof(path), "%s/acceptance.json", dir);
	if (access(path, F_OK) == 0 && (rc = catalog_load_acceptance(c, path, err)))
		return rc;
	/* intervals.json likewise: without it figures carry no interval */
	snprintf(path, sizeof(path), "%s/intervals.json", dir);
	if (access(path, F_OK) != 0)
		return 0;
	return catalog_load_intervals(c, path, err);
}

const struct stack_profile *catalog_stack(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_stacks; i++)
		if (strcmp(c->stacks[i].name, name) == 0)
			return &c->stacks[i];
	return NULL;
}

const struct engine_profile *catalog_engine(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_engines; i++)
		if (strcmp(c->engines[i].name, name) == 0)
			return &c->engines[i];
	return NULL;
}

const struct model_spec *catalog_model(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_models; i++)
		if (strcmp(c->models[i].name, name) == 0)
			return &c->models[i];
	return NULL;
}

const struct gpu_spec *catalog_gpu(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n_gpus; i++)
		if (strcmp(c->gpus[i].name, name) == 0)
			return &c->gpus[i];
	return NULL;
}

/* Edit distance of a and b ignoring case (names are short: O(|a| |b|)
 * with one row of at most 128 + 1 entries). */
static size_t name_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[129];

	if (la > 128 || lb > 128)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (tolower((unsigned char)a[i - 1]) !=
							    tolower((unsigned char)b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* name without a trailing -instruct, -hf or -chat (any case), into out. */
static void strip_variant(const char *name, char *out, size_t len)
{
	static const char *const tails[] = { "-instruct", "-hf", "-chat" };
	size_t n;

	snprintf(out, len, "%s", name);
	n = strlen(out);
	for (size_t t = 0; t < sizeof(tails) / sizeof(*tails); t++) {
		size_t k = strlen(tails[t]);

		if (n > k && !strcasecmp(out + n - k, tails[t])) {
			out[n - k] = '\0';
			return;
		}
	}
}

/* Names of n entries at stride bytes from base (each starting with its
 * char name[64]) and, for models, their hf ids; the entry name matches
 * (see catalog_model_find), or -1 and a hint. */
static long find_name(const char *base, size_t stride, size_t n, size_t hf_off, const char *name,
		      char *hint, size_t hint_len)
{
	long hit = -1, prefix = -1;
	size_t n_prefix = 0, best[3] = { SIZE_MAX, SIZE_MAX, SIZE_MAX };
	long best_i[3] = { -1, -1, -1 };
	char want[160];

	if (hint && hint_len)
		hint[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!strcmp(base + i * stride, name))
			return (long)i;
	for (size_t i = 0; i < n && hit < 0; i++)
		if (!strcasecmp(base + i * stride, name))
			hit = (long)i;
	strip_variant(name, want, sizeof(want));
	for (size_t i = 0; i < n && hit < 0 && hf_off; i++) {
		const char *hf = base + i * stride + hf_off, *slash = strchr(hf, '/');
		char id[160], tail[160];

		strip_variant(hf, id, sizeof(id));
		strip_variant(slash ? slash + 1 : hf, tail, sizeof(tail));
		if (hf[0] && (!strcasecmp(id, want) || !strcasecmp(tail, want)))
			hit = (long)i;
	}
	if (hit >= 0)
		return hit;
	for (size_t i = 0; i < n; i++)
		if (!strncasecmp(base + i * stride, name, strlen(name))) {
			prefix = (long)i;
			n_prefix++;
		}
	if (n_prefix == 1 && name[0])
		return prefix;
	/* the hint: the prefix matches when there are several, else the
	 * three nearest names by edit distance (within half the name) */
	for (size_t i = 0; i < n; i++) {
		const char *nm = base + i * stride;
		size_t d = n_prefix ? (strncasecmp(nm, name, strlen(name)) ? SIZE_MAX : strlen(nm))
				    : name_distance(nm, name);

		if (!n_prefix && d > (strlen(name) + 1) / 2 + 1)
			continue;
		for (int k = 0; k < 3; k++)
			if (d < best[k]) {
				for (int m = 2; m > k; m--) {
					best[m] = best[m - 1];
					best_i[m] = best_i[m - 1];
				}
				best[k] = d;
				best_i[k] = (long)i;
				break;
			}
	}
	if (hint && hint_len && best_i[0] >= 0) {
		int w = snprintf(hint, hint_len, "did you mean ");

		for (int k = 0; k < 3 && best_i[k] >= 0 && w >= 0 && (size_t)w < hint_len; k++)
			w += snprintf(hint + w, hint_len - (size_t)w, "%s%s", k ? ", " : "",
				      base + (size_t)best_i[k] * stride);
		if (w >= 0 && (size_t)w < hint_len)
			snprintf(hint + w, hint_len - (size_t)w, "?");
	}
	return -1;
}

const struct model_spec *catalog_model_find(const struct catalog *c, const char *name,
					    char *hint, size_t hint_len)
{
	long i = find_name((const char *)c->models, sizeof(*c->models), c->n_models,
			   offsetof(struct model_spec, hf_id), name, hint, hint_len);

	return i < 0 ? NULL : &c->models[i];
}

const struct gpu_spec *catalog_gpu_find(const struct catalog *c, const char *name,
					char *hint, size_t hint_len)
{
	long i = find_name((const char *)c->gpus, sizeof(*c->gpus), c->n_gpus, 0, name, hint,
			   hint_len);

	return i < 0 ? NULL : &c->gpus[i];
}

int model_spec_validate(const struct model_spec *m, const char *path, const char *where,
			struct ss_error *err)
{
	if (check_name(m->name))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: bad name \"%s\", expected lowercase letters, digits, '.' and '-'",
				    where, m->name);
	return validate_model(m, path, where, err);
}

int catalog_add_model(struct catalog *c, const struct model_spec *m, struct ss_error *err)
{
	return merge((void **)&c->models, &c->n_models, m, 1, sizeof(*m), NULL, err);
}

/* ---- layer types -------------------------------------------------------- */

bool model_layer_is_moe(const struct model_spec *m, int layer)
{
	layer += m->layer_first;   /* a slice's layer, numbered in its model */
	if (m->n_experts <= 0 || layer < m->moe_first_dense)
		return false;
	for (int32_t k = 0; k < m->n_moe_dense_layers; k++)
		if (m->moe_dense_layers[k] == layer)
			return false;
	return m->moe_step <= 1 || (layer + 1) % m->moe_step == 0;
}

bool model_layer_is_local(const struct model_spec *m, int layer)
{
	if (m->sliding_window <= 0 && m->attn_chunk <= 0)
		return false;
	layer += m->layer_first;
	return m->local_period <= 0 || (layer + 1) % m->local_period != 0;
}

int model_moe_layers(const struct model_spec *m)
{
	int n = 0;

	if (m->n_experts <= 0)
		return 0;
	for (int i = 0; i < m->n_layers; i++)
		n += model_layer_is_moe(m, i);
	return n;
}

int model_local_layers(const struct model_spec *m)
{
	int n = 0;

	if (m->sliding_window <= 0 && m->attn_chunk <= 0)
		return 0;
	for (int i = 0; i < m->n_layers; i++)
		n += model_layer_is_local(m, i);
	return n;
}

bool model_layers_alike(const struct model_spec *m)
{
	int moe = model_moe_layers(m), local = model_local_layers(m);

	return (moe == 0 || moe == m->n_layers) && (local == 0 || local == m->n_layers);
}

void model_slice(const struct model_spec *m, int first, int n, struct model_spec *out)
{
	assert(first >= 0 && n >= 0 && first + n <= m->n_layers);
	*out = *m;
	out->layer_first = m->layer_first + first;
	out->n_layers = n;
}

/* ---- parameters, weights, KV -------------------------------------------- */

/* One MLP of inner width ff: gated (gate, up, down) or plain (fc1, fc2),
 * with biases when linear_bias. */
static double mlp_params(const struct model_spec *m, double ff)
{
	double d = m->hidden;

	if (m->mlp == MLP_GATED)
		return 3.0 * d * ff + (m->linear_bias ? 2.0 * ff + d : 0.0);
	return 2.0 * d * ff + (m->linear_bias ? ff + d : 0.0);
}

/* Attention of one layer: Q/K/V/O (GQA) or MLA's down/up projections and
 * their norms; biases, per-head Q/K norms and sinks where the model has
 * them. */
static double attn_params(const struct model_spec *m)
{
	double d = m->hidden, hd = m->head_dim, h = m->n_heads;
	double q = h * hd, kv = (double)m->n_kv_heads * hd;
	double p;

	if (m->kv_lora_rank > 0) {
		double qk = h * (m->qk_nope_head_dim + m->qk_rope_head_dim);
		double ql = m->q_lora_rank, kl = m->kv_lora_rank;

		/* q_a (+ its norm) and q_b, or one q_proj */
		p = ql > 0 ? d * ql + ql + ql * qk : d * qk;
		/* kv_a (latent + decoupled RoPE key), its norm, kv_b (K nope and V) */
		p += d * (kl + m->qk_rope_head_dim) + kl +
		     kl * h * (m->qk_nope_head_dim + m->v_head_dim);
		p += h * m->v_head_dim * d;             /* o_proj */
	} else {
		p = d * (q + 2.0 * kv) + q * d;
		if (m->qkv_bias)
			p += q + 2.0 * kv;
	}
	if (m->linear_bias)
		p += d;                                 /* O projection bias */
	if (m->qk_norm)
		p += 2.0 * hd;
	if (m->attn_sinks)
		p += h;
	return p;
}

/* All layers and the embeddings; a MoE layer counts `experts` routed
 * experts (n_experts for the weights held, experts_per_token for the
 * weights one token uses). */
static double params_with(const struct model_spec *m, double experts)
{
	double d = m->hidden;
	double norm = m->norm == NORM_LAYER ? 2.0 * d : d;
	double common, dense, moe, total;
	int n_moe = model_moe_layers(m);

	common = attn_params(m) + (m->sandwich_norm ? 4.0 : 2.0) * norm;
	dense = mlp_params(m, m->intermediate);
	moe = 0;
	if (n_moe > 0) {
		double shared_ff = m->shared_intermediate > 0 ? m->shared_intermediate
							      : m->moe_intermediate;

		moe = d * m->n_experts + (m->router_bias ? m->n_experts : 0.0);  /* router */
		moe += experts * mlp_params(m, m->moe_intermediate);
		moe += (double)m->n_shared_experts * mlp_params(m, shared_ff);
	}

	total = (double)m->vocab * d + (double)m->pos_embeddings * d;
	total += (double)(m->n_layers - n_moe) * (common + dense) + (double)n_moe * (common + moe);
	total += norm;
	if (!m->tied_embeddings)
		total += (double)m->vocab * d;
	return total;
}

/* Parameters counted as Hugging Face counts them: embeddings, learned
 * positions, per layer the attention (+ biases), the MLP or the MoE block
 * (router, every routed expert, shared experts), two norms (four with
 * sandwich_norm), the final norm, and the LM head unless it is tied to the
 * embedding.  Every term is an integer below 2^53, so the sum is exact
 * whatever its order. */
double model_params(const struct model_spec *m)
{
	return params_with(m, m->n_experts);
}

double model_active_params(const struct model_spec *m)
{
	return params_with(m, m->experts_per_token);
}

double model_distinct_experts(double n_experts, double k, double tokens)
{
	if (!(n_experts > 0.0) || !(tokens > 0.0))
		return 0.0;
	return n_experts * (1.0 - pow(1.0 - k / n_experts, tokens));
}

double model_weight_bytes(const struct model_spec *m)
{
	return model_params(m) * m->dtype_bytes;
}

/* One layer's KV bytes per token: K and V of every KV head, or MLA's
 * latent plus its decoupled RoPE key. */
static double kv_layer_bytes(const struct model_spec *m)
{
	if (m->kv_lora_rank > 0)
		return ((double)m->kv_lora_rank + m->qk_rope_head_dim) * m->dtype_bytes;
	return 2.0 * m->n_kv_heads * (double)m->head_dim * m->dtype_bytes;
}

double model_kv_bytes_per_token(const struct model_spec *m)
{
	if (m->kv_lora_rank > 0)
		return m->n_layers * kv_layer_bytes(m);
	return 2.0 * m->n_layers * m->n_kv_heads * (double)m->head_dim * m->dtype_bytes;
}

double model_kv_bytes_for_tokens(const struct model_spec *m, double tokens)
{
	int local = model_local_layers(m);
	double window = m->sliding_window > 0 ? m->sliding_window : m->attn_chunk;
	double held = tokens < window ? tokens : window;

	return kv_layer_bytes(m) * ((double)(m->n_layers - local) * tokens + (double)local * held);
}

const char *model_unpriced(const struct model_spec *m)
{
	/* MoE, MLA, sliding-window and chunked attention and sinks are priced
	 * (docs/cost-models.md); MLA whose layers are also local is not
	 * (no published model has both, and the roofline prices MLA layers
	 * all alike) */
	if (m->kv_lora_rank > 0 && (m->sliding_window > 0 || m->attn_chunk > 0))
		return "multi-head latent attention with local attention";
	return NULL;
}

const char *model_attn_special(const struct model_spec *m)
{
	if (m->kv_lora_rank > 0)
		return "multi-head latent attention";
	if (m->sliding_window > 0)
		return "sliding-window attention";
	if (m->attn_chunk > 0)
		return "chunked attention";
	return NULL;
}

int model_check_priced(const struct model_spec *m, struct ss_error *err)
{
	const char *what = model_unpriced(m);

	if (!what)
		return 0;
	return ss_error_set(err, -ENOTSUP, NULL, 0, "%s: %s cost is not modelled yet (issue 12)",
			    m->name, what);
}

void model_attn_label(const struct model_spec *m, char *buf, size_t size)
{
	const char *base = m->kv_lora_rank > 0 ? "mla" :
			   m->n_kv_heads == m->n_heads ? "mha" :
			   m->n_kv_heads == 1 ? "mqa" : "gqa";

	snprintf(buf, size, "%s%s%s", base,
		 m->sliding_window > 0 ? "+swa" : m->attn_chunk > 0 ? "+chunk" : "",
		 m->attn_sinks ? "+sinks" : "");
}
