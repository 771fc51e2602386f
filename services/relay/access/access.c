/*
 * Access decisions over the database's facts (see access.h). The channel
 * facts are the finite ones of comb/policy.h; nothing else reaches a
 * plugin.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "comb/buf.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"

static int to_int(const char *s)
{
	return (int)strtol(s, NULL, 10);
}

int access_load_actor(struct comb_db_pool *pool, PGconn *db,
		      const struct community *c, const char *pubkey,
		      struct actor *out)
{
	bool failed;

	memset(out, 0, sizeof(*out));
	snprintf(out->pubkey, sizeof(out->pubkey), "%s", pubkey);
	out->community_admin = community_is_admin(pool, db, c, pubkey, &failed);
	return failed ? COMB_EUNAVAIL : 0;
}

/* Fills channel from columns col.. of row i: visibility, is_dm, archived,
 * deleted, ttl, the actor's role (NULL for none). */
static void channel_from_row(PGresult *res, int i, int col, bool named,
			     struct channel_row *out)
{
	out->exists = true;
	out->facts.visibility = (enum comb_visibility)to_int(PQgetvalue(res, i, col));
	out->facts.is_dm = PQgetvalue(res, i, col + 1)[0] == 't';
	out->facts.archived = PQgetvalue(res, i, col + 2)[0] == 't';
	out->facts.deleted = PQgetvalue(res, i, col + 3)[0] == 't';
	out->ttl = to_int(PQgetvalue(res, i, col + 4));
	out->facts.role = PQgetisnull(res, i, col + 5) ? COMB_ROLE_NONE :
		(enum comb_role)to_int(PQgetvalue(res, i, col + 5));
	out->facts.named = named;
}

int access_load_channel(PGconn *db, const struct community *c,
			const char *channel_id, const struct actor *actor,
			bool named, enum access_lock lock,
			struct channel_row *out)
{
	static const char *const lock_clause[] = {
		[ACCESS_LOCK_NONE] = "",
		[ACCESS_LOCK_UPDATE] = " FOR UPDATE OF c",
		[ACCESS_LOCK_SHARE] = " FOR SHARE OF c",
	};
	char sql[1024];
	const char *params[3] = {c->id_text, channel_id, actor->pubkey};
	PGresult *res;

	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", channel_id);
	snprintf(sql, sizeof(sql),
		 "SELECT c.visibility, c.is_dm, c.archived, c.deleted, coalesce(c.ttl, 0),"
		 " (SELECT m.role FROM members m WHERE m.community_id = c.community_id"
		 "   AND m.channel_id = c.id AND m.pubkey = $3 AND m.active),"
		 " (SELECT count(*) FROM members o WHERE o.community_id = c.community_id"
		 "   AND o.channel_id = c.id AND o.active AND o.role = 3)"
		 " FROM channels c WHERE c.community_id = $1 AND c.id = $2::uuid%s",
		 lock_clause[lock]);
	res = PQexecParams(db, sql, 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		PQclear(res);
		return COMB_EUNAVAIL;
	}
	if (PQntuples(res) == 1) {
		channel_from_row(res, 0, 0, named, out);
		out->owners = to_int(PQgetvalue(res, 0, 6));
	}
	PQclear(res);
	return 0;
}

int access_load_writes(struct comb_db_pool *pool, PGconn *db,
		       const struct access_write *writes, size_t n,
		       struct actor *actors, struct channel_row *channels)
{
	static struct comb_db_stmt load = COMB_DB_STMT(
		"WITH locked AS MATERIALIZED ("
		" SELECT c.community_id, c.id, c.visibility, c.is_dm, c.archived,"
		"  c.deleted, coalesce(c.ttl, 0) AS ttl FROM channels c"
		" WHERE (c.community_id, c.id) IN"
		"  (SELECT * FROM unnest($1::bigint[], $3::uuid[]))"
		" ORDER BY c.community_id, c.id FOR SHARE OF c)"
		" SELECT EXISTS (SELECT 1 FROM community_admins a"
		"   WHERE a.community_id = w.community_id AND a.pubkey = w.pubkey),"
		"  l.id IS NOT NULL, l.visibility, l.is_dm, l.archived, l.deleted, l.ttl,"
		"  (SELECT m.role FROM members m WHERE m.community_id = w.community_id"
		"    AND m.channel_id = w.channel_id AND m.pubkey = w.pubkey AND m.active)"
		" FROM unnest($1::bigint[], $2::text[], $3::uuid[]) WITH ORDINALITY"
		"  AS w(community_id, pubkey, channel_id, ord)"
		" LEFT JOIN locked l ON l.community_id = w.community_id"
		"  AND l.id = w.channel_id"
		" ORDER BY w.ord", 3);
	struct comb_buf lit[3];
	PGresult *res = NULL;
	size_t i;
	int rc = 0, k;

	for (k = 0; k < 3; k++) {
		comb_buf_init(&lit[k], n * 70 + 2);
		rc = rc ? rc : comb_buf_putc(&lit[k], '{');
	}
	for (i = 0; i < n && rc == 0; i++) {
		rc = comb_buf_pg_array_item(&lit[0], writes[i].community->id_text);
		rc = rc ? rc : comb_buf_pg_array_item(&lit[1], writes[i].pubkey);
		rc = rc ? rc : comb_buf_pg_array_item(&lit[2], writes[i].channel_id);
	}
	for (k = 0; k < 3 && rc == 0; k++)
		rc = comb_buf_putc(&lit[k], '}');
	if (rc) {
		rc = COMB_ENOMEM;
		goto out;
	}
	res = comb_db_exec_stmt(pool, db, &load,
		(const char *const[]){lit[0].data, lit[1].data, lit[2].data});
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != (int)n) {
		rc = COMB_EUNAVAIL;
		goto out;
	}
	for (i = 0; i < n; i++) {
		memset(&actors[i], 0, sizeof(actors[i]));
		snprintf(actors[i].pubkey, sizeof(actors[i].pubkey), "%s", writes[i].pubkey);
		actors[i].community_admin = PQgetvalue(res, (int)i, 0)[0] == 't';
		memset(&channels[i], 0, sizeof(channels[i]));
		snprintf(channels[i].id, sizeof(channels[i].id), "%s", writes[i].channel_id);
		if (PQgetvalue(res, (int)i, 1)[0] == 't')
			channel_from_row(res, (int)i, 2, true, &channels[i]);
	}
out:
	PQclear(res);
	for (k = 0; k < 3; k++)
		comb_buf_release(&lit[k]);
	return rc;
}

bool access_allows(const struct relay *relay, const struct actor *actor,
		   enum comb_action action, const struct channel_row *channel,
		   const struct comb_policy_request *extra)
{
	struct comb_policy_actor pa = {
		.pubkey = actor->pubkey,
		.community_admin = actor->community_admin,
	};
	struct comb_policy_request req = {0};

	if (extra)
		req = *extra;
	req.size = sizeof(req);
	req.action = action;
	req.actor = &pa;
	if (action != COMB_ACT_CREATE_CHANNEL) {
		if (!channel || !channel->exists)
			return false;
		req.channel = &channel->facts;
	}
	return comb_policy_allows(relay->policy, &req);
}

/* At most 96 named fact sets, 2 admin and 2 creator states, 4 digits and
 * a comma each. */
_Static_assert(96 * 2 * 2 * 5 + 2 < ACCESS_ACTION_KEYS_LITERAL,
	       "action keys literal too small");

void access_action_keys_literal(const struct relay *relay, const char *pubkey,
				enum comb_action action,
				char out[ACCESS_ACTION_KEYS_LITERAL])
{
	int flags = action == COMB_ACT_DELETE_ARTIFACT ? 2 : 1;
	struct comb_policy_request extra = {0};
	struct channel_row ch = {.exists = true};
	struct actor actor;
	size_t used = 0;
	int admin, creator, k;

	snprintf(actor.pubkey, sizeof(actor.pubkey), "%s", pubkey);
	out[used++] = '{';
	for (admin = 0; admin < 2; admin++) {
		actor.community_admin = admin;
		for (creator = 0; creator < flags; creator++) {
			extra.actor_is_creator = creator;
			for (k = 0; k < COMB_POLICY_READ_KEYS; k++) {
				/* Writes name their channel; visibility 3
				 * is no channel at all. */
				if (!((k >> 7) & 1) || (k & 3) > COMB_VIS_PRIVATE)
					continue;
				ch.facts.visibility = (enum comb_visibility)(k & 3);
				ch.facts.is_dm = (k >> 2) & 1;
				ch.facts.deleted = (k >> 3) & 1;
				ch.facts.archived = (k >> 4) & 1;
				ch.facts.role = (enum comb_role)((k >> 5) & 3);
				ch.facts.named = 1;
				if (!access_allows(relay, &actor, action, &ch, &extra))
					continue;
				used += (size_t)snprintf(out + used,
					ACCESS_ACTION_KEYS_LITERAL - used, "%s%d",
					used > 1 ? "," : "",
					k + admin * ACCESS_KEY_ADMIN +
					creator * ACCESS_KEY_CREATOR);
			}
		}
	}
	snprintf(out + used, ACCESS_ACTION_KEYS_LITERAL - used, "}");
}

void access_read_keys_literal(const struct relay *relay,
			      const struct actor *actor,
			      char out[ACCESS_KEYS_LITERAL])
{
	struct comb_policy_actor pa = {
		.pubkey = actor->pubkey,
		.community_admin = actor->community_admin,
	};
	int keys[COMB_POLICY_READ_KEYS], count, i;
	size_t used = 0;

	comb_policy_read_keys(relay->policy, &pa, keys, &count);
	out[used++] = '{';
	for (i = 0; i < count; i++)
		used += (size_t)snprintf(out + used, ACCESS_KEYS_LITERAL - used,
					 "%s%d", i ? "," : "", keys[i]);
	snprintf(out + used, ACCESS_KEYS_LITERAL - used, "}");
}

void access_readable_sql(char *out, size_t outlen, int named_param,
			 int keys_param)
{
	snprintf(out, outlen,
		 "comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,"
		 " m.role, c.id = ANY($%d::uuid[])) = ANY($%d::int[])",
		 named_param, keys_param);
}

void access_member_join_sql(char *out, size_t outlen, int reader_param)
{
	snprintf(out, outlen,
		 "LEFT JOIN members m ON m.community_id = c.community_id"
		 " AND m.channel_id = c.id AND m.pubkey = $%d AND m.active",
		 reader_param);
}

/* Sets the bit of every key the plugins list for pubkey (admin or not). */
static void fill_keys(const struct relay *relay, const char *pubkey, bool admin,
		      uint8_t bits[ACCESS_KEY_BYTES])
{
	struct comb_policy_actor pa = {.pubkey = pubkey, .community_admin = admin};
	int keys[COMB_POLICY_READ_KEYS], count, i;

	comb_policy_read_keys(relay->policy, &pa, keys, &count);
	memset(bits, 0, ACCESS_KEY_BYTES);
	for (i = 0; i < count; i++)
		if (keys[i] >= 0 && keys[i] < COMB_POLICY_READ_KEYS)
			bits[keys[i] / 8] |= (uint8_t)(1u << (keys[i] % 8));
}

void reader_access_init(struct reader_access *ra, const struct relay *relay,
			int64_t community_id, const char *pubkey)
{
	ra->community_id = community_id;
	snprintf(ra->pubkey, sizeof(ra->pubkey), "%s", pubkey);
	fill_keys(relay, pubkey, false, ra->member_keys);
	fill_keys(relay, pubkey, true, ra->admin_keys);
	atomic_init(&ra->admin, false);
	atomic_init(&ra->generation, 0);
}

bool reader_access_readable(const struct reader_access *ra, int key)
{
	const uint8_t *bits = atomic_load(&ra->admin) ? ra->admin_keys
						      : ra->member_keys;

	return key >= 0 && key < COMB_POLICY_READ_KEYS &&
	       (bits[key / 8] >> (key % 8)) & 1;
}

void reader_access_literal(const struct reader_access *ra,
			   char out[ACCESS_KEYS_LITERAL])
{
	const uint8_t *bits = atomic_load(&ra->admin) ? ra->admin_keys
						      : ra->member_keys;
	size_t used = 0;
	int k;

	out[used++] = '{';
	for (k = 0; k < COMB_POLICY_READ_KEYS; k++) {
		if (!((bits[k / 8] >> (k % 8)) & 1))
			continue;
		used += (size_t)snprintf(out + used, ACCESS_KEYS_LITERAL - used,
					 "%s%d", used > 1 ? "," : "", k);
	}
	snprintf(out + used, ACCESS_KEYS_LITERAL - used, "}");
}

/* A probe in the order that puts equal (community, channel, reader)
 * side by side. */
struct probe_ref {
	const struct access_probe *probe;
	size_t index;
};

static int cmp_probe(const void *a, const void *b)
{
	const struct access_probe *x = ((const struct probe_ref *)a)->probe;
	const struct access_probe *y = ((const struct probe_ref *)b)->probe;
	int c;

	if (x->community != y->community)
		return x->community < y->community ? -1 : 1;
	c = strcmp(x->channel, y->channel);
	return c ? c : strcmp(x->reader, y->reader);
}

/*
 * Numbers the distinct (community, channel, reader) of probes from 0 into
 * group[] and appends one array element per group. Syncs of one reader
 * and channel (a user's tabs and devices) then cost one row. Returns the
 * number of groups, or 0 when out of memory.
 */
static size_t group_probes(const struct access_probe *probes, size_t n,
			   size_t *group, struct comb_buf *cids,
			   struct comb_buf *chans, struct comb_buf *readers)
{
	struct probe_ref *refs = malloc(n * sizeof(*refs));
	size_t i, groups = 0;
	int rc;

	if (!refs)
		return 0;
	for (i = 0; i < n; i++)
		refs[i] = (struct probe_ref){.probe = &probes[i], .index = i};
	qsort(refs, n, sizeof(*refs), cmp_probe);
	rc = comb_buf_putc(cids, '{');
	rc = rc ? rc : comb_buf_putc(chans, '{');
	rc = rc ? rc : comb_buf_putc(readers, '{');
	for (i = 0; i < n && rc == 0; i++) {
		const struct access_probe *p = refs[i].probe;
		const char *sep = groups ? "," : "";

		if (i && cmp_probe(&refs[i - 1], &refs[i]) == 0) {
			group[refs[i].index] = groups - 1;
			continue;
		}
		group[refs[i].index] = groups++;
		rc = comb_buf_printf(cids, "%s%" PRId64, sep, p->community);
		rc = rc ? rc : comb_buf_printf(chans, "%s%s", sep, p->channel);
		rc = rc ? rc : comb_buf_printf(readers, "%s%s", sep, p->reader);
	}
	rc = rc ? rc : comb_buf_putc(cids, '}');
	rc = rc ? rc : comb_buf_putc(chans, '}');
	rc = rc ? rc : comb_buf_putc(readers, '}');
	free(refs);
	return rc ? 0 : groups;
}

static struct comb_db_stmt probe_stmt = COMB_DB_STMT(
	"SELECT q.i, c.visibility, c.is_dm, c.deleted, c.archived, m.role"
	" FROM unnest($1::bigint[], $2::uuid[], $3::text[]) WITH ORDINALITY"
	"  AS q(cid, ch, pk, i)"
	" JOIN channels c ON c.community_id = q.cid AND c.id = q.ch"
	" LEFT JOIN members m ON m.community_id = q.cid AND m.channel_id = q.ch"
	"  AND m.pubkey = q.pk AND m.active", 3);

int access_probe_all(struct comb_db_pool *dbs, PGconn *db,
		     struct access_probe *probes, size_t n, const char *then,
		     bool *budget)
{
	struct comb_buf cids, chans, readers;
	PGresult *results[2] = {NULL, NULL}, *res;
	size_t i, groups, *group = NULL;
	/* per group: its channel's facts, found false without a channel */
	struct group_facts {
		struct comb_policy_channel facts;
		bool found;
	} *found = NULL;
	int rc = 0, row;

	*budget = false;
	for (i = 0; i < n; i++)
		probes[i].readable = false;
	if (n == 0)
		return then && comb_db_exec(db, then, NULL, 0) ? COMB_EUNAVAIL : 0;
	comb_buf_init(&cids, n * 24 + 8);
	comb_buf_init(&chans, n * 40 + 8);
	comb_buf_init(&readers, n * 68 + 8);
	group = malloc(n * sizeof(*group));
	found = calloc(n, sizeof(*found));
	groups = group && found ? group_probes(probes, n, group, &cids, &chans, &readers) : 0;
	if (groups == 0) {
		rc = COMB_ENOMEM;
		goto out;
	}
	{
		const char *const params[] = {cids.data, chans.data, readers.data};
		const struct comb_db_step steps[] = {
			{.stmt = &probe_stmt, .params = params},
			{.sql = then},
		};

		rc = comb_db_exec_together(dbs, db, steps, then ? 2 : 1, results);
	}
	res = results[0];
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		*budget = comb_db_is_error(res, "57014");
		if (!*budget)
			comb_warn("access check failed: %s",
				  res ? PQresultErrorMessage(res) : PQerrorMessage(db));
		rc = COMB_EUNAVAIL;
		goto out;
	}
	if (rc)
		goto out;  /* then failed */
	for (row = 0; row < PQntuples(res); row++) {
		long g = strtol(PQgetvalue(res, row, 0), NULL, 10);
		struct comb_policy_channel *facts;

		if (g < 1 || (size_t)g > groups)
			continue;
		facts = &found[g - 1].facts;
		found[g - 1].found = true;
		facts->visibility = (enum comb_visibility)strtol(PQgetvalue(res, row, 1), NULL, 10);
		facts->is_dm = PQgetvalue(res, row, 2)[0] == 't';
		facts->deleted = PQgetvalue(res, row, 3)[0] == 't';
		facts->archived = PQgetvalue(res, row, 4)[0] == 't';
		facts->role = PQgetisnull(res, row, 5) ? COMB_ROLE_NONE :
			(enum comb_role)strtol(PQgetvalue(res, row, 5), NULL, 10);
	}
	for (i = 0; i < n; i++) {
		struct comb_policy_channel facts = found[group[i]].facts;

		facts.named = probes[i].named;
		probes[i].readable = found[group[i]].found &&
			reader_access_readable(probes[i].access, comb_policy_read_key(&facts));
	}
out:
	PQclear(results[0]);
	PQclear(results[1]);
	free(group);
	free(found);
	comb_buf_release(&cids);
	comb_buf_release(&chans);
	comb_buf_release(&readers);
	return rc;
}
