/* servesim — the remote KV tier shared by every instance (--kv-remote;
 * docs/kv-cache.md "Remote tier"), after Mooncake's store (FAST'25): the
 * prefill nodes publish the KV they compute to a distributed store in the
 * cluster's host memory, and any node reads a prefix found there over
 * RDMA instead of recomputing it.
 *
 * Owns: the store (one struct kvtier of whole-model KV blocks, LRU, for
 * the whole engine), its link to each instance, the fetch bytes each
 * instance's next step waits for, and the counters.
 *
 * Rules (each a decision the issue left open, documented in
 * docs/kv-cache.md):
 *   - Write-through: every block registered in a GPU prefix cache is put in
 *     the store (kvm.c kvm_register).  The write is
 *     asynchronous, off the critical path (Mooncake stores KV layer by
 *     layer while the prefill runs): it costs no step time.
 *   - Lookup: after the GPU chain, a waiting request's lookup goes on in
 *     the store; the blocks found count as computed.  They take no GPU
 *     memory until the request is admitted: its first step allocates them
 *     (as vLLM does for a KV connector's external hits) and waits for the
 *     fetch, latency + bytes / (bw x tp) per step that fetches (one
 *     batched read per step, every request's blocks in it), the GPUs
 *     drawing idle power meanwhile.  They are registered in the GPU cache
 *     when that step ends.
 *   - Router: a block in the store counts half a GPU-held block in
 *     policy_host.prefix_hit, so the prefix router prefers a local hit, then
 *     a remote one (the same on every instance, so load decides), then none.
 *   - Capacity is in whole-model KV bytes (pool 0's bytes per block, all
 *     of an instance's tp GPUs): what the store holds does not depend on
 *     the tp of the instance that wrote it.
 * Cost: O(1) expected per block looked up, put or fetched.
 */
#include "kvm-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "sstime.h"

/* Without a catalog figure: a 400 Gb/s NIC per GPU, 10 us (as the
 * disaggregation links of engine-disagg.c). */
#define REMOTE_DEFAULT_BW 50e9
#define REMOTE_DEFAULT_LATENCY_US 10.0

/* Set when a put could not grow the store: the next step reports it. */
#define REMOTE_OOM UINT64_MAX

int kvm_remote_setup(struct kvm *m, struct ss_error *err)
{
	const char *spec = m->c.kv_remote;
	struct ss_params p;
	double gb, bw, lat, block_bytes;
	struct kv_remote *rm;
	int rc;

	if (!spec)
		return 0;
	rc = ss_params_parse(&p, "--kv-remote", spec, false, err);
	if (rc)
		return rc;
	if (!ss_params_has(&p, "gb"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-remote: expected gb=G[,bw_gbps=B,latency_us=L], got '%s'",
				    spec);
	rc = ss_params_double(&p, "gb", 0, &gb, err);
	/* 0 = the catalog's (each GPU's RDMA NIC, and its latency) */
	if (!rc)
		rc = ss_params_double(&p, "bw_gbps", 0, &bw, err);
	if (!rc)
		rc = ss_params_double(&p, "latency_us", -1, &lat, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	if (!(gb > 0 && gb <= 1e9) || !(bw >= 0 && bw < 1e6) ||
	    (ss_params_has(&p, "bw_gbps") && !(bw > 0)) ||
	    (ss_params_has(&p, "latency_us") && !(lat >= 0 && lat <= 1e9)))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-remote: expected 0 < gb <= 1e9, 0 < bw_gbps < 1e6 and "
				    "0 <= latency_us <= 1e9, got '%s'",
				    spec);
	if (!m->o.prefix_cache)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-remote needs prefix caching: add --prefix-cache on (or blocks=N)");
	block_bytes = m->c.remote_block_bytes;
	if (!(block_bytes > 0) || gb * 1e9 / block_bytes < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-remote: gb=%g holds no KV block of %.0f bytes", gb, block_bytes);
	rm = calloc(1, sizeof(*rm));
	if (!rm)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	m->remote = rm;
	rm->st.capacity_blocks = (int64_t)(gb * 1e9 / block_bytes);
	rm->st.block_bytes = block_bytes;
	rm->bw_gpu = bw * 1e9;
	rm->latency_ns = lat >= 0 ? (int64_t)(lat * 1e3) : -1;
	if (kvtier_init(&rm->tier, rm->st.capacity_blocks))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return 0;
}

void kvm_remote_free(struct kvm *m)
{
	if (!m->remote)
		return;
	kvtier_release(&m->remote->tier);
	free(m->remote);
	m->remote = NULL;
}

int32_t kvm_remote_peek(const struct kvm *m, const struct request *r, int32_t k, uint64_t h)
{
	int32_t n = kvm_max_hit_blocks(m, r), j;

	for (j = k; j < n; j++) {
		h = kvm_block_hash(m, r, j, h);
		if (!kvtier_contains(&m->remote->tier, h))
			break;
	}
	return j - k;
}

int32_t kvm_remote_lookup(struct kvm *m, const struct request *r, int32_t k, uint64_t h)
{
	int32_t n = kvm_max_hit_blocks(m, r), j;

	for (j = k; j < n; j++) {
		h = kvm_block_hash(m, r, j, h);
		if (!kvtier_touch(&m->remote->tier, h))
			break;
	}
	return j - k;
}

void kvm_remote_fetch(struct kvm_inst *ki, const struct request *r)
{
	struct kv_remote *rm = ki->m->remote;
	int32_t bs = ki->m->c.block_size;
	int32_t n = r->v.computed_tokens / bs - r->kv.hashed;

	if (n <= 0)
		return;
	rm->st.hit_tokens += (uint64_t)n * (uint64_t)bs;
	ki->st->remote_hit_tokens += (uint64_t)n * (uint64_t)bs;
	rm->st.blocks_fetched += (uint64_t)n;
	rm->st.bytes += n * ki->block_bytes;
	ki->remote_pending += n * ki->block_bytes;
}

int kvm_remote_charge(struct kvm_inst *ki, int64_t *ns, double *energy_j, struct ss_error *err)
{
	struct kv_remote *rm = ki->m->remote;
	const struct gpu_spec *g = ki->gpu;
	double bw, bytes = ki->remote_pending;
	int64_t lat, t;
	bool ok;

	if (rm->st.puts == REMOTE_OOM)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for the remote KV store");
	if (bytes <= 0)
		return 0;
	/* each of the tp GPUs reads its shard over its own NIC */
	bw = (rm->bw_gpu > 0 ? rm->bw_gpu : g->rdma_bw > 0 ? g->rdma_bw : REMOTE_DEFAULT_BW) * ki->tp;
	lat = rm->latency_ns >= 0 ? rm->latency_ns
				  : (int64_t)((g->rdma_latency_us > 0 ? g->rdma_latency_us
								     : REMOTE_DEFAULT_LATENCY_US) * 1e3);
	ok = kvm_ns_trunc(bytes / bw * 1e9, &t);
	if (ok)   /* before the step's kernels, or under them (kv_load) */
		t = kvm_load_ns(ki, *ns, lat, t);
	if (!ok || !ss_time_add(*ns, t, ns))
		return kvm_time_error(err, (double)*ki->m->c.now / 1e9 + bytes / bw,
				      "a remote KV fetch of %.0f bytes on instance %u", bytes, ki->idx);
	*energy_j += g->idle_w * ki->tp * (double)t / 1e9;
	rm->st.fetches++;
	rm->st.fetch_ns = ss_time_add_sat(rm->st.fetch_ns, t);
	ki->remote_pending = 0;
	return 0;
}

void kvm_remote_put(struct kvm *m, uint64_t h)
{
	struct kv_remote *rm = m->remote;

	if (rm->st.puts == REMOTE_OOM)
		return;
	if (kvtier_put(&rm->tier, h) < 0) {
		rm->st.puts = REMOTE_OOM;
		return;
	}
	rm->st.puts = rm->tier.puts;
	rm->st.evictions = rm->tier.evictions;
}
