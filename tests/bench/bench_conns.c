/*
 * `comb-bench conns`: opens --count WebSocket connections to one relay
 * node, authenticates each as the reader (NIP-42) and holds them idle,
 * answering pings. The relay's resident memory (/proc/<pid>/status of
 * --pid) is read before, once every connection is authenticated, and
 * after --settle seconds (when the per-connection writer threads that
 * lingered after the handshake have exited); memory per connection is the
 * settled growth divided by the connections held. Before closing, a
 * sample of connections must still answer a REQ with EOSE. When the relay
 * refuses connections, the first refusal says what limited it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "comb/error.h"

struct conns {
	struct bench_loop loop;
	int want;            /* handshakes to wait for */
	int eose, probes;
};

static void conns_message(struct bench_loop *loop, struct bench_ws *ws,
			  const char *msg, size_t len, double t)
{
	struct conns *cs = loop->ctx;

	(void)ws;
	(void)t;
	if (len > 15 && !memcmp(msg, "[\"EOSE\",\"probe\"", 15))
		cs->eose++;
}

static bool conns_settled(void *ctx)
{
	struct conns *cs = ctx;

	return cs->loop.authed + cs->loop.closed >= cs->want;
}

static bool probes_done(void *ctx)
{
	struct conns *cs = ctx;

	return cs->eose >= cs->probes;
}

int bench_cmd_conns(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	long pid = bench_opt_long(argc, argv, "--pid", 0);
	int count = (int)bench_opt_long(argc, argv, "--count", 5000);
	int batch = (int)bench_opt_long(argc, argv, "--batch", 200);
	double hold = bench_opt_double(argc, argv, "--hold", 5);
	double settle = bench_opt_double(argc, argv, "--settle", 12);
	struct conns cs = {0};
	struct bench_layout l;
	char probe[256], h[37];
	long rss0, rss1, rss2, thr0, thr1, thr2;
	double t0, t_connected;
	int i, opened = 0, authed, closed_during_hold, step, rc;

	if (!addr || !host || pid <= 0 || count < 1) {
		bench_log("conns: --addr, --host, --pid and --count are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	if (rc)
		return 1;
	rss0 = bench_proc_status(pid, "VmRSS");
	thr0 = bench_proc_status(pid, "Threads");
	bench_loop_init(&cs.loop, conns_message, &cs);
	t0 = bench_now();
	for (i = 0; i < count; i += step) {
		int k;

		step = count - i < batch ? count - i : batch;
		for (k = 0; k < step; k++) {
			if (!bench_ws_connect(&cs.loop, addr, host, l.reader_sk, 0))
				break;
			opened++;
		}
		cs.want = opened;
		bench_loop_run(&cs.loop, conns_settled, 30);
		/* Stop once the relay refuses: more attempts say nothing new. */
		if (cs.loop.closed > 0 || k < step)
			break;
	}
	t_connected = bench_now() - t0;
	authed = cs.loop.authed;
	rss1 = bench_proc_status(pid, "VmRSS");
	thr1 = bench_proc_status(pid, "Threads");

	/* Hold them idle, then let lingering writer threads exit. */
	bench_loop_run(&cs.loop, NULL, hold > settle ? hold : settle);
	rss2 = bench_proc_status(pid, "VmRSS");
	thr2 = bench_proc_status(pid, "Threads");
	/* Authenticated connections the relay dropped while idle. */
	closed_during_hold = 0;
	for (i = 0; i < cs.loop.n; i++)
		if (cs.loop.conns[i]->authed && cs.loop.conns[i]->state == BENCH_WS_CLOSED)
			closed_during_hold++;

	/* Every 50th connection must still answer. */
	bench_channel_id(&l, 0, h);
	snprintf(probe, sizeof(probe),
		 "[\"REQ\",\"probe\",{\"kinds\":[9],\"#h\":[\"%s\"],\"limit\":1}]", h);
	for (i = 0; i < cs.loop.n; i += 50) {
		struct bench_ws *ws = cs.loop.conns[i];

		if (ws->state == BENCH_WS_OPEN && ws->authed &&
		    bench_ws_send(&cs.loop, ws, probe, strlen(probe)) == 0)
			cs.probes++;
	}
	bench_loop_run(&cs.loop, probes_done, 20);

	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:s,s:f,s:I,s:I,s:I,s:o,s:o,s:o,s:I,s:I,s:I,s:i,s:i,s:b}",
		"command", "conns", "target", count, "opened", opened,
		"authenticated", authed, "dropped", closed_during_hold,
		"first_error", cs.loop.first_error, "connect_s", t_connected,
		"rss_before_kib", (json_int_t)rss0, "rss_connected_kib", (json_int_t)rss1,
		"rss_settled_kib", (json_int_t)rss2,
		"kib_per_conn", authed ? json_real((double)(rss2 - rss0) / authed) : json_null(),
		"kib_per_conn_connected", authed ? json_real((double)(rss1 - rss0) / authed) : json_null(),
		"kib_per_conn_whole_process", authed ? json_real((double)rss2 / authed) : json_null(),
		"threads_before", (json_int_t)thr0, "threads_connected", (json_int_t)thr1,
		"threads_settled", (json_int_t)thr2,
		"probes", cs.probes, "probes_answered", cs.eose,
		"ok", authed > 0 && closed_during_hold == 0 && cs.eose == cs.probes));
	rc = authed > 0 && closed_during_hold == 0 && cs.eose == cs.probes ? 0 : 1;
	bench_loop_release(&cs.loop);
	return rc;
}
