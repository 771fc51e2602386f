// Helpers for the artifact end-to-end tests: publishing signed events over
// POST /events, channels and members through the real moderation events
// (9007, 9000, 9001, 9002, 9008, 9021, 9022), kind-45010 revisions, and
// artifact queries over POST /query and /count. Everything goes through
// the harness (nostr-tools signing, NIP-98 tokens, node:http).

import assert from 'node:assert/strict';
import crypto from 'node:crypto';

import { now, post, signEvent } from './harness.mjs';

/** A new random channel or artifact id (canonical lowercase UUID). */
export function uuid() {
	return crypto.randomUUID();
}

/**
 * Signs template with sk and POSTs it to /events. Resolves to
 * {status, body (parsed JSON), raw (text), event}.
 */
export async function publish(stack, sk, template, opts = {}) {
	const event = signEvent(sk, template);
	return publishSigned(stack, sk, event, opts);
}

// NIP-98 options with a random nonce tag, so that two requests with the
// same body within one second still carry distinct (single-use) tokens.
function nonce() {
	return { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] };
}

/** POSTs an already signed event (authorized by sk). */
export async function publishSigned(stack, sk, event, opts = {}) {
	const r = await post(opts.url ?? stack.url, '/events', event, sk, { nip98: nonce(), ...opts });
	let body = null;
	try {
		body = JSON.parse(r.body);
	} catch {
		// left null: the test will say what came back
	}
	return { status: r.status, body, raw: r.body, event };
}

/** Asserts that a publish result is an acceptance. */
export function assertAccepted(res, what = 'event') {
	assert.equal(res.status, 200, `${what}: ${res.raw}`);
	assert.deepEqual(res.body, { id: res.event.id, accepted: true, message: '' });
}

/** Asserts that a publish result is a refusal with exactly message. */
export function assertRefused(res, status, message) {
	assert.deepEqual({ status: res.status, body: res.body },
		{ status, body: { id: res.event.id, accepted: false, message } });
}

/**
 * Creates a channel with kind 9007 signed by sk (a community admin).
 * opts: name, visibility, ttl. Resolves to the channel id.
 */
export async function createChannel(stack, sk, opts = {}) {
	const h = uuid();
	const tags = [['h', h], ['name', opts.name ?? `channel ${h.slice(0, 8)}`]];
	if (opts.visibility)
		tags.push(['visibility', opts.visibility]);
	if (opts.ttl !== undefined)
		tags.push(['ttl', String(opts.ttl)]);
	const res = await publish(stack, sk, { kind: 9007, tags });
	assertAccepted(res, `create channel ${h}`);
	return h;
}

// Moderation events carry a random reason in content, so that repeating
// a change (archive, unarchive, archive) never resends an identical event,
// which the relay would take for a resubmission and not apply again.
function reason() {
	return `test ${crypto.randomBytes(6).toString('hex')}`;
}

/** Adds pubkey to channel h with role (kind 9000, signed by sk). */
export async function addMember(stack, sk, h, pubkey, role = 'member') {
	const res = await publish(stack, sk, { kind: 9000, tags: [['h', h], ['p', pubkey, role]], content: reason() });
	assertAccepted(res, `add ${pubkey} to ${h}`);
	return res;
}

/** Removes pubkey from channel h (kind 9001, signed by sk). */
export async function removeMember(stack, sk, h, pubkey) {
	const res = await publish(stack, sk, { kind: 9001, tags: [['h', h], ['p', pubkey]], content: reason() });
	assertAccepted(res, `remove ${pubkey} from ${h}`);
	return res;
}

/** Edits channel metadata (kind 9002): tags like [['visibility','private']]. */
export async function editChannel(stack, sk, h, tags) {
	const res = await publish(stack, sk, { kind: 9002, tags: [['h', h], ...tags], content: reason() });
	assertAccepted(res, `edit ${h}`);
	return res;
}

/** Posts a chat message (kind 9) in channel h; resolves to the event. */
export async function chat(stack, sk, h, content = 'hello') {
	const res = await publish(stack, sk, { kind: 9, tags: [['h', h]], content });
	assertAccepted(res, `chat in ${h}`);
	return res.event;
}

/**
 * The tags of a revision: envelope (ar, d, h, type, op, prev, root, title)
 * then extra client tags. title null omits it (a delete has none).
 */
export function revisionTags({ d, h, type = 'demo.task', op, prev, root, title = 'A task', extra = [] }) {
	const tags = [['ar', '1'], ['d', d], ['h', h], ['type', type], ['op', op]];
	if (prev)
		tags.push(['prev', prev]);
	if (root)
		tags.push(['root', root]);
	if (title !== null && op !== 'delete')
		tags.push(['title', title]);
	return [...tags, ...extra];
}

/**
 * Publishes one revision signed by sk. spec as for revisionTags plus
 * content and created_at. Resolves to the publish result.
 */
export function writeRevision(stack, sk, spec) {
	return publish(stack, sk, {
		kind: 45010,
		created_at: spec.created_at ?? now(),
		tags: revisionTags(spec),
		content: spec.content ?? (spec.op === 'delete' ? '' : `content of ${spec.d}`),
	});
}

/** Like writeRevision, but asserts acceptance and resolves to the event. */
export async function accept(stack, sk, spec) {
	const res = await writeRevision(stack, sk, spec);
	assertAccepted(res, `${spec.op} ${spec.d}`);
	return res.event;
}

/** POSTs [filter] to /query as sk; resolves to {status, headers, body, raw}. */
export async function query(stack, sk, filter, path = '/query') {
	const r = await post(stack.url, path, [filter], sk, { nip98: nonce() });
	let body = null;
	try {
		body = JSON.parse(r.body);
	} catch {
		// left null
	}
	return { status: r.status, headers: r.headers, body, raw: r.body };
}

/** POSTs [filter] to /count as sk. */
export function count(stack, sk, filter) {
	return query(stack, sk, filter, '/count');
}

/** Queries and asserts 200; resolves to the array of events. */
export async function events(stack, sk, filter) {
	const r = await query(stack, sk, filter);
	assert.equal(r.status, 200, `query ${JSON.stringify(filter)}: ${r.raw}`);
	assert.ok(Array.isArray(r.body), 'the answer is a bare JSON array');
	return r.body;
}

/** The first value of the first tag named name, or undefined. */
export function tagValue(event, name) {
	return event.tags.find((t) => t[0] === name)?.[1];
}
