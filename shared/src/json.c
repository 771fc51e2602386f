/*
 * Strict JSON input on top of jansson: the size limit is checked before any
 * parsing, the whole buffer must be exactly one value (trailing bytes are an
 * error), duplicate object keys are refused, NUL is allowed inside strings
 * (callers decide where it may appear), invalid UTF-8 is refused by
 * jansson itself, and nesting deeper than COMB_JSON_MAX_DEPTH is refused
 * before jansson recurses into it (relay worker threads have small stacks).
 */
#include <stdbool.h>

#include "comb/json.h"

#include "comb/error.h"

/* True when arrays and objects nest deeper than COMB_JSON_MAX_DEPTH
 * anywhere in buf (brackets inside strings do not count). */
static bool too_deep(const char *buf, size_t len)
{
	bool in_string = false, escaped = false;
	int depth = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		char c = buf[i];

		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > COMB_JSON_MAX_DEPTH)
				return true;
		} else if (c == ']' || c == '}') {
			depth--;
		}
	}
	return false;
}

json_t *comb_json_parse(const char *buf, size_t len, size_t max, char *errbuf,
			size_t errlen)
{
	json_error_t err;
	json_t *v;

	if (len > max) {
		comb_fail(errbuf, errlen, COMB_ETOOBIG, "body too large");
		return NULL;
	}
	if (buf == NULL) {
		comb_fail(errbuf, errlen, COMB_EINVAL, "invalid json");
		return NULL;
	}
	if (too_deep(buf, len)) {
		comb_fail(errbuf, errlen, COMB_EINVAL, "json nested too deeply");
		return NULL;
	}
	v = json_loadb(
	    buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY,
	    &err);
	if (v != NULL)
		return v;
	switch (json_error_code(&err)) {
	case json_error_duplicate_key:
		comb_fail(errbuf, errlen, COMB_EINVAL, "duplicate key");
		break;
	case json_error_invalid_utf8:
		comb_fail(errbuf, errlen, COMB_EINVAL, "invalid utf-8");
		break;
	case json_error_out_of_memory:
		comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
		break;
	default:
		comb_fail(errbuf, errlen, COMB_EINVAL, "invalid json");
		break;
	}
	return NULL;
}

const char *comb_json_get_string(const json_t *obj, const char *key)
{
	if (!json_is_object(obj))
		return NULL;
	return json_string_value(json_object_get(obj, key));
}
