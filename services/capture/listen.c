/*
 * From notification to signal: each payload the triggers of
 * migrations/0003_notify.sql send on "comb" becomes one signal published
 * on its channel's topic. PostgreSQL delivers them after commit in commit
 * order, and this loop numbers them in that order.
 */
#include <inttypes.h>

#include "capture.h"
#include "comb/log.h"

void listen_notification(struct capture *cap, const char *payload)
{
	struct comb_signal s;
	char err[128];

	if (comb_signal_parse_notify(payload, &s, err, sizeof(err))) {
		/*
		 * A change was made that cannot be told to relays: say so by
		 * ending the epoch, so that every sync starts again.
		 */
		cap->rejected++;
		comb_error("listen: unusable notification '%.200s': %s; "
			   "starting a new epoch", payload, err);
		publish_new_epoch(cap);
		return;
	}
	comb_debug("listen: %s community %" PRId64 " channel %s xid %" PRIu64,
		   comb_signal_type_name(s.type), s.community,
		   s.channel[0] ? s.channel : "-", s.xid);
	publish_signal(cap, &s);
}
