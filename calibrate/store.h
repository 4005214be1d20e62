/* servesim — the calibration store: measured operator times in SQLite.
 *
 * One row per measurement: the operator, its shape, dtype, latency
 * statistics, energy and power when measured, the device and (when known)
 * its clocks and driver, and provenance (source file and line).  Third-party
 * tables (aiconfigurator, Vidur) are imported into it, and servesim's own
 * kernel sweeps will write to it unchanged.  Cost models (table, fit) read it.
 *
 * The database carries application_id 0x53535643 ("SSVC") and
 * user_version = CAL_SCHEMA_VERSION; any other database (an older schema, a
 * results database, a foreign file) is refused with a message saying what it
 * is and what was expected.  See docs/calibration.md.
 */
#ifndef SS_CAL_STORE_H
#define SS_CAL_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ss-error.h"

#define CAL_SCHEMA_VERSION 1
#define CAL_APPLICATION_ID 0x53535643

/* Measured operators.  Names (cal_op_name) are the store's vocabulary. */
enum cal_op {
	CAL_GEMM = 0,        /* y[m,n] = x[m,k] W^T */
	CAL_ATTN_PREFILL,    /* one layer's prefill/chunk attention over a batch */
	CAL_ATTN_DECODE,     /* one layer's decode attention over a batch */
	CAL_RMSNORM,         /* element-wise kinds: one layer, `tokens` x `width` */
	CAL_LAYERNORM,
	CAL_ROPE,
	CAL_ACTIVATION,      /* SiLU-and-multiply / GELU / ReLU */
	CAL_RESIDUAL_ADD,
	CAL_EMBEDDING,
	CAL_ALL_REDUCE,      /* collectives: `num_gpus`, `bytes` of message */
	CAL_ALL_GATHER,
	CAL_SEND_RECV,
	CAL_HOST_OVERHEAD,   /* per step CPU time; `batch` requests; `variant` = part */
	CAL_KV_COPY,         /* KV block copy of `bytes`; `variant` = direction */
	CAL_LORA,            /* LoRA adapters' shrink and expand of one module, SGMV-style:
			      * m tokens, k = d_in, n = d_out, batch = adapters (segments),
			      * width = rank (docs/calibration.md) */
	CAL_OP_COUNT
};

const char *cal_op_name(enum cal_op op);
int cal_op_from_name(const char *name, enum cal_op *op);

#define CAL_NA (-1)          /* shape field not applicable */

struct cal_meas {
	enum cal_op op;
	char device[64];      /* catalog GPU name, e.g. "h100-sxm" ("" for host-only rows) */
	char device_raw[96];  /* as the source names it, e.g. "NVIDIA H100 80GB HBM3" */
	char dtype[16];       /* "bf16", "fp16", "fp8"... */
	char variant[64];     /* kernel or backend or sub-part, e.g. "nccl", "vllm_custom_graph",
			       * "schedule"; "" when none */
	/* Shape.  CAL_NA where not applicable.  Attention head counts are per
	 * GPU (after tensor parallelism). */
	int64_t m, n, k;               /* gemm */
	int64_t batch;                 /* attention: requests; host overhead: batch size */
	int64_t q_len;                 /* attention: query tokens per request (prefill chunk; 1 for decode) */
	int64_t kv_len;                /* attention: KV tokens before the chunk (prefill) or
					* KV length including the new token (decode) */
	int64_t heads, kv_heads, head_dim;
	int64_t tokens, width;         /* element-wise ops: rows and row width */
	int64_t num_gpus, bytes;       /* collectives and copies: participants, message bytes */
	int64_t tp;                    /* tensor-parallel degree the row was measured under */
	/* Latency of one call, ms.  NAN where the source does not give it;
	 * count 0 when unknown. */
	double mean_ms, median_ms, min_ms, max_ms, std_ms;
	int64_t count;
	double energy_j;      /* per call, J; NAN when not measured */
	double power_w;       /* average during the call, W; NAN when not measured */
	double clock_mhz;     /* SM clock, NAN when unknown */
	char driver[32];      /* "" when unknown */
	char source[256];     /* provenance: file the row came from (relative) */
	int64_t source_line;  /* 1-based line in that file */
};

/* A measurement with every shape field CAL_NA and every statistic NAN. */
void cal_meas_init(struct cal_meas *m, enum cal_op op);

struct cal_store;

enum cal_open_flags {
	CAL_OPEN_READONLY = 0,
	CAL_OPEN_CREATE = 1,  /* create (with the schema) if missing; read-write */
	CAL_OPEN_WRITE = 2,   /* read-write, must exist */
};

int cal_store_open(struct cal_store **out, const char *path, int flags,
		   struct ss_error *err);
void cal_store_close(struct cal_store *s);

/* Transactions: an import is one transaction, so a failed import leaves
 * the store as it was.  They nest (SQLite savepoints): commit and rollback
 * end the innermost one, and only the outermost commit writes the file.
 * After a failed commit, call cal_store_rollback.  cal_store_close rolls
 * back whatever is still open. */
int cal_store_begin(struct cal_store *s, struct ss_error *err);
int cal_store_commit(struct cal_store *s, struct ss_error *err);
void cal_store_rollback(struct cal_store *s);

int cal_store_insert(struct cal_store *s, const struct cal_meas *m, struct ss_error *err);

/* Visit every measurement matching device (NULL = any) and op (-1 = any),
 * series by series (series in order of creation, each series' rows in
 * insertion order; with no filter, the whole store in insertion order), so
 * that a filtered query reads only the rows it returns through the
 * (series_id) index.  A non-zero return from fn stops and is returned. */
typedef int (*cal_visit_fn)(void *ctx, const struct cal_meas *m);
int cal_store_query(struct cal_store *s, const char *device, int op, cal_visit_fn fn,
		    void *ctx, struct ss_error *err);

/* The same, reading only what cost models use: mean_ms, median_ms, energy_j
 * and power_w (read only when some matching row has them) and the shape
 * fields of op (all of them when op is -1); the other statistics are NAN,
 * count 0, other shape fields CAL_NA.  With head_dim > 0, only rows
 * whose head_dim is that or not applicable.
 * Used when a simulation loads its tables. */
int cal_store_query_lean(struct cal_store *s, const char *device, int op, int64_t head_dim,
			 cal_visit_fn fn, void *ctx, struct ss_error *err);

/* Number of measurements for device (NULL = any) and op (-1 = any). */
int64_t cal_store_count(struct cal_store *s, const char *device, int op, struct ss_error *err);

/* VACUUM: repack the file (after a large import into a new store).  Not
 * inside a transaction. */
int cal_store_vacuum(struct cal_store *s, struct ss_error *err);
/* The path the store was opened with. */
const char *cal_store_path(const struct cal_store *s);

/* Engine profiles kept beside the measurements (docs/engines.md): table
 * engine_profiles (format, name, profile, source), made by the first
 * write and optional in a store of schema version 1.  profile is one
 * engines.json entry as JSON text; format says how to read it
 * (CAL_ENGINE_FORMAT; rows of another format are skipped, so a newer
 * servesim's profiles do not break an older one). */
#define CAL_ENGINE_FORMAT 1
/* Add or replace the profile called name (in one transaction). */
int cal_store_put_engine(struct cal_store *s, const char *name, const char *profile_json,
			 const char *source, struct ss_error *err);
/* Visit every profile of format CAL_ENGINE_FORMAT in name order; a store
 * without the table has none.  A table that is not what put_engine makes
 * (a view, other columns) is an error.  A non-zero return from fn stops
 * and is returned. */
typedef int (*cal_engine_fn)(void *ctx, const char *name, const char *profile_json,
			     struct ss_error *err);
int cal_store_each_engine(struct cal_store *s, cal_engine_fn fn, void *ctx, struct ss_error *err);

/* `calibrate list`: counts by device, operator, dtype and source. */
int cal_store_list(struct cal_store *s, FILE *f, struct ss_error *err);
/* `calibrate export`: every row as CSV with a header (all columns). */
int cal_store_export_csv(struct cal_store *s, FILE *f, struct ss_error *err);

#endif
