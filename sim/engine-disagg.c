/* servesim — prefill/decode disaggregation and KV links (see engine-int.h,
 * docs/disaggregation.md).
 *
 * Owns: handing a request whose prefill is done on a prefill instance to
 * a decode instance chosen by the pairing router (or the decode half of
 * the same GPU under semi-PD); each decode instance's FIFO of paired
 * requests waiting for blocks (incoming); the link model (NVLink within a
 * node, else RDMA; min(tp) lanes in parallel; one transfer at a time in
 * each direction per instance); and the arrival of the KV, which moves the
 * request into the decode instance's waiting queue holding its blocks.
 *
 * Invariants: a migrating request holds its prefill blocks on its prefill
 * instance (counted in n_migrating) until its transfer is done, and its
 * decode blocks (request.kv.xfer) from the transfer's start; transfers start in
 * pairing order; none starts while a request the decode instance preempted
 * waits to recompute (else incoming KV could take every block freed for it).
 * Cost: O(1) per transfer besides the O(W) scan of the decode instance's
 * waiting queue for such preempted requests each time transfers are tried.
 */
#include "engine-int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sstime.h"

/* RDMA bandwidth per GPU when the catalog gives none, bytes/s: one
 * 400 Gb/s NIC per GPU, as in DGX H100 systems. */
#define DEFAULT_RDMA_BW 50e9

/* ---- prefill/decode disaggregation (docs/disaggregation.md) -------------- */

/* Node of an instance's first GPU, or -1 when it spans nodes. */
static int64_t node_of(const struct engine *e, const struct instance *in)
{
	const struct pool *pl = in->pl;
	uint32_t n = (uint32_t)pl->tp * (uint32_t)pl->pp;   /* the instance's GPUs */
	uint32_t g = pl->first_gpu + (in->idx - pl->first) * n;
	uint32_t per = e->cfg.gpus_per_node > 0 ? (uint32_t)e->cfg.gpus_per_node : 8;

	if (g / per != (g + n - 1) / per)
		return -1;
	return g / per;
}

/* Time to move `bytes` of KV from instance a to instance b into *ns:
 * NVLink when both sit in one node (same GPU type, neither spanning
 * nodes), else RDMA; each of min(tp_a, tp_b) GPU pairs carries a share in
 * parallel.  -ERANGE (err says so) when it does not fit int64 ns. */
static int link_ns(const struct engine *e, const struct instance *a, const struct instance *b,
		   double bytes, int64_t *ns, struct ss_error *err)
{
	const struct gpu_spec *ga = a->pl->gpu, *gb = b->pl->gpu;
	/* with pipeline stages, each stage's GPUs send the KV of its layers */
	int lanes = a->pl->tp * a->pl->pp < b->pl->tp * b->pl->pp ? a->pl->tp * a->pl->pp
								   : b->pl->tp * b->pl->pp;
	int64_t na = node_of(e, a), nb = node_of(e, b);
	bool nvlink = ga == gb && na >= 0 && na == nb && ga->nvlink_bw > 0;
	double bw, lat_us;

	if (nvlink) {
		/* each lane is one GPU to one GPU: on a mesh, one direct link */
		bw = ga->nvlink_bw * gpu_link_share(ga, 2);
		lat_us = ga->nvlink_latency_us > 0 ? ga->nvlink_latency_us : 5;
	} else {
		double ra = ga->rdma_bw > 0 ? ga->rdma_bw : DEFAULT_RDMA_BW;
		double rb = gb->rdma_bw > 0 ? gb->rdma_bw : DEFAULT_RDMA_BW;
		double la = ga->rdma_latency_us > 0 ? ga->rdma_latency_us : 10;
		double lb = gb->rdma_latency_us > 0 ? gb->rdma_latency_us : 10;

		bw = ra < rb ? ra : rb;
		lat_us = la > lb ? la : lb;
	}
	if (!eng_ns_trunc(bytes / (bw * lanes) * 1e9 + lat_us * 1e3, ns))
		return eng_time_error(err, (double)e->now / 1e9 + bytes / (bw * lanes) + lat_us / 1e6,
				      "a KV transfer from instance %u to %u", a->idx, b->idx);
	return 0;
}

int eng_pp_link_ns(const struct engine *e, const struct instance *in, int s, double bytes,
		   int64_t *ns, struct ss_error *err)
{
	const struct pool *pl = in->pl;
	const struct gpu_spec *g = pl->gpu;
	uint32_t per = e->cfg.gpus_per_node > 0 ? (uint32_t)e->cfg.gpus_per_node : 8;
	/* stage s's first GPU; stages s and s + 1 are GPUs g0 .. g0 + 2 tp - 1 */
	uint32_t g0 = pl->first_gpu + (in->idx - pl->first) * (uint32_t)(pl->tp * pl->pp) +
		      (uint32_t)(s * pl->tp);
	bool nvlink = g->nvlink_bw > 0 && g0 / per == (g0 + 2 * (uint32_t)pl->tp - 1) / per;
	double bw = nvlink ? g->nvlink_bw * gpu_link_share(g, 2)
			   : g->rdma_bw > 0 ? g->rdma_bw : DEFAULT_RDMA_BW;
	double lat_us = nvlink ? (g->nvlink_latency_us > 0 ? g->nvlink_latency_us : 5)
			       : (g->rdma_latency_us > 0 ? g->rdma_latency_us : 10);

	if (!eng_ns_trunc(bytes / (bw * pl->tp) * 1e9 + lat_us * 1e3, ns))
		return eng_time_error(err, (double)e->now / 1e9 + bytes / (bw * pl->tp) + lat_us / 1e6,
				      "an activation transfer after stage %d on instance %u", s, in->idx);
	return 0;
}

static int incoming_push(struct instance *d, struct request *r)
{
	if (d->in_head + d->n_incoming == d->cap_incoming) {
		if (d->in_head > 0) {
			memmove(d->incoming, d->incoming + d->in_head,
				sizeof(*d->incoming) * d->n_incoming);
			d->in_head = 0;
		} else if (SS_GROW(&d->incoming, &d->cap_incoming, d->cap_incoming + 1)) {
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
int eng_start_transfers(struct engine *e, struct instance *d, struct ss_error *err)
{
	/* Received KV waits in the queue holding its blocks, where no policy
	 * can take them back.  So a transfer leaves a block for each running
	 * request to grow into, and none starts while a request this
	 * instance preempted waits to recompute: otherwise incoming KV can
	 * take every block freed for it, and it thrashes forever. */
	for (uint32_t k = 0; k < waitq_len(&d->wq); k++) {
		const struct req_view *w = waitq_items(&d->wq)[k];

		if (w->preemptions > 0 && w->kv_blocks == 0 && w->host_blocks == 0)
			return 0;
	}
	while (d->n_incoming > 0) {
		struct request *r = d->incoming[d->in_head];
		struct instance *p = &e->inst[r->prefill_instance];
		int32_t need = kvm_blocks_for(d->kv, r->v.computed_tokens);
		double bytes = (double)r->v.computed_tokens *
			       model_kv_bytes_per_token_as(e->cfg.model, e->cfg.kv_dtype);
		int64_t start = e->now, t, end;
		int rc;

		if (need + (int32_t)d->n_running > kvm_free_blocks(d->kv) && d->n_running > 0)
			break;
		if (need > kvm_free_blocks(d->kv))
			break;
		rc = kvm_xfer_reserve(d->kv, r, need);
		if (rc == -ENOSPC)
			return ss_error_set(err, rc, NULL, 0,
					    "internal error: instance %u lacks the %d KV blocks it had",
					    d->idx, need);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory");
		d->in_head++;
		d->n_incoming--;
		if (p->link_free_out > start)
			start = p->link_free_out;
		if (d->link_free_in > start)
			start = d->link_free_in;
		t = 0;   /* semi-PD: no copy */
		if (!e->semi_pd) {
			rc = link_ns(e, p, d, bytes, &t, err);
			if (rc)
				return rc;
		}
		if (e->cfg.kv_overlap && start == r->handoff_ns) {
			/* Layer by layer: layers go as the prefill computes
			 * them, so only what outlasts the last step remains.
			 * hidden = last_step_ns * (L - 1) / L, split so that
			 * the product cannot overflow. */
			int64_t L = e->cfg.model->n_layers;
			int64_t hidden = r->last_step_ns / L * (L - 1) +
					 r->last_step_ns % L * (L - 1) / L;

			t = t - hidden > t / L ? t - hidden : t / L;
		}
		if (!ss_time_add(start, t, &end))
			return eng_time_error(err, ((double)start + (double)t) / 1e9,
					      "a KV transfer from instance %u to %u", p->idx, d->idx);
		p->link_free_out = d->link_free_in = end;
		p->st->kv_transfers_out++;
		if (evq_push(&e->q, &r->ev_xfer, end))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory in the event queue");
	}
	return 0;
}

/* r has finished its prefill on prefill instance p (its first token is
 * out): pair it with a decode instance and queue its KV transfer. */
int eng_handoff(struct engine *e, struct instance *p, struct request *r, struct ss_error *err)
{
	struct pool *dp = &e->pools[1];
	uint32_t pick;
	struct instance *d;

	r->flags |= RF_REMOVE;
	p->n_remove++;
	r->v.state = REQ_MIGRATING;
	r->handoff_ns = e->now;
	r->prefill_instance = (int32_t)p->idx;
	p->n_migrating++;
	p->view.outstanding_tokens -= req_total_tokens(&r->v);
	p->view.outstanding_requests--;
	p->tenant_active[r->v.tenant]--;
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
	if (incoming_push(d, r))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return eng_start_transfers(e, d, err);
}

/* r's KV has arrived: the prefill instance lets go of it, and r waits on
 * its decode instance holding the blocks it arrived in. */
int eng_on_xfer_done(struct engine *e, struct request *r, struct ss_error *err)
{
	struct instance *p = &e->inst[r->prefill_instance];
	struct instance *d = &e->inst[r->instance];
	int rc;

	kvm_xfer_arrive(p->kv, r);
	p->n_migrating--;
	r->kv_xfer_ns = e->now - r->handoff_ns;
	r->v.state = REQ_QUEUED;
	e->oops->enqueued(d->order_priv, &r->v, &d->view);
	eng_tenant_rekey(e, d, r);
	rc = eng_wait_push_back(e, d, &r->v);
	eng_refresh_view(d);
	eng_refresh_view(p);
	if (!rc)
		rc = eng_push_schedule(e, d);
	if (!rc)
		rc = eng_push_schedule(e, p);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory") : 0;
}
