/*
 * Envelope checks of artifact revisions (see proto.h). Pure:
 * no database and no transport, only the event's tags and content.
 */
#include <string.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/uuid.h"
#include "proto.h"
#include "protocol_limits.h"

/* The tags that make up the envelope; each may occur at most once with
 * exactly two elements. title is not an envelope tag (a delete has none)
 * but obeys the same once-only rule. */
static const char *const envelope_names[] = {
	"ar", "d", "h", "type", "op", "root", "prev",
};
#define ENVELOPE_NAMES (sizeof(envelope_names) / sizeof(envelope_names[0]))

static const char *const op_names[] = {
	"create", "update", "move", "delete", "restore",
};

const char *artifact_op_name(enum artifact_op op)
{
	if ((unsigned)op >= sizeof(op_names) / sizeof(op_names[0]))
		return "unknown";
	return op_names[op];
}

static bool is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

bool artifact_type_is_valid(const char *type)
{
	size_t len = strlen(type), i;
	bool component_start = true, dot = false;

	if (len == 0 || len > ARTIFACT_MAX_TYPE_BYTES)
		return false;
	for (i = 0; i < len; i++) {
		char c = type[i];

		if (component_start) {
			if (!is_lower(c))
				return false;
			component_start = false;
		} else if (c == '.') {
			dot = true;
			component_start = true;
		} else if (!is_lower(c) && !(c >= '0' && c <= '9') &&
			   c != '_' && c != '-') {
			return false;
		}
	}
	return dot && !component_start;
}

static int envelope_index(const char *name)
{
	size_t i;

	for (i = 0; i < ENVELOPE_NAMES; i++)
		if (!strcmp(name, envelope_names[i]))
			return (int)i;
	return -1;
}

/* True when s holds something other than ASCII whitespace. */
static bool is_blank(const char *s)
{
	for (; *s; s++)
		if (!strchr(" \t\n\r\f\v", *s))
			return false;
	return true;
}

/* Checks the size limits of every tag. */
static int check_sizes(const struct comb_event *ev, char *errbuf,
		       size_t errlen)
{
	size_t i, j, total = 0;

	for (i = 0; i < json_array_size(ev->tags); i++) {
		json_t *tag = json_array_get(ev->tags, i);

		for (j = 0; j < json_array_size(tag); j++) {
			size_t len = json_string_length(json_array_get(tag, j));

			if (j == 0 && len > COMB_MAX_TAG_NAME_BYTES)
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "tag name longer than %d bytes",
						 COMB_MAX_TAG_NAME_BYTES);
			if (j > 0 && len > COMB_MAX_TAG_VALUE_BYTES)
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "tag value longer than %d bytes",
						 COMB_MAX_TAG_VALUE_BYTES);
			total += len;
		}
	}
	if (total > COMB_MAX_TAG_BYTES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "tags longer than %d bytes in all",
				 COMB_MAX_TAG_BYTES);
	return 0;
}

/* Collects the envelope tags (and title) into values, refusing repeats and
 * wrong arities. Sets *client_tags when any other tag is present. */
static int collect(const struct comb_event *ev, const char *values[ENVELOPE_NAMES],
		   const char **title, bool *client_tags, char *errbuf,
		   size_t errlen)
{
	bool seen_title = false;
	size_t i;

	*client_tags = false;
	*title = NULL;
	for (i = 0; i < json_array_size(ev->tags); i++) {
		json_t *tag = json_array_get(ev->tags, i);
		const char *name = json_string_value(json_array_get(tag, 0));
		int k = envelope_index(name);
		bool is_title = !strcmp(name, "title");

		if (k < 0 && !is_title) {
			*client_tags = true;
			continue;
		}
		if ((k >= 0 && values[k]) || (is_title && seen_title))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "duplicate %s tag", name);
		if (json_array_size(tag) != 2)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s tag must have exactly two elements",
					 name);
		if (is_title) {
			seen_title = true;
			*title = json_string_value(json_array_get(tag, 1));
		} else {
			values[k] = json_string_value(json_array_get(tag, 1));
		}
	}
	return 0;
}

static int parse_op(const char *s, enum artifact_op *op)
{
	size_t i;

	for (i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++) {
		if (!strcmp(s, op_names[i])) {
			*op = (enum artifact_op)i;
			return 0;
		}
	}
	return -1;
}

int artifact_envelope_check(const struct comb_event *ev,
			    struct artifact_envelope *env, char *errbuf,
			    size_t errlen)
{
	const char *v[ENVELOPE_NAMES] = {0};
	const char *title;
	bool client_tags;
	int rc;

	memset(env, 0, sizeof(*env));
	rc = check_sizes(ev, errbuf, errlen);
	if (rc)
		return rc;
	rc = collect(ev, v, &title, &client_tags, errbuf, errlen);
	if (rc)
		return rc;
	/* v[]: 0 ar, 1 d, 2 h, 3 type, 4 op, 5 root, 6 prev */
	if (!v[0])
		return comb_fail(errbuf, errlen, COMB_EINVAL, "missing ar tag");
	if (strcmp(v[0], "1"))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "ar must be 1");
	if (!v[1])
		return comb_fail(errbuf, errlen, COMB_EINVAL, "missing d tag");
	if (!comb_uuid_is_canonical(v[1]))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "d must be a canonical non-nil uuid");
	if (!v[2])
		return comb_fail(errbuf, errlen, COMB_EINVAL, "missing h tag");
	if (!comb_uuid_is_canonical(v[2]))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "h must be a canonical channel uuid");
	if (!v[3])
		return comb_fail(errbuf, errlen, COMB_EINVAL, "missing type tag");
	if (!artifact_type_is_valid(v[3]))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "type must be dot-separated lowercase components of at most %d bytes",
				 ARTIFACT_MAX_TYPE_BYTES);
	if (!v[4])
		return comb_fail(errbuf, errlen, COMB_EINVAL, "missing op tag");
	if (parse_op(v[4], &env->op))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "op must be create, update, move, delete or restore");
	if (v[5] && !comb_hex_is_lower(v[5], 64))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "root must be 64 lowercase hex characters");
	if (v[6] && !comb_hex_is_lower(v[6], 64))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "prev must be 64 lowercase hex characters");
	if (env->op == ARTIFACT_CREATE && v[6])
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "create must not have a prev tag");
	if (env->op != ARTIFACT_CREATE && !v[6])
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s needs a prev tag", v[4]);
	if (env->op == ARTIFACT_DELETE) {
		if (title)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "delete must not have a title");
		if (ev->content_len)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "delete must have empty content");
		if (client_tags)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "delete carries only envelope tags");
	} else {
		if (!title)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "missing title tag");
		if (is_blank(title))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "title must not be blank");
		if (strlen(title) > ARTIFACT_MAX_TITLE_BYTES)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "title longer than %d bytes",
					 ARTIFACT_MAX_TITLE_BYTES);
	}
	env->d = v[1];
	env->h = v[2];
	env->type = v[3];
	env->title = title;
	env->root = v[5];
	env->prev = v[6];
	return 0;
}
