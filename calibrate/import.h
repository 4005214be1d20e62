/* servesim — importers of third-party GPU profile tables into a
 * calibration store.
 *
 * Each supported table is one importer kind, recognized by its CSV header
 * (column names, not file names), so a renamed file still imports and a
 * foreign CSV is refused.  Every import runs inside a store transaction
 * (a savepoint, so imports nest inside a caller's transaction): a
 * malformed row anywhere rolls the whole import back and the store is left
 * exactly as it was.  Errors name the file and the 1-based line.
 *
 * The mapping of every table to the store's operators, and every unit
 * conversion, is documented in docs/calibration.md.
 */
#ifndef SS_CAL_IMPORT_H
#define SS_CAL_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"
#include "store.h"

enum cal_import_kind {
	CAL_IMPORT_AUTO = 0,          /* detect from the header */
	CAL_IMPORT_AIC_GEMM,          /* aiconfigurator *_gemm_perf.csv */
	CAL_IMPORT_AIC_ATTENTION,     /* aiconfigurator *_{context,generation}_attention_perf.csv */
	CAL_IMPORT_AIC_NCCL,          /* aiconfigurator nccl*_perf.csv */
	CAL_IMPORT_AIC_CUSTOM_AR,     /* aiconfigurator *_custom_allreduce_perf.csv */
	CAL_IMPORT_VIDUR_MLP,         /* Vidur profiling/compute/<gpu>/<org>/<model>/mlp.csv */
	CAL_IMPORT_VIDUR_NETWORK,     /* Vidur profiling/network/<node>/{all_reduce,send_recv}.csv */
	CAL_IMPORT_VIDUR_ATTENTION,   /* Vidur (legacy) attention.csv */
	CAL_IMPORT_VIDUR_CPU,         /* Vidur legacy <gpu>_cpu_overheads.csv */
	CAL_IMPORT_AITER_GEMM,        /* AITER tuned GEMM configs, flattened (AMD, issue 33) */
	CAL_IMPORT_KIND_COUNT
};

/* The store dtypes whose GEMM grids price layer GEMMs with weights of
 * dtype `weights` ("fp8": "fp8", then "fp8_block"), most preferred first:
 * start with *pos = 0 and call until NULL.  One table (import.c's dtypes)
 * names the store dtypes for the importers and for this. */
const char *cal_gemm_dtype_for_weights(const char *weights, size_t *pos);
/* The weight dtype ("fp8") whose layer GEMMs a GEMM grid of store dtype
 * dtype prices, from the same table; NULL where none (16-bit, int8). */
const char *cal_gemm_dtype_weights(const char *dtype);

/* Bytes of one element of store dtype name (e.g. 4 for "fp32", 2 for
 * "bf16"); 0 when unknown or not one fixed size ("fp8_block"). */
int cal_dtype_bytes(const char *name);

/* "auto", "aic-gemm", "aic-attention", "aic-nccl", "aic-custom-allreduce",
 * "vidur-mlp", "vidur-network", "vidur-attention", "vidur-cpu", "aiter-gemm". */
const char *cal_import_kind_name(enum cal_import_kind kind);
int cal_import_kind_from_name(const char *name, enum cal_import_kind *kind);

/* What an import did.  `imported` counts measurements written to the store;
 * the other row counts are source lines (one Vidur mlp.csv line gives up to
 * ten measurements, and duplicate Vidur network lines merge into one). */
struct cal_import_stats {
	int64_t files;          /* files imported */
	int64_t files_ignored;  /* directory walk: *.csv files no importer recognizes */
	int64_t lines;          /* data lines read */
	int64_t imported;       /* measurements inserted */
	int64_t filtered;       /* lines dropped by a filter (cal_import_opts) */
	int64_t skipped;        /* lines of an operation the store does not model
				 * (NCCL alltoall and reduce_scatter, beam_width != 1) */
};

struct cal_import_opts {
	/* Catalog GPU name for every row (--device); NULL: from the source
	 * (aiconfigurator's `device` column, Vidur's directory or file name). */
	const char *device;
	/* Keep only rows whose store dtype is in this comma-separated list
	 * (e.g. "bf16,fp16"); rows without a dtype (host overheads) always
	 * pass.  NULL keeps every dtype. */
	const char *dtypes;
	/* aiconfigurator attention: keep only this window_size (0 = full
	 * attention); -1 keeps every window. */
	int window;
	/* aiconfigurator custom all-reduce: keep only this backend
	 * ("vllm_graph" or "vllm_eager"); NULL keeps both. */
	const char *ar_backend;
	/* Vidur grids (mlp.csv num_tokens, network message size): keep the
	 * smallest grid point in each 1/per_octave of an octave, plus each
	 * group's largest point; 0 keeps every point. */
	int per_octave;
	/* Called after each file is imported (inside the import's transaction,
	 * so a later failure still rolls it back).  st counts that file only. */
	void (*on_file)(void *ctx, const char *path, enum cal_import_kind kind,
			const struct cal_import_stats *st);
	void *ctx;
};

/* No filters, device from the source. */
void cal_import_opts_init(struct cal_import_opts *o);
/* The shipped store's filters (docs/calibration.md): dtypes "bf16,fp16",
 * window 0, custom all-reduce backend "vllm_graph", 8 points per octave. */
void cal_import_opts_compact(struct cal_import_opts *o);

/* Which importer reads path, from its header.  -EINVAL with a message
 * listing the known tables when none does. */
int cal_import_detect(const char *path, enum cal_import_kind *kind, struct ss_error *err);

/* Import one CSV file as one transaction.  kind CAL_IMPORT_AUTO detects it.
 * opts may be NULL (cal_import_opts_init).  st, when not NULL, has this
 * file's counts added to it.  On error nothing of the file is in the store
 * and err names the file and line. */
int cal_import_file(struct cal_store *s, const char *path, enum cal_import_kind kind,
		    const struct cal_import_opts *opts, struct cal_import_stats *st,
		    struct ss_error *err);

/* Import a file, or every *.csv file under a directory (recursively, in
 * name order; CSV files no importer recognizes are counted in
 * files_ignored, other files are ignored), as one transaction. */
int cal_import_path(struct cal_store *s, const char *path, enum cal_import_kind kind,
		    const struct cal_import_opts *opts, struct cal_import_stats *st,
		    struct ss_error *err);

/* Catalog name of a GPU as a source names it ("NVIDIA H100 80GB HBM3" ->
 * "h100-sxm", Vidur's "a100" -> "a100-80gb-sxm"); NULL when unknown. */
const char *cal_import_gpu_name(const char *raw);

#endif
