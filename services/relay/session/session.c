/*
 * One WebSocket connection's state (see session.h): creating and freeing
 * it, the AUTH challenge, the reader and its read keys. Its frames and
 * the writes in flight are frames.c's, its
 * subscriptions sub.c's; the messages are handled in ws/ws_message.c.
 */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"
#include "hub/hub.h"

struct ws_session *ws_session_new(struct relay *relay,
				  const struct community *c,
				  const char *host_header,
				  const struct ws_transport *transport)
{
	struct ws_session *s = calloc(1, sizeof(*s));
	struct ws_outbox_limits limits;
	unsigned char nonce[32];
	size_t got = 0;
	ssize_t n;

	if (!s)
		return NULL;
	ws_outbox_default_limits(&limits);
	s->outbox = ws_outbox_new(transport, &limits);
	if (!s->outbox) {
		free(s);
		return NULL;
	}
	while (got < sizeof(nonce)) {
		n = getrandom(nonce + got, sizeof(nonce) - got, 0);
		if (n <= 0) {
			comb_error("websocket: no randomness for the auth challenge");
			ws_outbox_free(s->outbox);
			free(s);
			return NULL;
		}
		got += (size_t)n;
	}
	comb_hex_encode(nonce, sizeof(nonce), s->challenge);
	s->relay = relay;
	ws_session_budget_init(s);
	s->community = *c;
	snprintf(s->host_header, sizeof(s->host_header), "%s", host_header);
	clock_gettime(CLOCK_MONOTONIC, &s->connected_at);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->writes_done, NULL);
	pthread_mutex_init(&s->answers_mu, NULL);
	ws_event_batch_init(&s->answers, s, NULL, WS_PUSH_RESERVED);
	return s;
}

void ws_session_free(struct ws_session *s)
{
	if (!s)
		return;
	while (s->subs)
		ws_session_drop_sub(s, s->subs);
	/* Writes in flight answer through this session: wait for them. */
	pthread_mutex_lock(&s->mu);
	while (s->writes_in_flight > 0)
		pthread_cond_wait(&s->writes_done, &s->mu);
	pthread_mutex_unlock(&s->mu);
	ws_outbox_free(s->outbox);
	ws_event_batch_release(&s->answers);
	pthread_mutex_destroy(&s->answers_mu);
	if (s->authenticated)
		hub_remove_reader(&s->access);
	pthread_cond_destroy(&s->writes_done);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

bool ws_session_authenticated(struct ws_session *s)
{
	bool a;

	pthread_mutex_lock(&s->mu);
	a = s->authenticated;
	pthread_mutex_unlock(&s->mu);
	return a;
}

int ws_session_set_reader(struct ws_session *s, const char *pubkey)
{
	int rc;

	reader_access_init(&s->access, s->relay, s->community.id, pubkey);
	/* Registered before the status is read, so that no change of it is
	 * missed in between (hub_load_admin). */
	rc = hub_add_reader(&s->access);
	if (!rc)
		rc = hub_load_admin(s->relay, &s->community, &s->access, NULL);
	if (rc) {
		hub_remove_reader(&s->access);
		return rc == COMB_ENOMEM ? COMB_EUNAVAIL : rc;
	}
	pthread_mutex_lock(&s->mu);
	memcpy(s->pubkey, pubkey, sizeof(s->pubkey));
	s->authenticated = true;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int ws_session_access_now(struct ws_session *s, comb_lsn *primary_at)
{
	return hub_load_admin(s->relay, &s->community, &s->access, primary_at);
}
