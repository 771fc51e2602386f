/*
 * `comb-bench fanout-floor`: the floor of the live-latency scenarios,
 * measured in the same run on the same machine: what it costs this
 * machine to hand one message of a live frame's size to many loopback
 * TCP readers, with no relay, database or WebSocket in between.
 *
 * --conns socket pairs on 127.0.0.1 (TCP_NODELAY on the writing ends, as
 * the relay's), split over --writers threads as the live scenarios split
 * their subscribers over relay nodes. Each of --rounds rounds, every
 * writer sends --bytes bytes to each of its sockets while the main thread,
 * one epoll loop like the benchmark client's, reads them; a message's
 * figure is its arrival minus the round's start. Rounds are --gap-ms
 * apart, about the time between two edits. Prints p50, p99 and max.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "comb/error.h"

#define MAX_WRITERS 8

struct fanout {
	int n;                  /* socket pairs */
	int *out, *in;          /* the writing and the reading ends */
	char *msg;
	size_t len;
	int nwriters;
	pthread_barrier_t start, done;
	atomic_bool stop;
};

struct writer {
	struct fanout *f;
	int first;              /* writes to out[first], out[first + nwriters]... */
};

/* Writes the message to every socket of w's share once per round. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct fanout *f = w->f;

	for (;;) {
		pthread_barrier_wait(&f->start);
		if (atomic_load(&f->stop))
			return NULL;
		for (int i = w->first; i < f->n; i += f->nwriters)
			if (send(f->out[i], f->msg, f->len, MSG_NOSIGNAL) != (ssize_t)f->len)
				bench_log("fanout-floor: a short write");
		pthread_barrier_wait(&f->done);
	}
}

/* Connects n loopback pairs; returns 0 or a negative COMB_E*. */
static int connect_pairs(struct fanout *f)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t salen = sizeof(sa);
	int lst = socket(AF_INET, SOCK_STREAM, 0), one = 1, rc = 0;

	if (lst < 0 || bind(lst, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(lst, 4096) || getsockname(lst, (struct sockaddr *)&sa, &salen))
		rc = COMB_EIO;
	for (int i = 0; i < f->n && rc == 0; i++) {
		f->in[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (f->in[i] < 0 || connect(f->in[i], (struct sockaddr *)&sa, sizeof(sa))) {
			rc = COMB_EIO;
			break;
		}
		f->out[i] = accept(lst, NULL, NULL);
		if (f->out[i] < 0 ||
		    setsockopt(f->out[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
			rc = COMB_EIO;
	}
	if (lst >= 0)
		close(lst);
	return rc;
}

/* Reads one round's messages (every socket's len bytes) on ep, noting
 * each arrival in ms after t0 into ms[]; returns 0, or COMB_EIO. */
static int read_round(struct fanout *f, int ep, double t0, double *ms)
{
	struct epoll_event evs[256];
	size_t *got = calloc((size_t)f->n, sizeof(*got));
	char buf[65536];
	int complete = 0, rc = 0;

	if (!got)
		return COMB_ENOMEM;
	while (complete < f->n && rc == 0) {
		int k = epoll_wait(ep, evs, 256, 5000);

		if (k <= 0)
			rc = COMB_EIO;
		for (int j = 0; j < k; j++) {
			int i = (int)evs[j].data.u32;
			ssize_t r = read(f->in[i], buf, sizeof(buf));

			if (r <= 0) {
				rc = COMB_EIO;
				break;
			}
			got[i] += (size_t)r;
			if (got[i] >= f->len && ms[i] < 0) {
				ms[i] = (bench_now() - t0) * 1e3;
				complete++;
			}
		}
	}
	free(got);
	return rc;
}

int bench_cmd_fanout_floor(int argc, char **argv)
{
	struct fanout f = {
		.n = (int)bench_opt_long(argc, argv, "--conns", 1000),
		.len = (size_t)bench_opt_long(argc, argv, "--bytes", 5200),
		.nwriters = (int)bench_opt_long(argc, argv, "--writers", 2),
	};
	int rounds = (int)bench_opt_long(argc, argv, "--rounds", 200);
	double gap_ms = bench_opt_double(argc, argv, "--gap-ms", 10);
	struct writer writers[MAX_WRITERS];
	pthread_t threads[MAX_WRITERS];
	double *all = NULL, *ms = NULL;
	size_t nall = 0;
	int ep = -1, rc = 0;

	if (f.n < 1 || f.len < 1 || f.nwriters < 1 || f.nwriters > MAX_WRITERS || rounds < 1) {
		bench_log("fanout-floor: bad --conns, --bytes, --writers or --rounds");
		return 2;
	}
	f.out = malloc((size_t)f.n * sizeof(int));
	f.in = malloc((size_t)f.n * sizeof(int));
	f.msg = malloc(f.len);
	ms = malloc((size_t)f.n * sizeof(double));
	all = malloc((size_t)f.n * (size_t)rounds * sizeof(double));
	if (!f.out || !f.in || !f.msg || !ms || !all) {
		rc = COMB_ENOMEM;
		goto out;
	}
	memset(f.msg, 'x', f.len);
	for (int i = 0; i < f.n; i++)
		f.out[i] = f.in[i] = -1;
	rc = connect_pairs(&f);
	ep = epoll_create1(0);
	for (int i = 0; i < f.n && rc == 0; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

		if (epoll_ctl(ep, EPOLL_CTL_ADD, f.in[i], &ev))
			rc = COMB_EIO;
	}
	if (rc)
		goto out;
	pthread_barrier_init(&f.start, NULL, (unsigned)f.nwriters + 1);
	pthread_barrier_init(&f.done, NULL, (unsigned)f.nwriters + 1);
	for (int i = 0; i < f.nwriters; i++) {
		writers[i] = (struct writer){.f = &f, .first = i};
		if (pthread_create(&threads[i], NULL, writer_main, &writers[i])) {
			/* the threads started wait at the barrier for good */
			bench_log("fanout-floor: cannot start a writer thread");
			exit(1);
		}
	}
	for (int r = 0; r < rounds && rc == 0; r++) {
		double t0;

		for (int i = 0; i < f.n; i++)
			ms[i] = -1;
		usleep((useconds_t)(gap_ms * 1000));
		t0 = bench_now();
		pthread_barrier_wait(&f.start);
		rc = read_round(&f, ep, t0, ms);
		pthread_barrier_wait(&f.done);
		memcpy(all + nall, ms, (size_t)f.n * sizeof(double));
		nall += (size_t)f.n;
	}
	atomic_store(&f.stop, true);
	pthread_barrier_wait(&f.start);
	for (int i = 0; i < f.nwriters; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&f.start);
	pthread_barrier_destroy(&f.done);
out:
	bench_print(json_pack("{s:s,s:i,s:I,s:i,s:i,s:o,s:o,s:o,s:b}",
		"command", "fanout-floor", "conns", f.n, "bytes", (json_int_t)f.len,
		"writers", f.nwriters, "rounds", rounds,
		"p50_ms", nall ? json_real(bench_quantile(all, nall, 0.5)) : json_null(),
		"p99_ms", nall ? json_real(bench_quantile(all, nall, 0.99)) : json_null(),
		"max_ms", nall ? json_real(bench_quantile(all, nall, 1.0)) : json_null(),
		"ok", rc == 0 && nall == (size_t)f.n * (size_t)rounds));
	if (rc)
		bench_log("fanout-floor failed: %s", comb_strerror(rc));
	for (int i = 0; f.out && f.in && i < f.n; i++) {
		if (f.out[i] >= 0)
			close(f.out[i]);
		if (f.in[i] >= 0)
			close(f.in[i]);
	}
	if (ep >= 0)
		close(ep);
	free(f.out);
	free(f.in);
	free(f.msg);
	free(ms);
	free(all);
	return rc ? 1 : 0;
}
