/*
 * The fixture layout (a pure function of the seed and the scale), the
 * artifact revisions every scenario writes, the manifest of what was
 * loaded, and the small helpers of comb-bench: clocks, quantiles, option
 * parsing, files and /proc.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/sha.h>

#include "bench.h"
#include "comb/error.h"
#include "comb/hex.h"

/* ---- clocks, randomness, statistics ---- */

double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int64_t bench_unix_time(void)
{
	return (int64_t)time(NULL);
}

void bench_random_hex(char *out, size_t bytes)
{
	unsigned char buf[64];
	size_t got = 0;

	if (bytes > sizeof(buf))
		bytes = sizeof(buf);
	while (got < bytes) {
		ssize_t n = getrandom(buf + got, bytes - got, 0);

		if (n <= 0 && errno != EINTR)
			break;
		if (n > 0)
			got += (size_t)n;
	}
	comb_hex_encode(buf, bytes, out);
}

uint64_t bench_rand64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_quantile(double *v, size_t n, double q)
{
	double pos;
	size_t i;

	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	pos = q * (double)(n - 1);
	i = (size_t)pos;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (v[i + 1] - v[i]) * (pos - (double)i);
}

int bench_buf_prefault(struct comb_buf *b, size_t bytes)
{
	static const char zeros[65536];
	int rc = 0;

	comb_buf_reset(b);
	while (rc == 0 && b->len < bytes)
		rc = comb_buf_append(b, zeros, bytes - b->len < sizeof(zeros) ?
					       bytes - b->len : sizeof(zeros));
	if (rc == 0 && b->data)
		memset(b->data, 0, b->cap);
	comb_buf_reset(b);
	return rc;
}

void bench_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	comb_hex_encode(md, sizeof(md), out);
}

void bench_print(json_t *obj)
{
	char *line = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(6));

	if (line) {
		fputs(line, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		free(line);
	}
	json_decref(obj);
}

void bench_log(const char *fmt, ...)
{
	va_list ap;

	fputs("comb-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- options ---- */

const char *bench_opt(int argc, char **argv, const char *name, const char *def)
{
	int i;

	for (i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	return def;
}

long bench_opt_long(int argc, char **argv, const char *name, long def)
{
	const char *v = bench_opt(argc, argv, name, NULL);
	char *end;
	long n;

	if (!v)
		return def;
	n = strtol(v, &end, 10);
	return *end ? def : n;
}

double bench_opt_double(int argc, char **argv, const char *name, double def)
{
	const char *v = bench_opt(argc, argv, name, NULL);
	char *end;
	double x;

	if (!v)
		return def;
	x = strtod(v, &end);
	return *end ? def : x;
}

int bench_layout_from_opts(struct bench_layout *l, int argc, char **argv)
{
	return bench_layout_init(l, bench_opt(argc, argv, "--seed", "comb-bench-1"),
				 bench_opt_double(argc, argv, "--scale", 1.0),
				 bench_opt_long(argc, argv, "--community", 1));
}

/* Splits "a,b" into at most max parts (pointers into buf, cut in place). */
static int bench_split(char *buf, char **parts, int max)
{
	int n = 0;
	char *save = NULL, *p;

	for (p = strtok_r(buf, ",", &save); p && n < max; p = strtok_r(NULL, ",", &save))
		parts[n++] = p;
	return n;
}

int bench_nodes_from_opts(struct bench_nodes *nodes, int argc, char **argv)
{
	int hosts;

	snprintf(nodes->addrs_buf, sizeof(nodes->addrs_buf), "%s",
		 bench_opt(argc, argv, "--addrs", ""));
	snprintf(nodes->hosts_buf, sizeof(nodes->hosts_buf), "%s",
		 bench_opt(argc, argv, "--hosts", ""));
	nodes->n = bench_split(nodes->addrs_buf, nodes->addr, BENCH_MAX_NODES);
	hosts = bench_split(nodes->hosts_buf, nodes->host, BENCH_MAX_NODES);
	if (hosts != nodes->n)
		nodes->n = 0;
	return nodes->n;
}

const char *bench_event_tag(json_t *event, const char *name)
{
	json_t *tags = json_object_get(event, "tags");
	size_t i;

	for (i = 0; i < json_array_size(tags); i++) {
		json_t *t = json_array_get(tags, i);
		const char *n = json_string_value(json_array_get(t, 0));

		if (n && !strcmp(n, name))
			return json_string_value(json_array_get(t, 1));
	}
	return NULL;
}

const char *bench_change_d(json_t *change)
{
	const char *op = json_string_value(json_object_get(change, "op"));

	if (op && !strcmp(op, "upsert"))
		return bench_event_tag(json_object_get(change, "event"), "d");
	return json_string_value(json_object_get(change, "d"));
}

bool bench_msg_is(const char *msg, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && !memcmp(msg, prefix, n);
}

/* ---- files ---- */

char *bench_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	long size;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		data = malloc((size_t)size + 1);
		if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
			free(data);
			data = NULL;
		}
		if (data) {
			data[size] = '\0';
			if (len)
				*len = (size_t)size;
		}
	}
	fclose(f);
	return data;
}

int bench_write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;

	if (!f)
		return COMB_EIO;
	if (fwrite(data, 1, len, f) != len)
		rc = COMB_EIO;
	if (fclose(f))
		rc = COMB_EIO;
	return rc;
}

long bench_proc_status(long pid, const char *field)
{
	char path[64], line[256];
	size_t flen = strlen(field);
	long value = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, field, flen) && line[flen] == ':') {
			value = strtol(line + flen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return value;
}

/* ---- the layout ---- */

/* 32 bytes of SHA-256("comb-bench:<seed>:<label>:<i>"). */
static void derive(const struct bench_layout *l, const char *label, long i,
		   unsigned char out[32])
{
	char text[160];
	int n = snprintf(text, sizeof(text), "comb-bench:%s:%s:%ld", l->seed,
			 label, i);

	SHA256((const unsigned char *)text, (size_t)n, out);
}

static void derive_uuid(const struct bench_layout *l, const char *label,
			long i, char out[37])
{
	unsigned char b[32];
	char hex[33];

	derive(l, label, i, b);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	comb_hex_encode(b, 16, hex);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
		 hex + 16, hex + 20);
}

static int derive_key(const struct bench_layout *l, const char *label,
		      unsigned char sk[32], char pk[65])
{
	long i;

	for (i = 0; i < 16; i++) {
		derive(l, label, i, sk);
		if (comb_key_public(sk, pk) == 0)
			return 0;
	}
	return COMB_EINVAL;
}

static int scaled(int reference, double scale, int least)
{
	int n = (int)lround((double)reference * scale);

	return n < least ? least : n;
}

int bench_layout_init(struct bench_layout *l, const char *seed, double scale,
		      long community)
{
	int rc;

	memset(l, 0, sizeof(*l));
	snprintf(l->seed, sizeof(l->seed), "%s", seed);
	if (scale <= 0 || scale > 10)
		return COMB_EINVAL;
	l->scale = scale;
	l->community = community;
	l->artifacts = scaled(BENCH_ARTIFACTS, scale, 2 * BENCH_PER_CHANNEL + 1);
	l->memberships = scaled(BENCH_MEMBERSHIPS, scale, 16);
	l->art_channels = (l->artifacts + BENCH_PER_CHANNEL - 1) / BENCH_PER_CHANNEL;
	if (l->memberships < l->art_channels)
		l->memberships = l->art_channels;
	l->small_channels = scaled(BENCH_SNAPSHOT_SMALL, scale, 1) / BENCH_PER_CHANNEL;
	if (l->small_channels < 1)
		l->small_channels = 1;
	if (l->small_channels > l->art_channels - 1)
		l->small_channels = l->art_channels - 1;
	l->grant = scaled(BENCH_GRANT, scale, 1);
	l->edits = scaled(BENCH_EDITS, scale, 1);
	l->moves = scaled(BENCH_MOVES, scale, 2);
	l->moves += l->moves % 2;
	l->deletes = scaled(BENCH_DELETES, scale, 1);
	l->live_channel = l->art_channels - 1;
	l->revoke_channel = l->art_channels / 2;
	l->chats = scaled(BENCH_CHATS, scale, 10);
	if (l->memberships < l->art_channels + 1)
		l->memberships = l->art_channels + 1;
	l->chat_channel = l->art_channels;
	rc = derive_key(l, "admin", l->admin_sk, l->admin_pk);
	if (rc == 0)
		rc = derive_key(l, "reader", l->reader_sk, l->reader_pk);
	return rc;
}

void bench_channel_id(const struct bench_layout *l, int i, char out[37])
{
	switch (i) {
	case BENCH_CH_GRANT:
		derive_uuid(l, "channel-grant", 0, out);
		break;
	case BENCH_CH_ELSEWHERE:
		derive_uuid(l, "channel-elsewhere", 0, out);
		break;
	case BENCH_CH_INGEST:
		derive_uuid(l, "channel-ingest", 0, out);
		break;
	default:
		derive_uuid(l, "channel", i, out);
		break;
	}
}

void bench_artifact_id(const struct bench_layout *l, const char *series,
		       int j, char out[37])
{
	derive_uuid(l, series, j, out);
}

int bench_artifact_channel(const struct bench_layout *l, int j)
{
	(void)l;
	return j / BENCH_PER_CHANNEL;
}

int bench_artifacts_in(const struct bench_layout *l, int nchannels)
{
	long n = (long)nchannels * BENCH_PER_CHANNEL;

	return n > l->artifacts ? l->artifacts : (int)n;
}

/* ---- revisions ---- */

static const char *const words[] = {
	"the", "payment", "timeout", "retry", "queue", "client", "server",
	"review", "deploy", "check", "invoice", "customer", "report", "fix",
	"update", "release", "branch", "merge", "test", "coverage", "latency",
	"budget", "schema", "index", "cursor", "channel", "member", "sync",
	"offline", "conflict", "draft", "owner", "team", "sprint", "estimate",
	"blocked", "waiting", "priority", "design", "note", "follow", "up",
	"with", "and", "for", "before", "after", "monday", "friday", "ticket",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

/* Appends exactly len bytes of words (ASCII, nothing to escape). */
static int put_words(struct comb_buf *b, size_t len, uint64_t *rng)
{
	size_t start = b->len;
	int rc = 0;

	while (rc == 0 && b->len - start < len) {
		const char *w = words[bench_rand64(rng) % NWORDS];
		size_t left = len - (b->len - start), wl = strlen(w);

		if (b->len > start) {
			rc = comb_buf_putc(b, ' ');
			left--;
		}
		if (rc == 0 && left > 0)
			rc = comb_buf_append(b, w, wl < left ? wl : left);
	}
	return rc;
}

static int add_tag(json_t *tags, const char *name, const char *value)
{
	return json_array_append_new(tags, json_pack("[ss]", name, value)) ? COMB_ENOMEM : 0;
}

int bench_revision(struct comb_event *ev, const char *pubkey, const char *d,
		   const char *h, const char *op, const char *prev,
		   int64_t created_at, uint64_t content_seed)
{
	bool del = !strcmp(op, "delete");
	struct comb_buf title, json, content;
	uint64_t rng = content_seed;
	json_t *tags;
	size_t len;
	int rc = 0;

	comb_event_release(ev);
	comb_buf_init(&title, 512);
	comb_buf_init(&json, 1 << 20);
	comb_buf_init(&content, 1 << 20);
	tags = json_array();
	if (!tags) {
		rc = COMB_ENOMEM;
		goto out;
	}
	rc = add_tag(tags, "ar", "1");
	rc = rc ? rc : add_tag(tags, "d", d);
	rc = rc ? rc : add_tag(tags, "h", h);
	rc = rc ? rc : add_tag(tags, "type", "demo.task");
	rc = rc ? rc : add_tag(tags, "op", op);
	if (prev)
		rc = rc ? rc : add_tag(tags, "prev", prev);
	if (!del) {
		rc = rc ? rc : comb_buf_printf(&title, "Task %.8s: ", d);
		rc = rc ? rc : put_words(&title, 40, &rng);
		rc = rc ? rc : add_tag(tags, "title", title.data);
		rc = rc ? rc : add_tag(tags, "status",
				       bench_rand64(&rng) % 3 ? "open" : "done");
	}
	if (rc)
		goto out;
	ev->tags = tags;
	tags = NULL;
	ev->kind = 45010;
	ev->created_at = created_at;
	memcpy(ev->pubkey, pubkey, 65);
	memset(ev->id, '0', 64);
	memset(ev->sig, '0', 128);
	ev->content = calloc(1, 1);
	if (!ev->content) {
		rc = COMB_ENOMEM;
		goto out;
	}
	if (del)
		goto out;
	/* Pad the content so that the signed event has the target size. */
	rc = comb_event_to_json(ev, &json);
	if (rc)
		goto out;
	len = json.len < BENCH_EVENT_BYTES ? BENCH_EVENT_BYTES - json.len : 0;
	rc = put_words(&content, len, &rng);
	if (rc)
		goto out;
	free(ev->content);
	ev->content = comb_buf_detach(&content, &ev->content_len);
	if (!ev->content)
		rc = COMB_ENOMEM;
out:
	json_decref(tags);
	comb_buf_release(&title);
	comb_buf_release(&json);
	comb_buf_release(&content);
	return rc;
}

int bench_chat_message(struct comb_event *ev, const char *pubkey, const char *h,
		       int64_t created_at, uint64_t content_seed)
{
	struct comb_buf json, content;
	uint64_t rng = content_seed;
	size_t len;
	int rc;

	comb_event_release(ev);
	comb_buf_init(&json, 1 << 20);
	comb_buf_init(&content, 1 << 20);
	ev->kind = 9;
	ev->created_at = created_at;
	memcpy(ev->pubkey, pubkey, 65);
	memset(ev->id, '0', 64);
	memset(ev->sig, '0', 128);
	ev->tags = json_pack("[[ss]]", "h", h);
	ev->content = calloc(1, 1);
	rc = ev->tags && ev->content ? comb_event_to_json(ev, &json) : COMB_ENOMEM;
	len = json.len < BENCH_EVENT_BYTES ? BENCH_EVENT_BYTES - json.len : 0;
	rc = rc ? rc : put_words(&content, len, &rng);
	if (rc == 0) {
		free(ev->content);
		ev->content = comb_buf_detach(&content, &ev->content_len);
		if (!ev->content)
			rc = COMB_ENOMEM;
	}
	comb_buf_release(&json);
	comb_buf_release(&content);
	return rc;
}

int bench_chat_fixture(const struct bench_layout *l, int i, struct comb_event *ev)
{
	unsigned char id[32];
	char h[37];
	int rc;

	bench_channel_id(l, l->chat_channel, h);
	rc = bench_chat_message(ev, l->admin_pk, h, BENCH_FIXTURE_TIME + i,
				0xc4a70000ULL + (uint64_t)i);
	rc = rc ? rc : comb_event_compute_id(ev, id);
	if (rc == 0)
		comb_hex_encode(id, sizeof(id), ev->id);
	return rc;
}

int bench_sign_json(struct comb_event *ev, const unsigned char sk[32],
		    struct comb_buf *out)
{
	int rc = comb_event_sign(ev, sk);

	comb_buf_reset(out);
	return rc ? rc : comb_event_to_json(ev, out);
}

struct sign_job {
	struct comb_event *evs;
	size_t from, to;
	const unsigned char *sk;
	int rc;
};

static void *sign_main(void *arg)
{
	struct sign_job *job = arg;
	size_t i;

	for (i = job->from; i < job->to && job->rc == 0; i++)
		job->rc = comb_event_sign(&job->evs[i], job->sk);
	return NULL;
}

int bench_sign_all(struct comb_event *evs, size_t n,
		   const unsigned char sk[32], int threads)
{
	struct sign_job jobs[16];
	pthread_t tids[16];
	int i, started = 0, rc = 0;

	if (threads < 1)
		threads = 1;
	if (threads > 16)
		threads = 16;
	for (i = 0; i < threads; i++) {
		jobs[i] = (struct sign_job){
			.evs = evs, .sk = sk,
			.from = n * (size_t)i / (size_t)threads,
			.to = n * (size_t)(i + 1) / (size_t)threads,
		};
	}
	/* The first slice runs here; the others on their own threads. */
	for (i = 1; i < threads; i++) {
		if (pthread_create(&tids[i], NULL, sign_main, &jobs[i]))
			break;
		started = i;
	}
	sign_main(&jobs[0]);
	rc = jobs[0].rc;
	for (i = 1; i <= started; i++) {
		pthread_join(tids[i], NULL);
		if (jobs[i].rc)
			rc = jobs[i].rc;
	}
	/* Slices whose thread could not start are signed here. */
	for (i = started + 1; i < threads && rc == 0; i++) {
		sign_main(&jobs[i]);
		rc = jobs[i].rc;
	}
	return rc;
}

/* ---- the manifest ---- */

int bench_manifest_write(const char *path, const struct bench_manifest *m)
{
	FILE *f = fopen(path, "w");
	size_t i;
	int rc = 0;

	if (!f)
		return COMB_EIO;
	fprintf(f, "readable\t%zu\n", m->readable);
	for (i = 0; i < m->n; i++)
		fprintf(f, "%s\t%s\t%s\t%d\n", m->items[i].d, m->items[i].h,
			m->items[i].id, m->items[i].channel);
	if (fclose(f))
		rc = COMB_EIO;
	return rc;
}

static int by_d(const void *a, const void *b)
{
	return strcmp(((const struct bench_item *)a)->d,
		      ((const struct bench_item *)b)->d);
}

int bench_manifest_read(const char *path, struct bench_manifest *m)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t cap = 0;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	if (!f)
		return COMB_EIO;
	if (!fgets(line, sizeof(line), f) || strncmp(line, "readable\t", 9)) {
		rc = COMB_EINVAL;
		goto out;
	}
	m->readable = (size_t)strtoul(line + 9, NULL, 10);
	while (fgets(line, sizeof(line), f)) {
		struct bench_item *it;

		if (m->n == cap) {
			size_t ncap = cap ? 2 * cap : 16384;
			struct bench_item *p = realloc(m->items, ncap * sizeof(*p));

			if (!p) {
				rc = COMB_ENOMEM;
				goto out;
			}
			m->items = p;
			cap = ncap;
		}
		it = &m->items[m->n];
		if (sscanf(line, "%36s\t%36s\t%64s\t%d", it->d, it->h, it->id,
			   &it->channel) != 4) {
			rc = COMB_EINVAL;
			goto out;
		}
		m->n++;
	}
	m->sorted = malloc((m->n + 1) * sizeof(*m->sorted));
	if (!m->sorted) {
		rc = COMB_ENOMEM;
		goto out;
	}
	memcpy(m->sorted, m->items, m->n * sizeof(*m->sorted));
	qsort(m->sorted, m->n, sizeof(*m->sorted), by_d);
out:
	fclose(f);
	return rc;
}

void bench_manifest_release(struct bench_manifest *m)
{
	free(m->items);
	free(m->sorted);
	memset(m, 0, sizeof(*m));
}

const struct bench_item *bench_manifest_find(const struct bench_manifest *m,
					     const char *d)
{
	struct bench_item key;

	if (!m->sorted)
		return NULL;
	snprintf(key.d, sizeof(key.d), "%s", d);
	return bsearch(&key, m->sorted, m->n, sizeof(key), by_d);
}

int bench_head_tags(const struct comb_event *ev, struct comb_buf *out)
{
	json_t *obj = json_object();
	char *text = NULL;
	size_t i, k;
	int rc = COMB_ENOMEM;

	for (i = 0; obj && i < json_array_size(ev->tags); i++) {
		const json_t *tag = json_array_get(ev->tags, i);
		const char *name = json_string_value(json_array_get(tag, 0));
		json_t *value = json_array_get(tag, 1), *vals;

		if (json_array_size(tag) < 2 || !name || !strcmp(name, "d") ||
		    !strcmp(name, "h") || !strcmp(name, "type"))
			continue;
		vals = json_object_get(obj, name);
		if (!vals) {
			vals = json_array();
			if (json_object_set_new(obj, name, vals))
				goto out;
		}
		for (k = 0; k < json_array_size(vals); k++)
			if (json_equal(json_array_get(vals, k), value))
				break;
		if (k == json_array_size(vals) && json_array_append(vals, value))
			goto out;
	}
	text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (text)
		rc = comb_buf_puts(out, text);
out:
	free(text);
	json_decref(obj);
	return rc;
}
