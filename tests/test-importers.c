/* The importers map every third-party table to the store's operators with
 * the right units and shapes, refuse malformed rows naming file and line,
 * and leave the store exactly as it was when an import fails.
 *
 * `test-importers` runs on small excerpts written to a temporary directory
 * laid out like ../shared/data/profiles; `test-importers real` imports the
 * full shared tables (SERVESIM_SHARED_DATA/profiles), checks the row counts
 * of PROVENANCE.md and spot values, times the import, and checks that the
 * shipped data/calibration.db matches a fresh compact build; it exits 77
 * (skipped) where the shared data is absent. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "import.h"
#include "store.h"

/* ---- fixtures ----------------------------------------------------------- */

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ss-import-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void teardown(void)
{
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* dir/rel into buf. */
static const char *at(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", dir, rel);
	return buf;
}

/* Write text to dir/rel, creating the directories on the way. */
static void write_file(const char *rel, const char *text)
{
	char path[1024];
	FILE *f;

	at(path, sizeof(path), rel);
	for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static struct cal_store *open_store(const char *name, int flags)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[1024];

	ck_assert_msg(cal_store_open(&s, at(path, sizeof(path), name), flags, &err) == 0, "%s",
		      err.msg);
	return s;
}

static int import(struct cal_store *s, const char *rel, const struct cal_import_opts *o,
		  struct cal_import_stats *st, struct ss_error *err)
{
	char path[1024];

	return cal_import_path(s, at(path, sizeof(path), rel), CAL_IMPORT_AUTO, o, st, err);
}

static void import_ok(struct cal_store *s, const char *rel, const struct cal_import_opts *o,
		      struct cal_import_stats *st)
{
	struct ss_error err = { 0 };

	ck_assert_msg(import(s, rel, o, st, &err) == 0, "%s:%ld: %s", err.file, err.line, err.msg);
}

struct collect {
	struct cal_meas *v;
	size_t n, cap;
};

static int collect_fn(void *ctx, const struct cal_meas *m)
{
	struct collect *c = ctx;

	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		ck_assert_ptr_nonnull(c->v);
	}
	c->v[c->n++] = *m;
	return 0;
}

static struct collect query(struct cal_store *s, const char *device, int op)
{
	struct ss_error err = { 0 };
	struct collect c = { 0 };

	ck_assert_msg(cal_store_query(s, device, op, collect_fn, &c, &err) == 0, "%s", err.msg);
	return c;
}

/* Doubles parsed from the same decimal text are identical; computed ones
 * are compared to 1e-12 relative. */
#define ck_assert_close(a, b) \
	ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fmax(1, fabs(b)), "%.17g != %.17g", (a), (b))

/* ---- excerpts ----------------------------------------------------------- */

#define AIC_H100 "aiconfigurator/h100_sxm/"
#define AIC_A100 "aiconfigurator/a100_sxm/"

static const char gemm_csv[] =
	"framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,gemm,torch.nn.functional.linear,bfloat16,32768,65536,12288,60.32404242621528\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,gemm,CutlassFP8ScaledMMLinearKernel,fp8,1,4096,4096,0.0123\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,gemm,DeepGemmFp8BlockScaledMMKernel,fp8_block,8,1024,2048,0.0099\n";

#define ATTN_HEAD "framework,version,device,op_name,kernel_source,batch_size,isl,num_heads," \
	"num_key_value_heads,head_dim,beam_width,attn_dtype,kv_cache_dtype,step,window_size,latency\n"

static const char ctx_csv[] = ATTN_HEAD
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,context_attention,vllm_flash_attn_fa3,2,12288,64,64,64,1,bfloat16,bfloat16,0,0,5.424549102783203\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,context_attention,vllm_flash_attn_fa3,4,16384,64,64,64,1,bfloat16,fp8,0,128,17.46666081746419\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,context_attention,vllm_flash_attn_fa3,1,128,8,1,128,2,bfloat16,bfloat16,0,0,0.02\n";

static const char gen_csv[] = ATTN_HEAD
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,generation_attention,vllm_flash_attn_fa3,32,1,64,1,64,1,bfloat16,bfloat16,1,0,0.01126933346192042\n"
	"VLLM,0.24.0,NVIDIA H100 80GB HBM3,generation_attention,vllm_flash_attn_fa3,32,1,64,1,64,1,bfloat16,bfloat16,1023,0,0.05\n";

/* A100 tables have no window_size column. */
static const char ctx_a100_csv[] =
	"framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,num_key_value_heads,head_dim,beam_width,attn_dtype,kv_cache_dtype,step,latency\n"
	"VLLM,0.14.0,NVIDIA A100-SXM4-80GB,context_attention,vllm_flash_attn,4,16384,64,1,128,1,bfloat16,bfloat16,0,96.47487386067708\n";

static const char nccl_csv[] =
	"framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
	"TRTLLM,2.29.2,NVIDIA H100 80GB HBM3,all_gather,NCCL,half,2,256,0.00531\n"
	"TRTLLM,2.29.2,NVIDIA H100 80GB HBM3,all_reduce,NCCL,half,8,33554432,0.32453\n"
	"TRTLLM,2.29.2,NVIDIA H100 80GB HBM3,all_reduce,NCCL,int8,4,1024,0.009\n"
	"TRTLLM,2.29.2,NVIDIA H100 80GB HBM3,alltoall,NCCL,half,2,256,0.007\n"
	"TRTLLM,2.29.2,NVIDIA H100 80GB HBM3,reduce_scatter,NCCL,int8,2,256,0.006\n";

static const char car_csv[] =
	"framework,version,device,op_name,kernel_source,allreduce_dtype,num_gpus,message_size,latency,backend\n"
	"vLLM,0.14.0,NVIDIA A100-SXM4-80GB,all_reduce,vLLM_custom_graph,bfloat16,2,128,0.004866879880428314,vllm_graph\n"
	"vLLM,0.14.0,NVIDIA A100-SXM4-80GB,all_reduce,vLLM_custom_eager,bfloat16,4,4194304,0.04437920093536377,vllm_eager\n";

static const char *const mlp_ops[] = {
	"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
	"post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add",
};
#define N_MLP_OPS 10

/* Statistic s (0 min, 1 max, 2 mean, 3 median, 4 std) of op o at line l:
 * distinct everywhere so that a mixed-up column shows. */
static double mlp_stat(int o, int s, int l)
{
	static const double off[5] = { 0, 0.02, 0.01, 0.005, 0 };

	if (s == 4)
		return 0.001 * (o + 1) + 1e-5 * l;
	return 0.1 * (o + 1) + off[s] + 1e-4 * l;
}

/* A Vidur mlp.csv with the given (tokens, tp) lines; gated Llama-2-70B
 * shape, or phi-2's (no post_attention_layernorm, not gated). */
static char *mlp_csv(const int64_t (*rows)[2], int n, bool phi2)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	for (int o = 0; o < N_MLP_OPS; o++) {
		if (phi2 && o == 5)
			continue;
		fprintf(f, "time_stats.%s.min,time_stats.%s.max,time_stats.%s.mean,time_stats.%s.median,time_stats.%s.std,",
			mlp_ops[o], mlp_ops[o], mlp_ops[o], mlp_ops[o], mlp_ops[o]);
	}
	fprintf(f, "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n");
	for (int l = 0; l < n; l++) {
		for (int o = 0; o < N_MLP_OPS; o++) {
			if (phi2 && o == 5)
				continue;
			for (int s = 0; s < 5; s++)
				fprintf(f, "%.17g,", mlp_stat(o, s, l + 2));
		}
		if (phi2)
			fprintf(f, "32,32,2560,10240,51200,False,%lld,%lld\n", (long long)rows[l][0],
				(long long)rows[l][1]);
		else
			fprintf(f, "64,8,8192,28672,32768,True,%lld,%lld\n", (long long)rows[l][0],
				(long long)rows[l][1]);
	}
	fclose(f);
	return buf;
}

#define NET_HEAD ",time_stats.all_reduce.min,time_stats.all_reduce.max,time_stats.all_reduce.mean," \
	"time_stats.all_reduce.median,time_stats.all_reduce.std,rank,num_workers,size,collective," \
	"devices_per_node,max_devices_per_node\n"

static const char net_csv[] = NET_HEAD
	"0,0.015,0.038,0.03,0.037,0.010614455552060439,0,8,2048,all_reduce,8,8\n"
	"1,0.018,0.036,0.025,0.023,0.0075,0,8,10240,all_reduce,8,8\n"
	"2,0.010,0.050,0.04,0.030,0.02,0,8,2048,all_reduce,8,8\n"
	"3,0.05,0.09,0.07,0.06,0.01,0,2,2048,all_reduce,1,8\n";

#define VATTN_HEAD "time_stats.attn_input_reshape.min,time_stats.attn_input_reshape.max," \
	"time_stats.attn_input_reshape.mean,time_stats.attn_input_reshape.median," \
	"time_stats.attn_input_reshape.std,time_stats.attn_decode.min,time_stats.attn_decode.max," \
	"time_stats.attn_decode.mean,time_stats.attn_decode.median,time_stats.attn_decode.std," \
	"time_stats.attn_output_reshape.min,time_stats.attn_output_reshape.max," \
	"time_stats.attn_output_reshape.mean,time_stats.attn_output_reshape.median," \
	"time_stats.attn_output_reshape.std,time_stats.attn_prefill.min," \
	"time_stats.attn_prefill.max,time_stats.attn_prefill.mean,time_stats.attn_prefill.median," \
	"time_stats.attn_prefill.std,n_embd,n_q_head,n_kv_head,block_size," \
	"num_tensor_parallel_workers,max_model_len,batch_size,prefill_chunk_size,kv_cache_size," \
	"is_prefill,attention_backend,profile_method\n"

static const char vattn_csv[] = VATTN_HEAD
	"0.0,0.0,0.0,0.0,0.0,0.015,0.016,0.0155,0.015,0.0005,0.001,0.001,0.001,0.001,0.0,,,,,,8192,64,8,16,2,4096,3,0,32,False,AttentionBackend.FLASH_ATTENTION,ProfileMethod.KINETO\n"
	"0.0,0.0,0.0,0.0,0.0,,,,,,0.002,0.002,0.002,0.002,0.0,0.015,0.017,0.016,0.0155,0.0007,8192,64,8,16,2,4096,1,64,0,True,AttentionBackend.FLASH_ATTENTION,ProfileMethod.KINETO\n"
	"0.0,0.0,0.0,0.0,0.0,,,,,,0.002,0.002,0.002,0.002,0.0,0.5,0.7,0.6,0.55,0.05,8192,64,8,16,2,4096,1,128,256,True,AttentionBackend.FLASH_ATTENTION,ProfileMethod.KINETO\n";

#define CPU_HEAD ",schedule_mean,sampler_launch_mean,sampler_e2e_mean,prepare_inputs_launch_mean," \
	"prepare_inputs_e2e_mean,model_execution_launch_mean,model_execution_e2e_mean," \
	"process_model_outputs_mean,schedule_median,sampler_launch_median,sampler_e2e_median," \
	"prepare_inputs_launch_median,prepare_inputs_e2e_median,model_execution_launch_median," \
	"model_execution_e2e_median,process_model_outputs_median,model_name,batch_size," \
	"tensor_parallel_degree,ray_comm_time_mean\n"

static const char cpu_csv[] = CPU_HEAD
	"0,0.19615835238558552,0.5740625880813847,0.6238708059148242,0.7851933866428832,0.8886099288550516,0.23586827834757665,1.677295707243805,0.23239651151622334,0.1996876192952873,0.5417228775491246,0.5880162608257326,0.7239734144330422,0.7749160446348289,0.09320058402004541,1.4091682184568806,0.22695557299492955,codellama/CodeLlama-34b-Instruct-hf,8,2,6.241360194204996\n";

/* ---- aiconfigurator ----------------------------------------------------- */

START_TEST(aic_gemm_rows_field_by_field)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct collect c;
	const struct cal_meas *m;

	write_file(AIC_H100 "vllm0.24.0_gemm_perf.csv", gemm_csv);
	import_ok(s, AIC_H100 "vllm0.24.0_gemm_perf.csv", NULL, &st);
	ck_assert_int_eq(st.files, 1);
	ck_assert_int_eq(st.lines, 3);
	ck_assert_int_eq(st.imported, 3);
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 3);
	m = &c.v[0];
	ck_assert_int_eq(m->op, CAL_GEMM);
	ck_assert_str_eq(m->device, "h100-sxm");
	ck_assert_str_eq(m->device_raw, "NVIDIA H100 80GB HBM3");
	ck_assert_str_eq(m->dtype, "bf16");
	ck_assert_str_eq(m->variant, "torch.nn.functional.linear");
	ck_assert_int_eq(m->m, 32768);
	ck_assert_int_eq(m->n, 65536);
	ck_assert_int_eq(m->k, 12288);
	/* latency is the mean per call in ms, kept as is */
	ck_assert(m->mean_ms == 60.32404242621528);
	ck_assert(isnan(m->median_ms) && isnan(m->min_ms) && isnan(m->max_ms) && isnan(m->std_ms));
	ck_assert_int_eq(m->count, 0);
	ck_assert_int_eq(m->tp, CAL_NA);
	ck_assert_int_eq(m->batch, CAL_NA);
	ck_assert_str_eq(m->source, "aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv");
	ck_assert_int_eq(m->source_line, 2);
	ck_assert_str_eq(c.v[1].dtype, "fp8");
	ck_assert_str_eq(c.v[1].variant, "CutlassFP8ScaledMMLinearKernel");
	ck_assert_str_eq(c.v[2].dtype, "fp8_block");
	ck_assert_int_eq(c.v[2].source_line, 4);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(aic_gemm_dtype_filter)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct cal_import_opts o;
	struct ss_error err = { 0 };

	write_file("g/x_gemm_perf.csv", gemm_csv);
	cal_import_opts_compact(&o);
	import_ok(s, "g/x_gemm_perf.csv", &o, &st);
	ck_assert_int_eq(st.imported, 1);
	ck_assert_int_eq(st.filtered, 2);
	ck_assert_int_eq(cal_store_count(s, "h100-sxm", CAL_GEMM, &err), 1);
	/* outside a profiles tree, the source is the path as given */
	cal_store_close(s);
}
END_TEST

START_TEST(aic_context_attention_has_no_prior_context)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct collect c;
	const struct cal_meas *m;

	write_file(AIC_H100 "vllm0.24.0_context_attention_perf.csv", ctx_csv);
	import_ok(s, AIC_H100 "vllm0.24.0_context_attention_perf.csv", NULL, &st);
	ck_assert_int_eq(st.lines, 3);
	ck_assert_int_eq(st.imported, 2);
	ck_assert_int_eq(st.skipped, 1);        /* beam_width 2 */
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 2);
	m = &c.v[0];
	ck_assert_int_eq(m->op, CAL_ATTN_PREFILL);
	ck_assert_int_eq(m->batch, 2);
	ck_assert_int_eq(m->q_len, 12288);      /* isl */
	ck_assert_int_eq(m->kv_len, 0);         /* no prior context */
	ck_assert_int_eq(m->heads, 64);         /* per GPU already */
	ck_assert_int_eq(m->kv_heads, 64);
	ck_assert_int_eq(m->head_dim, 64);
	ck_assert_str_eq(m->dtype, "bf16");     /* kv_cache_dtype */
	ck_assert_str_eq(m->variant, "vllm_flash_attn_fa3");
	ck_assert(m->mean_ms == 5.424549102783203);
	ck_assert_int_eq(m->tp, CAL_NA);
	m = &c.v[1];
	ck_assert_str_eq(m->dtype, "fp8");
	ck_assert_str_eq(m->variant, "vllm_flash_attn_fa3:window=128");
	ck_assert_int_eq(m->source_line, 3);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(aic_generation_attention_kv_len_is_step_plus_one)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct collect c;

	write_file(AIC_H100 "vllm0.24.0_generation_attention_perf.csv", gen_csv);
	import_ok(s, AIC_H100, NULL, NULL);
	c = query(s, "h100-sxm", CAL_ATTN_DECODE);
	ck_assert_uint_eq(c.n, 2);
	ck_assert_int_eq(c.v[0].q_len, 1);
	ck_assert_int_eq(c.v[0].kv_len, 2);     /* step 1 cached + the new token */
	ck_assert_int_eq(c.v[1].kv_len, 1024);  /* step 1023 */
	ck_assert_int_eq(c.v[0].batch, 32);
	ck_assert_int_eq(c.v[0].heads, 64);
	ck_assert_int_eq(c.v[0].kv_heads, 1);
	ck_assert(c.v[0].mean_ms == 0.01126933346192042);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(aic_attention_window_and_kv_dtype_filters)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct cal_import_opts o;
	struct collect c;

	write_file(AIC_H100 "c_context_attention_perf.csv", ctx_csv);
	write_file(AIC_A100 "vllm0.14.0_context_attention_perf.csv", ctx_a100_csv);
	cal_import_opts_init(&o);
	o.window = 0;
	import_ok(s, AIC_H100 "c_context_attention_perf.csv", &o, &st);
	ck_assert_int_eq(st.imported, 1);
	ck_assert_int_eq(st.filtered, 1);
	/* no window_size column: full attention, kept by --window 0 */
	import_ok(s, AIC_A100 "vllm0.14.0_context_attention_perf.csv", &o, &st);
	c = query(s, "a100-80gb-sxm", CAL_ATTN_PREFILL);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_str_eq(c.v[0].variant, "vllm_flash_attn");
	ck_assert_str_eq(c.v[0].device_raw, "NVIDIA A100-SXM4-80GB");
	ck_assert_int_eq(c.v[0].kv_heads, 1);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(aic_nccl_bytes_from_elements)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct collect c;

	write_file(AIC_H100 "nccl2.29.2_perf.csv", nccl_csv);
	import_ok(s, AIC_H100 "nccl2.29.2_perf.csv", NULL, &st);
	ck_assert_int_eq(st.lines, 5);
	ck_assert_int_eq(st.imported, 3);
	ck_assert_int_eq(st.skipped, 2);        /* alltoall, reduce_scatter */
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 3);
	ck_assert_int_eq(c.v[0].op, CAL_ALL_GATHER);
	ck_assert_str_eq(c.v[0].dtype, "fp16");         /* half */
	ck_assert_int_eq(c.v[0].bytes, 512);            /* 256 elements x 2 B */
	ck_assert_int_eq(c.v[0].num_gpus, 2);
	ck_assert_str_eq(c.v[0].variant, "nccl");
	ck_assert(c.v[0].mean_ms == 0.00531);
	ck_assert_int_eq(c.v[1].op, CAL_ALL_REDUCE);
	ck_assert_int_eq(c.v[1].bytes, 67108864);       /* 32 Mi elements x 2 B */
	ck_assert_int_eq(c.v[1].num_gpus, 8);
	ck_assert_str_eq(c.v[2].dtype, "int8");
	ck_assert_int_eq(c.v[2].bytes, 1024);           /* 1 B per int8 element */
	ck_assert_int_eq(c.v[2].source_line, 4);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(aic_custom_allreduce_bytes_and_backend)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct cal_import_opts o;
	struct collect c;

	write_file(AIC_A100 "vllm0.14.0_custom_allreduce_perf.csv", car_csv);
	import_ok(s, AIC_A100 "vllm0.14.0_custom_allreduce_perf.csv", NULL, &st);
	c = query(s, "a100-80gb-sxm", CAL_ALL_REDUCE);
	ck_assert_uint_eq(c.n, 2);
	ck_assert_str_eq(c.v[0].dtype, "bf16");
	ck_assert_int_eq(c.v[0].bytes, 256);            /* 128 bf16 elements */
	ck_assert_str_eq(c.v[0].variant, "vllm_graph");
	ck_assert_str_eq(c.v[1].variant, "vllm_eager");
	ck_assert_int_eq(c.v[1].bytes, 8388608);
	ck_assert_int_eq(c.v[1].num_gpus, 4);
	free(c.v);
	cal_store_close(s);

	s = open_store("t.db", CAL_OPEN_CREATE);
	cal_import_opts_init(&o);
	o.ar_backend = "vllm_graph";
	memset(&st, 0, sizeof(st));
	import_ok(s, AIC_A100 "vllm0.14.0_custom_allreduce_perf.csv", &o, &st);
	ck_assert_int_eq(st.imported, 1);
	ck_assert_int_eq(st.filtered, 1);
	cal_store_close(s);
}
END_TEST

START_TEST(device_override_and_unknown_gpu)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_opts o;
	struct ss_error err = { 0 };
	struct collect c;
	char path[1024];

	write_file("z_gemm_perf.csv",
		   "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n"
		   "VLLM,0.1,NVIDIA Z100,gemm,k,bfloat16,1,2,3,0.5\n");
	ck_assert_int_eq(import(s, "z_gemm_perf.csv", NULL, NULL, &err), -EINVAL);
	ck_assert_str_eq(err.file, at(path, sizeof(path), "z_gemm_perf.csv"));
	ck_assert_int_eq(err.line, 2);
	ck_assert_str_eq(err.msg, "unknown GPU 'NVIDIA Z100' (no catalog name for it; pass --device NAME)");
	cal_import_opts_init(&o);
	o.device = "z100";
	import_ok(s, "z_gemm_perf.csv", &o, NULL);
	c = query(s, "z100", -1);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_str_eq(c.v[0].device_raw, "NVIDIA Z100");
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(gpu_names)
{
	ck_assert_str_eq(cal_import_gpu_name("NVIDIA H100 80GB HBM3"), "h100-sxm");
	ck_assert_str_eq(cal_import_gpu_name("NVIDIA A100-SXM4-80GB"), "a100-80gb-sxm");
	ck_assert_str_eq(cal_import_gpu_name("h100"), "h100-sxm");
	ck_assert_str_eq(cal_import_gpu_name("a100"), "a100-80gb-sxm");
	ck_assert_str_eq(cal_import_gpu_name("a40"), "a40");
	ck_assert_str_eq(cal_import_gpu_name("h100_dgx"), "h100-sxm");
	ck_assert_str_eq(cal_import_gpu_name("a100_dgx"), "a100-80gb-sxm");
	ck_assert_str_eq(cal_import_gpu_name("h100_pairwise_nvlink"), "h100-nvl");
	ck_assert_str_eq(cal_import_gpu_name("a100_pairwise_nvlink"), "a100-80gb-pcie");
	ck_assert_ptr_null(cal_import_gpu_name("NVIDIA Z100"));
}
END_TEST

/* ---- Vidur -------------------------------------------------------------- */

#define MLP_70B "vidur/profiling/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv"

static void check_stats(const struct cal_meas *m, int o, int line)
{
	ck_assert(m->min_ms == mlp_stat(o, 0, line));
	ck_assert(m->max_ms == mlp_stat(o, 1, line));
	ck_assert(m->mean_ms == mlp_stat(o, 2, line));
	ck_assert(m->median_ms == mlp_stat(o, 3, line));
	ck_assert(m->std_ms == mlp_stat(o, 4, line));
}

START_TEST(vidur_mlp_shapes_follow_tensor_parallelism)
{
	static const int64_t rows[][2] = { { 4096, 1 }, { 8, 2 } };
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	char *csv = mlp_csv(rows, 2, false);
	const struct cal_meas *m;
	struct collect c;

	write_file(MLP_70B, csv);
	free(csv);
	import_ok(s, MLP_70B, NULL, &st);
	ck_assert_int_eq(st.lines, 2);
	ck_assert_int_eq(st.imported, 20);
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 20);
	/* line 2: tokens 4096, TP 1; one measurement per op, in op order */
	for (int o = 0; o < N_MLP_OPS; o++) {
		char want[64];

		m = &c.v[o];
		snprintf(want, sizeof(want), "vidur:%s", mlp_ops[o]);
		ck_assert_str_eq(m->variant, want);
		ck_assert_str_eq(m->device, "h100-sxm");
		ck_assert_str_eq(m->device_raw, "h100");
		ck_assert_str_eq(m->dtype, "fp16");
		ck_assert_str_eq(m->source, MLP_70B);
		ck_assert_int_eq(m->source_line, 2);
		ck_assert_int_eq(m->tp, 1);
		check_stats(m, o, 2);
	}
	/* Llama-2-70B: H 64, KV 8, E 8192, F 28672, head_dim 128 */
	m = &c.v[2];    /* attn_pre_proj: (H + 2 KV) hd / tp */
	ck_assert_int_eq(m->op, CAL_GEMM);
	ck_assert_int_eq(m->m, 4096);
	ck_assert_int_eq(m->n, 10240);
	ck_assert_int_eq(m->k, 8192);
	/* line 3: tokens 8, TP 2 */
	m = &c.v[10 + 0];       /* emb */
	ck_assert_int_eq(m->op, CAL_EMBEDDING);
	ck_assert_int_eq(m->tokens, 8);
	ck_assert_int_eq(m->width, 8192);
	ck_assert_int_eq(m->tp, 2);
	check_stats(m, 0, 3);
	m = &c.v[10 + 1];       /* input_layernorm */
	ck_assert_int_eq(m->op, CAL_RMSNORM);
	ck_assert_int_eq(m->width, 8192);
	m = &c.v[10 + 2];       /* attn_pre_proj */
	ck_assert_int_eq(m->m, 8);
	ck_assert_int_eq(m->n, 5120);
	ck_assert_int_eq(m->k, 8192);
	m = &c.v[10 + 3];       /* attn_rope */
	ck_assert_int_eq(m->op, CAL_ROPE);
	ck_assert_int_eq(m->tokens, 8);
	ck_assert_int_eq(m->heads, 32);
	ck_assert_int_eq(m->kv_heads, 4);
	ck_assert_int_eq(m->head_dim, 128);
	ck_assert_int_eq(m->width, 4608);
	m = &c.v[10 + 4];       /* attn_post_proj: n = E, k = H hd / tp */
	ck_assert_int_eq(m->n, 8192);
	ck_assert_int_eq(m->k, 4096);
	m = &c.v[10 + 5];       /* post_attention_layernorm */
	ck_assert_int_eq(m->op, CAL_RMSNORM);
	m = &c.v[10 + 6];       /* mlp_up_proj: gate and up, 2 F / tp */
	ck_assert_int_eq(m->n, 28672);
	ck_assert_int_eq(m->k, 8192);
	m = &c.v[10 + 7];       /* mlp_act: output width F / tp */
	ck_assert_int_eq(m->op, CAL_ACTIVATION);
	ck_assert_int_eq(m->width, 14336);
	m = &c.v[10 + 8];       /* mlp_down_proj: n = E, k = F / tp */
	ck_assert_int_eq(m->n, 8192);
	ck_assert_int_eq(m->k, 14336);
	m = &c.v[10 + 9];       /* add */
	ck_assert_int_eq(m->op, CAL_RESIDUAL_ADD);
	ck_assert_int_eq(m->width, 8192);
	check_stats(m, 9, 3);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_mlp_phi2_layernorm_and_ungated_up_proj)
{
	static const int64_t rows[][2] = { { 16, 1 } };
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	char *csv = mlp_csv(rows, 1, true);
	struct collect c;

	write_file("vidur/profiling/compute/a100/microsoft/phi-2/mlp.csv", csv);
	free(csv);
	import_ok(s, "vidur/profiling/compute/a100/microsoft/phi-2/mlp.csv", NULL, NULL);
	c = query(s, "a100-80gb-sxm", -1);
	ck_assert_uint_eq(c.n, 9);      /* no post_attention_layernorm */
	ck_assert_int_eq(c.v[1].op, CAL_LAYERNORM);
	ck_assert_int_eq(c.v[5].op, CAL_GEMM);  /* mlp_up_proj */
	ck_assert_str_eq(c.v[5].variant, "vidur:mlp_up_proj");
	ck_assert_int_eq(c.v[5].n, 10240);      /* F / tp, not gated */
	ck_assert_int_eq(c.v[5].k, 2560);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_mlp_thinning_per_octave)
{
	/* tokens 1..8 at TP 1 (4 twice, as Vidur repeats grid boundaries),
	 * and 3 at TP 2 */
	static const int64_t rows[][2] = {
		{ 8, 1 }, { 7, 1 }, { 6, 1 }, { 5, 1 }, { 4, 1 }, { 4, 1 }, { 3, 1 }, { 2, 1 },
		{ 1, 1 }, { 3, 2 },
	};
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct cal_import_opts o;
	char *csv = mlp_csv(rows, 10, false);
	struct collect c;

	write_file(MLP_70B, csv);
	free(csv);
	cal_import_opts_init(&o);
	o.per_octave = 1;
	import_ok(s, MLP_70B, &o, &st);
	/* one point per octave: 1, 2, 4 (both lines), 8 (also the largest);
	 * TP 2's only point is kept */
	ck_assert_int_eq(st.lines, 10);
	ck_assert_int_eq(st.filtered, 4);       /* 7, 6, 5, 3 at TP 1 */
	ck_assert_int_eq(st.imported, 60);
	c = query(s, NULL, CAL_EMBEDDING);
	ck_assert_uint_eq(c.n, 6);
	ck_assert_int_eq(c.v[0].tokens, 8);     /* file order */
	ck_assert_int_eq(c.v[1].tokens, 4);
	ck_assert_int_eq(c.v[2].tokens, 4);
	ck_assert_int_eq(c.v[3].tokens, 2);
	ck_assert_int_eq(c.v[4].tokens, 1);
	ck_assert_int_eq(c.v[5].tokens, 3);
	ck_assert_int_eq(c.v[5].tp, 2);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_network_size_is_bytes_and_duplicates_merge)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	const struct cal_meas *m;
	struct collect c;
	double var;

	write_file("vidur/profiling/network/h100_dgx/all_reduce.csv", net_csv);
	write_file("vidur/profiling/network/h100_pairwise_nvlink/all_reduce.csv", net_csv);
	import_ok(s, "vidur/profiling/network/h100_dgx/all_reduce.csv", NULL, &st);
	ck_assert_int_eq(st.lines, 4);
	ck_assert_int_eq(st.imported, 3);
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 3);
	m = &c.v[0];    /* lines 2 and 4 merged */
	ck_assert_int_eq(m->op, CAL_ALL_REDUCE);
	ck_assert_str_eq(m->device, "h100-sxm");
	ck_assert_str_eq(m->device_raw, "h100_dgx");
	ck_assert_str_eq(m->variant, "vidur:dgx");
	ck_assert_str_eq(m->dtype, "fp16");
	ck_assert_int_eq(m->num_gpus, 8);
	ck_assert_int_eq(m->bytes, 2048);       /* size is bytes already */
	ck_assert_int_eq(m->source_line, 2);
	ck_assert_close(m->mean_ms, (0.03 + 0.04) / 2);         /* mean of means */
	ck_assert_close(m->median_ms, (0.037 + 0.030) / 2);
	ck_assert(m->min_ms == 0.010);                          /* min of mins */
	ck_assert(m->max_ms == 0.050);                          /* max of maxes */
	var = (0.010614455552060439 * 0.010614455552060439 + 0.03 * 0.03 + 0.02 * 0.02 +
	       0.04 * 0.04) / 2 - 0.035 * 0.035;                /* pooled */
	ck_assert_close(m->std_ms, sqrt(var));
	m = &c.v[1];
	ck_assert_int_eq(m->bytes, 10240);
	ck_assert(m->mean_ms == 0.025 && m->std_ms == 0.0075);  /* single line: as is */
	ck_assert_int_eq(m->source_line, 3);
	m = &c.v[2];    /* 2 workers, 1 per node: across nodes */
	ck_assert_str_eq(m->variant, "vidur:dgx:nodes=2");
	ck_assert_int_eq(m->num_gpus, 2);
	ck_assert_int_eq(m->source_line, 5);
	free(c.v);
	import_ok(s, "vidur/profiling/network/h100_pairwise_nvlink/all_reduce.csv", NULL, NULL);
	c = query(s, "h100-nvl", -1);
	ck_assert_uint_eq(c.n, 3);
	ck_assert_str_eq(c.v[0].variant, "vidur:pairwise_nvlink");
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_legacy_attention_heads_per_gpu_and_kv_len)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	const char *rel = "vidur/profiling/legacy_attention/a100_attention_llama2-70b-shape_tp2.csv";
	const struct cal_meas *m;
	struct collect c;

	write_file(rel, vattn_csv);
	import_ok(s, rel, NULL, NULL);
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 3);
	m = &c.v[0];
	ck_assert_int_eq(m->op, CAL_ATTN_DECODE);
	ck_assert_str_eq(m->device, "a100-80gb-sxm");   /* from the file name */
	ck_assert_str_eq(m->device_raw, "a100");
	ck_assert_str_eq(m->dtype, "fp16");
	ck_assert_str_eq(m->variant, "vidur:flash_attention");
	ck_assert_int_eq(m->batch, 3);
	ck_assert_int_eq(m->q_len, 1);
	ck_assert_int_eq(m->kv_len, 33);        /* 32 cached + the new token */
	ck_assert_int_eq(m->heads, 32);         /* 64 q heads / TP 2 */
	ck_assert_int_eq(m->kv_heads, 4);
	ck_assert_int_eq(m->head_dim, 128);     /* 8192 / 64 */
	ck_assert_int_eq(m->tp, 2);
	ck_assert(m->mean_ms == 0.0155 && m->median_ms == 0.015 && m->min_ms == 0.015 &&
		  m->max_ms == 0.016 && m->std_ms == 0.0005);
	m = &c.v[1];
	ck_assert_int_eq(m->op, CAL_ATTN_PREFILL);
	ck_assert_int_eq(m->q_len, 64);
	ck_assert_int_eq(m->kv_len, 0);
	ck_assert(m->mean_ms == 0.016 && m->std_ms == 0.0007);
	m = &c.v[2];    /* chunked prefill: 128 new tokens after 256 cached */
	ck_assert_int_eq(m->q_len, 128);
	ck_assert_int_eq(m->kv_len, 256);
	ck_assert_int_eq(m->source_line, 4);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_cpu_overheads_one_row_per_part)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	const char *rel = "vidur/profiling/legacy_cpu_overheads/a100_cpu_overheads.csv";
	struct cal_import_stats st = { 0 };
	struct collect c;

	write_file(rel, cpu_csv);
	write_file("vidur/profiling/legacy_cpu_overheads/a40_cpu_overheads.csv", cpu_csv);
	import_ok(s, rel, NULL, &st);
	ck_assert_int_eq(st.imported, 9);       /* 8 parts + ray_comm_time */
	c = query(s, NULL, CAL_HOST_OVERHEAD);
	ck_assert_uint_eq(c.n, 9);
	ck_assert_str_eq(c.v[0].variant, "schedule:codellama/CodeLlama-34b-Instruct-hf");
	ck_assert_str_eq(c.v[0].device, "a100-80gb-sxm");
	ck_assert_str_eq(c.v[0].dtype, "");
	ck_assert(c.v[0].mean_ms == 0.19615835238558552);
	ck_assert(c.v[0].median_ms == 0.1996876192952873);
	ck_assert_int_eq(c.v[0].batch, 8);
	ck_assert_int_eq(c.v[0].tp, 2);
	ck_assert_str_eq(c.v[7].variant, "process_model_outputs:codellama/CodeLlama-34b-Instruct-hf");
	ck_assert(c.v[7].median_ms == 0.22695557299492955);
	ck_assert_str_eq(c.v[8].variant, "ray_comm_time:codellama/CodeLlama-34b-Instruct-hf");
	ck_assert(c.v[8].mean_ms == 6.241360194204996);
	ck_assert(isnan(c.v[8].median_ms));
	free(c.v);
	import_ok(s, "vidur/profiling/legacy_cpu_overheads/a40_cpu_overheads.csv", NULL, NULL);
	c = query(s, "a40", -1);
	ck_assert_uint_eq(c.n, 9);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(vidur_device_from_path_or_override)
{
	static const int64_t rows[][2] = { { 1, 1 } };
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_opts o;
	struct ss_error err = { 0 };
	char *csv = mlp_csv(rows, 1, false);

	write_file("mine/mlp.csv", csv);
	free(csv);
	ck_assert_int_eq(import(s, "mine/mlp.csv", NULL, NULL, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot tell the GPU"));
	ck_assert_ptr_nonnull(strstr(err.msg, "--device"));
	cal_import_opts_init(&o);
	o.device = "l40s";
	import_ok(s, "mine/mlp.csv", &o, NULL);
	ck_assert_int_eq(cal_store_count(s, "l40s", -1, &err), 10);
	cal_store_close(s);
}
END_TEST

/* ---- detection and directories ------------------------------------------ */

START_TEST(detects_every_table_from_its_header)
{
	static const int64_t rows[][2] = { { 1, 1 } };
	static const struct {
		const char *rel;
		const char *text;
		enum cal_import_kind kind;
	} t[] = {
		{ "a.csv", gemm_csv, CAL_IMPORT_AIC_GEMM },
		{ "b.csv", ctx_csv, CAL_IMPORT_AIC_ATTENTION },
		{ "c.csv", gen_csv, CAL_IMPORT_AIC_ATTENTION },
		{ "d.csv", nccl_csv, CAL_IMPORT_AIC_NCCL },
		{ "e.csv", car_csv, CAL_IMPORT_AIC_CUSTOM_AR },
		{ "f.csv", net_csv, CAL_IMPORT_VIDUR_NETWORK },
		{ "g.csv", vattn_csv, CAL_IMPORT_VIDUR_ATTENTION },
		{ "h.csv", cpu_csv, CAL_IMPORT_VIDUR_CPU },
	};
	struct ss_error err = { 0 };
	enum cal_import_kind k;
	char path[1024], *csv = mlp_csv(rows, 1, false);

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		write_file(t[i].rel, t[i].text);
		ck_assert_int_eq(cal_import_detect(at(path, sizeof(path), t[i].rel), &k, &err), 0);
		ck_assert_int_eq(k, t[i].kind);
	}
	write_file("m.csv", csv);
	free(csv);
	ck_assert_int_eq(cal_import_detect(at(path, sizeof(path), "m.csv"), &k, &err), 0);
	ck_assert_int_eq(k, CAL_IMPORT_VIDUR_MLP);
	write_file("x.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\n");
	ck_assert_int_eq(cal_import_detect(at(path, sizeof(path), "x.csv"), &k, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a profile table"));
	for (int i = 0; i < CAL_IMPORT_KIND_COUNT; i++) {
		ck_assert_int_eq(cal_import_kind_from_name(cal_import_kind_name((enum cal_import_kind)i), &k), 0);
		ck_assert_int_eq(k, i);
	}
	ck_assert_int_eq(cal_import_kind_from_name("parquet", &k), -EINVAL);
}
END_TEST

START_TEST(forced_kind_must_match_the_header)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct ss_error err = { 0 };
	char path[1024];

	write_file("n.csv", nccl_csv);
	ck_assert_int_eq(cal_import_file(s, at(path, sizeof(path), "n.csv"), CAL_IMPORT_AIC_GEMM,
					 NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(err.line, 1);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a aic-gemm table"));
	ck_assert_int_eq(cal_import_file(s, path, CAL_IMPORT_AIC_NCCL, NULL, NULL, &err), 0);
	cal_store_close(s);
}
END_TEST

START_TEST(directory_walk_imports_known_tables_in_name_order)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct collect c;

	write_file("p/aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv", gemm_csv);
	write_file("p/aiconfigurator/h100_sxm/nccl2.29.2_perf.csv", nccl_csv);
	write_file("p/aiconfigurator/h100_sxm/h100_sxm_system_spec.yaml", "gpu: h100\n");
	write_file("p/mlenergy/flat.csv", "task,gpu,model\nchat,H100,llama\n");
	write_file("p/PROVENANCE.md", "# provenance\n");
	import_ok(s, "p", NULL, &st);
	ck_assert_int_eq(st.files, 2);
	ck_assert_int_eq(st.files_ignored, 1);   /* the foreign CSV */
	ck_assert_int_eq(st.imported, 6);
	c = query(s, NULL, -1);
	ck_assert_uint_eq(c.n, 6);
	/* nccl2... sorts before vllm0... */
	ck_assert_str_eq(c.v[0].source, "aiconfigurator/h100_sxm/nccl2.29.2_perf.csv");
	ck_assert_str_eq(c.v[5].source, "aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv");
	free(c.v);
	cal_store_close(s);
}
END_TEST

/* ---- malformed input: error with file and line, store unchanged --------- */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static char *export_text(struct cal_store *s)
{
	struct ss_error err = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_int_eq(cal_store_export_csv(s, f, &err), 0);
	fclose(f);
	return buf;
}

/* Import rel (written with text) into a store that already holds the
 * GEMM excerpt; expect an error at line naming the file with msg in its
 * message, and the store's file byte for byte as before. */
static void expect_failure(const char *rel, const char *text, long line, const char *msg)
{
	struct cal_store *s;
	struct ss_error err = { 0 };
	char store[1024], path[1024], *before, *after, *csv_before, *csv_after;
	size_t nb, na;
	int rc;

	at(store, sizeof(store), "fail.db");
	unlink(store);
	write_file("ok/x_gemm_perf.csv", gemm_csv);
	s = open_store("fail.db", CAL_OPEN_CREATE);
	import_ok(s, "ok/x_gemm_perf.csv", NULL, NULL);
	csv_before = export_text(s);
	cal_store_close(s);
	before = slurp(store, &nb);

	write_file(rel, text);
	s = open_store("fail.db", CAL_OPEN_WRITE);
	rc = import(s, rel, NULL, NULL, &err);
	ck_assert_msg(rc < 0, "import of %s succeeded", rel);
	ck_assert_str_eq(err.file, at(path, sizeof(path), rel));
	ck_assert_msg(err.line == line, "%s: line %ld, expected %ld (%s)", rel, err.line, line,
		      err.msg);
	ck_assert_msg(strstr(err.msg, msg), "%s: message '%s' lacks '%s'", rel, err.msg, msg);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 3);
	csv_after = export_text(s);
	ck_assert_str_eq(csv_after, csv_before);
	cal_store_close(s);
	after = slurp(store, &na);
	ck_assert_uint_eq(na, nb);
	ck_assert(memcmp(before, after, nb) == 0);
	free(before);
	free(after);
	free(csv_before);
	free(csv_after);
}

#define GEMM_HEAD "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n"
#define GEMM_ROW "VLLM,0.24.0,NVIDIA H100 80GB HBM3,gemm,torch.nn.functional.linear,bfloat16,"

START_TEST(too_many_fields)
{
	expect_failure("bad/a_gemm_perf.csv",
		       GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2,3,0.1,9\n" GEMM_ROW "1,2,3,0.1\n",
		       3, "expected 10 fields as in the header, got 11");
}
END_TEST

START_TEST(too_few_fields_mid_file)
{
	expect_failure("bad/a_gemm_perf.csv",
		       GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2,0.1\n" GEMM_ROW "1,2,3,0.1\n",
		       3, "expected 10 fields as in the header, got 9");
}
END_TEST

START_TEST(non_numeric_value)
{
	expect_failure("bad/a_gemm_perf.csv",
		       GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2,3,fast\n",
		       4, "latency: expected a time in ms, got 'fast' (non-numeric)");
	expect_failure("bad/b_gemm_perf.csv", GEMM_HEAD GEMM_ROW "1,2.5,3,0.1\n", 2,
		       "n: expected an integer, got '2.5' (not a whole number)");
	expect_failure("bad/c_gemm_perf.csv", GEMM_HEAD GEMM_ROW "1,2,3,nan\n", 2,
		       "latency: expected a time in ms, got 'nan'");
}
END_TEST

START_TEST(negative_latency)
{
	expect_failure("bad/a_gemm_perf.csv", GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2,3,-0.5\n",
		       3, "latency: negative latency '-0.5'");
	expect_failure("bad/b_gemm_perf.csv", GEMM_HEAD GEMM_ROW "-1,2,3,0.5\n", 2,
		       "m: negative value '-1'");
}
END_TEST

/* Write n bytes (NUL bytes included) to rel under the scratch directory. */
static void write_bytes(const char *rel, const void *data, size_t n)
{
	char path[1024];
	FILE *f;

	write_file(rel, "");    /* makes the directories */
	f = fopen(at(path, sizeof(path), rel), "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* A NUL byte would cut a field short as a C string; a stream without line
 * ends would be read into memory whole: both are errors naming the line. */
START_TEST(nul_byte_and_endless_line)
{
	static const char nul[] = GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2\0" "9,3,0.1\n";
	size_t n = 3 << 20, h = strlen(GEMM_HEAD GEMM_ROW "1,2,3,0.1\n");
	char *big = malloc(n);
	struct ss_error err = { 0 };
	struct cal_store *s;

	ck_assert_ptr_nonnull(big);
	s = open_store("hostile.db", CAL_OPEN_CREATE);
	write_bytes("bad/n_gemm_perf.csv", nul, sizeof(nul) - 1);
	ck_assert_int_eq(import(s, "bad/n_gemm_perf.csv", NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(err.line, 3);
	ck_assert_msg(strstr(err.msg, "NUL byte in field 8"), "%s", err.msg);
	memcpy(big, GEMM_HEAD GEMM_ROW "1,2,3,0.1\n", h);
	memset(big + h, 'x', n - h);
	write_bytes("bad/l_gemm_perf.csv", big, n);
	err = (struct ss_error){ 0 };
	ck_assert_int_eq(import(s, "bad/l_gemm_perf.csv", NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(err.line, 3);
	ck_assert_msg(strstr(err.msg, "line longer than 1048576 bytes"), "%s", err.msg);
	memset(big, 0, n);      /* like /dev/zero */
	write_bytes("bad/z_gemm_perf.csv", big, n);
	err = (struct ss_error){ 0 };
	ck_assert_int_lt(import(s, "bad/z_gemm_perf.csv", NULL, NULL, &err), 0);
	ck_assert_int_eq(err.line, 1);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 0);
	cal_store_close(s);
	free(big);
}
END_TEST

START_TEST(truncated_last_line)
{
	/* the file ends in the middle of a row, without a newline */
	expect_failure("bad/a_gemm_perf.csv", GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" GEMM_ROW "1,2", 3,
		       "truncated last line: expected 10 fields as in the header, got 8");
	expect_failure("bad/b_gemm_perf.csv",
		       GEMM_HEAD GEMM_ROW "1,2,3,0.1\n" "VLLM,0.24.0,\"NVIDIA H100", 3,
		       "truncated last line: unterminated quoted field");
}
END_TEST

START_TEST(missing_column)
{
	expect_failure("bad/a_gemm_perf.csv",
		       "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,latency\n"
		       "VLLM,0.24.0,NVIDIA H100 80GB HBM3,gemm,t,bfloat16,1,2,0.1\n",
		       1, "missing column 'k' (aic-gemm table");
	expect_failure("bad/a100_attention.csv", VATTN_HEAD, 1, "header only");
	expect_failure("bad/c.csv", "", 0, "empty file");
	expect_failure("bad/d.csv", "a,b,c\n1,2,3\n", 1, "unrecognized header");
}
END_TEST

START_TEST(line_numbers_with_crlf_and_blank_lines)
{
	expect_failure("bad/a_gemm_perf.csv",
		       "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\r\n"
		       GEMM_ROW "1,2,3,0.1\r\n\r\n" GEMM_ROW "1,2,3,x\r\n",
		       4, "latency: expected a time in ms, got 'x'");
}
END_TEST

START_TEST(vidur_bad_rows)
{
	static const int64_t rows[][2] = { { 4096, 1 }, { 4096, 3 } };
	char *csv = mlp_csv(rows, 2, false);

	/* 64 heads do not split over 3 GPUs */
	expect_failure(MLP_70B, csv, 3, "n_head: 64 is not a multiple of num_tensor_parallel_workers (3)");
	free(csv);
	expect_failure("vidur/profiling/legacy_attention/a100_attention.csv",
		       VATTN_HEAD "0,0,0,0,0,0.1,0.1,0.1,0.1,0,0,0,0,0,0,,,,,,8192,64,8,16,2,4096,1,0,32,maybe,x,y\n",
		       2, "is_prefill: expected True or False, got 'maybe'");
	expect_failure("vidur/profiling/legacy_attention/a100_attention.csv",
		       VATTN_HEAD "0,0,0,0,0,,,,,,0,0,0,0,0,,,,,,8192,64,8,16,2,4096,1,0,32,False,x,y\n",
		       2, "time_stats.attn_decode.mean: empty (expected a time in ms)");
	expect_failure("vidur/profiling/network/h100_dgx/all_reduce.csv",
		       NET_HEAD "0,0.015,0.038,0.03,0.037,0.01,0,8,2048,all_reduce,3,8\n",
		       2, "devices_per_node: 3 devices per node for 8 workers");
	expect_failure("vidur/profiling/network/z100_dgx/all_reduce.csv", net_csv, 0,
		       "cannot tell the GPU: 'z100_dgx'");
}
END_TEST

START_TEST(failed_file_in_a_directory_rolls_back_the_whole_walk)
{
	struct cal_store *s = open_store("s.db", CAL_OPEN_CREATE);
	struct cal_import_stats st = { 0 };
	struct ss_error err = { 0 };

	write_file("w/a_gemm_perf.csv", gemm_csv);                      /* imports first */
	write_file("w/b_gemm_perf.csv", GEMM_HEAD GEMM_ROW "1,2,3,-1\n"); /* then fails */
	ck_assert_int_eq(import(s, "w", NULL, &st, &err), -EINVAL);
	ck_assert_int_eq(err.line, 2);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 0);
	ck_assert_int_eq(st.files, 0);          /* nothing counted either */
	cal_store_close(s);
}
END_TEST

/* ---- the shipped store -------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_fn(void *ctx, const struct cal_meas *m)
{
	(void)m;
	(*(int64_t *)ctx)++;
	return 0;
}

START_TEST(shipped_store_covers_h100_and_a100)
{
	static const enum cal_op ops[] = {
		CAL_GEMM, CAL_ATTN_PREFILL, CAL_ATTN_DECODE, CAL_RMSNORM, CAL_ROPE, CAL_ACTIVATION,
		CAL_RESIDUAL_ADD, CAL_EMBEDDING, CAL_ALL_REDUCE, CAL_ALL_GATHER, CAL_SEND_RECV,
	};
	static const char *const devs[] = { "h100-sxm", "a100-80gb-sxm" };
	const char *data = getenv("SERVESIM_DATA");
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[1024];
	int64_t n = 0;

	ck_assert_ptr_nonnull(data);
	snprintf(path, sizeof(path), "%s/calibration.db", data);
	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_READONLY, &err) == 0, "%s", err.msg);
	for (size_t d = 0; d < 2; d++)
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
			ck_assert_msg(cal_store_count(s, devs[d], ops[i], &err) > 0, "%s %s", devs[d],
				      cal_op_name(ops[i]));
	ck_assert_int_gt(cal_store_count(s, "a100-80gb-sxm", CAL_HOST_OVERHEAD, &err), 0);
	/* every row of the device is read back (how fast is bench/'s
	 * question: tests never assert wall-clock times) */
	ck_assert_int_eq(cal_store_query(s, "h100-sxm", -1, count_fn, &n, &err), 0);
	ck_assert_int_eq(n, cal_store_count(s, "h100-sxm", -1, &err));
	cal_store_close(s);
}
END_TEST

/* ---- real data ---------------------------------------------------------- */

static char profiles[1024];

static bool shared_present(void)
{
	const char *shared = getenv("SERVESIM_SHARED_DATA");
	char p[1100];

	if (!shared || !*shared)
		return false;
	snprintf(profiles, sizeof(profiles), "%s/profiles", shared);
	snprintf(p, sizeof(p), "%s/PROVENANCE.md", profiles);
	return access(p, R_OK) == 0;
}

/* Per-file counts from the on_file callback. */
struct file_count {
	char source[256];
	struct cal_import_stats st;
};

struct file_counts {
	struct file_count v[64];
	int n;
};

static void on_file(void *ctx, const char *path, enum cal_import_kind kind,
		    const struct cal_import_stats *st)
{
	struct file_counts *fc = ctx;
	const char *rel = strstr(path, "/profiles/");

	(void)kind;
	ck_assert_int_lt(fc->n, 64);
	snprintf(fc->v[fc->n].source, sizeof(fc->v[0].source), "%s", rel ? rel + 10 : path);
	fc->v[fc->n++].st = *st;
}

static const struct cal_import_stats *file_stats(const struct file_counts *fc, const char *rel)
{
	for (int i = 0; i < fc->n; i++)
		if (!strcmp(fc->v[i].source, rel))
			return &fc->v[i].st;
	ck_abort_msg("no file %s imported", rel);
	return NULL;
}

/* Lines read, measurements imported, lines skipped of one file. */
static void expect_file(const struct file_counts *fc, const char *rel, int64_t lines,
			int64_t imported, int64_t skipped)
{
	const struct cal_import_stats *st = file_stats(fc, rel);

	ck_assert_msg(st->lines == lines, "%s: %lld lines", rel, (long long)st->lines);
	ck_assert_msg(st->imported == imported, "%s: %lld imported", rel, (long long)st->imported);
	ck_assert_msg(st->skipped == skipped, "%s: %lld skipped", rel, (long long)st->skipped);
}

/* The first measurement from source rel with this op. */
struct first_ctx {
	const char *source;
	int op;
	struct cal_meas m;
	bool found;
};

static int first_fn(void *ctx, const struct cal_meas *m)
{
	struct first_ctx *f = ctx;

	if ((f->op < 0 || (int)m->op == f->op) && !strcmp(m->source, f->source)) {
		f->m = *m;
		f->found = true;
		return 1;
	}
	return 0;
}

static struct cal_meas first_of(struct cal_store *s, const char *device, const char *source,
				int op)
{
	struct first_ctx f = { .source = source, .op = op };
	struct ss_error err = { 0 };

	ck_assert_int_ge(cal_store_query(s, device, -1, first_fn, &f, &err), 0);
	ck_assert_msg(f.found, "nothing from %s", source);
	return f.m;
}

START_TEST(real_full_import_matches_provenance)
{
	struct file_counts fc = { 0 };
	struct cal_import_stats st = { 0 };
	struct cal_import_opts o;
	struct cal_store *s = open_store("full.db", CAL_OPEN_CREATE);
	struct ss_error err = { 0 };
	struct cal_meas m;
	double t0, dt;

	cal_import_opts_init(&o);
	o.on_file = on_file;
	o.ctx = &fc;
	t0 = now_s();
	ck_assert_msg(cal_import_path(s, profiles, CAL_IMPORT_AUTO, &o, &st, &err) == 0,
		      "%s:%ld: %s", err.file, err.line, err.msg);
	dt = now_s() - t0;
	fprintf(stderr, "full import: %lld measurements from %lld lines of %lld files in %.2f s\n",
		(long long)st.imported, (long long)st.lines, (long long)st.files, dt);
	/* PROVENANCE.md's row counts */
	expect_file(&fc, "aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv", 107188, 107188, 0);
	expect_file(&fc, "aiconfigurator/h100_sxm/vllm0.24.0_context_attention_perf.csv", 50830, 50830, 0);
	expect_file(&fc, "aiconfigurator/h100_sxm/vllm0.24.0_generation_attention_perf.csv", 62166, 62166, 0);
	expect_file(&fc, "aiconfigurator/h100_sxm/nccl2.29.2_perf.csv", 504, 252, 252);
	expect_file(&fc, "aiconfigurator/h100_sxm/vllm0.24.0_custom_allreduce_perf.csv", 138, 138, 0);
	expect_file(&fc, "aiconfigurator/a100_sxm/vllm0.14.0_gemm_perf.csv", 9240, 9240, 0);
	expect_file(&fc, "aiconfigurator/a100_sxm/vllm0.14.0_context_attention_perf.csv", 5457, 5457, 0);
	expect_file(&fc, "aiconfigurator/a100_sxm/vllm0.14.0_generation_attention_perf.csv", 5431, 5431, 0);
	expect_file(&fc, "aiconfigurator/a100_sxm/nccl2.27.3_perf.csv", 504, 252, 252);
	expect_file(&fc, "aiconfigurator/a100_sxm/vllm0.14.0_custom_allreduce_perf.csv", 138, 138, 0);
	expect_file(&fc, "vidur/profiling/legacy_attention/a100_attention_llama2-70b-shape_tp2.csv",
		    14658, 14658, 0);
	expect_file(&fc, "vidur/profiling/legacy_cpu_overheads/a100_cpu_overheads.csv", 78, 78 * 9, 0);
	expect_file(&fc, "vidur/profiling/legacy_cpu_overheads/a40_cpu_overheads.csv", 221, 221 * 9, 0);
	expect_file(&fc, "vidur/profiling/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv", 1044, 10440, 0);
	expect_file(&fc, "vidur/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv", 1824, 18240, 0);
	expect_file(&fc, "vidur/profiling/compute/h100/microsoft/phi-2/mlp.csv", 261, 261 * 9, 0);
	/* network: one line per (workers, per node, size), except the grid's
	 * 8 MiB-element boundary, profiled twice per configuration and merged */
	expect_file(&fc, "vidur/profiling/network/h100_dgx/all_reduce.csv", 2982, 2982 - 3, 0);
	expect_file(&fc, "vidur/profiling/network/a100_dgx/all_reduce.csv", 6958, 6958 - 7, 0);
	expect_file(&fc, "vidur/profiling/network/a100_dgx/send_recv.csv", 1988, 1988 - 2, 0);
	ck_assert_int_eq(fc.n, 42);
	ck_assert_int_eq(st.files_ignored, 2);  /* mlenergy flat CSV, DistServe max_num_tokens */
	/* 4,418 prefill and 10,240 decode rows in the legacy attention table */
	ck_assert_int_eq(cal_store_count(s, "a100-80gb-sxm", CAL_ATTN_PREFILL, &err), 5457 + 4418);
	ck_assert_int_eq(cal_store_count(s, "a100-80gb-sxm", CAL_ATTN_DECODE, &err), 5431 + 10240);

	/* spot values: the first data line of each file */
	m = first_of(s, "h100-sxm", "aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv", CAL_GEMM);
	ck_assert(m.m == 32768 && m.n == 65536 && m.k == 12288 && m.source_line == 2);
	ck_assert(m.mean_ms == 60.32404242621528);
	ck_assert_str_eq(m.variant, "torch.nn.functional.linear");
	m = first_of(s, "h100-sxm", "aiconfigurator/h100_sxm/vllm0.24.0_generation_attention_perf.csv", -1);
	ck_assert(m.op == CAL_ATTN_DECODE && m.batch == 32 && m.heads == 64 && m.kv_heads == 1 &&
		  m.head_dim == 64 && m.kv_len == 2 && m.q_len == 1);
	ck_assert(m.mean_ms == 0.01126933346192042);
	m = first_of(s, "h100-sxm", "aiconfigurator/h100_sxm/nccl2.29.2_perf.csv", -1);
	ck_assert(m.op == CAL_ALL_GATHER && m.num_gpus == 2 && m.bytes == 512 && m.mean_ms == 0.00531);
	m = first_of(s, "a100-80gb-sxm", "aiconfigurator/a100_sxm/vllm0.14.0_context_attention_perf.csv", -1);
	ck_assert(m.batch == 4 && m.q_len == 16384 && m.kv_len == 0 && m.heads == 64 && m.kv_heads == 1);
	ck_assert(m.mean_ms == 96.47487386067708);
	m = first_of(s, "h100-sxm", "vidur/profiling/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv", CAL_GEMM);
	ck_assert(m.m == 4096 && m.n == 12288 && m.k == 4096 && m.tp == 1);     /* attn_pre_proj */
	ck_assert(m.mean_ms == 0.5845499999999999 && m.min_ms == 0.579 && m.max_ms == 0.592);
	m = first_of(s, "h100-sxm", "vidur/profiling/network/h100_dgx/all_reduce.csv", -1);
	ck_assert(m.num_gpus == 8 && m.bytes == 2048 && m.mean_ms == 0.03);
	m = first_of(s, "a100-80gb-sxm", "vidur/profiling/legacy_attention/a100_attention_llama2-70b-shape_tp2.csv", -1);
	ck_assert(m.op == CAL_ATTN_DECODE && m.batch == 1 && m.kv_len == 33 && m.heads == 32 &&
		  m.kv_heads == 4 && m.head_dim == 128 && m.mean_ms == 0.015);
	m = first_of(s, "a100-80gb-sxm", "vidur/profiling/legacy_cpu_overheads/a100_cpu_overheads.csv", -1);
	ck_assert_str_eq(m.variant, "schedule:codellama/CodeLlama-34b-Instruct-hf");
	ck_assert(m.mean_ms == 0.19615835238558552 && m.batch == 8 && m.tp == 2);
	cal_store_close(s);
}
END_TEST

/* scripts/build-calibration.sh's inputs, relative to the profiles root. */
static const char *const compact_inputs[] = {
	"aiconfigurator/h100_sxm", "aiconfigurator/a100_sxm",
	"vidur/profiling/compute/h100", "vidur/profiling/compute/a100",
	"vidur/profiling/network/h100_dgx", "vidur/profiling/network/a100_dgx",
	"vidur/profiling/legacy_attention",
	"vidur/profiling/legacy_cpu_overheads/a100_cpu_overheads.csv",
};

static char *list_text(struct cal_store *s)
{
	struct ss_error err = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_int_eq(cal_store_list(s, f, &err), 0);
	fclose(f);
	return buf;
}

START_TEST(real_shipped_store_is_up_to_date)
{
	struct cal_store *s = open_store("compact.db", CAL_OPEN_CREATE), *shipped;
	const char *data = getenv("SERVESIM_DATA");
	struct cal_import_opts o;
	struct ss_error err = { 0 };
	char path[1200], *a, *b;

	cal_import_opts_compact(&o);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	for (size_t i = 0; i < sizeof(compact_inputs) / sizeof(compact_inputs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", profiles, compact_inputs[i]);
		ck_assert_msg(cal_import_path(s, path, CAL_IMPORT_AUTO, &o, NULL, &err) == 0, "%s", err.msg);
	}
	/* then the H100's per-tensor fp8 GEMMs (--compact --dtype fp8) */
	o.dtypes = "fp8";
	snprintf(path, sizeof(path), "%s/aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv", profiles);
	ck_assert_msg(cal_import_path(s, path, CAL_IMPORT_AUTO, &o, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	snprintf(path, sizeof(path), "%s/calibration.db", data);
	ck_assert_int_eq(cal_store_open(&shipped, path, CAL_OPEN_READONLY, &err), 0);
	a = list_text(s);
	b = list_text(shipped);
	ck_assert_msg(!strcmp(a, b), "data/calibration.db differs from a fresh build: run scripts/build-calibration.sh");
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), cal_store_count(shipped, NULL, -1, &err));
	free(a);
	free(b);
	cal_store_close(shipped);
	cal_store_close(s);
}
END_TEST

static Suite *excerpt_suite(void)
{
	Suite *s = suite_create("importers");
	TCase *tc = tcase_create("importers");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, aic_gemm_rows_field_by_field);
	tcase_add_test(tc, aic_gemm_dtype_filter);
	tcase_add_test(tc, aic_context_attention_has_no_prior_context);
	tcase_add_test(tc, aic_generation_attention_kv_len_is_step_plus_one);
	tcase_add_test(tc, aic_attention_window_and_kv_dtype_filters);
	tcase_add_test(tc, aic_nccl_bytes_from_elements);
	tcase_add_test(tc, aic_custom_allreduce_bytes_and_backend);
	tcase_add_test(tc, device_override_and_unknown_gpu);
	tcase_add_test(tc, gpu_names);
	tcase_add_test(tc, vidur_mlp_shapes_follow_tensor_parallelism);
	tcase_add_test(tc, vidur_mlp_phi2_layernorm_and_ungated_up_proj);
	tcase_add_test(tc, vidur_mlp_thinning_per_octave);
	tcase_add_test(tc, vidur_network_size_is_bytes_and_duplicates_merge);
	tcase_add_test(tc, vidur_legacy_attention_heads_per_gpu_and_kv_len);
	tcase_add_test(tc, vidur_cpu_overheads_one_row_per_part);
	tcase_add_test(tc, vidur_device_from_path_or_override);
	tcase_add_test(tc, detects_every_table_from_its_header);
	tcase_add_test(tc, forced_kind_must_match_the_header);
	tcase_add_test(tc, directory_walk_imports_known_tables_in_name_order);
	tcase_add_test(tc, too_many_fields);
	tcase_add_test(tc, too_few_fields_mid_file);
	tcase_add_test(tc, non_numeric_value);
	tcase_add_test(tc, negative_latency);
	tcase_add_test(tc, nul_byte_and_endless_line);
	tcase_add_test(tc, truncated_last_line);
	tcase_add_test(tc, missing_column);
	tcase_add_test(tc, line_numbers_with_crlf_and_blank_lines);
	tcase_add_test(tc, vidur_bad_rows);
	tcase_add_test(tc, failed_file_in_a_directory_rolls_back_the_whole_walk);
	tcase_add_test(tc, shipped_store_covers_h100_and_a100);
	suite_add_tcase(s, tc);
	return s;
}

static Suite *real_data_suite(void)
{
	Suite *s = suite_create("importers-real-data");
	TCase *tc = tcase_create("real-data");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, real_full_import_matches_provenance);
	tcase_add_test(tc, real_shipped_store_is_up_to_date);
	suite_add_tcase(s, tc);
	return s;
}

/* `test-importers` runs on excerpts; `test-importers real` imports the
 * shared tables and exits 77 (skipped) without them. */
int main(int argc, char **argv)
{
	bool real = argc > 1 && strcmp(argv[1], "real") == 0;
	SRunner *sr;
	int failed;

	if (real && !shared_present()) {
		fprintf(stderr, "SERVESIM_SHARED_DATA does not hold profiles/: skipped\n");
		return 77;
	}
	sr = srunner_create(real ? real_data_suite() : excerpt_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
