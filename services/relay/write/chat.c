/*
 * Chat messages (kind 9) and deletion requests (kind 5), PROTOCOL.md
 * sections 3 and 10. A message is stored in its channel `h` when the
 * policy lets the author write there; a deletion marks the author's own
 * messages deleted (withheld from every read) and is itself stored. In a
 * group-commit batch, a run of messages is decided on one load of their
 * facts and stored with one statement (write_chat_run).
 */
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/uuid.h"
#include "write.h"
#include "write_int.h"

/* The answer to a message in a channel its author may not write to. */
static const char not_member[] = "restricted: not a channel member";

/* Refuses a channel tag unless there is exactly one canonical h (or, with
 * optional, none). Returns false when out was set. */
static bool check_channel_tag(const struct comb_event *ev, bool optional,
			      struct write_result *out)
{
	size_t n = comb_event_tag_count(ev, "h");
	const char *h = comb_event_tag_value(ev, "h");

	if (optional && n == 0)
		return true;
	if (n != 1 || !h) {
		write_refuse(out, 400, "invalid: %s", optional ?
			     "a deletion names at most one h tag" :
			     "chat messages need exactly one h tag");
		return false;
	}
	if (!comb_uuid_is_canonical(h)) {
		write_refuse(out, 400, "invalid: h must be a canonical channel uuid");
		return false;
	}
	return true;
}

/*
 * Inside an open transaction: locks channel h and checks that the author
 * may write there. Returns false when out was set (the transaction is then
 * rolled back).
 */
static bool lock_writable(struct writer *w, const struct comb_event *ev,
			  const char *h, struct write_result *out)
{
	struct channel_row channel;
	struct actor actor;

	if (access_load_actor(w->relay->db, w->db, w->community, ev->pubkey, &actor) ||
	    access_load_channel(w->db, w->community, h, &actor, true, ACCESS_LOCK_SHARE,
				&channel)) {
		write_db_failed(w, out);
		return false;
	}
	if (!access_allows(w->relay, &actor, COMB_ACT_WRITE, &channel, NULL)) {
		write_exec(w, "ROLLBACK");
		write_refuse(out, 403, "%s", not_member);
		return false;
	}
	return true;
}

/* Stores ev with channel h (or none) and commits. */
static void store_and_commit(struct writer *w, const struct comb_event *ev,
			     const char *h, struct write_result *out)
{
	bool inserted;

	if (write_store_event(w, ev, h, &inserted) || !write_exec(w, "COMMIT"))
		write_db_failed(w, out);
}

/* The checks of a chat message before the database: its created_at and
 * its one h tag. Returns false when out was set. */
static bool check_message(const struct writer *w, const struct comb_event *ev,
			  struct write_result *out)
{
	if (!write_is_fresh(w, ev)) {
		write_refuse(out, 400, "invalid: created_at is too far from the relay's clock");
		return false;
	}
	return check_channel_tag(ev, false, out);
}

void write_chat(struct writer *w, const struct comb_event *ev,
		struct write_result *out)
{
	const char *h = comb_event_tag_value(ev, "h");

	if (!check_message(w, ev, out))
		return;
	if (!write_exec(w, "BEGIN")) {
		write_db_failed(w, out);
		return;
	}
	if (!lock_writable(w, ev, h, out))
		return;
	store_and_commit(w, ev, h, out);
}

/* The messages of a run that passed check_message, with their facts. */
struct run_checked {
	size_t *item;                   /* index into the run's items */
	struct access_write *writes;
	struct actor *actors;
	struct channel_row *channels;
	const struct comb_event **evs;  /* the accepted ones from here on */
	const struct community **communities;
	const char **hs;
	bool *inserted;
};

static void run_checked_free(struct run_checked *r)
{
	free(r->item);
	free(r->writes);
	free(r->actors);
	free(r->channels);
	free(r->evs);
	free(r->communities);
	free(r->hs);
	free(r->inserted);
}

static int run_checked_alloc(struct run_checked *r, size_t n)
{
	r->item = calloc(n, sizeof(*r->item));
	r->writes = calloc(n, sizeof(*r->writes));
	r->actors = calloc(n, sizeof(*r->actors));
	r->channels = calloc(n, sizeof(*r->channels));
	r->evs = calloc(n, sizeof(*r->evs));
	r->communities = calloc(n, sizeof(*r->communities));
	r->hs = calloc(n, sizeof(*r->hs));
	r->inserted = calloc(n, sizeof(*r->inserted));
	return r->item && r->writes && r->actors && r->channels && r->evs &&
	       r->communities && r->hs && r->inserted ? 0 : COMB_ENOMEM;
}

int write_chat_run(struct writer *w, struct write_item *items, size_t n)
{
	struct run_checked r = {0};
	size_t i, checked = 0, accepted = 0;
	int rc = run_checked_alloc(&r, n);

	for (i = 0; i < n && rc == 0; i++) {
		if (!check_message(w, items[i].ev, items[i].out))
			continue;
		r.item[checked] = i;
		r.writes[checked++] = (struct access_write){
			.community = items[i].community,
			.pubkey = items[i].ev->pubkey,
			.channel_id = comb_event_tag_value(items[i].ev, "h"),
		};
	}
	if (rc == 0 && checked > 0)
		rc = access_load_writes(w->relay->db, w->db, r.writes, checked,
					r.actors, r.channels);
	for (i = 0; i < checked && rc == 0; i++) {
		struct write_item *it = &items[r.item[i]];

		if (!access_allows(w->relay, &r.actors[i], COMB_ACT_WRITE,
				   &r.channels[i], NULL)) {
			write_refuse(it->out, 403, "%s", not_member);
			continue;
		}
		r.item[accepted] = r.item[i];
		r.evs[accepted] = it->ev;
		r.communities[accepted] = it->community;
		r.hs[accepted++] = r.writes[i].channel_id;
	}
	if (rc == 0 && accepted > 0)
		rc = write_store_events(w, r.evs, r.communities, r.hs, accepted,
					r.inserted);
	for (i = 0; i < accepted && rc == 0; i++)
		write_item_deliver(&items[r.item[i]], r.inserted[i], r.hs[i]);
	run_checked_free(&r);
	return rc;
}

/* Appends the e targets of ev as a text[] literal; false when one is not
 * an event id or there is none (out set). */
static bool targets_literal(const struct comb_event *ev, struct comb_buf *lit,
			    struct write_result *out)
{
	size_t i, n = 0;
	int rc = comb_buf_putc(lit, '{');

	for (i = 0; i < json_array_size(ev->tags) && rc == 0; i++) {
		json_t *tag = json_array_get(ev->tags, i);
		const char *name = json_string_value(json_array_get(tag, 0));
		const char *value = json_string_value(json_array_get(tag, 1));

		if (strcmp(name, "e"))
			continue;
		if (!comb_hex_is_lower(value, 64)) {
			write_refuse(out, 400, "invalid: e tags must hold event ids");
			return false;
		}
		rc = comb_buf_printf(lit, "%s%s", n++ ? "," : "", value);
	}
	if (rc == 0)
		rc = comb_buf_putc(lit, '}');
	if (rc) {
		write_refuse(out, 503, "error: out of memory");
		return false;
	}
	if (n == 0) {
		write_refuse(out, 400, "invalid: a deletion needs at least one e tag");
		return false;
	}
	return true;
}

/*
 * Refuses the deletion when a target is an artifact revision or someone
 * else's event in a channel the signer can read (h, when given, names an
 * unlisted channel); targets the signer cannot read are ignored exactly
 * like unknown ids, so that a kind 5 never reveals whether an event
 * exists (PROTOCOL.md section 10). Locks the readable targets. Returns
 * false after ending the transaction and setting out.
 */
static bool check_targets(struct writer *w, const struct comb_event *ev,
			  const char *targets, const char *h,
			  struct write_result *out)
{
	char keys[ACCESS_KEYS_LITERAL];
	bool artifact = false, foreign = false;
	struct actor actor;
	PGresult *res;
	int i;

	if (access_load_actor(w->relay->db, w->db, w->community, ev->pubkey, &actor)) {
		write_db_failed(w, out);
		return false;
	}
	access_read_keys_literal(w->relay, &actor, keys);
	res = PQexecParams(w->db,
		"SELECT e.pubkey, e.kind FROM events e"
		" LEFT JOIN channels c ON c.community_id = e.community_id AND c.id = e.channel_id"
		" LEFT JOIN members m ON m.community_id = e.community_id"
		"  AND m.channel_id = e.channel_id AND m.pubkey = $3 AND m.active"
		" WHERE e.community_id = $1 AND e.id = ANY($2::text[])"
		/* outside any channel, only the author reads an event
		 * (read/query.c) */
		"  AND (CASE WHEN e.channel_id IS NULL THEN e.pubkey = $3"
		"   ELSE comb_read_key(c.visibility, c.is_dm, c.deleted,"
		"    c.archived, m.role, c.id IS NOT DISTINCT FROM $5::uuid)"
		"    = ANY($4::int[]) END)"
		" ORDER BY e.id FOR UPDATE OF e",
		5, NULL,
		(const char *const[]){w->community->id_text, targets, ev->pubkey, keys, h},
		NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		PQclear(res);
		write_db_failed(w, out);
		return false;
	}
	for (i = 0; i < PQntuples(res); i++) {
		const char *kind = PQgetvalue(res, i, 1);

		if (!strcmp(kind, "45010") || !strcmp(kind, "45011"))
			artifact = true;
		else if (strcmp(PQgetvalue(res, i, 0), ev->pubkey))
			foreign = true;
	}
	PQclear(res);
	if (artifact || foreign) {
		write_exec(w, "ROLLBACK");
		if (artifact)
			write_refuse(out, 400, "invalid: artifacts cannot be deleted with kind 5");
		else
			write_refuse(out, 403, "restricted: cannot delete someone else's event");
		return false;
	}
	return true;
}

void write_deletion(struct writer *w, const struct comb_event *ev,
		    struct write_result *out)
{
	const char *h = comb_event_tag_value(ev, "h");
	struct comb_buf targets;
	PGresult *res;

	comb_buf_init(&targets, (size_t)COMB_EVENT_MAX_TAGS * 66 + 4);
	if (!write_is_fresh(w, ev)) {
		write_refuse(out, 400, "invalid: created_at is too far from the relay's clock");
		goto out;
	}
	if (!check_channel_tag(ev, true, out) || !targets_literal(ev, &targets, out))
		goto out;
	if (!write_exec(w, "BEGIN")) {
		write_db_failed(w, out);
		goto out;
	}
	if (h && !lock_writable(w, ev, h, out))
		goto out;
	if (!check_targets(w, ev, targets.data, h, out))
		goto out;
	res = PQexecParams(w->db,
		"UPDATE events SET deleted = true WHERE community_id = $1"
		" AND id = ANY($2::text[]) AND pubkey = $3 AND kind = 9",
		3, NULL,
		(const char *const[]){w->community->id_text, targets.data, ev->pubkey},
		NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		PQclear(res);
		write_db_failed(w, out);
		goto out;
	}
	PQclear(res);
	store_and_commit(w, ev, h, out);
out:
	comb_buf_release(&targets);
}
