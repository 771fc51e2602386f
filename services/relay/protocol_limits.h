/* Fixed limits of the wire protocol (PROTOCOL.md sections 3, 6, 8, 9);
 * the configurable ones live in struct comb_config. */
#ifndef COMB_PROTOCOL_LIMITS_H
#define COMB_PROTOCOL_LIMITS_H

#define COMB_VERSION "0.1.0"
#define COMB_MAX_OFFSET 10000
/* A request body must arrive within this many ms of its headers. */
#define COMB_BODY_DEADLINE_MS 10000
#define COMB_BODY_DEADLINE_TEXT "10000"
/* A connection's request line and headers must arrive within this many ms
 * of its start (civetweb's request_header_timeout_ms). */
#define COMB_HEADER_DEADLINE_TEXT "10000"
#define COMB_MAX_PREDICATES 32
#define COMB_MAX_VALUES 256
#define COMB_MAX_TAG_NAME_BYTES 128
#define COMB_MAX_TAG_VALUE_BYTES 4096
#define COMB_MAX_TAG_BYTES 65536
#define COMB_MAX_TAGS 256
#define COMB_MAX_IDS 256           /* ids or authors in a plain filter */
#define COMB_INCREMENTAL_MAX_PAGE 1000
#define COMB_INCREMENTAL_MAX_IDS 1000

/* WebSocket connections a node holds with num_threads civetweb workers:
 * all but a reserve (an eighth, at least 2) kept for HTTP. Advertised in
 * NIP-11 as limitation.max_connections. */
static inline int comb_max_connections(int num_threads)
{
	int reserve = num_threads / 8 < 2 ? 2 : num_threads / 8;

	return num_threads - reserve < 1 ? 1 : num_threads - reserve;
}

#endif
