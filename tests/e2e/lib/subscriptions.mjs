// Subscriptions as a test drives them on a wsClient (harness.mjs).

/** A predicate for the frames of subscription sub. */
export const isFor = (sub) => (m) => Array.isArray(m) && m[1] === sub;

/**
 * Sends ["REQ", sub, ...filters] on c and resolves to its frames up to and
 * including the EOSE or CLOSED that ends its opening (each frame within
 * ms of the one before).
 */
export async function reqFrames(c, sub, filters, ms = 30000) {
	c.send(['REQ', sub, ...filters]);
	const frames = [];
	for (;;) {
		const m = await c.next(isFor(sub), ms);
		frames.push(m);
		if (m[0] === 'EOSE' || m[0] === 'CLOSED')
			return frames;
	}
}
