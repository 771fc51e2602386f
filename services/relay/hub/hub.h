/*
 * hub/: where signals about who may read arrive for every open
 * subscription of this node. Each authenticated WebSocket registers its
 * reader's access (struct reader_access, access.h) here; the hub listens
 * to the capture feed (feed/) ahead of every other listener and applies a
 * change of the reader's community admin status to that access at once,
 * on the feed's thread, before the feed hands on any later signal or
 * event. So a plain REQ's next delivery, a new REQ, a sync's access check
 * and a resumable sync's next read all see the new status, and nothing
 * written after the change reaches a reader who lost access
 * (docs/protocol.md, "Access changes reach open connections").
 *
 * The hub is below the subscriptions (session/, sync/, ws/): it never
 * names them, they register what it needs. The only public header of the
 * folder.
 */
#ifndef COMB_HUB_H
#define COMB_HUB_H

#include "access.h"
#include "relay.h"

/*
 * Registers the hub with the capture feed. Call before any other
 * feed_listen (so that its listener runs first) and before feed_start.
 * Returns 0, or COMB_ETOOBIG / COMB_ENOMEM with errbuf set.
 */
int hub_start(struct relay *relay, char *errbuf, size_t errlen);

/* Forgets every registration. Call after feed_stop, once every connection
 * is closed. Safe when hub_start failed or never ran. */
void hub_stop(void);

/*
 * Registers ra (borrowed until hub_remove_reader returns): from now on an
 * admin signal for ra's community and pubkey sets ra->admin and counts
 * ra->generation. Returns 0 or COMB_ENOMEM.
 */
int hub_add_reader(struct reader_access *ra);

/* Unregisters ra (nothing when it is not registered). */
void hub_remove_reader(struct reader_access *ra);

/*
 * Loads whether ra's pubkey is a community admin from the database and
 * applies it, unless an admin signal arrived while it was loaded (the
 * signal is as new then). Call after hub_add_reader, from a thread that
 * may wait for the database: when the reader's status may have changed
 * without a signal reaching this node yet (at AUTH, when a subscription
 * opens: the operator's change may have committed a moment ago). Returns
 * 0 or COMB_EUNAVAIL.
 */
int hub_load_admin(struct relay *relay, const struct community *c,
		   struct reader_access *ra);

#endif
