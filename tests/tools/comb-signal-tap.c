/*
 * comb-signal-tap: a test tool that connects a ZeroMQ SUB socket to
 * comb-capture and prints every signal it receives as one JSON line on
 * stdout, so that end-to-end tests (and people) can watch the feed.
 *
 * usage: comb-signal-tap -e ENDPOINT[,ENDPOINT...] [-t PREFIX]... [-c TOPIC]...
 *   -e  endpoints to connect to (comma-separated)
 *   -t  subscribe to a raw topic prefix, e.g. "7:" for all of community 7
 *   -c  subscribe to one exact topic, e.g. "7:<channel uuid>" ("\0" added)
 * Without -t or -c it subscribes to everything. Each line is
 *   {"topic":"7:<uuid>","epoch":"<16 hex>","seq":3,"community":7,
 *    "type":"member","type_id":4,"xid":"1234","lsn":"0/16B3D48",
 *    "channel":"...","d":"",
 *    "pubkey":"...","id":"","kind":0,"payload":"..."}
 * with "payload" holding the bytes as text (or "payload_hex" when they
 * are not UTF-8), or {"topic":...,"error":"..."} for a message that does
 * not decode. Runs until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "comb/hex.h"
#include "comb/readroute.h"
#include "comb/signal.h"

#define MAX_TOPICS 64

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: comb-signal-tap -e ENDPOINT[,ENDPOINT...] "
			"[-t PREFIX]... [-c TOPIC]...\n");
	exit(2);
}

static json_t *text_or_null(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);

	return v ? v : json_null();
}

static void print_line(json_t *obj)
{
	char *line = json_dumps(obj, JSON_COMPACT);

	if (line) {
		fputs(line, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		free(line);
	}
	json_decref(obj);
}

static void print_signal(const char *topic, size_t tlen, const void *data,
			 size_t len)
{
	json_t *obj = json_object();
	struct comb_signal s;
	char err[160], epoch[17], xid[24], lsn[24];

	/* the topic without its terminating NUL */
	if (tlen > 0 && topic[tlen - 1] == '\0')
		tlen--;
	json_object_set_new(obj, "topic", text_or_null(topic, tlen));
	if (comb_signal_decode(data, len, &s, err, sizeof(err))) {
		json_object_set_new(obj, "error", json_string(err));
		print_line(obj);
		return;
	}
	snprintf(epoch, sizeof(epoch), "%016" PRIx64, s.epoch);
	snprintf(xid, sizeof(xid), "%" PRIu64, s.xid);
	json_object_set_new(obj, "epoch", json_string(epoch));
	json_object_set_new(obj, "seq", json_integer((json_int_t)s.seq));
	json_object_set_new(obj, "community", json_integer(s.community));
	json_object_set_new(obj, "type", json_string(comb_signal_type_name(s.type)));
	json_object_set_new(obj, "type_id", json_integer(s.type));
	json_object_set_new(obj, "xid", json_string(xid));
	comb_lsn_format(s.lsn, lsn, sizeof(lsn));
	json_object_set_new(obj, "lsn", json_string(lsn));
	json_object_set_new(obj, "channel", json_string(s.channel));
	json_object_set_new(obj, "d", json_string(s.d));
	json_object_set_new(obj, "pubkey", json_string(s.pubkey));
	json_object_set_new(obj, "id", json_string(s.id));
	json_object_set_new(obj, "kind", json_integer(s.kind));
	if (s.payload_len) {
		json_t *text = json_stringn((const char *)s.payload, s.payload_len);

		if (text) {
			json_object_set_new(obj, "payload", text);
		} else {
			char *hex = malloc(2 * s.payload_len + 1);

			if (hex) {
				comb_hex_encode(s.payload, s.payload_len, hex);
				json_object_set_new(obj, "payload_hex", json_string(hex));
				free(hex);
			}
		}
	} else {
		json_object_set_new(obj, "payload", json_string(""));
	}
	print_line(obj);
}

int main(int argc, char **argv)
{
	const char *endpoints = NULL, *topics[MAX_TOPICS];
	bool exact[MAX_TOPICS];
	int ntopics = 0, opt, i, rc = 1;
	struct sigaction sa;
	void *ctx, *sub;
	char *list, *save, *ep;

	while ((opt = getopt(argc, argv, "e:t:c:")) != -1) {
		switch (opt) {
		case 'e':
			endpoints = optarg;
			break;
		case 't':
		case 'c':
			if (ntopics == MAX_TOPICS)
				usage();
			exact[ntopics] = opt == 'c';
			topics[ntopics++] = optarg;
			break;
		default:
			usage();
		}
	}
	if (!endpoints || optind != argc)
		usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ctx = zmq_ctx_new();
	sub = ctx ? zmq_socket(ctx, ZMQ_SUB) : NULL;
	if (!sub) {
		fprintf(stderr, "comb-signal-tap: zmq: %s\n", zmq_strerror(zmq_errno()));
		return 1;
	}
	if (ntopics == 0)
		zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
	for (i = 0; i < ntopics; i++)
		zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topics[i],
			       strlen(topics[i]) + (exact[i] ? 1 : 0));
	list = strdup(endpoints);
	if (!list)
		goto out;
	for (ep = strtok_r(list, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
		if (zmq_connect(sub, ep)) {
			fprintf(stderr, "comb-signal-tap: cannot connect to %s: %s\n",
				ep, zmq_strerror(zmq_errno()));
			free(list);
			goto out;
		}
	}
	free(list);

	while (!stopping) {
		zmq_msg_t topic, body;
		int more = 0;
		size_t more_len = sizeof(more);

		zmq_msg_init(&topic);
		zmq_msg_init(&body);
		if (zmq_msg_recv(&topic, sub, 0) < 0) {
			zmq_msg_close(&topic);
			zmq_msg_close(&body);
			if (zmq_errno() == EINTR)
				continue;
			fprintf(stderr, "comb-signal-tap: %s\n", zmq_strerror(zmq_errno()));
			goto out;
		}
		zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &more_len);
		if (!more) {
			print_signal(zmq_msg_data(&topic), zmq_msg_size(&topic), "", 0);
		} else if (zmq_msg_recv(&body, sub, 0) >= 0) {
			print_signal(zmq_msg_data(&topic), zmq_msg_size(&topic),
				     zmq_msg_data(&body), zmq_msg_size(&body));
			/* a third frame would be a protocol error: skip it */
			for (;;) {
				zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &more_len);
				if (!more)
					break;
				zmq_msg_close(&body);
				zmq_msg_init(&body);
				if (zmq_msg_recv(&body, sub, 0) < 0)
					break;
			}
		}
		zmq_msg_close(&topic);
		zmq_msg_close(&body);
	}
	rc = 0;
out:
	zmq_close(sub);
	zmq_ctx_term(ctx);
	return rc;
}
