/*
 * What a sync of either kind (current.c and apply.c's `current` syncs,
 * resume.c's resumable ones) asks (see sync_int.h): the keys its filter
 * may hold, whether a channel or type is its own, its community's access
 * epoch; and the table of the kinds.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "sync.h"
#include "sync_int.h"

int sync_cmp_channel(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int sync_cmp_type(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct comb_db_stmt sync_epochs_stmt = COMB_DB_STMT(
	"SELECT id, access_epoch, (SELECT " COMB_READ_POSITION_SQL ")"
	" FROM communities WHERE id = ANY ($1::bigint[])", 1);

comb_lsn sync_epochs_position(const PGresult *epochs)
{
	comb_lsn at = 0;

	if (PQntuples(epochs) > 0)
		comb_lsn_parse(PQgetvalue(epochs, 0, 2), &at);
	return at;
}

bool sync_has_channel(const struct sync_sub *sub, const char *channel)
{
	return bsearch(channel, sub->channels, sub->nchannels,
		       sizeof(sub->channels[0]), sync_cmp_channel) != NULL;
}

bool sync_has_type(const struct sync_sub *sub, const char *type)
{
	return !sub->types ||
	       bsearch(&type, sub->types, sub->ntypes, sizeof(*sub->types), sync_cmp_type);
}

int sync_check_keys(const json_t *filter, const char *const *keys, const char *what,
		    const char *allowed, char *why, size_t whylen)
{
	const char *key;
	json_t *value;
	size_t i;

	json_object_foreach((json_t *)filter, key, value) {
		(void)value;
		for (i = 0; keys[i] && strcmp(keys[i], key); i++)
			;
		if (keys[i])
			continue;
		if (!strcmp(key, "limit") || !strcmp(key, "offset"))
			return comb_fail(why, whylen, COMB_EINVAL,
					 "invalid: %s takes no %s", what, key);
		return comb_fail(why, whylen, COMB_EINVAL,
				 "invalid: %s filter may hold only %s", what, allowed);
	}
	return 0;
}

const struct hub_kind *const sync_kinds[SYNC_KINDS] = {
	&sync_current_kind, &sync_changes_kind,
};
