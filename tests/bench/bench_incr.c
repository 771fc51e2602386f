/*
 * The incremental-read scenarios over HTTP with real NIP-98 headers, as
 * the reader of the fixtures:
 *
 * `incr-initial`: no cursor, pages of --limit until `more` is false. The
 * clock covers signing each page's token (its payload names the previous
 * page's cursor, so it cannot be signed earlier), the request and reading
 * the answer; checking the answers comes after the clock stops: every
 * readable artifact exactly once, each at its loaded revision. The final
 * cursor is written to --cursor-out.
 *
 * `incr-nochange`: --reads reads with that cursor (tokens signed before
 * the clock starts), each must be an empty, final answer; median and
 * tail. The floor beside it is GET /healthz on the same connection.
 *
 * `incr-delta`: edits, moves (half into another readable channel, half
 * out of view), deletes, one grant of the grant channel and one
 * revocation, written through POST /events; then one catch-up read with
 * limit 1000, timed, whose items must be exactly the expected ones.
 * With --db and --policy (the relay's policy plugins) it then measures
 * the read's floor (bench_delta_floor) from a snapshot taken before the
 * writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"
#include "comb/error.h"

#define MAX_PAGES 100000
/* Room for one upsert of the fixture (about 5 KB) in an answer. */
#define PAGE_ITEM_ROOM 6144

bool bench_incremental_tail(const char *body, size_t len, char *cursor, size_t cap,
			    bool *more)
{
	size_t from = len > 4096 ? len - 4096 : 0;
	const char *p = NULL, *q, *end;

	for (q = body + from; (q = memmem(q, (size_t)(body + len - q), "\"cursor\":\"", 10)); q++)
		p = q;
	if (!p)
		return false;
	p += 10;
	end = memchr(p, '"', (size_t)(body + len - p));
	if (!end || (size_t)(end - p) >= cap)
		return false;
	memcpy(cursor, p, (size_t)(end - p));
	cursor[end - p] = '\0';
	*more = memmem(end, (size_t)(body + len - end), "\"more\":true", 11) != NULL;
	return true;
}

int bench_incremental_body(struct comb_buf *b, const char *cursor, const char *h,
			   int limit)
{
	int rc;

	comb_buf_reset(b);
	rc = comb_buf_puts(b, "[{\"artifact\":\"incremental\",");
	if (rc == 0 && h)
		rc = comb_buf_printf(b, "\"#h\":[\"%s\"],", h);
	if (rc == 0 && cursor)
		rc = comb_buf_printf(b, "\"cursor\":\"%s\",", cursor);
	return rc ? rc : comb_buf_printf(b, "\"limit\":%d}]", limit);
}

static void add_error(json_t *errors, const char *fmt, const char *a, const char *b)
{
	char text[640];

	if (json_array_size(errors) >= 20)
		return;
	snprintf(text, sizeof(text), fmt, a ? a : "", b ? b : "");
	json_array_append_new(errors, json_string(text));
}

struct page {
	struct comb_buf body;
	int status;
};

/* One full initial read; pages are kept for checking. */
static int initial_once(struct bench_http *c, const struct bench_layout *l,
			int limit, int expect_pages, struct page *pages, int *npages,
			double *seconds, double *sign_s, double *page_s,
			char *cursor, size_t cursor_cap)
{
	char url[256];
	struct comb_buf body;
	bool more = true, have_cursor = false;
	double t0, ts, tp;
	int n = 0, rc = 0;

	comb_buf_init(&body, 65536);
	snprintf(url, sizeof(url), "http://%s/query", c->host);
	*sign_s = 0;
	/* The expected pages' room is faulted in before the clock. */
	for (n = 0; n < expect_pages && n < MAX_PAGES && rc == 0; n++) {
		comb_buf_init(&pages[n].body, 256u << 20);
		rc = bench_buf_prefault(&pages[n].body, (size_t)limit * PAGE_ITEM_ROOM);
	}
	n = 0;
	t0 = bench_now();
	while (rc == 0 && more && n < MAX_PAGES) {
		char *auth;

		tp = bench_now();
		bench_incremental_body(&body, have_cursor ? cursor : NULL, NULL, limit);
		ts = bench_now();
		auth = bench_nip98(l->reader_sk, url, "POST", body.data, body.len);
		*sign_s += bench_now() - ts;
		if (!auth) {
			rc = COMB_ENOMEM;
			break;
		}
		if (!pages[n].body.data)
			comb_buf_init(&pages[n].body, 256u << 20);
		rc = bench_http_request(c, "POST", "/query", body.data, body.len, auth,
					&pages[n].status, &pages[n].body);
		free(auth);
		n++;
		if (rc || pages[n - 1].status != 200)
			break;
		if (!bench_incremental_tail(pages[n - 1].body.data, pages[n - 1].body.len,
					    cursor, cursor_cap, &more)) {
			rc = COMB_EINVAL;
			break;
		}
		have_cursor = true;
		page_s[n - 1] = bench_now() - tp;
	}
	*seconds = bench_now() - t0;
	*npages = n;
	comb_buf_release(&body);
	return rc;
}

/* Checks the pages of one initial read against the manifest. */
static bool check_initial(const struct bench_manifest *m, struct page *pages,
			  int npages, long *items, long *distinct, json_t *errors)
{
	char *seen = calloc(m->n + 1, 1);
	bool ok = seen != NULL;
	int p;

	*items = *distinct = 0;
	for (p = 0; p < npages && seen; p++) {
		json_t *root, *changes;
		size_t i;

		if (pages[p].status != 200) {
			char st[16];

			snprintf(st, sizeof(st), "%d", pages[p].status);
			add_error(errors, "page answered %s: %.200s", st, pages[p].body.data);
			ok = false;
			continue;
		}
		root = json_loadb(pages[p].body.data, pages[p].body.len, 0, NULL);
		changes = json_object_get(root, "changes");
		if (!json_is_array(changes)) {
			add_error(errors, "page is not an incremental answer%s%s", NULL, NULL);
			ok = false;
		}
		for (i = 0; i < json_array_size(changes); i++) {
			json_t *ch = json_array_get(changes, i);
			json_t *ev = json_object_get(ch, "event");
			const char *op = json_string_value(json_object_get(ch, "op"));
			const char *id = json_string_value(json_object_get(ev, "id"));
			const char *d = bench_event_tag(ev, "d");
			const struct bench_item *it = d ? bench_manifest_find(m, d) : NULL;
			size_t k;

			(*items)++;
			if (!op || strcmp(op, "upsert") || !id || !it ||
			    json_integer_value(json_object_get(ev, "kind")) != 45010) {
				add_error(errors, "unexpected item %s %s", op, d);
				ok = false;
				continue;
			}
			k = (size_t)(it - m->sorted);
			if (it->channel < 0) {
				add_error(errors, "unreadable artifact %s served%s", d, NULL);
				ok = false;
			} else if (strcmp(it->id, id)) {
				add_error(errors, "artifact %s served at revision %s", d, id);
				ok = false;
			} else if (seen[k]) {
				add_error(errors, "artifact %s served twice%s", d, NULL);
				ok = false;
			} else {
				seen[k] = 1;
				(*distinct)++;
			}
		}
		json_decref(root);
	}
	if ((size_t)*distinct != m->readable) {
		char a[24], b[24];

		snprintf(a, sizeof(a), "%ld", *distinct);
		snprintf(b, sizeof(b), "%zu", m->readable);
		add_error(errors, "%s distinct artifacts served, %s expected", a, b);
		ok = false;
	}
	free(seen);
	return ok;
}

int bench_cmd_incr_initial(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	const char *cursor_out = bench_opt(argc, argv, "--cursor-out", NULL);
	int limit = (int)bench_opt_long(argc, argv, "--limit", 100);
	int runs = (int)bench_opt_long(argc, argv, "--runs", 3);
	struct bench_manifest m = {0};
	struct bench_layout l;
	struct bench_http c = {.fd = -1};
	struct page *pages = NULL;
	double secs[16], sign_s = 0, *page_s = NULL;
	char cursor[1024] = "";
	json_t *errors = json_array(), *all = json_array();
	long items = 0, distinct = 0, bytes = 0;
	int npages = 0, r, p, rc;
	bool ok = true;

	if (!addr || !host || !manifest || !cursor_out) {
		bench_log("incr-initial: --addr, --host, --manifest and --cursor-out are required");
		return 2;
	}
	if (runs < 1 || runs > 16)
		runs = 3;
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : bench_manifest_read(manifest, &m);
	rc = rc ? rc : bench_http_open(&c, addr, host);
	pages = calloc(MAX_PAGES, sizeof(*pages));
	page_s = calloc(MAX_PAGES, sizeof(*page_s));
	if (rc == 0 && (!pages || !page_s))
		rc = COMB_ENOMEM;
	for (r = 0; r < runs && rc == 0; r++) {
		rc = initial_once(&c, &l, limit, (int)(m.readable / (size_t)limit) + 2,
				  pages, &npages, &secs[r], &sign_s,
				  page_s, cursor, sizeof(cursor));
		json_array_append_new(all, json_real(secs[r]));
		if (rc) {
			add_error(errors, "read failed: %s%s", comb_strerror(rc), NULL);
			ok = false;
		}
		ok = check_initial(&m, pages, npages, &items, &distinct, errors) && ok;
		bytes = 0;
		for (p = 0; p < npages; p++)
			bytes += (long)pages[p].body.len;
		/* with the pages faulted in but not used */
		for (p = 0; p < MAX_PAGES && pages[p].body.data; p++)
			comb_buf_release(&pages[p].body);
		if (!ok)
			break;
	}
	if (ok && bench_write_file(cursor_out, cursor, strlen(cursor)))
		ok = false;
	if (r > 0) {
		double med = bench_quantile(secs, (size_t)r, 0.5);
		double p50 = bench_quantile(page_s, (size_t)(npages > 0 ? npages : 1), 0.5);
		double pmax = bench_quantile(page_s, (size_t)(npages > 0 ? npages : 1), 1.0);

		bench_print(json_pack("{s:s,s:f,s:o,s:i,s:i,s:I,s:I,s:I,s:f,s:f,s:f,s:b,s:o}",
			"command", "incr-initial", "seconds", med, "runs", all,
			"pages", npages, "limit", limit, "items", (json_int_t)items,
			"distinct", (json_int_t)distinct, "bytes", (json_int_t)bytes,
			"page_ms_p50", p50 * 1e3, "page_ms_max", pmax * 1e3,
			"client_sign_ms", sign_s * 1e3, "ok", ok && rc == 0,
			"errors", errors));
	} else {
		json_decref(all);
		json_decref(errors);
	}
	bench_http_close(&c);
	bench_manifest_release(&m);
	free(pages);
	free(page_s);
	return rc || !ok ? 1 : 0;
}

int bench_cmd_incr_nochange(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *cursor_file = bench_opt(argc, argv, "--cursor-file", NULL);
	int reads = (int)bench_opt_long(argc, argv, "--reads", 1000), i, bad = 0;
	struct bench_layout l;
	struct bench_http c = {.fd = -1};
	struct comb_buf body, resp;
	char url[256], **tokens = NULL, *cursor = NULL, first_bad[256] = "";
	double *lat = NULL, *floor_lat = NULL, med, fmed;
	int rc, status;

	comb_buf_init(&body, 65536);
	comb_buf_init(&resp, 64u << 20);
	if (!addr || !host || !cursor_file || reads < 1) {
		bench_log("incr-nochange: --addr, --host and --cursor-file are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	cursor = bench_read_file(cursor_file, NULL);
	if (rc == 0 && !cursor)
		rc = COMB_EIO;
	rc = rc ? rc : bench_http_open(&c, addr, host);
	tokens = calloc((size_t)reads, sizeof(*tokens));
	lat = calloc((size_t)reads, sizeof(*lat));
	floor_lat = calloc((size_t)reads, sizeof(*floor_lat));
	if (rc == 0 && (!tokens || !lat || !floor_lat))
		rc = COMB_ENOMEM;
	if (rc)
		goto out;
	bench_incremental_body(&body, cursor, NULL, 100);
	snprintf(url, sizeof(url), "http://%s/query", host);
	for (i = 0; i < reads && rc == 0; i++)
		if (!(tokens[i] = bench_nip98(l.reader_sk, url, "POST", body.data, body.len)))
			rc = COMB_ENOMEM;
	for (i = 0; i < reads && rc == 0; i++) {
		double t0 = bench_now();

		rc = bench_http_request(&c, "POST", "/query", body.data, body.len,
					tokens[i], &status, &resp);
		lat[i] = bench_now() - t0;
		if (rc == 0 && (status != 200 || !strstr(resp.data, "\"changes\":[]") ||
				!strstr(resp.data, "\"more\":false"))) {
			if (!bad++)
				snprintf(first_bad, sizeof(first_bad), "%d %.200s", status, resp.data);
		}
	}
	for (i = 0; i < reads && rc == 0; i++) {
		double t0 = bench_now();

		rc = bench_http_request(&c, "GET", "/healthz", NULL, 0, NULL, &status, &resp);
		floor_lat[i] = bench_now() - t0;
		if (rc == 0 && status != 200 && !bad++)
			snprintf(first_bad, sizeof(first_bad), "healthz %d", status);
	}
	if (rc)
		goto out;
	med = bench_quantile(lat, (size_t)reads, 0.5);
	fmed = bench_quantile(floor_lat, (size_t)reads, 0.5);
	bench_print(json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:i,s:s,s:b}",
		"command", "incr-nochange", "reads", reads,
		"median_ms", med * 1e3,
		"p90_ms", bench_quantile(lat, (size_t)reads, 0.9) * 1e3,
		"p99_ms", bench_quantile(lat, (size_t)reads, 0.99) * 1e3,
		"max_ms", bench_quantile(lat, (size_t)reads, 1.0) * 1e3,
		"floor_healthz_median_ms", fmed * 1e3,
		"floor_healthz_p99_ms", bench_quantile(floor_lat, (size_t)reads, 0.99) * 1e3,
		"wrong_answers", bad, "first_wrong", first_bad, "ok", bad == 0));
out:
	if (rc)
		bench_log("incr-nochange failed: %s", comb_strerror(rc));
	for (i = 0; tokens && i < reads; i++)
		free(tokens[i]);
	free(tokens);
	free(lat);
	free(floor_lat);
	free(cursor);
	comb_buf_release(&body);
	comb_buf_release(&resp);
	bench_http_close(&c);
	return rc || bad ? 1 : 0;
}

/*
 * `incr-read`: one read (and its continuations while `more`) with the
 * cursor in --cursor-file and --limit; used to capture the plans of a
 * catch-up read and to time it against a standby. Prints the number of
 * items and the seconds from the first request to the last answer (the
 * tokens signed on the way included); with --cursor-out, writes the last
 * cursor there (a cursor at the head).
 */
int bench_cmd_incr_read(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *cursor_file = bench_opt(argc, argv, "--cursor-file", NULL);
	const char *cursor_out = bench_opt(argc, argv, "--cursor-out", NULL);
	int limit = (int)bench_opt_long(argc, argv, "--limit", 1000);
	struct bench_layout l;
	struct bench_http c = {.fd = -1};
	struct comb_buf body, resp;
	char url[256], cur[1024], *cursor = NULL, *auth;
	long items = 0;
	int status = 0, pages = 0, rc;
	double t0;
	bool more = true;

	comb_buf_init(&body, 65536);
	comb_buf_init(&resp, 256u << 20);
	if (!addr || !host || !cursor_file) {
		bench_log("incr-read: --addr, --host and --cursor-file are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	cursor = bench_read_file(cursor_file, NULL);
	if (rc == 0 && !cursor)
		rc = COMB_EIO;
	rc = rc ? rc : bench_http_open(&c, addr, host);
	snprintf(url, sizeof(url), "http://%s/query", host);
	snprintf(cur, sizeof(cur), "%s", cursor ? cursor : "");
	t0 = bench_now();
	while (rc == 0 && more && pages < 1000) {
		const char *p;

		bench_incremental_body(&body, cur, NULL, limit);
		auth = bench_nip98(l.reader_sk, url, "POST", body.data, body.len);
		rc = auth ? bench_http_request(&c, "POST", "/query", body.data, body.len,
					       auth, &status, &resp) : COMB_ENOMEM;
		free(auth);
		pages++;
		if (rc || status != 200 ||
		    !bench_incremental_tail(resp.data, resp.len, cur, sizeof(cur), &more))
			break;
		for (p = resp.data; (p = strstr(p, "{\"op\":")); p++)
			items++;
	}
	if (rc == 0 && status == 200 && cursor_out &&
	    bench_write_file(cursor_out, cur, strlen(cur)))
		rc = COMB_EIO;
	bench_print(json_pack("{s:s,s:i,s:i,s:I,s:f,s:b}", "command", "incr-read",
			      "status", status, "pages", pages, "items", (json_int_t)items,
			      "seconds", bench_now() - t0, "ok", rc == 0 && status == 200));
	free(cursor);
	comb_buf_release(&body);
	comb_buf_release(&resp);
	bench_http_close(&c);
	return rc == 0 && status == 200 ? 0 : 1;
}

/* ---- incr-delta ---- */

struct expect {
	char d[37];
	char what[16];   /* "upsert" or a removal reason */
	char id[65];     /* the upsert's revision */
	char h[37];      /* the removal's channel */
	bool seen;
};

static int by_expect_d(const void *a, const void *b)
{
	return strcmp(((const struct expect *)a)->d, ((const struct expect *)b)->d);
}

struct delta {
	struct bench_layout l;
	struct bench_manifest m;
	struct bench_http c;
	struct expect *exp;
	size_t nexp, cap;
	int writes, refused;
	json_t *errors;
};

static struct expect *expect_add(struct delta *dl, const char *d, const char *what,
				 const char *id, const char *h)
{
	struct expect *e;

	if (dl->nexp == dl->cap) {
		size_t ncap = dl->cap ? 2 * dl->cap : 1024;
		struct expect *p = realloc(dl->exp, ncap * sizeof(*p));

		if (!p)
			return NULL;
		dl->exp = p;
		dl->cap = ncap;
	}
	e = &dl->exp[dl->nexp++];
	memset(e, 0, sizeof(*e));
	snprintf(e->d, sizeof(e->d), "%s", d);
	snprintf(e->what, sizeof(e->what), "%s", what);
	snprintf(e->id, sizeof(e->id), "%s", id ? id : "");
	snprintf(e->h, sizeof(e->h), "%s", h ? h : "");
	return e;
}

/* Publishes ev as the admin; counts a refusal as an error. */
static void publish(struct delta *dl, struct comb_event *ev, const char *what)
{
	char message[256];
	bool accepted;
	int rc = bench_http_publish(&dl->c, ev, dl->l.admin_sk, &accepted, message,
				    sizeof(message));

	dl->writes++;
	if (rc || !accepted) {
		dl->refused++;
		add_error(dl->errors, "%s refused: %s", what, rc ? comb_strerror(rc) : message);
	}
}

static const struct bench_item *readable_item(struct delta *dl, int channel, int slot)
{
	size_t j = (size_t)channel * BENCH_PER_CHANNEL + (size_t)slot;

	return j < dl->m.readable ? &dl->m.items[j] : NULL;
}

static void write_delta(struct delta *dl)
{
	struct bench_layout *l = &dl->l;
	struct comb_event ev = {0};
	int *usable, nu = 0, c, k;
	char h[37], other[37];

	usable = calloc((size_t)l->art_channels, sizeof(*usable));
	if (!usable)
		return;
	for (c = 0; c < l->art_channels; c++)
		if (c != l->revoke_channel && c != l->live_channel)
			usable[nu++] = c;
	for (k = 0; k < l->edits && nu; k++) {
		const struct bench_item *it = readable_item(dl, usable[k % nu], 1 + k / nu);

		if (!it || bench_revision(&ev, l->admin_pk, it->d, it->h, "update", it->id,
					  bench_unix_time(), 0xed170000ULL + (uint64_t)k))
			continue;
		publish(dl, &ev, "edit");
		expect_add(dl, it->d, "upsert", ev.id, NULL);
	}
	for (k = 0; k < l->moves && nu; k++) {
		const struct bench_item *it = readable_item(dl, usable[k % nu], 40 + k / nu);
		bool inside = k % 2 == 0;

		bench_channel_id(l, inside ? usable[(k + 1) % nu] : BENCH_CH_ELSEWHERE, other);
		if (!it || bench_revision(&ev, l->admin_pk, it->d, other, "move", it->id,
					  bench_unix_time(), 0x30fe0000ULL + (uint64_t)k))
			continue;
		publish(dl, &ev, "move");
		if (inside)
			expect_add(dl, it->d, "upsert", ev.id, NULL);
		else
			expect_add(dl, it->d, "moved", NULL, it->h);
	}
	for (k = 0; k < l->deletes && nu; k++) {
		const struct bench_item *it = readable_item(dl, usable[k % nu], 50 + k / nu);

		if (!it || bench_revision(&ev, l->admin_pk, it->d, it->h, "delete", it->id,
					  bench_unix_time(), 0))
			continue;
		publish(dl, &ev, "delete");
		expect_add(dl, it->d, "deleted", NULL, it->h);
	}
	/* The grant: the reader joins the grant channel and gains all of it. */
	comb_event_release(&ev);
	bench_channel_id(l, BENCH_CH_GRANT, h);
	ev.kind = 9000;
	ev.created_at = bench_unix_time();
	ev.tags = json_pack("[[ss][sss]]", "h", h, "p", l->reader_pk, "member");
	ev.content = strdup("bench grant");
	ev.content_len = strlen("bench grant");
	publish(dl, &ev, "grant");
	for (size_t i = dl->m.readable; i < dl->m.n; i++)
		expect_add(dl, dl->m.items[i].d, "upsert", dl->m.items[i].id, NULL);
	/* The revocation: every artifact of the revoked channel goes. */
	comb_event_release(&ev);
	bench_channel_id(l, l->revoke_channel, h);
	ev.kind = 9001;
	ev.created_at = bench_unix_time();
	ev.tags = json_pack("[[ss][ss]]", "h", h, "p", l->reader_pk);
	ev.content = strdup("bench revoke");
	ev.content_len = strlen("bench revoke");
	publish(dl, &ev, "revoke");
	for (size_t i = 0; i < dl->m.readable; i++)
		if (dl->m.items[i].channel == l->revoke_channel)
			expect_add(dl, dl->m.items[i].d, "access", NULL, h);
	comb_event_release(&ev);
	free(usable);
}

/* Checks one catch-up page; returns the number of items. */
static long check_delta_page(struct delta *dl, const char *body, size_t len)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	json_t *changes = json_object_get(root, "changes");
	long n = 0;
	size_t i;

	if (!json_is_array(changes))
		add_error(dl->errors, "catch-up answer is not an incremental answer: %.200s",
			  body, NULL);
	for (i = 0; i < json_array_size(changes); i++, n++) {
		json_t *ch = json_array_get(changes, i);
		const char *op = json_string_value(json_object_get(ch, "op"));
		json_t *ev = json_object_get(ch, "event");
		const char *d = bench_change_d(ch);
		struct expect key, *e;

		if (!op) {
			add_error(dl->errors, "item without op%s%s", NULL, NULL);
			continue;
		}
		snprintf(key.d, sizeof(key.d), "%s", d ? d : "");
		e = bsearch(&key, dl->exp, dl->nexp, sizeof(key), by_expect_d);
		if (!e) {
			add_error(dl->errors, "unexpected item %s about %s", op, d);
			continue;
		}
		if (e->seen)
			add_error(dl->errors, "item about %s repeated%s", d, NULL);
		e->seen = true;
		if (!strcmp(op, "upsert")) {
			const char *id = json_string_value(json_object_get(ev, "id"));

			if (strcmp(e->what, "upsert") || !id || strcmp(id, e->id))
				add_error(dl->errors, "wrong upsert for %s (expected %s)", d, e->what);
		} else {
			const char *reason = json_string_value(json_object_get(ch, "reason"));
			const char *h = json_string_value(json_object_get(ch, "h"));

			if (!reason || strcmp(reason, e->what) || !h || strcmp(h, e->h))
				add_error(dl->errors, "wrong removal for %s (reason %s)", d, reason);
		}
	}
	json_decref(root);
	return n;
}

/* The xmin of a new snapshot on url into out: every change committed
 * later is stamped at or above it. 0 or COMB_EUNAVAIL. */
static int snapshot_xmin(const char *url, char *out, size_t cap)
{
	PGconn *db = PQconnectdb(url);
	PGresult *res = NULL;
	int rc = COMB_EUNAVAIL;

	if (PQstatus(db) == CONNECTION_OK)
		res = PQexec(db, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text");
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		snprintf(out, cap, "%s", PQgetvalue(res, 0, 0));
		rc = 0;
	} else {
		bench_log("incr-delta: %s", PQerrorMessage(db));
	}
	PQclear(res);
	PQfinish(db);
	return rc;
}

int bench_cmd_incr_delta(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	const char *cursor_file = bench_opt(argc, argv, "--cursor-file", NULL);
	const char *db_url = bench_opt(argc, argv, "--db", NULL);
	const char *policy = bench_opt(argc, argv, "--policy", NULL);
	struct delta dl = {.c = {.fd = -1}};
	char after_xid[32] = "";
	json_t *floor = NULL;
	struct comb_buf body, resp[16];
	char *cursor = NULL, cur[1024], url[256], *auth = NULL;
	double t_writes, t0, seconds = 0;
	long items = 0;
	int status = 0, pages = 0, rc, p, missing = 0;
	bool more = true;
	size_t i;

	comb_buf_init(&body, 65536);
	for (p = 0; p < 16; p++)
		comb_buf_init(&resp[p], 256u << 20);
	dl.errors = json_array();
	if (!addr || !host || !manifest || !cursor_file) {
		bench_log("incr-delta: --addr, --host, --manifest and --cursor-file are required");
		return 2;
	}
	rc = bench_layout_from_opts(&dl.l, argc, argv);
	rc = rc ? rc : bench_manifest_read(manifest, &dl.m);
	cursor = bench_read_file(cursor_file, NULL);
	if (rc == 0 && !cursor)
		rc = COMB_EIO;
	rc = rc ? rc : bench_http_open(&dl.c, addr, host);
	if (rc == 0 && db_url && policy)
		rc = snapshot_xmin(db_url, after_xid, sizeof(after_xid));
	if (rc)
		goto out;
	t_writes = bench_now();
	write_delta(&dl);
	t_writes = bench_now() - t_writes;
	qsort(dl.exp, dl.nexp, sizeof(*dl.exp), by_expect_d);

	/* The catch-up read: the first token is signed and the answer's
	 * room is faulted in before the clock. */
	rc = bench_buf_prefault(&resp[0], 16u << 20);
	if (rc)
		goto out;
	snprintf(url, sizeof(url), "http://%s/query", host);
	snprintf(cur, sizeof(cur), "%s", cursor);
	bench_incremental_body(&body, cur, NULL, 1000);
	auth = bench_nip98(dl.l.reader_sk, url, "POST", body.data, body.len);
	t0 = bench_now();
	while (more && pages < 16 && rc == 0) {
		if (!auth)
			auth = bench_nip98(dl.l.reader_sk, url, "POST", body.data, body.len);
		rc = bench_http_request(&dl.c, "POST", "/query", body.data, body.len, auth,
					&status, &resp[pages]);
		free(auth);
		auth = NULL;
		pages++;
		if (rc || status != 200 ||
		    !bench_incremental_tail(resp[pages - 1].data, resp[pages - 1].len, cur,
					    sizeof(cur), &more))
			break;
		bench_incremental_body(&body, cur, NULL, 1000);
	}
	seconds = bench_now() - t0;
	if (rc == 0 && status != 200)
		add_error(dl.errors, "catch-up read answered: %.200s%s", resp[pages - 1].data, NULL);
	for (p = 0; p < pages && rc == 0 && status == 200; p++)
		items += check_delta_page(&dl, resp[p].data, resp[p].len);
	for (i = 0; i < dl.nexp; i++) {
		if (!dl.exp[i].seen) {
			if (!missing++)
				add_error(dl.errors, "no item about %s (expected %s)", dl.exp[i].d,
					  dl.exp[i].what);
		}
	}
	/* The floor, after the read: the change query and the revisions'
	 * bytes from the position before the writes, without the relay. */
	if (rc == 0 && *after_xid && bench_delta_floor(db_url, policy, &dl.l, after_xid, 3, &floor))
		add_error(dl.errors, "the catch-up floor could not run%s%s", NULL, NULL);
	bench_print(json_pack("{s:s,s:f,s:i,s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:b,s:o,s:o}",
		"command", "incr-delta", "seconds", seconds, "pages", pages,
		"items", (json_int_t)items, "expected_items", (int)dl.nexp,
		"missing", missing, "edits", dl.l.edits, "moves", dl.l.moves,
		"deletes", dl.l.deletes, "grant_artifacts", dl.l.grant,
		"writes", dl.writes, "refused_writes", dl.refused,
		"writes_s", t_writes,
		"ok", rc == 0 && json_array_size(dl.errors) == 0 && items == (long)dl.nexp,
		"errors", json_incref(dl.errors), "floor", floor ? floor : json_null()));
out:
	if (rc)
		bench_log("incr-delta failed: %s", comb_strerror(rc));
	rc = rc || json_array_size(dl.errors) || items != (long)dl.nexp;
	json_decref(dl.errors);
	free(dl.exp);
	free(cursor);
	free(auth);
	comb_buf_release(&body);
	for (p = 0; p < 16; p++)
		comb_buf_release(&resp[p]);
	bench_http_close(&dl.c);
	bench_manifest_release(&dl.m);
	return rc ? 1 : 0;
}
