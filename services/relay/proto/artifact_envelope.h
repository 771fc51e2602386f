/*
 * The envelope of an artifact revision (PROTOCOL.md section 5): the pure
 * checks of its tags and content that need no database, so that they can
 * be tested alone. Everything that depends on stored state (identity,
 * prev, permissions, root) is checked by artifact_write.c.
 */
#ifndef COMB_ARTIFACT_ENVELOPE_H
#define COMB_ARTIFACT_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>

#include "comb/event.h"

#define ARTIFACT_MAX_TYPE_BYTES 128
#define ARTIFACT_MAX_TITLE_BYTES 512

enum artifact_op {
	ARTIFACT_CREATE = 0,
	ARTIFACT_UPDATE = 1,
	ARTIFACT_MOVE = 2,
	ARTIFACT_DELETE = 3,
	ARTIFACT_RESTORE = 4,
};

/* The envelope tags of one revision; strings are borrowed from the event's
 * tags and stay valid while the event lives. root and prev are NULL when
 * absent, title is NULL on a delete. */
struct artifact_envelope {
	enum artifact_op op;
	const char *d;
	const char *h;
	const char *type;
	const char *title;
	const char *root;
	const char *prev;
};

/*
 * Checks ev (a kind-45010 event whose shape comb_event_parse accepted)
 * against every envelope rule: ar, d, h, type, op, root, prev and title,
 * each envelope tag at most once with exactly two elements, prev exactly
 * when op is not create, the delete form (no title, empty content, only
 * envelope tags), and the tag size limits. On success fills env and
 * returns 0; otherwise returns COMB_EINVAL with the reason (lowercase,
 * without the "invalid: " prefix) in errbuf.
 */
int artifact_envelope_check(const struct comb_event *ev,
			    struct artifact_envelope *env, char *errbuf,
			    size_t errlen);

/* The op's wire name ("create", ...). */
const char *artifact_op_name(enum artifact_op op);

/* True when type is dot-separated lowercase components (a letter first,
 * then letters, digits, '_' or '-'), at least one dot, at most 128 bytes. */
bool artifact_type_is_valid(const char *type);

#endif
