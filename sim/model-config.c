/* servesim — a model from its Hugging Face config.json (docs/catalogs.md).
 *
 * One reader per model_type fills a struct model_spec from the keys that
 * transformers' own config class reads, with that class's defaults where a
 * published config.json leaves a key out (gemma3's text_config omits
 * vocab_size).  A key that is required and absent, of the wrong type or out
 * of range is one error naming the file, the key and what was expected.
 */
#include "catalog.h"
#include "precision.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#define REQUIRED (-1L)

struct rd {
	const char *path;
	const json_t *obj;        /* the object the keys are read from */
	const char *prefix;       /* "text_config." when nested, else "" */
	struct ss_error *err;
};

/* Integer key in [lo, hi]; absent or null: def, or an error when def is
 * REQUIRED. */
static int get_int(const struct rd *r, const char *key, long def, long lo, long hi, int *out)
{
	const json_t *v = json_object_get(r->obj, key);

	if (!v || json_is_null(v)) {
		if (def == REQUIRED)
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "missing key \"%s%s\", expected an integer in %ld..%ld",
					    r->prefix, key, lo, hi);
		*out = (int)def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "key \"%s%s\": expected an integer in %ld..%ld",
				    r->prefix, key, lo, hi);
	*out = (int)json_integer_value(v);
	return 0;
}

static int get_bool(const struct rd *r, const char *key, bool def, bool *out)
{
	const json_t *v = json_object_get(r->obj, key);

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_boolean(v))
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "key \"%s%s\": expected true or false", r->prefix, key);
	*out = json_is_true(v);
	return 0;
}

/* The keys every decoder-only config shares (LlamaConfig's names). */
static int read_common(const struct rd *r, struct model_spec *m, bool tie_default,
		       long vocab_default, long context_default)
{
	int rc;

	if ((rc = get_int(r, "num_hidden_layers", REQUIRED, 1, 100000, &m->n_layers)) ||
	    (rc = get_int(r, "hidden_size", REQUIRED, 1, 1L << 20, &m->hidden)) ||
	    (rc = get_int(r, "num_attention_heads", REQUIRED, 1, 1L << 16, &m->n_heads)) ||
	    (rc = get_int(r, "num_key_value_heads", m->n_heads, 1, 1L << 16, &m->n_kv_heads)) ||
	    (rc = get_int(r, "intermediate_size", REQUIRED, 1, 1L << 22, &m->intermediate)) ||
	    (rc = get_int(r, "vocab_size", vocab_default, 1, 1L << 24, &m->vocab)) ||
	    (rc = get_int(r, "max_position_embeddings", context_default, 1, 1L << 30,
			  &m->max_context)) ||
	    (rc = get_bool(r, "tie_word_embeddings", tie_default, &m->tied_embeddings)))
		return rc;
	if (!json_object_get(r->obj, "head_dim") && m->hidden % m->n_heads)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "missing key \"%shead_dim\", expected an integer (hidden_size %d is not a multiple of num_attention_heads %d)",
				    r->prefix, m->hidden, m->n_heads);
	return get_int(r, "head_dim", m->hidden / m->n_heads, 1, 1L << 16, &m->head_dim);
}

/* layer_types (gemma3, gpt_oss, newer configs): "full_attention",
 * "sliding_attention" or "chunked_attention" per layer, folded into
 * local_period; a pattern that is not P - 1 local layers then one full one,
 * repeated, is refused. */
static int read_layer_types(const struct rd *r, struct model_spec *m, bool *local_any)
{
	const json_t *lt = json_object_get(r->obj, "layer_types");
	int first_full = -1;

	*local_any = false;
	if (!lt || json_is_null(lt))
		return 1;       /* absent */
	if (!json_is_array(lt) || json_array_size(lt) != (size_t)m->n_layers)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "key \"%slayer_types\": expected an array of %d strings",
				    r->prefix, m->n_layers);
	for (int i = 0; i < m->n_layers; i++) {
		const char *s = json_string_value(json_array_get(lt, (size_t)i));

		if (!s || (strcmp(s, "full_attention") && strcmp(s, "sliding_attention") &&
			   strcmp(s, "chunked_attention")))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "key \"%slayer_types\" entry %d: expected \"full_attention\", \"sliding_attention\" or \"chunked_attention\"",
					    r->prefix, i);
		if (strcmp(s, "full_attention"))
			*local_any = true;
		else if (first_full < 0)
			first_full = i;
	}
	m->local_period = first_full < 0 ? 0 : first_full + 1;
	for (int i = 0; i < m->n_layers && *local_any; i++) {
		const char *s = json_string_value(json_array_get(lt, (size_t)i));
		bool local = m->local_period == 0 || (i + 1) % m->local_period != 0;

		if (local != (strcmp(s, "full_attention") != 0))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "key \"%slayer_types\": expected %d local layers then one full one, repeated (layer %d differs)",
					    r->prefix, m->local_period - 1, i);
	}
	return 0;
}

/* A sliding window at least as long as the context changes nothing. */
static int read_sliding(const struct rd *r, struct model_spec *m, int period)
{
	int rc = get_int(r, "sliding_window", 0, 0, 1L << 30, &m->sliding_window);

	if (rc)
		return rc;
	if (m->sliding_window >= m->max_context)
		m->sliding_window = 0;
	m->local_period = m->sliding_window ? period : 0;
	return 0;
}

static int read_dense(const struct rd *r, struct model_spec *m, const char *type)
{
	int rc;
	bool use_swa;

	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)))
		return rc;
	if (!strcmp(type, "qwen2")) {
		m->qkv_bias = true;
	} else if ((rc = get_bool(r, "attention_bias", false, &m->qkv_bias))) {
		return rc;
	}
	if (!strcmp(type, "qwen3"))
		m->qk_norm = true;
	if (!strcmp(type, "qwen2") || !strcmp(type, "qwen3")) {
		/* Qwen's sliding window applies from max_window_layers on
		 * (not a periodic pattern); off in every published config */
		if ((rc = get_bool(r, "use_sliding_window", false, &use_swa)))
			return rc;
		if (use_swa)
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "key \"%suse_sliding_window\": expected false (Qwen's layered sliding window is not supported)",
					    r->prefix);
		return 0;
	}
	if (!strcmp(type, "mistral") || !strcmp(type, "phi3"))
		return read_sliding(r, m, 0);
	return 0;
}

static int read_qwen3_moe(const struct rd *r, struct model_spec *m, const char *type)
{
	const json_t *only;
	int rc;

	(void)type;
	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)) ||
	    (rc = get_bool(r, "attention_bias", false, &m->qkv_bias)) ||
	    (rc = get_int(r, "num_experts", REQUIRED, 1, 1L << 16, &m->n_experts)) ||
	    (rc = get_int(r, "num_experts_per_tok", REQUIRED, 1, m->n_experts,
			  &m->experts_per_token)) ||
	    (rc = get_int(r, "moe_intermediate_size", REQUIRED, 1, 1L << 22,
			  &m->moe_intermediate)) ||
	    (rc = get_int(r, "decoder_sparse_step", 1, 1, 100000, &m->moe_step)))
		return rc;
	m->qk_norm = true;
	only = json_object_get(r->obj, "mlp_only_layers");
	if (only && !json_is_null(only)) {
		if (!json_is_array(only) || json_array_size(only) > MODEL_DENSE_LAYERS_MAX)
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "key \"%smlp_only_layers\": expected an array of at most %d layer numbers",
					    r->prefix, MODEL_DENSE_LAYERS_MAX);
		for (size_t k = 0; k < json_array_size(only); k++) {
			const json_t *x = json_array_get(only, k);

			if (!json_is_integer(x) || json_integer_value(x) < 0 ||
			    json_integer_value(x) >= m->n_layers)
				return ss_error_set(r->err, -EINVAL, r->path, 0,
						    "key \"%smlp_only_layers\" entry %zu: expected a layer number in 0..%d",
						    r->prefix, k, m->n_layers - 1);
			m->moe_dense_layers[k] = (int32_t)json_integer_value(x);
		}
		m->n_moe_dense_layers = (int32_t)json_array_size(only);
	}
	return 0;
}

static int read_mixtral(const struct rd *r, struct model_spec *m, const char *type)
{
	int rc;

	(void)type;
	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)) ||
	    (rc = get_int(r, "num_local_experts", REQUIRED, 1, 1L << 16, &m->n_experts)) ||
	    (rc = get_int(r, "num_experts_per_tok", REQUIRED, 1, m->n_experts,
			  &m->experts_per_token)))
		return rc;
	m->moe_intermediate = m->intermediate;  /* every layer is MoE */
	return read_sliding(r, m, 0);
}

static int read_deepseek_v3(const struct rd *r, struct model_spec *m, const char *type)
{
	int rc, freq;

	(void)type;
	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)) ||
	    (rc = get_int(r, "n_routed_experts", REQUIRED, 1, 1L << 16, &m->n_experts)) ||
	    (rc = get_int(r, "num_experts_per_tok", REQUIRED, 1, m->n_experts,
			  &m->experts_per_token)) ||
	    (rc = get_int(r, "moe_intermediate_size", REQUIRED, 1, 1L << 22,
			  &m->moe_intermediate)) ||
	    (rc = get_int(r, "n_shared_experts", 0, 0, 1L << 10, &m->n_shared_experts)) ||
	    (rc = get_int(r, "first_k_dense_replace", 0, 0, m->n_layers, &m->moe_first_dense)) ||
	    (rc = get_int(r, "moe_layer_freq", 1, 1, 1, &freq)) ||
	    (rc = get_int(r, "kv_lora_rank", REQUIRED, 1, 1L << 20, &m->kv_lora_rank)) ||
	    (rc = get_int(r, "q_lora_rank", 0, 0, 1L << 20, &m->q_lora_rank)) ||
	    (rc = get_int(r, "qk_nope_head_dim", REQUIRED, 1, 1L << 16, &m->qk_nope_head_dim)) ||
	    (rc = get_int(r, "qk_rope_head_dim", REQUIRED, 1, 1L << 16, &m->qk_rope_head_dim)) ||
	    (rc = get_int(r, "v_head_dim", REQUIRED, 1, 1L << 16, &m->v_head_dim)) ||
	    (rc = get_bool(r, "attention_bias", false, &m->qkv_bias)) ||
	    (rc = get_int(r, "num_nextn_predict_layers", 0, 0, 16, &m->mtp_layers)))
		return rc;
	if (m->qkv_bias)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "key \"%sattention_bias\": expected false (MLA with biases is not supported)",
				    r->prefix);
	/* the router's e_score_correction_bias (n_routed_experts per MoE
	 * layer) is stored with the weights */
	m->router_bias = true;
	/* the Q/K head dimension, for listings (MLA's shapes are above) */
	m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
	return 0;
}

static int read_gpt_oss(const struct rd *r, struct model_spec *m, const char *type)
{
	bool local;
	int rc;

	(void)type;
	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)) ||
	    (rc = get_int(r, "num_local_experts", REQUIRED, 1, 1L << 16, &m->n_experts)) ||
	    (rc = get_int(r, "num_experts_per_tok", REQUIRED, 1, m->n_experts,
			  &m->experts_per_token)) ||
	    (rc = get_int(r, "sliding_window", REQUIRED, 1, 1L << 30, &m->sliding_window)))
		return rc;
	m->moe_intermediate = m->intermediate;
	/* attention_bias: Q, K, V and O carry biases; so do the router and
	 * every expert (GptOssExperts' gate_up_proj_bias, down_proj_bias) */
	m->qkv_bias = true;
	m->linear_bias = true;
	m->router_bias = true;
	m->attn_sinks = true;
	rc = read_layer_types(r, m, &local);
	if (rc < 0)
		return rc;
	if (rc > 0)
		m->local_period = 2;    /* GptOssConfig's default: sliding, full, ... */
	else if (!local)
		m->sliding_window = 0;
	return 0;
}

static int read_llama4(const struct rd *r, struct model_spec *m, const char *type)
{
	const json_t *nope;
	int rc, interval;

	(void)type;
	if ((rc = read_common(r, m, false, REQUIRED, REQUIRED)) ||
	    (rc = get_int(r, "num_local_experts", REQUIRED, 1, 1L << 16, &m->n_experts)) ||
	    (rc = get_int(r, "num_experts_per_tok", REQUIRED, 1, m->n_experts,
			  &m->experts_per_token)) ||
	    (rc = get_int(r, "interleave_moe_layer_step", 1, 1, 100000, &m->moe_step)) ||
	    (rc = get_int(r, "attention_chunk_size", 0, 0, 1L << 30, &m->attn_chunk)) ||
	    (rc = get_int(r, "no_rope_layer_interval", 4, 1, 100000, &interval)) ||
	    (rc = get_bool(r, "attention_bias", false, &m->qkv_bias)))
		return rc;
	/* intermediate_size is the experts' (and the shared expert's) width,
	 * intermediate_size_mlp the dense layers' */
	m->moe_intermediate = m->intermediate;
	m->n_shared_experts = 1;
	if ((rc = get_int(r, "intermediate_size_mlp", m->intermediate, 1, 1L << 22,
			  &m->intermediate)))
		return rc;
	m->shared_intermediate = m->moe_intermediate;
	nope = json_object_get(r->obj, "no_rope_layers");
	if (nope && json_is_array(nope) && json_array_size(nope) > 0)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "key \"%sno_rope_layers\": expected absent or [] (the NoPE layers every no_rope_layer_interval)",
				    r->prefix);
	/* chunked attention on the RoPE layers, full on every interval-th (NoPE) */
	if (m->attn_chunk >= m->max_context)
		m->attn_chunk = 0;
	m->local_period = m->attn_chunk ? interval : 0;
	if (m->local_period == 1)
		m->attn_chunk = 0, m->local_period = 0;
	return 0;
}

static int read_gemma(const struct rd *r, struct model_spec *m, const char *type)
{
	bool gemma3 = !strncmp(type, "gemma3", 6), local;
	int rc, pattern;

	/* Gemma3TextConfig's defaults where the published text_config is
	 * silent; Gemma2's config lists every key */
	if ((rc = read_common(r, m, true, gemma3 ? 262208 : REQUIRED,
			      gemma3 ? 131072 : REQUIRED)) ||
	    (rc = get_bool(r, "attention_bias", false, &m->qkv_bias)) ||
	    (rc = get_int(r, "sliding_window", 4096, 1, 1L << 30, &m->sliding_window)))
		return rc;
	m->sandwich_norm = true;
	m->qk_norm = gemma3;
	rc = read_layer_types(r, m, &local);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		if ((rc = get_int(r, "sliding_window_pattern", gemma3 ? 6 : 2, 1, 100000, &pattern)))
			return rc;
		m->local_period = pattern;
		if (pattern == 1)
			m->sliding_window = 0, m->local_period = 0;
	} else if (!local) {
		m->sliding_window = 0;
	}
	if (m->sliding_window >= m->max_context)
		m->sliding_window = 0, m->local_period = 0;
	return 0;
}

static const struct arch {
	const char *type;
	int (*read)(const struct rd *r, struct model_spec *m, const char *type);
	bool text_config;        /* the text model's keys are under "text_config" */
} archs[] = {
	{ "llama", read_dense, false },
	{ "mistral", read_dense, false },
	{ "qwen2", read_dense, false },
	{ "qwen3", read_dense, false },
	{ "phi3", read_dense, false },
	{ "qwen3_moe", read_qwen3_moe, false },
	{ "mixtral", read_mixtral, false },
	{ "deepseek_v3", read_deepseek_v3, false },
	{ "gpt_oss", read_gpt_oss, false },
	{ "llama4", read_llama4, true },
	{ "llama4_text", read_llama4, false },
	{ "gemma2", read_gemma, false },
	{ "gemma3", read_gemma, true },
	{ "gemma3_text", read_gemma, false },
};

#define N_ARCHS (sizeof(archs) / sizeof(archs[0]))

/* The name when none is given: the file's stem, or its folder's name for
 * a file called config.json; lowercased, other characters as '-'. */
static void default_name(const char *path, char *out, size_t size)
{
	const char *base = strrchr(path, '/'), *end;
	size_t n = 0;

	base = base ? base + 1 : path;
	if (!strcmp(base, "config.json") && base > path) {
		end = base - 1;
		base = end;
		while (base > path && base[-1] != '/')
			base--;
	} else {
		end = strrchr(base, '.');
		if (!end || end == base)
			end = base + strlen(base);
	}
	for (const char *p = base; p < end && n + 1 < size; p++) {
		char ch = (char)tolower((unsigned char)*p);

		out[n++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.'
			   ? ch : '-';
	}
	out[n] = '\0';
	if (!n || out[0] == '-' || out[0] == '.')
		snprintf(out, size, "model-config");
}

/* The checkpoint's weight dtype from its quantization_config
 * (model_spec.weight_dtype): quant_method "fp8" (DeepSeek-V3's block-scaled
 * FP8) and "mxfp4" (gpt-oss), and compressed-tensors with float weights of
 * 8 or 4 bits (RedHatAI's FP8-dynamic, NVFP4); any other method (AWQ,
 * GPTQ: integer weights, not priced) leaves dtype_bytes. */
static int checkpoint_dtype(const json_t *root)
{
	const json_t *q = json_object_get(root, "quantization_config");
	const char *meth = json_string_value(json_object_get(q, "quant_method"));
	const json_t *groups = json_object_get(q, "config_groups"), *g;
	const char *key;

	if (!meth)
		return SS_DTYPE_MODEL;
	if (!strcmp(meth, "fp8"))
		return SS_DTYPE_FP8;
	if (!strcmp(meth, "mxfp4"))
		return SS_DTYPE_FP4;
	if (strcmp(meth, "compressed-tensors"))
		return SS_DTYPE_MODEL;
	json_object_foreach((json_t *)groups, key, g) {
		const json_t *w = json_object_get(g, "weights");
		const char *type = json_string_value(json_object_get(w, "type"));
		json_int_t bits = json_integer_value(json_object_get(w, "num_bits"));

		if (type && !strcmp(type, "float") && (bits == 8 || bits == 4))
			return bits == 8 ? SS_DTYPE_FP8 : SS_DTYPE_FP4;
	}
	return SS_DTYPE_MODEL;
}

int model_from_hf_config(struct model_spec *m, const char *path, const char *name,
			 struct ss_error *err)
{
	json_error_t jerr;
	json_t *root;
	const json_t *mt, *obj;
	const struct arch *a = NULL;
	struct rd r = { .path = path, .prefix = "", .err = err };
	int rc;

	memset(m, 0, sizeof(*m));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_cannot_open_file)
			return ss_error_set(err, -ENOENT, path, 0, "cannot open: %s", jerr.text);
		return ss_error_set(err, -EINVAL, path, jerr.line > 0 ? jerr.line : 0,
				    "invalid JSON: %s", jerr.text);
	}
	if (!json_is_object(root)) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "expected a Hugging Face config.json object");
		goto out;
	}
	mt = json_object_get(root, "model_type");
	if (!json_is_string(mt)) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "%s key \"model_type\", expected a string such as \"llama\"",
				  mt ? "wrong type of" : "missing");
		goto out;
	}
	for (size_t i = 0; i < N_ARCHS && !a; i++)
		if (!strcmp(json_string_value(mt), archs[i].type))
			a = &archs[i];
	if (!a) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "key \"model_type\" is \"%.64s\", expected one of llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3, gpt_oss, llama4, gemma2, gemma3, phi3",
				  json_string_value(mt));
		goto out;
	}
	obj = root;
	if (a->text_config) {
		obj = json_object_get(root, "text_config");
		if (!json_is_object(obj)) {
			rc = ss_error_set(err, -EINVAL, path, 0,
					  "%s key \"text_config\", expected an object (model_type %s)",
					  obj ? "wrong type of" : "missing", a->type);
			goto out;
		}
		r.prefix = "text_config.";
	}
	r.obj = obj;
	m->mlp = MLP_GATED;
	m->norm = NORM_RMS;
	m->dtype_bytes = 2;
	rc = a->read(&r, m, a->type);
	if (rc)
		goto out;
	if (name)
		snprintf(m->name, sizeof(m->name), "%s", name);
	else
		default_name(path, m->name, sizeof(m->name));
	mt = json_object_get(root, "_name_or_path");
	snprintf(m->hf_id, sizeof(m->hf_id), "%s", json_is_string(mt) ? json_string_value(mt) : "");
	snprintf(m->source, sizeof(m->source), "%s", path);
	m->weight_dtype = checkpoint_dtype(root);
	rc = model_spec_validate(m, path, "config", err);
out:
	json_decref(root);
	return rc;
}
