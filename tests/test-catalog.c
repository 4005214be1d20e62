/* Catalogs: the shipped models.json and gpus.json load, derived quantities
 * match the published parameter counts, a second file overrides and
 * extends by name, and every malformed input is an error naming the file,
 * entry and field. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "check-main.h"
#include "check-tmp.h"
#include "config.h"

static const char *data_dir(void)
{
	const char *d = getenv("SERVESIM_DATA");

	return d && *d ? d : SERVESIM_SRC_DATADIR;
}

static void load_shipped(struct catalog *c)
{
	struct ss_error err = { 0 };
	int rc;

	catalog_init(c);
	rc = catalog_load_dir(c, data_dir(), &err);
	ck_assert_msg(rc == 0, "%s:%ld: %s", err.file, err.line, err.msg);
}

/* A complete, valid model entry; tests substitute one field at a time. */
#define MODEL_FIELDS(name, layers) \
	"\"name\": \"" name "\", \"hf_id\": \"x/y\", \"n_layers\": " layers ", " \
	"\"hidden\": 64, \"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 16, " \
	"\"intermediate\": 128, \"vocab\": 100, \"max_context\": 512, " \
	"\"mlp\": \"gated\", \"tied_embeddings\": false, \"qkv_bias\": false, " \
	"\"norm\": \"rmsnorm\", \"linear_bias\": false, \"pos_embeddings\": 0, " \
	"\"dtype_bytes\": 2, \"source\": \"test\""

/* Load text as a models file; return the rc and fill err. */
static int load_models_text(struct catalog *c, const char *text, char *path, size_t len,
			    struct ss_error *err)
{
	int rc;

	check_write_tmp(path, len, "catalog", text);
	rc = catalog_load_models(c, path, err);
	unlink(path);
	return rc;
}

START_TEST(shipped_files_load)
{
	struct catalog c;
	static const char *const models[] = {
		"llama-3.2-1b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b",
		"llama-3.1-70b", "mistral-7b", "qwen2.5-7b", "qwen2.5-72b", "opt-13b", "opt-66b",
		"bloom-176b", "qwen3-32b",
		/* issue 12 (tests/test-model-config.c checks each against its config) */
		"llama-3.3-70b", "qwen3-8b", "qwen3-14b", "qwen3-30b-a3b", "qwen3-235b-a22b",
		"gpt-oss-20b", "gpt-oss-120b", "deepseek-v3", "mixtral-8x7b", "llama-4-scout",
		"gemma-3-27b",
		/* issue 33: AMD's MI300X reference tables */
		"llama-3.1-405b",
		/* issue 33: S-LoRA's base model */
		"llama-7b",
	};
	static const char *const gpus[] = { "a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200-sxm",
					     "l40s", "rtx-4090", "rtx-pro-6000-server", "rtx-pro-6000",
					     "b200", "b300", "gb200", "rtx-3090",
					     /* issue 33: S-LoRA's runs */
					     "a10g",
					     /* issue 33: AMD Instinct */
					     "mi300x", "mi325x", "mi355x", "mi350x", "mi308x" };

	load_shipped(&c);
	ck_assert_uint_eq(c.n_models, sizeof(models) / sizeof(models[0]));
	ck_assert_uint_eq(c.n_gpus, sizeof(gpus) / sizeof(gpus[0]));
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		const struct model_spec *m = catalog_model(&c, models[i]);

		ck_assert_msg(m != NULL, "model %s missing", models[i]);
		ck_assert_msg(strncmp(m->source, "https://huggingface.co/", 23) == 0,
			      "%s: source is not a Hugging Face URL", models[i]);
	}
	for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++) {
		const struct gpu_spec *g = catalog_gpu(&c, gpus[i]);

		ck_assert_msg(g != NULL, "gpu %s missing", gpus[i]);
		ck_assert(g->idle_w > 0 && g->idle_w < g->tdp_w);
		ck_assert(g->source[0] != '\0');
	}
	catalog_release(&c);
}
END_TEST

START_TEST(shipped_gpu_values)
{
	struct catalog c;
	const struct gpu_spec *g;

	load_shipped(&c);
	g = catalog_gpu(&c, "h100-sxm");
	ck_assert_double_eq(g->bf16_flops, 989.4e12);
	ck_assert_double_eq(g->hbm_bytes, 81559.0 * 1048576); /* nvidia-smi MiB, not 80e9 */
	ck_assert_double_eq(g->hbm_bw, 3.35e12);
	ck_assert_double_eq(g->nvlink_bw, 450e9);
	ck_assert_double_eq(g->tdp_w, 700);
	ck_assert_double_eq(g->idle_w, 75);         /* Splitwise measurement */
	g = catalog_gpu(&c, "a100-80gb-sxm");
	ck_assert_double_eq(g->hbm_bytes, 80.0 * 1073741824); /* 80 GiB: 81920 MiB */
	ck_assert_double_eq(g->idle_w, 63);
	ck_assert_double_eq(g->nvlink_bw, 300e9);
	g = catalog_gpu(&c, "l40s");
	ck_assert_double_eq(g->nvlink_bw, 0);        /* PCIe only */
	ck_assert_double_eq(g->hbm_bytes, 46068.0 * 1048576);
	g = catalog_gpu(&c, "rtx-4090");             /* Ada whitepaper: FP32-accumulate BF16 */
	ck_assert_double_eq(g->bf16_flops, 165.2e12);
	ck_assert_double_eq(g->hbm_bw, 1008e9);
	ck_assert_double_eq(g->nvlink_bw, 0);
	g = catalog_gpu(&c, "rtx-pro-6000-server");  /* the GPU of LLMServingSim's runs */
	ck_assert_double_eq(g->hbm_bytes, 97887.0 * 1048576);
	ck_assert_double_eq(g->hbm_bw, 1597e9);
	ck_assert_double_eq(g->pcie_bw, 64e9);
	ck_assert_double_eq(catalog_gpu(&c, "rtx-pro-6000")->hbm_bw, 1792e9);
	catalog_release(&c);
}
END_TEST

/* Parameter counts: the formula gives these exact values; the published
 * sizes are 8.03B, 6.74B, 68.98B, 7.62B, 1.24B and 12.85B. */
START_TEST(param_counts)
{
	struct catalog c;

	load_shipped(&c);
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "llama-3.1-8b")), 8030261248.0, 0.5);
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "llama-2-7b")), 6738415616.0, 0.5);
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "llama-2-70b")), 68976648192.0, 0.5);
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "qwen2.5-7b")), 7.62e9, 0.01e9);
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "llama-3.2-1b")), 1.24e9, 0.01e9);
	/* BLOOM: Hugging Face counts 176,247,271,424 with the embedding LayerNorm
	 * (2 x 14336), which the catalog does not model */
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "bloom-176b")), 176247271424.0 - 2 * 14336, 0.5);
	/* Qwen3-32B: 32,762,123,264 from its config.json's shapes, less the
	 * per-head q_norm and k_norm weights (2 x 128 per layer x 64 layers),
	 * which the catalog does not model; published 32.8B.  Q and O are
	 * n_heads x head_dim = 8192 wide, not hidden = 5120. */
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "qwen3-32b")), 32762123264.0 - 64 * 256, 0.5);
	/* tied LM head, learned positions, biases and LayerNorm biases */
	ck_assert_double_eq_tol(model_params(catalog_model(&c, "opt-13b")), 12.85e9, 0.01e9);
	ck_assert_double_eq_tol(model_weight_bytes(catalog_model(&c, "llama-2-7b")),
				2.0 * 6738415616.0, 1.0);
	catalog_release(&c);
}
END_TEST

START_TEST(kv_bytes_per_token)
{
	struct catalog c;

	load_shipped(&c);
	/* 2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes */
	ck_assert_double_eq(model_kv_bytes_per_token(catalog_model(&c, "llama-3.1-8b")), 131072.0);
	/* MHA: 2 x 32 x 32 x 128 x 2 */
	ck_assert_double_eq(model_kv_bytes_per_token(catalog_model(&c, "llama-2-7b")), 524288.0);
	catalog_release(&c);
}
END_TEST

START_TEST(second_file_overrides_and_extends)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];
	size_t n_before;
	const struct model_spec *m;

	load_shipped(&c);
	n_before = c.n_models;
	ck_assert_int_eq(load_models_text(&c,
		"{\"models\": [ {" MODEL_FIELDS("llama-3.1-8b", "3") "},\n"
		"               {" MODEL_FIELDS("my-model-1.0", "5") "} ]}\n",
		path, sizeof(path), &err), 0);
	ck_assert_uint_eq(c.n_models, n_before + 1);
	m = catalog_model(&c, "llama-3.1-8b");
	ck_assert_int_eq(m->n_layers, 3);             /* replaced */
	ck_assert_int_eq(m->hidden, 64);
	m = catalog_model(&c, "my-model-1.0");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->n_layers, 5);
	ck_assert_ptr_nonnull(catalog_model(&c, "llama-2-70b"));  /* untouched */
	catalog_release(&c);
}
END_TEST

START_TEST(gpu_override)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];

	load_shipped(&c);
	size_t n = c.n_gpus;
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"h100-sxm\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
		  " \"hbm_bw\": 3e12, \"nvlink_bw\": 4.5e11, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
		  " \"idle_w\": 80, \"cost_per_hour\": 2.5, \"source\": \"mine\"}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), 0);
	unlink(path);
	ck_assert_uint_eq(c.n_gpus, n);   /* replaced, not added */
	ck_assert_double_eq(catalog_gpu(&c, "h100-sxm")->hbm_bw, 3e12);
	ck_assert_double_eq(catalog_gpu(&c, "h100-sxm")->cost_per_hour, 2.5);
	catalog_release(&c);
}
END_TEST

/* An entry named like a catalog GPU gives only what it changes (issue 15):
 * merged into the shipped entry, optional fields included; a new GPU still
 * needs every field; a merge that breaks a cross-field rule is refused; a
 * refused file changes nothing. */
START_TEST(gpu_partial_merge)
{
	struct catalog c;
	struct ss_error err = { 0 };
	const struct gpu_spec *g;
	size_t n;
	char path[512];

	load_shipped(&c);
	n = c.n_gpus;
	check_write_tmp(path, sizeof(path), "catalog", "{\"gpus\": [{\"name\": \"h100-sxm\", \"cost_per_hour\": 2.5}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), 0);
	unlink(path);
	g = catalog_gpu(&c, "h100-sxm");
	ck_assert_uint_eq(c.n_gpus, n);
	ck_assert_double_eq(g->cost_per_hour, 2.5);
	ck_assert_double_eq(g->hbm_bw, 3.35e12);          /* data/gpus.json's, kept */
	ck_assert_double_eq(g->fp8_flops, 1978.9e12);     /* an optional field, kept */
	ck_assert_double_eq(g->tdp_w, 700);
	check_write_tmp(path, sizeof(path), "catalog", "{\"gpus\": [{\"name\": \"h100-new\", \"cost_per_hour\": 2}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err.msg, "gpus[0] \"h100-new\": missing field \"bf16_flops\"") &&
		      strstr(err.msg, "a new entry needs every field"), "%s", err.msg);
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"a100-80gb-sxm\", \"cost_per_hour\": 1},"
		  " {\"name\": \"h100-sxm\", \"idle_w\": 800}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err.msg, "gpus[1] \"h100-sxm\": idle_w (800) is above tdp_w (700)"), "%s",
		      err.msg);
	/* the refused file merged nothing, not even its good first entry */
	ck_assert_double_eq(catalog_gpu(&c, "a100-80gb-sxm")->cost_per_hour, 2.4984);
	ck_assert_double_eq(catalog_gpu(&c, "h100-sxm")->idle_w, 75);
	catalog_release(&c);
}
END_TEST

/* A model or an engine named like one of the catalog merges the fields it
 * gives into it, as a GPU does (issue 34: changing a model's context no
 * longer copies the whole entry); a new one still needs every field. */
START_TEST(model_and_engine_partial_merge)
{
	struct catalog c;
	struct ss_error err = { 0 };
	const struct model_spec *m;
	const struct engine_profile *e;
	size_t n;
	char path[512];

	load_shipped(&c);
	n = c.n_models;
	check_write_tmp(path, sizeof(path), "catalog",
			"{\"models\": [{\"name\": \"llama-3.1-8b\", \"max_context\": 32768}]}");
	ck_assert_int_eq(catalog_load_models(&c, path, &err), 0);
	unlink(path);
	m = catalog_model(&c, "llama-3.1-8b");
	ck_assert_uint_eq(c.n_models, n);
	ck_assert_int_eq(m->max_context, 32768);
	ck_assert_int_eq(m->hidden, 4096);             /* data/models.json's, kept */
	ck_assert_int_eq(m->n_kv_heads, 8);
	check_write_tmp(path, sizeof(path), "catalog",
			"{\"models\": [{\"name\": \"my-8b\", \"max_context\": 32768}]}");
	ck_assert_int_eq(catalog_load_models(&c, path, &err), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err.msg, "models[0] \"my-8b\": missing field") &&
		      strstr(err.msg, "a new entry needs every field"), "%s", err.msg);

	check_write_tmp(path, sizeof(path), "catalog",
			"{\"engines\": [{\"name\": \"vllm\", \"sched_us\": 500}]}");
	ck_assert_int_eq(catalog_load_engines(&c, path, &err), 0);
	unlink(path);
	e = catalog_engine(&c, "vllm");
	ck_assert_double_eq(e->sched_us, 500);
	ck_assert_double_eq(e->sched_us_per_seq, 4.57);   /* data/engines.json's, kept */
	ck_assert_double_eq(e->prep_us, 200);
	catalog_release(&c);
}
END_TEST

/* A name given twice in one file names the first repeat and the entry it
 * repeats, whatever their order (the check sorts the names). */
START_TEST(duplicate_names_name_the_first_repeat)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];

	load_shipped(&c);
	check_write_tmp(path, sizeof(path), "catalog",
			"{\"gpus\": [{\"name\": \"h100-sxm\", \"cost_per_hour\": 1},"
			" {\"name\": \"a100-80gb-sxm\", \"cost_per_hour\": 1},"
			" {\"name\": \"a100-80gb-sxm\", \"cost_per_hour\": 2},"
			" {\"name\": \"h100-sxm\", \"cost_per_hour\": 3}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err.msg, "gpus[2]: name \"a100-80gb-sxm\" already used by gpus[1]"), "%s",
		      err.msg);
	catalog_release(&c);
}
END_TEST

START_TEST(bad_json_reports_line)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];

	catalog_init(&c);
	ck_assert_int_eq(load_models_text(&c,
		"{\"models\": [\n"
		"  {\"name\": \"a\",\n"
		"   \"hidden\" 64}\n"          /* line 3: missing ':' */
		"]}\n", path, sizeof(path), &err), -EINVAL);
	ck_assert_str_eq(err.file, path);
	ck_assert_int_eq(err.line, 3);
	ck_assert_uint_eq(c.n_models, 0);
	catalog_release(&c);
}
END_TEST

START_TEST(missing_file)
{
	struct catalog c;
	struct ss_error err = { 0 };

	catalog_init(&c);
	ck_assert_int_eq(catalog_load_models(&c, "/nonexistent/models.json", &err), -ENOENT);
	ck_assert_str_eq(err.file, "/nonexistent/models.json");
	ck_assert_int_eq(catalog_load_dir(&c, "/nonexistent", &err), -ENOENT);
	catalog_release(&c);
}
END_TEST

/* Each broken entry is rejected with a message naming the entry and field,
 * and the catalog is left as it was. */
static void expect_entry_error(const char *text, const char *want1, const char *want2)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];
	size_t n;

	load_shipped(&c);
	n = c.n_models;
	ck_assert_int_eq(load_models_text(&c, text, path, sizeof(path), &err), -EINVAL);
	ck_assert_str_eq(err.file, path);
	ck_assert_msg(strstr(err.msg, want1), "'%s' not in '%s'", want1, err.msg);
	ck_assert_msg(!want2 || strstr(err.msg, want2), "'%s' not in '%s'", want2, err.msg);
	ck_assert_uint_eq(c.n_models, n);
	ck_assert_int_eq(catalog_model(&c, "llama-3.1-8b")->n_layers, 32);
	catalog_release(&c);
}

START_TEST(missing_field)
{
	expect_entry_error(
		"{\"models\": [{\"name\": \"llama-new\", \"hf_id\": \"x\", \"n_layers\": 3}]}",
		"llama-new", "missing field \"hidden\"");
}
END_TEST

START_TEST(wrong_type)
{
	/* second entry: its n_layers is a string */
	expect_entry_error(
		"{\"models\": [ {" MODEL_FIELDS("ok-model", "2") "},"
		" {" MODEL_FIELDS("llama-3.1-8b", "\"32\"") "} ]}",
		"models[1] \"llama-3.1-8b\"", "field \"n_layers\" is a string, expected an integer");
	expect_entry_error(
		"{\"models\": [ {" MODEL_FIELDS("x", "2.5") "} ]}",
		"n_layers", "expected an integer");
}
END_TEST

START_TEST(bad_values)
{
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("x", "0") "} ]}", "n_layers", "1..");
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("x", "2") ", \"extra\": 1} ]}",
			   "unknown field \"extra\"", NULL);
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("x", "2") "},"
			   " {" MODEL_FIELDS("x", "3") "} ]}", "already used", NULL);
	expect_entry_error("{\"models\": {}}", "expected an object {\"models\"", NULL);
	expect_entry_error("{\"models\": [3]}", "models[0]", "expected an object");
}
END_TEST

START_TEST(bad_name)
{
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("Llama_8B", "2") "} ]}",
			   "Llama_8B", "bad name");
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("has space", "2") "} ]}",
			   "bad name", NULL);
	expect_entry_error("{\"models\": [ {" MODEL_FIELDS("", "2") "} ]}", "bad name", NULL);
}
END_TEST

START_TEST(gpu_errors)
{
	struct catalog c;
	struct ss_error err = { 0 };
	char path[512];

	catalog_init(&c);
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
		  " \"hbm_bw\": \"fast\", \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
		  " \"idle_w\": 80, \"cost_per_hour\": 0, \"source\": \"s\"}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "gpus[0] \"g\"") && strstr(err.msg, "hbm_bw"), "%s", err.msg);
	unlink(path);
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
		  " \"hbm_bw\": 3e12, \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
		  " \"idle_w\": 800, \"cost_per_hour\": 0, \"source\": \"s\"}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "idle_w"), "%s", err.msg);
	unlink(path);
	ck_assert_uint_eq(c.n_gpus, 0);
	catalog_release(&c);
}
END_TEST

/* The power model's optional fields (docs/energy.md): the host-gap power
 * lies within idle..TDP, the memory-bound share rises (lo <= hi <= 1). */
START_TEST(gpu_power_model_fields)
{
	static const struct { const char *extra, *want; } bad[] = {
		{ "\"host_gap_w\": 50", "host_gap_w (50) is outside idle_w..tdp_w" },
		{ "\"host_gap_w\": 800", "host_gap_w (800) is outside" },
		{ "\"mem_power_lo\": 0.8, \"mem_power_hi\": 0.6", "mem_power_lo (0.8) is above" },
		{ "\"mem_power_hi\": 1.5", "mem_power_hi" },
		{ "\"mem_power_batch\": \"many\"", "mem_power_batch" },
	};
	struct catalog c;
	char path[512], text[1024];
	const struct gpu_spec *g;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ss_error err = { 0 };

		catalog_init(&c);
		snprintf(text, sizeof(text),
			 "{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
			 " \"hbm_bw\": 3e12, \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
			 " \"idle_w\": 80, \"cost_per_hour\": 0, \"source\": \"s\", %s}]}",
			 bad[i].extra);
		check_write_tmp(path, sizeof(path), "catalog", text);
		ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, bad[i].want), "'%s' not in '%s'", bad[i].want, err.msg);
		unlink(path);
		catalog_release(&c);
	}
	catalog_init(&c);
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
		  " \"hbm_bw\": 3e12, \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
		  " \"idle_w\": 80, \"cost_per_hour\": 0, \"source\": \"s\", \"host_gap_w\": 150,"
		  " \"mem_power_lo\": 0.5, \"mem_power_hi\": 0.9, \"mem_power_batch\": 12}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, NULL), 0);
	g = catalog_gpu(&c, "g");
	ck_assert_double_eq(g->host_gap_w, 150);
	ck_assert_double_eq(g->mem_power_lo, 0.5);
	ck_assert_double_eq(g->mem_power_hi, 0.9);
	ck_assert_double_eq(g->mem_power_batch, 12);
	unlink(path);
	catalog_release(&c);
}
END_TEST

/* Values no device has: beyond them a step or a KV transfer takes longer
 * than int64 nanoseconds hold, or no time at all (issue 10 section 3). */
START_TEST(gpu_implausible_values)
{
	static const struct {
		const char *field, *value, *want;
	} cases[] = {
		{ "hbm_bw", "1e-300", "field \"hbm_bw\" is 1e-300 bytes/s, expected 1e+06 to 1e+16 bytes/s" },
		{ "bf16_flops", "1e300", "field \"bf16_flops\" is 1e+300 FLOP/s" },
		{ "rdma_bw", "0.1", "field \"rdma_bw\" is 0.1 bytes/s, expected 0 or 1e+06 to 1e+15" },
		{ "rdma_latency_us", "1e300", "field \"rdma_latency_us\" is 1e+300 us" },
		{ "nvlink_latency_us", "1e-300", "nvlink_latency_us" },
		{ "pcie_bw", "1e-9", "pcie_bw" },
	};
	struct catalog c;
	char path[512], text[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ss_error err = { 0 };

		catalog_init(&c);
		static const char *const keys[] = { "bf16_flops", "hbm_bytes", "hbm_bw",
			"nvlink_bw", "pcie_bw", "tdp_w", "idle_w", "cost_per_hour", "rdma_bw",
			"nvlink_latency_us", "rdma_latency_us" };
		static const char *const vals[] = { "1e15", "8e10", "3e12", "0", "6.4e10", "700",
						    "80", "0", "25e9", "1", "5" };
		size_t o = (size_t)snprintf(text, sizeof(text),
					    "{\"gpus\": [{\"name\": \"g\", \"source\": \"s\"");

		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			o += (size_t)snprintf(text + o, sizeof(text) - o, ", \"%s\": %s", keys[k],
					      strcmp(keys[k], cases[i].field) ? vals[k] : cases[i].value);
		snprintf(text + o, sizeof(text) - o, "}]}");
		check_write_tmp(path, sizeof(path), "catalog", text);
		ck_assert_int_eq(catalog_load_gpus(&c, path, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, cases[i].want), "'%s' not in '%s'", cases[i].want,
			      err.msg);
		unlink(path);
		catalog_release(&c);
	}
	/* 0 still means "absent" for the optional and non-negative fields */
	catalog_init(&c);
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
		  " \"hbm_bw\": 3e12, \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
		  " \"idle_w\": 0, \"cost_per_hour\": 0, \"source\": \"s\", \"rdma_bw\": 0,"
		  " \"rdma_latency_us\": 0}]}");
	ck_assert_int_eq(catalog_load_gpus(&c, path, NULL), 0);
	unlink(path);
	catalog_release(&c);
}
END_TEST

START_TEST(unknown_lookup_is_null)
{
	struct catalog c;

	load_shipped(&c);
	ck_assert_ptr_null(catalog_model(&c, "gpt-5"));
	ck_assert_ptr_null(catalog_gpu(&c, "b400"));
	ck_assert_ptr_null(catalog_model(&c, "h100-sxm"));   /* GPUs are not models */
	catalog_release(&c);
	catalog_release(NULL);
}
END_TEST

/* data/intervals.json: the shipped entries load with their bounds around
 * 1, the prior wider than every profile's; user profiles are told apart
 * from the data folder's. */
START_TEST(intervals_shipped)
{
	struct catalog c;
	struct ss_error err = { 0 };
	const struct interval_entry *prior, *e;
	char path[256];

	load_shipped(&c);
	prior = catalog_interval(&c, "prior");
	ck_assert_ptr_nonnull(prior);
	ck_assert_ptr_nonnull(catalog_interval(&c, "none"));
	ck_assert_ptr_null(catalog_interval(&c, "no-such-profile"));
	for (size_t i = 0; i < c.n_intervals; i++) {
		e = &c.intervals[i];
		for (int m = 0; m < INTERVAL_METRICS; m++) {
			if (!(e->lo[m] > 0))
				continue;
			ck_assert(e->lo[m] <= 1 && e->hi[m] >= 1);
			/* the prior is wider than every profile's own bounds */
			if (strcmp(e->name, "prior") && strcmp(e->name, "none") && prior->lo[m] > 0)
				ck_assert_msg(prior->lo[m] < e->lo[m] && prior->hi[m] > e->hi[m],
					      "%s: %s bounds %g..%g not inside the prior's %g..%g",
					      e->name, interval_metric_name(m), e->lo[m], e->hi[m],
					      prior->lo[m], prior->hi[m]);
		}
	}
	e = catalog_interval(&c, "vllm");
	ck_assert_ptr_nonnull(e);
	ck_assert(e->lo[INTERVAL_TTFT] > 0 && e->lo[INTERVAL_ITL] == 0);   /* ITL: TPOT's */
	ck_assert(catalog_engine_shipped(&c, "vllm"));
	/* a user's profile of the same name is not the data folder's */
	check_write_tmp(path, sizeof(path), "catalog",
		  "{\"engines\": [{\"name\": \"vllm\", \"versions\": \"x\", \"source\": \"test\"}]}");
	ck_assert_int_eq(catalog_load_engines(&c, path, &err), 0);
	unlink(path);
	ck_assert(!catalog_engine_shipped(&c, "vllm"));
	ck_assert(catalog_engine_shipped(&c, "sglang"));
	ck_assert(!catalog_engine_shipped(&c, "no-such-profile"));
	catalog_release(&c);
}
END_TEST

/* A bad intervals file is one error naming the file, the entry and what
 * was expected, and merges nothing. */
START_TEST(intervals_bad_files)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"intervals\": [{\"name\": \"x\", \"ttft_lo\": 1.2, \"ttft_hi\": 1.5}]}",
		  "intervals[0] \"x\": ttft_lo 1.2, ttft_hi 1.5, expected 0 < ttft_lo <= 1 <= ttft_hi" },
		{ "{\"intervals\": [{\"name\": \"x\", \"tpot_lo\": 0.5, \"tpot_hi\": 0.9}]}",
		  "intervals[0] \"x\": tpot_lo 0.5, tpot_hi 0.9, expected 0 < tpot_lo <= 1 <= tpot_hi" },
		{ "{\"intervals\": [{\"name\": \"x\", \"e2e_lo\": 0, \"e2e_hi\": 2}]}",
		  "intervals[0] \"x\": field \"e2e_lo\" is" },
		{ "{\"intervals\": [{\"name\": \"x\", \"e2e_lo\": -0.5, \"e2e_hi\": 2}]}",
		  "intervals[0] \"x\": field \"e2e_lo\" is" },
		{ "{\"intervals\": [{\"name\": \"x\", \"itl_lo\": 0.9}]}",
		  "intervals[0] \"x\": itl_lo without itl_hi, expected both bounds or neither" },
		{ "{\"intervals\": [{\"name\": \"x\", \"ttft_hi\": \"wide\"}]}",
		  "intervals[0] \"x\": field \"ttft_hi\"" },
		{ "{\"intervals\": [{\"name\": \"x\", \"ttft_width\": 2}]}",
		  "intervals[0] \"x\": unknown field \"ttft_width\"" },
		{ "{\"intervals\": [{\"ttft_lo\": 0.9, \"ttft_hi\": 1.1}]}",
		  "intervals[0]: missing field \"name\"" },
		{ "{\"intervals\": [{\"name\": \"x\"}, {\"name\": \"x\"}]}",
		  "intervals[1]: name \"x\" already used by intervals[0]" },
		{ "{\"engines\": []}", "expected an object {\"intervals\": [ ... ]}" },
		{ "{\"intervals\": [", "invalid JSON" },
	};
	struct catalog c;
	struct ss_error err;
	char path[256];

	load_shipped(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = c.n_intervals;

		memset(&err, 0, sizeof(err));
		check_write_tmp(path, sizeof(path), "catalog", bad[i].text);
		ck_assert_int_eq(catalog_load_intervals(&c, path, &err), -EINVAL);
		unlink(path);
		ck_assert_msg(strstr(err.msg, bad[i].want), "%zu: got '%s', expected '%s'", i, err.msg,
			      bad[i].want);
		ck_assert_str_eq(err.file, path);
		ck_assert_uint_eq(c.n_intervals, n);
		ck_assert_ptr_null(catalog_interval(&c, "x"));
	}
	catalog_release(&c);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("catalog");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, shipped_files_load);
	tcase_add_test(tc, shipped_gpu_values);
	tcase_add_test(tc, param_counts);
	tcase_add_test(tc, kv_bytes_per_token);
	tcase_add_test(tc, second_file_overrides_and_extends);
	tcase_add_test(tc, gpu_override);
	tcase_add_test(tc, gpu_partial_merge);
	tcase_add_test(tc, model_and_engine_partial_merge);
	tcase_add_test(tc, duplicate_names_name_the_first_repeat);
	tcase_add_test(tc, bad_json_reports_line);
	tcase_add_test(tc, missing_file);
	tcase_add_test(tc, missing_field);
	tcase_add_test(tc, wrong_type);
	tcase_add_test(tc, bad_values);
	tcase_add_test(tc, bad_name);
	tcase_add_test(tc, gpu_errors);
	tcase_add_test(tc, gpu_power_model_fields);
	tcase_add_test(tc, gpu_implausible_values);
	tcase_add_test(tc, unknown_lookup_is_null);
	tcase_add_test(tc, intervals_shipped);
	tcase_add_test(tc, intervals_bad_files);
	suite_add_tcase(s, tc);
	return s;
}
