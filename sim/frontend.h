/* servesim — an engine's output front end: the serial server on every
 * streamed token's way from the engine to the client (issue 31 §3).
 *
 * A deployed engine streams its tokens through an API-server process of
 * its own (vLLM's `vllm serve` front end, trtllm-serve, SGLang's
 * tokenizer manager): for every token of every running sequence it
 * detokenises, builds the response chunk and writes it to the client's
 * connection, one token after another on one event loop.  That work is a
 * capacity, not a latency: while the engine emits fewer tokens per second
 * than the front end serves it adds only its per-token cost, but once
 * per-token cost x tokens per step exceeds the step time the front end is
 * the bottleneck, a backlog builds, and clients receive tokens at the
 * front end's rate, not the engine's (ITL = tokens per step x per-token
 * cost).
 *
 * The model: one FIFO server per instance, cost per_token_ns for each
 * emitted token and per_step_ns once for each engine step that emits any
 * (the engine's outputs of one step arrive as one message).  A token
 * emitted at engine time t enters at t; the server starts a step's first
 * token no earlier than it is free, and each token leaves (reaches the
 * stack's way to the client) when its service ends.  The engine itself is
 * not slowed (its outputs queue between the processes); in a closed loop
 * the client's next request follows the last token it received.
 *
 * Declared once, as engine-profile keys (frontend_us_per_token,
 * frontend_us_per_step: engine-profile.c's table); both 0 (absent) = no
 * front end, and the engine's token times are the client's as before.
 */
#ifndef SS_FRONTEND_H
#define SS_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

struct engine_profile;

/* Decision: a closed-form FIFO (the time the server is next free) rather
 * than a queue of tokens, since service is in arrival order and each
 * token's departure depends only on its arrival and the previous
 * departure (Lindley's recursion); O(1) per token, no memory per token.
 * Rejected: an event per delivered token (doubles the event count of a
 * decode-heavy run for nothing the engine needs to see). */
struct frontend {
	int64_t per_token_ns;     /* service per streamed token, ns (0: off) */
	int64_t per_step_ns;      /* service per engine step that emits tokens, ns */
	int64_t free_ns;          /* when the server is next free, ns */
	int64_t step_ns;          /* engine time of the step being taken in, ns (-1: none yet) */
};

/* Set fe from profile p (NULL: no profile, no front end), idle. */
void frontend_init(struct frontend *fe, const struct engine_profile *p);

/* True when p (NULL: none) has a front end. */
bool frontend_profile_on(const struct engine_profile *p);

/* True when fe serves tokens (some cost set). */
static inline bool frontend_on(const struct frontend *fe)
{
	return fe->per_token_ns > 0 || fe->per_step_ns > 0;
}

/* A token the engine emits at now (ns, not before any earlier call's
 * now): the time it leaves the front end, ns (>= now).  The first token
 * of a step (a new now) also pays the step's cost.  Saturates at
 * INT64_MAX. */
int64_t frontend_token(struct frontend *fe, int64_t now);

#endif
