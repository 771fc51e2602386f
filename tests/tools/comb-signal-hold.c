/*
 * comb-signal-hold: a test tool that stands between comb-capture and a
 * relay node and can hold the feed back, so that a test can make a
 * signal arrive late on purpose (tests/e2e/standby_ws.test.mjs).
 *
 * usage: comb-signal-hold -u UPSTREAM -b BIND
 *   -u  comb-capture's endpoint, connected to (an XSUB socket)
 *   -b  the endpoint the node connects to, bound (an XPUB socket)
 *
 * Subscriptions go upstream as the node makes them, so capture sends its
 * marks as it would to the node itself. Signals come down unchanged,
 * except while held. Commands, one per line on stdin:
 *   hold     keep every message but the liveness heartbeat ("hb", which
 *            keeps the node's feed up) in order; answers "held"
 *   release  send what was kept, in order, and pass everything again;
 *            answers "released N" (N messages sent)
 * While held, each message kept is reported as one line
 *   queued {"type":"head","community":7,"d":"<uuid>","lsn":"0/16B3D48"}
 * It prints "ready" once bound, and runs until stdin closes, SIGINT or
 * SIGTERM.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "comb/readroute.h"
#include "comb/signal.h"

/* One message kept while held: its frames. */
struct kept {
	zmq_msg_t frames[2];
	int nframes;
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: comb-signal-hold -u UPSTREAM -b BIND\n");
	exit(2);
}

/* Receives one message from s into k: its first two frames (capture
 * sends two; a further one is dropped). Returns 0, or -1. */
static int receive(void *s, struct kept *k)
{
	int more = 1;
	size_t more_len = sizeof(more);

	for (k->nframes = 0; more; ) {
		zmq_msg_t scratch, *m = k->nframes < 2 ? &k->frames[k->nframes] : &scratch;

		zmq_msg_init(m);
		if (zmq_msg_recv(m, s, 0) < 0) {
			zmq_msg_close(m);
			while (k->nframes > 0)
				zmq_msg_close(&k->frames[--k->nframes]);
			return -1;
		}
		if (m == &scratch)
			zmq_msg_close(m);
		else
			k->nframes++;
		zmq_getsockopt(s, ZMQ_RCVMORE, &more, &more_len);
	}
	return 0;
}

/* Sends k's frames on s (they are consumed). */
static void send_kept(void *s, struct kept *k)
{
	int i;

	for (i = 0; i < k->nframes; i++) {
		if (zmq_msg_send(&k->frames[i], s, i + 1 < k->nframes ? ZMQ_SNDMORE : 0) < 0)
			zmq_msg_close(&k->frames[i]);
	}
	k->nframes = 0;
}

/* True when k is the liveness heartbeat (topic "hb"). */
static bool is_liveness(struct kept *k)
{
	size_t n = zmq_msg_size(&k->frames[0]);
	const char *t = zmq_msg_data(&k->frames[0]);

	return n >= 2 && memcmp(t, "hb", 2) == 0 && (n == 2 || t[2] == '\0');
}

/* Reports a message kept while held. */
static void report_queued(struct kept *k)
{
	struct comb_signal s;
	char err[160], lsn[24];

	if (k->nframes < 2 ||
	    comb_signal_decode(zmq_msg_data(&k->frames[1]), zmq_msg_size(&k->frames[1]),
			       &s, err, sizeof(err))) {
		printf("queued {\"type\":\"undecodable\"}\n");
	} else {
		comb_lsn_format(s.lsn, lsn, sizeof(lsn));
		printf("queued {\"type\":\"%s\",\"community\":%lld,\"d\":\"%s\",\"lsn\":\"%s\"}\n",
		       comb_signal_type_name(s.type), (long long)s.community, s.d, lsn);
	}
	fflush(stdout);
}

/* The commands read from stdin so far and not yet whole. */
static char pending[256];
static size_t npending;

/* Runs one command line. */
static void run_command(const char *line, bool *held, struct kept *queue, size_t *n,
			void *down)
{
	size_t i;

	if (strcmp(line, "hold") == 0) {
		*held = true;
		printf("held\n");
	} else if (strcmp(line, "release") == 0) {
		for (i = 0; i < *n; i++)
			send_kept(down, &queue[i]);
		printf("released %zu\n", *n);
		*n = 0;
		*held = false;
	} else {
		printf("unknown command\n");
	}
	fflush(stdout);
}

/* Reads what stdin has and runs each whole line. Returns false at its
 * end (or on a line too long to be a command). */
static bool commands(bool *held, struct kept *queue, size_t *n, void *down)
{
	ssize_t got = read(STDIN_FILENO, pending + npending, sizeof(pending) - 1 - npending);
	char *nl;

	if (got <= 0)
		return got < 0 && errno == EINTR;
	npending += (size_t)got;
	pending[npending] = '\0';
	while ((nl = strchr(pending, '\n'))) {
		*nl = '\0';
		run_command(pending, held, queue, n, down);
		npending -= (size_t)(nl + 1 - pending);
		memmove(pending, nl + 1, npending + 1);
	}
	return npending < sizeof(pending) - 1;
}

int main(int argc, char **argv)
{
	const char *upstream = NULL, *bind_to = NULL;
	struct kept *queue = NULL;
	size_t n = 0, cap = 0;
	bool held = false;
	int opt, on = 1, rc = 1;
	struct sigaction sa;
	void *ctx, *up, *down;

	while ((opt = getopt(argc, argv, "u:b:")) != -1) {
		if (opt == 'u')
			upstream = optarg;
		else if (opt == 'b')
			bind_to = optarg;
		else
			usage();
	}
	if (!upstream || !bind_to || optind != argc)
		usage();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ctx = zmq_ctx_new();
	up = ctx ? zmq_socket(ctx, ZMQ_XSUB) : NULL;
	down = ctx ? zmq_socket(ctx, ZMQ_XPUB) : NULL;
	if (!up || !down ||
	    zmq_setsockopt(down, ZMQ_XPUB_VERBOSE, &on, sizeof(on)) ||
	    zmq_connect(up, upstream) || zmq_bind(down, bind_to)) {
		fprintf(stderr, "comb-signal-hold: zmq: %s\n", zmq_strerror(zmq_errno()));
		goto out;
	}
	printf("ready\n");
	fflush(stdout);

	while (!stopping) {
		zmq_pollitem_t items[] = {
			{.socket = up, .events = ZMQ_POLLIN},
			{.socket = down, .events = ZMQ_POLLIN},
			{.fd = STDIN_FILENO, .events = ZMQ_POLLIN},
		};
		struct kept k;

		if (zmq_poll(items, 3, -1) < 0) {
			if (zmq_errno() == EINTR)
				continue;
			fprintf(stderr, "comb-signal-hold: %s\n", zmq_strerror(zmq_errno()));
			goto out;
		}
		if ((items[1].revents & ZMQ_POLLIN) && receive(down, &k) == 0)
			send_kept(up, &k);  /* a subscription, upstream */
		if ((items[0].revents & ZMQ_POLLIN) && receive(up, &k) == 0) {
			if (!held || is_liveness(&k)) {
				send_kept(down, &k);
			} else {
				if (n == cap) {
					struct kept *grown = realloc(queue, (cap ? 2 * cap : 64) * sizeof(*queue));

					if (!grown) {
						fprintf(stderr, "comb-signal-hold: out of memory\n");
						goto out;
					}
					queue = grown;
					cap = cap ? 2 * cap : 64;
				}
				report_queued(&k);
				queue[n++] = k;
			}
		}
		if ((items[2].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) &&
		    !commands(&held, queue, &n, down))
			break;
	}
	rc = 0;
out:
	while (n > 0) {
		struct kept *k = &queue[--n];

		while (k->nframes > 0)
			zmq_msg_close(&k->frames[--k->nframes]);
	}
	free(queue);
	if (up)
		zmq_close(up);
	if (down)
		zmq_close(down);
	if (ctx)
		zmq_ctx_term(ctx);
	return rc;
}
