/*
 * comb-capture: publishes every change relays need, as signals over
 * ZeroMQ. It reads its configuration, binds its publishing socket, starts
 * the Redis subscriber and then runs one loop until SIGINT or SIGTERM:
 * stand by for (or hold) leadership, turn notifications and ephemeral
 * events into signals, answer subscriptions with marks, and send a
 * heartbeat every COMB_CAPTURE_HEARTBEAT_MS while leading (and while
 * reconnecting to the database within the grace period, see leader.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/log.h"

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* How long the loop may sleep before something is due. */
static long poll_timeout(const struct capture *cap, int64_t now)
{
	int64_t due = cap->next_try_ms;

	if (cap->leader) {
		int64_t ping = cap->ping_pending ?
			cap->ping_sent_ms + CAPTURE_PING_TIMEOUT_MS + 1 :
			cap->ping_sent_ms + cap->cfg.capture_heartbeat_ms;

		due = cap->next_beat_ms < ping ? cap->next_beat_ms : ping;
	} else if (cap->reconnecting) {
		/* heartbeats go on, and the grace period may end */
		if (cap->next_beat_ms < due)
			due = cap->next_beat_ms;
		if (cap->grace_until_ms < due)
			due = cap->grace_until_ms;
	}
	return due > now ? (long)(due - now) : 0;
}

static uint64_t published_total(struct capture *cap)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < CAPTURE_STAT_TYPES; i++)
		n += atomic_load(&cap->stats.signals[i]);
	return n;
}

static void run(struct capture *cap)
{
	while (!stopping) {
		zmq_pollitem_t items[3];
		int64_t now = comb_monotonic_ms();
		int n = 2, rc;

		leader_tick(cap, now);
		if (capture_publishing(cap) && now >= cap->next_beat_ms) {
			publish_heartbeat(cap);
			cap->next_beat_ms += cap->cfg.capture_heartbeat_ms;
			if (cap->next_beat_ms <= now)
				cap->next_beat_ms = now + cap->cfg.capture_heartbeat_ms;
		}

		memset(items, 0, sizeof(items));
		items[0].socket = cap->pub;
		items[0].events = ZMQ_POLLIN;
		items[1].socket = cap->pull;
		items[1].events = ZMQ_POLLIN;
		if (cap->leader) {
			items[2].fd = PQsocket(cap->pg);
			items[2].events = ZMQ_POLLIN;
			n = 3;
		}
		capture_metrics_sample(cap, now);
		rc = zmq_poll(items, n, poll_timeout(cap, comb_monotonic_ms()));
		if (rc < 0) {
			if (zmq_errno() == EINTR)
				continue;
			comb_error("zmq_poll: %s", zmq_strerror(zmq_errno()));
			break;
		}
		if (n == 3 && (items[2].revents & ZMQ_POLLIN))
			leader_readable(cap);
		if (items[0].revents & ZMQ_POLLIN)
			publish_subscriptions(cap);
		if (items[1].revents & ZMQ_POLLIN)
			ephemeral_drain(cap);
	}
}

int main(void)
{
	static struct capture cap;
	enum comb_log_level level;
	struct sigaction sa;
	char err[512];
	int rc = 1;

	comb_log_init("comb-capture", COMB_LOG_INFO);
	if (comb_config_load(&cap.cfg, err, sizeof(err))) {
		comb_error("configuration: %s", err);
		return 1;
	}
	if (comb_log_level_parse(cap.cfg.log_level, &level) == 0)
		comb_log_init("comb-capture", level);
	if (!*cap.cfg.database_url) {
		comb_error("configuration: COMB_DATABASE_URL is required");
		goto out;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	comb_buf_init(&cap.out, COMB_SIGNAL_MAX_SIZE);
	if (communities_init(&cap.communities)) {
		comb_error("out of memory");
		goto out;
	}
	cap.zctx = zmq_ctx_new();
	if (!cap.zctx) {
		comb_error("zmq: %s", zmq_strerror(zmq_errno()));
		goto out;
	}
	if (publish_open(&cap, err, sizeof(err))) {
		comb_error("publish: %s", err);
		goto out;
	}
	if (ephemeral_start(&cap, err, sizeof(err))) {
		comb_error("ephemeral: %s", err);
		goto out;
	}
	if (capture_metrics_start(&cap, err, sizeof(err))) {
		comb_error("metrics: %s", err);
		goto out;
	}
	comb_info("capture bound to %s, heartbeat every %d ms", cap.endpoint,
		  cap.cfg.capture_heartbeat_ms);
	run(&cap);
	comb_info("stopping after %llu messages published, %llu inputs refused",
		  (unsigned long long)published_total(&cap),
		  (unsigned long long)atomic_load(&cap.stats.rejected));
	rc = 0;
out:
	/* The lock first, so that a standby takes over while the rest stops. */
	leader_release(&cap);
	capture_metrics_stop(&cap);
	ephemeral_stop(&cap);
	listen_release(&cap);
	publish_close(&cap);
	if (cap.zctx)
		zmq_ctx_term(cap.zctx);
	communities_release(&cap.communities);
	comb_buf_release(&cap.out);
	comb_config_release(&cap.cfg);
	return rc;
}
