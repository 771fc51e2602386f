/*
 * comb-bench: the client side of `make bench` (docs/benchmarks.md). One
 * program with one subcommand per job: generating and loading the
 * fixtures, the PostgreSQL floors, and the clients of every scenario of
 * BENCHMARKS.md (HTTP with NIP-98, WebSocket with NIP-42). Each
 * subcommand prints one JSON object with its figures and the result of its
 * correctness checks on stdout; tests/bench/run.mjs adds the relay's
 * memory, the targets and the machine.
 *
 * The fixture layout is a pure function of the seed and the scale, so
 * every subcommand can name the same channels, artifacts and keys without
 * sharing state beyond the manifest the loader writes.
 */
#ifndef COMB_BENCH_H
#define COMB_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"
#include "comb/event.h"

/* The size of one artifact revision as served (BENCHMARKS.md). */
#define BENCH_EVENT_BYTES 4923
/* Artifacts per channel holding artifacts (the last one holds the rest). */
#define BENCH_PER_CHANNEL 64
/* The reference scale. */
#define BENCH_ARTIFACTS 10050
#define BENCH_MEMBERSHIPS 60002
#define BENCH_SNAPSHOT_SMALL 4096
#define BENCH_GRANT 500
#define BENCH_EDITS 100
#define BENCH_MOVES 10
#define BENCH_DELETES 5
#define BENCH_CHATS 10050
/* created_at of the first loaded event (the n-th is this + n). */
#define BENCH_FIXTURE_TIME 1700000000

/* Special channels (not among the reader's memberships), as negative
 * channel indexes of bench_channel_id(). */
enum bench_special {
	BENCH_CH_GRANT = -1,     /* private, granted to the reader by the delta */
	BENCH_CH_ELSEWHERE = -2, /* private, never readable by the reader */
	BENCH_CH_INGEST = -3,    /* where the ingest scenario creates */
};

struct bench_layout {
	char seed[64];
	double scale;
	long community;
	int artifacts;       /* readable by the reader */
	int memberships;     /* channels the reader is a member of */
	int art_channels;    /* the first channels, holding the artifacts */
	int small_channels;  /* the first channels of the small sync */
	int grant;           /* artifacts in the grant channel */
	int edits, moves, deletes;
	int live_channel;    /* the channel of the live scenario */
	int revoke_channel;  /* the channel the delta revokes */
	int chats;           /* kind-9 messages loaded in the chat channel */
	int chat_channel;    /* a membership holding no artifacts */
	unsigned char admin_sk[32], reader_sk[32];
	char admin_pk[65], reader_pk[65];
};

/* Fills l for seed and scale (1.0 is the reference scale). */
int bench_layout_init(struct bench_layout *l, const char *seed, double scale,
		      long community);

/* Channel i (0 <= i < memberships, or an enum bench_special) as a UUID. */
void bench_channel_id(const struct bench_layout *l, int i, char out[37]);
/* d of artifact j: "art" (readable), "grant" or "ingest" series. */
void bench_artifact_id(const struct bench_layout *l, const char *series,
		       int j, char out[37]);
/* The channel index of readable artifact j. */
int bench_artifact_channel(const struct bench_layout *l, int j);
/* The number of readable artifacts in the first n channels. */
int bench_artifacts_in(const struct bench_layout *l, int nchannels);

/* Appends the head tags of ev as comb_head_tags (migrations/0018) builds
 * them, what artifact_heads.tags holds: every tag of two elements or more
 * but d, h and type, as name -> its distinct first values, serialized.
 * Returns 0 or COMB_ENOMEM. */
int bench_head_tags(const struct comb_event *ev, struct comb_buf *out);

/*
 * Builds (unsigned) a kind-45010 revision: d, h, op, prev (NULL for a
 * create), with a title and content from content_seed, padded so that the
 * signed event serializes to BENCH_EVENT_BYTES (a delete has no title and
 * empty content). ev is released first. Sign it with comb_event_sign.
 */
int bench_revision(struct comb_event *ev, const char *pubkey, const char *d,
		   const char *h, const char *op, const char *prev,
		   int64_t created_at, uint64_t content_seed);

/*
 * Builds (unsigned) a kind-9 chat message by pubkey in channel h, with a
 * content from content_seed padded so that the signed event serializes to
 * BENCH_EVENT_BYTES. ev is released first.
 */
int bench_chat_message(struct comb_event *ev, const char *pubkey, const char *h,
		       int64_t created_at, uint64_t content_seed);

/* Builds the fixture's chat message i (0 <= i < l->chats; by the admin in
 * the chat channel, created at BENCH_FIXTURE_TIME + i) with its id set,
 * unsigned: the loader signs it, the readers only need its id. */
int bench_chat_fixture(const struct bench_layout *l, int i, struct comb_event *ev);

/* Signs ev with sk and serializes it into out (reset first). */
int bench_sign_json(struct comb_event *ev, const unsigned char sk[32],
		    struct comb_buf *out);

/* Builds and signs n artifact creates by the admin in the ingest channel,
 * d from series ("ingest", "floor"), created now. */
int bench_ingest_events(const struct bench_layout *l, const char *series,
			struct comb_event *evs, size_t n);

/* Signs n events in place on up to `threads` threads. */
int bench_sign_all(struct comb_event *evs, size_t n,
		   const unsigned char sk[32], int threads);

/* ---- the manifest: what the loader stored, one artifact per line ---- */

struct bench_item {
	char d[37];
	char h[37];
	char id[65];
	int channel;         /* channel index, or an enum bench_special */
};

struct bench_manifest {
	struct bench_item *items;   /* readable ones first, then the grant ones */
	size_t n;
	size_t readable;            /* the first `readable` items */
	struct bench_item *sorted;  /* the same items sorted by d */
};

int bench_manifest_write(const char *path, const struct bench_manifest *m);
int bench_manifest_read(const char *path, struct bench_manifest *m);
void bench_manifest_release(struct bench_manifest *m);
/* The item with d, or NULL. */
const struct bench_item *bench_manifest_find(const struct bench_manifest *m,
					     const char *d);

/* ---- small helpers ---- */

double bench_now(void);                    /* CLOCK_MONOTONIC seconds */
int64_t bench_unix_time(void);
void bench_random_hex(char *out, size_t bytes); /* 2*bytes hex + NUL */
uint64_t bench_rand64(uint64_t *state);    /* splitmix64 */
/* The q-quantile (0..1) of n values (sorted in place). */
double bench_quantile(double *v, size_t n, double q);
void bench_sha256_hex(const void *data, size_t len, char out[65]);
/* Empties b and gives it room for bytes, every page of it touched once, so
 * that filling it inside a timed section costs no first-touch page fault
 * (10 to 20 us per 4 KiB page on some virtual machines: the client's own
 * cost, not the relay's). 0, COMB_ENOMEM or COMB_ETOOBIG. */
int bench_buf_prefault(struct comb_buf *b, size_t bytes);
/* Prints obj (stolen) as one line on stdout. */
void bench_print(json_t *obj);
/* Logs to stderr with a "comb-bench: " prefix. */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Command-line options: "--name value" pairs after the subcommand. */
const char *bench_opt(int argc, char **argv, const char *name, const char *def);
long bench_opt_long(int argc, char **argv, const char *name, long def);
double bench_opt_double(int argc, char **argv, const char *name, double def);
/* The layout from --seed, --scale and --community. */
int bench_layout_from_opts(struct bench_layout *l, int argc, char **argv);
/* The relay nodes of --addrs and --hosts: comma lists, as many of each. */
#define BENCH_MAX_NODES 8
struct bench_nodes {
	char addrs_buf[512], hosts_buf[512];
	char *addr[BENCH_MAX_NODES], *host[BENCH_MAX_NODES];
	int n;
};
/* Fills nodes from --addrs and --hosts; returns how many, or 0 when they
 * are missing or not as many. */
int bench_nodes_from_opts(struct bench_nodes *nodes, int argc, char **argv);
/* True when the len bytes of msg begin with prefix. */
bool bench_msg_is(const char *msg, size_t len, const char *prefix);
/* The first value of event's (a JSON event object) first tag name, or
 * NULL. */
const char *bench_event_tag(json_t *event, const char *name);
/* The artifact an incremental answer's change names: an upsert's d tag,
 * a removal's "d"; NULL when it names none. */
const char *bench_change_d(json_t *change);

/* Reads the file at path into a NUL-terminated string (caller frees). */
char *bench_read_file(const char *path, size_t *len);
int bench_write_file(const char *path, const char *data, size_t len);

/* ---- HTTP/1.1 over one keep-alive connection ---- */

/*
 * Connects a blocking TCP socket with TCP_NODELAY to addr
 * ("127.0.0.1:PORT", IPv4 only), for the HTTP and the WebSocket clients.
 * Returns the descriptor (the caller closes it) or -1: addr malformed, or
 * the socket or the connect failed (then errno says why).
 */
int bench_dial(const char *addr);

struct bench_http {
	int fd;
	char addr[64];       /* 127.0.0.1:PORT, dialled */
	char host[128];      /* the Host header */
	struct comb_buf in;
};

int bench_http_open(struct bench_http *c, const char *addr, const char *host);
void bench_http_close(struct bench_http *c);
/*
 * Sends one request (body may be NULL; auth NULL for none) and reads the
 * whole answer: *status and the body into resp (reset first). Reconnects
 * once when the server had closed the connection.
 */
int bench_http_request(struct bench_http *c, const char *method,
		       const char *path, const char *body, size_t blen,
		       const char *auth, int *status, struct comb_buf *resp);
/* The body of an incremental read (PROTOCOL.md section 8.1) into b (reset
 * first): cursor and the one channel h of its scope each NULL for none. */
int bench_incremental_body(struct comb_buf *b, const char *cursor, const char *h,
			   int limit);
/* Finds the last "cursor" (at most cap bytes with NUL) and "more" in the
 * last bytes of an incremental answer; false when it holds no cursor. */
bool bench_incremental_tail(const char *body, size_t len, char *cursor, size_t cap,
			    bool *more);
/* A NIP-98 header value "Nostr <base64>" for url, method and body, with a
 * random nonce tag (tokens are single use). Caller frees. */
char *bench_nip98(const unsigned char sk[32], const char *url,
		  const char *method, const char *body, size_t blen);
/* Signs ev with sk and POSTs it to /events; *accepted from the answer,
 * message (at most msglen) its message. */
int bench_http_publish(struct bench_http *c, struct comb_event *ev,
		       const unsigned char sk[32], bool *accepted,
		       char *message, size_t msglen);

/* ---- WebSocket clients on one epoll loop ---- */

enum bench_ws_state {
	BENCH_WS_HANDSHAKE,
	BENCH_WS_OPEN,
	BENCH_WS_CLOSED,
};

struct bench_ws;
struct bench_loop;

/* Called for every text message once the connection is authenticated
 * (and for AUTH-related ones the loop does not handle itself). */
typedef void (*bench_ws_message_fn)(struct bench_loop *loop,
				    struct bench_ws *ws, const char *msg,
				    size_t len, double t);

struct bench_ws {
	int fd;
	int index;               /* in the loop */
	int node;                /* which relay node (caller's choice) */
	enum bench_ws_state state;
	bool authed;
	char close_reason[160];  /* why it closed, when it did */
	char host[128];
	const unsigned char *sk; /* borrowed: authenticates with it */
	char auth_id[65];
	char *in;
	size_t in_len, in_cap;
	char *frag;              /* a fragmented message so far */
	size_t frag_len, frag_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	bool want_out;
	double t_connect, t_authed;
	void *user;
};

struct bench_loop {
	int ep;
	char *chunk;             /* where a connection with nothing pending reads */
	struct bench_ws **conns;
	int n, cap;
	bench_ws_message_fn on_message;
	void *ctx;
	int authed, closed;
	char first_error[200];
};

int bench_loop_init(struct bench_loop *loop, bench_ws_message_fn fn, void *ctx);
void bench_loop_release(struct bench_loop *loop);
/*
 * Opens a WebSocket to addr (127.0.0.1:PORT) with Host header host and
 * sends the upgrade; the loop completes the handshake and, with sk set,
 * answers the relay's AUTH. Returns the connection or NULL (the reason in
 * loop->first_error).
 */
struct bench_ws *bench_ws_connect(struct bench_loop *loop, const char *addr,
				  const char *host, const unsigned char *sk,
				  int node);
/* Gives ws's input buffer room for a message of bytes, every page touched
 * once (see bench_buf_prefault). 0, COMB_ENOMEM or COMB_ETOOBIG. */
int bench_ws_prefault(struct bench_ws *ws, size_t bytes);
/* Queues one text frame (masked) and writes what the socket takes. */
int bench_ws_send(struct bench_loop *loop, struct bench_ws *ws,
		  const char *data, size_t len);
/* Runs the loop until done(ctx) is true or timeout_s passes. Returns 0
 * when done, COMB_ETIMEOUT otherwise. */
int bench_loop_run(struct bench_loop *loop, bool (*done)(void *ctx),
		   double timeout_s);
/* Closes every connection now. */
void bench_loop_close_all(struct bench_loop *loop);
/* The id of the first event in an ["EVENT",sub,{...}] message (65 bytes
 * with NUL), or false. */
bool bench_event_id_of(const char *msg, size_t len, char id[65]);

/* ---- live latency: the driver of sync-live and resume-live ---- */

/*
 * Subscribers spread over the relay nodes hold one subscription each on
 * the live channel; a writer sends edits one at a time, each awaited until
 * its OK and its frame at every subscriber. The scenario says how a
 * subscription opens and what a subscriber's message is; the driver does
 * the rest and keeps, per subscriber and edit, the milliseconds from the
 * writer's OK (and from its send) to the subscriber's frame.
 */

struct bench_live;

/* What a subscriber's message is, as the scenario reads it. */
enum bench_live_frame {
	BENCH_LIVE_NOTHING,    /* nothing the driver counts */
	BENCH_LIVE_REVISION,   /* one revision, its id given: the edit in flight
				* after EOSE, unexpected otherwise */
	BENCH_LIVE_UNEXPECTED, /* a frame that should not have come */
	BENCH_LIVE_EOSE,       /* the subscription's EOSE */
	BENCH_LIVE_CLOSED,     /* the relay closed or refused the subscription */
};

struct bench_live_ops {
	/* Sends subscriber sub's REQ; 0 or the send's error. */
	int (*open)(struct bench_live *lv, int sub);
	/* Reads one message of subscriber sub; sets id (65 bytes with NUL)
	 * when it returns BENCH_LIVE_REVISION. */
	enum bench_live_frame (*frame)(struct bench_live *lv, int sub,
				       const char *msg, size_t len, char id[65]);
	/* Once the subscriptions are open: what was wrong with subscriber
	 * sub's opening, as a new JSON string, or NULL when nothing was. */
	json_t *(*opening_error)(struct bench_live *lv, int sub);
};

struct bench_live_sub {
	struct bench_ws *ws;     /* borrowed from the loop; NULL until connected */
	bool eose;
	int got;                 /* edits received */
	int unexpected;          /* frames other than the edit in flight */
	char closed[200];        /* the CLOSED (or NOTICE) that ended it */
};

struct bench_live {
	struct bench_loop loop;  /* its ctx is this struct */
	const struct bench_live_ops *ops;
	void *ctx;               /* the scenario's, borrowed */
	struct bench_live_sub *subs;
	int nsubs, nnodes;
	struct bench_ws *writer; /* the scenario connects it */
	struct comb_event *edits; /* [nedits], the scenario signs them */
	int nedits;
	int eosed, closed_subs;
	/* the edit in flight */
	char edit_id[65];
	bool ok_seen, ok_accepted;
	char ok_message[200];
	double t_send, t_ok;
	int received;            /* subscribers that got it */
	double *t_frame;         /* [nsubs] its arrival, -1 before */
	/* the figures, in ms, one per subscriber and completed edit */
	double *from_ok, *from_send, *node_ms[8];
	size_t n, node_n[8];
	int early;               /* frames that arrived before the OK */
	double frame_bytes;      /* the counted frames' bytes on the wire */
};

/* Sets lv up for nsubs subscribers over nnodes (at most 8) nodes and
 * nedits edits (lv->edits, empty), with ops and ctx (borrowed) of the
 * scenario. bench_live_release releases it, even when this fails. */
int bench_live_init(struct bench_live *lv, const struct bench_live_ops *ops,
		    void *ctx, int nsubs, int nnodes, int nedits);
void bench_live_release(struct bench_live *lv);
/* Connects subscriber sub (authenticating with sk, borrowed) to addr with
 * Host host as node `node`, and ties the connection to it; returns the
 * connection or NULL (the reason in lv->loop.first_error). */
struct bench_ws *bench_live_subscriber(struct bench_live *lv, int sub,
				       const char *addr, const char *host,
				       const unsigned char *sk, int node);
/* Connects subscribers from..nsubs-1, subscriber i to node i % nnodes of
 * nodes, keeping the handshakes in flight bounded. On a failure,
 * COMB_EIO with an error appended. */
int bench_live_connect(struct bench_live *lv, int from,
		       const struct bench_nodes *nodes, const unsigned char *sk,
		       json_t *errors);
/* Runs the loop until every connection is authenticated or closed; true
 * when all were authenticated within timeout_s and none closed. */
bool bench_live_authenticate(struct bench_live *lv, double timeout_s);
/* Opens the subscriptions of subscribers from..nsubs-1 and waits up to
 * timeout_s for every subscription to reach EOSE or close; then checks
 * every subscriber's opening (closed, or ops->opening_error), appending
 * the first error. Returns 0, or the error of a failed send. */
int bench_live_open(struct bench_live *lv, int from, double timeout_s,
		    json_t *errors);
/* Sends the signed lv->edits one at a time over the writer, each awaited
 * up to timeout_s until its OK and its frame at every subscriber, and
 * records the figures. Stops at the first edit that fails, with an error
 * appended; returns the number of edits completed. */
int bench_live_edits(struct bench_live *lv, double timeout_s, json_t *errors);
/* The unexpected frames of all subscribers, with an error appended for
 * them and for each closed subscription (up to 20 errors); with
 * every_edit, also for each subscriber that did not get exactly
 * `completed` edits. */
int bench_live_tally(struct bench_live *lv, int completed, bool every_edit,
		     json_t *errors);
/* The q-quantile (0..1) of the figures from the writer's OK, or from its
 * send, as a new JSON real; JSON null when there is none. */
json_t *bench_live_ms(struct bench_live *lv, double q);
json_t *bench_live_from_send_ms(struct bench_live *lv, double q);
/* A new JSON array of {node, p50_ms, p99_ms} per node. */
json_t *bench_live_per_node(struct bench_live *lv);
/* The mean size on the wire (WebSocket header included) of the frames
 * that carried an edit to a subscriber, in bytes; null before any. */
json_t *bench_live_frame_bytes(struct bench_live *lv);

/* ---- /proc ---- */

/* A field of /proc/pid/status in KiB (VmRSS, VmHWM) or a count
 * (Threads); -1 when unavailable. */
long bench_proc_status(long pid, const char *field);

/*
 * The floor of a catch-up read (docs/benchmarks.md, incremental_delta):
 * on a new connection to url, `runs` times (at most 8), the change query
 * the relay runs for the reader from after_xid (comb_incremental_changes,
 * every channel, the reader's read keys as the policy plugins at policy
 * give them) and then the stored bytes of every revision it names, in one
 * statement. *out (new) holds the median and the first run's seconds, each
 * statement's median, the rows, revisions and bytes. 0 or an error.
 */
int bench_delta_floor(const char *url, const char *policy,
		      const struct bench_layout *l, const char *after_xid,
		      int runs, json_t **out);

/* ---- subcommands ---- */

int bench_cmd_load(int argc, char **argv);
int bench_cmd_floor_copy(int argc, char **argv);
int bench_cmd_insert_floor(int argc, char **argv);
int bench_cmd_fanout_floor(int argc, char **argv);
int bench_cmd_machine_probe(int argc, char **argv);
int bench_cmd_incr_initial(int argc, char **argv);
int bench_cmd_incr_nochange(int argc, char **argv);
int bench_cmd_incr_delta(int argc, char **argv);
int bench_cmd_incr_read(int argc, char **argv);
int bench_cmd_incr_visibility(int argc, char **argv);
int bench_cmd_sync_snapshot(int argc, char **argv);
int bench_cmd_sync_live(int argc, char **argv);
int bench_cmd_req_live(int argc, char **argv);
int bench_cmd_ingest(int argc, char **argv);
int bench_cmd_chat_ingest(int argc, char **argv);
int bench_cmd_verify_floor(int argc, char **argv);
int bench_cmd_conns(int argc, char **argv);
int bench_cmd_req_read(int argc, char **argv);
int bench_cmd_req_burst(int argc, char **argv);
int bench_cmd_resume_catchup(int argc, char **argv);
int bench_cmd_resume_live(int argc, char **argv);
int bench_cmd_resume_reconnect(int argc, char **argv);

#endif
