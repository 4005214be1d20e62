/* servesim — fitting the power model to measured power (power-fit.h,
 * docs/energy.md "Fitting and hold-outs"). */
#include "power-fit.h"

#include "costmodel.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <csv.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>

const char *power_source_name(enum power_source s)
{
	static const char *const names[POWER_SRC_COUNT] = {
		[POWER_SRC_MLENERGY] = "ML.ENERGY v2",
		[POWER_SRC_SPLITWISE] = "Splitwise A100",
		[POWER_SRC_ANL] = "LLM-Inference-Bench A100",
	};

	return (unsigned)s < POWER_SRC_COUNT ? names[s] : "?";
}

/* ---- a CSV file as rows of fields (libcsv) ------------------------------ */

#define MAX_COLS 24

struct table {
	char *(*rows)[MAX_COLS];  /* rows[i][j]: field j of data row i, or NULL */
	size_t *line;             /* line of each row, 1-based */
	size_t n, cap;
	char *head[MAX_COLS];     /* header fields */
	int n_head;
	/* parser state */
	char *cur[MAX_COLS];
	int n_cur;
	size_t rec_line;          /* line of the record being read */
	size_t nl;                /* newlines seen so far */
	bool header_done, oom, too_wide;
};

static void on_field(void *s, size_t len, void *data)
{
	struct table *t = data;
	char *f;

	if (t->n_cur >= MAX_COLS) {
		t->too_wide = true;
		return;
	}
	f = malloc(len + 1);
	if (!f) {
		t->oom = true;
		return;
	}
	memcpy(f, s, len);
	f[len] = '\0';
	t->cur[t->n_cur++] = f;
}

static void on_record(int c, void *data)
{
	struct table *t = data;
	bool blank = t->n_cur == 0 || (t->n_cur == 1 && !t->cur[0][0]);

	(void)c;
	if (blank || t->oom || t->too_wide) {
		for (int i = 0; i < t->n_cur; i++)
			free(t->cur[i]);
	} else if (!t->header_done) {
		memcpy(t->head, t->cur, sizeof(t->cur));
		t->n_head = t->n_cur;
		t->header_done = true;
	} else {
		if (t->n == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 64;
			void *r = realloc(t->rows, cap * sizeof(*t->rows));
			void *l = r ? realloc(t->line, cap * sizeof(*t->line)) : NULL;

			if (r)
				t->rows = r;
			if (!l) {
				t->oom = true;
				for (int i = 0; i < t->n_cur; i++)
					free(t->cur[i]);
				goto out;
			}
			t->line = l;
			t->cap = cap;
		}
		memset(t->rows[t->n], 0, sizeof(t->rows[t->n]));
		memcpy(t->rows[t->n], t->cur, (size_t)t->n_cur * sizeof(char *));
		t->line[t->n++] = t->rec_line;
	}
out:
	memset(t->cur, 0, sizeof(t->cur));
	t->n_cur = 0;
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		for (int j = 0; j < MAX_COLS; j++)
			free(t->rows[i][j]);
	for (int j = 0; j < t->n_head; j++)
		free(t->head[j]);
	free(t->rows);
	free(t->line);
	memset(t, 0, sizeof(*t));
}

static int table_read(const char *path, struct table *t, struct ss_error *err)
{
	struct csv_parser p;
	char buf[8192];
	size_t len;
	FILE *f;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	f = fopen(path, "r");
	if (!f)
		return ss_error_set(err, -ENOENT, path, 0, "cannot open");
	if (csv_init(&p, CSV_APPEND_NULL)) {
		fclose(f);
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	t->rec_line = 1;
	while ((len = fread(buf, 1, sizeof(buf), f)) > 0) {
		/* feed line by line so each record knows its line */
		size_t off = 0;

		while (off < len) {
			char *nl = memchr(buf + off, '\n', len - off);
			size_t chunk = nl ? (size_t)(nl - (buf + off)) + 1 : len - off;

			if (csv_parse(&p, buf + off, chunk, on_field, on_record, t) != chunk) {
				rc = ss_error_set(err, -EINVAL, path, t->nl + 1,
						  "malformed CSV: %s", csv_strerror(csv_error(&p)));
				goto out;
			}
			off += chunk;
			if (nl) {
				t->nl++;
				if (t->n_cur == 0)
					t->rec_line = t->nl + 1;
			}
		}
	}
	csv_fini(&p, on_field, on_record, t);
	if (t->oom)
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	else if (t->too_wide)
		rc = ss_error_set(err, -EINVAL, path, 0, "a row has more than %d fields", MAX_COLS);
	else if (!t->header_done)
		rc = ss_error_set(err, -EINVAL, path, 1, "empty file, expected a header");
out:
	csv_free(&p);
	fclose(f);
	if (rc)
		table_free(t);
	return rc;
}

static int col(const struct table *t, const char *name, const char *path, struct ss_error *err)
{
	for (int j = 0; j < t->n_head; j++)
		if (!strcmp(t->head[j], name))
			return j;
	return ss_error_set(err, -EINVAL, path, 1, "no column \"%s\" in the header", name);
}

static int num(const struct table *t, size_t i, int j, const char *path, double *out,
	       struct ss_error *err)
{
	const char *s = t->rows[i][j];
	char *end;

	if (!s || !*s)
		return ss_error_set(err, -EINVAL, path, (int)t->line[i], "column \"%s\" is empty, "
				    "expected a number", t->head[j]);
	*out = strtod(s, &end);
	if (*end || !isfinite(*out))
		return ss_error_set(err, -EINVAL, path, (int)t->line[i],
				    "column \"%s\" is \"%.32s\", expected a number", t->head[j], s);
	return 0;
}

/* ---- observations ------------------------------------------------------- */

struct obs_vec {
	struct power_obs *v;
	size_t n, cap;
};

static struct power_obs *obs_push(struct obs_vec *o)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 64;
		void *v = realloc(o->v, cap * sizeof(*o->v));

		if (!v)
			return NULL;
		o->v = v;
		o->cap = cap;
	}
	memset(&o->v[o->n], 0, sizeof(o->v[o->n]));
	return &o->v[o->n++];
}

/* ML.ENERGY v2: chat runs (ShareGPT first turns) of the models in the
 * catalog.  Every request arrives at once and the batch stays full, so the
 * run is a sequence of intervals of b/throughput seconds (one decode step
 * at the mean batch b, the mean context, plus b/output_tokens prompts'
 * prefill, amortised).  Prompt lengths are not in the data: 250 tokens
 * (the mean first turn assumed by scripts/compare-mlenergy.sh). */
#define MLE_PROMPT 250

static int load_mlenergy(const char *dir, const struct catalog *cat, struct obs_vec *o,
			 struct ss_error *err)
{
	static const struct { const char *hf, *name; } models[] = {
		{ "meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b" },
		{ "meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b" },
		{ "mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b" },
	};
	static const struct { const char *dev, *name; } gpus[] = {
		{ "A100-SXM4-40GB", "a100-40gb-sxm" },
		{ "H100 80GB HBM3", "h100-sxm" },
	};
	char path[1024];
	struct table t;
	int c_task, c_gpu, c_model, c_seqs, c_tp, c_pp, c_e, c_thr, c_out, c_b, rc;

	snprintf(path, sizeof(path), "%s/profiles/mlenergy_v2/mlenergy_v2_llm_flat.csv", dir);
	rc = table_read(path, &t, err);
	if (rc)
		return rc;
	if ((c_task = col(&t, "task", path, err)) < 0 || (c_gpu = col(&t, "gpu", path, err)) < 0 ||
	    (c_model = col(&t, "model", path, err)) < 0 ||
	    (c_seqs = col(&t, "max_num_seqs", path, err)) < 0 ||
	    (c_tp = col(&t, "tp", path, err)) < 0 || (c_pp = col(&t, "pp", path, err)) < 0 ||
	    (c_e = col(&t, "energy_per_request_J", path, err)) < 0 ||
	    (c_thr = col(&t, "token_throughput_tok_per_s", path, err)) < 0 ||
	    (c_out = col(&t, "avg_output_tokens", path, err)) < 0 ||
	    (c_b = col(&t, "avg_batch_size_reqs", path, err)) < 0) {
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < t.n; i++) {
		const char *task = t.rows[i][c_task], *gpu = t.rows[i][c_gpu];
		const char *model = t.rows[i][c_model], *mname = NULL, *gname = NULL;
		double seqs, tp, pp, e, thr, outtok, b;
		struct power_obs *ob;

		if (!task || strcmp(task, "chat") || !gpu || !model)
			continue;
		for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++)
			if (!strcmp(model, models[k].hf))
				mname = models[k].name;
		for (size_t k = 0; k < sizeof(gpus) / sizeof(gpus[0]); k++)
			if (!strcmp(gpu, gpus[k].dev))
				gname = gpus[k].name;
		if (!mname || !gname || !catalog_model(cat, mname) || !catalog_gpu(cat, gname))
			continue;
		if ((rc = num(&t, i, c_seqs, path, &seqs, err)) || (rc = num(&t, i, c_tp, path, &tp, err)) ||
		    (rc = num(&t, i, c_pp, path, &pp, err)) || (rc = num(&t, i, c_e, path, &e, err)) ||
		    (rc = num(&t, i, c_thr, path, &thr, err)) ||
		    (rc = num(&t, i, c_out, path, &outtok, err)) || (rc = num(&t, i, c_b, path, &b, err)))
			goto out;
		if (!(tp >= 1 && tp <= 64 && pp >= 1 && pp <= 64 && e > 0 && thr > 0 &&
		      outtok >= 1 && b >= 1)) {
			rc = ss_error_set(err, -EINVAL, path, (int)t.line[i],
					  "expected tp, pp >= 1 and positive energy, throughput, "
					  "output tokens and batch");
			goto out;
		}
		if (pp != 1)
			continue;   /* the roofline prices tensor parallelism only */
		ob = obs_push(o);
		if (!ob) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto out;
		}
		ob->src = POWER_SRC_MLENERGY;
		snprintf(ob->gpu, sizeof(ob->gpu), "%s", gname);
		snprintf(ob->model, sizeof(ob->model), "%s", mname);
		ob->tp = (int)tp;
		ob->batch = b;
		ob->steps[0] = (struct power_step){ .n = (int)lround(b), .tokens = 1,
			.context = MLE_PROMPT + (int)lround(outtok / 2), .count = 1.0 };
		ob->steps[1] = (struct power_step){ .n = 1, .tokens = MLE_PROMPT, .context = 0,
			.count = b / outtok };
		ob->n_steps = 2;
		ob->wall_s = b / thr;
		/* J/request x requests/s / GPUs */
		ob->measured_w = e * (thr / outtok) / tp;
		snprintf(ob->label, sizeof(ob->label), "%s %s x%d max_num_seqs %.0f", mname, gname,
			 ob->tp, seqs);
	}
out:
	table_free(&t);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Splitwise (DGX-A100, 400 W A100-80GB): static batches of Llama-2-70B,
 * one prefill of batch x prompt tokens then token_size - 1 decode steps
 * (represented at the mean context); average_power is the run's mean
 * power per GPU over TDP.  Medians per configuration (the file repeats
 * each); configurations whose mean power is below the share of the run
 * the prompt phase alone takes (Splitwise's own peak_power puts that
 * phase at TDP) are broken meters and left out: the 8,192-token prompts,
 * 0.17-0.18 of TDP at every TP.  Rows without power (0) are skipped. */
static int load_splitwise(const char *dir, const struct catalog *cat, struct obs_vec *o,
			  struct ss_error *err)
{
	char path[1024];
	struct table t;
	int c_model, c_hw, c_p, c_b, c_tok, c_avg, c_pt, c_e2e, c_tp, rc;
	const struct gpu_spec *g = catalog_gpu(cat, "a100-80gb-sxm");
	bool *done = NULL;
	double *pw = NULL, *e2e = NULL, *pt = NULL;

	snprintf(path, sizeof(path), "%s/serving/splitwise_a100/perf_model_a100.csv", dir);
	rc = table_read(path, &t, err);
	if (rc)
		return rc;
	if ((c_model = col(&t, "model", path, err)) < 0 ||
	    (c_hw = col(&t, "hardware", path, err)) < 0 ||
	    (c_p = col(&t, "prompt_size", path, err)) < 0 ||
	    (c_b = col(&t, "batch_size", path, err)) < 0 ||
	    (c_tok = col(&t, "token_size", path, err)) < 0 ||
	    (c_avg = col(&t, "average_power", path, err)) < 0 ||
	    (c_pt = col(&t, "prompt_time", path, err)) < 0 ||
	    (c_e2e = col(&t, "e2e_time", path, err)) < 0 ||
	    (c_tp = col(&t, "tensor_parallel", path, err)) < 0) {
		rc = -EINVAL;
		goto out;
	}
	if (!g || !catalog_model(cat, "llama-2-70b"))
		goto out;
	done = calloc(t.n + 1, sizeof(*done));
	pw = calloc(t.n + 1, sizeof(*pw));
	e2e = calloc(t.n + 1, sizeof(*e2e));
	pt = calloc(t.n + 1, sizeof(*pt));
	if (!done || !pw || !e2e || !pt) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < t.n; i++) {
		double key[4], kj[4], avg;
		size_t m = 0;
		struct power_obs *ob;
		double mp, me, mt;

		if (done[i] || !t.rows[i][c_model] || strcmp(t.rows[i][c_model], "llama2-70b") ||
		    !t.rows[i][c_hw] || strcmp(t.rows[i][c_hw], "a100-80gb"))
			continue;
		if ((rc = num(&t, i, c_p, path, &key[0], err)) || (rc = num(&t, i, c_b, path, &key[1], err)) ||
		    (rc = num(&t, i, c_tok, path, &key[2], err)) ||
		    (rc = num(&t, i, c_tp, path, &key[3], err)) ||
		    (rc = num(&t, i, c_avg, path, &avg, err)))
			goto out;
		if (!(key[0] >= 1 && key[1] >= 1 && key[2] >= 2 && key[3] >= 1 && avg >= 0)) {
			rc = ss_error_set(err, -EINVAL, path, (int)t.line[i],
					  "expected positive prompt, batch, token and TP sizes and "
					  "a power >= 0");
			goto out;
		}
		for (size_t j = i; j < t.n; j++) {
			double a;

			if (done[j] || !t.rows[j][c_model] || strcmp(t.rows[j][c_model], "llama2-70b") ||
			    !t.rows[j][c_hw] || strcmp(t.rows[j][c_hw], "a100-80gb"))
				continue;
			if ((rc = num(&t, j, c_p, path, &kj[0], err)) ||
			    (rc = num(&t, j, c_b, path, &kj[1], err)) ||
			    (rc = num(&t, j, c_tok, path, &kj[2], err)) ||
			    (rc = num(&t, j, c_tp, path, &kj[3], err)))
				goto out;
			if (memcmp(key, kj, sizeof(key)))
				continue;
			done[j] = true;
			if ((rc = num(&t, j, c_avg, path, &a, err)) ||
			    (rc = num(&t, j, c_e2e, path, &e2e[m], err)) ||
			    (rc = num(&t, j, c_pt, path, &pt[m], err)))
				goto out;
			pw[m++] = a;
		}
		mp = median(pw, m);
		me = median(e2e, m);
		mt = median(pt, m);
		if (!(mp > 0) || !(me > 0) || mp < mt / me)
			continue;
		ob = obs_push(o);
		if (!ob) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto out;
		}
		ob->src = POWER_SRC_SPLITWISE;
		snprintf(ob->gpu, sizeof(ob->gpu), "a100-80gb-sxm");
		snprintf(ob->model, sizeof(ob->model), "llama-2-70b");
		ob->tp = (int)key[3];
		ob->batch = key[1];
		ob->steps[0] = (struct power_step){ .n = (int)key[1], .tokens = (int)key[0],
			.context = 0, .count = 1 };
		ob->steps[1] = (struct power_step){ .n = (int)key[1], .tokens = 1,
			.context = (int)(key[0] + key[2] / 2), .count = key[2] - 1 };
		ob->n_steps = 2;
		ob->wall_s = me * 1e-3;
		ob->measured_w = mp * g->tdp_w;
		snprintf(ob->label, sizeof(ob->label), "llama-2-70b a100-80gb-sxm x%d prompt %.0f "
			 "batch %.0f", ob->tp, key[0], key[1]);
	}
out:
	free(done);
	free(pw);
	free(e2e);
	free(pt);
	table_free(&t);
	return rc;
}

/* LLM-Inference-Bench (ALCF Polaris, A100-SXM4-40GB): static batches of
 * 1,024 prompt and 1,024 output tokens on one GPU; Latency is the batch's
 * wall time (s), avg_power the mean power (mW).  vLLM, TensorRT-LLM and
 * DeepSpeed-MII rows; other accelerators are not in the catalog. */
static int load_anl(const char *dir, const struct catalog *cat, struct obs_vec *o,
		    struct ss_error *err)
{
	char path[1024];
	struct table t;
	int c_hw, c_nhw, c_fw, c_model, c_len, c_b, c_lat, c_pw, rc;

	snprintf(path, sizeof(path), "%s/serving/llm_inference_bench_anl/power_results_llama3_8b.csv",
		 dir);
	rc = table_read(path, &t, err);
	if (rc)
		return rc;
	if ((c_hw = col(&t, "Hardware", path, err)) < 0 ||
	    (c_nhw = col(&t, "Num of Hardware", path, err)) < 0 ||
	    (c_fw = col(&t, "Framework", path, err)) < 0 || (c_model = col(&t, "Model", path, err)) < 0 ||
	    (c_len = col(&t, "Input Output Length", path, err)) < 0 ||
	    (c_b = col(&t, "Batch Size", path, err)) < 0 || (c_lat = col(&t, "Latency", path, err)) < 0 ||
	    (c_pw = col(&t, "avg_power", path, err)) < 0) {
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < t.n; i++) {
		const char *hw = t.rows[i][c_hw], *model = t.rows[i][c_model], *mname;
		double nhw, len, b, lat, mw;
		struct power_obs *ob;

		if (!hw || strcmp(hw, "Nvidia A100 GPU") || !model)
			continue;
		mname = !strcmp(model, "meta-llama/Llama-2-7b-hf") ? "llama-2-7b" :
			!strcmp(model, "meta-llama/Meta-Llama-3-8B") ? "llama-3.1-8b" : NULL;
		if (!mname || !catalog_model(cat, mname) || !catalog_gpu(cat, "a100-40gb-sxm"))
			continue;
		if ((rc = num(&t, i, c_nhw, path, &nhw, err)) || (rc = num(&t, i, c_len, path, &len, err)) ||
		    (rc = num(&t, i, c_b, path, &b, err)) || (rc = num(&t, i, c_lat, path, &lat, err)) ||
		    (rc = num(&t, i, c_pw, path, &mw, err)))
			goto out;
		if (!(nhw >= 1 && len >= 2 && b >= 1 && lat > 0 && mw > 0)) {
			rc = ss_error_set(err, -EINVAL, path, (int)t.line[i],
					  "expected positive GPUs, lengths, batch, latency and power");
			goto out;
		}
		if (nhw != 1)
			continue;
		ob = obs_push(o);
		if (!ob) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto out;
		}
		ob->src = POWER_SRC_ANL;
		snprintf(ob->gpu, sizeof(ob->gpu), "a100-40gb-sxm");
		snprintf(ob->model, sizeof(ob->model), "%s", mname);
		ob->tp = 1;
		ob->batch = b;
		ob->steps[0] = (struct power_step){ .n = (int)b, .tokens = (int)len, .context = 0,
			.count = 1 };
		ob->steps[1] = (struct power_step){ .n = (int)b, .tokens = 1,
			.context = (int)(len + len / 2), .count = len - 1 };
		ob->n_steps = 2;
		ob->wall_s = lat;
		ob->measured_w = mw * 1e-3;
		snprintf(ob->label, sizeof(ob->label), "%s a100-40gb-sxm %s batch %.0f", mname,
			 t.rows[i][c_fw] ? t.rows[i][c_fw] : "?", b);
	}
out:
	table_free(&t);
	return rc;
}

int power_obs_load(const char *dir, const struct catalog *cat, struct power_obs **out,
		   size_t *n, struct ss_error *err)
{
	struct obs_vec o = { 0 };
	int rc;

	*out = NULL;
	*n = 0;
	rc = load_mlenergy(dir, cat, &o, err);
	if (!rc)
		rc = load_splitwise(dir, cat, &o, err);
	if (!rc)
		rc = load_anl(dir, cat, &o, err);
	if (rc) {
		free(o.v);
		return rc;
	}
	*out = o.v;
	*n = o.n;
	return 0;
}

/* ---- prediction --------------------------------------------------------- */

void power_params_apply(const struct power_params *p, struct gpu_spec *g)
{
	/* bytes/s x J/B = W, over the dynamic range; a memory-bound kernel
	 * cannot draw above the board limit */
	double s = p->per_byte ? g->hbm_bw / (g->tdp_w - g->idle_w) : 1.0;

	g->mem_power_lo = fmin(1.0, p->mem_lo * s);
	g->mem_power_hi = fmin(1.0, p->mem_hi * s);
	g->mem_power_batch = p->mem_batch;
	g->host_gap_w = g->idle_w + p->gap_frac * (g->tdp_w - g->idle_w);
}

/* Steps are at most this many requests. */
#define MAX_ITEMS 65536

int power_predict(const struct power_obs *o, const struct catalog *cat,
		  const struct power_params *p, double *watts, struct ss_error *err)
{
	struct cost_item *items = NULL;
	const struct gpu_spec *g0 = catalog_gpu(cat, o->gpu);
	const struct model_spec *m = catalog_model(cat, o->model);
	struct cost_config cfg = { 0 };
	struct cost_model *cm = NULL;
	struct gpu_spec g;
	double t = 0.0, e = 0.0, wall;
	int rc;

	if (!g0 || !m)
		return ss_error_set(err, -EINVAL, NULL, 0, "power model: %s or %s not in the catalog",
				    o->gpu, o->model);
	g = *g0;
	power_params_apply(p, &g);
	cfg.model = m;
	cfg.gpu = &g;
	cfg.tp = o->tp;
	rc = cost_model_new(&cm, "roofline", &cfg, err);
	if (rc)
		return rc;
	for (int s = 0; s < o->n_steps; s++) {
		const struct power_step *ps = &o->steps[s];
		struct cost_step st = { 0 };
		struct cost_result res;

		if (ps->n < 1 || ps->n > MAX_ITEMS) {
			rc = ss_error_set(err, -EINVAL, NULL, 0, "power model: a step of %d requests, "
					  "expected 1..%d", ps->n, MAX_ITEMS);
			goto out;
		}
		free(items);
		items = malloc((size_t)ps->n * sizeof(*items));
		if (!items) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto out;
		}
		for (int i = 0; i < ps->n; i++)
			items[i] = (struct cost_item){ .tokens = ps->tokens, .context = ps->context };
		st.items = items;
		st.n_items = (uint32_t)ps->n;
		st.n_prefill = ps->tokens > 1 ? (uint32_t)ps->n : 0;
		st.n_emit = (uint32_t)ps->n;
		st.total_tokens = (int64_t)ps->n * ps->tokens;
		rc = cost_model_predict(cm, &st, &res, err);
		if (rc)
			goto out;
		t += ps->count * (double)res.duration_ns * 1e-9;
		e += ps->count * res.energy_j;
	}
	/* the measured time the kernels and the model's host time do not
	 * cover: the engine's host-bound gaps */
	wall = o->wall_s > t ? o->wall_s : t;
	e += (wall - t) * cost_host_gap_power_w(&g) * o->tp;
	*watts = e / (wall * o->tp);
out:
	free(items);
	cost_model_free(cm);
	return rc;
}

int power_error(const struct power_obs *obs, size_t n, const bool *use,
		const struct catalog *cat, const struct power_params *p,
		double *mape, double *bias, size_t *count, struct ss_error *err)
{
	double sa = 0.0, ss = 0.0;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		double w, r;
		int rc;

		if (use && !use[i])
			continue;
		rc = power_predict(&obs[i], cat, p, &w, err);
		if (rc)
			return rc;
		r = w / obs[i].measured_w - 1.0;
		sa += fabs(r);
		ss += r;
		k++;
	}
	*mape = k ? sa / (double)k : 0.0;
	*bias = k ? ss / (double)k : 0.0;
	*count = k;
	return 0;
}

/* ---- fitting ------------------------------------------------------------ */

/* Unconstrained coordinates x -> parameters: hi = top x logistic(x0)
 * (top = POWER_MAX_J_PER_BYTE per byte, else 1), lo = hi x logistic(x1),
 * mem_batch = exp(x2), gap_frac = logistic(x3). */
static double logistic(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

static double logit(double p)
{
	if (p < 1e-6)
		p = 1e-6;
	if (p > 1 - 1e-6)
		p = 1 - 1e-6;
	return log(p / (1.0 - p));
}

struct fit_ctx {
	double x[4];                    /* all coordinates; the free ones from the solver */
	double top;                     /* the bound of mem_hi */
	bool per_byte;
	int idx[4], n_free;             /* coordinate of each free parameter */
	const struct power_obs *obs;
	size_t n;
	const bool *use;
	const struct catalog *cat;
	int rc;
	struct ss_error *err;
};

static void from_x(struct fit_ctx *c, const gsl_vector *x, struct power_params *p)
{
	for (int i = 0; i < c->n_free; i++)
		c->x[c->idx[i]] = gsl_vector_get(x, (size_t)i);
	p->mem_hi = c->top * logistic(c->x[0]);
	p->mem_lo = p->mem_hi * logistic(c->x[1]);
	p->mem_batch = exp(c->x[2]);
	p->gap_frac = logistic(c->x[3]);
	p->per_byte = c->per_byte;
}

static int residuals(const gsl_vector *x, void *data, gsl_vector *f)
{
	struct fit_ctx *c = data;
	struct power_params p;
	size_t k = 0;

	from_x(c, x, &p);
	for (size_t i = 0; i < c->n; i++) {
		double w;

		if (c->use && !c->use[i])
			continue;
		c->rc = power_predict(&c->obs[i], c->cat, &p, &w, c->err);
		if (c->rc)
			return GSL_EFAILED;
		gsl_vector_set(f, k++, w / c->obs[i].measured_w - 1.0);
	}
	/* a weak prior holding mem_batch near 16 requests where the data
	 * cannot tell (batches all far above or below it) */
	gsl_vector_set(f, k, 0.02 * (c->x[2] - log(16.0)));
	return GSL_SUCCESS;
}

int power_fit(const struct power_obs *obs, size_t n, const bool *use,
	      const struct catalog *cat, unsigned what, struct power_params *p,
	      struct ss_error *err)
{
	const gsl_multifit_nlinear_type *T = gsl_multifit_nlinear_trust;
	gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
	gsl_multifit_nlinear_workspace *w = NULL;
	gsl_multifit_nlinear_fdf fdf;
	struct fit_ctx c = { .obs = obs, .n = n, .use = use, .cat = cat, .err = err };
	gsl_vector *x = NULL;
	size_t k = 0;
	int info, st, rc = 0;

	for (size_t i = 0; i < n; i++)
		k += !use || use[i];
	if (k < 4)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "power fit: %zu measurements, expected at least 4", k);
	c.per_byte = p->per_byte;
	c.top = p->per_byte ? POWER_MAX_J_PER_BYTE : 1.0;
	c.x[0] = logit(p->mem_hi / c.top);
	c.x[1] = logit(p->mem_hi > 0 ? p->mem_lo / p->mem_hi : 0.5);
	c.x[2] = log(p->mem_batch > 0 ? p->mem_batch : 16.0);
	c.x[3] = logit(p->gap_frac);
	for (int i = 0; i < 4; i++)
		if (what & (i < 3 ? POWER_FIT_MEM : POWER_FIT_GAP))
			c.idx[c.n_free++] = i;
	if (!c.n_free)
		return 0;
	x = gsl_vector_alloc((size_t)c.n_free);
	w = gsl_multifit_nlinear_alloc(T, &fp, k + 1, (size_t)c.n_free);
	if (!x || !w) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (int i = 0; i < c.n_free; i++)
		gsl_vector_set(x, (size_t)i, c.x[c.idx[i]]);
	fdf = (gsl_multifit_nlinear_fdf){ .f = residuals, .df = NULL, .n = k + 1,
					  .p = (size_t)c.n_free, .params = &c };
	st = gsl_multifit_nlinear_init(x, &fdf, w);
	if (!st)
		st = gsl_multifit_nlinear_driver(200, 1e-8, 1e-8, 1e-8, NULL, NULL, &info, w);
	if (c.rc) {
		rc = c.rc;
		goto out;
	}
	/* out of iterations, or no further progress: the position reached
	 * is the fit (its residuals are what the reports show) */
	if (st && st != GSL_EMAXITER && st != GSL_ENOPROG) {
		rc = ss_error_set(err, -EDOM, NULL, 0, "power fit: %s", gsl_strerror(st));
		goto out;
	}
	from_x(&c, gsl_multifit_nlinear_position(w), p);
out:
	gsl_multifit_nlinear_free(w);
	gsl_vector_free(x);
	return rc;
}

const struct power_params power_params_start = {
	.mem_lo = 90e-12, .mem_hi = 130e-12, .mem_batch = 16, .gap_frac = 0.2, .per_byte = true,
};

int power_fit_two_stage(const struct power_obs *obs, size_t n, const bool *use_curve,
			const bool *use_gap, const struct catalog *cat, struct power_params *p,
			struct ss_error *err)
{
	int rc;

	*p = power_params_start;
	rc = power_fit(obs, n, use_curve, cat, POWER_FIT_MEM | POWER_FIT_GAP, p, err);
	if (!rc && use_gap)
		rc = power_fit(obs, n, use_gap, cat, POWER_FIT_GAP, p, err);
	return rc;
}
