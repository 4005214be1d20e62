/* servesim — seeded random streams.
 *
 * Each source of randomness (arrivals, lengths, tenants, predictor noise, policy
 * randomness) owns one stream derived from the run seed and a fixed stream id,
 * so that drawing more numbers from one stream never shifts another.  The
 * generator is GSL's taus2 (fast, good equidistribution); the per-stream seed
 * is splitmix64(seed ^ golden * (id + 1)).
 */
#ifndef SS_RNG_H
#define SS_RNG_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

enum ss_rng_stream {
	SS_RNG_ARRIVALS = 1,
	SS_RNG_LENGTHS = 2,
	SS_RNG_PREDICTOR = 3,
	SS_RNG_POLICY = 4,
	SS_RNG_ROUTER = 5,
	SS_RNG_TENANTS = 6,   /* workload_spec.tenants */
	SS_RNG_API = 7,       /* serving-stack latency (a hash per request, not a stream) */
	SS_RNG_THINK = 8,     /* closed-loop think times (engine_config.think_time) */
	/* --sessions (traces/sessions.c): session starts, turns and think
	 * times, and the lengths of their calls */
	SS_RNG_SESSION_STARTS = 20,
	SS_RNG_SESSION_SHAPE = 21,
	SS_RNG_SESSION_LENGTHS = 22,
};

/* (transfer full) a new generator, or NULL on allocation failure. */
gsl_rng *ss_rng_new(uint64_t seed, enum ss_rng_stream stream);
uint64_t ss_splitmix64(uint64_t x);

#endif
