/* servesim — the trace reader registry: lookup by format and by name,
 * detection, and the format list.
 *
 * The registry itself is traces/registry.def, one TRACE_READER(FMT, ident)
 * line per format in detection order; this file declares and lists the
 * reader tables from it, so the detection chain, `servesim list formats`,
 * the --format names and the unrecognized-header message all follow that
 * one list.
 */
#include "workload-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct trace_reader *const registry[] = {
#define TRACE_READER(FMT, ident) &reader_##ident,
#include "registry.def"
#undef TRACE_READER
};

#define N_REGISTRY (sizeof(registry) / sizeof(registry[0]))

/* Each line's FMT names its reader's own format (caught at compile time
 * where it can be: the table's enum value is not a constant expression). */
#define TRACE_READER(FMT, ident) + 1
_Static_assert(0
#include "registry.def"
	       == TRACE_FORMAT_LAST, "traces/registry.def: one line per enum trace_format value");
#undef TRACE_READER

const struct trace_reader *trace_reader_for(enum trace_format fmt)
{
	for (size_t i = 0; i < N_REGISTRY; i++)
		if (registry[i]->info.fmt == fmt)
			return registry[i];
	return NULL;
}

const struct trace_reader *trace_reader_detect(const struct trace_sniff *sn)
{
	for (size_t i = 0; i < N_REGISTRY; i++)
		if (registry[i]->detect(sn))
			return registry[i];
	return NULL;
}

void trace_readers_expected(char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_REGISTRY && at < len; i++) {
		if (!registry[i]->expect)
			continue;
		at += (size_t)snprintf(buf + at, len - at, "%s%s (%s)", at ? ", " : "",
				       registry[i]->expect, registry[i]->info.name);
	}
}

const struct trace_format_info *trace_format_at(size_t i)
{
	return i < N_REGISTRY ? &registry[i]->info : NULL;
}

const char *trace_format_name(enum trace_format fmt)
{
	const struct trace_reader *rd;

	if (fmt == TRACE_AUTO)
		return "auto";
	rd = trace_reader_for(fmt);
	return rd ? rd->info.name : "unknown";
}

int trace_format_from_name(const char *name, enum trace_format *fmt)
{
	if (!strcmp(name, "auto")) {
		*fmt = TRACE_AUTO;
		return 0;
	}
	for (size_t i = 0; i < N_REGISTRY; i++) {
		if (!strcmp(name, registry[i]->info.name)) {
			*fmt = registry[i]->info.fmt;
			return 0;
		}
	}
	return -EINVAL;
}
