/*
 * The sync entry point (see ws_sync.h). Until the sync is implemented a
 * sync REQ is refused explicitly rather than served as something else.
 */
#include "ws_sync.h"

void ws_sync_open(struct ws_session *s, const char *sub_id,
		  const json_t *filter)
{
	(void)filter;
	ws_send_closed(s, sub_id, "invalid: sync not available yet", WS_PUSH_WAIT);
}
