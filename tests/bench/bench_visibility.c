/*
 * `incr-visibility`: how long after its writer's OK a write shows in an
 * incremental read on another node.
 *
 * The admin creates a private channel of its own and adds the reader (so
 * nothing of the fixtures changes); the reader reads it to the end on node
 * 1. Then, --writes times: the admin creates an artifact there through
 * POST /events on node 0 and, from the OK's arrival, the reader reads in a
 * tight loop on node 1, following the cursor, until an answer carries the
 * new revision; the figure is that answer's arrival minus the OK's. Every
 * read signs its own NIP-98 token (the payload names the cursor), which
 * the figure includes.
 *
 * With --ingest-conns K > 0, K more connections to node 0 create
 * artifacts in a second private channel the reader cannot read, back to
 * back, for the whole measurement: other writers holding the horizon back
 * and stamping the community.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "comb/error.h"

#define VIS_MAX_WRITES 10000
#define VIS_TIMEOUT_S 10.0

struct ingester {
	pthread_t tid;
	const struct bench_layout *l;
	const char *addr, *host;
	char channel[37];
	int index;
	atomic_bool *stop;
	long written, refused;
};

/* Publishes one kind-9xxx admin event with tags; 0 when accepted. */
static int admin_event(struct bench_http *c, const struct bench_layout *l,
		       int kind, json_t *tags)
{
	struct comb_event ev = {0};
	char message[256];
	bool accepted = false;
	int rc;

	ev.kind = kind;
	ev.created_at = bench_unix_time();
	ev.tags = tags;
	ev.content = strdup("");
	ev.content_len = 0;
	rc = bench_http_publish(c, &ev, l->admin_sk, &accepted, message, sizeof(message));
	comb_event_release(&ev);
	if (!rc && !accepted) {
		bench_log("incr-visibility: kind %d refused: %s", kind, message);
		rc = COMB_EINVAL;
	}
	return rc;
}

/* A new private channel of the admin's; with reader, the reader joins. */
static int new_channel(struct bench_http *c, const struct bench_layout *l,
		       const char *name, bool reader, char id[37])
{
	char hex[33];
	int rc;

	bench_random_hex(hex, 16);
	snprintf(id, 37, "%.8s-%.4s-4%.3s-8%.3s-%.12s", hex, hex + 8, hex + 12,
		 hex + 16, hex + 20);
	rc = admin_event(c, l, 9007, json_pack("[[ss][ss][ss]]", "h", id,
					       "name", name, "visibility", "private"));
	if (!rc && reader)
		rc = admin_event(c, l, 9000, json_pack("[[ss][sss]]", "h", id,
						       "p", l->reader_pk, "member"));
	return rc;
}

/* Creates an artifact in channel h; *ev keeps the signed event. */
static int create_in(struct bench_http *c, const struct bench_layout *l,
		     const char *h, uint64_t seed, struct comb_event *ev)
{
	char hex[33], d[37], message[256];
	bool accepted = false;
	int rc;

	bench_random_hex(hex, 16);
	snprintf(d, sizeof(d), "%.8s-%.4s-4%.3s-8%.3s-%.12s", hex, hex + 8, hex + 12,
		 hex + 16, hex + 20);
	rc = bench_revision(ev, l->admin_pk, d, h, "create", NULL, bench_unix_time(), seed);
	rc = rc ? rc : bench_http_publish(c, ev, l->admin_sk, &accepted, message,
					  sizeof(message));
	return rc ? rc : accepted ? 0 : COMB_EINVAL;
}

static void *ingest_main(void *arg)
{
	struct ingester *g = arg;
	struct bench_http c = {.fd = -1};
	struct comb_event ev = {0};

	if (bench_http_open(&c, g->addr, g->host))
		return NULL;
	while (!atomic_load(g->stop)) {
		if (create_in(&c, g->l, g->channel,
			      0x1a9e0000ULL + (uint64_t)g->index * 1000000 + (uint64_t)g->written,
			      &ev))
			g->refused++;
		else
			g->written++;
	}
	comb_event_release(&ev);
	bench_http_close(&c);
	return NULL;
}

static int incremental_scoped(struct comb_buf *b, const char *h, const char *cursor)
{
	comb_buf_reset(b);
	if (*cursor)
		return comb_buf_printf(b, "[{\"artifact\":\"incremental\",\"#h\":[\"%s\"],"
				       "\"cursor\":\"%s\",\"limit\":1000}]", h, cursor);
	return comb_buf_printf(b, "[{\"artifact\":\"incremental\",\"#h\":[\"%s\"],"
			       "\"limit\":1000}]", h);
}

/* Reads once with *cursor (empty: a first read), following it. Sets
 * *found when the answer holds "id":"<id>" (id may be NULL). */
static int read_once(struct bench_http *c, const struct bench_layout *l,
		     const char *url, const char *h, char *cursor, size_t cap,
		     const char *id, struct comb_buf *body, struct comb_buf *resp,
		     bool *found, bool *more)
{
	char needle[80], *auth;
	const char *p, *end;
	int status = 0, rc;

	incremental_scoped(body, h, cursor);
	auth = bench_nip98(l->reader_sk, url, "POST", body->data, body->len);
	rc = auth ? bench_http_request(c, "POST", "/query", body->data, body->len,
				       auth, &status, resp) : COMB_ENOMEM;
	free(auth);
	if (rc)
		return rc;
	if (status != 200) {
		bench_log("incr-visibility: read answered %d: %.200s", status, resp->data);
		return COMB_EINVAL;
	}
	snprintf(needle, sizeof(needle), "\"id\":\"%s\"", id ? id : "");
	*found = id && strstr(resp->data, needle);
	p = strstr(resp->data, "\"cursor\":\"");
	if (!p)
		return COMB_EINVAL;
	p += 10;
	end = strchr(p, '"');
	if (!end || (size_t)(end - p) >= cap)
		return COMB_EINVAL;
	memcpy(cursor, p, (size_t)(end - p));
	cursor[end - p] = '\0';
	*more = strstr(end, "\"more\":true") != NULL;
	return 0;
}

int bench_cmd_incr_visibility(int argc, char **argv)
{
	const char *addrs = bench_opt(argc, argv, "--addrs", NULL);
	const char *hosts = bench_opt(argc, argv, "--hosts", NULL);
	int writes = (int)bench_opt_long(argc, argv, "--writes", 200);
	int nconns = (int)bench_opt_long(argc, argv, "--ingest-conns", 0);
	char a0[64], a1[64], h0[128], h1[128], url[256], cursor[1024] = "";
	char channel[37], sink[37];
	struct bench_layout l;
	struct bench_http w = {.fd = -1}, r = {.fd = -1};
	struct comb_buf body, resp;
	struct comb_event ev = {0};
	struct ingester *ing = NULL;
	atomic_bool stop = false;
	double *lat = NULL;
	long reads = 0, ingested = 0, ingest_refused = 0;
	int i, n = 0, rc, started = 0;
	bool found, more;

	comb_buf_init(&body, 65536);
	comb_buf_init(&resp, 64u << 20);
	if (!addrs || !hosts || sscanf(addrs, "%63[^,],%63s", a0, a1) != 2 ||
	    sscanf(hosts, "%127[^,],%127s", h0, h1) != 2 || writes < 1 ||
	    writes > VIS_MAX_WRITES || nconns < 0 || nconns > 16) {
		bench_log("incr-visibility: --addrs A0,A1 and --hosts H0,H1 are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : bench_http_open(&w, a0, h0);
	rc = rc ? rc : bench_http_open(&r, a1, h1);
	lat = calloc((size_t)writes, sizeof(*lat));
	ing = calloc((size_t)nconns + 1, sizeof(*ing));
	if (!rc && (!lat || !ing))
		rc = COMB_ENOMEM;
	rc = rc ? rc : new_channel(&w, &l, "bench visibility", true, channel);
	if (!rc && nconns)
		rc = new_channel(&w, &l, "bench visibility ingest", false, sink);
	snprintf(url, sizeof(url), "http://%s/query", h1);
	/* The reader catches up with its new channel first. */
	do {
		rc = rc ? rc : read_once(&r, &l, url, channel, cursor, sizeof(cursor),
					 NULL, &body, &resp, &found, &more);
	} while (!rc && more);
	for (i = 0; i < nconns && !rc; i++) {
		ing[i] = (struct ingester){.l = &l, .addr = a0, .host = h0,
					   .index = i, .stop = &stop};
		snprintf(ing[i].channel, sizeof(ing[i].channel), "%s", sink);
		if (pthread_create(&ing[i].tid, NULL, ingest_main, &ing[i]))
			rc = COMB_ENOMEM;
		else
			started++;
	}
	for (n = 0; n < writes && !rc; n++) {
		double t_ok, t;

		rc = create_in(&w, &l, channel, 0x7151b000ULL + (uint64_t)n, &ev);
		t_ok = bench_now();
		found = false;
		while (!rc && !found) {
			rc = read_once(&r, &l, url, channel, cursor, sizeof(cursor), ev.id,
				       &body, &resp, &found, &more);
			reads++;
			t = bench_now();
			if (!rc && !found && t - t_ok > VIS_TIMEOUT_S) {
				bench_log("incr-visibility: write %d not visible after %.0f s",
					  n, VIS_TIMEOUT_S);
				rc = COMB_ETIMEOUT;
			}
		}
		lat[n] = bench_now() - t_ok;
	}
	atomic_store(&stop, true);
	for (i = 0; i < started; i++) {
		pthread_join(ing[i].tid, NULL);
		ingested += ing[i].written;
		ingest_refused += ing[i].refused;
	}
	if (rc == 0 || n > 1) {
		int done = rc ? n - 1 : n;

		for (i = 0; i < done; i++)
			lat[i] *= 1e3;
		bench_print(json_pack("{s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:I,s:i,s:I,s:I,s:b,s:s}",
			"command", "incr-visibility", "writes", writes, "visible", done,
			"p50_ms", bench_quantile(lat, (size_t)done, 0.5),
			"p90_ms", bench_quantile(lat, (size_t)done, 0.9),
			"p99_ms", bench_quantile(lat, (size_t)done, 0.99),
			"max_ms", bench_quantile(lat, (size_t)done, 1.0),
			"reads", (json_int_t)reads, "ingest_conns", nconns,
			"ingested", (json_int_t)ingested, "ingest_refused", (json_int_t)ingest_refused,
			"ok", rc == 0 && ingest_refused == 0,
			"error", rc ? comb_strerror(rc) : ""));
	}
	comb_event_release(&ev);
	comb_buf_release(&body);
	comb_buf_release(&resp);
	bench_http_close(&w);
	bench_http_close(&r);
	free(lat);
	free(ing);
	return rc == 0 && ingest_refused == 0 ? 0 : 1;
}
