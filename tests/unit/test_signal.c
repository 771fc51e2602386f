/*
 * Unit tests for the signal codec: msgpack round trips of every signal
 * type, refusal of every truncation, of garbage, of malformed and
 * over-size input, forward-compatible skipping of unknown keys and types,
 * the NUL-terminated topics, and the NOTIFY text parser.
 */
#include "test_util.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

#include <msgpack.h>

#include "comb/error.h"
#include "comb/signal.h"
#include "comb/uuid.h"

#define CH "0b4f9c3e-5d2a-4e8b-9f1c-2a3b4c5d6e7f"
#define CH2 "0b4f9c3e-5d2a-4e8b-9f1c-2a3b4c5d6e70"
#define DD "11111111-2222-4333-8444-555555555555"
#define PK "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
#define ID "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"

static void fill(struct comb_signal *s, unsigned int type)
{
	memset(s, 0, sizeof(*s));
	s->epoch = 0x8badf00ddeadbeefULL;
	s->seq = 42;
	s->community = 7;
	s->type = type;
	s->xid = 123456789012ULL;
	s->lsn = 0x16B374D848ULL;
	switch (type) {
	case COMB_SIGNAL_HEAD:
	case COMB_SIGNAL_MOVE:
		memcpy(s->channel, CH, sizeof(CH));
		memcpy(s->d, DD, sizeof(DD));
		memcpy(s->id, ID, sizeof(ID));
		break;
	case COMB_SIGNAL_REDACTION:
		memcpy(s->channel, CH, sizeof(CH));
		memcpy(s->d, DD, sizeof(DD));
		memcpy(s->id, ID, sizeof(ID));
		break;
	case COMB_SIGNAL_MEMBER:
		memcpy(s->channel, CH, sizeof(CH));
		memcpy(s->pubkey, PK, sizeof(PK));
		break;
	case COMB_SIGNAL_CHANNEL:
		memcpy(s->channel, CH, sizeof(CH));
		break;
	case COMB_SIGNAL_EVENT:
		memcpy(s->channel, CH, sizeof(CH));
		memcpy(s->pubkey, PK, sizeof(PK));
		memcpy(s->id, ID, sizeof(ID));
		s->kind = 9;
		break;
	case COMB_SIGNAL_EPHEMERAL:
		memcpy(s->channel, CH, sizeof(CH));
		s->xid = 0;
		s->lsn = 0;
		s->payload = (const unsigned char *)"{\"kind\":20001}";
		s->payload_len = strlen((const char *)s->payload);
		break;
	default:
		s->xid = 0;
		s->lsn = 0;
		s->seq = 0;
		s->community = 0;
		break;
	}
}

static void assert_signal_equal(const struct comb_signal *a,
				const struct comb_signal *b)
{
	assert_true(a->epoch == b->epoch);
	assert_true(a->seq == b->seq);
	assert_true(a->community == b->community);
	assert_int_equal(a->type, b->type);
	assert_true(a->xid == b->xid);
	assert_true(a->lsn == b->lsn);
	assert_int_equal(a->kind, b->kind);
	assert_string_equal(a->channel, b->channel);
	assert_string_equal(a->d, b->d);
	assert_string_equal(a->pubkey, b->pubkey);
	assert_string_equal(a->id, b->id);
	assert_bytes_equal(a->payload, a->payload_len, b->payload, b->payload_len);
}

static void encode_ok(const struct comb_signal *s, struct comb_buf *buf)
{
	char err[128] = "";
	int rc;

	comb_buf_init(buf, COMB_SIGNAL_MAX_SIZE);
	rc = comb_signal_encode(s, buf, err, sizeof(err));
	if (rc)
		fprintf(stderr, "encode: %s\n", err);
	assert_int_equal(rc, 0);
}

static void test_roundtrip_every_type(void **state)
{
	struct comb_signal in, out;
	struct comb_buf buf;
	char err[128];
	unsigned int type;

	(void)state;
	for (type = COMB_SIGNAL_HEARTBEAT; type <= COMB_SIGNAL_EPHEMERAL; type++) {
		fill(&in, type);
		encode_ok(&in, &buf);
		assert_int_equal(comb_signal_decode(buf.data, buf.len, &out, err,
						    sizeof(err)), 0);
		assert_signal_equal(&in, &out);
		if (in.d[0]) {
			/* d's bytes come parsed */
			uint8_t d[16];

			assert_int_equal(comb_uuid_parse(in.d, d), 0);
			assert_memory_equal(out.d_bytes, d, 16);
		}
		if (type == COMB_SIGNAL_EPHEMERAL)
			/* the payload is borrowed from the input bytes */
			assert_true(out.payload > (const unsigned char *)buf.data &&
				    out.payload < (const unsigned char *)buf.data + buf.len);
		comb_buf_release(&buf);
	}

	/* a mark: a heartbeat for one community repeats its last seq */
	fill(&in, COMB_SIGNAL_HEARTBEAT);
	in.community = INT64_MAX;
	in.seq = UINT64_MAX;
	encode_ok(&in, &buf);
	assert_int_equal(comb_signal_decode(buf.data, buf.len, &out, err,
					    sizeof(err)), 0);
	assert_signal_equal(&in, &out);
	comb_buf_release(&buf);

	/* largest allowed payload */
	fill(&in, COMB_SIGNAL_EPHEMERAL);
	in.payload_len = COMB_SIGNAL_MAX_PAYLOAD;
	in.payload = calloc(1, in.payload_len);
	assert_non_null(in.payload);
	encode_ok(&in, &buf);
	assert_true(buf.len <= COMB_SIGNAL_MAX_SIZE);
	assert_int_equal(comb_signal_decode(buf.data, buf.len, &out, err,
					    sizeof(err)), 0);
	assert_signal_equal(&in, &out);
	comb_buf_release(&buf);
	free((void *)in.payload);
}

static void test_type_names(void **state)
{
	(void)state;
	assert_string_equal(comb_signal_type_name(COMB_SIGNAL_HEAD), "head");
	assert_string_equal(comb_signal_type_name(COMB_SIGNAL_MEMBER), "member");
	assert_string_equal(comb_signal_type_name(COMB_SIGNAL_EPHEMERAL), "ephemeral");
	assert_string_equal(comb_signal_type_name(40), "unknown");
}

static void test_truncation_at_every_byte(void **state)
{
	struct comb_signal in, out;
	struct comb_buf buf;
	unsigned int type;
	char err[128];
	size_t n;

	(void)state;
	for (type = COMB_SIGNAL_HEARTBEAT; type <= COMB_SIGNAL_EPHEMERAL; type++) {
		fill(&in, type);
		encode_ok(&in, &buf);
		for (n = 0; n < buf.len; n++) {
			/* a copy of exactly n bytes, so ASan sees any overread */
			unsigned char *copy = malloc(n ? n : 1);

			assert_non_null(copy);
			memcpy(copy, buf.data, n);
			err[0] = '\0';
			assert_int_equal(comb_signal_decode(copy, n, &out, err,
							    sizeof(err)), COMB_EINVAL);
			assert_true(err[0] != '\0');
			assert_int_equal(out.type, 0);
			assert_true(out.epoch == 0);
			free(copy);
		}
		comb_buf_release(&buf);
	}
}

/* A deterministic generator for garbage. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_garbage(void **state)
{
	struct comb_signal in, out;
	unsigned char *bytes;
	struct comb_buf buf;
	char err[128];
	int i;

	(void)state;
	for (i = 0; i < 20000; i++) {
		size_t n = (size_t)(rng() % 200) + 1, k;
		int rc;

		bytes = malloc(n);
		assert_non_null(bytes);
		for (k = 0; k < n; k++)
			bytes[k] = (unsigned char)rng();
		rc = comb_signal_decode(bytes, n, &out, err, sizeof(err));
		assert_true(rc == 0 || rc == COMB_EINVAL);
		if (rc == 0)
			assert_int_equal(comb_signal_check(&out, err, sizeof(err)), 0);
		free(bytes);
	}

	/* every single-byte change of a valid signal decodes or is refused */
	fill(&in, COMB_SIGNAL_EVENT);
	encode_ok(&in, &buf);
	for (i = 0; i < (int)buf.len * 256; i++) {
		size_t at = (size_t)i / 256;
		unsigned char *copy = malloc(buf.len);
		int rc;

		assert_non_null(copy);
		memcpy(copy, buf.data, buf.len);
		copy[at] = (unsigned char)(i % 256);
		rc = comb_signal_decode(copy, buf.len, &out, err, sizeof(err));
		assert_true(rc == 0 || rc == COMB_EINVAL);
		free(copy);
	}
	comb_buf_release(&buf);
	assert_int_equal(comb_signal_decode(NULL, 0, &out, err, sizeof(err)),
			 COMB_EINVAL);
}

/* Packs a map through msgpack-c for hand-made inputs. */
struct packed {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

static void packed_init(struct packed *p)
{
	msgpack_sbuffer_init(&p->sb);
	msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void put_key(struct packed *p, const char *k)
{
	msgpack_pack_str(&p->pk, strlen(k));
	msgpack_pack_str_body(&p->pk, k, strlen(k));
}

static void put_uint(struct packed *p, const char *k, uint64_t v)
{
	put_key(p, k);
	msgpack_pack_uint64(&p->pk, v);
}

static void put_str(struct packed *p, const char *k, const char *v)
{
	put_key(p, k);
	msgpack_pack_str(&p->pk, strlen(v));
	msgpack_pack_str_body(&p->pk, v, strlen(v));
}

static const char big_zeros[512];

static int decode_packed(struct packed *p, struct comb_signal *out)
{
	char err[128];
	int rc = comb_signal_decode(p->sb.data, p->sb.size, out, err, sizeof(err));

	msgpack_sbuffer_destroy(&p->sb);
	return rc;
}

static void test_unknown_keys_and_types(void **state)
{
	struct comb_signal out;
	struct packed p;

	(void)state;
	/* unknown keys of any shape are skipped */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 9);
	put_uint(&p, "e", 5);
	put_key(&p, "future");
	msgpack_pack_array(&p.pk, 2);
	msgpack_pack_map(&p.pk, 1);
	put_uint(&p, "x", 1);
	msgpack_pack_double(&p.pk, 1.5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 3);
	msgpack_pack_int(&p.pk, -4); /* a non-string key */
	msgpack_pack_nil(&p.pk);
	put_uint(&p, "t", COMB_SIGNAL_CHANNEL);
	put_uint(&p, "x", 99);
	put_str(&p, "h", CH);
	put_str(&p, "zz", "anything");
	assert_int_equal(decode_packed(&p, &out), 0);
	assert_int_equal(out.type, COMB_SIGNAL_CHANNEL);
	assert_true(out.community == 3 && out.seq == 1 && out.xid == 99);
	assert_string_equal(out.channel, CH);

	/* ext values (the type byte follows the length) are skipped too */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 7);
	put_key(&p, "x1");
	msgpack_pack_ext(&p.pk, 3, 9);
	msgpack_pack_ext_body(&p.pk, "abc", 3);
	put_key(&p, "x2");
	msgpack_pack_ext(&p.pk, 1, -1); /* fixext 1 */
	msgpack_pack_ext_body(&p.pk, "z", 1);
	put_key(&p, "x3");
	msgpack_pack_ext(&p.pk, 300, 2); /* ext16 */
	msgpack_pack_ext_body(&p.pk, big_zeros, 300);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 0);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), 0);
	assert_int_equal(out.type, COMB_SIGNAL_HEARTBEAT);

	/* a type this build does not know passes with its seq */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 5);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 8);
	put_uint(&p, "c", 3);
	put_uint(&p, "t", 40);
	put_str(&p, "h", CH);
	assert_int_equal(decode_packed(&p, &out), 0);
	assert_int_equal(out.type, 40);
	assert_true(out.seq == 8);
	assert_string_equal(comb_signal_type_name(out.type), "unknown");

	/* ... but it must still count in the sequence */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 3);
	put_uint(&p, "t", 40);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
}

static void test_malformed(void **state)
{
	struct comb_signal out;
	struct packed p;
	char err[128];
	static const unsigned char array32_huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
	static const unsigned char map32_huge[] = {0xdf, 0x7f, 0xff, 0xff, 0xff};
	static const unsigned char str32_huge[] = {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'e'};
	static const unsigned char never_used[] = {0x81, 0xa1, 'e', 0xc1};
	/* found by fuzz_signal: an ext8 whose length was read from its type
	 * byte let an array32 count through to msgpack-c */
	static const unsigned char ext_then_array32[] = {
		0x86, 0xa1, 0x65, 0xc7, 0x00, 0x02, 0xdd, 0x9c, 0x00, 0xfe,
		0x6e, 0x6e, 0x65, 0x6c, 0x65, 0x60, 0x32, 0x66};
	unsigned char deep[64];
	size_t i;

	(void)state;
	assert_int_equal(comb_signal_decode(array32_huge, sizeof(array32_huge),
					    &out, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_signal_decode(map32_huge, sizeof(map32_huge),
					    &out, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_signal_decode(str32_huge, sizeof(str32_huge),
					    &out, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_signal_decode(never_used, sizeof(never_used),
					    &out, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_signal_decode(ext_then_array32, sizeof(ext_then_array32),
					    &out, err, sizeof(err)), COMB_EINVAL);
	for (i = 0; i < sizeof(deep) - 1; i++)
		deep[i] = 0x91; /* [[[[...]]]] */
	deep[sizeof(deep) - 1] = 0xc0;
	assert_int_equal(comb_signal_decode(deep, sizeof(deep), &out, err,
					    sizeof(err)), COMB_EINVAL);

	/* not a map */
	packed_init(&p);
	msgpack_pack_array(&p.pk, 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* trailing bytes after a valid signal */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 0);
	put_uint(&p, "t", 0);
	msgpack_pack_nil(&p.pk);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* a repeated key */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 5);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 0);
	put_uint(&p, "t", 0);
	put_uint(&p, "e", 6);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* a missing required key */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 3);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* a known key with the wrong type, or out of range */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_str(&p, "e", "5");
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 0);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_key(&p, "c");
	msgpack_pack_int64(&p.pk, -3);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", (uint64_t)INT64_MAX + 1);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 1);
	put_uint(&p, "t", COMB_SIGNAL_TYPE_LIMIT + 1);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* field syntax: uppercase uuid, short pubkey, NUL inside, payload as str */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 6);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 1);
	put_uint(&p, "t", COMB_SIGNAL_CHANNEL);
	put_uint(&p, "x", 1);
	put_str(&p, "h", "0B4F9C3E-5D2A-4E8B-9F1C-2A3B4C5D6E7F");
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 7);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 1);
	put_uint(&p, "t", COMB_SIGNAL_MEMBER);
	put_uint(&p, "x", 1);
	put_str(&p, "h", CH);
	put_str(&p, "p", "abcd");
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 6);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 1);
	put_uint(&p, "t", COMB_SIGNAL_EPHEMERAL);
	put_str(&p, "h", CH);
	put_str(&p, "b", "{}");
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
	packed_init(&p);
	msgpack_pack_map(&p.pk, 5);
	put_uint(&p, "e", 5);
	put_uint(&p, "s", 1);
	put_uint(&p, "c", 1);
	put_uint(&p, "t", COMB_SIGNAL_CHANNEL);
	put_key(&p, "h");
	msgpack_pack_str(&p.pk, 36);
	msgpack_pack_str_body(&p.pk, "0b4f9c3e-5d2a-4e8b-9f1c-2a3b4c5d6e7\0", 36);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);

	/* epoch 0 is never valid */
	packed_init(&p);
	msgpack_pack_map(&p.pk, 4);
	put_uint(&p, "e", 0);
	put_uint(&p, "s", 0);
	put_uint(&p, "c", 0);
	put_uint(&p, "t", 0);
	assert_int_equal(decode_packed(&p, &out), COMB_EINVAL);
}

static void test_type_rules(void **state)
{
	struct comb_signal s;
	struct comb_buf buf;
	char err[128];

	(void)state;
	comb_buf_init(&buf, COMB_SIGNAL_MAX_SIZE);

	fill(&s, COMB_SIGNAL_HEAD);
	s.d[0] = '\0';
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);
	assert_string_equal(err, "head signal needs d");

	fill(&s, COMB_SIGNAL_MEMBER);
	s.payload = (const unsigned char *)"x";
	s.payload_len = 1;
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);
	assert_string_equal(err, "member signal has no payload");

	fill(&s, COMB_SIGNAL_CHANNEL);
	s.seq = 0;
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);

	fill(&s, COMB_SIGNAL_HEARTBEAT);
	s.seq = 3; /* the liveness heartbeat has no seq */
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);
	s.channel[0] = 'x';
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);

	fill(&s, COMB_SIGNAL_EVENT);
	s.channel[0] = '\0'; /* an event without channel is fine */
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), 0);
	s.id[0] = '\0';
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);

	fill(&s, COMB_SIGNAL_EPHEMERAL);
	s.payload = NULL;
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_EINVAL);

	fill(&s, COMB_SIGNAL_HEAD);
	s.community = -1;
	assert_int_equal(comb_signal_check(&s, err, sizeof(err)), COMB_EINVAL);
	fill(&s, COMB_SIGNAL_HEAD);
	s.epoch = 0;
	assert_int_equal(comb_signal_check(&s, err, sizeof(err)), COMB_EINVAL);
	comb_buf_release(&buf);
}

static void test_oversize(void **state)
{
	struct comb_signal s, out;
	struct comb_buf buf, small;
	unsigned char *big;
	char err[128];

	(void)state;
	big = calloc(1, COMB_SIGNAL_MAX_SIZE + 16);
	assert_non_null(big);

	fill(&s, COMB_SIGNAL_EPHEMERAL);
	s.payload = big;
	s.payload_len = COMB_SIGNAL_MAX_PAYLOAD + 1;
	comb_buf_init(&buf, 2 * COMB_SIGNAL_MAX_SIZE);
	assert_int_equal(comb_signal_encode(&s, &buf, err, sizeof(err)), COMB_ETOOBIG);
	comb_buf_release(&buf);

	/* the output buffer's maximum is respected */
	fill(&s, COMB_SIGNAL_EPHEMERAL);
	comb_buf_init(&small, 20);
	assert_int_equal(comb_signal_encode(&s, &small, err, sizeof(err)), COMB_ETOOBIG);
	assert_true(small.len <= 20);
	comb_buf_release(&small);

	/* input over the limit is refused before it is looked at */
	assert_int_equal(comb_signal_decode(big, COMB_SIGNAL_MAX_SIZE + 1, &out,
					    err, sizeof(err)), COMB_ETOOBIG);

	/* a well-formed map whose payload is over the limit */
	{
		struct packed p;

		packed_init(&p);
		msgpack_pack_map(&p.pk, 5);
		put_uint(&p, "e", 5);
		put_uint(&p, "s", 1);
		put_uint(&p, "c", 1);
		put_uint(&p, "t", COMB_SIGNAL_EPHEMERAL);
		put_key(&p, "b");
		msgpack_pack_bin(&p.pk, COMB_SIGNAL_MAX_PAYLOAD + 100);
		msgpack_pack_bin_body(&p.pk, big, COMB_SIGNAL_MAX_PAYLOAD + 100);
		assert_true(p.sb.size <= COMB_SIGNAL_MAX_SIZE);
		assert_int_equal(comb_signal_decode(p.sb.data, p.sb.size, &out,
						    err, sizeof(err)), COMB_ETOOBIG);
		msgpack_sbuffer_destroy(&p.sb);
	}
	free(big);
}

static void test_topics(void **state)
{
	struct comb_signal s;
	char topic[COMB_SIGNAL_TOPIC_MAX], small[8];
	size_t len;

	(void)state;
	fill(&s, COMB_SIGNAL_HEARTBEAT);
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), 0);
	assert_bytes_equal(topic, len, "hb", 3);

	s.community = 70; /* a mark */
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), 0);
	assert_bytes_equal(topic, len, "70:*", 5);

	fill(&s, COMB_SIGNAL_MEMBER);
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), 0);
	assert_bytes_equal(topic, len, "7:" CH, sizeof("7:" CH));
	/* a subscription to the community prefix matches, another community's
	 * prefix or another channel's full topic does not */
	assert_memory_equal(topic, "7:", 2);
	assert_true(memcmp(topic, "70:", 3) != 0);
	assert_true(memcmp(topic, "7:" CH2, sizeof("7:" CH2)) != 0);

	fill(&s, COMB_SIGNAL_EVENT);
	s.channel[0] = '\0';
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), 0);
	assert_bytes_equal(topic, len, "7:*", 4);

	s.community = INT64_MAX;
	memcpy(s.channel, CH, sizeof(CH));
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), 0);
	assert_true(len <= COMB_SIGNAL_TOPIC_MAX);
	assert_int_equal(comb_signal_topic(&s, small, sizeof(small), &len), COMB_EINVAL);
	s.community = -1;
	assert_int_equal(comb_signal_topic(&s, topic, sizeof(topic), &len), COMB_EINVAL);
}

static void test_parse_notify(void **state)
{
	struct comb_signal s;
	char err[128], line[COMB_SIGNAL_NOTIFY_MAX + 8];
	static const char *bad[] = {
		"",
		"head 7 " CH " 55 " DD " - -",                 /* 7 fields */
		"head 7 " CH " 55 " DD " - - 0 0",             /* 9 fields */
		"head 7 " CH " 55  " DD " - - 0",              /* double space */
		"head 7 " CH " 55 " DD " - - 0 ",              /* trailing space */
		"head 07 " CH " 55 " DD " - - 0",              /* leading zero */
		"head 0 " CH " 55 " DD " - - 0",               /* community 0 */
		"head -7 " CH " 55 " DD " - - 0",
		"head 9223372036854775808 " CH " 55 " DD " - - 0",
		"head 7 " CH " 18446744073709551616 " DD " - - 0",
		"head 7 " CH " 55 - - - 0",                    /* no d */
		"head 7 " CH " 0 " DD " - - 0",                /* no xid */
		"Head 7 " CH " 55 " DD " - - 0",
		"heartbeat 7 - 0 - - - 0",
		"ephemeral 7 " CH " 0 - - - 0",
		"member 7 " CH " 55 - - - 0",                  /* no pubkey */
		"member 7 " CH " 55 - " PK "0 - 0",
		"channel 7 0b4f9c3e-5d2a-4e8b-9f1c-2a3b4c5d6e7 55 - - - 0",
		"event 7 - 55 - - " ID " 4294967296",
		"bogus 7 " CH " 55 - - - 0",
	};
	size_t i;

	(void)state;
	assert_int_equal(comb_signal_parse_notify("head 7 " CH " 55 " DD " - " ID " 0",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_HEAD);
	assert_true(s.community == 7 && s.xid == 55 && s.seq == 0 && s.epoch == 0);
	assert_string_equal(s.channel, CH);
	assert_string_equal(s.d, DD);
	assert_string_equal(s.id, ID);
	assert_string_equal(s.pubkey, "");

	assert_int_equal(comb_signal_parse_notify("move 7 " CH " 56 " DD " - " ID " 0",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_MOVE);
	assert_int_equal(comb_signal_parse_notify("redaction 7 " CH " 57 " DD " - " ID " 0",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_REDACTION);
	assert_int_equal(comb_signal_parse_notify("member 12 " CH " 58 - " PK " - 0",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_MEMBER);
	assert_string_equal(s.pubkey, PK);
	assert_int_equal(comb_signal_parse_notify("channel 12 " CH " 18446744073709551615 - - - 0",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_CHANNEL);
	assert_true(s.xid == UINT64_MAX);
	assert_int_equal(comb_signal_parse_notify("event 9223372036854775807 - 59 - " PK " " ID " 9",
						  &s, err, sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_EVENT);
	assert_true(s.community == INT64_MAX);
	assert_int_equal(s.kind, 9);
	assert_string_equal(s.channel, "");

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (comb_signal_parse_notify(bad[i], &s, err, sizeof(err)) != COMB_EINVAL) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			fail();
		}
		assert_true(err[0] != '\0');
		assert_int_equal(s.type, 0);
	}
	assert_int_equal(comb_signal_parse_notify(NULL, &s, err, sizeof(err)),
			 COMB_EINVAL);
	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	assert_int_equal(comb_signal_parse_notify(line, &s, err, sizeof(err)),
			 COMB_EINVAL);
}

static void test_parse_ephemeral(void **state)
{
	static const char ok[] = "12:" CH ":{\"kind\":20001}";
	static const char *bad[] = {
		"", "12", "12:", ":" CH ":{}", "012:" CH ":{}", "0:" CH ":{}",
		"-1:" CH ":{}", "12:" CH, "12:" CH ":", "12:" CH "{}",
		"12:0B4F9C3E-5D2A-4E8B-9F1C-2A3B4C5D6E7F:{}",
		"12:00000000-0000-0000-0000-000000000000:{}",
		"99999999999999999999:" CH ":{}",
	};
	struct comb_signal s;
	char err[128], *big;
	size_t i, n;

	(void)state;
	assert_int_equal(comb_signal_parse_ephemeral(ok, strlen(ok), &s, err,
						     sizeof(err)), 0);
	assert_int_equal(s.type, COMB_SIGNAL_EPHEMERAL);
	assert_true(s.community == 12);
	assert_string_equal(s.channel, CH);
	assert_bytes_equal(s.payload, s.payload_len, "{\"kind\":20001}", 14);
	assert_ptr_equal(s.payload, ok + 3 + 36 + 1);
	s.epoch = 1;
	s.seq = 1;
	assert_int_equal(comb_signal_check(&s, err, sizeof(err)), 0);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (comb_signal_parse_ephemeral(bad[i], strlen(bad[i]), &s, err,
						sizeof(err)) != COMB_EINVAL) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			fail();
		}
		assert_int_equal(s.type, 0);
	}
	/* every truncation of a valid message is refused, never overread */
	for (n = 0; n < 3 + 36 + 2; n++) {
		char *copy = malloc(n ? n : 1);

		assert_non_null(copy);
		memcpy(copy, ok, n);
		assert_int_equal(comb_signal_parse_ephemeral(copy, n, &s, err,
							     sizeof(err)), COMB_EINVAL);
		free(copy);
	}
	n = 3 + 36 + 1 + COMB_SIGNAL_MAX_PAYLOAD + 1;
	big = malloc(n);
	assert_non_null(big);
	memcpy(big, ok, 40);
	memset(big + 40, 'x', n - 40);
	assert_int_equal(comb_signal_parse_ephemeral(big, n, &s, err, sizeof(err)),
			 COMB_ETOOBIG);
	assert_int_equal(comb_signal_parse_ephemeral(big, n - 1, &s, err, sizeof(err)),
			 0);
	free(big);
}

/* The channel names the Redis database: pub/sub itself ignores it. */
static void test_ephemeral_channel(void **state)
{
	char ch[COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX];

	(void)state;
	comb_signal_ephemeral_channel(0, ch);
	assert_string_equal(ch, "comb:ephemeral:0");
	comb_signal_ephemeral_channel(15, ch);
	assert_string_equal(ch, "comb:ephemeral:15");
	comb_signal_ephemeral_channel(INT_MAX, ch);
	assert_string_equal(ch, "comb:ephemeral:2147483647");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_every_type),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_truncation_at_every_byte),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_unknown_keys_and_types),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_type_rules),
		cmocka_unit_test(test_oversize),
		cmocka_unit_test(test_topics),
		cmocka_unit_test(test_parse_notify),
		cmocka_unit_test(test_parse_ephemeral),
		cmocka_unit_test(test_ephemeral_channel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
