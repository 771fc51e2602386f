/*
 * Unit tests for the policy plugin loader (shared/src/policy_set.c) and the
 * shipped plugins it loads: every loader rejection with its reason and a
 * clean unload, the load log line, chain semantics, the default policy's
 * rules of PROTOCOL.md sections 4 and 10 row by row, the auditor chained in
 * front of the default policy, and the read keys handed to SQL.
 *
 * Plugins are the real modules built into COMB_BUILD_DIR/lib. Log lines are
 * checked by pointing stderr at a temporary file while a call runs.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "comb/error.h"
#include "comb/log.h"
#include "comb/policy_set.h"

#define LIB_DIR COMB_BUILD_DIR "/lib/"
#define PATH_LEN 1024
#define LIST_LEN 8192
#define LOG_MAX (1 << 20)

/* 64-character pubkeys: A is the auditor, B and C are ordinary users. */
#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define KEY_C "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- helpers ---------------------------------------------------------- */

/* Path of test plugin name (tests/plugins/name.c). */
static const char *test_plugin(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%stest_%s.so", LIB_DIR, name);
	return buf;
}

/* Path of a shipped plugin (plugins/name/name.c). */
static const char *real_plugin(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%spolicy_%s.so", LIB_DIR, name);
	return buf;
}

/* A colon-separated list of test plugin paths, from a NULL-ended list. */
static const char *test_list(char *buf, size_t len, ...)
{
	char one[PATH_LEN];
	const char *name;
	size_t used = 0;
	va_list ap;

	buf[0] = '\0';
	va_start(ap, len);
	while ((name = va_arg(ap, const char *)) != NULL) {
		int n = snprintf(buf + used, len - used, "%s%s",
				 used ? ":" : "",
				 test_plugin(name, one, sizeof(one)));
		assert_true(n > 0 && (size_t)n < len - used);
		used += (size_t)n;
	}
	va_end(ap);
	return buf;
}

static char capture_path[64];
static int capture_saved = -1;

/* Sends stderr (and so every log line) to a temporary file. */
static void capture_start(void)
{
	int fd;

	snprintf(capture_path, sizeof(capture_path),
		 "/tmp/comb_test_policy_XXXXXX");
	fd = mkstemp(capture_path);
	assert_true(fd >= 0);
	fflush(stderr);
	capture_saved = dup(STDERR_FILENO);
	assert_true(capture_saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	close(fd);
}

/* Restores stderr and returns what was logged; caller frees. */
static char *capture_stop(void)
{
	char *text = calloc(1, LOG_MAX + 1);
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(capture_saved, STDERR_FILENO);
	close(capture_saved);
	capture_saved = -1;
	assert_non_null(text);
	f = fopen(capture_path, "r");
	assert_non_null(f);
	n = fread(text, 1, LOG_MAX, f);
	text[n] = '\0';
	fclose(f);
	unlink(capture_path);
	return text;
}

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(text, needle); p;
	     p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Whether the module at path is still mapped into the process. */
static int is_loaded(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return 0;
	dlclose(h);
	return 1;
}

/* Loads paths, failing the test (with the loader's reason) on refusal. */
static struct comb_policy_set *must_load(const char *paths, const char *config)
{
	char err[512] = "";
	struct comb_policy_set *set;

	set = comb_policy_set_load(paths, config, err, sizeof(err));
	if (!set)
		fail_msg("load %s: %s", paths, err);
	return set;
}

static struct comb_policy_channel channel(enum comb_visibility vis,
					  enum comb_role role)
{
	struct comb_policy_channel ch;

	memset(&ch, 0, sizeof(ch));
	ch.visibility = vis;
	ch.role = role;
	return ch;
}

static bool ask(const struct comb_policy_set *set, enum comb_action action,
		const char *pubkey, int community_admin,
		const struct comb_policy_channel *ch)
{
	struct comb_policy_actor actor = {pubkey, community_admin};
	struct comb_policy_request req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.action = action;
	req.actor = &actor;
	req.channel = ch;
	return comb_policy_allows(set, &req);
}

/* ---- loader rejections ------------------------------------------------ */

struct rejection {
	const char *plugin;  /* the test plugin refused */
	const char *reason;  /* exact reason after "policy plugin <path>: " */
	int init_runs;       /* whether its init is expected to have run */
};

static const struct rejection rejections[] = {
	{"no_entry", "no entry symbol comb_policy_entry", 0},
	{"bad_magic", "bad magic", 0},
	{"bad_major", "unsupported abi major 2 (host speaks 1)", 0},
	{"small_size", "descriptor size 48 too small (abi 1.0 needs 56)", 0},
	{"empty_name", "empty name", 0},
	{"init_fail", "init failed (7)", 1},
};

/*
 * Each rejected plugin comes after a valid one, so the test also sees the
 * loader destroy and unload what it had already loaded.
 */
static void test_rejections(void **unused)
{
	(void)unused;
	for (size_t i = 0; i < sizeof(rejections) / sizeof(rejections[0]);
	     i++) {
		const struct rejection *r = &rejections[i];
		char list[LIST_LEN], path[PATH_LEN], first[PATH_LEN];
		char want[2 * PATH_LEN], marker[128], err[512];
		struct comb_policy_set *set;
		char *log;

		test_list(list, sizeof(list), "allow_all", r->plugin, NULL);
		test_plugin(r->plugin, path, sizeof(path));
		test_plugin("allow_all", first, sizeof(first));
		memset(err, 'x', sizeof(err));
		capture_start();
		set = comb_policy_set_load(list, "", err, sizeof(err));
		log = capture_stop();

		assert_null(set);
		snprintf(want, sizeof(want), "policy plugin %s: %s", path,
			 r->reason);
		assert_string_equal(err, want);
		snprintf(want, sizeof(want), "error: policy plugin %s: %s\n",
			 path, r->reason);
		assert_int_equal(count_of(log, want), 1);
		/* the valid plugin before it was initialised, then torn down */
		assert_int_equal(count_of(log, "allow_all: init called"), 1);
		assert_int_equal(count_of(log, "allow_all: destroy called"), 1);
		assert_int_equal(count_of(log, "loaded from"), 1);
		snprintf(marker, sizeof(marker), "test plugin %s: init called",
			 r->plugin);
		assert_int_equal(count_of(log, marker), r->init_runs);
		/* a plugin whose init failed is never destroyed */
		assert_int_equal(count_of(log, "destroy called"), 1);
		assert_false(is_loaded(path));
		assert_false(is_loaded(first));
		free(log);
	}
}

static void test_duplicate_names(void **unused)
{
	char list[LIST_LEN], a[PATH_LEN], b[PATH_LEN], want[3 * PATH_LEN];
	char err[512];
	struct comb_policy_set *set;
	char *log;

	(void)unused;
	/* two different files that both call themselves "dup" */
	test_list(list, sizeof(list), "dup_a", "dup_b", NULL);
	test_plugin("dup_a", a, sizeof(a));
	test_plugin("dup_b", b, sizeof(b));
	capture_start();
	set = comb_policy_set_load(list, "", err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	snprintf(want, sizeof(want),
		 "policy plugin %s: duplicate name 'dup' (already loaded from %s)",
		 b, a);
	assert_string_equal(err, want);
	assert_int_equal(count_of(log, want), 1);
	assert_int_equal(count_of(log, "dup_a: init called"), 1);
	assert_int_equal(count_of(log, "dup_b: init called"), 0);
	assert_false(is_loaded(a));
	assert_false(is_loaded(b));
	free(log);

	/* the same file twice is a duplicate too */
	test_list(list, sizeof(list), "allow_all", "allow_all", NULL);
	test_plugin("allow_all", a, sizeof(a));
	capture_start();
	set = comb_policy_set_load(list, "", err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	snprintf(want, sizeof(want),
		 "policy plugin %s: duplicate name 'allow_all' (already loaded "
		 "from %s)",
		 a, a);
	assert_string_equal(err, want);
	assert_int_equal(count_of(log, "allow_all: init called"), 1);
	assert_int_equal(count_of(log, "allow_all: destroy called"), 1);
	assert_false(is_loaded(a));
	free(log);
}

static void test_bad_lists(void **unused)
{
	char list[LIST_LEN], path[PATH_LEN], want[LIST_LEN + 64], err[512];
	struct comb_policy_set *set;
	char *log;

	(void)unused;
	capture_start();
	set = comb_policy_set_load("", "", err, sizeof(err));
	assert_null(comb_policy_set_load(NULL, "", NULL, 0));
	log = capture_stop();
	assert_null(set);
	assert_string_equal(err, "policy plugin: no plugin path configured");
	assert_int_equal(count_of(log, "error: policy plugin: no plugin path"),
			 2);
	free(log);

	/* an empty element: the plugin before it must be unloaded again */
	test_plugin("allow_all", path, sizeof(path));
	snprintf(list, sizeof(list), "%s::%s", path, path);
	capture_start();
	set = comb_policy_set_load(list, "", err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	snprintf(want, sizeof(want), "policy plugin list: empty path in '%s'",
		 list);
	assert_string_equal(err, want);
	assert_int_equal(count_of(log, "allow_all: destroy called"), 1);
	assert_false(is_loaded(path));
	free(log);

	snprintf(list, sizeof(list), "%s:", path);
	capture_start();
	set = comb_policy_set_load(list, "", err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	assert_non_null(strstr(err, "empty path"));
	free(log);

	/* a file that does not exist */
	snprintf(path, sizeof(path), "%snot_there.so", LIB_DIR);
	capture_start();
	set = comb_policy_set_load(path, "", err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	snprintf(want, sizeof(want), "policy plugin %s: cannot load: ", path);
	assert_memory_equal(err, want, strlen(want));
	assert_non_null(strstr(log, want));
	free(log);

	/* more plugins than COMB_POLICY_MAX_PLUGINS, all distinct: the
	 * ninth is refused before it is even opened */
	test_list(list, sizeof(list), "allow_all", "deny_all", "abstain_all",
		  "bogus_verdict", "future_minor", "dup_a", NULL);
	{
		size_t used = strlen(list);
		char one[PATH_LEN];

		real_plugin("default", one, sizeof(one));
		snprintf(list + used, sizeof(list) - used, ":%s", one);
		used = strlen(list);
		real_plugin("auditor", one, sizeof(one));
		snprintf(list + used, sizeof(list) - used, ":%s", one);
		used = strlen(list);
		test_plugin("init_fail", one, sizeof(one));
		snprintf(list + used, sizeof(list) - used, ":%s", one);
	}
	capture_start();
	set = comb_policy_set_load(list, "auditors=" KEY_A, err, sizeof(err));
	log = capture_stop();
	assert_null(set);
	test_plugin("init_fail", path, sizeof(path));
	snprintf(want, sizeof(want),
		 "policy plugin %s: too many plugins (at most %d)", path,
		 COMB_POLICY_MAX_PLUGINS);
	assert_string_equal(err, want);
	assert_int_equal(count_of(log, "loaded from"), 8);
	assert_int_equal(count_of(log, "init_fail: init called"), 0);
	assert_int_equal(count_of(log, "allow_all: destroy called"), 1);
	assert_false(is_loaded(path));
	test_plugin("allow_all", path, sizeof(path));
	assert_false(is_loaded(path));
	free(log);
}

/* ---- loading and chains ----------------------------------------------- */

static void test_load_logs(void **unused)
{
	char path[PATH_LEN], two[PATH_LEN], list[LIST_LEN];
	char want[2 * PATH_LEN];
	struct comb_policy_set *set;
	char *log;

	(void)unused;
	real_plugin("default", path, sizeof(path));
	capture_start();
	set = comb_policy_set_load(path, NULL, NULL, 0);
	log = capture_stop();
	assert_non_null(set);
	snprintf(want, sizeof(want), "info: policy 'default' 1.0 loaded from %s\n",
		 path);
	assert_int_equal(count_of(log, want), 1);
	assert_true(is_loaded(path));
	comb_policy_set_free(set);
	assert_false(is_loaded(path));
	free(log);

	/* the config reaches init whole; the host table is usable there */
	test_plugin("allow_all", path, sizeof(path));
	test_plugin("future_minor", two, sizeof(two));
	snprintf(list, sizeof(list), "%s:%s", path, two);
	capture_start();
	set = comb_policy_set_load(list, "x=1", NULL, 0);
	comb_policy_set_free(set);
	log = capture_stop();
	assert_non_null(set);
	assert_int_equal(count_of(log, "allow_all: init called, config 'x=1'"),
			 1);
	snprintf(want, sizeof(want),
		 "policy 'allow_all' 0.1 loaded from %s\n", path);
	assert_int_equal(count_of(log, want), 1);
	/* a larger descriptor of a later minor version is accepted */
	snprintf(want, sizeof(want),
		 "policy 'future_minor' 1.9 loaded from %s\n", two);
	assert_int_equal(count_of(log, want), 1);
	assert_int_equal(count_of(log, "allow_all: destroy called"), 1);
	free(log);

	capture_start();
	set = comb_policy_set_load(path, NULL, NULL, 0);
	comb_policy_set_free(set);
	log = capture_stop();
	assert_non_null(set);
	assert_int_equal(count_of(log, "config ''"), 1);
	free(log);
}

struct chain_case {
	const char *plugins[4];
	bool allow;
};

static const struct chain_case chains[] = {
	{{"allow_all"}, true},
	{{"deny_all"}, false},
	{{"abstain_all"}, false},                    /* all abstain: deny */
	{{"abstain_all", "allow_all"}, true},        /* abstain passes on */
	{{"abstain_all", "deny_all"}, false},
	{{"allow_all", "deny_all"}, true},           /* first answer wins */
	{{"deny_all", "allow_all"}, false},
	{{"abstain_all", "deny_all", "allow_all"}, false},
	{{"bogus_verdict"}, false},                  /* bogus: deny */
	{{"bogus_verdict", "allow_all"}, false},     /* ... and ends the chain */
	{{"abstain_all", "bogus_verdict", "allow_all"}, false},
	{{"future_minor"}, true},
};

static void test_chains(void **unused)
{
	struct comb_policy_channel ch = channel(COMB_VIS_OPEN, COMB_ROLE_OWNER);

	(void)unused;
	for (size_t i = 0; i < sizeof(chains) / sizeof(chains[0]); i++) {
		const struct chain_case *c = &chains[i];
		char list[LIST_LEN];
		struct comb_policy_set *set;

		test_list(list, sizeof(list), c->plugins[0], c->plugins[1],
			  c->plugins[2], c->plugins[3]);
		capture_start();
		set = comb_policy_set_load(list, "", NULL, 0);
		free(capture_stop());
		assert_non_null(set);
		for (int act = COMB_ACT_READ; act <= COMB_ACT_DELETE_ARTIFACT;
		     act++) {
			struct comb_policy_channel *chp =
				act == COMB_ACT_CREATE_CHANNEL ? NULL : &ch;

			if (ask(set, (enum comb_action)act, KEY_B, 1, chp) !=
			    c->allow)
				fail_msg("chain %zu action %d: want %d", i,
					 act, c->allow);
		}
		capture_start();
		comb_policy_set_free(set);
		free(capture_stop());
	}
}

static void test_bogus_logged_once(void **unused)
{
	struct comb_policy_channel ch = channel(COMB_VIS_OPEN, COMB_ROLE_OWNER);
	struct comb_policy_set *set;
	char list[LIST_LEN];
	char *log;

	(void)unused;
	test_list(list, sizeof(list), "bogus_verdict", NULL);
	set = must_load(list, "");
	capture_start();
	for (int i = 0; i < 5; i++)
		assert_false(ask(set, COMB_ACT_READ, KEY_B, 0, &ch));
	log = capture_stop();
	assert_int_equal(count_of(log, "error: policy 'bogus_verdict' answered "
				       "7, not a verdict: treated as deny"),
			 1);
	free(log);
	comb_policy_set_free(set);
}

/* The host fails closed on requests it cannot pass on safely. */
static void test_malformed_requests(void **unused)
{
	struct comb_policy_channel ch = channel(COMB_VIS_OPEN, COMB_ROLE_OWNER);
	struct comb_policy_actor actor = {KEY_B, 1};
	struct comb_policy_actor nokey = {NULL, 1};
	struct comb_policy_request req;
	struct comb_policy_set *set;
	char list[LIST_LEN];

	(void)unused;
	test_list(list, sizeof(list), "allow_all", NULL);
	capture_start();
	set = comb_policy_set_load(list, "", NULL, 0);
	free(capture_stop());
	assert_non_null(set);
	memset(&req, 0, sizeof(req));
	req.action = COMB_ACT_READ;
	req.actor = &actor;
	req.channel = &ch;
	assert_true(comb_policy_allows(set, &req)); /* size is the host's */
	assert_false(comb_policy_allows(NULL, &req));
	assert_false(comb_policy_allows(set, NULL));
	req.channel = NULL;
	assert_false(comb_policy_allows(set, &req));
	req.action = COMB_ACT_CREATE_CHANNEL;
	assert_true(comb_policy_allows(set, &req));
	req.actor = NULL;
	assert_false(comb_policy_allows(set, &req));
	req.actor = &nokey;
	assert_false(comb_policy_allows(set, &req));
	capture_start();
	comb_policy_set_free(set);
	free(capture_stop());
	comb_policy_set_free(NULL);
}

/* ---- the default policy ----------------------------------------------- */

enum { O = COMB_VIS_OPEN, U = COMB_VIS_UNLISTED, P = COMB_VIS_PRIVATE };
enum {
	NONE = COMB_ROLE_NONE,
	MEM = COMB_ROLE_MEMBER,
	ADM = COMB_ROLE_ADMIN,
	OWN = COMB_ROLE_OWNER,
};
/* Row flags. */
enum {
	DM = 1 << 0,       /* the channel is a DM (always private) */
	ARCH = 1 << 1,     /* archived */
	DEL = 1 << 2,      /* deleted */
	NAMED = 1 << 3,    /* the request names the channel in #h */
	CA = 1 << 4,       /* the actor is a community admin */
	SELF = 1 << 5,     /* REMOVE_USER of oneself */
	CREATOR = 1 << 6,  /* DELETE_ARTIFACT by the artifact's creator */
	MKDM = 1 << 7,     /* CREATE_CHANNEL of a DM */
};

struct rule {
	int line;
	int action;
	int vis;
	int role;
	int flags;
	bool allow;
};

#define R(act, vis, role, flags, allow) {__LINE__, act, vis, role, flags, allow}
#define ACT(x) COMB_ACT_##x

/* One row per case of PROTOCOL.md sections 4 and 10 (and their edges). */
static const struct rule rules[] = {
	/* read: deleted channels: nobody */
	R(ACT(READ), O, OWN, DEL, false),
	R(ACT(READ), O, NONE, DEL | CA, false),
	R(ACT(READ), U, NONE, DEL | NAMED, false),
	R(ACT(READ), P, OWN, DM | DEL, false),
	/* read: open: everyone authenticated in the community */
	R(ACT(READ), O, NONE, 0, true),
	R(ACT(READ), O, NONE, NAMED, true),
	R(ACT(READ), O, MEM, 0, true),
	R(ACT(READ), O, NONE, ARCH, true),       /* archived stay readable */
	/* read: unlisted: members, and whoever names it in #h */
	R(ACT(READ), U, NONE, 0, false),         /* broad reads never reveal */
	R(ACT(READ), U, NONE, NAMED, true),
	R(ACT(READ), U, MEM, 0, true),
	R(ACT(READ), U, OWN, 0, true),
	R(ACT(READ), U, MEM, ARCH, true),
	/* read: private and dm: active members only */
	R(ACT(READ), P, NONE, 0, false),
	R(ACT(READ), P, NONE, NAMED, false),
	R(ACT(READ), P, MEM, 0, true),
	R(ACT(READ), P, ADM, 0, true),
	R(ACT(READ), P, OWN, ARCH, true),
	R(ACT(READ), P, NONE, DM, false),
	R(ACT(READ), P, NONE, DM | NAMED, false),
	R(ACT(READ), P, MEM, DM, true),
	/* read: community admins read every non-DM channel, no DM */
	R(ACT(READ), U, NONE, CA, true),
	R(ACT(READ), P, NONE, CA, true),
	R(ACT(READ), P, NONE, CA | ARCH, true),
	R(ACT(READ), P, NONE, DM | CA, false),
	R(ACT(READ), P, NONE, DM | CA | NAMED, false),

	/* write: read permission, membership when private, never archived
	 * or deleted */
	R(ACT(WRITE), O, NONE, 0, true),
	R(ACT(WRITE), O, OWN, ARCH, false),
	R(ACT(WRITE), O, OWN, DEL, false),
	R(ACT(WRITE), O, NONE, CA | ARCH, false),
	R(ACT(WRITE), U, NONE, 0, false),
	R(ACT(WRITE), U, NONE, NAMED, true),     /* naming it, as for open */
	R(ACT(WRITE), U, MEM, 0, true),
	R(ACT(WRITE), U, NONE, NAMED | ARCH, false),
	R(ACT(WRITE), P, NONE, NAMED, false),
	R(ACT(WRITE), P, MEM, 0, true),
	R(ACT(WRITE), P, MEM, ARCH, false),
	R(ACT(WRITE), P, NONE, CA, true),        /* acts as owner */
	R(ACT(WRITE), P, NONE, CA | DEL, false),
	R(ACT(WRITE), P, MEM, DM, true),
	R(ACT(WRITE), P, NONE, DM, false),
	R(ACT(WRITE), P, NONE, DM | CA, false),
	R(ACT(WRITE), P, MEM, DM | ARCH, false),

	/* 9007 create channel: community admins only, DMs included */
	R(ACT(CREATE_CHANNEL), O, NONE, CA, true),
	R(ACT(CREATE_CHANNEL), O, NONE, CA | MKDM, true),
	R(ACT(CREATE_CHANNEL), O, NONE, 0, false),
	R(ACT(CREATE_CHANNEL), O, NONE, MKDM, false),

	/* 9000 put user: channel owner/admin, community admin */
	R(ACT(PUT_USER), P, OWN, 0, true),
	R(ACT(PUT_USER), P, ADM, 0, true),
	R(ACT(PUT_USER), P, MEM, 0, false),
	R(ACT(PUT_USER), O, NONE, 0, false),
	R(ACT(PUT_USER), O, NONE, CA, true),
	R(ACT(PUT_USER), P, NONE, CA, true),
	R(ACT(PUT_USER), P, OWN, ARCH, true),
	R(ACT(PUT_USER), P, OWN, DM, true),
	R(ACT(PUT_USER), P, NONE, DM | CA, false),
	R(ACT(PUT_USER), P, OWN, DEL, false),
	R(ACT(PUT_USER), P, NONE, CA | DEL, false),

	/* 9001 remove user: the same, or the user itself */
	R(ACT(REMOVE_USER), U, OWN, 0, true),
	R(ACT(REMOVE_USER), U, ADM, 0, true),
	R(ACT(REMOVE_USER), U, MEM, 0, false),
	R(ACT(REMOVE_USER), U, NONE, CA, true),
	R(ACT(REMOVE_USER), P, NONE, DM | CA, false),
	R(ACT(REMOVE_USER), P, MEM, SELF, true),
	R(ACT(REMOVE_USER), P, MEM, DM | SELF, true),
	R(ACT(REMOVE_USER), O, MEM, ARCH | SELF, true),
	R(ACT(REMOVE_USER), O, NONE, SELF, false), /* nothing to remove */
	R(ACT(REMOVE_USER), P, MEM, DEL | SELF, false),
	R(ACT(REMOVE_USER), P, OWN, DEL, false),

	/* 9002 edit metadata: channel owner/admin, community admin */
	R(ACT(EDIT_METADATA), O, OWN, 0, true),
	R(ACT(EDIT_METADATA), O, ADM, 0, true),
	R(ACT(EDIT_METADATA), O, MEM, 0, false),
	R(ACT(EDIT_METADATA), U, NONE, NAMED, false),
	R(ACT(EDIT_METADATA), P, NONE, CA, true),
	R(ACT(EDIT_METADATA), P, ADM, ARCH, true), /* unarchiving */
	R(ACT(EDIT_METADATA), P, NONE, CA | ARCH, true),
	R(ACT(EDIT_METADATA), P, OWN, DM, true),
	R(ACT(EDIT_METADATA), P, MEM, DM | CA, false),
	R(ACT(EDIT_METADATA), O, OWN, DEL, false),

	/* 9005 redact: channel owner/admin, community admin */
	R(ACT(REDACT), O, OWN, 0, true),
	R(ACT(REDACT), O, ADM, 0, true),
	R(ACT(REDACT), O, MEM, 0, false),
	R(ACT(REDACT), O, NONE, 0, false),
	R(ACT(REDACT), U, NONE, CA, true),
	R(ACT(REDACT), P, ADM, ARCH, true),
	R(ACT(REDACT), P, ADM, DM, true),
	R(ACT(REDACT), P, NONE, DM | CA, false),
	R(ACT(REDACT), P, ADM, DEL, false),

	/* 9008 delete channel: channel owner, community admin */
	R(ACT(DELETE_CHANNEL), P, OWN, 0, true),
	R(ACT(DELETE_CHANNEL), P, ADM, 0, false),
	R(ACT(DELETE_CHANNEL), P, MEM, 0, false),
	R(ACT(DELETE_CHANNEL), O, NONE, 0, false),
	R(ACT(DELETE_CHANNEL), O, NONE, CA, true),
	R(ACT(DELETE_CHANNEL), O, OWN, ARCH, true),
	R(ACT(DELETE_CHANNEL), P, OWN, DM, true),
	R(ACT(DELETE_CHANNEL), P, NONE, DM | CA, false),
	R(ACT(DELETE_CHANNEL), P, OWN, DEL, false),
	R(ACT(DELETE_CHANNEL), O, NONE, CA | DEL, false),

	/* 9021 join: open and unlisted channels only */
	R(ACT(JOIN), O, NONE, 0, true),
	R(ACT(JOIN), U, NONE, 0, true),
	R(ACT(JOIN), U, NONE, NAMED, true),
	R(ACT(JOIN), O, NONE, ARCH, true),
	R(ACT(JOIN), P, NONE, 0, false),
	R(ACT(JOIN), P, NONE, CA, false),
	R(ACT(JOIN), P, NONE, DM, false),
	R(ACT(JOIN), O, NONE, DEL, false),
	R(ACT(JOIN), U, NONE, DEL, false),

	/* 9022 leave: any member (the core keeps the last owner) */
	R(ACT(LEAVE), O, MEM, 0, true),
	R(ACT(LEAVE), P, ADM, 0, true),
	R(ACT(LEAVE), P, OWN, 0, true),
	R(ACT(LEAVE), P, MEM, DM, true),
	R(ACT(LEAVE), U, MEM, ARCH, true),
	R(ACT(LEAVE), O, NONE, 0, false),
	R(ACT(LEAVE), O, NONE, CA, false),
	R(ACT(LEAVE), O, MEM, DEL, false),

	/* artifact delete/restore: creator, channel owner/admin or community
	 * admin, and write access where the artifact lives */
	R(ACT(DELETE_ARTIFACT), O, NONE, CREATOR, true),
	R(ACT(DELETE_ARTIFACT), P, MEM, CREATOR, true),
	R(ACT(DELETE_ARTIFACT), P, MEM, 0, false),
	R(ACT(DELETE_ARTIFACT), O, NONE, 0, false),
	R(ACT(DELETE_ARTIFACT), P, ADM, 0, true),
	R(ACT(DELETE_ARTIFACT), P, OWN, 0, true),
	R(ACT(DELETE_ARTIFACT), P, NONE, CA, true),
	R(ACT(DELETE_ARTIFACT), P, MEM, DM | CREATOR, true),
	R(ACT(DELETE_ARTIFACT), P, NONE, DM | CA, false),
	R(ACT(DELETE_ARTIFACT), P, NONE, CREATOR, false), /* removed creator */
	R(ACT(DELETE_ARTIFACT), U, NONE, NAMED | CREATOR, true),
	R(ACT(DELETE_ARTIFACT), P, OWN, ARCH, false),
	R(ACT(DELETE_ARTIFACT), P, MEM, ARCH | CREATOR, false),
	R(ACT(DELETE_ARTIFACT), P, OWN, DEL | CREATOR, false),

	/* an action the plugin does not know */
	R(99, O, OWN, CA, false),
};

static bool ask_rule(const struct comb_policy_set *set, const struct rule *r,
		     const char *pubkey)
{
	struct comb_policy_actor actor = {pubkey, (r->flags & CA) != 0};
	struct comb_policy_channel ch = channel(r->vis, r->role);
	struct comb_policy_request req;

	ch.is_dm = (r->flags & DM) != 0;
	ch.archived = (r->flags & ARCH) != 0;
	ch.deleted = (r->flags & DEL) != 0;
	ch.named = (r->flags & NAMED) != 0;
	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.action = (enum comb_action)r->action;
	req.actor = &actor;
	req.channel = r->action == COMB_ACT_CREATE_CHANNEL ? NULL : &ch;
	req.target_is_self = (r->flags & SELF) != 0;
	req.actor_is_creator = (r->flags & CREATOR) != 0;
	req.is_dm = (r->flags & MKDM) != 0;
	return comb_policy_allows(set, &req);
}

static void test_default_rules(void **unused)
{
	char path[PATH_LEN];
	struct comb_policy_set *set;

	(void)unused;
	real_plugin("default", path, sizeof(path));
	capture_start();
	set = comb_policy_set_load(path, "", NULL, 0);
	free(capture_stop());
	assert_non_null(set);
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const struct rule *r = &rules[i];

		if (ask_rule(set, r, KEY_B) != r->allow)
			fail_msg("default rule at line %d: want %s", r->line,
				 r->allow ? "allow" : "deny");
	}
	comb_policy_set_free(set);
}

/*
 * The default policy never abstains: chained in front of allow_all, it
 * denies exactly what it denies alone, for every action and every fact.
 */
static void test_default_never_abstains(void **unused)
{
	char one[PATH_LEN], two[PATH_LEN], list[LIST_LEN];
	struct comb_policy_set *alone, *chained;
	int denials = 0;

	(void)unused;
	real_plugin("default", one, sizeof(one));
	test_plugin("allow_all", two, sizeof(two));
	snprintf(list, sizeof(list), "%s:%s", one, two);
	capture_start();
	alone = comb_policy_set_load(one, "", NULL, 0);
	chained = comb_policy_set_load(list, "", NULL, 0);
	free(capture_stop());
	assert_non_null(alone);
	assert_non_null(chained);
	for (int act = COMB_ACT_READ; act <= COMB_ACT_DELETE_ARTIFACT; act++) {
		for (int k = 0; k < COMB_POLICY_READ_KEYS; k++) {
			if ((k & 3) == 3)
				continue;
			for (int f = 0; f < (CA | SELF | CREATOR | MKDM) * 2;
			     f += CA) {
				struct rule r = {0, act, k & 3, (k >> 5) & 3,
						 f, false};

				r.flags |= (k & 4 ? DM : 0) |
					   (k & 8 ? DEL : 0) |
					   (k & 16 ? ARCH : 0) |
					   (k & 128 ? NAMED : 0);
				bool a = ask_rule(alone, &r, KEY_B);
				bool c = ask_rule(chained, &r, KEY_B);

				if (a != c)
					fail_msg("action %d key %d flags %d: "
						 "default abstained",
						 act, k, f);
				denials += !a;
			}
		}
	}
	assert_true(denials > 0);
	capture_start();
	comb_policy_set_free(alone);
	comb_policy_set_free(chained);
	free(capture_stop());
}

/* ---- the auditor ------------------------------------------------------ */

static void load_auditor_chain(struct comb_policy_set **chain,
			       struct comb_policy_set **alone)
{
	char aud[PATH_LEN], def[PATH_LEN], list[LIST_LEN];
	char *log;

	real_plugin("auditor", aud, sizeof(aud));
	real_plugin("default", def, sizeof(def));
	snprintf(list, sizeof(list), "%s:%s", aud, def);
	capture_start();
	*chain = comb_policy_set_load(list, "auditors=" KEY_C "," KEY_A, NULL,
				      0);
	*alone = comb_policy_set_load(def, "auditors=" KEY_C "," KEY_A, NULL,
				      0);
	log = capture_stop();
	assert_non_null(*chain);
	assert_non_null(*alone);
	assert_int_equal(count_of(log, "auditor: 2 auditors configured"), 1);
	assert_int_equal(count_of(log, "policy 'auditor' 1.0 loaded from"), 1);
	free(log);
}

struct audit_case {
	int line;
	const char *pubkey;
	int action;
	int vis;
	int role;
	int flags;
	bool chain;  /* auditor:default */
	bool alone;  /* default */
};

#define AC(key, act, vis, role, flags, chain, alone)                          \
	{__LINE__, key, act, vis, role, flags, chain, alone}

static const struct audit_case audit_cases[] = {
	/* the auditor reads every non-DM channel, even private ones ... */
	AC(KEY_A, ACT(READ), P, NONE, 0, true, false),
	AC(KEY_A, ACT(READ), U, NONE, 0, true, false),
	AC(KEY_A, ACT(READ), O, NONE, ARCH, true, true),
	AC(KEY_C, ACT(READ), P, NONE, 0, true, false),
	/* ... but never a DM or a deleted channel */
	AC(KEY_A, ACT(READ), P, NONE, DM, false, false),
	AC(KEY_A, ACT(READ), P, MEM, DM, false, true),
	AC(KEY_A, ACT(READ), O, OWN, DEL, false, false),
	/* and never writes or moderates, even where a member */
	AC(KEY_A, ACT(WRITE), P, NONE, 0, false, false),
	AC(KEY_A, ACT(WRITE), O, MEM, 0, false, true),
	AC(KEY_A, ACT(WRITE), P, OWN, 0, false, true),
	AC(KEY_A, ACT(PUT_USER), P, OWN, 0, false, true),
	AC(KEY_A, ACT(REMOVE_USER), P, MEM, SELF, false, true),
	AC(KEY_A, ACT(EDIT_METADATA), O, ADM, 0, false, true),
	AC(KEY_A, ACT(REDACT), O, ADM, 0, false, true),
	AC(KEY_A, ACT(DELETE_CHANNEL), O, OWN, 0, false, true),
	AC(KEY_A, ACT(JOIN), O, NONE, 0, false, true),
	AC(KEY_A, ACT(LEAVE), O, MEM, 0, false, true),
	AC(KEY_A, ACT(DELETE_ARTIFACT), O, MEM, CREATOR, false, true),
	AC(KEY_A, ACT(CREATE_CHANNEL), O, NONE, CA, false, true),
	AC(KEY_A, ACT(WRITE), P, NONE, CA, false, true),
	/* everyone else is decided by the default policy unchanged */
	AC(KEY_B, ACT(READ), P, NONE, 0, false, false),
	AC(KEY_B, ACT(READ), P, MEM, 0, true, true),
	AC(KEY_B, ACT(READ), U, NONE, 0, false, false),
	AC(KEY_B, ACT(READ), U, NONE, NAMED, true, true),
	AC(KEY_B, ACT(READ), P, MEM, DM, true, true),
	AC(KEY_B, ACT(WRITE), O, NONE, 0, true, true),
	AC(KEY_B, ACT(WRITE), P, MEM, ARCH, false, false),
	AC(KEY_B, ACT(PUT_USER), P, OWN, 0, true, true),
	AC(KEY_B, ACT(PUT_USER), P, MEM, 0, false, false),
	AC(KEY_B, ACT(CREATE_CHANNEL), O, NONE, CA, true, true),
	AC(KEY_B, ACT(CREATE_CHANNEL), O, NONE, 0, false, false),
	AC(KEY_B, ACT(DELETE_CHANNEL), P, NONE, CA, true, true),
};

static void test_auditor_chain(void **unused)
{
	struct comb_policy_set *chain, *alone;

	(void)unused;
	load_auditor_chain(&chain, &alone);
	for (size_t i = 0; i < sizeof(audit_cases) / sizeof(audit_cases[0]);
	     i++) {
		const struct audit_case *c = &audit_cases[i];
		struct rule r = {c->line, c->action, c->vis, c->role, c->flags,
				 false};

		if (ask_rule(chain, &r, c->pubkey) != c->chain)
			fail_msg("auditor case at line %d: chain wants %d",
				 c->line, c->chain);
		if (ask_rule(alone, &r, c->pubkey) != c->alone)
			fail_msg("auditor case at line %d: default wants %d",
				 c->line, c->alone);
	}
	capture_start();
	comb_policy_set_free(chain);
	comb_policy_set_free(alone);
	free(capture_stop());
}

static void test_auditor_bad_config(void **unused)
{
	static const char *const bad[] = {
		"",
		"auditors=",
		"auditor=" KEY_A,
		"Auditors=" KEY_A,
		" auditors=" KEY_A,
		"auditors= " KEY_A,
		"auditors=" KEY_A ",",
		"auditors=," KEY_A,
		"auditors=" KEY_A ",," KEY_B,
		"auditors=" KEY_A " ",
		"auditors=" KEY_A "\n",
		"auditors=" KEY_A ";" KEY_B,
		"auditors=" KEY_A "," KEY_A,
		"auditors=" KEY_B "," KEY_A "," KEY_B,
		"auditors=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"auditors=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"auditors=" KEY_A "a",
		"auditors=gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg",
		"auditors=" KEY_A ",x",
	};
	char path[PATH_LEN], want[2 * PATH_LEN], err[512];

	(void)unused;
	real_plugin("auditor", path, sizeof(path));
	snprintf(want, sizeof(want), "policy plugin %s: init failed (-1)",
		 path);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct comb_policy_set *set;
		char *log;

		capture_start();
		set = comb_policy_set_load(path, bad[i], err, sizeof(err));
		log = capture_stop();
		if (set)
			fail_msg("auditor accepted config '%s'", bad[i]);
		assert_string_equal(err, want);
		if (count_of(log, "policy plugin: auditor: bad config") != 1)
			fail_msg("no config complaint for '%s'", bad[i]);
		assert_false(is_loaded(path));
		free(log);
	}

	/* too many auditors: 257 distinct keys */
	{
		size_t cap = 10 + 257 * 65;
		char *cfg = malloc(cap);
		size_t used;
		struct comb_policy_set *set;
		char *log;

		assert_non_null(cfg);
		used = (size_t)snprintf(cfg, cap, "auditors=");
		for (int i = 0; i < 257; i++)
			used += (size_t)snprintf(cfg + used, cap - used,
						 "%s%064x", i ? "," : "", i);
		capture_start();
		set = comb_policy_set_load(path, cfg, err, sizeof(err));
		log = capture_stop();
		assert_null(set);
		assert_int_equal(count_of(log, "more than 256 auditors"), 1);
		free(log);
		/* 256 is the limit and still loads */
		cfg[strlen(cfg) - 65] = '\0';
		capture_start();
		set = comb_policy_set_load(path, cfg, err, sizeof(err));
		log = capture_stop();
		assert_non_null(set);
		assert_int_equal(count_of(log, "256 auditors configured"), 1);
		comb_policy_set_free(set);
		free(log);
		free(cfg);
	}
}

/* ---- read keys -------------------------------------------------------- */

static void test_read_key_encoding(void **unused)
{
	struct comb_policy_channel ch = channel(COMB_VIS_OPEN, COMB_ROLE_NONE);

	(void)unused;
	assert_int_equal(comb_policy_read_key(&ch), 0);
	ch.visibility = COMB_VIS_UNLISTED;
	assert_int_equal(comb_policy_read_key(&ch), 1);
	ch.visibility = COMB_VIS_PRIVATE;
	assert_int_equal(comb_policy_read_key(&ch), 2);
	ch.is_dm = 1;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4);
	ch.deleted = 1;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4 | 8);
	ch.archived = 1;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4 | 8 | 16);
	ch.role = COMB_ROLE_MEMBER;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4 | 8 | 16 | 32);
	ch.role = COMB_ROLE_ADMIN;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4 | 8 | 16 | 64);
	ch.role = COMB_ROLE_OWNER;
	ch.named = 1;
	assert_int_equal(comb_policy_read_key(&ch), 2 | 4 | 8 | 16 | 96 | 128);
	/* flags are booleans: any non-zero value is one bit */
	ch = channel(COMB_VIS_UNLISTED, COMB_ROLE_MEMBER);
	ch.is_dm = 5;
	ch.named = -1;
	assert_int_equal(comb_policy_read_key(&ch), 1 | 4 | 32 | 128);
	/* values outside the enums have no key */
	ch.visibility = (enum comb_visibility)3;
	assert_int_equal(comb_policy_read_key(&ch), COMB_EINVAL);
	ch.visibility = COMB_VIS_OPEN;
	ch.role = (enum comb_role)4;
	assert_int_equal(comb_policy_read_key(&ch), COMB_EINVAL);
	ch.role = (enum comb_role)-1;
	assert_int_equal(comb_policy_read_key(&ch), COMB_EINVAL);
}

/* Decodes key k back into channel facts (the inverse of the encoding). */
static struct comb_policy_channel decode(int k)
{
	struct comb_policy_channel ch =
		channel((enum comb_visibility)(k & 3),
			(enum comb_role)((k >> 5) & 3));

	ch.is_dm = (k >> 2) & 1;
	ch.deleted = (k >> 3) & 1;
	ch.archived = (k >> 4) & 1;
	ch.named = (k >> 7) & 1;
	return ch;
}

/* Checks keys against asking READ for every valid key one by one. */
static int check_keys(const struct comb_policy_set *set, const char *pubkey,
		      int community_admin)
{
	struct comb_policy_actor actor = {pubkey, community_admin};
	int keys[COMB_POLICY_READ_KEYS], count = -1, j = 0;

	comb_policy_read_keys(set, &actor, keys, &count);
	assert_in_range(count, 0, COMB_POLICY_READ_KEYS);
	for (int k = 0; k < COMB_POLICY_READ_KEYS; k++) {
		struct comb_policy_channel ch = decode(k);

		assert_int_equal(comb_policy_read_key(&ch),
				 (k & 3) == 3 ? COMB_EINVAL : k);
		if ((k & 3) == 3 ||
		    !ask(set, COMB_ACT_READ, pubkey, community_admin, &ch))
			continue;
		assert_true(j < count);
		assert_int_equal(keys[j], k); /* ascending, none missing */
		j++;
	}
	assert_int_equal(j, count);
	return count;
}

static int has_key(const int *keys, int count, int key)
{
	for (int i = 0; i < count; i++)
		if (keys[i] == key)
			return 1;
	return 0;
}

static void test_read_keys_default(void **unused)
{
	struct comb_policy_actor user = {KEY_B, 0};
	int keys[COMB_POLICY_READ_KEYS], count;
	char path[PATH_LEN];
	struct comb_policy_set *set;

	(void)unused;
	real_plugin("default", path, sizeof(path));
	capture_start();
	set = comb_policy_set_load(path, "", NULL, 0);
	free(capture_stop());
	assert_non_null(set);
	/*
	 * Not deleted, per (visibility, is_dm) over 2 archived x 4 roles x
	 * 2 named: open 16; unlisted 14 (7: any role, or named); private 12
	 * (6: a role); a DM counts as private whatever its visibility: 3 x 12.
	 */
	assert_int_equal(check_keys(set, KEY_B, 0), 16 + 14 + 12 + 36);
	/* a community admin reads every non-DM channel: 3 x 16, plus DMs */
	assert_int_equal(check_keys(set, KEY_B, 1), 48 + 36);

	comb_policy_read_keys(set, &user, keys, &count);
	assert_true(has_key(keys, count, 0));                /* open */
	assert_false(has_key(keys, count, 8));               /* deleted */
	assert_false(has_key(keys, count, 1));               /* unlisted */
	assert_true(has_key(keys, count, 1 | 128));          /* named */
	assert_true(has_key(keys, count, 1 | 32));           /* joined */
	assert_false(has_key(keys, count, 2 | 128));         /* private */
	assert_true(has_key(keys, count, 2 | 16 | 32));      /* member */
	assert_false(has_key(keys, count, 2 | 4 | 128));     /* dm */
	assert_true(has_key(keys, count, 2 | 4 | 96));       /* dm owner */
	assert_false(has_key(keys, count, 2 | 4 | 8 | 96));  /* deleted dm */
	for (int i = 0; i < count; i++)
		assert_int_not_equal(keys[i] & 3, 3);
	comb_policy_set_free(set);
}

static void test_read_keys_chains(void **unused)
{
	struct comb_policy_actor auditor = {KEY_A, 0};
	int keys[COMB_POLICY_READ_KEYS], count;
	struct comb_policy_set *chain, *alone, *set;
	char list[LIST_LEN];

	(void)unused;
	load_auditor_chain(&chain, &alone);
	/* every non-DM, non-deleted combination, and nothing else */
	assert_int_equal(check_keys(chain, KEY_A, 0), 3 * 2 * 4 * 2);
	comb_policy_read_keys(chain, &auditor, keys, &count);
	for (int i = 0; i < count; i++)
		assert_int_equal(keys[i] & (4 | 8), 0);
	assert_int_equal(check_keys(chain, KEY_A, 1), 48);
	/* a non-auditor gets exactly the default keys */
	assert_int_equal(check_keys(chain, KEY_B, 0), 78);
	assert_int_equal(check_keys(alone, KEY_A, 0), 78);
	capture_start();
	comb_policy_set_free(chain);
	comb_policy_set_free(alone);
	free(capture_stop());

	/* a chain that only abstains reads nothing; allow_all reads all */
	test_list(list, sizeof(list), "abstain_all", NULL);
	capture_start();
	set = comb_policy_set_load(list, "", NULL, 0);
	free(capture_stop());
	assert_non_null(set);
	assert_int_equal(check_keys(set, KEY_B, 1), 0);
	comb_policy_set_free(set);
	test_list(list, sizeof(list), "allow_all", NULL);
	capture_start();
	set = comb_policy_set_load(list, "", NULL, 0);
	free(capture_stop());
	assert_non_null(set);
	assert_int_equal(check_keys(set, KEY_B, 0), 192);
	capture_start();
	comb_policy_set_free(set);
	free(capture_stop());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rejections),
		cmocka_unit_test(test_duplicate_names),
		cmocka_unit_test(test_bad_lists),
		cmocka_unit_test(test_load_logs),
		cmocka_unit_test(test_chains),
		cmocka_unit_test(test_bogus_logged_once),
		cmocka_unit_test(test_malformed_requests),
		cmocka_unit_test(test_default_rules),
		cmocka_unit_test(test_default_never_abstains),
		cmocka_unit_test(test_auditor_chain),
		cmocka_unit_test(test_auditor_bad_config),
		cmocka_unit_test(test_read_key_encoding),
		cmocka_unit_test(test_read_keys_default),
		cmocka_unit_test(test_read_keys_chains),
	};

	comb_log_init("test_policy_set", COMB_LOG_DEBUG);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
