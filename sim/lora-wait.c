/* servesim — multi-LoRA: the waiting requests indexed by adapter, and the
 * batch policy's view kept between steps (lora-wait.h says what and why). */
#include "lora-wait.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "ss-heap.h"

/* One adapter's waiting requests (the last slot: the base model's). */
struct wslot {
	struct lora_wnode *head, *tail;    /* in queue order */
	struct lora_wnode *cursor;         /* its last request in the view, NULL: none */
	int64_t key;                       /* the heap's: head->seq while in the heap */
	uint32_t n;                        /* requests waiting */
	uint32_t hpos;                     /* index in the heap, SS_HEAP_NONE when not in it */
	uint32_t rpos;                     /* index in run[] while running */
	bool running;                      /* the running set uses it */
	bool is_new;                       /* one of NEW (lora-wait.h) since the last rebuild */
};

static bool slot_before(const void *ctx, const struct wslot *a, const struct wslot *b)
{
	(void)ctx;
	return a->key < b->key;   /* keys are distinct: each a request's seq */
}

SS_HEAP_STRUCT(wheap, struct wslot);
SS_HEAP_DEFINE(wheap, struct wslot, hpos, slot_before);

struct lora_wait {
	struct wslot *s;                   /* n + 1 slots, s[n] the base model's */
	uint32_t n, slots, len;            /* adapters, max_loras, the view's most entries */
	struct wheap idle;                 /* not running, requests waiting: by first request */
	uint32_t *run, n_run;              /* the running adapters, at most max_loras */
	uint32_t n_new;                    /* adapters of NEW not running yet */
	uint32_t *merge, n_merge;          /* the slots whose requests the view holds */
	struct lora_wnode **cand;          /* the refill's merge heap */
	/* the view: fnode/fview[fh .. fh + fn), room for 2 len */
	struct lora_wnode **fnode;
	const void **fview;
	uint32_t fh, fn;
	uint64_t elig;                     /* waiting requests of the merge slots */
	int64_t bseq, fseq;                /* the next seq at the back / the front */
	bool dirty;                        /* the eligible set may have changed: rebuild */
};

int lora_wait_new(struct lora_wait **out, uint32_t n_adapters, uint32_t max_loras, uint32_t len)
{
	struct lora_wait *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return -ENOMEM;
	assert(len >= 1 && max_loras >= 1);
	w->n = n_adapters;
	w->slots = max_loras;
	w->len = len;
	w->fseq = -1;
	w->dirty = true;
	wheap_init(&w->idle, NULL);
	w->s = calloc((size_t)n_adapters + 1, sizeof(*w->s));
	w->fnode = malloc(2 * (size_t)len * sizeof(*w->fnode));
	w->fview = malloc(2 * (size_t)len * sizeof(*w->fview));
	/* everything a run needs, now: the hooks never allocate */
	w->run = malloc((size_t)max_loras * sizeof(*w->run));
	w->merge = malloc(((size_t)max_loras + 1) * sizeof(*w->merge));
	w->cand = malloc(((size_t)max_loras + 1) * sizeof(*w->cand));
	if (!w->s || !w->fnode || !w->fview || !w->run || !w->merge || !w->cand ||
	    wheap_reserve(&w->idle, n_adapters)) {
		lora_wait_free(w);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k <= n_adapters; k++)
		w->s[k].hpos = SS_HEAP_NONE;
	*out = w;
	return 0;
}

void lora_wait_free(struct lora_wait *w)
{
	if (!w)
		return;
	wheap_release(&w->idle);
	free(w->s);
	free(w->run);
	free(w->merge);
	free(w->cand);
	free(w->fnode);
	free(w->fview);
	free(w);
}

static bool eligible(const struct lora_wait *w, const struct wslot *s)
{
	return s->running || s->is_new || s == &w->s[w->n];
}

/* s is not running: keep it in the heap by its first request, or out. */
static void idle_place(struct lora_wait *w, struct wslot *s)
{
	bool in = s->hpos != SS_HEAP_NONE;

	if (!s->n) {
		if (in)
			wheap_remove(&w->idle, s);
		return;
	}
	s->key = s->head->seq;
	if (in)
		wheap_fix(&w->idle, s);
	else
		wheap_push(&w->idle, s);   /* room for every adapter: cannot fail */
}

void lora_wait_push(struct lora_wait *w, struct lora_wnode *node, const void *view, int32_t a,
		    bool front)
{
	uint32_t k = a < 0 ? w->n : (uint32_t)a;
	struct wslot *s = &w->s[k];

	assert(k <= w->n);
	node->slot = (int32_t)k;
	node->view = view;
	node->in_view = false;
	if (front) {
		node->seq = w->fseq--;
		node->prev = NULL;
		node->next = s->head;
		if (s->head)
			s->head->prev = node;
		else
			s->tail = node;
		s->head = node;
		w->dirty = true;   /* before the view's entries: rebuilt */
	} else {
		node->seq = w->bseq++;
		node->next = NULL;
		node->prev = s->tail;
		if (s->tail)
			s->tail->next = node;
		else
			s->head = node;
		s->tail = node;
	}
	s->n++;
	if (k < w->n && !s->running && (front || s->n == 1))
		idle_place(w, s);
	if (eligible(w, s))
		w->elig++;
	else if (k < w->n && w->n_run + w->n_new < w->slots)
		w->dirty = true;   /* NEW has room: this adapter may join it */
}

void lora_wait_leave(struct lora_wait *w, struct lora_wnode *node, bool taken)
{
	struct wslot *s = &w->s[node->slot];
	bool was_head = s->head == node;

	if (s->cursor == node)
		s->cursor = node->prev;
	if (node->prev)
		node->prev->next = node->next;
	else
		s->head = node->next;
	if (node->next)
		node->next->prev = node->prev;
	else
		s->tail = node->prev;
	s->n--;
	if (eligible(w, s))
		w->elig--;
	if (node->in_view) {
		/* a step takes the view's first entries, in order: O(1) */
		node->in_view = false;
		if (w->fnode[w->fh] == node) {
			w->fh++;
			w->fn--;
		} else {
			uint32_t i = 0, end = w->fh + w->fn;

			while (w->fnode[w->fh + i] != node)
				i++;
			for (uint32_t j = w->fh + i; j + 1 < end; j++) {
				w->fnode[j] = w->fnode[j + 1];
				w->fview[j] = w->fview[j + 1];
			}
			w->fn--;
		}
	}
	if ((uint32_t)node->slot < w->n && !s->running && (was_head || !s->n))
		idle_place(w, s);
	if (!taken)
		w->dirty = true;   /* NEW may change with a first request gone */
}

void lora_wait_run(struct lora_wait *w, int32_t a, bool running)
{
	struct wslot *s = &w->s[a];

	assert(a >= 0 && (uint32_t)a < w->n && s->running != running);
	s->running = running;
	if (running) {
		/* only a request of the view joins the running set: never
		 * more than max_loras adapters */
		assert(w->n_run < w->slots);
		s->rpos = w->n_run;
		w->run[w->n_run++] = (uint32_t)a;
		if (s->hpos != SS_HEAP_NONE)
			wheap_remove(&w->idle, s);
		if (s->is_new) {
			/* NEW hands it a slot: the eligible set stays */
			s->is_new = false;
			w->n_new--;
		} else {
			w->dirty = true;
		}
		return;
	}
	{
		uint32_t last = w->run[--w->n_run];

		w->run[s->rpos] = last;
		w->s[last].rpos = s->rpos;
	}
	idle_place(w, s);
	w->dirty = true;   /* a slot freed: NEW changes */
}

static void merge_add(struct lora_wait *w, uint32_t k)
{
	w->merge[w->n_merge++] = k;
	w->elig += w->s[k].n;
}

/* The eligible set afresh: the base model, the running adapters, NEW; an
 * empty view.  O(view + max_loras log A). */
static void rebuild(struct lora_wait *w)
{
	uint32_t room = w->slots > w->n_run ? w->slots - w->n_run : 0, found = 0;

	for (uint32_t i = 0; i < w->n_merge; i++) {
		w->s[w->merge[i]].cursor = NULL;
		w->s[w->merge[i]].is_new = false;
	}
	for (uint32_t i = 0; i < w->fn; i++)
		w->fnode[w->fh + i]->in_view = false;
	w->fh = w->fn = 0;
	w->n_merge = 0;
	w->n_new = 0;
	w->elig = 0;
	merge_add(w, w->n);
	for (uint32_t i = 0; i < w->n_run; i++)
		merge_add(w, w->run[i]);
	while (found < room && w->idle.n) {
		struct wslot *s = wheap_pop(&w->idle);

		s->is_new = true;
		merge_add(w, (uint32_t)(s - w->s));
		found++;
	}
	for (uint32_t i = w->n_merge - found; i < w->n_merge; i++)
		wheap_push(&w->idle, &w->s[w->merge[i]]);   /* room: it held them */
	w->n_new = found;
	w->dirty = false;
}

static bool cand_before(const struct lora_wnode *a, const struct lora_wnode *b)
{
	return a->seq < b->seq;
}

static void cand_down(struct lora_wnode **h, uint32_t n, uint32_t i)
{
	struct lora_wnode *x = h[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && cand_before(h[c + 1], h[c]))
			c++;
		if (!cand_before(h[c], x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

/* Append the next eligible requests in queue order, up to len or all of
 * them: a merge of the merge slots' lists from their cursors. */
static void refill(struct lora_wait *w)
{
	uint64_t target = w->elig < w->len ? w->elig : w->len;
	struct lora_wnode **h = w->cand;
	uint32_t n = 0;

	if (w->fn >= target)
		return;
	if (w->fh + target > 2 * (uint64_t)w->len) {
		for (uint32_t i = 0; i < w->fn; i++) {
			w->fnode[i] = w->fnode[w->fh + i];
			w->fview[i] = w->fview[w->fh + i];
		}
		w->fh = 0;
	}
	for (uint32_t i = 0; i < w->n_merge; i++) {
		const struct wslot *s = &w->s[w->merge[i]];
		struct lora_wnode *c = s->cursor ? s->cursor->next : s->head;

		if (c)
			h[n++] = c;
	}
	for (uint32_t i = n / 2; i-- > 0;)
		cand_down(h, n, i);
	while (w->fn < target) {
		struct lora_wnode *c = h[0];
		uint32_t at = w->fh + w->fn++;

		assert(n > 0);
		w->fnode[at] = c;
		w->fview[at] = c->view;
		c->in_view = true;
		w->s[c->slot].cursor = c;
		if (c->next)
			h[0] = c->next;
		else
			h[0] = h[--n];
		if (n)
			cand_down(h, n, 0);
	}
}

uint32_t lora_wait_view(struct lora_wait *w, const void *const **out)
{
	if (w->dirty)
		rebuild(w);
	refill(w);
	*out = w->fview + w->fh;
	return w->fn;
}
