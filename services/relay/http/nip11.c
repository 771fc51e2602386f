/* NIP-11 relay information (PROTOCOL.md section 9), built from the
 * configuration so that every advertised limit is the enforced one. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "protocol_limits.h"

void handle_nip11(struct request *req)
{
	const struct comb_config *cfg = &req->relay->cfg;
	json_t *doc, *artifacts, *modes;
	char *text;

	modes = json_pack("[sss]", "current", "history", "head");
	artifacts = json_pack(
		"{s:s, s:s, s:i, s:i, s:o, s:i, s:i, s:i, s:i, s:i, s:i, s:i,"
		" s:i, s:i, s:b, s:{s:i}}",
		"query", "/query", "count", "/count",
		"revision_kind", 45010, "removal_kind", 45011,
		"modes", modes,
		"max_page_size", cfg->max_limit, "max_offset", COMB_MAX_OFFSET,
		"max_predicates", COMB_MAX_PREDICATES,
		"max_values", COMB_MAX_VALUES,
		"max_tag_name_bytes", COMB_MAX_TAG_NAME_BYTES,
		"max_tag_value_bytes", COMB_MAX_TAG_VALUE_BYTES,
		"max_tag_bytes", COMB_MAX_TAG_BYTES,
		"max_tags", COMB_MAX_TAGS,
		"query_timeout_ms", cfg->query_timeout_ms,
		"websocket_query_extensions", 1,
		"sync", "max_events", cfg->sync_max_events);
	if (artifacts)
		json_object_set_new(json_object_get(artifacts, "sync"), "modes",
				    cfg->incremental_enabled ?
				    json_pack("[ss]", "current", "changes") :
				    json_pack("[s]", "current"));
	if (artifacts && cfg->incremental_enabled) {
		json_array_append_new(modes, json_string("incremental"));
		json_object_set_new(artifacts, "incremental",
				    json_pack("{s:i, s:i}", "max_page_size",
					      COMB_INCREMENTAL_MAX_PAGE,
					      "max_ids", COMB_INCREMENTAL_MAX_IDS));
	}
	doc = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:[iiiiii],"
		" s:{s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:o}",
		"name", cfg->relay_name, "description", cfg->relay_description,
		"pubkey", req->relay->pubkey, "software", "comb",
		"version", COMB_VERSION,
		"supported_nips", 1, 9, 11, 29, 42, 98,
		"limitation", "auth_required", 1,
		"max_message_length", cfg->max_message_length,
		"max_subscriptions", cfg->max_subscriptions,
		"max_filters", cfg->max_filters, "max_limit", cfg->max_limit,
		"created_at_lower_limit", cfg->created_at_lower_limit,
		"created_at_upper_limit", cfg->created_at_upper_limit,
		"max_connections_per_ip", cfg->max_connections_per_ip,
		"artifacts", artifacts);
	/* Pipelined EVENTs: how many one connection, and one node, may have
	 * waiting for their OK before the relay stops reading. */
	if (doc) {
		json_t *limitation = json_object_get(doc, "limitation");

		json_object_set_new(limitation, "max_connection_bytes",
				    json_integer(cfg->max_connection_bytes));
		json_object_set_new(limitation, "max_writes_in_flight",
				    json_integer(cfg->write_inflight_per_connection));
		json_object_set_new(limitation, "max_node_writes_in_flight",
				    json_integer(cfg->write_inflight_per_node));
	}
	/* WebSocket connections this node holds (COMB_NUM_THREADS). */
	if (doc)
		json_object_set_new(json_object_get(doc, "limitation"), "max_connections",
				    json_integer(comb_max_connections(cfg->num_threads)));
	/* The per-pubkey write budget, shared by every relay node; absent
	 * when it is off (COMB_WRITE_RATE=0). */
	if (doc && cfg->write_rate > 0) {
		json_t *limitation = json_object_get(doc, "limitation");

		json_object_set_new(limitation, "write_rate_per_minute",
				    json_integer(cfg->write_rate));
		json_object_set_new(limitation, "write_burst",
				    json_integer(cfg->write_burst));
	}
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text) {
		http_send_error(req, 503, "error: out of memory");
		return;
	}
	req->status = 200;
	mg_printf(req->conn,
		  "HTTP/1.1 200 OK\r\nContent-Type: application/nostr+json\r\n"
		  "Access-Control-Allow-Origin: *\r\nContent-Length: %zu\r\n\r\n",
		  strlen(text));
	mg_write(req->conn, text, strlen(text));
	free(text);
}
