/*
 * Channel moderation (kinds 9000, 9001, 9002, 9005, 9007, 9008, 9021,
 * 9022; PROTOCOL.md sections 4 and 10). Each request is checked in three
 * steps: its tags (`invalid:`), the policy plugins' permission
 * (`restricted:`), then the invariants that are not permissions (the last
 * owner stays, a DM stays private, channel ids are unique). Changes and
 * the moderation event itself are written in one transaction that holds
 * the channel row locked, so moderation of one channel is serialized.
 *
 * A refusal never tells someone who cannot read a channel whether it
 * exists: they get `restricted: not a channel member`, as for a channel
 * that does not exist.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/uuid.h"
#include "protocol_limits.h"
#include "write.h"
#include "write_int.h"

#define FRESHNESS_MESSAGE "invalid: created_at is too far from the relay's clock"

/* A moderation request: its tags, checked, and the state it acts on. */
struct moderation {
	struct writer *w;
	const struct comb_event *ev;
	struct write_result *out;
	const char *h;
	struct actor actor;
	struct channel_row channel;
	/* from the tags; NULL or -1 when absent */
	const char *name;
	const char *target;     /* p (9000, 9001) or e (9005) */
	int visibility;
	int ttl;
	int archived;
	int role;
	bool dm;
};

static int parse_visibility(const char *s)
{
	if (!strcmp(s, "open"))
		return COMB_VIS_OPEN;
	if (!strcmp(s, "unlisted"))
		return COMB_VIS_UNLISTED;
	if (!strcmp(s, "private"))
		return COMB_VIS_PRIVATE;
	return -1;
}

static int parse_role(const char *s)
{
	if (!strcmp(s, "member"))
		return COMB_ROLE_MEMBER;
	if (!strcmp(s, "admin"))
		return COMB_ROLE_ADMIN;
	if (!strcmp(s, "owner"))
		return COMB_ROLE_OWNER;
	return -1;
}

/* Decimal seconds (digits only, at most INT_MAX); -1 when malformed. */
static int parse_ttl(const char *s)
{
	char *end;
	long v;

	if (!s[0] || s[0] < '0' || s[0] > '9' || strlen(s) > 10)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

/* Returns the value of the single tag name, NULL when absent; refuses a
 * repeated tag or one without a value (*bad set, out filled). */
static const char *single_tag(struct moderation *m, const char *name, bool *bad)
{
	size_t n = comb_event_tag_count(m->ev, name);
	const char *v = comb_event_tag_value(m->ev, name);

	if (n == 0)
		return NULL;
	if (n > 1 || !v) {
		write_refuse(m->out, 400, "invalid: expected one %s tag with a value", name);
		*bad = true;
		return NULL;
	}
	return v;
}

/* The name, visibility, ttl and archived tags of 9007 and 9002. */
static bool parse_metadata(struct moderation *m, bool create)
{
	const char *vis, *ttl, *archived;
	bool bad = false;

	m->name = single_tag(m, "name", &bad);
	vis = single_tag(m, "visibility", &bad);
	ttl = single_tag(m, "ttl", &bad);
	archived = create ? NULL : single_tag(m, "archived", &bad);
	if (bad)
		return false;
	if (m->name && (!m->name[0] || strlen(m->name) > COMB_MAX_TAG_VALUE_BYTES)) {
		write_refuse(m->out, 400, "invalid: name must be 1 to %d bytes",
			     COMB_MAX_TAG_VALUE_BYTES);
		return false;
	}
	if (vis && (m->visibility = parse_visibility(vis)) < 0) {
		write_refuse(m->out, 400, "invalid: visibility must be open, unlisted or private");
		return false;
	}
	if (ttl && ((m->ttl = parse_ttl(ttl)) < 0 || (create && m->ttl == 0))) {
		write_refuse(m->out, 400, create ?
			     "invalid: ttl must be a positive number of seconds" :
			     "invalid: ttl must be a number of seconds (0 clears it)");
		return false;
	}
	if (archived) {
		if (!strcmp(archived, "true"))
			m->archived = 1;
		else if (!strcmp(archived, "false"))
			m->archived = 0;
		else {
			write_refuse(m->out, 400, "invalid: archived must be true or false");
			return false;
		}
	}
	return true;
}

/* Every p tag of a DM names a pubkey. */
static bool check_participants(struct moderation *m)
{
	size_t i, n = 0;

	for (i = 0; i < json_array_size(m->ev->tags); i++) {
		json_t *tag = json_array_get(m->ev->tags, i);

		if (strcmp(json_string_value(json_array_get(tag, 0)), "p"))
			continue;
		if (!comb_hex_is_lower(json_string_value(json_array_get(tag, 1)), 64)) {
			write_refuse(m->out, 400, "invalid: p tags must hold pubkeys");
			return false;
		}
		n++;
	}
	if (n == 0) {
		write_refuse(m->out, 400, "invalid: a dm needs at least one p tag");
		return false;
	}
	return true;
}

static bool parse_create(struct moderation *m)
{
	const char *type;
	bool bad = false;

	type = single_tag(m, "type", &bad);
	if (bad || !parse_metadata(m, true))
		return false;
	if (!m->name) {
		write_refuse(m->out, 400, "invalid: a channel needs a name tag");
		return false;
	}
	if (type && strcmp(type, "stream") && strcmp(type, "dm")) {
		write_refuse(m->out, 400, "invalid: type must be stream or dm");
		return false;
	}
	m->dm = type && !strcmp(type, "dm");
	if (m->dm) {
		if (m->visibility >= 0 && m->visibility != COMB_VIS_PRIVATE) {
			write_refuse(m->out, 400, "invalid: a dm is always private");
			return false;
		}
		m->visibility = COMB_VIS_PRIVATE;
		return check_participants(m);
	}
	if (m->visibility < 0)
		m->visibility = COMB_VIS_OPEN;
	return true;
}

/* The single p tag of 9000 and 9001, and the role of 9000. */
static bool parse_user(struct moderation *m, bool put)
{
	json_t *p = comb_event_tag(m->ev, "p");
	const char *role_tag = NULL, *role_p = NULL;
	bool bad = false;

	if (comb_event_tag_count(m->ev, "p") != 1 ||
	    !comb_hex_is_lower(json_string_value(json_array_get(p, 1)), 64)) {
		write_refuse(m->out, 400, "invalid: expected one p tag holding a pubkey");
		return false;
	}
	m->target = json_string_value(json_array_get(p, 1));
	if (!put)
		return true;
	role_tag = single_tag(m, "role", &bad);
	if (bad)
		return false;
	role_p = json_string_value(json_array_get(p, 2));
	if (role_p && !role_p[0])
		role_p = NULL;
	if (role_p && role_tag && strcmp(role_p, role_tag)) {
		write_refuse(m->out, 400, "invalid: the p tag and the role tag disagree");
		return false;
	}
	if (!role_p)
		role_p = role_tag;
	m->role = role_p ? parse_role(role_p) : COMB_ROLE_MEMBER;
	if (m->role < 0) {
		write_refuse(m->out, 400, "invalid: role must be owner, admin or member");
		return false;
	}
	return true;
}

static bool parse_redaction(struct moderation *m)
{
	if (comb_event_tag_count(m->ev, "e") != 1 ||
	    !comb_hex_is_lower(comb_event_tag_value(m->ev, "e"), 64)) {
		write_refuse(m->out, 400, "invalid: expected one e tag holding an event id");
		return false;
	}
	m->target = comb_event_tag_value(m->ev, "e");
	return true;
}

/* Checks the tags of the request; false when out was set. */
static bool parse_request(struct moderation *m)
{
	switch (m->ev->kind) {
	case 9007:
		return parse_create(m);
	case 9000:
		return parse_user(m, true);
	case 9001:
		return parse_user(m, false);
	case 9002:
		if (!parse_metadata(m, false))
			return false;
		if (!m->name && m->visibility < 0 && m->ttl < 0 && m->archived < 0) {
			write_refuse(m->out, 400, "invalid: nothing to edit");
			return false;
		}
		return true;
	case 9005:
		return parse_redaction(m);
	default:
		return true;
	}
}

/* Ends the transaction with a refusal already in out. */
static void refuse(struct moderation *m)
{
	write_exec(m->w, "ROLLBACK");
}

/* Refuses a denied action: someone who cannot read the channel learns
 * nothing about it; a reader is told what was not allowed. */
static void deny(struct moderation *m, const char *what)
{
	if (access_allows(m->w->relay, &m->actor, COMB_ACT_READ, &m->channel, NULL))
		write_refuse(m->out, 403, "restricted: not allowed to %s", what);
	else
		write_refuse(m->out, 403, "restricted: not a channel member");
	refuse(m);
}

static bool allows(struct moderation *m, enum comb_action action,
		   const struct comb_policy_request *extra)
{
	return access_allows(m->w->relay, &m->actor, action, &m->channel, extra);
}

/* Runs a parameterized statement expecting no rows; false on failure. */
static bool exec_params(struct moderation *m, const char *sql, int n,
			const char *const *params)
{
	PGresult *res = PQexecParams(m->w->db, sql, n, NULL, params, NULL, NULL, 0);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		  PQresultStatus(res) == PGRES_TUPLES_OK;

	PQclear(res);
	return ok;
}

/* The active role of pubkey in the locked channel (COMB_ROLE_NONE when
 * removed or never added); -1 on a database failure. */
static int member_role(struct moderation *m, const char *pubkey)
{
	PGresult *res = PQexecParams(m->w->db,
		"SELECT role FROM members WHERE community_id = $1 AND channel_id = $2::uuid"
		" AND pubkey = $3 AND active",
		3, NULL, (const char *const[]){m->w->community->id_text, m->h, pubkey},
		NULL, NULL, 0);
	int role;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		role = -1;
	else if (PQntuples(res) == 0)
		role = COMB_ROLE_NONE;
	else
		role = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return role;
}

/* Adds pubkey with role, or restores and re-roles a removed member. */
static bool put_member(struct moderation *m, const char *pubkey, int role)
{
	char role_text[4] = {(char)('0' + role), '\0'};

	return exec_params(m,
		"INSERT INTO members (community_id, channel_id, pubkey, role)"
		" VALUES ($1, $2::uuid, $3, $4::smallint)"
		" ON CONFLICT (community_id, channel_id, pubkey)"
		" DO UPDATE SET role = EXCLUDED.role, active = true",
		4, (const char *const[]){m->w->community->id_text, m->h, pubkey, role_text});
}

static bool deactivate_member(struct moderation *m, const char *pubkey)
{
	return exec_params(m,
		"UPDATE members SET active = false WHERE community_id = $1"
		" AND channel_id = $2::uuid AND pubkey = $3",
		3, (const char *const[]){m->w->community->id_text, m->h, pubkey});
}

/* 9007: the channel row, its owner and a DM's participants. Returns 0,
 * 1 when refused (out set), -1 on a database failure. */
static int create_channel(struct moderation *m)
{
	struct comb_policy_request extra = {.is_dm = m->dm};
	char vis[4] = {(char)('0' + m->visibility), '\0'}, ttl[16], created[24];
	size_t i;
	PGresult *res;
	int rc;

	if (!access_allows(m->w->relay, &m->actor, COMB_ACT_CREATE_CHANNEL, NULL, &extra)) {
		write_refuse(m->out, 403, "restricted: not allowed to create channels");
		refuse(m);
		return 1;
	}
	snprintf(ttl, sizeof(ttl), "%d", m->ttl);
	snprintf(created, sizeof(created), "%lld", (long long)m->ev->created_at);
	res = PQexecParams(m->w->db,
		"INSERT INTO channels (community_id, id, name, is_dm, visibility, ttl,"
		" created_by, created_at)"
		" VALUES ($1, $2::uuid, $3, $4::boolean, $5::smallint, $6::integer, $7, $8)"
		" ON CONFLICT (community_id, id) DO NOTHING RETURNING 1",
		8, NULL,
		(const char *const[]){m->w->community->id_text, m->h, m->name,
				      m->dm ? "true" : "false", vis,
				      m->ttl > 0 ? ttl : NULL, m->ev->pubkey, created},
		NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		PQclear(res);
		return -1;
	}
	rc = PQntuples(res);
	PQclear(res);
	if (rc == 0) {
		write_refuse(m->out, 400, "invalid: channel already exists");
		refuse(m);
		return 1;
	}
	if (!put_member(m, m->ev->pubkey, COMB_ROLE_OWNER))
		return -1;
	for (i = 0; m->dm && i < json_array_size(m->ev->tags); i++) {
		json_t *tag = json_array_get(m->ev->tags, i);
		const char *pk = json_string_value(json_array_get(tag, 1));

		if (strcmp(json_string_value(json_array_get(tag, 0)), "p") ||
		    !strcmp(pk, m->ev->pubkey))
			continue;
		if (!exec_params(m,
			"INSERT INTO members (community_id, channel_id, pubkey, role)"
			" VALUES ($1, $2::uuid, $3, 1) ON CONFLICT DO NOTHING",
			3, (const char *const[]){m->w->community->id_text, m->h, pk}))
			return -1;
	}
	return 0;
}

/* 9000 */
static int put_user(struct moderation *m)
{
	int current, own;

	if (!allows(m, COMB_ACT_PUT_USER, NULL)) {
		deny(m, "add members to this channel");
		return 1;
	}
	current = member_role(m, m->target);
	if (current < 0)
		return -1;
	/* A 9000 never reaches above the signer's own role (community
	 * admins act as owners outside DMs), and nobody raises their own. */
	own = m->actor.community_admin && !m->channel.facts.is_dm ?
		COMB_ROLE_OWNER : (int)m->channel.facts.role;
	if (m->role > own || current > own ||
	    (!strcmp(m->target, m->ev->pubkey) && m->role > current)) {
		write_refuse(m->out, 403, "restricted: cannot grant a role above your own");
		refuse(m);
		return 1;
	}
	if (current == COMB_ROLE_OWNER && m->role != COMB_ROLE_OWNER &&
	    m->channel.owners <= 1) {
		write_refuse(m->out, 400, "invalid: the last owner cannot be demoted");
		refuse(m);
		return 1;
	}
	return put_member(m, m->target, m->role) ? 0 : -1;
}

/* 9001 */
static int remove_user(struct moderation *m)
{
	struct comb_policy_request extra = {
		.target_is_self = !strcmp(m->target, m->ev->pubkey),
	};
	int current, own;

	if (!allows(m, COMB_ACT_REMOVE_USER, &extra)) {
		deny(m, "remove members from this channel");
		return 1;
	}
	current = member_role(m, m->target);
	if (current < 0)
		return -1;
	if (current == COMB_ROLE_NONE) {
		write_refuse(m->out, 400, "invalid: not a channel member");
		refuse(m);
		return 1;
	}
	/* Only an owner (a community admin acts as one outside DMs) removes
	 * an owner; anyone may leave through a 9001 naming themselves. */
	own = m->actor.community_admin && !m->channel.facts.is_dm ?
		COMB_ROLE_OWNER : (int)m->channel.facts.role;
	if (current > own && !extra.target_is_self) {
		write_refuse(m->out, 403, "restricted: cannot remove a role above your own");
		refuse(m);
		return 1;
	}
	if (current == COMB_ROLE_OWNER && m->channel.owners <= 1) {
		write_refuse(m->out, 400, "invalid: the last owner cannot be removed");
		refuse(m);
		return 1;
	}
	return deactivate_member(m, m->target) ? 0 : -1;
}

/* 9002 */
static int edit_metadata(struct moderation *m)
{
	char vis[4], ttl[16], archived[8];

	if (!allows(m, COMB_ACT_EDIT_METADATA, NULL)) {
		deny(m, "edit this channel");
		return 1;
	}
	if (m->channel.facts.is_dm && m->visibility >= 0 &&
	    m->visibility != COMB_VIS_PRIVATE) {
		write_refuse(m->out, 400, "invalid: a dm is always private");
		refuse(m);
		return 1;
	}
	snprintf(vis, sizeof(vis), "%d", m->visibility);
	snprintf(ttl, sizeof(ttl), "%d", m->ttl);
	snprintf(archived, sizeof(archived), "%s", m->archived ? "true" : "false");
	return exec_params(m,
		"UPDATE channels SET name = coalesce($3, name),"
		" visibility = coalesce($4::smallint, visibility),"
		" ttl = CASE WHEN $5::integer IS NULL THEN ttl"
		"  WHEN $5::integer = 0 THEN NULL ELSE $5::integer END,"
		" archived = coalesce($6::boolean, archived)"
		" WHERE community_id = $1 AND id = $2::uuid",
		6, (const char *const[]){m->w->community->id_text, m->h, m->name,
					 m->visibility >= 0 ? vis : NULL,
					 m->ttl >= 0 ? ttl : NULL,
					 m->archived >= 0 ? archived : NULL}) ? 0 : -1;
}

/* 9005 */
static int redact(struct moderation *m)
{
	PGresult *res;
	int kind;

	if (!allows(m, COMB_ACT_REDACT, NULL)) {
		deny(m, "redact events in this channel");
		return 1;
	}
	res = PQexecParams(m->w->db,
		"SELECT kind FROM events WHERE community_id = $1 AND id = $2"
		" AND channel_id = $3::uuid FOR UPDATE",
		3, NULL, (const char *const[]){m->w->community->id_text, m->target, m->h},
		NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		PQclear(res);
		return -1;
	}
	kind = PQntuples(res) ? (int)strtol(PQgetvalue(res, 0, 0), NULL, 10) : -1;
	PQclear(res);
	if (kind < 0 || kind == 45011) {
		write_refuse(m->out, 400, kind < 0 ? "invalid: unknown event" :
			     "invalid: removal markers cannot be redacted");
		refuse(m);
		return 1;
	}
	if (kind == 45010)
		return artifact_redact(m->w, m->target, m->ev) ? -1 : 0;
	return exec_params(m,
		"UPDATE events SET redacted = true WHERE community_id = $1 AND id = $2",
		2, (const char *const[]){m->w->community->id_text, m->target}) ? 0 : -1;
}

/* 9008 */
static int delete_channel(struct moderation *m)
{
	if (!allows(m, COMB_ACT_DELETE_CHANNEL, NULL)) {
		deny(m, "delete this channel");
		return 1;
	}
	return exec_params(m,
		"UPDATE channels SET deleted = true WHERE community_id = $1 AND id = $2::uuid",
		2, (const char *const[]){m->w->community->id_text, m->h}) ? 0 : -1;
}

/* 9021: joining a channel one is in already changes nothing. */
static int join(struct moderation *m)
{
	if (!allows(m, COMB_ACT_JOIN, NULL)) {
		deny(m, "join this channel");
		return 1;
	}
	if (m->channel.facts.role != COMB_ROLE_NONE)
		return 0;
	return put_member(m, m->ev->pubkey, COMB_ROLE_MEMBER) ? 0 : -1;
}

/* 9022 */
static int leave(struct moderation *m)
{
	if (m->channel.facts.role == COMB_ROLE_NONE) {
		write_refuse(m->out, 400, "invalid: not a channel member");
		refuse(m);
		return 1;
	}
	if (!allows(m, COMB_ACT_LEAVE, NULL)) {
		deny(m, "leave this channel");
		return 1;
	}
	if (m->channel.facts.role == COMB_ROLE_OWNER && m->channel.owners <= 1) {
		write_refuse(m->out, 400, "invalid: the last owner cannot leave");
		refuse(m);
		return 1;
	}
	return deactivate_member(m, m->ev->pubkey) ? 0 : -1;
}

/* True when this community already stored ev; -1 on failure. */
static int already_stored(struct moderation *m)
{
	PGresult *res = PQexecParams(m->w->db,
		"SELECT 1 FROM events WHERE community_id = $1 AND id = $2",
		2, NULL, (const char *const[]){m->w->community->id_text, m->ev->id},
		NULL, NULL, 0);
	int rc = PQresultStatus(res) != PGRES_TUPLES_OK ? -1 : PQntuples(res) > 0;

	PQclear(res);
	return rc;
}

/* Applies the request inside the open transaction: 0 applied, 1 refused
 * or already applied (transaction ended, out set), -1 database failure. */
static int apply(struct moderation *m)
{
	int rc;

	if (m->ev->kind != 9007 &&
	    access_load_channel(m->w->db, m->w->community, m->h, &m->actor,
				true, ACCESS_LOCK_UPDATE, &m->channel))
		return -1;
	rc = already_stored(m);
	if (rc) {
		if (rc > 0)
			refuse(m);  /* accepted again; nothing changes */
		return rc;
	}
	switch (m->ev->kind) {
	case 9007: return create_channel(m);
	case 9000: return put_user(m);
	case 9001: return remove_user(m);
	case 9002: return edit_metadata(m);
	case 9005: return redact(m);
	case 9008: return delete_channel(m);
	case 9021: return join(m);
	case 9022: return leave(m);
	default:
		write_refuse(m->out, 400, "invalid: unsupported kind");
		refuse(m);
		return 1;
	}
}

void write_moderation(struct writer *w, const struct comb_event *ev,
		      struct write_result *out)
{
	struct moderation m = {
		.w = w, .ev = ev, .out = out,
		.h = comb_event_tag_value(ev, "h"),
		.visibility = -1, .ttl = -1, .archived = -1, .role = -1,
	};
	bool inserted;
	int rc;

	if (!write_is_fresh(w, ev)) {
		write_refuse(out, 400, FRESHNESS_MESSAGE);
		return;
	}
	if (comb_event_tag_count(ev, "h") != 1 || !m.h) {
		write_refuse(out, 400, "invalid: moderation events need exactly one h tag");
		return;
	}
	if (!comb_uuid_is_canonical(m.h)) {
		write_refuse(out, 400, "invalid: h must be a canonical channel uuid");
		return;
	}
	if (!parse_request(&m))
		return;
	if (access_load_actor(w->relay->db, w->db, w->community, ev->pubkey, &m.actor) ||
	    !write_exec(w, "BEGIN")) {
		write_db_failed(w, out);
		return;
	}
	rc = apply(&m);
	if (rc > 0)
		return;
	if (rc < 0 || write_store_event(w, ev, m.h, &inserted) ||
	    !write_exec(w, "COMMIT"))
		write_db_failed(w, out);
}
