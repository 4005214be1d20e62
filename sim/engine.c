/* servesim — the discrete-event engine (see engine.h).
 *
 * Event kinds, in the order they fire at equal times:
 *   STEP_DONE  an instance's step completes: tokens are emitted, requests
 *              finish and release their KV blocks;
 *   ARRIVAL    the next request of the workload arrives and is routed;
 *   SCHEDULE   an idle instance asks its batch policy for the next step
 *              (after every completion and arrival at that instant, so
 *              simultaneous arrivals are batched together);
 *   SAMPLE     the time series is sampled.
 * Events are pre-allocated (one arrival, one sample, and one step and one
 * schedule event per instance), so the loop never allocates per event.
 */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "evq.h"
#include "executor.h"
#include "kvpool.h"
#include "rng.h"
#include "tseries.h"

enum ev_kind {
	EV_STEP_DONE = 0,
	EV_ARRIVAL = 1,
	EV_SCHEDULE = 2,
	EV_SAMPLE = 3,
	EV_XFER_DONE = 4,     /* a request's KV has reached its decode instance */
};

/* request.flags bits */
#define RF_PICKED 1u     /* taken from the waiting queue by the current plan */
#define RF_REMOVE 2u     /* leaving the running set */
/* Fixed cost of one swap transfer (a batch of cudaMemcpyAsync calls). */
#define SWAP_LATENCY_NS 20000
#define RF_LOOKED 4u
/* RDMA bandwidth per GPU when the catalog gives none: one 400 Gb/s NIC per
 * GPU, as in DGX H100 systems. */
#define DEFAULT_RDMA_BW 50e9     /* waiting, holding the blocks its prefix-cache lookup found */

enum pool_role { POOL_MIXED, POOL_PREFILL, POOL_DECODE };

/* Instances of one GPU type and tp, sized alike, sharing a cost model. */
struct pool {
	enum pool_role role;
	const struct gpu_spec *gpu;
	int tp;
	uint32_t first, n;        /* instances first .. first + n - 1 */
	uint32_t first_gpu;       /* placement: global index of its first GPU */
	int32_t kv_blocks;        /* per instance */
	double kv_bytes_per_block;/* whole instance */
	struct cost_model *cm;
	bool cm_borrowed;
	const struct executor_ops *xops;
	void *xpriv;
	bool xpriv_owned;
	int64_t host_blocks_cap;  /* swap space per instance, blocks */
	double pcie_bw;           /* bytes/s, whole instance */
	/* the router over this pool: --router for arrivals, --pairing for
	 * the decode pool */
	const struct router_ops *rops;
	void *router_priv;
};

/* A waiting request with its order key, for sorting. */
struct keyed {
	double key;
	struct req_view *v;
};

struct instance {
	uint32_t idx;
	struct pool *pl;
	/* KV transfers: requests paired here waiting for blocks (FIFO), and
	 * when this instance's link is next free in each direction */
	struct request **incoming;
	uint32_t in_head, n_incoming, cap_incoming;
	int64_t link_free_in, link_free_out;
	uint32_t n_migrating;     /* prefilled requests still holding blocks here */
	struct kvpool pool;
	/* Running set in admission order. */
	struct req_view **running;
	uint32_t n_running, cap_running;
	/* Waiting queue: wait[head .. head + n_wait). Room before head makes
	 * putting preempted requests back at the front O(1). */
	struct req_view **wait;
	uint32_t wait_head, n_wait, cap_wait;
	struct inst_view view;
	struct event ev_step, ev_sched;
	bool busy;
	void *batch_priv;
	void *order_priv;
	/* PCIe transfers (swap out/in) to charge to the next step */
	double xfer_bytes;
	uint32_t n_xfers;
	/* plan buffers */
	struct step_plan plan;
	/* the step in flight */
	struct request **fl_req;
	int32_t *fl_tokens;
	struct cost_item *fl_items;
	uint32_t n_fl, cap_fl_req, cap_fl_tokens, cap_fl_items;
	int64_t kv_mark_ns;       /* last time kv_block_ns was brought up to date */
	int64_t step_start_ns;    /* when the step in flight started */
	double step_power_w;      /* power of the step in flight, all tp GPUs, W */
	struct instance_stats *st;  /* = &engine.stats[idx] */
};

struct engine {
	struct engine_config cfg;
	const struct workload *wl;
	struct request *req;
	uint64_t n_req;
	uint64_t next_arrival;
	uint64_t n_done;          /* finished + rejected */
	int64_t now;
	struct evq q;
	struct event ev_arrival, ev_sample;

	struct instance *inst;
	struct instance_stats *stats;
	uint32_t n_inst;
	const struct inst_view **views;
	struct pool pools[2];     /* [0] mixed or prefill, [1] decode */
	uint32_t n_pools;
	bool semi_pd;             /* the two pools share GPUs (docs/disaggregation.md) */
	struct gpu_spec semi_gpu[2];
	int32_t max_model_len;

	const struct batch_policy_ops *bops;
	const struct order_ops *oops;
	const struct victim_ops *vops;
	const struct admission_ops *aops;
	void *adm_priv;
	struct keyed *sortbuf;    /* 2 x the longest waiting queue sorted */
	uint32_t cap_sortbuf;
	/* prefix caching */
	bool pc_on;
	int32_t pc_cap;           /* evictable cached blocks kept per instance, 0 = pool */
	/* swap preemption */
	bool swap;
	int64_t *host_used;       /* per instance */
	/* tenants */
	uint32_t n_tenants;
	int32_t *tenant_ids;
	double *tenant_service;
	int64_t service_window_ns;
	char predictor[64];
	gsl_rng *policy_rng;
	struct policy_host host;

	struct ss_hist itl;
	struct tseries ts;           /* bounded: coarsens itself (tseries.h) */

	engine_progress_fn progress;
	void *progress_ctx;
};

void engine_config_defaults(struct engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->tp = 1;
	cfg->n_instances = 1;
	cfg->block_size = 16;
	cfg->gpu_mem_util = 0.9;
	cfg->activation_reserve_bytes = -1;
	cfg->policy = "vllm";
	cfg->router = "rr";
	cfg->order = "fcfs";
	cfg->victim = "newest";
	cfg->admission = "none";
	cfg->preemption = "recompute";
	cfg->prefix_cache = "off";
	cfg->cost_model = "auto";
}

/* ---- services lent to policies (struct policy_host) --------------------- */

static double host_uniform(void *ctx)
{
	struct engine *e = ctx;

	return gsl_rng_uniform(e->policy_rng);
}

static int64_t host_prefill_ns(void *ctx, int32_t tokens)
{
	struct engine *e = ctx;
	struct cost_item it = { .tokens = tokens > 0 ? tokens : 1, .context = 0 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = it.tokens };
	struct cost_result res;

	cost_model_step(e->pools[0].cm, &st, &res);
	return res.duration_ns;
}

static int32_t host_prefix_hit(void *ctx, int32_t inst, const struct req_view *req);

/* ---- array helpers ------------------------------------------------------ */

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t c = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*arr, elem * c);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static void refresh_view(struct instance *in)
{
	in->view.free_blocks = in->pool.n_free;
	in->view.busy = in->busy;
	in->view.running = (const struct req_view *const *)in->running;
	in->view.n_running = in->n_running;
	in->view.waiting = (const struct req_view *const *)(in->wait + in->wait_head);
	in->view.n_waiting = in->n_wait;
}

static int wait_push_back(struct instance *in, struct req_view *v)
{
	if (in->wait_head + in->n_wait == in->cap_wait) {
		if (in->wait_head > in->cap_wait / 2) {
			memmove(in->wait, in->wait + in->wait_head, sizeof(*in->wait) * in->n_wait);
			in->wait_head = 0;
		} else if (grow((void **)&in->wait, &in->cap_wait, in->cap_wait + 1,
				sizeof(*in->wait))) {
			return -ENOMEM;
		}
	}
	in->wait[in->wait_head + in->n_wait++] = v;
	return 0;
}

static int wait_push_front(struct instance *in, struct req_view *v)
{
	if (in->wait_head == 0) {
		uint32_t gap = in->n_wait / 2 + 16;

		if (grow((void **)&in->wait, &in->cap_wait, in->n_wait + gap, sizeof(*in->wait)))
			return -ENOMEM;
		memmove(in->wait + gap, in->wait, sizeof(*in->wait) * in->n_wait);
		in->wait_head = gap;
	}
	in->wait[--in->wait_head] = v;
	in->n_wait++;
	return 0;
}

/* Remove the requests flagged RF_PICKED from the waiting queue.  Plans take
 * mostly from the front, so scan only until all n_picked are found and
 * advance the head past a picked prefix without moving anything. */
static void wait_remove_picked(struct instance *in, uint32_t n_picked)
{
	struct req_view **w = in->wait + in->wait_head;
	uint32_t rd = 0, wr, found = 0;

	while (rd < in->n_wait && found < n_picked && (request_of(w[rd])->flags & RF_PICKED)) {
		request_of(w[rd])->flags &= ~RF_PICKED;
		rd++;
		found++;
	}
	in->wait_head += rd;
	in->n_wait -= rd;
	w += rd;
	if (found == n_picked)
		return;
	for (rd = 0, wr = 0; rd < in->n_wait; rd++) {
		struct request *r = request_of(w[rd]);

		if (found < n_picked && (r->flags & RF_PICKED)) {
			r->flags &= ~RF_PICKED;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	in->n_wait = wr;
}

static void running_compact(struct instance *in)
{
	uint32_t wr = 0;

	for (uint32_t rd = 0; rd < in->n_running; rd++) {
		struct request *r = request_of(in->running[rd]);

		if (r->flags & RF_REMOVE) {
			r->flags &= ~RF_REMOVE;
			continue;
		}
		in->running[wr++] = in->running[rd];
	}
	in->n_running = wr;
}

/* ---- KV accounting ------------------------------------------------------ */

static void kv_mark(struct engine *e, struct instance *in)
{
	in->st->kv_block_ns += (double)kvpool_used(&in->pool) * (double)(e->now - in->kv_mark_ns);
	in->kv_mark_ns = e->now;
}

static void kv_release(struct engine *e, struct instance *in, struct request *r)
{
	kv_mark(e, in);
	kvpool_free(&in->pool, r->blocks, r->v.kv_blocks);
	r->v.kv_blocks = 0;
}

static int ensure_block_cap(struct instance *in, struct request *r, int32_t want);

static int kv_grow(struct engine *e, struct instance *in, struct request *r, int32_t need)
{
	int32_t want = r->v.kv_blocks + need;

	if (need == 0)
		return 0;
	if (ensure_block_cap(in, r, want))
		return -ENOMEM;
	kv_mark(e, in);
	if (kvpool_alloc(&in->pool, need, r->blocks + r->v.kv_blocks))
		return -ENOSPC;
	r->v.kv_blocks = want;
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	return 0;
}

/* ---- prefix cache (docs/kv-cache.md) ------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* KV blocks of r whose content the workload identifies: whole blocks
 * inside both the prompt and its prefix hashes. */
static int32_t hashable_blocks(const struct engine *e, const struct request *r)
{
	const struct wl_request *w = &e->wl->req[r->v.id];
	int64_t tokens = (int64_t)w->prefix_n * e->wl->hash_block_tokens;

	if (w->prefix_n == 0)
		return 0;
	if (tokens > r->v.prompt_tokens)
		tokens = r->v.prompt_tokens;
	return (int32_t)(tokens / e->cfg.block_size);
}

/* The hash of KV block k of r given the hash of block k-1 (0 for k = 0):
 * it chains the workload's hash of the prefix block holding block k's last
 * token with k's offset in it, so equal hashes mean equal tokens up to the
 * end of block k.  Never 0. */
static uint64_t block_hash(const struct engine *e, const struct request *r, int32_t k,
			   uint64_t prev)
{
	const struct wl_request *w = &e->wl->req[r->v.id];
	int64_t first = (int64_t)k * e->cfg.block_size;
	int64_t last = first + e->cfg.block_size - 1;
	uint32_t H = e->wl->hash_block_tokens;
	uint64_t word = e->wl->hashes[w->prefix_off + last / H];
	uint64_t h = mix64(prev ^ mix64((word << 32) | (uint64_t)(first % H)));

	return h ? h : 1;
}

/* Most blocks a lookup may find: whole hashable blocks, leaving at least
 * one prompt token to compute (its logits give the first output token). */
static int32_t max_hit_blocks(const struct engine *e, const struct request *r)
{
	int32_t n = hashable_blocks(e, r);
	int32_t cap = (r->v.prompt_tokens - 1) / e->cfg.block_size;

	return n < cap ? n : cap;
}

static int32_t host_prefix_hit(void *ctx, int32_t inst, const struct req_view *req)
{
	struct engine *e = ctx;
	const struct request *r = request_of(req);
	const struct kvpool *pool = &e->inst[inst].pool;
	int32_t n = e->pc_on ? max_hit_blocks(e, r) : 0, k;
	uint64_t h = 0;

	for (k = 0; k < n; k++) {
		h = block_hash(e, r, k, h);
		if (kvpool_lookup(pool, h) < 0)
			break;
	}
	return k * e->cfg.block_size;
}

static int ensure_block_cap(struct instance *in, struct request *r, int32_t want)
{
	int32_t cap;
	int32_t *b;

	if (want <= r->blocks_cap)
		return 0;
	/* Sized once for the request's whole life (prompt + output); the
	 * loop covers a policy that over-reserves. */
	cap = kvpool_blocks_for(&in->pool, (int64_t)r->v.prompt_tokens + r->output_tokens);
	if (cap < 1)
		cap = 1;
	while (cap < want)
		cap *= 2;
	b = realloc(r->blocks, sizeof(*b) * (size_t)cap);
	if (!b)
		return -ENOMEM;
	r->blocks = b;
	r->blocks_cap = cap;
	return 0;
}

/* A waiting request that holds nothing takes the cached blocks of its
 * longest cached prefix: they count as computed. */
static int prefix_lookup(struct engine *e, struct instance *in, struct request *r)
{
	int32_t n, k;
	uint64_t h = 0;

	if ((r->flags & RF_LOOKED) || r->v.computed_tokens > 0 || r->v.kv_blocks > 0 ||
	    r->v.host_blocks > 0)
		return 0;
	r->flags |= RF_LOOKED;
	n = max_hit_blocks(e, r);
	if (n > 0 && ensure_block_cap(in, r, n))
		return -ENOMEM;
	kv_mark(e, in);
	for (k = 0; k < n; k++) {
		uint64_t hk = block_hash(e, r, k, h);
		int32_t id = kvpool_lookup(&in->pool, hk);

		if (id < 0)
			break;
		kvpool_acquire(&in->pool, id);
		r->blocks[k] = id;
		h = hk;
	}
	r->v.kv_blocks = k;
	r->v.computed_tokens = k * e->cfg.block_size;
	r->v.cached_tokens = r->v.computed_tokens;
	r->hashed_blocks = k;
	r->hash_last = h;
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	return 0;
}

/* Register r's blocks that have become full of computed tokens. */
static void prefix_register(struct engine *e, struct instance *in, struct request *r)
{
	int32_t full = r->v.computed_tokens / e->cfg.block_size;
	int32_t n = hashable_blocks(e, r);

	if (full > n)
		full = n;
	if (full > r->v.kv_blocks)
		full = r->v.kv_blocks;
	while (r->hashed_blocks < full) {
		r->hash_last = block_hash(e, r, r->hashed_blocks, r->hash_last);
		kvpool_register(&in->pool, r->blocks[r->hashed_blocks], r->hash_last);
		r->hashed_blocks++;
	}
}

static void prefix_forget(struct request *r)
{
	r->flags &= ~RF_LOOKED;
	r->hashed_blocks = 0;
	r->hash_last = 0;
}

/* ---- request lifecycle -------------------------------------------------- */

static void reject(struct engine *e, struct request *r, const char *reason)
{
	r->v.state = REQ_REJECTED;
	r->reject_reason = reason;
	e->n_done++;
}

static void finish(struct engine *e, struct instance *in, struct request *r)
{
	r->finish_ns = e->now;
	r->v.state = REQ_FINISHED;
	kv_release(e, in, r);
	free(r->blocks);
	r->blocks = NULL;
	r->blocks_cap = 0;
	r->flags |= RF_REMOVE;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	e->n_done++;
}

static int push_schedule(struct engine *e, struct instance *in)
{
	if (in->busy || event_queued(&in->ev_sched))
		return 0;
	return evq_push(&e->q, &in->ev_sched, e->now);
}

static int arm_arrival(struct engine *e)
{
	if (e->next_arrival >= e->n_req)
		return 0;
	return evq_push(&e->q, &e->ev_arrival, e->req[e->next_arrival].v.arrival_ns);
}

static int on_arrival(struct engine *e, struct ss_error *err)
{
	struct request *r = &e->req[e->next_arrival++];
	const char *reason = NULL;
	struct instance *in;
	uint32_t pick;
	int rc;

	r->v.state = REQ_QUEUED;
	if ((int64_t)r->v.prompt_tokens + r->output_tokens > e->max_model_len) {
		reject(e, r, "prompt + output longer than the model's context length");
		return arm_arrival(e);
	}
	pick = e->pools[0].rops->route(e->pools[0].router_priv, &r->v, e->views, e->pools[0].n,
				       e->now, &e->host);
	if (pick >= e->pools[0].n)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "router %s returned instance %u of %u",
				    e->pools[0].rops->name, pick, e->pools[0].n);
	in = &e->inst[pick];
	r->instance = (int32_t)pick;
	/* The KV of the last output token is never written, hence -1.  A
	 * prefill instance holds the prompt's KV only. */
	if (kvpool_blocks_for(&in->pool, e->n_pools > 1 ? (int64_t)r->v.prompt_tokens :
			      (int64_t)r->v.prompt_tokens + r->output_tokens - 1) > in->pool.total) {
		reject(e, r, "needs more KV blocks than the instance has");
		return arm_arrival(e);
	}
	if (e->n_pools > 1 && r->output_tokens > 1 &&
	    (int64_t)kvpool_blocks_for(&in->pool, (int64_t)r->v.prompt_tokens + r->output_tokens - 1) >
	    e->pools[1].kv_blocks) {
		reject(e, r, "needs more KV blocks than a decode instance has");
		return arm_arrival(e);
	}
	if (e->bops->admissible && !e->bops->admissible(in->batch_priv, &r->v, &in->view, &reason)) {
		reject(e, r, reason ? reason : "not admissible under the batch policy");
		return arm_arrival(e);
	}
	if (e->aops->admit &&
	    !e->aops->admit(e->adm_priv, &r->v, &in->view, e->now, &e->host, &reason)) {
		reject(e, r, reason ? reason : "not admitted");
		return arm_arrival(e);
	}
	if (e->oops->enqueued)
		e->oops->enqueued(in->order_priv, &r->v, &in->view);
	rc = wait_push_back(in, &r->v);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory queueing a request");
	in->view.outstanding_tokens += r->v.prompt_tokens;
	in->view.outstanding_requests++;
	refresh_view(in);
	rc = push_schedule(e, in);
	if (!rc)
		rc = arm_arrival(e);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* ---- prefill/decode disaggregation (docs/disaggregation.md) -------------- */

/* Node of an instance's first GPU, or -1 when it spans nodes. */
static int64_t node_of(const struct engine *e, const struct instance *in)
{
	const struct pool *pl = in->pl;
	uint32_t g = pl->first_gpu + (in->idx - pl->first) * (uint32_t)pl->tp;
	uint32_t per = e->cfg.gpus_per_node > 0 ? (uint32_t)e->cfg.gpus_per_node : 8;

	if (g / per != (g + (uint32_t)pl->tp - 1) / per)
		return -1;
	return g / per;
}

/* Time to move `bytes` of KV from instance a to instance b: NVLink when
 * both sit in one node (same GPU type, neither spanning nodes), else RDMA;
 * each of min(tp_a, tp_b) GPU pairs carries a share in parallel. */
static int64_t link_ns(const struct engine *e, const struct instance *a, const struct instance *b,
		       double bytes)
{
	const struct gpu_spec *ga = a->pl->gpu, *gb = b->pl->gpu;
	int lanes = a->pl->tp < b->pl->tp ? a->pl->tp : b->pl->tp;
	int64_t na = node_of(e, a), nb = node_of(e, b);
	bool nvlink = ga == gb && na >= 0 && na == nb && ga->nvlink_bw > 0;
	double bw, lat_us;

	if (nvlink) {
		bw = ga->nvlink_bw;
		lat_us = ga->nvlink_latency_us > 0 ? ga->nvlink_latency_us : 5;
	} else {
		double ra = ga->rdma_bw > 0 ? ga->rdma_bw : DEFAULT_RDMA_BW;
		double rb = gb->rdma_bw > 0 ? gb->rdma_bw : DEFAULT_RDMA_BW;
		double la = ga->rdma_latency_us > 0 ? ga->rdma_latency_us : 10;
		double lb = gb->rdma_latency_us > 0 ? gb->rdma_latency_us : 10;

		bw = ra < rb ? ra : rb;
		lat_us = la > lb ? la : lb;
	}
	return (int64_t)(bytes / (bw * lanes) * 1e9 + lat_us * 1e3);
}

static int incoming_push(struct instance *d, struct request *r)
{
	if (d->in_head + d->n_incoming == d->cap_incoming) {
		if (d->in_head > 0) {
			memmove(d->incoming, d->incoming + d->in_head,
				sizeof(*d->incoming) * d->n_incoming);
			d->in_head = 0;
		} else if (grow((void **)&d->incoming, &d->cap_incoming, d->cap_incoming + 1,
				sizeof(*d->incoming))) {
			return -ENOMEM;
		}
	}
	d->incoming[d->in_head + d->n_incoming++] = r;
	return 0;
}

/* Start the transfers of requests paired with decode instance d, in the
 * order they were paired, while d has the blocks to receive them.  Each
 * transfer waits for both instances' links (one transfer at a time in each
 * direction: concurrent transfers queue). */
static int start_transfers(struct engine *e, struct instance *d)
{
	/* Received KV waits in the queue holding its blocks, where no policy
	 * can take them back.  So a transfer leaves a block for each running
	 * request to grow into, and none starts while a request this
	 * instance preempted waits to recompute: otherwise incoming KV can
	 * take every block freed for it, and it thrashes forever. */
	for (uint32_t k = 0; k < d->n_wait; k++) {
		const struct req_view *w = d->wait[d->wait_head + k];

		if (w->preemptions > 0 && w->kv_blocks == 0 && w->host_blocks == 0)
			return 0;
	}
	while (d->n_incoming > 0) {
		struct request *r = d->incoming[d->in_head];
		struct instance *p = &e->inst[r->prefill_instance];
		int32_t need = kvpool_blocks_for(&d->pool, r->v.computed_tokens);
		double bytes = (double)r->v.computed_tokens * model_kv_bytes_per_token(e->cfg.model);
		int64_t start = e->now, t, end;

		if (need + (int32_t)d->n_running > d->pool.n_free && d->n_running > 0)
			break;
		if (need > d->pool.n_free)
			break;
		r->xfer_blocks = malloc(sizeof(*r->xfer_blocks) * (size_t)(need ? need : 1));
		if (!r->xfer_blocks)
			return -ENOMEM;
		kv_mark(e, d);
		if (kvpool_alloc(&d->pool, need, r->xfer_blocks))
			return -ENOSPC;
		r->xfer_n = need;
		if (kvpool_used(&d->pool) > d->st->peak_used_blocks)
			d->st->peak_used_blocks = kvpool_used(&d->pool);
		d->in_head++;
		d->n_incoming--;
		if (p->link_free_out > start)
			start = p->link_free_out;
		if (d->link_free_in > start)
			start = d->link_free_in;
		t = e->semi_pd ? 0 : link_ns(e, p, d, bytes);   /* semi-PD: no copy */
		end = start + t;
		if (e->cfg.kv_overlap && start == r->handoff_ns) {
			/* Layer by layer: layers go as the prefill computes
			 * them, so only what outlasts the last step remains. */
			int L = e->cfg.model->n_layers;
			int64_t hidden = r->last_step_ns * (L - 1) / L;
			int64_t left = t - hidden > t / L ? t - hidden : t / L;

			end = start + left;
		}
		p->link_free_out = d->link_free_in = end;
		p->st->kv_transfers_out++;
		if (evq_push(&e->q, &r->ev_xfer, end))
			return -ENOMEM;
	}
	return 0;
}

/* r has finished its prefill on prefill instance p (its first token is
 * out): pair it with a decode instance and queue its KV transfer. */
static int handoff(struct engine *e, struct instance *p, struct request *r, struct ss_error *err)
{
	struct pool *dp = &e->pools[1];
	uint32_t pick;
	struct instance *d;

	r->flags |= RF_REMOVE;
	r->v.state = REQ_MIGRATING;
	r->handoff_ns = e->now;
	r->prefill_instance = (int32_t)p->idx;
	p->n_migrating++;
	p->view.outstanding_tokens -= req_total_tokens(&r->v);
	p->view.outstanding_requests--;
	if (e->semi_pd)   /* the decode half of the same GPU */
		pick = p->idx - e->pools[0].first;
	else
		pick = dp->rops->route(dp->router_priv, &r->v, e->views + dp->first, dp->n,
				       e->now, &e->host);
	if (pick >= dp->n)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "pairing router %s returned instance %u of %u",
				    dp->rops->name, pick, dp->n);
	d = &e->inst[dp->first + pick];
	r->instance = (int32_t)d->idx;
	d->view.outstanding_tokens += req_total_tokens(&r->v);
	d->view.outstanding_requests++;
	if (incoming_push(d, r) || start_transfers(e, d))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return 0;
}

/* r's KV has arrived: the prefill instance lets go of it, and r waits on
 * its decode instance holding the blocks it arrived in. */
static int on_xfer_done(struct engine *e, struct request *r)
{
	struct instance *p = &e->inst[r->prefill_instance];
	struct instance *d = &e->inst[r->instance];
	int rc;

	kv_release(e, p, r);
	p->n_migrating--;
	prefix_forget(r);
	free(r->blocks);
	r->blocks = r->xfer_blocks;
	r->blocks_cap = r->xfer_n;
	r->v.kv_blocks = r->xfer_n;
	r->xfer_blocks = NULL;
	r->xfer_n = 0;
	r->kv_xfer_ns = e->now - r->handoff_ns;
	r->v.state = REQ_QUEUED;
	if (e->oops->enqueued)
		e->oops->enqueued(d->order_priv, &r->v, &d->view);
	rc = wait_push_back(d, &r->v);
	refresh_view(d);
	refresh_view(p);
	if (!rc)
		rc = push_schedule(e, d);
	if (!rc)
		rc = push_schedule(e, p);
	return rc;
}

/* ---- steps ---------------------------------------------------------------- */

static int apply_preemptions(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;

	for (uint32_t k = 0; k < p->n_preempt; k++) {
		struct request *r = request_of(p->preempt[k]);

		if (r->v.state != REQ_RUNNING || r->instance != (int32_t)in->idx || (r->flags & RF_REMOVE))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s preempted request %u which is not running on instance %u",
					    e->bops->name, r->v.id, in->idx);
		if (e->swap && r->v.computed_tokens > 0 &&
		    e->host_used[in->idx] + r->v.kv_blocks <= in->pl->host_blocks_cap) {
			/* Swap: the KV goes to host memory over PCIe and
			 * comes back when the request resumes. */
			e->host_used[in->idx] += r->v.kv_blocks;
			r->v.host_blocks = r->v.kv_blocks;
			in->xfer_bytes += r->v.kv_blocks * in->pl->kv_bytes_per_block;
			in->n_xfers++;
			in->st->swap_outs++;
		} else {
			r->v.computed_tokens = 0;
		}
		kv_release(e, in, r);
		prefix_forget(r);
		r->v.state = REQ_QUEUED;
		r->v.preemptions++;
		r->flags |= RF_REMOVE;
		in->st->preemptions++;
	}
	running_compact(in);
	for (uint32_t k = 0; k < p->n_preempt; k++)
		if (wait_push_front(in, (struct req_view *)p->preempt[k]))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return 0;
}

/* Split a step's energy into prefill and decode work: prefill attention
 * to prefill, decode attention to decode, every other operator (GEMMs,
 * element-wise, LM head, collectives, host) by the two phases' shares of the
 * step's tokens; power is taken as uniform over the step.  Also tracks the
 * peak step power and the power the time series shows. */
static void account_energy(struct instance *in, const struct exec_result *xr,
			   int64_t prefill_tokens, int64_t total_tokens)
{
	double dur = (double)xr->duration_ns;
	double pf_time = (double)xr->op_ns[COST_OP_ATTN_PREFILL];
	double dec_time = (double)xr->op_ns[COST_OP_ATTN_DECODE];
	double shared = dur - pf_time - dec_time;
	double pf_share = total_tokens ? (double)prefill_tokens / (double)total_tokens : 0;
	double e_pf = xr->energy_j * (pf_time + shared * pf_share) / dur;

	in->st->prefill_energy_j += e_pf;
	in->st->decode_energy_j += xr->energy_j - e_pf;
	in->step_power_w = xr->energy_j / (dur / 1e9);
	if (in->step_power_w > in->st->peak_power_w)
		in->st->peak_power_w = in->step_power_w;
}

static int start_step(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	struct exec_result xr = { 0 };
	uint32_t n_picked = 0;
	int64_t prefill_tokens = 0;
	int rc;

	if (grow((void **)&in->fl_req, &in->cap_fl_req, p->n_items, sizeof(*in->fl_req)) ||
	    grow((void **)&in->fl_tokens, &in->cap_fl_tokens, p->n_items, sizeof(*in->fl_tokens)) ||
	    grow((void **)&in->fl_items, &in->cap_fl_items, p->n_items, sizeof(*in->fl_items)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");

	for (uint32_t k = 0; k < p->n_items; k++) {
		struct request *r = request_of(p->items[k].req);
		int32_t tokens = p->items[k].tokens;
		bool from_wait = r->v.state == REQ_QUEUED;

		if (r->instance != (int32_t)in->idx || (!from_wait && r->v.state != REQ_RUNNING) ||
		    (r->flags & RF_PICKED) || tokens < 1 || tokens > req_pending_tokens(&r->v))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s planned an invalid item (request %u, %d tokens)",
					    e->bops->name, r->v.id, tokens);
		rc = kv_grow(e, in, r, req_blocks_needed(&r->v, tokens, in->pool.block_size));
		if (rc)
			return ss_error_set(err, rc, NULL, 0,
					    "batch policy %s planned more KV blocks than free on instance %u",
					    e->bops->name, in->idx);
		if (r->v.host_blocks > 0) {
			/* swapped back in before the step runs */
			e->host_used[in->idx] -= r->v.host_blocks;
			in->xfer_bytes += r->v.host_blocks * in->pl->kv_bytes_per_block;
			in->n_xfers++;
			in->st->swap_ins++;
			r->v.host_blocks = 0;
		}
		if (from_wait && (r->flags & RF_LOOKED)) {
			r->flags &= ~RF_LOOKED;
			in->st->prefix_lookup_tokens += (uint64_t)r->v.prompt_tokens;
			in->st->prefix_hit_tokens += (uint64_t)r->v.cached_tokens;
		}
		{
			int32_t pf = r->v.prompt_tokens - r->v.computed_tokens;

			pf = pf < 0 ? 0 : pf > tokens ? tokens : pf;
			if (e->oops->served)
				e->oops->served(in->order_priv, &r->v, pf, tokens - pf);
		}
		if (e->next_arrival < e->n_req)
			e->tenant_service[r->v.tenant] += tokens;
		if (from_wait) {
			r->flags |= RF_PICKED;
			n_picked++;
			r->v.state = REQ_RUNNING;
			if (grow((void **)&in->running, &in->cap_running, in->n_running + 1,
				 sizeof(*in->running)))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			in->running[in->n_running++] = &r->v;
			if (r->first_sched_ns < 0)
				r->first_sched_ns = e->now;
		}
		in->fl_req[k] = r;
		in->fl_tokens[k] = tokens;
		in->fl_items[k] = (struct cost_item){ .tokens = tokens, .context = r->v.computed_tokens };
		xs.total_tokens += tokens;
		if (r->v.computed_tokens + tokens == req_total_tokens(&r->v))
			xs.n_emit++;
		if (tokens > 1 || r->v.generated_tokens == 0) {
			xs.n_prefill++;
			prefill_tokens += tokens;
		}
	}
	if (n_picked)
		wait_remove_picked(in, n_picked);
	in->n_fl = p->n_items;

	xs.n_items = p->n_items;
	xs.items = in->fl_items;
	xs.reqs = (const struct request *const *)in->fl_req;
	rc = in->pl->xops->run_step(in->pl->xpriv, &xs, &xr, err);
	if (rc)
		return rc;
	assert(xr.duration_ns > 0);
	if (in->n_xfers) {
		/* Swaps run over PCIe before the step's kernels (the GPU
		 * waits, drawing idle power): docs/policies.md. */
		int64_t t = (int64_t)(in->xfer_bytes / in->pl->pcie_bw * 1e9) +
			    (int64_t)in->n_xfers * SWAP_LATENCY_NS;

		xr.duration_ns += t;
		xr.energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)t / 1e9;
		in->st->swap_ns += t;
		in->xfer_bytes = 0;
		in->n_xfers = 0;
	}

	for (uint32_t k = 0; k < in->n_fl; k++)
		in->fl_req[k]->energy_j += xr.energy_j * (double)in->fl_tokens[k] /
					   (double)xs.total_tokens;
	account_energy(in, &xr, prefill_tokens, xs.total_tokens);
	in->st->steps++;
	in->st->busy_ns += xr.duration_ns;
	in->st->busy_energy_j += xr.energy_j;
	in->st->out_of_grid += xr.out_of_grid;
	in->st->out_of_grid_ns += xr.out_of_grid_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		in->st->op_ns[op] += xr.op_ns[op];
	ss_hist_add(&in->st->batch_seqs, in->n_fl);
	ss_hist_add(&in->st->batch_tokens, xs.total_tokens);
	in->busy = true;
	in->step_start_ns = e->now;
	refresh_view(in);
	rc = evq_push(&e->q, &in->ev_step, e->now + xr.duration_ns);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int ensure_plan_room(struct instance *in, uint32_t max_items)
{
	uint32_t cap;

	cap = in->plan.cap_items;
	if (grow((void **)&in->plan.items, &cap, in->n_running + max_items,
		 sizeof(*in->plan.items)))
		return -ENOMEM;
	in->plan.cap_items = cap;
	cap = in->plan.cap_preempt;
	if (grow((void **)&in->plan.preempt, &cap, in->n_running + 1, sizeof(*in->plan.preempt)))
		return -ENOMEM;
	in->plan.cap_preempt = cap;
	return 0;
}

/* ---- the waiting queue and running set before a step is formed ------------ */

/* Give back the blocks a waiting request's lookup pinned. */
static void prefix_unpin(struct engine *e, struct instance *in, struct request *r)
{
	if (!(r->flags & RF_LOOKED))
		return;
	kv_release(e, in, r);
	r->v.computed_tokens = 0;
	prefix_forget(r);
}

/* Take waiting request w[k] out of the queue and reject it. */
static void drop_waiting(struct engine *e, struct instance *in, uint32_t k, const char *reason)
{
	struct req_view **w = in->wait + in->wait_head;
	struct request *r = request_of(w[k]);

	prefix_unpin(e, in, r);
	if (r->v.kv_blocks > 0)
		kv_release(e, in, r);
	e->host_used[in->idx] -= r->v.host_blocks;
	r->v.host_blocks = 0;
	memmove(w + k, w + k + 1, sizeof(*w) * (in->n_wait - k - 1));
	in->n_wait--;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	reject(e, r, reason);
}

static bool keyed_before(const struct keyed *a, const struct keyed *b)
{
	if (a->key != b->key)
		return a->key < b->key;
	if (a->v->arrival_ns != b->v->arrival_ns)
		return a->v->arrival_ns < b->v->arrival_ns;
	return a->v->id < b->v->id;
}

/* Stable bottom-up merge sort of a[0..n) using tmp[0..n). */
static void sort_keyed(struct keyed *a, struct keyed *tmp, uint32_t n)
{
	for (uint32_t w = 1; w < n; w *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * w) {
			uint32_t mid = lo + w < n ? lo + w : n;
			uint32_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint32_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = keyed_before(&a[j], &a[i]) ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		memcpy(a, tmp, sizeof(*a) * n);
	}
}

/* Expire, order and look up the waiting queue; order the running set. */
static int prepare_queues(struct engine *e, struct instance *in, uint32_t lookups)
{
	struct req_view **w;
	uint32_t n;

	if (e->aops->expire) {
		for (uint32_t k = 0; k < in->n_wait;) {
			struct request *r = request_of(in->wait[in->wait_head + k]);
			const char *reason = NULL;

			if (r->v.preemptions == 0 && r->first_sched_ns < 0 &&
			    e->aops->expire(e->adm_priv, &r->v, e->now, &reason)) {
				drop_waiting(e, in, k, reason ? reason : "expired in the queue");
				continue;
			}
			k++;
		}
	}
	w = in->wait + in->wait_head;
	n = in->n_wait;
	if (e->oops->key && n > 1) {
		struct keyed *a;

		if (grow((void **)&e->sortbuf, &e->cap_sortbuf, 2 * n, sizeof(*e->sortbuf)))
			return -ENOMEM;
		a = e->sortbuf;
		uint32_t run = 1;

		for (uint32_t k = 0; k < n; k++)
			a[k] = (struct keyed){ e->oops->key(in->order_priv, w[k], e->now), w[k] };
		/* The queue was in order after the last step; usually only the
		 * requests that arrived since (at its end) are out of place:
		 * sort what follows the sorted head and merge the two. */
		while (run < n && !keyed_before(&a[run], &a[run - 1]))
			run++;
		if (run < n) {
			struct keyed *tmp = a + n;
			uint32_t i = 0, j = run, k = 0;

			sort_keyed(a + run, tmp, n - run);
			while (i < run && j < n)
				tmp[k++] = keyed_before(&a[j], &a[i]) ? a[j++] : a[i++];
			while (i < run)
				tmp[k++] = a[i++];
			while (j < n)
				tmp[k++] = a[j++];
			for (k = 0; k < n; k++)
				w[k] = tmp[k].v;
		}
	}
	if (e->vops->compare) {
		/* insertion sort: stable, and nearly sorted from step to step */
		for (uint32_t i = 1; i < in->n_running; i++) {
			struct req_view *v = in->running[i];
			uint32_t j = i;

			while (j > 0 && e->vops->compare(in->running[j - 1], v) > 0) {
				in->running[j] = in->running[j - 1];
				j--;
			}
			in->running[j] = v;
		}
	}
	if (e->pc_on) {
		uint32_t window = n < lookups ? n : lookups;

		for (uint32_t k = 0; k < window; k++)
			if (prefix_lookup(e, in, request_of(w[k])))
				return -ENOMEM;
		/* An order can move requests out of the window: they let go. */
		if (e->oops->key)
			for (uint32_t k = window; k < n; k++)
				prefix_unpin(e, in, request_of(w[k]));
	}
	return 0;
}

static int on_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	uint32_t max_items = e->bops->max_items(in->batch_priv);
	uint32_t lookups = max_items;  /* waiting requests that look up the prefix cache */
	int rc;

	if (in->busy)
		return 0;
	for (;;) {
		if (ensure_plan_room(in, max_items) || prepare_queues(e, in, lookups))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		in->plan.n_items = 0;
		in->plan.n_preempt = 0;
		refresh_view(in);
		e->bops->pick_step(in->batch_priv, &in->view, e->now, &e->host, &in->plan);
		assert(in->plan.n_items <= in->plan.cap_items);
		assert(in->plan.n_preempt <= in->plan.cap_preempt);
		if (in->plan.n_preempt) {
			rc = apply_preemptions(e, in, err);
			if (rc)
				return rc;
		}
		if (in->plan.n_items)
			return start_step(e, in, err);
		if (in->plan.n_preempt)
			continue;
		if (in->n_running > 0)
			/* nothing would ever wake this instance again */
			return ss_error_set(err, -EPROTO, NULL, 0,
					    "batch policy %s formed no step with %u requests running on instance %u",
					    e->bops->name, in->n_running, in->idx);
		if (in->n_wait > 0 && in->n_migrating == 0) {
			/* An idle, empty instance that cannot start its head
			 * request never will (unless KV on its way to decode
			 * instances will free blocks): reject it rather than hang --
			 * once the others have let go of the cached blocks
			 * they hold, which could be what is in its way. */
			bool unpinned = false;

			for (uint32_t k = 1; k < in->n_wait; k++) {
				struct request *r = request_of(in->wait[in->wait_head + k]);

				if (r->flags & RF_LOOKED) {
					prefix_unpin(e, in, r);
					unpinned = true;
				}
			}
			if (unpinned) {
				lookups = 1;
				continue;
			}
			drop_waiting(e, in, 0, "could not be scheduled on an idle instance");
			lookups = max_items;
			continue;
		}
		refresh_view(in);
		/* An idle decode instance: transfers paused for a waiting
		 * request that has since left may start now. */
		if (in->pl->role == POOL_DECODE && in->n_running == 0 && start_transfers(e, in))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		return 0;
	}
}

static int on_step_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	int rc;

	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];

		r->last_step_ns = e->now - in->step_start_ns;
		r->v.computed_tokens += in->fl_tokens[k];
		if (e->pc_on)
			prefix_register(e, in, r);
		if (r->v.computed_tokens < req_total_tokens(&r->v))
			continue;
		/* All known tokens are in the KV cache: one output token. */
		r->v.generated_tokens++;
		in->view.outstanding_tokens++;
		if (r->first_token_ns < 0)
			r->first_token_ns = e->now;
		else {
			ss_hist_add(&e->itl, e->now - r->last_token_ns);
			if (e->now - r->last_token_ns > r->max_gap_ns)
				r->max_gap_ns = e->now - r->last_token_ns;
		}
		r->last_token_ns = e->now;
		if (r->v.generated_tokens >= r->output_tokens) {
			finish(e, in, r);
		} else if (in->pl->role == POOL_PREFILL) {
			rc = handoff(e, in, r, err);
			if (rc)
				return rc;
		}
	}
	in->n_fl = 0;
	running_compact(in);
	in->busy = false;
	refresh_view(in);
	if (in->pl->role == POOL_DECODE && start_transfers(e, in))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int on_sample(struct engine *e)
{
	struct ts_sample *slot;

	if (!e->ts.max_times)
		tseries_init(&e->ts, e->n_inst, e->cfg.sample_interval_ns, 0);
	slot = tseries_append(&e->ts);
	if (!slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];

		slot[i] = (struct ts_sample){
			.t_ns = e->now,
			.instance = (int32_t)i,
			.queued = (int32_t)in->n_wait,
			.running = (int32_t)in->n_running,
			.kv_used_blocks = kvpool_used(&in->pool),
			.power_w = in->busy ? in->step_power_w : in->pl->gpu->idle_w * in->pl->tp,
		};
	}
	if (e->n_done < e->n_req)
		return evq_push(&e->q, &e->ev_sample, e->now + e->ts.interval_ns);
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

/* Per-GPU memory held back from the KV cache for activations, CUDA graphs,
 * the CUDA context and NCCL buffers (docs/kv-cache.md): 1 GiB fixed plus the
 * activations of an 8192-token step and the fp32 logits of 256 sequences. */
static double estimate_reserve(const struct model_spec *m, int tp)
{
	double act = 8192.0 * (4.0 * m->hidden + 2.0 * m->intermediate / tp) * m->dtype_bytes;
	double logits = 256.0 * m->vocab / tp * 4.0;

	return 1024.0 * 1024 * 1024 + act + logits;
}

int engine_kv_capacity(const struct engine_config *c, int32_t *blocks_out, struct ss_error *err)
{
	const struct model_spec *m = c->model;
	double reserve = c->activation_reserve_bytes >= 0 ? c->activation_reserve_bytes
							   : estimate_reserve(m, c->tp);
	double weights = model_weight_bytes(m) / c->tp;
	double avail = c->gpu->hbm_bytes * c->gpu_mem_util - weights - reserve;
	/* KV heads are split across the tp GPUs, replicated when fewer than tp. */
	int kv_heads_per_gpu = m->n_kv_heads >= c->tp ? m->n_kv_heads / c->tp : 1;
	double per_token_gpu = 2.0 * m->n_layers * kv_heads_per_gpu * m->head_dim * m->dtype_bytes;
	double blocks;

	if (c->kv_blocks_override > 0) {
		*blocks_out = (int32_t)c->kv_blocks_override;
		return 0;
	}
	blocks = floor(avail / (per_token_gpu * c->block_size));
	if (blocks < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s does not fit on %d x %s: %.1f GiB of weights and %.1f GiB reserved per GPU exceed %.0f%% of %.1f GiB; use more --tp or a larger GPU",
				    m->name, c->tp, c->gpu->name, weights / 1073741824.0,
				    reserve / 1073741824.0, c->gpu_mem_util * 100,
				    c->gpu->hbm_bytes / 1073741824.0);
	*blocks_out = blocks > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)blocks;
	return 0;
}

/* The pools: one colocated pool, or a prefill and a decode pool placed one
 * after the other on nodes of gpus_per_node GPUs; each sized for its GPU
 * and tp. */
static int make_pools(struct engine *e, struct ss_error *err)
{
	const struct engine_config *c = &e->cfg;
	uint32_t gpu = 0, inst = 0;

	if (c->semi_pd_sm > 0) {
		/* Semi-PD: each GPU's compute (SMs), power and price split
		 * between its prefill and its decode instance; both see the
		 * whole memory bandwidth (contention between them is not
		 * modelled: optimistic when both are memory-bound at once). */
		double f[2] = { c->semi_pd_sm, 1 - c->semi_pd_sm };
		double kv = c->semi_pd_kv > 0 ? c->semi_pd_kv : 0.25;
		int32_t blocks;
		int rc;

		if (!(c->semi_pd_sm < 1) || !(kv < 1) || c->n_prefill || c->n_decode)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--semi-pd: expected 0 < sm < 1 and 0 < kv < 1, without --prefill-instances/--decode-instances");
		rc = engine_kv_capacity(c, &blocks, err);
		if (rc)
			return rc;
		for (int k = 0; k < 2; k++) {
			struct gpu_spec *g = &e->semi_gpu[k];

			*g = *c->gpu;
			snprintf(g->name, sizeof(g->name), "%.40s/%s", c->gpu->name,
				 k ? "decode" : "prefill");
			g->bf16_flops *= f[k];
			g->tdp_w *= f[k];
			g->idle_w *= f[k];
			g->cost_per_hour *= f[k];
			e->pools[k] = (struct pool){ .role = k ? POOL_DECODE : POOL_PREFILL,
						     .n = c->n_instances, .gpu = g, .tp = c->tp,
						     .first = k ? c->n_instances : 0 };
			e->pools[k].kv_blocks = (int32_t)(blocks * (k ? 1 - kv : kv));
			e->pools[k].kv_bytes_per_block = model_kv_bytes_per_token(c->model) *
							 c->block_size;
			if (e->pools[k].kv_blocks < 1)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--semi-pd: kv=%g leaves a pool without KV blocks", kv);
		}
		e->semi_pd = true;
		e->n_pools = 2;
		e->n_inst = 2 * c->n_instances;
		return 0;
	}
	if (c->n_prefill > 0 && c->n_decode > 0) {
		e->n_pools = 2;
		e->pools[0] = (struct pool){ .role = POOL_PREFILL, .n = c->n_prefill,
					     .gpu = c->prefill_gpu ? c->prefill_gpu : c->gpu,
					     .tp = c->prefill_tp > 0 ? c->prefill_tp : c->tp };
		e->pools[1] = (struct pool){ .role = POOL_DECODE, .n = c->n_decode,
					     .gpu = c->decode_gpu ? c->decode_gpu : c->gpu,
					     .tp = c->decode_tp > 0 ? c->decode_tp : c->tp };
	} else if (c->n_prefill > 0 || c->n_decode > 0) {
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--prefill-instances and --decode-instances: expected both (disaggregated) or neither, got %u and %u",
				    c->n_prefill, c->n_decode);
	} else {
		e->n_pools = 1;
		e->pools[0] = (struct pool){ .role = POOL_MIXED, .n = c->n_instances,
					     .gpu = c->gpu, .tp = c->tp };
	}
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		struct engine_config pc = *c;
		int rc;

		if (pl->tp < 1 || pl->tp > 64)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected 1..64 GPUs per instance, got %d",
					    pl->role == POOL_DECODE ? "--decode-tp" :
					    pl->role == POOL_PREFILL ? "--prefill-tp" : "--tp", pl->tp);
		if (pl->n < 1 || pl->n > 100000)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "expected 1..100000 instances per pool, got %u", pl->n);
		pl->first = inst;
		pl->first_gpu = gpu;
		inst += pl->n;
		gpu += pl->n * (uint32_t)pl->tp;
		pc.gpu = pl->gpu;
		pc.tp = pl->tp;
		pl->kv_bytes_per_block = model_kv_bytes_per_token(c->model) * c->block_size;
		rc = engine_kv_capacity(&pc, &pl->kv_blocks, err);
		if (rc)
			return rc;
	}
	e->n_inst = inst;
	return 0;
}

static int validate(const struct engine_config *c, struct ss_error *err)
{
	if (!c->model || !c->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "a model and a GPU are required");
	if (c->tp < 1 || c->tp > 64)
		return ss_error_set(err, -EINVAL, NULL, 0, "--tp: expected 1..64, got %d", c->tp);
	if (c->n_instances < 1 || c->n_instances > 100000)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--instances: expected 1..100000, got %u", c->n_instances);
	if (c->block_size < 1 || c->block_size > 4096)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--block-size: expected 1..4096 tokens, got %d", c->block_size);
	if (!(c->gpu_mem_util > 0 && c->gpu_mem_util <= 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-memory-utilization: expected a fraction in (0, 1], got %g",
				    c->gpu_mem_util);
	if (c->sample_interval_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0, "sample interval must be >= 0");
	return 0;
}

static int make_policies(struct engine *e, struct ss_error *err)
{
	struct ss_params p;
	int rc;

	rc = ss_params_parse(&p, "--policy", e->cfg.policy, true, err);
	if (rc)
		return rc;
	e->bops = batch_policy_find(p.name);
	if (!e->bops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy: unknown batch policy '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->bops->version == POLICY_VERSION && e->bops->pick_step && e->bops->max_items);
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct ss_params pi = p;

		e->inst[i].batch_priv = calloc(1, e->bops->priv_size ? e->bops->priv_size : 1);
		if (!e->inst[i].batch_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = e->bops->init ? e->bops->init(e->inst[i].batch_priv, &pi, err) : 0;
		if (!rc)
			rc = ss_params_check_unused(&pi, err);
		if (rc)
			return rc;
	}

	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		const char *opt = pl->role == POOL_DECODE ? "--pairing" : "--router";
		const char *spec = pl->role == POOL_DECODE ? e->cfg.pairing : e->cfg.router;

		rc = ss_params_parse(&p, opt, spec ? spec : "lor", true, err);
		if (rc)
			return rc;
		pl->rops = router_find(p.name);
		if (!pl->rops)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: unknown router '%s' (see `servesim list policies`)",
					    opt, p.name);
		assert(pl->rops->version == POLICY_VERSION && pl->rops->route);
		pl->router_priv = calloc(1, pl->rops->priv_size ? pl->rops->priv_size : 1);
		if (!pl->router_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = pl->rops->init ? pl->rops->init(pl->router_priv, &p, pl->n, err) : 0;
		if (!rc)
			rc = ss_params_check_unused(&p, err);
		if (rc)
			return rc;
	}

	rc = ss_params_parse(&p, "--order", e->cfg.order, true, err);
	if (rc)
		return rc;
	e->oops = order_find(p.name);
	if (!e->oops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--order: unknown queue order '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->oops->version == POLICY_VERSION);
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct ss_params pi = p;

		e->inst[i].order_priv = calloc(1, e->oops->priv_size ? e->oops->priv_size : 1);
		if (!e->inst[i].order_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = e->oops->init ? e->oops->init(e->inst[i].order_priv, &pi, e->n_tenants, err) : 0;
		if (!rc)
			rc = ss_params_check_unused(&pi, err);
		if (rc)
			return rc;
	}

	rc = ss_params_parse(&p, "--victim", e->cfg.victim, true, err);
	if (rc)
		return rc;
	e->vops = victim_find(p.name);
	if (!e->vops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--victim: unknown victim order '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->vops->version == POLICY_VERSION);
	rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;

	rc = ss_params_parse(&p, "--admission", e->cfg.admission, true, err);
	if (rc)
		return rc;
	e->aops = admission_find(p.name);
	if (!e->aops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission: unknown admission policy '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->aops->version == POLICY_VERSION);
	e->adm_priv = calloc(1, e->aops->priv_size ? e->aops->priv_size : 1);
	if (!e->adm_priv)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = e->aops->init ? e->aops->init(e->adm_priv, &p, err) : 0;
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

/* --prefix-cache off | on | blocks=N */
static int parse_prefix_cache(struct engine *e, struct ss_error *err)
{
	const char *s = e->cfg.prefix_cache ? e->cfg.prefix_cache : "off";
	int64_t n;

	if (!strcmp(s, "off"))
		return 0;
	e->pc_on = true;
	if (!strcmp(s, "on"))
		return 0;
	if (!strncmp(s, "blocks=", 7) && ss_parse_int64(s + 7, &n) && n >= 1 && n <= INT32_MAX) {
		e->pc_cap = (int32_t)n;
		return 0;
	}
	return ss_error_set(err, -EINVAL, NULL, 0,
			    "--prefix-cache: expected off, on or blocks=N (N >= 1), got '%s'", s);
}

/* --preemption recompute | swap[:host_gb=G,pcie_gbps=B] */
static int parse_preemption(struct engine *e, struct ss_error *err)
{
	struct ss_params p;
	double host_gb, bw;
	int rc;

	rc = ss_params_parse(&p, "--preemption", e->cfg.preemption ? e->cfg.preemption : "recompute",
			     true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "recompute"))
		return ss_params_check_unused(&p, err);
	if (strcmp(p.name, "swap"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--preemption: expected recompute or swap[:host_gb=G,pcie_gbps=B], got '%s'",
				    p.name);
	/* vLLM's default swap space is 4 GiB per GPU; 0 = the catalog's PCIe */
	rc = ss_params_double(&p, "host_gb", 4.0 * 1.073741824, &host_gb, err);
	if (!rc)
		rc = ss_params_double(&p, "pcie_gbps", ss_params_has(&p, "pcie_gbps") ? 0 : 1, &bw, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	if (!(host_gb >= 0 && host_gb < 1e6) || !(bw > 0 && bw < 1e6))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--preemption swap: expected 0 <= host_gb < 1e6 and 0 < pcie_gbps < 1e6, got %g and %g",
				    host_gb, bw);
	e->swap = true;
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		double per_gpu = ss_params_has(&p, "pcie_gbps") ? bw * 1e9 : pl->gpu->pcie_bw;

		pl->host_blocks_cap = (int64_t)(host_gb * 1e9 * pl->tp / pl->kv_bytes_per_block);
		/* each of the tp GPUs moves its shard over its own link */
		pl->pcie_bw = per_gpu * pl->tp;
	}
	return 0;
}

/* Output-length predictions (req_view.predicted_output) from their own
 * random stream: the truth, or the truth times exp(N(0, sigma^2)). */
static int make_predictions(struct engine *e, struct ss_error *err)
{
	const char *spec = e->cfg.predictor;
	struct ss_params p;
	double sigma = 0;
	gsl_rng *rng;
	int rc;

	if (!spec)
		spec = !strcmp(e->oops->name, "sjf") ? "oracle" : "none";
	rc = ss_params_parse(&p, "--predictor", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "none") || !strcmp(p.name, "oracle")) {
		rc = ss_params_check_unused(&p, err);
	} else if (!strcmp(p.name, "noisy")) {
		rc = ss_params_double(&p, "sigma", 0.5, &sigma, err);
		if (!rc)
			rc = ss_params_check_unused(&p, err);
		if (!rc && !(sigma >= 0 && sigma <= 10))
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--predictor noisy: expected 0 <= sigma <= 10, got %g", sigma);
	} else {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--predictor: expected none, oracle or noisy[:sigma=S], got '%s'",
				  p.name);
	}
	if (rc)
		return rc;
	if (!strcmp(p.name, "noisy"))
		snprintf(e->predictor, sizeof(e->predictor), "noisy:sigma=%g", sigma);
	else
		snprintf(e->predictor, sizeof(e->predictor), "%s", p.name);
	if (!strcmp(p.name, "none"))
		return 0;
	rng = ss_rng_new(e->cfg.seed, SS_RNG_PREDICTOR);
	if (!rng)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint64_t i = 0; i < e->n_req; i++) {
		struct request *r = &e->req[i];
		double v = sigma > 0 ? r->output_tokens * exp(gsl_ran_gaussian(rng, sigma))
				     : r->output_tokens;

		r->v.predicted_output = v < 1 ? 1 : v > 1e9 ? 1000000000 : (int32_t)lround(v);
	}
	gsl_rng_free(rng);
	return 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Tenants as dense indices 0..n-1 in order of their source ids. */
static int map_tenants(struct engine *e, struct ss_error *err)
{
	int32_t *ids = malloc(sizeof(*ids) * (e->n_req ? e->n_req : 1));
	uint32_t n = 0;

	if (!ids)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint64_t i = 0; i < e->n_req; i++)
		ids[i] = e->wl->req[i].tenant;
	qsort(ids, e->n_req, sizeof(*ids), cmp_i32);
	for (uint64_t i = 0; i < e->n_req; i++)
		if (n == 0 || ids[i] != ids[n - 1])
			ids[n++] = ids[i];
	if (n == 0)
		ids[n++] = 0;
	e->tenant_ids = ids;
	e->n_tenants = n;
	e->tenant_service = calloc(n, sizeof(*e->tenant_service));
	if (!e->tenant_service)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint64_t i = 0; i < e->n_req; i++) {
		int32_t *t = bsearch(&e->wl->req[i].tenant, ids, n, sizeof(*ids), cmp_i32);

		e->req[i].v.tenant = (int32_t)(t - ids);
		e->req[i].tenant_id = *t;
	}
	if (e->n_req > 0)
		e->service_window_ns = e->wl->req[e->n_req - 1].arrival_ns - e->wl->req[0].arrival_ns;
	return 0;
}

int engine_new(struct engine **out, const struct engine_config *cfg,
	       const struct workload *wl, struct ss_error *err)
{
	struct engine *e;
	int rc;

	*out = NULL;
	rc = validate(cfg, err);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e->cfg = *cfg;
	e->wl = wl;
	e->max_model_len = cfg->model->max_context;
	ss_hist_init(&e->itl);
	event_init(&e->ev_arrival, EV_ARRIVAL, EV_ARRIVAL, 0);
	event_init(&e->ev_sample, EV_SAMPLE, EV_SAMPLE, 0);

	rc = make_pools(e, err);
	if (rc)
		goto fail;
	if (cfg->executor && e->n_pools > 1) {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "live runs use one instance: expected no --prefill-instances/--decode-instances");
		goto fail;
	}
	for (size_t i = 1; i < wl->n; i++)
		if (wl->req[i].arrival_ns < wl->req[i - 1].arrival_ns) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "workload request %zu arrives before request %zu: expected arrivals in time order",
					  i, i - 1);
			goto fail;
		}
	rc = -ENOMEM;
	e->n_req = wl->n;
	e->req = calloc(e->n_req ? e->n_req : 1, sizeof(*e->req));
	e->inst = calloc(e->n_inst, sizeof(*e->inst));
	e->views = calloc(e->n_inst, sizeof(*e->views));
	e->stats = calloc(e->n_inst, sizeof(*e->stats));
	e->policy_rng = ss_rng_new(cfg->seed, SS_RNG_POLICY);
	if (!e->req || !e->inst || !e->views || !e->stats || !e->policy_rng ||
	    evq_init(&e->q, 2 * e->n_inst + 4 + (e->n_pools > 1 ? 1024 : 0))) {
		ss_error_set(err, rc, NULL, 0, "out of memory");
		goto fail;
	}
	e->host = (struct policy_host){
		.ctx = e, .uniform = host_uniform, .prefix_hit = host_prefix_hit,
		.prefill_ns = host_prefill_ns, .slo_ttft_ns = cfg->slo_ttft_ns,
	};
	e->host_used = calloc(e->n_inst, sizeof(*e->host_used));
	if (!e->host_used) {
		ss_error_set(err, rc, NULL, 0, "out of memory");
		goto fail;
	}
	rc = parse_prefix_cache(e, err);
	if (!rc)
		rc = parse_preemption(e, err);
	if (rc)
		goto fail;
	rc = -ENOMEM;
	for (uint64_t i = 0; i < e->n_req; i++) {
		const struct wl_request *w = &wl->req[i];
		struct request *r = &e->req[i];

		r->v = (struct req_view){
			.id = (uint32_t)i,
			.tenant = w->tenant,
			.priority = w->priority,
			.arrival_ns = w->arrival_ns,
			.prompt_tokens = w->prompt_tokens,
			.predicted_output = -1,
			.state = REQ_PENDING,
		};
		r->output_tokens = w->output_tokens;
		r->instance = -1;
		r->prefill_instance = -1;
		r->kv_xfer_ns = -1;
		event_init(&r->ev_xfer, EV_XFER_DONE, EV_XFER_DONE, (uint32_t)i);
		r->first_sched_ns = r->first_token_ns = r->last_token_ns = r->finish_ns = -1;
	}
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];
		struct pool *pl = &e->pools[e->n_pools > 1 && i >= e->pools[1].first];

		in->idx = i;
		in->pl = pl;
		in->st = &e->stats[i];
		if (kvpool_init(&in->pool, pl->kv_blocks, cfg->block_size) ||
		    (e->pc_on && kvpool_enable_cache(&in->pool, e->pc_cap))) {
			ss_error_set(err, rc, NULL, 0, "out of memory for %d KV blocks", pl->kv_blocks);
			goto fail;
		}
		/* semi-PD: the prefill half counts the GPU, the decode half not */
		in->st->gpus = e->semi_pd && pl->role == POOL_DECODE ? 0 : pl->tp;
		in->st->idle_power_w = pl->gpu->idle_w * pl->tp;
		in->st->cost_per_hour = pl->gpu->cost_per_hour * pl->tp;
		in->st->role = pl->role == POOL_PREFILL ? "prefill" :
			       pl->role == POOL_DECODE ? "decode" : "mixed";
		event_init(&in->ev_step, EV_STEP_DONE, EV_STEP_DONE, i);
		event_init(&in->ev_sched, EV_SCHEDULE, EV_SCHEDULE, i);
		in->view.id = (int32_t)i;
		in->view.block_size = cfg->block_size;
		in->view.total_blocks = pl->kv_blocks;
		in->view.max_model_len = e->max_model_len;
		in->st->total_blocks = pl->kv_blocks;
		ss_hist_init(&in->st->batch_seqs);
		ss_hist_init(&in->st->batch_tokens);
		refresh_view(in);
		e->views[i] = &in->view;
	}
	rc = map_tenants(e, err);
	if (rc)
		goto fail;
	e->host.n_tenants = e->n_tenants;
	rc = make_policies(e, err);
	if (!rc)
		rc = make_predictions(e, err);
	if (rc)
		goto fail;
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		struct cost_config cc = {
			.model = cfg->model, .gpu = pl->gpu, .tp = pl->tp,
			.stores = cfg->stores, .n_stores = cfg->n_stores,
			.power_cap_w = cfg->power_cap_w, .clock_frac = cfg->clock_frac,
		};

		if (cfg->cost_models[k]) {
			pl->cm = cfg->cost_models[k];
			pl->cm_borrowed = true;
		} else {
			rc = cost_model_new(&pl->cm, cfg->cost_model, &cc, err);
			if (rc)
				goto fail;
		}
		if (cfg->executor) {
			/* the caller's executor (live): its state is the caller's */
			pl->xops = cfg->executor;
			pl->xpriv = cfg->exec_priv;
			pl->xpriv_owned = false;
			continue;
		}
		pl->xops = &executor_model_ops;
		pl->xpriv = calloc(1, pl->xops->priv_size);
		pl->xpriv_owned = true;
		if (!pl->xpriv) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
		rc = pl->xops->init(pl->xpriv, pl->cm, err);
		if (rc)
			goto fail;
	}
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	if (e->inst) {
		for (uint32_t i = 0; i < e->n_inst; i++) {
			struct instance *in = &e->inst[i];

			kvpool_release(&in->pool);
			free(in->running);
			free(in->wait);
			free(in->batch_priv);
			free(in->order_priv);
			free(in->plan.items);
			free(in->plan.preempt);
			free(in->fl_req);
			free(in->fl_tokens);
			free(in->fl_items);
			free(in->incoming);
		}
	}
	for (uint64_t i = 0; e->req && i < e->n_req; i++) {
		free(e->req[i].blocks);
		free(e->req[i].xfer_blocks);
	}
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];

		if (pl->xpriv_owned) {
			if (pl->xops && pl->xops->release && pl->xpriv)
				pl->xops->release(pl->xpriv);
			free(pl->xpriv);
		}
		if (!pl->cm_borrowed)
			cost_model_free(pl->cm);
		free(pl->router_priv);
	}
	free(e->adm_priv);
	free(e->sortbuf);
	free(e->host_used);
	free(e->tenant_ids);
	free(e->tenant_service);
	if (e->policy_rng)
		gsl_rng_free(e->policy_rng);
	evq_release(&e->q);
	free(e->views);
	free(e->stats);
	free(e->inst);
	free(e->req);
	tseries_release(&e->ts);
	free(e);
}

void engine_set_progress(struct engine *e, engine_progress_fn fn, void *ctx)
{
	e->progress = fn;
	e->progress_ctx = ctx;
}

int engine_run(struct engine *e, struct ss_error *err)
{
	struct event *ev;
	uint64_t n_events = 0;
	int rc = arm_arrival(e);

	if (!rc && e->cfg.sample_interval_ns > 0 && e->n_req > 0)
		rc = evq_push(&e->q, &e->ev_sample, 0);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	while ((ev = evq_pop(&e->q))) {
		if (e->cfg.clock) {
			/* Live: wait for the event's time; an event that came
			 * due while a step ran is handled now, late, in the
			 * same order as in simulation.  Time never goes back. */
			const struct engine_clock *c = e->cfg.clock;
			int64_t wall = c->now(c->ctx);

			if (wall < ev->time_ns) {
				c->sleep_until(c->ctx, ev->time_ns);
				wall = c->now(c->ctx);
			}
			if (wall > e->now)
				e->now = wall;
		} else {
			assert(ev->time_ns >= e->now);
			e->now = ev->time_ns;
		}
		switch (ev->kind) {
		case EV_STEP_DONE:
			rc = on_step_done(e, &e->inst[ev->target], err);
			break;
		case EV_XFER_DONE:
			rc = on_xfer_done(e, &e->req[ev->target]);
			break;
		case EV_ARRIVAL:
			rc = on_arrival(e, err);
			break;
		case EV_SCHEDULE:
			rc = on_schedule(e, &e->inst[ev->target], err);
			break;
		case EV_SAMPLE:
			rc = on_sample(e);
			break;
		default:
			assert(!"unknown event kind");
		}
		if (rc)
			return err && err->code ? rc : ss_error_set(err, rc, NULL, 0, "out of memory");
		if (e->progress && (++n_events & 0xffff) == 0)
			e->progress(e->progress_ctx, e->n_done, e->n_req);
	}
	for (uint32_t i = 0; i < e->n_inst; i++) {
		kv_mark(e, &e->inst[i]);
		e->stats[i].prefix_evictions = e->inst[i].pool.evictions;
	}
	if (e->progress)
		e->progress(e->progress_ctx, e->n_done, e->n_req);
	if (e->n_done != e->n_req)
		return ss_error_set(err, -EPROTO, NULL, 0,
				    "internal error: %llu of %llu requests neither finished nor rejected",
				    (unsigned long long)(e->n_req - e->n_done),
				    (unsigned long long)e->n_req);
	return 0;
}

int32_t engine_kv_free_blocks(const struct engine *e, uint32_t i)
{
	assert(i < e->n_inst);
	return e->inst[i].pool.n_free;
}

void engine_results(const struct engine *e, struct engine_results *out)
{
	memset(out, 0, sizeof(*out));
	out->req = e->req;
	out->n_req = e->n_req;
	out->n_instances = e->n_inst;
	out->itl = &e->itl;
	out->samples = e->ts.s;
	out->n_samples = e->ts.n;
	out->sample_interval_ns = e->ts.interval_ns;
	out->sample_requested_ns = e->cfg.sample_interval_ns;
	out->end_ns = e->now;
	out->kv_blocks_per_instance = e->pools[0].kv_blocks;
	out->kv_bytes_per_block = e->pools[0].kv_bytes_per_block;
	out->idle_power_w = e->pools[0].gpu->idle_w * e->pools[0].tp;
	out->cost_model_name = e->pools[0].cm->ops->name;
	for (int op = 0; op < COST_OP_COUNT; op++)
		out->op_backend[op] = cost_model_op_backend(e->pools[0].cm, (enum cost_op)op);
	out->tp = e->pools[0].tp;
	out->disaggregated = e->n_pools > 1;
	out->inst = e->stats;
	out->prefix_cache = e->pc_on;
	out->swap = e->swap;
	out->n_tenants = e->n_tenants;
	out->tenant_ids = e->tenant_ids;
	out->tenant_service = e->tenant_service;
	out->service_window_ns = e->service_window_ns;
	out->predictor = e->predictor;
}
