/*
 * Strict JSON input on top of jansson: the size limit is checked before any
 * parsing, the whole buffer must be exactly one value (trailing bytes are an
 * error), duplicate object keys are refused, NUL is allowed inside strings
 * (callers decide where it may appear) and invalid UTF-8 is refused by
 * jansson itself.
 */
#include "comb/json.h"

#include "comb/error.h"

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
