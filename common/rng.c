#include "rng.h"

uint64_t ss_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

gsl_rng *ss_rng_new(uint64_t seed, enum ss_rng_stream stream)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);

	if (!r)
		return NULL;
	/* taus2 takes an unsigned long seed; 0 maps to its default, so avoid it. */
	gsl_rng_set(r, (unsigned long)(ss_splitmix64(seed ^ (0x9e3779b97f4a7c15ULL *
							      ((uint64_t)stream + 1))) | 1));
	return r;
}
