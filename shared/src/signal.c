/*
 * The signal codec: msgpack encoding and decoding of the change signals
 * comb-capture publishes (with msgpack-c), their ZeroMQ topics, and the
 * NOTIFY text the database triggers send to capture.
 *
 * Decoding is for untrusted bytes: before msgpack-c builds any object, a
 * small walker checks the whole input structurally (every length inside
 * the input, every container count no larger than the bytes left, bounded
 * depth and object count), because msgpack-c allocates a container's
 * elements from its announced count before reading them.
 */
#include "comb/signal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/uuid.h"

#define WALK_MAX_DEPTH 8
#define WALK_MAX_OBJECTS 1024

/* Fields, as bits of the required/allowed masks below. */
enum {
	F_COMMUNITY = 1 << 0,
	F_CHANNEL = 1 << 1,
	F_XID = 1 << 2,
	F_D = 1 << 3,
	F_PUBKEY = 1 << 4,
	F_ID = 1 << 5,
	F_KIND = 1 << 6,
	F_PAYLOAD = 1 << 7,
};

struct type_rule {
	const char *name;
	unsigned int required;
	unsigned int allowed; /* beyond required */
};

static const struct type_rule rules[] = {
	[COMB_SIGNAL_HEARTBEAT] = {"heartbeat", 0, F_COMMUNITY},
	[COMB_SIGNAL_HEAD] = {"head", F_COMMUNITY | F_CHANNEL | F_D | F_XID, F_ID},
	[COMB_SIGNAL_MOVE] = {"move", F_COMMUNITY | F_CHANNEL | F_D | F_XID, F_ID},
	[COMB_SIGNAL_REDACTION] = {"redaction",
				   F_COMMUNITY | F_CHANNEL | F_D | F_XID | F_ID, 0},
	[COMB_SIGNAL_MEMBER] = {"member",
				F_COMMUNITY | F_CHANNEL | F_PUBKEY | F_XID, 0},
	[COMB_SIGNAL_CHANNEL] = {"channel", F_COMMUNITY | F_CHANNEL | F_XID, 0},
	[COMB_SIGNAL_EVENT] = {"event", F_COMMUNITY | F_XID | F_ID | F_KIND,
			       F_CHANNEL | F_PUBKEY},
	[COMB_SIGNAL_EPHEMERAL] = {"ephemeral",
				   F_COMMUNITY | F_CHANNEL | F_PAYLOAD, 0},
	[COMB_SIGNAL_ADMIN] = {"admin", F_COMMUNITY | F_PUBKEY | F_XID, F_KIND},
};

#define KNOWN_TYPES (sizeof(rules) / sizeof(rules[0]))

const char *comb_signal_type_name(unsigned int type)
{
	return type < KNOWN_TYPES ? rules[type].name : "unknown";
}

static unsigned int present_fields(const struct comb_signal *s)
{
	unsigned int f = 0;

	if (s->community != 0)
		f |= F_COMMUNITY;
	if (s->channel[0])
		f |= F_CHANNEL;
	if (s->xid != 0)
		f |= F_XID;
	if (s->d[0])
		f |= F_D;
	if (s->pubkey[0])
		f |= F_PUBKEY;
	if (s->id[0])
		f |= F_ID;
	if (s->kind != 0)
		f |= F_KIND;
	if (s->payload_len != 0)
		f |= F_PAYLOAD;
	return f;
}

static const char *field_name(unsigned int bit)
{
	switch (bit) {
	case F_COMMUNITY: return "community";
	case F_CHANNEL: return "channel";
	case F_XID: return "xid";
	case F_D: return "d";
	case F_PUBKEY: return "pubkey";
	case F_ID: return "id";
	case F_KIND: return "kind";
	default: return "payload";
	}
}

static bool empty_or_uuid(const char *s)
{
	return s[0] == '\0' || comb_uuid_is_canonical(s);
}

static bool empty_or_hex64(const char *s)
{
	return s[0] == '\0' || (comb_hex_is_lower(s, 64) && s[64] == '\0');
}

/* The checks of comb_signal_check; sequenced says whether epoch and seq
 * are assigned yet (they are not in a parsed NOTIFY). */
static int check(const struct comb_signal *s, bool sequenced, char *errbuf,
		 size_t errlen)
{
	unsigned int have, bit;

	if (s->type > COMB_SIGNAL_TYPE_LIMIT)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal type %u is out of range", s->type);
	if (s->community < 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal community is negative");
	if (!empty_or_uuid(s->channel) || !empty_or_uuid(s->d))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal channel and d must be canonical uuids");
	if (!empty_or_hex64(s->pubkey) || !empty_or_hex64(s->id))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal pubkey and id must be 64 lowercase hex");
	if (s->payload_len > COMB_SIGNAL_MAX_PAYLOAD)
		return comb_fail(errbuf, errlen, COMB_ETOOBIG,
				 "signal payload is over %d bytes",
				 COMB_SIGNAL_MAX_PAYLOAD);
	if (s->payload_len != 0 && s->payload == NULL)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal payload is missing");
	if (sequenced && s->epoch == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal epoch is 0");
	if (s->type >= KNOWN_TYPES)
		return sequenced && s->seq == 0 ?
			comb_fail(errbuf, errlen, COMB_EINVAL,
				  "signal of type %u has no seq", s->type) : 0;

	have = present_fields(s);
	for (bit = 1; bit <= F_PAYLOAD; bit <<= 1) {
		if ((rules[s->type].required & bit) && !(have & bit))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s signal needs %s",
					 rules[s->type].name, field_name(bit));
		if ((have & bit) &&
		    !((rules[s->type].required | rules[s->type].allowed) & bit))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s signal has no %s",
					 rules[s->type].name, field_name(bit));
	}
	if (!sequenced)
		return 0;
	if (s->type == COMB_SIGNAL_HEARTBEAT) {
		if (s->community == 0 && s->seq != 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "liveness heartbeat has a seq");
	} else if (s->seq == 0) {
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s signal has no seq", rules[s->type].name);
	}
	return 0;
}

int comb_signal_check(const struct comb_signal *s, char *errbuf, size_t errlen)
{
	return check(s, true, errbuf, errlen);
}

/* ------------------------------------------------------------------ */
/* encoding */

/* Where msgpack-c writes: the output buffer and the first append error. */
struct sink {
	struct comb_buf *buf;
	int err;
};

static int write_sink(void *data, const char *buf, size_t len)
{
	struct sink *sink = data;
	int rc = comb_buf_append(sink->buf, buf, len);

	if (rc && !sink->err)
		sink->err = rc;
	return rc ? -1 : 0;
}

static int pack_key(msgpack_packer *pk, char key)
{
	if (msgpack_pack_str(pk, 1))
		return -1;
	return msgpack_pack_str_body(pk, &key, 1);
}

static int pack_uint(msgpack_packer *pk, char key, uint64_t v)
{
	if (pack_key(pk, key))
		return -1;
	return msgpack_pack_uint64(pk, v);
}

static int pack_text(msgpack_packer *pk, char key, const char *s)
{
	size_t n = strlen(s);

	if (pack_key(pk, key) || msgpack_pack_str(pk, n))
		return -1;
	return msgpack_pack_str_body(pk, s, n);
}

static int pack_payload(msgpack_packer *pk, const unsigned char *p, size_t n)
{
	if (pack_key(pk, 'b') || msgpack_pack_bin(pk, n))
		return -1;
	return msgpack_pack_bin_body(pk, p, n);
}

int comb_signal_encode(const struct comb_signal *s, struct comb_buf *out,
		       char *errbuf, size_t errlen)
{
	struct sink sink = {out, 0};
	msgpack_packer pk;
	unsigned int n = 4;
	int rc;

	rc = check(s, true, errbuf, errlen);
	if (rc)
		return rc;
	n += s->xid != 0;
	n += s->lsn != 0;
	n += s->channel[0] != '\0';
	n += s->d[0] != '\0';
	n += s->pubkey[0] != '\0';
	n += s->id[0] != '\0';
	n += s->kind != 0;
	n += s->payload_len != 0;

	msgpack_packer_init(&pk, &sink, write_sink);
	if (msgpack_pack_map(&pk, n) ||
	    pack_uint(&pk, 'e', s->epoch) ||
	    pack_uint(&pk, 's', s->seq) ||
	    pack_uint(&pk, 'c', (uint64_t)s->community) ||
	    pack_uint(&pk, 't', s->type) ||
	    (s->xid && pack_uint(&pk, 'x', s->xid)) ||
	    (s->lsn && pack_uint(&pk, 'l', s->lsn)) ||
	    (s->channel[0] && pack_text(&pk, 'h', s->channel)) ||
	    (s->d[0] && pack_text(&pk, 'd', s->d)) ||
	    (s->pubkey[0] && pack_text(&pk, 'p', s->pubkey)) ||
	    (s->id[0] && pack_text(&pk, 'i', s->id)) ||
	    (s->kind && pack_uint(&pk, 'k', s->kind)) ||
	    (s->payload_len && pack_payload(&pk, s->payload, s->payload_len))) {
		if (sink.err == COMB_ETOOBIG)
			return comb_fail(errbuf, errlen, COMB_ETOOBIG,
					 "signal does not fit its buffer");
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* decoding */

static uint64_t read_be(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/*
 * Checks that p[0..len) holds exactly one msgpack object whose every
 * length lies inside the input, nested at most WALK_MAX_DEPTH deep, with
 * at most WALK_MAX_OBJECTS objects. Reads nothing outside p.
 */
static int walk(const unsigned char *p, size_t len)
{
	uint64_t left[WALK_MAX_DEPTH + 1];
	size_t off = 0, objects = 0;
	int depth = 0;

	left[0] = 1;
	while (depth >= 0) {
		const size_t head = 1;
		size_t lenbytes = 0;
		uint64_t body = 0, count = 0;
		bool container = false, ext = false;
		unsigned char b;

		if (left[depth] == 0) {
			depth--;
			continue;
		}
		left[depth]--;
		if (off >= len || ++objects > WALK_MAX_OBJECTS)
			return COMB_EINVAL;
		b = p[off];
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, bool */
		} else if (b <= 0x8f) {
			container = true;
			count = 2 * (uint64_t)(b & 0x0f);
		} else if (b <= 0x9f) {
			container = true;
			count = b & 0x0f;
		} else if (b <= 0xbf) {
			body = b & 0x1f;
		} else {
			switch (b) {
			case 0xc4: case 0xd9: lenbytes = 1; break;         /* bin8, str8 */
			case 0xc5: case 0xda: lenbytes = 2; break;         /* bin16, str16 */
			case 0xc6: case 0xdb: lenbytes = 4; break;         /* bin32, str32 */
			case 0xc7: lenbytes = 1; ext = true; break;        /* ext8 */
			case 0xc8: lenbytes = 2; ext = true; break;        /* ext16 */
			case 0xc9: lenbytes = 4; ext = true; break;        /* ext32 */
			case 0xca: body = 4; break;                        /* float32 */
			case 0xcb: body = 8; break;                        /* float64 */
			case 0xcc: case 0xd0: body = 1; break;
			case 0xcd: case 0xd1: body = 2; break;
			case 0xce: case 0xd2: body = 4; break;
			case 0xcf: case 0xd3: body = 8; break;
			case 0xd4: body = 2; break;                        /* fixext 1..16 */
			case 0xd5: body = 3; break;
			case 0xd6: body = 5; break;
			case 0xd7: body = 9; break;
			case 0xd8: body = 17; break;
			case 0xdc: case 0xde: lenbytes = 2; container = true; break;
			case 0xdd: case 0xdf: lenbytes = 4; container = true; break;
			default: return COMB_EINVAL;                       /* 0xc1 */
			}
		}
		if (len - off < head + lenbytes)
			return COMB_EINVAL;
		if (lenbytes) {
			uint64_t n = read_be(p + off + head, lenbytes);

			if (container)
				count = (b == 0xde || b == 0xdf) ? 2 * n : n;
			else
				body = n + ext; /* an ext's type byte follows its length */
		}
		off += head + lenbytes;
		if (body > len - off)
			return COMB_EINVAL;
		off += (size_t)body;
		if (container && count > 0) {
			/* every element takes at least one byte */
			if (count > len - off || depth == WALK_MAX_DEPTH)
				return COMB_EINVAL;
			left[++depth] = count;
		}
	}
	return off == len ? 0 : COMB_EINVAL;
}

enum {
	K_EPOCH = 1 << 0,
	K_SEQ = 1 << 1,
	K_COMMUNITY = 1 << 2,
	K_TYPE = 1 << 3,
	K_XID = 1 << 4,
	K_CHANNEL = 1 << 5,
	K_D = 1 << 6,
	K_PUBKEY = 1 << 7,
	K_ID = 1 << 8,
	K_KIND = 1 << 9,
	K_PAYLOAD = 1 << 10,
	K_LSN = 1 << 11,
};

static int get_uint(const msgpack_object *o, uint64_t max, uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return COMB_EINVAL;
	*out = o->via.u64;
	return 0;
}

/* Copies a msgpack string of exactly want bytes (no NUL inside) into out
 * (want + 1 bytes). */
static int get_text(const msgpack_object *o, size_t want, char *out)
{
	if (o->type != MSGPACK_OBJECT_STR || o->via.str.size != want ||
	    memchr(o->via.str.ptr, '\0', want) != NULL)
		return COMB_EINVAL;
	memcpy(out, o->via.str.ptr, want);
	out[want] = '\0';
	return 0;
}

static int decode_field(const msgpack_object *key, const msgpack_object *val,
			struct comb_signal *out, unsigned int *seen)
{
	unsigned int bit;
	uint64_t v = 0;
	int rc = 0;

	if (key->type != MSGPACK_OBJECT_STR || key->via.str.size != 1)
		return 0; /* not ours: skipped */
	switch (key->via.str.ptr[0]) {
	case 'e': bit = K_EPOCH; break;
	case 's': bit = K_SEQ; break;
	case 'c': bit = K_COMMUNITY; break;
	case 't': bit = K_TYPE; break;
	case 'x': bit = K_XID; break;
	case 'h': bit = K_CHANNEL; break;
	case 'd': bit = K_D; break;
	case 'p': bit = K_PUBKEY; break;
	case 'i': bit = K_ID; break;
	case 'k': bit = K_KIND; break;
	case 'b': bit = K_PAYLOAD; break;
	case 'l': bit = K_LSN; break;
	default: return 0;
	}
	if (*seen & bit)
		return COMB_EINVAL;
	*seen |= bit;
	switch (bit) {
	case K_EPOCH: rc = get_uint(val, UINT64_MAX, &out->epoch); break;
	case K_SEQ: rc = get_uint(val, UINT64_MAX, &out->seq); break;
	case K_XID: rc = get_uint(val, UINT64_MAX, &out->xid); break;
	case K_LSN: rc = get_uint(val, UINT64_MAX, &out->lsn); break;
	case K_COMMUNITY:
		rc = get_uint(val, INT64_MAX, &v);
		out->community = (int64_t)v;
		break;
	case K_TYPE:
		rc = get_uint(val, COMB_SIGNAL_TYPE_LIMIT, &v);
		out->type = (unsigned int)v;
		break;
	case K_KIND:
		rc = get_uint(val, UINT32_MAX, &v);
		out->kind = (unsigned int)v;
		break;
	case K_CHANNEL: rc = get_text(val, COMB_UUID_LEN, out->channel); break;
	case K_D: rc = get_text(val, COMB_UUID_LEN, out->d); break;
	case K_PUBKEY: rc = get_text(val, 64, out->pubkey); break;
	case K_ID: rc = get_text(val, 64, out->id); break;
	case K_PAYLOAD:
		if (val->type != MSGPACK_OBJECT_BIN)
			return COMB_EINVAL;
		out->payload = (const unsigned char *)val->via.bin.ptr;
		out->payload_len = val->via.bin.size;
		if (out->payload_len == 0)
			out->payload = NULL;
		break;
	}
	return rc;
}

int comb_signal_decode(const void *data, size_t len, struct comb_signal *out,
		       char *errbuf, size_t errlen)
{
	const unsigned int need = K_EPOCH | K_SEQ | K_COMMUNITY | K_TYPE;
	msgpack_unpacked msg;
	msgpack_unpack_return ret;
	unsigned int seen = 0;
	size_t off = 0;
	uint32_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > COMB_SIGNAL_MAX_SIZE)
		return comb_fail(errbuf, errlen, COMB_ETOOBIG,
				 "signal is over %d bytes", COMB_SIGNAL_MAX_SIZE);
	if (data == NULL || len == 0 || walk(data, len))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "signal is not one well-formed msgpack object");

	msgpack_unpacked_init(&msg);
	ret = msgpack_unpack_next(&msg, data, len, &off);
	if (ret != MSGPACK_UNPACK_SUCCESS || off != len) {
		rc = comb_fail(errbuf, errlen, COMB_EINVAL,
			       "signal is not one well-formed msgpack object");
		goto out;
	}
	if (msg.data.type != MSGPACK_OBJECT_MAP) {
		rc = comb_fail(errbuf, errlen, COMB_EINVAL, "signal is not a map");
		goto out;
	}
	for (i = 0; i < msg.data.via.map.size; i++) {
		const msgpack_object_kv *kv = &msg.data.via.map.ptr[i];

		if (decode_field(&kv->key, &kv->val, out, &seen)) {
			rc = comb_fail(errbuf, errlen, COMB_EINVAL,
				       "signal field %u is malformed or repeated", i);
			goto out;
		}
	}
	if ((seen & need) != need) {
		rc = comb_fail(errbuf, errlen, COMB_EINVAL,
			       "signal lacks epoch, seq, community or type");
		goto out;
	}
	rc = check(out, true, errbuf, errlen);
	if (rc == 0 && out->d[0])
		rc = comb_uuid_parse(out->d, out->d_bytes);
out:
	msgpack_unpacked_destroy(&msg);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

/* ------------------------------------------------------------------ */
/* topics and NOTIFY text */

int comb_signal_topic(const struct comb_signal *s, char *out, size_t outlen,
		      size_t *len)
{
	int n;

	if (s->community < 0)
		return COMB_EINVAL;
	if (s->type == COMB_SIGNAL_HEARTBEAT && s->community == 0)
		n = snprintf(out, outlen, "hb");
	else if (s->channel[0] == '\0' || s->type == COMB_SIGNAL_HEARTBEAT)
		n = snprintf(out, outlen, "%" PRId64 ":*", s->community);
	else
		n = snprintf(out, outlen, "%" PRId64 ":%s", s->community,
			     s->channel);
	if (n < 0 || (size_t)n >= outlen)
		return COMB_EINVAL;
	*len = (size_t)n + 1;
	return 0;
}

/* Parses a decimal number without sign or leading zeros, up to max. */
static int parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return COMB_EINVAL;
	for (i = 0; i < n; i++) {
		unsigned int digit;

		if (s[i] < '0' || s[i] > '9')
			return COMB_EINVAL;
		digit = (unsigned int)(s[i] - '0');
		if (v > (max - digit) / 10)
			return COMB_EINVAL;
		v = v * 10 + digit;
	}
	*out = v;
	return 0;
}

/* Copies a field that is "-" (empty) or exactly want bytes into out. */
static int parse_opt(const char *s, size_t n, size_t want, char *out)
{
	if (n == 1 && s[0] == '-') {
		out[0] = '\0';
		return 0;
	}
	if (n != want)
		return COMB_EINVAL;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

int comb_signal_parse_notify(const char *text, struct comb_signal *out,
			     char *errbuf, size_t errlen)
{
	const char *field[8];
	size_t flen[8], total, i;
	struct comb_signal s;
	unsigned int type;
	uint64_t v = 0;
	const char *p;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&s, 0, sizeof(s));
	total = text ? strnlen(text, COMB_SIGNAL_NOTIFY_MAX + 1) : 0;
	if (total == 0 || total > COMB_SIGNAL_NOTIFY_MAX)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "notification is empty or too long");
	p = text;
	for (i = 0; i < 8; i++) {
		field[i] = p;
		flen[i] = strcspn(p, " ");
		p += flen[i];
		if (i < 7) {
			if (*p != ' ')
				break;
			p++;
		}
	}
	if (i != 8 || *p != '\0')
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "notification does not have 8 fields");

	for (type = 1; type < KNOWN_TYPES; type++) {
		if (type != COMB_SIGNAL_EPHEMERAL &&
		    strlen(rules[type].name) == flen[0] &&
		    !memcmp(rules[type].name, field[0], flen[0]))
			break;
	}
	if (type == KNOWN_TYPES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "notification has an unknown type");
	s.type = type;
	if (parse_dec(field[1], flen[1], INT64_MAX, &v) || v == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "notification has a bad community");
	s.community = (int64_t)v;
	if (parse_opt(field[2], flen[2], COMB_UUID_LEN, s.channel) ||
	    parse_dec(field[3], flen[3], UINT64_MAX, &s.xid) ||
	    parse_opt(field[4], flen[4], COMB_UUID_LEN, s.d) ||
	    parse_opt(field[5], flen[5], 64, s.pubkey) ||
	    parse_opt(field[6], flen[6], 64, s.id) ||
	    parse_dec(field[7], flen[7], UINT32_MAX, &v))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "notification has a malformed field");
	s.kind = (unsigned int)v;
	rc = check(&s, false, errbuf, errlen);
	if (rc == 0)
		*out = s;
	return rc;
}

void comb_signal_ephemeral_channel(int redis_db, char *out)
{
	snprintf(out, COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX, "comb:ephemeral:%d",
		 redis_db);
}

int comb_signal_parse_ephemeral(const void *msg, size_t len,
				struct comb_signal *out, char *errbuf,
				size_t errlen)
{
	const char *p = msg, *colon;
	struct comb_signal s;
	uint64_t v = 0;

	memset(out, 0, sizeof(*out));
	memset(&s, 0, sizeof(s));
	colon = p ? memchr(p, ':', len < 21 ? len : 21) : NULL;
	if (colon == NULL ||
	    parse_dec(p, (size_t)(colon - p), INT64_MAX, &v) || v == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "ephemeral message has no community");
	s.community = (int64_t)v;
	p = colon + 1;
	len -= (size_t)(p - (const char *)msg);
	if (len < COMB_UUID_LEN + 2 || p[COMB_UUID_LEN] != ':' ||
	    memchr(p, '\0', COMB_UUID_LEN) != NULL)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "ephemeral message has no channel");
	memcpy(s.channel, p, COMB_UUID_LEN);
	s.channel[COMB_UUID_LEN] = '\0';
	if (!comb_uuid_is_canonical(s.channel))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "ephemeral message has a bad channel");
	p += COMB_UUID_LEN + 1;
	len -= COMB_UUID_LEN + 1;
	if (len > COMB_SIGNAL_MAX_PAYLOAD)
		return comb_fail(errbuf, errlen, COMB_ETOOBIG,
				 "ephemeral event is over %d bytes",
				 COMB_SIGNAL_MAX_PAYLOAD);
	s.type = COMB_SIGNAL_EPHEMERAL;
	s.payload = (const unsigned char *)p;
	s.payload_len = len;
	*out = s;
	return 0;
}
