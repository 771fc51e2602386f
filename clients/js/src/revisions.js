// The event templates of artifact revisions (PROTOCOL.md section 5), shared
// by CombClient's writes and a view's outbox.

import { ENVELOPE, clientTags, tagValue } from './tags.js';

export const REVISION_KIND = 45010;

/**
 * The fields a new revision inherits from current, with changes applied
 * (title, content, root, and tags: an array replaces the client tags, an
 * object sets single-valued tags by name, null drops one).
 */
export function fieldsOf(current, changes) {
	let tags = clientTags(current);
	if (Array.isArray(changes.tags)) {
		tags = changes.tags;
	} else if (changes.tags) {
		for (const [name, value] of Object.entries(changes.tags)) {
			const i = tags.findIndex((t) => t[0] === name);
			if (value === null || value === undefined)
				tags = tags.filter((t) => t[0] !== name);
			else if (i >= 0)
				tags = tags.map((t, j) => (j === i ? [name, String(value)] : t));
			else
				tags = [...tags, [name, String(value)]];
		}
	}
	return {
		d: tagValue(current, 'd'), h: tagValue(current, 'h'), type: tagValue(current, 'type'),
		root: 'root' in changes ? changes.root : tagValue(current, 'root'),
		title: changes.title ?? tagValue(current, 'title'),
		content: changes.content ?? current.content,
		tags,
	};
}

/**
 * The event template of a revision; throws TypeError for a client tag
 * that is an envelope tag.
 */
export function revision({ d, h, type, op, prev, root, title, content, tags }) {
	for (const t of tags) {
		if (ENVELOPE.has(t[0]))
			throw new TypeError(`tag ${t[0]} is an envelope tag`);
	}
	const out = [['ar', '1'], ['d', d], ['h', h], ['type', type], ['op', op]];
	if (prev)
		out.push(['prev', prev]);
	if (root && op !== 'delete')
		out.push(['root', root]);
	if (op !== 'delete')
		out.push(['title', title]);
	return { kind: REVISION_KIND, tags: [...out, ...tags], content: op === 'delete' ? '' : content };
}
