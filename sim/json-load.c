/* servesim — JSON from memory, the common case without jansson's lexer
 * (json-load.h).  A recursive descent over the buffer: whitespace, the
 * three literals, numbers, strings of printable ASCII with the short
 * escapes, arrays and objects.  Anything else fails the fast parse and the
 * document goes to json_loadb whole. */
#include "json-load.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct jl {
	const char *p, *end;
	bool no_dups;               /* JSON_REJECT_DUPLICATES */
	int depth;                  /* arrays and objects open */
	char *tmp;                  /* an unescaped string or a number's text */
	size_t cap;
};

static json_t *value(struct jl *s);

static void skip_ws(struct jl *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\t' || *s->p == '\r'))
		s->p++;
}

static bool tmp_room(struct jl *s, size_t n)
{
	char *t;

	if (n <= s->cap)
		return true;
	t = realloc(s->tmp, n);
	if (!t)
		return false;
	s->tmp = t;
	s->cap = n;
	return true;
}

/* The string at s->p (its opening quote): *str and *len, in the buffer
 * when it has no escapes, else in s->tmp.  false for what the fast parse
 * leaves to jansson: a byte outside printable ASCII (control characters
 * are errors, others need the UTF-8 check), \u, an unterminated string. */
static bool string(struct jl *s, const char **str, size_t *len)
{
	const char *p = ++s->p, *end = s->end;
	size_t n = 0;

	while (p < end && *p != '"' && *p != '\\') {
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x80)
			return false;
		p++;
	}
	if (p >= end)
		return false;
	if (*p == '"') {
		*str = s->p;
		*len = (size_t)(p - s->p);
		s->p = p + 1;
		return true;
	}
	/* escapes: unescape into tmp (never longer than the text) */
	if (!tmp_room(s, (size_t)(end - s->p)))
		return false;
	memcpy(s->tmp, s->p, (size_t)(p - s->p));
	n = (size_t)(p - s->p);
	while (p < end && *p != '"') {
		unsigned char c = (unsigned char)*p;

		if (c < 0x20 || c >= 0x80)
			return false;
		if (c == '\\') {
			if (++p >= end)
				return false;
			switch (*p) {
			case '"': c = '"'; break;
			case '\\': c = '\\'; break;
			case '/': c = '/'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			default: return false;   /* \u and invalid escapes */
			}
		}
		s->tmp[n++] = (char)c;
		p++;
	}
	if (p >= end)
		return false;
	*str = s->tmp;
	*len = n;
	s->p = p + 1;
	return true;
}

/* A JSON number at s->p: an integer (no fraction or exponent) of at most
 * 18 digits, exact; a real through strtod as jansson reads it (its text,
 * whole, and not overflowing). */
static json_t *number(struct jl *s)
{
	const char *p = s->p, *end = s->end, *digits;
	bool neg = false, real = false;
	uint64_t v = 0;
	double d;
	char *stop;
	size_t n;

	if (*p == '-') {
		neg = true;
		p++;
	}
	digits = p;
	if (p < end && *p == '0') {
		p++;
	} else {
		if (p >= end || *p < '1' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	n = (size_t)(p - digits);
	if (p < end && *p == '.') {
		real = true;
		if (++p >= end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		real = true;
		if (++p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (!real) {
		if (n > 18)
			return NULL;
		for (size_t i = 0; i < n; i++)
			v = v * 10 + (uint64_t)(digits[i] - '0');
		s->p = p;
		return json_integer(neg ? -(json_int_t)v : (json_int_t)v);
	}
	n = (size_t)(p - s->p);
	if (!tmp_room(s, n + 1))
		return NULL;
	memcpy(s->tmp, s->p, n);
	s->tmp[n] = '\0';
	errno = 0;
	d = strtod(s->tmp, &stop);
	if (stop != s->tmp + n || ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE))
		return NULL;
	s->p = p;
	return json_real(d);
}

static bool literal(struct jl *s, const char *word, size_t n)
{
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
		return false;
	s->p += n;
	return true;
}

static json_t *array(struct jl *s)
{
	json_t *a = json_array();

	s->p++;
	skip_ws(s);
	if (!a)
		return NULL;
	if (s->p < s->end && *s->p == ']') {
		s->p++;
		return a;
	}
	for (;;) {
		json_t *v = value(s);

		if (!v || json_array_append_new(a, v))
			goto fail;
		skip_ws(s);
		if (s->p >= s->end)
			goto fail;
		if (*s->p == ']') {
			s->p++;
			return a;
		}
		if (*s->p != ',')
			goto fail;
		s->p++;
		skip_ws(s);
	}
fail:
	json_decref(a);
	return NULL;
}

static json_t *object(struct jl *s)
{
	json_t *o = json_object();

	s->p++;
	skip_ws(s);
	if (!o)
		return NULL;
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return o;
	}
	for (;;) {
		const char *key;
		size_t len;
		char *k;
		json_t *v;
		int rc;

		if (s->p >= s->end || *s->p != '"' || !string(s, &key, &len))
			goto fail;
		/* (keys go by length: one without escapes is read in place;
		 * one unescaped into tmp is copied, as the value may reuse it) */
		k = NULL;
		if (key == s->tmp) {
			if (!(k = malloc(len ? len : 1)))
				goto fail;
			memcpy(k, key, len);
			key = k;
		}
		skip_ws(s);
		if (s->p >= s->end || *s->p != ':' || (s->no_dups && json_object_getn(o, key, len))) {
			free(k);
			goto fail;
		}
		s->p++;
		skip_ws(s);
		v = value(s);
		rc = v ? json_object_setn_new_nocheck(o, key, len, v) : -1;
		free(k);
		if (rc)
			goto fail;
		skip_ws(s);
		if (s->p >= s->end)
			goto fail;
		if (*s->p == '}') {
			s->p++;
			return o;
		}
		if (*s->p != ',')
			goto fail;
		s->p++;
		skip_ws(s);
	}
fail:
	json_decref(o);
	return NULL;
}

/* The value at s->p (whitespace skipped before it), or NULL. */
static json_t *value(struct jl *s)
{
	const char *str;
	size_t len;
	json_t *v;

	if (s->p >= s->end)
		return NULL;
	switch (*s->p) {
	case '{':
	case '[':
		if (++s->depth > JSON_PARSER_MAX_DEPTH)
			return NULL;
		v = *s->p == '{' ? object(s) : array(s);
		s->depth--;
		return v;
	case '"':
		return string(s, &str, &len) ? json_stringn_nocheck(str, len) : NULL;
	case 't':
		return literal(s, "true", 4) ? json_true() : NULL;
	case 'f':
		return literal(s, "false", 5) ? json_false() : NULL;
	case 'n':
		return literal(s, "null", 4) ? json_null() : NULL;
	default:
		return number(s);
	}
}

json_t *ss_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err)
{
	struct jl s = { buf, buf + len, (flags & JSON_REJECT_DUPLICATES) != 0, 0, NULL, 0 };
	json_t *root = NULL;

	if (buf && !(flags & ~(size_t)JSON_REJECT_DUPLICATES)) {
		skip_ws(&s);
		/* a document is an object or an array (no JSON_DECODE_ANY) */
		if (s.p < s.end && (*s.p == '{' || *s.p == '['))
			root = value(&s);
		skip_ws(&s);
		if (root && s.p != s.end) {
			json_decref(root);
			root = NULL;
		}
	}
	free(s.tmp);
	if (!root)
		return json_loadb(buf, len, flags, err);
	if (err) {
		/* as json_loadb leaves it on success */
		memset(err, 0, sizeof(*err));
		err->line = -1;
		err->column = -1;
		strcpy(err->source, "<buffer>");
	}
	return root;
}
