// Tag helpers for kind-45010 revisions (PROTOCOL.md section 5).

/** The envelope tags every revision carries; everything else is a client tag. */
export const ENVELOPE = new Set(['ar', 'd', 'h', 'type', 'op', 'prev', 'root', 'title']);

/** The first value of the first tag called name, or undefined. */
export function tagValue(event, name) {
	return event.tags.find((t) => t[0] === name)?.[1];
}

/** The client tags of a revision (every tag that is not an envelope tag). */
export function clientTags(event) {
	return event.tags.filter((t) => !ENVELOPE.has(t[0]));
}
