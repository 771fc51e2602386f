// Artifact writes end to end (PROTOCOL.md sections 5 and 10): every row of
// the lifecycle table with its exact answer, the order of the checks, root
// anchors, idempotent resubmission, the existence oracle, removal markers
// of moves, and concurrent writers, all through nostr-tools-signed HTTP
// requests against a real relay and PostgreSQL. Channels and members are
// made with the real moderation events.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { verifyEvent } from 'nostr-tools/pure';

import { newKey, now, signEvent } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, assertRefused, chat, createChannel,
	editChannel, events, publish, publishSigned, revisionTags, uuid, writeRevision,
} from './lib/artifacts.mjs';
import { startRelay, strayChannelEvents } from './lib/harness.mjs';

const HEAD_UNAVAILABLE = 'conflict: artifact head unavailable';
const HEAD_CHANGED = 'conflict: artifact head changed';
const IDENTITY_TAKEN = 'conflict: artifact identity is taken';
const NOT_MEMBER = 'restricted: not a channel member';
const CREATOR_RULE = 'restricted: only the creator or a channel admin may delete or restore';
const BAD_ROOT = 'invalid: root must be a message in the home channel';
const DELETED_STATE = 'invalid: deleted artifacts accept only restore';
const HOME_RULE = 'invalid: only move changes the home channel';

let stack;
let admin;           // community admin
const alice = newKey();  // member of P, creator of most artifacts
const bob = newKey();    // member of P
const padmin = newKey(); // admin of P
const eve = newKey();    // no membership anywhere
let O, O2, P, Q, ARCH;   // open, open, private, private (admin only), archived

const randomHex = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');

async function head(d) {
	const rows = await stack.query(
		`SELECT revision_id, channel_id, type, creator, deleted, coalesce(root, ''), redacted, changed_xid
		   FROM artifact_heads WHERE d = '${d}'`);
	if (rows.length === 0)
		return null;
	const [revision, channel, type, creator, deleted, root, redacted, xid] = rows[0];
	return { revision, channel, type, creator, deleted: deleted === 't', root, redacted: redacted === 't', xid };
}

async function counts() {
	const [row] = await stack.query(
		`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM events WHERE d IS NOT NULL),
		        (SELECT count(*) FROM artifact_moves), (SELECT count(*) FROM artifact_head_tags),
		        (SELECT string_agg(d || revision_id || changed_xid, ',' ORDER BY d) FROM artifact_heads)`);
	return row;
}

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	O = await createChannel(stack, admin, { name: 'open' });
	O2 = await createChannel(stack, admin, { name: 'open two' });
	P = await createChannel(stack, admin, { name: 'private', visibility: 'private' });
	Q = await createChannel(stack, admin, { name: 'hidden', visibility: 'private' });
	ARCH = await createChannel(stack, admin, { name: 'archive' });
	await addMember(stack, admin, P, alice.pk);
	await addMember(stack, admin, P, bob.pk);
	await addMember(stack, admin, P, padmin.pk, 'admin');
});

after(async () => {
	await stack?.stop();
});

describe('lifecycle table', () => {
	test('create with an unused d is accepted and becomes the head', async () => {
		const d = uuid();
		const ev = await accept(stack, alice.sk, { d, h: O, op: 'create', extra: [['status', 'open']] });
		const hd = await head(d);
		assert.deepEqual({ ...hd, xid: 0 }, {
			revision: ev.id, channel: O, type: 'demo.task', creator: alice.pk,
			deleted: false, root: '', redacted: false, xid: 0,
		});
	});

	test('create whose d exists, live or deleted, is refused with only the identity conflict', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		assertRefused(await writeRevision(stack, bob.sk, { d, h: O, op: 'create', title: 'mine' }),
			409, IDENTITY_TAKEN);
		// another channel and type change nothing in the answer
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, type: 'other.kind', op: 'create' }),
			409, IDENTITY_TAKEN);
		await accept(stack, alice.sk, { d, h: O, op: 'delete', prev: c.id });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'create', title: 'again' }),
			409, IDENTITY_TAKEN);
	});

	test('create into a channel the signer cannot write is restricted, before identity', async () => {
		const d = uuid();
		await accept(stack, alice.sk, { d, h: P, op: 'create' });
		// eve may not write P: the same answer for a fresh d and a taken one
		assertRefused(await writeRevision(stack, eve.sk, { d, h: P, op: 'create' }), 403, NOT_MEMBER);
		assertRefused(await writeRevision(stack, eve.sk, { d: uuid(), h: P, op: 'create' }), 403, NOT_MEMBER);
		// a channel that does not exist, and an archived one
		assertRefused(await writeRevision(stack, alice.sk, { d: uuid(), h: uuid(), op: 'create' }), 403, NOT_MEMBER);
		await editChannel(stack, admin, ARCH, [['archived', 'true']]);
		try {
			assertRefused(await writeRevision(stack, alice.sk, { d: uuid(), h: ARCH, op: 'create' }),
				403, NOT_MEMBER);
		} finally {
			await editChannel(stack, admin, ARCH, [['archived', 'false']]);
		}
	});

	test('a non-create whose head is missing is conflict: artifact head unavailable', async () => {
		for (const op of ['update', 'move', 'delete', 'restore']) {
			const res = await writeRevision(stack, alice.sk, {
				d: uuid(), h: op === 'move' ? O2 : O, op, prev: randomHex(),
			});
			assertRefused(res, 409, HEAD_UNAVAILABLE);
		}
	});

	test('a non-create in a channel the signer cannot write is head unavailable before prev, type or state', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create' });
		const cases = [
			{ d, h: P, op: 'update', prev: c.id },                        // everything right
			{ d, h: P, op: 'update', prev: randomHex() },                 // stale prev
			{ d, h: P, type: 'other.kind', op: 'update', prev: c.id },    // other type
			{ d, h: O, op: 'update', prev: c.id },                        // changes h
			{ d, h: P, op: 'restore', prev: c.id },                       // live artifact
			{ d, h: O, op: 'move', prev: c.id },                          // move out
			{ d, h: P, op: 'delete', prev: c.id },
		];
		for (const spec of cases)
			assertRefused(await writeRevision(stack, eve.sk, spec), 409, HEAD_UNAVAILABLE);
		// readable but not writable: an archived home
		const d2 = uuid();
		const c2 = await accept(stack, alice.sk, { d: d2, h: ARCH, op: 'create' });
		await editChannel(stack, admin, ARCH, [['archived', 'true']]);
		try {
			assertRefused(await writeRevision(stack, alice.sk, { d: d2, h: ARCH, op: 'update', prev: c2.id }),
				409, HEAD_UNAVAILABLE);
			assertRefused(await writeRevision(stack, alice.sk, { d: d2, h: O, op: 'move', prev: c2.id }),
				409, HEAD_UNAVAILABLE);
		} finally {
			await editChannel(stack, admin, ARCH, [['archived', 'false']]);
		}
	});

	test('prev that is not the current revision is conflict: artifact head changed', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'second' });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'third' }),
			409, HEAD_CHANGED);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: randomHex() }),
			409, HEAD_CHANGED);
		// prev is compared before type, state and home
		assertRefused(await writeRevision(stack, alice.sk, {
			d, h: O2, type: 'other.kind', op: 'restore', prev: c.id,
		}), 409, HEAD_CHANGED);
	});

	test('a type that differs from the stored one is invalid: artifact type is immutable', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		for (const op of ['update', 'delete']) {
			assertRefused(await writeRevision(stack, alice.sk, { d, h: O, type: 'demo.note', op, prev: c.id }),
				400, 'invalid: artifact type is immutable');
		}
		// type is compared before the deleted state and the home
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, type: 'demo.note', op: 'restore', prev: c.id }),
			400, 'invalid: artifact type is immutable');
	});

	test('update, move and delete of a deleted artifact and restore of a live one are refused', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'restore', prev: c.id }),
			400, DELETED_STATE);
		const del = await accept(stack, alice.sk, { d, h: O, op: 'delete', prev: c.id });
		assert.equal((await head(d)).deleted, true);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: del.id }), 400, DELETED_STATE);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, op: 'move', prev: del.id }), 400, DELETED_STATE);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'delete', prev: del.id }), 400, DELETED_STATE);
		// deleted state is checked before the home rule
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, op: 'update', prev: del.id }), 400, DELETED_STATE);
		const res = await accept(stack, alice.sk, { d, h: O, op: 'restore', prev: del.id, title: 'back' });
		const hd = await head(d);
		assert.equal(hd.deleted, false);
		assert.equal(hd.revision, res.id);
	});

	test('update that changes h and move that keeps it are invalid: only move changes the home channel', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, op: 'update', prev: c.id }), 400, HOME_RULE);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'move', prev: c.id }), 400, HOME_RULE);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, op: 'delete', prev: c.id }), 400, HOME_RULE);
		// the home rule comes before the destination check
		assertRefused(await writeRevision(stack, alice.sk, { d, h: Q, op: 'update', prev: c.id }), 400, HOME_RULE);
	});

	test('a move into a channel the signer cannot write is restricted: not a channel member', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: Q, op: 'move', prev: c.id }), 403, NOT_MEMBER);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: uuid(), op: 'move', prev: c.id }), 403, NOT_MEMBER);
		// nothing moved
		assert.equal((await head(d)).channel, O);
		const m = await accept(stack, alice.sk, { d, h: P, op: 'move', prev: c.id });
		assert.equal((await head(d)).channel, P);
		assert.equal((await head(d)).revision, m.id);
	});

	test('delete and restore need the creator, a channel admin or a community admin', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create' });
		// bob may edit (he writes P) but not delete someone else's artifact
		const u = await accept(stack, bob.sk, { d, h: P, op: 'update', prev: c.id, title: 'edited by bob' });
		assertRefused(await writeRevision(stack, bob.sk, { d, h: P, op: 'delete', prev: u.id }), 403, CREATOR_RULE);
		// the creator is who made the create, not the last editor
		const del = await accept(stack, alice.sk, { d, h: P, op: 'delete', prev: u.id });
		assertRefused(await writeRevision(stack, bob.sk, { d, h: P, op: 'restore', prev: del.id }), 403, CREATOR_RULE);
		const r = await accept(stack, padmin.sk, { d, h: P, op: 'restore', prev: del.id });
		const del2 = await accept(stack, admin, { d, h: P, op: 'delete', prev: r.id });
		assert.equal((await head(d)).revision, del2.id);
		assert.equal((await head(d)).creator, alice.pk);
	});
});

describe('root anchors', () => {
	test('create: the root must be an undeleted kind-9 message in h', async () => {
		const msg = await chat(stack, alice.sk, O, 'the thread');
		const other = await chat(stack, alice.sk, O2, 'elsewhere');
		const gone = await chat(stack, alice.sk, O, 'to be deleted');
		assertAccepted(await publish(stack, alice.sk, { kind: 5, tags: [['h', O], ['e', gone.id]] }), 'kind 5');
		const art = await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create' });
		for (const root of [other.id, gone.id, art.id, randomHex()])
			assertRefused(await writeRevision(stack, alice.sk, { d: uuid(), h: O, op: 'create', root }), 400, BAD_ROOT);
		const d = uuid();
		await accept(stack, alice.sk, { d, h: O, op: 'create', root: msg.id });
		assert.equal((await head(d)).root, msg.id);
	});

	test('update checks only a new or changed root; a delete keeps the stored root', async () => {
		const msg = await chat(stack, alice.sk, O, 'anchor');
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create', root: msg.id });
		// the anchor goes away: repeating the same root stays allowed
		assertAccepted(await publish(stack, alice.sk, { kind: 5, tags: [['h', O], ['e', msg.id]] }), 'kind 5');
		const u = await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, root: msg.id, title: 'again' });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: u.id, root: randomHex() }),
			400, BAD_ROOT);
		// a delete without root keeps the stored one; naming another is refused
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'delete', prev: u.id, root: randomHex() }),
			400, BAD_ROOT);
		const del = await accept(stack, alice.sk, { d, h: O, op: 'delete', prev: u.id });
		assert.equal((await head(d)).root, msg.id);
		// a restore without root clears it (each revision is a full snapshot)
		await accept(stack, alice.sk, { d, h: O, op: 'restore', prev: del.id });
		assert.equal((await head(d)).root, '');
	});

	test('a move\'s root must be absent or a message in the destination', async () => {
		const src = await chat(stack, alice.sk, O, 'source thread');
		const dst = await chat(stack, alice.sk, O2, 'destination thread');
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create', root: src.id });
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O2, op: 'move', prev: c.id, root: src.id }),
			400, BAD_ROOT);
		const m = await accept(stack, alice.sk, { d, h: O2, op: 'move', prev: c.id, root: dst.id });
		assert.equal((await head(d)).root, dst.id);
		await accept(stack, alice.sk, { d, h: O, op: 'move', prev: m.id });
		assert.equal((await head(d)).root, '');
	});
});

describe('freshness and idempotency', () => {
	test('a stale created_at is refused, an accepted id is accepted again whatever its age', async () => {
		const stale = await writeRevision(stack, alice.sk, { d: uuid(), h: O, op: 'create', created_at: now() - 1000 });
		assertRefused(stale, 400, 'invalid: created_at is too far from the relay\'s clock');
		const future = await writeRevision(stack, alice.sk, { d: uuid(), h: O, op: 'create', created_at: now() + 1000 });
		assertRefused(future, 400, 'invalid: created_at is too far from the relay\'s clock');
		// accepted while just fresh enough, resent once it is not
		const d = uuid();
		const old = await accept(stack, alice.sk, { d, h: O, op: 'create', created_at: now() - 898 });
		await new Promise((r) => setTimeout(r, 3000));
		assertAccepted(await publishSigned(stack, alice.sk, old), 'stale resubmission');
	});

	test('resubmitting an accepted revision after two later edits is accepted and changes nothing', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const u1 = await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'two' });
		await accept(stack, alice.sk, { d, h: O2, op: 'move', prev: u1.id, title: 'three' });
		const before = await counts();
		const headBefore = await head(d);
		for (const ev of [c, u1])
			assertAccepted(await publishSigned(stack, alice.sk, ev), 'resubmission');
		assert.deepEqual(await counts(), before);
		assert.deepEqual(await head(d), headBefore);
	});

	test('resubmitting a redacted revision is accepted and changes nothing', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create', extra: [['secret', 'x']] });
		assertAccepted(await publish(stack, padmin.sk, { kind: 9005, tags: [['h', P], ['e', c.id]] }), 'redaction');
		const before = await counts();
		const headBefore = await head(d);
		assert.equal(headBefore.redacted, true);
		assertAccepted(await publishSigned(stack, alice.sk, c), 'resubmission after redaction');
		assert.deepEqual(await counts(), before);
		assert.deepEqual(await head(d), headBefore);
		// the redacted head stays editable
		const u = await accept(stack, alice.sk, { d, h: P, op: 'update', prev: c.id, title: 'clean' });
		assert.deepEqual({ ...(await head(d)), xid: 0 },
			{ ...headBefore, revision: u.id, redacted: false, xid: 0 });
	});

	test('clients may not publish removal markers', async () => {
		const res = await publish(stack, alice.sk, {
			kind: 45011, tags: [['ar', '1'], ['d', uuid()], ['h', O], ['reason', 'moved']],
		});
		assertRefused(res, 400, 'invalid: removal markers are relay-signed');
	});

	test('kind 5 naming an artifact revision is refused', async () => {
		const c = await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create' });
		assertRefused(await publish(stack, alice.sk, { kind: 5, tags: [['h', O], ['e', c.id]] }),
			400, 'invalid: artifacts cannot be deleted with kind 5');
	});
});

describe('envelope over HTTP', () => {
	const d = '5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84';
	const cases = [
		[[['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'create'], ['title', 't']], 'invalid: missing ar tag'],
		[[['ar', '1'], ['d', '00000000-0000-0000-0000-000000000000'], ['h', '$O'], ['type', 'a.b'], ['op', 'create'], ['title', 't']],
			'invalid: d must be a canonical non-nil uuid'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'Task'], ['op', 'create'], ['title', 't']],
			'invalid: type must be dot-separated lowercase components of at most 128 bytes'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'create']], 'invalid: missing title tag'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'create'], ['title', '  ']], 'invalid: title must not be blank'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'update'], ['title', 't']], 'invalid: update needs a prev tag'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'create'], ['title', 't'], ['d', d]], 'invalid: duplicate d tag'],
		[[['ar', '1'], ['d', d], ['h', '$O'], ['type', 'a.b'], ['op', 'delete'], ['prev', 'a'.repeat(64)], ['x', 'y']],
			'invalid: delete carries only envelope tags'],
	];
	for (const [tags, message] of cases) {
		test(message, async () => {
			const t = tags.map((tag) => tag.map((v) => (v === '$O' ? O : v)));
			assertRefused(await publish(stack, alice.sk, { kind: 45010, tags: t, content: '' }), 400, message);
		});
	}

	test('the envelope is checked before freshness', async () => {
		const res = await publish(stack, alice.sk, {
			kind: 45010, created_at: now() - 5000,
			tags: [['ar', '1'], ['d', uuid()], ['h', O], ['type', 'a.b'], ['op', 'create']],
		});
		assertRefused(res, 400, 'invalid: missing title tag');
	});
});

describe('existence oracle', () => {
	test('a missing d and a d in an unreadable private channel get byte-identical answers', async () => {
		const hidden = uuid();
		const c = await accept(stack, admin, { d: hidden, h: Q, op: 'create' });
		const hiddenDel = uuid();
		const c2 = await accept(stack, admin, { d: hiddenDel, h: Q, op: 'create' });
		const del = await accept(stack, admin, { d: hiddenDel, h: Q, op: 'delete', prev: c2.id });
		const missing = uuid();
		const t = now();
		const attempts = [
			// [spec on the hidden artifact, spec on the missing one]
			[{ d: hidden, h: Q, op: 'update', prev: c.id }, { d: missing, h: Q, op: 'update', prev: c.id }],
			[{ d: hidden, h: O, op: 'move', prev: c.id }, { d: missing, h: O, op: 'move', prev: c.id }],
			[{ d: hidden, h: Q, op: 'delete', prev: c.id }, { d: missing, h: Q, op: 'delete', prev: c.id }],
			[{ d: hiddenDel, h: Q, op: 'restore', prev: del.id }, { d: missing, h: Q, op: 'restore', prev: del.id }],
			[{ d: hidden, h: Q, op: 'update', prev: randomHex() }, { d: missing, h: Q, op: 'update', prev: randomHex() }],
		];
		for (const [onHidden, onMissing] of attempts) {
			const a = await writeRevision(stack, alice.sk, { ...onHidden, created_at: t });
			const b = await writeRevision(stack, alice.sk, { ...onMissing, created_at: t });
			assert.equal(a.status, 409);
			assert.equal(a.status, b.status);
			assert.equal(a.raw.replace(a.event.id, 'ID'), b.raw.replace(b.event.id, 'ID'));
			assert.equal(a.body.message, HEAD_UNAVAILABLE);
		}
		assert.equal((await head(hidden)).revision, c.id);
	});
});

describe('moves and their removal markers', () => {
	test('a move stores a relay-signed marker in the source with exact tags', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const t0 = now();
		const m = await accept(stack, alice.sk, { d, h: P, op: 'move', prev: c.id });
		const rows = await stack.query(
			`SELECT e.raw, e.channel_id, mv.from_channel, mv.to_channel, mv.replaced_revision, mv.revision_id
			   FROM artifact_moves mv JOIN events e ON e.id = mv.marker_id WHERE mv.d = '${d}'`);
		assert.equal(rows.length, 1);
		const [raw, channel, from, to, replaced, revision] = rows[0];
		assert.deepEqual([channel, from, to, replaced, revision], [O, O, P, c.id, m.id]);
		const marker = JSON.parse(raw);
		assert.equal(marker.kind, 45011);
		assert.equal(marker.pubkey, stack.relayPubkey);
		assert.equal(marker.content, '');
		assert.deepEqual(marker.tags, [['ar', '1'], ['d', d], ['h', O], ['reason', 'moved'], ['prev', c.id]]);
		assert.ok(marker.created_at >= t0 && marker.created_at <= now(), 'created_at is the time of the move');
		assert.ok(verifyEvent(marker), 'the marker verifies');
		assert.ok(!raw.includes(P), 'the marker never names the destination');
	});

	test('repeated moves within a second give distinct markers', async () => {
		const d = uuid();
		let prev = (await accept(stack, alice.sk, { d, h: O, op: 'create' })).id;
		const homes = [O2, O, O2, O];
		for (const h of homes)
			prev = (await accept(stack, alice.sk, { d, h, op: 'move', prev })).id;
		const rows = await stack.query(
			`SELECT marker_id, from_channel FROM artifact_moves WHERE d = '${d}' ORDER BY moved_xid`);
		assert.equal(rows.length, 4);
		assert.equal(new Set(rows.map((r) => r[0])).size, 4);
		assert.deepEqual(rows.map((r) => r[1]), [O, O2, O, O2]);
		const stored = await stack.query(
			`SELECT count(*) FROM events WHERE kind = 45011 AND id IN (${rows.map((r) => `'${r[0]}'`).join(',')})`);
		assert.equal(stored[0][0], '4');
	});

	test('source readers see the marker; destination readers never see source revisions', async () => {
		const d = uuid();
		// created in P (eve cannot read it), moved to O (eve can)
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create', title: 'private draft' });
		const u = await accept(stack, alice.sk, { d, h: P, op: 'update', prev: c.id, title: 'still private' });
		const m = await accept(stack, alice.sk, { d, h: O, op: 'move', prev: u.id, title: 'published' });
		// a reader of the source sees the marker
		const markers = await events(stack, bob.sk, { kinds: [45011], '#h': [P], '#d': [d] });
		assert.equal(markers.length, 1);
		assert.deepEqual(markers[0].tags, [['ar', '1'], ['d', d], ['h', P], ['reason', 'moved'], ['prev', u.id]]);
		// eve reads the destination only: no source revision anywhere
		const hist = await events(stack, eve.sk, { artifact: 'history', '#d': [d] });
		assert.deepEqual(hist.map((e) => e.id), [m.id]);
		const headNow = await events(stack, eve.sk, { artifact: 'head', '#d': [d] });
		assert.deepEqual(headNow.map((e) => e.id), [m.id]);
		const plain = await events(stack, eve.sk, { '#d': [d] });
		assert.deepEqual(plain.map((e) => e.id), [m.id]);
		assert.deepEqual(await events(stack, eve.sk, { kinds: [45011], '#d': [d] }), []);
		// bob reads both: the whole history
		const all = await events(stack, bob.sk, { artifact: 'history', '#d': [d] });
		assert.deepEqual(all.map((e) => e.id), [c.id, u.id, m.id]);
	});
});

describe('concurrency', () => {
	test('20 parallel updates naming the same prev: exactly one wins', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
			writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: `edit ${i}` })));
		const won = results.filter((r) => r.status === 200);
		const lost = results.filter((r) => r.status !== 200);
		assert.equal(won.length, 1, results.map((r) => r.raw).join('\n'));
		assert.equal(lost.length, 19);
		for (const r of lost)
			assertRefused(r, 409, HEAD_CHANGED);
		assert.equal((await head(d)).revision, won[0].event.id);
		const [[n]] = await stack.query(`SELECT count(*) FROM events WHERE d = '${d}'`);
		assert.equal(n, '2');
	});

	test('20 parallel creates of the same d: exactly one wins', async () => {
		const d = uuid();
		const writers = Array.from({ length: 20 }, () => newKey());
		const results = await Promise.all(writers.map((k, i) =>
			writeRevision(stack, k.sk, { d, h: O, op: 'create', title: `create ${i}` })));
		const won = results.filter((r) => r.status === 200);
		assert.equal(won.length, 1, results.map((r) => r.raw).join('\n'));
		for (const r of results.filter((x) => x.status !== 200))
			assertRefused(r, 409, IDENTITY_TAKEN);
		assert.equal((await head(d)).revision, won[0].event.id);
	});

	test('the same update sent 10 times at once is accepted every time and stored once', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const ev = signEvent(alice.sk, {
			kind: 45010, tags: revisionTags({ d, h: O, op: 'update', prev: c.id, title: 'once' }), content: '',
		});
		const results = await Promise.all(Array.from({ length: 10 }, () => publishSigned(stack, alice.sk, ev)));
		for (const r of results)
			assertAccepted(r, 'duplicate');
		const [[n]] = await stack.query(`SELECT count(*) FROM events WHERE d = '${d}'`);
		assert.equal(n, '2');
	});
});

// Plain filters read "#h" by channel: whatever this file stored (every
// artifact operation, its markers, messages, deletions and moderation
// events) names its channel in its h tag.
test('every event stored names its channel in its h tag', async () => {
	assert.deepEqual(await strayChannelEvents(stack), []);
});
