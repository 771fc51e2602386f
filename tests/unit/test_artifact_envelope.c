/*
 * Unit tests for the artifact envelope checks (services/relay/proto/
 * artifact_envelope.c): every rule of PROTOCOL.md section 5's envelope,
 * each refusal with its reason, and the fields a valid revision yields.
 */
#include "test_util.h"

#include <stdlib.h>

#include "comb/error.h"
#include "proto/proto.h"

#define D "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84"
#define H "0b7e2c1a-9d4f-4e8b-a1c2-3d4e5f6a7b8c"
#define PREV "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ROOT "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEX64 "0000000000000000000000000000000000000000000000000000000000000000"

/* A kind-45010 event with the given tags (JSON text) and content; the id
 * and signature are not checked by the envelope. */
static void make_event(struct comb_event *ev, const char *tags_json,
		       const char *content)
{
	json_error_t jerr;
	json_t *tags = json_loads(tags_json, 0, &jerr);
	json_t *obj;
	char err[128];

	if (!tags)
		fail_msg("bad test tags %s: %s", tags_json, jerr.text);
	obj = json_pack("{s:s, s:s, s:i, s:i, s:o, s:s, s:s}",
			"id", HEX64, "pubkey", HEX64, "created_at", 1,
			"kind", 45010, "tags", tags, "content", content,
			"sig", HEX64 HEX64);
	assert_non_null(obj);
	if (comb_event_from_json(ev, obj, err, sizeof(err)))
		fail_msg("test event refused by the parser: %s", err);
	json_decref(obj);
}

/* Asserts that tags/content are refused with exactly reason. */
static void refused(const char *tags_json, const char *content,
		    const char *reason)
{
	struct artifact_envelope env;
	struct comb_event ev;
	char err[256] = "";
	int rc;

	make_event(&ev, tags_json, content);
	rc = artifact_envelope_check(&ev, &env, err, sizeof(err));
	comb_event_release(&ev);
	if (rc != COMB_EINVAL)
		fail_msg("accepted %s (rc %d)", tags_json, rc);
	if (strcmp(err, reason))
		fail_msg("%s: reason \"%s\", want \"%s\"", tags_json, err, reason);
}

static void accepted(const char *tags_json, const char *content,
		     struct artifact_envelope *env, struct comb_event *ev)
{
	char err[256] = "";

	make_event(ev, tags_json, content);
	if (artifact_envelope_check(ev, env, err, sizeof(err)))
		fail_msg("refused %s: %s", tags_json, err);
}

#define BASE(op) "[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"]," \
	"[\"type\",\"demo.task\"],[\"op\",\"" op "\"]"

static void test_valid_create(void **state)
{
	struct artifact_envelope env;
	struct comb_event ev;

	(void)state;
	accepted("[" BASE("create") ",[\"title\",\"Fix it\"],[\"status\",\"open\"],"
		 "[\"root\",\"" ROOT "\"]]", "body", &env, &ev);
	assert_int_equal(env.op, ARTIFACT_CREATE);
	assert_string_equal(env.d, D);
	assert_string_equal(env.h, H);
	assert_string_equal(env.type, "demo.task");
	assert_string_equal(env.title, "Fix it");
	assert_string_equal(env.root, ROOT);
	assert_null(env.prev);
	comb_event_release(&ev);
}

static void test_valid_edits(void **state)
{
	static const char *const ops[] = {"update", "move", "restore"};
	static const enum artifact_op want[] = {ARTIFACT_UPDATE, ARTIFACT_MOVE,
						ARTIFACT_RESTORE};
	struct artifact_envelope env;
	struct comb_event ev;
	char tags[1024];
	size_t i;

	(void)state;
	for (i = 0; i < 3; i++) {
		snprintf(tags, sizeof(tags),
			 "[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"],"
			 "[\"type\",\"demo.task\"],[\"op\",\"%s\"],[\"prev\",\"" PREV "\"],"
			 "[\"title\",\"t\"]]", ops[i]);
		accepted(tags, "", &env, &ev);
		assert_int_equal(env.op, want[i]);
		assert_string_equal(env.prev, PREV);
		assert_null(env.root);
		assert_string_equal(artifact_op_name(env.op), ops[i]);
		comb_event_release(&ev);
	}
	/* A delete: no title, empty content, envelope tags only (root kept). */
	accepted("[" BASE("delete") ",[\"prev\",\"" PREV "\"],[\"root\",\"" ROOT "\"]]",
		 "", &env, &ev);
	assert_int_equal(env.op, ARTIFACT_DELETE);
	assert_null(env.title);
	comb_event_release(&ev);
}

static void test_required_tags(void **state)
{
	(void)state;
	refused("[[\"d\",\"" D "\"],[\"h\",\"" H "\"],[\"type\",\"a.b\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "", "missing ar tag");
	refused("[[\"ar\",\"2\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"],[\"type\",\"a.b\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "", "ar must be 1");
	refused("[[\"ar\",\"1\"],[\"h\",\"" H "\"],[\"type\",\"a.b\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "", "missing d tag");
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"type\",\"a.b\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "", "missing h tag");
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "", "missing type tag");
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"],[\"type\",\"a.b\"],"
		"[\"title\",\"t\"]]", "", "missing op tag");
	refused("[" BASE("create") "]", "", "missing title tag");
}

static void test_identifiers(void **state)
{
	(void)state;
	refused("[[\"ar\",\"1\"],[\"d\",\"00000000-0000-0000-0000-000000000000\"],"
		"[\"h\",\"" H "\"],[\"type\",\"a.b\"],[\"op\",\"create\"],[\"title\",\"t\"]]",
		"", "d must be a canonical non-nil uuid");
	refused("[[\"ar\",\"1\"],[\"d\",\"5A0F2F6E-3C1B-4A9E-8F7D-2B6C1E0D9A84\"],"
		"[\"h\",\"" H "\"],[\"type\",\"a.b\"],[\"op\",\"create\"],[\"title\",\"t\"]]",
		"", "d must be a canonical non-nil uuid");
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"general\"],"
		"[\"type\",\"a.b\"],[\"op\",\"create\"],[\"title\",\"t\"]]",
		"", "h must be a canonical channel uuid");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"root\",\"" ROOT "0\"]]", "",
		"root must be 64 lowercase hex characters");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"root\","
		"\"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB\"]]", "",
		"root must be 64 lowercase hex characters");
	refused("[" BASE("update") ",[\"title\",\"t\"],[\"prev\",\"xyz\"]]", "",
		"prev must be 64 lowercase hex characters");
}

static void test_type_grammar(void **state)
{
	static const char *const good[] = {
		"demo.task", "a.b", "a1.b_c-d.e9", "x.y.z",
	};
	static const char *const bad[] = {
		"demo", "Demo.task", "demo.Task", "1demo.task", "demo.1task",
		"demo..task", ".demo.task", "demo.task.", "demo._task",
		"demo.ta sk", "", "demo.-task",
	};
	char longest[200];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!artifact_type_is_valid(good[i]))
			fail_msg("refused type \"%s\"", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (artifact_type_is_valid(bad[i]))
			fail_msg("accepted type \"%s\"", bad[i]);
	/* 128 bytes is the most. */
	memset(longest, 'a', sizeof(longest));
	longest[1] = '.';
	longest[128] = '\0';
	assert_true(artifact_type_is_valid(longest));
	longest[128] = 'a';
	longest[129] = '\0';
	assert_false(artifact_type_is_valid(longest));
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\"],[\"h\",\"" H "\"],[\"type\",\"task\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "",
		"type must be dot-separated lowercase components of at most 128 bytes");
}

static void test_op_and_prev(void **state)
{
	(void)state;
	refused("[" BASE("rename") ",[\"title\",\"t\"]]", "",
		"op must be create, update, move, delete or restore");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"prev\",\"" PREV "\"]]", "",
		"create must not have a prev tag");
	refused("[" BASE("update") ",[\"title\",\"t\"]]", "", "update needs a prev tag");
	refused("[" BASE("move") ",[\"title\",\"t\"]]", "", "move needs a prev tag");
	refused("[" BASE("delete") "]", "", "delete needs a prev tag");
	refused("[" BASE("restore") ",[\"title\",\"t\"]]", "", "restore needs a prev tag");
}

static void test_once_and_arity(void **state)
{
	(void)state;
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"d\",\"" D "\"]]", "",
		"duplicate d tag");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"title\",\"u\"]]", "",
		"duplicate title tag");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"ar\",\"1\"]]", "",
		"duplicate ar tag");
	refused("[[\"ar\",\"1\"],[\"d\",\"" D "\",\"x\"],[\"h\",\"" H "\"],[\"type\",\"a.b\"],"
		"[\"op\",\"create\"],[\"title\",\"t\"]]", "",
		"d tag must have exactly two elements");
	refused("[" BASE("create") ",[\"title\"]]", "",
		"title tag must have exactly two elements");
	refused("[" BASE("create") ",[\"title\",\"t\"],[\"root\"]]", "",
		"root tag must have exactly two elements");
	/* Client tags may repeat and have any arity. */
	{
		struct artifact_envelope env;
		struct comb_event ev;

		accepted("[" BASE("create") ",[\"title\",\"t\"],[\"x\"],[\"x\",\"1\",\"2\"],"
			 "[\"x\",\"3\"]]", "", &env, &ev);
		comb_event_release(&ev);
	}
}

static void test_title(void **state)
{
	char tags[1200], title[600];

	(void)state;
	refused("[" BASE("create") ",[\"title\",\"\"]]", "", "title must not be blank");
	refused("[" BASE("create") ",[\"title\",\" \\t\\n \"]]", "",
		"title must not be blank");
	memset(title, 'x', sizeof(title));
	title[513] = '\0';
	snprintf(tags, sizeof(tags), "[" BASE("create") ",[\"title\",\"%s\"]]", title);
	refused(tags, "", "title longer than 512 bytes");
	title[512] = '\0';
	snprintf(tags, sizeof(tags), "[" BASE("create") ",[\"title\",\"%s\"]]", title);
	{
		struct artifact_envelope env;
		struct comb_event ev;

		accepted(tags, "", &env, &ev);
		comb_event_release(&ev);
	}
}

static void test_delete_form(void **state)
{
	(void)state;
	refused("[" BASE("delete") ",[\"prev\",\"" PREV "\"],[\"title\",\"t\"]]", "",
		"delete must not have a title");
	refused("[" BASE("delete") ",[\"prev\",\"" PREV "\"]]", "x",
		"delete must have empty content");
	refused("[" BASE("delete") ",[\"prev\",\"" PREV "\"],[\"status\",\"done\"]]", "",
		"delete carries only envelope tags");
}

static void test_sizes(void **state)
{
	struct comb_buf b;
	char *big;
	int i;

	(void)state;
	big = malloc(5000);
	assert_non_null(big);
	memset(big, 'n', 129);
	big[129] = '\0';
	comb_buf_init(&b, 1 << 20);
	comb_buf_printf(&b, "[" BASE("create") ",[\"title\",\"t\"],[\"%s\",\"v\"]]", big);
	refused(b.data, "", "tag name longer than 128 bytes");
	big[128] = '\0';
	comb_buf_reset(&b);
	comb_buf_printf(&b, "[" BASE("create") ",[\"title\",\"t\"],[\"%s\",\"v\"]]", big);
	{
		struct artifact_envelope env;
		struct comb_event ev;

		accepted(b.data, "", &env, &ev);
		comb_event_release(&ev);
	}
	memset(big, 'v', 4097);
	big[4097] = '\0';
	comb_buf_reset(&b);
	comb_buf_printf(&b, "[" BASE("create") ",[\"title\",\"t\"],[\"x\",\"%s\"]]", big);
	refused(b.data, "", "tag value longer than 4096 bytes");
	/* Later elements count as values too. */
	comb_buf_reset(&b);
	comb_buf_printf(&b, "[" BASE("create") ",[\"title\",\"t\"],[\"x\",\"a\",\"%s\"]]", big);
	refused(b.data, "", "tag value longer than 4096 bytes");
	/* 17 values of 4096 bytes: over 65536 in all. */
	big[4096] = '\0';
	comb_buf_reset(&b);
	comb_buf_puts(&b, "[" BASE("create") ",[\"title\",\"t\"]");
	for (i = 0; i < 17; i++)
		comb_buf_printf(&b, ",[\"x\",\"%s\"]", big);
	comb_buf_puts(&b, "]");
	refused(b.data, "", "tags longer than 65536 bytes in all");
	comb_buf_release(&b);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_create),
		cmocka_unit_test(test_valid_edits),
		cmocka_unit_test(test_required_tags),
		cmocka_unit_test(test_identifiers),
		cmocka_unit_test(test_type_grammar),
		cmocka_unit_test(test_op_and_prev),
		cmocka_unit_test(test_once_and_arity),
		cmocka_unit_test(test_title),
		cmocka_unit_test(test_delete_form),
		cmocka_unit_test(test_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
