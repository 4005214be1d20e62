/* servesim — checks of what run, live and plan load (cli.h): prices given
 * on the command line, and a slice of a trace compared with the whole.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "options.h"
#include "params.h"
#include "workload.h"

int cli_apply_prices(const struct cli_config *o, struct catalog *cat, struct ss_error *err)
{
	for (int k = 0; k < o->n_prices; k++) {
		const char *p = o->prices[k];

		for (;;) {
			size_t len = strcspn(p, ","), name = strcspn(p, "=");
			struct gpu_spec *g = NULL;
			char gpu[64];
			double v;

			/* the parser checked NAME=NUMBER (parse_price) */
			snprintf(gpu, sizeof(gpu), "%.*s", (int)(name < sizeof(gpu) ? name : sizeof(gpu) - 1), p);
			for (size_t i = 0; i < cat->n_gpus && !g; i++)
				if (!strcmp(cat->gpus[i].name, gpu))
					g = &cat->gpus[i];
			if (!g || name >= sizeof(gpu))
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--price: unknown GPU '%.*s' (see `servesim list gpus`)",
						    (int)name, p);
			{
				char num[64];

				snprintf(num, sizeof(num), "%.*s", (int)(len - name - 1), p + name + 1);
				if (!ss_parse_double(num, &v))
					return ss_error_set(err, -EINVAL, NULL, 0,
							    "--price: expected a number for '%s', got '%s'", gpu, num);
			}
			/* a later --price for the same GPU wins */
			g->cost_per_hour = v;
			if (!p[len])
				break;
			p += len + 1;
		}
	}
	return 0;
}

bool cli_slice_check(const struct cli_config *o, const struct workload *wl, bool quiet,
		     struct wl_slice *s)
{
	char what[1024];

	if (!workload_slice_compare(wl, s))
		return false;
	if (s->any && !quiet) {
		workload_slice_text(s, what, sizeof(what));
		cli_errorf("warning: %s keeps %zu of the %zu requests of %s, and they differ from the whole trace (slice vs whole, beyond %.0f%% for the rate, %.0f%% for a length percentile): %s%s",
			   o->num_requests && o->duration_ns ? "--num-requests with --duration" :
			   o->num_requests ? "--num-requests" : "--duration",
			   s->n[0], s->n[1], wl->source, 100 * WL_SLICE_RATE_TOL, 100 * WL_SLICE_LEN_TOL,
			   what, o->cmd == CLI_PLAN ? "; --verify N re-runs the best on the whole trace" : "");
	}
	return true;
}
