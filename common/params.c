#include "params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Characters a decimal number may hold: strtod() alone would also take
 * hexadecimal ("0x10", "0x1p4"), "inf", "nan" and "infinity", which no
 * trace, table or option of ours writes; a token count of "0x10" is a
 * mistake to report, not 16. */
static bool decimal_chars(const char *s, const char *end)
{
	for (; s < end; s++)
		if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' ||
		      *s == '+' || *s == '-'))
			return false;
	return true;
}

/* Exact powers of ten, 10^0 .. 10^22: each is a double. */
static const double pow10_exact[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* The end of s after trailing spaces and carriage returns: true when that
 * is the end of the string. */
static bool tail_blank(const char *s)
{
	while (*s == ' ' || *s == '\r')
		s++;
	return *s == '\0';
}

/* Clinger's fast path (W. D. Clinger, "How to read floating point numbers
 * accurately", PLDI 1990) for the numbers a trace holds: s is [-]digits
 * [.digits] (a digit at least), then blanks, with the digits, read as the
 * integer m, at most 2^53 and at most 22 of them after the point (k).  m
 * and 10^k are doubles exactly, so the one rounding of m / 10^k is the
 * correctly rounded value of the decimal: what strtod returns, bit for
 * bit.  False (*out untouched) for anything else, which strtod reads. */
static bool parse_decimal_fast(const char *s, double *out)
{
	uint64_t m = 0;
	unsigned nd = 0, k = 0;
	bool neg = *s == '-', point = false;
	double v;

	s += neg;
	for (;; s++) {
		if (*s >= '0' && *s <= '9') {
			if (++nd > 19)
				return false;
			m = m * 10 + (uint64_t)(*s - '0');
			k += point;
		} else if (*s == '.' && !point) {
			point = true;
		} else {
			break;
		}
	}
	if (!nd || k > 22 || m > (UINT64_C(1) << 53) || !tail_blank(s))
		return false;
	v = (double)m / pow10_exact[k];
	*out = neg ? -v : v;
	return true;
}

bool ss_parse_double(const char *s, double *out)
{
	char *end;
	double v;

	while (*s == ' ')
		s++;
	if (!*s)
		return false;
	if (parse_decimal_fast(s, out))
		return true;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || !decimal_chars(s, end))
		return false;
	while (*end == ' ' || *end == '\r')
		end++;
	if (errno != 0 || *end != '\0' || !isfinite(v))
		return false;
	*out = v;
	return true;
}

bool ss_parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	while (*s == ' ')
		s++;
	if (!*s)
		return false;
	{
		/* [-]digits, 18 at most (no overflow: a 19th digit is
		 * not read here, so tail_blank fails), then blanks: read
		 * here, as strtoll would; anything else is strtoll's */
		const char *p = s + (*s == '-');
		int64_t m = 0;
		unsigned nd = 0;

		for (; *p >= '0' && *p <= '9' && nd < 18; p++, nd++)
			m = m * 10 + (*p - '0');
		if (nd && tail_blank(p)) {
			*out = *s == '-' ? -m : m;
			return true;
		}
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s)
		return false;
	while (*end == ' ' || *end == '\r')
		end++;
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

/* The byte loop of ss_line_bounded over buf[i .. end). */
static size_t line_bytes(const char *buf, size_t i, size_t end, size_t *run, size_t max)
{
	size_t r = *run;

	for (; i < end; i++) {
		if (buf[i] == '\n' || buf[i] == '\r') {
			r = 0;
		} else if (++r > max) {
			*run = r;
			return i;
		}
	}
	*run = r;
	return end;
}

/* A line at a time (memchr finds its end): a line that cannot exceed max
 * even without its carriage returns needs no byte loop, only where its
 * last one is; any other goes through the byte loop. */
size_t ss_line_bounded(const char *buf, size_t n, size_t *run, size_t max)
{
	size_t i = 0;

	while (i < n) {
		const char *nl = memchr(buf + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - buf) : n;   /* the line's bytes: [i, end) */

		if (*run + (end - i) > max) {
			size_t k = line_bytes(buf, i, end, run, max);

			if (k < end)
				return k;
		} else {
			const char *cr = memchr(buf + i, '\r', end - i), *last = NULL;

			for (; cr; cr = memchr(cr + 1, '\r', (size_t)(buf + end - cr - 1)))
				last = cr;
			*run = last ? (size_t)(buf + end - last - 1) : *run + (end - i);
		}
		if (!nl)
			break;
		*run = 0;
		i = end + 1;
	}
	return n;
}

static int add_item(struct ss_params *p, const char *item, size_t len,
		    struct ss_error *err)
{
	const char *eq = memchr(item, '=', len);
	struct ss_param *kv;
	size_t klen, vlen;

	if (len == 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: empty parameter in '%s'", p->what, p->name);
	if (p->n == SS_PARAMS_MAX)
		return ss_error_set(err, -E2BIG, NULL, 0,
				    "%s: more than %d parameters", p->what, SS_PARAMS_MAX);
	kv = &p->kv[p->n];
	if (eq) {
		klen = (size_t)(eq - item);
		vlen = len - klen - 1;
	} else {
		klen = 1;
		vlen = len;
	}
	if (klen == 0 || klen >= sizeof(kv->key) || vlen >= sizeof(kv->val))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: malformed parameter '%.*s' (expected key=value)",
				    p->what, (int)len, item);
	memcpy(kv->key, eq ? item : "_", klen);
	kv->key[klen] = '\0';
	memcpy(kv->val, eq ? eq + 1 : item, vlen);
	kv->val[vlen] = '\0';
	for (int i = 0; i < p->n; i++)
		if (strcmp(p->kv[i].key, kv->key) == 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: parameter '%s' given twice",
					    p->what, kv->key);
	kv->used = false;
	p->n++;
	return 0;
}

int ss_params_parse(struct ss_params *p, const char *what, const char *spec,
		    bool name_required, struct ss_error *err)
{
	const char *colon = strchr(spec, ':');
	const char *eq = strchr(spec, '=');
	const char *rest;
	size_t nlen;

	memset(p, 0, sizeof(*p));
	snprintf(p->what, sizeof(p->what), "%s", what);
	if (!name_required && (!colon || (eq && eq < colon))) {
		rest = spec;
	} else {
		nlen = colon ? (size_t)(colon - spec) : strlen(spec);
		if (nlen == 0 || nlen >= sizeof(p->name))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected NAME[:key=value,...], got '%s'",
					    what, spec);
		memcpy(p->name, spec, nlen);
		p->name[nlen] = '\0';
		if (!colon)
			return 0;
		rest = colon + 1;
	}
	while (*rest) {
		const char *comma = strchr(rest, ',');
		size_t len = comma ? (size_t)(comma - rest) : strlen(rest);
		int rc = add_item(p, rest, len, err);

		if (rc)
			return rc;
		rest += len;
		if (*rest == ',')
			rest++;
	}
	return 0;
}

static struct ss_param *find(const struct ss_params *p, const char *key)
{
	for (int i = 0; i < p->n; i++)
		if (strcmp(p->kv[i].key, key) == 0)
			return (struct ss_param *)&p->kv[i];
	return NULL;
}

bool ss_params_has(const struct ss_params *p, const char *key)
{
	return find(p, key) != NULL;
}

const char *ss_params_str(struct ss_params *p, const char *key, const char *def)
{
	struct ss_param *kv = find(p, key);
	int i;

	for (i = 0; i < p->n_asked && strcmp(p->asked[i], key); i++)
		;
	if (i == p->n_asked && p->n_asked < SS_PARAMS_MAX && strcmp(key, "_"))
		snprintf(p->asked[p->n_asked++], sizeof(p->asked[0]), "%s", key);

	if (!kv)
		return def;
	kv->used = true;
	return kv->val;
}

int ss_params_double(struct ss_params *p, const char *key, double def,
		     double *out, struct ss_error *err)
{
	const char *s = ss_params_str(p, key, NULL);

	if (!s) {
		*out = def;
		return 0;
	}
	if (!ss_parse_double(s, out))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s%s%s: expected a number for '%s', got '%s'",
				    p->what, p->name[0] ? " " : "", p->name, key, s);
	return 0;
}

int ss_params_int(struct ss_params *p, const char *key, int64_t def,
		  int64_t *out, struct ss_error *err)
{
	const char *s = ss_params_str(p, key, NULL);

	if (!s) {
		*out = def;
		return 0;
	}
	if (!ss_parse_int64(s, out))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s%s%s: expected an integer for '%s', got '%s'",
				    p->what, p->name[0] ? " " : "", p->name, key, s);
	return 0;
}

int ss_params_bool(struct ss_params *p, const char *key, bool def, bool *out,
		   struct ss_error *err)
{
	const char *s = ss_params_str(p, key, NULL);

	if (!s) {
		*out = def;
		return 0;
	}
	if (!strcmp(s, "1") || !strcmp(s, "on") || !strcmp(s, "true") || !strcmp(s, "yes"))
		*out = true;
	else if (!strcmp(s, "0") || !strcmp(s, "off") || !strcmp(s, "false") || !strcmp(s, "no"))
		*out = false;
	else
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s%s%s: expected on/off for '%s', got '%s'",
				    p->what, p->name[0] ? " " : "", p->name, key, s);
	return 0;
}

int ss_params_check_unused(const struct ss_params *p, struct ss_error *err)
{
	for (int i = 0; i < p->n; i++)
		if (!p->kv[i].used) {
			char keys[SS_PARAMS_MAX * 50] = "";
			size_t w = 0;

			for (int k = 0; k < p->n_asked && w < sizeof(keys); k++)
				w += (size_t)snprintf(keys + w, sizeof(keys) - w, "%s%s%s",
						      k == 0 ? " (expected " :
						      k == p->n_asked - 1 ? " or " : ", ",
						      p->asked[k], k == p->n_asked - 1 ? ")" : "");
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s%s%s: unknown parameter '%s'%s",
					    p->what, p->name[0] ? " " : "", p->name,
					    strcmp(p->kv[i].key, "_") ? p->kv[i].key : p->kv[i].val,
					    keys);
		}
	return 0;
}

int ss_parse_long_in(const char *s, long lo, long hi, long *out)
{
	int64_t x;

	if (!ss_parse_int64(s, &x) || x < lo || x > hi)
		return -1;
	*out = (long)x;
	return 0;
}

int ss_parse_double_in(const char *s, double gt, double le, double *out)
{
	double x;

	if (!ss_parse_double(s, &x) || !(x > gt) || !(x <= le))
		return -1;
	*out = x;
	return 0;
}

int ss_keyval_take(char *tok, const void *keys, size_t stride, size_t n, bool *seen,
		   const char **value, char *msg, size_t len)
{
	char *eq = strchr(tok, '=');
	size_t k;

	if (eq)
		*eq = '\0';
	for (k = 0; k < n; k++)
		if (!strcmp(tok, *(const char *const *)((const char *)keys + k * stride)))
			break;
	if (!eq || k == n) {
		int w = snprintf(msg, len, "'%.64s': expected KEY=VALUE with KEY one of ", tok);

		for (size_t j = 0; j < n && w >= 0 && (size_t)w < len; j++)
			w += snprintf(msg + w, len - (size_t)w, "%s%s", j ? ", " : "",
				      *(const char *const *)((const char *)keys + j * stride));
		return -1;
	}
	if (seen[k]) {
		snprintf(msg, len, "%s= given twice", tok);
		return -1;
	}
	seen[k] = true;
	*value = eq + 1;
	return (int)k;
}
