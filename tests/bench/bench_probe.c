/*
 * `comb-bench machine-probe`: what the machine charges for the three
 * things the relay's reads pay most besides PostgreSQL, measured at the
 * start of a run and kept in every result's `machine` object, so that
 * runs on different machines of one kind can be told apart
 * (docs/benchmarks-history.md, "A machine whose page faults are dear"):
 *
 * - syscall_us: one system call (getppid), mean of PROBE_CALLS;
 * - wakeup_us: one round trip of a byte between two threads over two
 *   pipes (two sleeps and two wake-ups), mean of PROBE_ROUND_TRIPS;
 * - page_fault_us: one first touch of a 4 KiB page of a new private
 *   anonymous mapping of PROBE_MAP_BYTES;
 * - huge_pages_total: the kernel's reserved huge pages (HugePages_Total of
 *   /proc/meminfo), which PostgreSQL's default `huge_pages = try` takes.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include "comb/error.h"

#define PROBE_CALLS 200000
#define PROBE_ROUND_TRIPS 20000
#define PROBE_MAP_BYTES (64u << 20)

struct pipes {
	int there[2], back[2];
};

/* The other end of the round trips: echoes every byte it reads. */
static void *echo(void *arg)
{
	struct pipes *p = arg;
	char c;
	int i;

	for (i = 0; i < PROBE_ROUND_TRIPS; i++)
		if (read(p->there[0], &c, 1) != 1 || write(p->back[1], &c, 1) != 1)
			break;
	return NULL;
}

/* Mean round trip in us, or -1 when pipes or the thread fail. */
static double wakeup_us(void)
{
	struct pipes p;
	pthread_t t;
	double t0, us = -1;
	char c = 0;
	int i;

	if (pipe(p.there) || pipe(p.back))
		return -1;
	if (pthread_create(&t, NULL, echo, &p) == 0) {
		t0 = bench_now();
		for (i = 0; i < PROBE_ROUND_TRIPS; i++)
			if (write(p.there[1], &c, 1) != 1 || read(p.back[0], &c, 1) != 1)
				break;
		if (i == PROBE_ROUND_TRIPS)
			us = (bench_now() - t0) * 1e6 / PROBE_ROUND_TRIPS;
		pthread_join(t, NULL);
	}
	close(p.there[0]);
	close(p.there[1]);
	close(p.back[0]);
	close(p.back[1]);
	return us;
}

/* Mean first touch of a page in us, or -1 when the mapping fails. */
static double page_fault_us(void)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile char *m = mmap(NULL, PROBE_MAP_BYTES, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t0, us;
	size_t off;

	if (m == MAP_FAILED || page <= 0)
		return -1;
	t0 = bench_now();
	for (off = 0; off < PROBE_MAP_BYTES; off += (size_t)page)
		m[off] = 1;
	us = (bench_now() - t0) * 1e6 / (double)(PROBE_MAP_BYTES / (size_t)page);
	munmap((void *)m, PROBE_MAP_BYTES);
	return us;
}

/* HugePages_Total of /proc/meminfo, or -1. */
static long huge_pages_total(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Total: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

int bench_cmd_machine_probe(int argc, char **argv)
{
	double t0 = bench_now(), syscall_us;
	int i;

	(void)argc;
	(void)argv;
	for (i = 0; i < PROBE_CALLS; i++)
		syscall(SYS_getppid);
	syscall_us = (bench_now() - t0) * 1e6 / PROBE_CALLS;
	bench_print(json_pack("{s:s,s:f,s:f,s:f,s:I}", "command", "machine-probe",
			      "syscall_us", syscall_us, "wakeup_us", wakeup_us(),
			      "page_fault_us", page_fault_us(),
			      "huge_pages_total", (json_int_t)huge_pages_total()));
	return 0;
}
