/* servesim — the output front end (frontend.h). */
#include "frontend.h"
#include "engine-profile.h"
#include "sstime.h"

void frontend_init(struct frontend *fe, const struct engine_profile *p)
{
	int64_t tok = 0, step = 0;

	/* the catalog bounds both (<= 1e4 us): they fit */
	if (p) {
		ss_time_from_units(p->frontend_us_per_token, SS_NS_PER_US, &tok);
		ss_time_from_units(p->frontend_us_per_step, SS_NS_PER_US, &step);
	}
	*fe = (struct frontend){ .per_token_ns = tok, .per_step_ns = step, .step_ns = -1 };
}

bool frontend_profile_on(const struct engine_profile *p)
{
	return p && (p->frontend_us_per_token > 0.0 || p->frontend_us_per_step > 0.0);
}

int64_t frontend_token(struct frontend *fe, int64_t now)
{
	int64_t start = fe->free_ns > now ? fe->free_ns : now;

	if (now != fe->step_ns) {
		fe->step_ns = now;
		start = ss_time_add_sat(start, fe->per_step_ns);
	}
	fe->free_ns = ss_time_add_sat(start, fe->per_token_ns);
	return fe->free_ns;
}
