/*
 * comb-bench: the subcommand dispatcher (see bench.h). Every subcommand
 * takes "--name value" options and prints one JSON object on stdout;
 * diagnostics go to stderr. The exit status is 0 when what was measured
 * was also read correctly.
 *
 * usage: comb-bench keys|load|floor-copy|insert-floor|fanout-floor|
 *                   incr-initial|incr-nochange|incr-delta|incr-read|incr-visibility|
 *                   sync-snapshot|sync-live|req-live|req-read|req-burst|
 *                   resume-catchup|resume-live|resume-reconnect|
 *                   ingest|chat-ingest|verify-floor|conns|machine-probe
 *                   [--option value]...
 * Common options: --seed S (default comb-bench-1), --scale F (1.0 is the
 * reference scale of BENCHMARKS.md), --community ID.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* `keys`: the layout's public keys and special channels, for the driver. */
static int cmd_keys(int argc, char **argv)
{
	struct bench_layout l;
	char grant[37], elsewhere[37], ingest[37], live[37], ch0[37], chat[37];

	if (bench_layout_from_opts(&l, argc, argv))
		return 1;
	bench_channel_id(&l, BENCH_CH_GRANT, grant);
	bench_channel_id(&l, BENCH_CH_ELSEWHERE, elsewhere);
	bench_channel_id(&l, BENCH_CH_INGEST, ingest);
	bench_channel_id(&l, l.live_channel, live);
	bench_channel_id(&l, 0, ch0);
	bench_channel_id(&l, l.chat_channel, chat);
	bench_print(json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,"
			      "s:i,s:s,s:s,s:s,s:s,s:s,s:s}",
		"admin", l.admin_pk, "reader", l.reader_pk, "seed", l.seed,
		"artifacts", l.artifacts, "memberships", l.memberships,
		"art_channels", l.art_channels, "small_channels", l.small_channels,
		"small_artifacts", bench_artifacts_in(&l, l.small_channels),
		"grant", l.grant, "edits", l.edits, "moves", l.moves,
		"deletes", l.deletes, "live_artifacts",
		l.artifacts - l.live_channel * BENCH_PER_CHANNEL,
		"chats", l.chats, "chat_channel", chat,
		"grant_channel", grant, "elsewhere_channel", elsewhere,
		"ingest_channel", ingest, "live_channel", live, "channel0", ch0));
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{"keys", cmd_keys},
	{"load", bench_cmd_load},
	{"floor-copy", bench_cmd_floor_copy},
	{"insert-floor", bench_cmd_insert_floor},
	{"fanout-floor", bench_cmd_fanout_floor},
	{"machine-probe", bench_cmd_machine_probe},
	{"incr-initial", bench_cmd_incr_initial},
	{"incr-nochange", bench_cmd_incr_nochange},
	{"incr-delta", bench_cmd_incr_delta},
	{"incr-read", bench_cmd_incr_read},
	{"incr-visibility", bench_cmd_incr_visibility},
	{"sync-snapshot", bench_cmd_sync_snapshot},
	{"sync-live", bench_cmd_sync_live},
	{"req-live", bench_cmd_req_live},
	{"req-read", bench_cmd_req_read},
	{"req-burst", bench_cmd_req_burst},
	{"resume-catchup", bench_cmd_resume_catchup},
	{"resume-live", bench_cmd_resume_live},
	{"resume-reconnect", bench_cmd_resume_reconnect},
	{"ingest", bench_cmd_ingest},
	{"chat-ingest", bench_cmd_chat_ingest},
	{"verify-floor", bench_cmd_verify_floor},
	{"conns", bench_cmd_conns},
};

int main(int argc, char **argv)
{
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		goto usage;
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
usage:
	fprintf(stderr, "usage: comb-bench COMMAND [--option value]...\ncommands:");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(stderr, " %s", commands[i].name);
	fputc('\n', stderr);
	return 2;
}
