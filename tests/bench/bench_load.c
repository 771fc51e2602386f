/*
 * `comb-bench load`: generates the fixtures from the seed and loads them
 * with COPY in one transaction, straight into the tables the relay reads
 * (channels, members, events, event_tags, artifact_heads with their
 * tags, and artifact_revisions before migration 0025), then runs VACUUM
 * ANALYZE. Each part goes where the schema keeps it: the heads' tags in
 * artifact_heads.tags (migration 0018 and later) or, in a database
 * migrated up to 0017 (the migration test of docs/operations.md), the
 * table artifact_head_tags; the revisions' d rows in event_tags only
 * before migration 0023; a revision's d, type and op in its event's row
 * from migration 0025 on, in artifact_revisions before.
 *
 * Every artifact is a real kind-45010 revision of BENCH_EVENT_BYTES signed
 * by the community admin; beside them, the chat channel holds l.chats
 * kind-9 messages of the same size by the admin (bench_chat_fixture).
 * The transaction runs with session_replication_role = replica so that
 * no notification or foreign-key trigger fires for rows
 * that are consistent by construction; the *_xid stamps then come from
 * their column defaults, pg_current_xact_id(), which is exactly what the
 * stamping triggers would have written. events.seq is assigned here and
 * repeated in artifact_heads.accepted_seq (and artifact_revisions.seq).
 *
 * usage: comb-bench load --db URL --community ID --seed S --scale F
 *                        --manifest PATH
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"
#include "comb/error.h"

#define COPY_CHUNK (1 << 20)

struct copy {
	PGconn *db;
	struct comb_buf buf;
	long rows;
	int rc;
};

static int exec_ok(PGconn *db, const char *sql)
{
	PGresult *res = PQexec(db, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		 PQresultStatus(res) == PGRES_TUPLES_OK;

	if (!ok)
		bench_log("%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : COMB_EUNAVAIL;
}

static int copy_begin(struct copy *c, PGconn *db, const char *sql)
{
	PGresult *res = PQexec(db, sql);
	int ok = PQresultStatus(res) == PGRES_COPY_IN;

	if (!ok)
		bench_log("%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	c->db = db;
	c->rows = 0;
	c->rc = ok ? 0 : COMB_EUNAVAIL;
	comb_buf_init(&c->buf, 4 * COPY_CHUNK);
	return c->rc;
}

static void copy_flush(struct copy *c)
{
	if (c->rc == 0 && c->buf.len > 0 &&
	    PQputCopyData(c->db, c->buf.data, (int)c->buf.len) != 1) {
		bench_log("copy: %s", PQerrorMessage(c->db));
		c->rc = COMB_EUNAVAIL;
	}
	comb_buf_reset(&c->buf);
}

/* Appends one field in COPY text format (tab before all but the first). */
static void copy_field(struct copy *c, bool first, const char *s, size_t len)
{
	size_t i, from = 0;

	if (c->rc)
		return;
	if (!first)
		c->rc = comb_buf_putc(&c->buf, '\t');
	for (i = 0; i < len && c->rc == 0; i++) {
		const char *esc = NULL;

		switch (s[i]) {
		case '\\': esc = "\\\\"; break;
		case '\t': esc = "\\t"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		default: break;
		}
		if (!esc)
			continue;
		c->rc = comb_buf_append(&c->buf, s + from, i - from);
		if (c->rc == 0)
			c->rc = comb_buf_puts(&c->buf, esc);
		from = i + 1;
	}
	if (c->rc == 0)
		c->rc = comb_buf_append(&c->buf, s + from, len - from);
}

/* Appends one row of NUL-terminated fields. */
static void copy_row(struct copy *c, int n, const char *const *fields)
{
	int i;

	for (i = 0; i < n; i++)
		copy_field(c, i == 0, fields[i], strlen(fields[i]));
	if (c->rc == 0)
		c->rc = comb_buf_putc(&c->buf, '\n');
	c->rows++;
	if (c->buf.len >= COPY_CHUNK)
		copy_flush(c);
}

static int copy_end(struct copy *c, const char *what)
{
	PGresult *res;

	copy_flush(c);
	if (PQputCopyEnd(c->db, c->rc ? "comb-bench: generation failed" : NULL) != 1)
		c->rc = COMB_EUNAVAIL;
	while ((res = PQgetResult(c->db))) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			bench_log("copy %s: %s", what, PQresultErrorMessage(res));
			c->rc = COMB_EUNAVAIL;
		}
		PQclear(res);
	}
	comb_buf_release(&c->buf);
	return c->rc;
}

/* The tag value of ev named name (first value), or "". */
static const char *tag(const struct comb_event *ev, const char *name)
{
	const char *v = comb_event_tag_value(ev, name);

	return v ? v : "";
}

struct fixture {
	struct bench_layout l;
	struct comb_event *evs;  /* readable ones, then the grant ones */
	size_t n;
	struct comb_event *chats; /* the chat channel's messages, oldest first */
	int *channel;            /* channel index of each */
	char community[24];
	long base_seq;
};

static int generate(struct fixture *f)
{
	size_t i;
	int rc = 0;

	f->n = (size_t)f->l.artifacts + (size_t)f->l.grant;
	f->evs = calloc(f->n, sizeof(*f->evs));
	f->channel = calloc(f->n, sizeof(*f->channel));
	f->chats = calloc((size_t)f->l.chats, sizeof(*f->chats));
	if (!f->evs || !f->channel || !f->chats)
		return COMB_ENOMEM;
	for (i = 0; i < f->n && rc == 0; i++) {
		bool readable = i < (size_t)f->l.artifacts;
		int j = readable ? (int)i : (int)i - f->l.artifacts;
		char d[37], h[37];

		f->channel[i] = readable ? bench_artifact_channel(&f->l, j) : BENCH_CH_GRANT;
		bench_artifact_id(&f->l, readable ? "art" : "grant", j, d);
		bench_channel_id(&f->l, f->channel[i], h);
		rc = bench_revision(&f->evs[i], f->l.admin_pk, d, h, "create", NULL,
				    BENCH_FIXTURE_TIME + (int64_t)i, 0x5eed0000ULL + i);
	}
	for (i = 0; i < (size_t)f->l.chats && rc == 0; i++)
		rc = bench_chat_fixture(&f->l, (int)i, &f->chats[i]);
	return rc;
}

static int load_channels(struct fixture *f, PGconn *db)
{
	static const int specials[] = {BENCH_CH_GRANT, BENCH_CH_ELSEWHERE, BENCH_CH_INGEST};
	struct copy c;
	char id[37], name[48];
	int i;

	if (copy_begin(&c, db, "COPY channels (community_id, id, name, visibility,"
			       " created_by, created_at) FROM STDIN"))
		return c.rc;
	for (i = -3; i < f->l.memberships; i++) {
		int ch = i < 0 ? specials[i + 3] : i;

		bench_channel_id(&f->l, ch, id);
		snprintf(name, sizeof(name), "bench %d", ch);
		copy_row(&c, 6, (const char *const[]){f->community, id, name, "2",
						      f->l.admin_pk, "1700000000"});
	}
	if (copy_end(&c, "channels"))
		return c.rc;
	/* The reader is a member of the first `memberships` channels; the
	 * admin owns every channel, as the creator of a 9007 would. */
	if (copy_begin(&c, db, "COPY members (community_id, channel_id, pubkey, role)"
			       " FROM STDIN"))
		return c.rc;
	for (i = -3; i < f->l.memberships; i++) {
		int ch = i < 0 ? specials[i + 3] : i;

		bench_channel_id(&f->l, ch, id);
		copy_row(&c, 4, (const char *const[]){f->community, id, f->l.admin_pk, "3"});
		if (i >= 0)
			copy_row(&c, 4, (const char *const[]){f->community, id,
							      f->l.reader_pk, "1"});
	}
	return copy_end(&c, "members");
}

/* The event of seq offset i (from base_seq + 1): the artifacts, then the
 * chat messages. */
static const struct comb_event *loaded_event(const struct fixture *f, size_t i)
{
	return i < f->n ? &f->evs[i] : &f->chats[i - f->n];
}

/* The count sql (a SELECT count(*) of the schema) answers, or -1 when
 * the database cannot say. */
static long schema_count(PGconn *db, const char *sql)
{
	PGresult *res = PQexec(db, sql);
	long n = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	else
		bench_log("load: %s", PQresultErrorMessage(res));
	PQclear(res);
	return n;
}

/* Whether migration version (or a later one) is applied, or -1 when the
 * database cannot say. */
static int migrated_to(PGconn *db, int version)
{
	char sql[96];
	long n;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM comb_migrations WHERE version >= %d",
		 version);
	n = schema_count(db, sql);
	return n < 0 ? -1 : n > 0;
}

static int load_events(struct fixture *f, PGconn *db)
{
	size_t total = f->n + (size_t)f->l.chats, i;
	struct comb_buf raw;
	struct copy c;
	char seq[24], created[24], kind[12];
	int after_0023, in_events = migrated_to(db, 25);

	if (in_events < 0)
		return COMB_EUNAVAIL;
	comb_buf_init(&raw, 1 << 20);
	/* the revision's columns empty, hence NULL, for the messages */
	if (copy_begin(&c, db, in_events
			? "COPY events (community_id, seq, id, pubkey, created_at,"
			  " kind, channel_id, raw, d, type, op) FROM STDIN WITH (NULL '')"
			: "COPY events (community_id, seq, id, pubkey, created_at,"
			  " kind, channel_id, raw) FROM STDIN"))
		return c.rc;
	for (i = 0; i < total && c.rc == 0; i++) {
		const struct comb_event *ev = loaded_event(f, i);
		bool revision = i < f->n;

		comb_buf_reset(&raw);
		c.rc = comb_event_to_json(ev, &raw);
		snprintf(seq, sizeof(seq), "%ld", f->base_seq + (long)i + 1);
		snprintf(created, sizeof(created), "%lld", (long long)ev->created_at);
		snprintf(kind, sizeof(kind), "%d", ev->kind);
		copy_row(&c, in_events ? 11 : 8,
			 (const char *const[]){f->community, seq, ev->id, ev->pubkey,
					       created, kind, tag(ev, "h"), raw.data,
					       revision ? tag(ev, "d") : "",
					       revision ? "demo.task" : "",
					       revision ? "create" : ""});
	}
	comb_buf_release(&raw);
	if (copy_end(&c, "events"))
		return c.rc;

	/* The artifacts' d: their single-letter tags but h, which is their
	 * channel (migrations/0013_channel_not_a_tag_row.sql), in a schema
	 * before 0023 (from which on a revision's d is read from its
	 * revision alone); the messages have none. */
	after_0023 = migrated_to(db, 23);
	if (after_0023 != 0)
		return after_0023 < 0 ? COMB_EUNAVAIL : 0;
	if (copy_begin(&c, db, "COPY event_tags (community_id, event_seq, name, value)"
			       " FROM STDIN"))
		return c.rc;
	for (i = 0; i < f->n; i++) {
		snprintf(seq, sizeof(seq), "%ld", f->base_seq + (long)i + 1);
		copy_row(&c, 4, (const char *const[]){f->community, seq, "d",
						      tag(loaded_event(f, i), "d")});
	}
	return copy_end(&c, "event_tags");
}

/* Whether artifact_heads has the tags column (migration 0018), or -1
 * when the database cannot say. */
static int heads_have_tags(PGconn *db)
{
	long n = schema_count(db, "SELECT count(*) FROM pg_attribute"
			      " WHERE attrelid = 'artifact_heads'::regclass"
			      " AND attname = 'tags' AND NOT attisdropped");

	return n < 0 ? -1 : n == 1;
}

static int load_artifacts(struct fixture *f, PGconn *db)
{
	/* the head tags of the fixture's creates, for a schema before 0018 */
	static const char *const head_tags[] = {"ar", "op", "title", "status"};
	const size_t ntags = sizeof(head_tags) / sizeof(head_tags[0]);
	struct comb_buf tags;
	struct copy c;
	char seq[24];
	size_t i, k;
	int in_heads = heads_have_tags(db), in_events = migrated_to(db, 25);

	if (in_heads < 0 || in_events < 0)
		return COMB_EUNAVAIL;
	if (!in_events) {
		if (copy_begin(&c, db, "COPY artifact_revisions (community_id, id, d, seq,"
				       " channel_id, type, op) FROM STDIN"))
			return c.rc;
		for (i = 0; i < f->n; i++) {
			const struct comb_event *ev = &f->evs[i];

			snprintf(seq, sizeof(seq), "%ld", f->base_seq + (long)i + 1);
			copy_row(&c, 7, (const char *const[]){f->community, ev->id,
							      tag(ev, "d"), seq,
							      tag(ev, "h"), "demo.task",
							      "create"});
		}
		if (copy_end(&c, "artifact_revisions"))
			return c.rc;
	}

	if (copy_begin(&c, db, in_heads
			? "COPY artifact_heads (community_id, d, revision_id,"
			  " accepted_seq, channel_id, type, creator, tags) FROM STDIN"
			: "COPY artifact_heads (community_id, d, revision_id,"
			  " accepted_seq, channel_id, type, creator) FROM STDIN"))
		return c.rc;
	comb_buf_init(&tags, 1 << 16);
	for (i = 0; i < f->n; i++) {
		const struct comb_event *ev = &f->evs[i];

		comb_buf_reset(&tags);
		if (in_heads && bench_head_tags(ev, &tags)) {
			c.rc = COMB_ENOMEM;
			break;
		}
		snprintf(seq, sizeof(seq), "%ld", f->base_seq + (long)i + 1);
		copy_row(&c, in_heads ? 8 : 7,
			 (const char *const[]){f->community, tag(ev, "d"), ev->id, seq,
					       tag(ev, "h"), "demo.task", ev->pubkey,
					       tags.data});
	}
	comb_buf_release(&tags);
	if (copy_end(&c, "artifact_heads") || in_heads)
		return c.rc;

	if (copy_begin(&c, db, "COPY artifact_head_tags (community_id, d, name, value)"
			       " FROM STDIN"))
		return c.rc;
	for (i = 0; i < f->n; i++)
		for (k = 0; k < ntags; k++)
			copy_row(&c, 4, (const char *const[]){f->community,
							      tag(&f->evs[i], "d"),
							      head_tags[k],
							      tag(&f->evs[i], head_tags[k])});
	return copy_end(&c, "artifact_head_tags");
}

static int write_manifest(struct fixture *f, const char *path)
{
	struct bench_manifest m = {0};
	size_t i;
	int rc;

	m.items = calloc(f->n, sizeof(*m.items));
	if (!m.items)
		return COMB_ENOMEM;
	m.n = f->n;
	m.readable = (size_t)f->l.artifacts;
	for (i = 0; i < f->n; i++) {
		snprintf(m.items[i].d, sizeof(m.items[i].d), "%s", tag(&f->evs[i], "d"));
		snprintf(m.items[i].h, sizeof(m.items[i].h), "%s", tag(&f->evs[i], "h"));
		memcpy(m.items[i].id, f->evs[i].id, 65);
		m.items[i].channel = f->channel[i];
	}
	rc = bench_manifest_write(path, &m);
	free(m.items);
	return rc;
}

int bench_cmd_load(int argc, char **argv)
{
	const char *url = bench_opt(argc, argv, "--db", NULL);
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	struct fixture f = {0};
	double t0 = bench_now(), t_gen, t_sign, t_copy, t_vacuum;
	PGconn *db = NULL;
	PGresult *res;
	size_t i;
	char sql[128];
	int rc;

	if (!url || !manifest) {
		bench_log("load: --db and --manifest are required");
		return 2;
	}
	rc = bench_layout_from_opts(&f.l, argc, argv);
	if (rc)
		goto out;
	snprintf(f.community, sizeof(f.community), "%ld", f.l.community);
	rc = generate(&f);
	t_gen = bench_now();
	if (rc == 0)
		rc = bench_sign_all(f.evs, f.n, f.l.admin_sk, 2);
	if (rc == 0)
		rc = bench_sign_all(f.chats, (size_t)f.l.chats, f.l.admin_sk, 2);
	t_sign = bench_now();
	if (rc)
		goto out;

	db = PQconnectdb(url);
	if (PQstatus(db) != CONNECTION_OK) {
		bench_log("load: %s", PQerrorMessage(db));
		rc = COMB_EUNAVAIL;
		goto out;
	}
	rc = exec_ok(db, "BEGIN");
	rc = rc ? rc : exec_ok(db, "SET LOCAL session_replication_role = replica");
	if (rc)
		goto out;
	res = PQexec(db, "SELECT coalesce(max(seq), 0) FROM events");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		f.base_seq = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	else
		rc = COMB_EUNAVAIL;
	PQclear(res);
	rc = rc ? rc : load_channels(&f, db);
	rc = rc ? rc : load_events(&f, db);
	rc = rc ? rc : load_artifacts(&f, db);
	snprintf(sql, sizeof(sql), "SELECT setval('events_seq_seq', %ld)",
		 f.base_seq + (long)f.n + f.l.chats);
	rc = rc ? rc : exec_ok(db, sql);
	rc = rc ? rc : exec_ok(db, "COMMIT");
	t_copy = bench_now();
	rc = rc ? rc : exec_ok(db, "VACUUM ANALYZE");
	t_vacuum = bench_now();
	rc = rc ? rc : write_manifest(&f, manifest);
	if (rc == 0)
		bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f}",
			"command", "load",
			"artifacts", f.l.artifacts, "grant_artifacts", f.l.grant,
			"chat_messages", f.l.chats,
			"channels", f.l.memberships + 3,
			"memberships", f.l.memberships,
			"generate_s", t_gen - t0, "sign_s", t_sign - t_gen,
			"copy_s", t_copy - t_sign, "vacuum_analyze_s", t_vacuum - t_copy,
			"total_s", t_vacuum - t0));
out:
	if (rc)
		bench_log("load failed: %s", comb_strerror(rc));
	PQfinish(db);
	for (i = 0; f.evs && i < f.n; i++)
		comb_event_release(&f.evs[i]);
	for (i = 0; f.chats && i < (size_t)f.l.chats; i++)
		comb_event_release(&f.chats[i]);
	free(f.evs);
	free(f.chats);
	free(f.channel);
	return rc ? 1 : 0;
}
