/* servesim — AITER's tuned GEMM tables into the calibration store (issue 33).
 *
 * AMD's AITER (ROCm/aiter, MIT) ships the winners of its offline GEMM tuner:
 * for each shape (M tokens, N output and K input features) the tuner timed
 * every candidate kernel (CK, asm, hipBLASLt, Triton) on the GPU and kept the
 * fastest; `us` is that kernel's time in microseconds.  The importer reads
 * the flattened table ../shared/data/amd/aiter_tuned_gemm_gfx942.csv (its
 * columns are in that folder's PROVENANCE.md), one gemm row per line:
 *
 *   M, N, K        -> m, n, k (y[M,N] = x[M,K] W^T, as the store's gemm)
 *   us             -> mean_ms = us / 1000 (the only statistic: count 0); "inf"
 *                     (the tuner found no kernel that ran the shape) is
 *                     skipped and counted
 *   gfx, cu_num    -> device (gpu_of below; --device overrides)
 *   gemm_family    -> dtype: *blockscale* -> fp8_block (128x128 block-scaled
 *                     FP8), *bf16* -> bf16, other a8w8 tables by the `dtype`
 *                     column (torch.int8 -> int8, torch.float8_e4m3fnuz ->
 *                     fp8); *batched* tables are skipped (counted): the store
 *                     has no batched GEMM operator
 *   variant        -> "aiter:tuned" for every row: the tuner's choice is the
 *                     kernel that serves the shape, so one series per device
 *                     and dtype holds every model's shapes.
 *
 * The mapping and the choice not to import 304-CU rows for the MI325X are
 * in docs/calibration.md ("AITER").
 */
#include "import-int.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "params.h"

/* The GPUs AITER's configs are tuned on, by architecture and CU count (what
 * the tuner records), to catalog names.  gfx942 with 304 CUs is the MI300X
 * or the MI325X, which the tables cannot tell apart: the rows go to mi300x,
 * the part the 304-CU configs were first tuned on (docs/calibration.md). */
static const struct {
	const char *gfx;
	int64_t cus;
	const char *name;
} aiter_gpus[] = {
	{ "gfx942", 304, "mi300x" },
	{ "gfx942", 80, "mi308x" },
};

struct aiter_state {
	int gfx, cus, family, m, n, k, us;
	int dtype;              /* -1 when the table has no dtype column */
};

static bool aiter_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "cu_num") && imp_has_col(cols, n, "gemm_family") &&
	       imp_has_col(cols, n, "us");
}

static int aiter_begin(struct imp_file *f, struct ss_error *err)
{
	struct aiter_state *a = f->priv;
	const struct cal_importer *imp = &cal_importer_aiter_gemm;
	static const struct {
		const char *name;
		size_t off;
	} req[] = {
		{ "gfx", offsetof(struct aiter_state, gfx) },
		{ "cu_num", offsetof(struct aiter_state, cus) },
		{ "gemm_family", offsetof(struct aiter_state, family) },
		{ "M", offsetof(struct aiter_state, m) },
		{ "N", offsetof(struct aiter_state, n) },
		{ "K", offsetof(struct aiter_state, k) },
		{ "us", offsetof(struct aiter_state, us) },
	};
	int rc = 0;

	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]) && !rc; i++)
		rc = imp_col_req(f, imp, req[i].name, (int *)((char *)a + req[i].off), err);
	a->dtype = imp_col(f, "dtype");
	return rc;
}

/* Catalog name of the row's GPU into out. */
static int gpu_of(struct imp_file *f, const struct aiter_state *a, const struct imp_row *r,
		  char *out, size_t len, struct ss_error *err)
{
	const char *gfx = r->f[a->gfx];
	int64_t cus;
	int rc;

	if (f->opts->device) {
		snprintf(out, len, "%s", f->opts->device);
		return 0;
	}
	rc = imp_int(f, r, a->cus, 1, &cus, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(aiter_gpus) / sizeof(aiter_gpus[0]); i++) {
		if (!strcmp(aiter_gpus[i].gfx, gfx) && aiter_gpus[i].cus == cus) {
			snprintf(out, len, "%s", aiter_gpus[i].name);
			return 0;
		}
	}
	return imp_field_error(err, f, r, a->cus,
			       "unknown GPU %.40s with %lld CUs (expected gfx942 with 304 CUs "
			       "(mi300x) or 80 CUs (mi308x); pass --device NAME)",
			       gfx, (long long)cus);
}

/* The store's dtype of the row; NULL with *skip set for a batched table. */
static int dtype_of(struct imp_file *f, const struct aiter_state *a, const struct imp_row *r,
		    const char **dtype, bool *skip, struct ss_error *err)
{
	const char *fam = r->f[a->family];
	const char *dt = a->dtype >= 0 ? r->f[a->dtype] : "";

	*skip = false;
	*dtype = NULL;
	if (strstr(fam, "batched")) {
		*skip = true;
		return 0;
	}
	if (strstr(fam, "blockscale")) {
		*dtype = "fp8_block";
		return 0;
	}
	if (strstr(fam, "bf16")) {
		if (*dt && strcmp(dt, "torch.bfloat16"))
			return imp_field_error(err, f, r, a->dtype,
					       "'%.40s' in a bf16 table (expected torch.bfloat16)", dt);
		*dtype = "bf16";
		return 0;
	}
	if (strstr(fam, "a8w8")) {
		if (!strcmp(dt, "torch.int8"))
			*dtype = "int8";
		else if (!strcmp(dt, "torch.float8_e4m3fnuz") || !strcmp(dt, "torch.float8_e4m3fn"))
			*dtype = "fp8";
		else
			return imp_field_error(err, f, r, a->dtype >= 0 ? a->dtype : a->family,
					       "a8w8 row with dtype '%.40s' (expected torch.int8 or "
					       "torch.float8_e4m3fnuz)", dt);
		return 0;
	}
	return imp_field_error(err, f, r, a->family,
			       "unknown table '%.40s' (expected a bf16, a8w8, a8w8_blockscale "
			       "or batched GEMM table)", fam);
}

static int aiter_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct aiter_state *a = f->priv;
	struct cal_meas m;
	const char *dtype;
	const char *s;
	double us;
	bool skip;
	int rc;

	cal_meas_init(&m, CAL_GEMM);
	rc = dtype_of(f, a, r, &dtype, &skip, err);
	if (rc)
		return rc;
	if (skip) {
		f->st.skipped++;
		return 0;
	}
	rc = gpu_of(f, a, r, m.device, sizeof(m.device), err);
	if (!rc)
		rc = imp_int(f, r, a->m, 1, &m.m, err);
	if (!rc)
		rc = imp_int(f, r, a->n, 1, &m.n, err);
	if (!rc)
		rc = imp_int(f, r, a->k, 1, &m.k, err);
	if (rc)
		return rc;
	s = r->f[a->us];
	if (!strcmp(s, "inf")) {
		/* the tuner found no kernel that ran the shape (tflops 0) */
		f->st.skipped++;
		return 0;
	}
	if (!ss_parse_double(s, &us) || !isfinite(us))
		return imp_field_error(err, f, r, a->us,
				       "expected a time in us, got '%.40s'%s", s,
				       *s ? " (non-numeric)" : " (empty)");
	if (us <= 0)
		return imp_field_error(err, f, r, a->us,
				       "'%.40s' (expected a time in us > 0)", s);
	if (!imp_keep_dtype(f, dtype)) {
		f->st.filtered++;
		return 0;
	}
	m.mean_ms = us / 1000.0;
	snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
	snprintf(m.variant, sizeof(m.variant), "aiter:tuned");
	snprintf(m.device_raw, sizeof(m.device_raw), "%.40s %s CUs", r->f[a->gfx], r->f[a->cus]);
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_aiter_gemm = {
	.version = CAL_IMPORTER_VERSION,
	.name = "aiter-gemm",
	.kind = CAL_IMPORT_AITER_GEMM,
	.priv_size = sizeof(struct aiter_state),
	.expect = "gfx, cu_num, gemm_family, M, N, K, us",
	.match = aiter_match,
	.begin = aiter_begin,
	.row = aiter_row,
};
