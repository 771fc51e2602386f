// Artifact sync over WebSocket (PROTOCOL.md sections 7 and 10 "Sync"), one
// relay node with comb-capture: the snapshot ordered by d and its EOSE,
// #type and #d, every kind of live change (another client's edit, a delete
// as its delete revision, a move out as the `moved` marker and back in, a
// move between two synced channels as the new revision only, a redaction
// as the `redacted` marker with the sync kept open), nothing for chat
// messages, `resync: access changed` for a removed reader and for a
// channel made private, no close for grants, the refusals (limit, offset,
// other predicates, unreadable or unknown channels without EOSE, a set
// over max_events), a set that grows past max_events, CLOSE, and a slow
// reader closed with `resync: slow consumer` while another subscriber of
// the same channel keeps receiving, and a sync whose re-read runs past the
// statement budget closed with that reason.
//
// Everything is driven through real clients: revisions signed by
// nostr-tools over HTTP, syncs over ws with NIP-42.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, newKey, psqlSession } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, chat, createChannel, editChannel, publish,
	removeMember, tagValue, uuid,
} from './lib/artifacts.mjs';
import { startRelay } from './lib/harness.mjs';

// How long "nothing arrives" is watched for: well above the capture
// round trip (a few ms) on these machines.
const QUIET_MS = 600;
const MAX_EVENTS = 40;

let stack;
let admin;
const reader = newKey();    // member of P
const writer = newKey();    // writes in open channels
const outsider = newKey();  // no membership anywhere
let A, B, C, P;             // open, open, open (never synced together), private
const sockets = [];

before(async () => {
	stack = await startRelay({
		env: { COMB_SYNC_MAX_EVENTS: String(MAX_EVENTS), COMB_WRITE_RATE: '0' },
	});
	admin = stack.admins[0];
	A = await createChannel(stack, admin, { name: 'a' });
	B = await createChannel(stack, admin, { name: 'b' });
	C = await createChannel(stack, admin, { name: 'c' });
	P = await createChannel(stack, admin, { name: 'p', visibility: 'private' });
	await addMember(stack, admin, P, reader.pk);
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

// --- helpers -----------------------------------------------------------------

async function client(sk) {
	const c = await connectWs(stack.url, sk);
	sockets.push(c);
	return c;
}

const plain = (ev) => JSON.parse(JSON.stringify(ev));
const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

// Opens sync id and resolves to its snapshot (the events before EOSE).
async function openSync(c, id, filter) {
	c.send(['REQ', id, filter]);
	const events = [];
	for (;;) {
		const m = await c.next(isFor(id), 10000);
		if (m[0] === 'EOSE')
			return events;
		if (m[0] === 'CLOSED')
			throw new Error(`sync ${id} closed: ${m[2]}`);
		events.push(m[2]);
	}
}

// Sends a sync REQ that must be refused; resolves to the CLOSED reason and
// asserts that nothing else (no EVENT, no EOSE) came first.
async function refusedSync(c, id, filter) {
	c.send(['REQ', id, filter]);
	const m = await c.next(isFor(id), 10000);
	assert.equal(m[0], 'CLOSED', `expected CLOSED for ${id}, got ${JSON.stringify(m).slice(0, 300)}`);
	await c.none(isFor(id), 200);
	return m[2];
}

// The next frame of sync id; asserts it is an EVENT and returns the event.
async function nextEvent(c, id, ms = 5000) {
	const m = await c.next(isFor(id), ms);
	assert.equal(m[0], 'EVENT', `expected an EVENT on ${id}, got ${JSON.stringify(m).slice(0, 300)}`);
	return m[2];
}

async function closedReason(c, id, ms = 5000) {
	const m = await c.next(isFor(id), ms);
	assert.equal(m[0], 'CLOSED', `expected CLOSED on ${id}, got ${JSON.stringify(m).slice(0, 300)}`);
	return m[2];
}

function quiet(c, id, ms = QUIET_MS) {
	return c.none(isFor(id), ms);
}

async function create(h, opts = {}) {
	return accept(stack, opts.sk ?? admin, {
		d: opts.d ?? uuid(), h, op: 'create', type: opts.type ?? 'demo.task',
		title: opts.title ?? 'a task', content: opts.content,
	});
}

function update(rev, opts = {}) {
	return accept(stack, opts.sk ?? admin, {
		d: tagValue(rev, 'd'), h: tagValue(rev, 'h'), op: 'update', prev: rev.id,
		type: tagValue(rev, 'type'), title: opts.title ?? `edit ${crypto.randomBytes(3).toString('hex')}`,
		content: opts.content,
	});
}

function move(rev, to, sk = admin) {
	return accept(stack, sk, {
		d: tagValue(rev, 'd'), h: to, op: 'move', prev: rev.id, type: tagValue(rev, 'type'),
		title: tagValue(rev, 'title') ?? 'moved',
	});
}

function remove(rev, sk = admin) {
	return accept(stack, sk, {
		d: tagValue(rev, 'd'), h: tagValue(rev, 'h'), op: 'delete', prev: rev.id,
		type: tagValue(rev, 'type'), title: null,
	});
}

async function redact(rev, sk = admin) {
	assertAccepted(await publish(stack, sk, { kind: 9005, tags: [['h', tagValue(rev, 'h')], ['e', rev.id]] }),
		`redact ${rev.id}`);
}

const byD = (a, b) => (tagValue(a, 'd') < tagValue(b, 'd') ? -1 : tagValue(a, 'd') > tagValue(b, 'd') ? 1 : 0);

// --- the snapshot ------------------------------------------------------------

describe('snapshot', () => {
	test('the current set of every synced channel, ordered by d, then EOSE', async () => {
		const X = await createChannel(stack, admin, { name: 'x' });
		const Y = await createChannel(stack, admin, { name: 'y' });
		const live = [];
		for (let i = 0; i < 8; i++)
			live.push(await create(i % 2 ? X : Y, { type: i % 3 ? 'demo.task' : 'demo.note' }));
		// edited: only the latest revision is current
		live[0] = await update(live[0]);
		// deleted and redacted ones are absent
		await remove(await create(X));
		await redact(await create(Y));
		// other channels are absent
		await create(C);
		const c = await client(reader.sk);
		const snap = await openSync(c, 'all', { artifact: 'current', '#h': [X, Y] });
		assert.deepEqual(snap.map((e) => e.id), [...live].sort(byD).map((e) => e.id));
		assert.deepEqual(snap, [...live].sort(byD).map(plain));

		const notes = await openSync(c, 'notes', { artifact: 'current', '#h': [X, Y], '#type': ['demo.note'],
			kinds: [45010] });
		assert.deepEqual(notes.map((e) => e.id),
			live.filter((e) => tagValue(e, 'type') === 'demo.note').sort(byD).map((e) => e.id));

		const picked = [live[1], live[4], live[6]];
		const some = await openSync(c, 'some', { artifact: 'current', '#h': [X, Y],
			'#d': [...picked.map((e) => tagValue(e, 'd')), uuid()] });
		assert.deepEqual(some.map((e) => e.id), picked.sort(byD).map((e) => e.id));

		// an empty channel: just EOSE; a duplicated channel counts once
		const E = await createChannel(stack, admin, { name: 'empty' });
		assert.deepEqual(await openSync(c, 'empty', { artifact: 'current', '#h': [E, E] }), []);
	});

	test('TTL channels and unlisted channels named in #h can be synced', async () => {
		const T = await createChannel(stack, admin, { name: 'ttl', ttl: 3600 });
		const U = await createChannel(stack, admin, { name: 'unlisted', visibility: 'unlisted' });
		const t = await create(T);
		const u = await create(U);
		const c = await client(outsider.sk);
		assert.deepEqual((await openSync(c, 'tu', { artifact: 'current', '#h': [T, U] })).map((e) => e.id),
			[t, u].sort(byD).map((e) => e.id));
		const t2 = await update(t);
		assert.equal((await nextEvent(c, 'tu')).id, t2.id);
	});
});

// --- live changes ------------------------------------------------------------

describe('live changes', () => {
	let c;
	let X, Y;

	before(async () => {
		X = await createChannel(stack, admin, { name: 'live x' });
		Y = await createChannel(stack, admin, { name: 'live y' });
		c = await client(reader.sk);
	});

	test('an edit by another client arrives, once', async () => {
		const rev = await create(X, { sk: writer.sk });
		await openSync(c, 'edit', { artifact: 'current', '#h': [X] });
		const edited = await update(rev, { sk: writer.sk });
		assert.deepEqual(await nextEvent(c, 'edit'), plain(edited));
		const created = await create(X, { sk: writer.sk });
		assert.deepEqual(await nextEvent(c, 'edit'), plain(created));
		await quiet(c, 'edit');
		c.send(['CLOSE', 'edit']);
	});

	test('a delete arrives as the delete revision', async () => {
		const rev = await create(X);
		await openSync(c, 'del', { artifact: 'current', '#h': [X] });
		const gone = await remove(rev);
		const ev = await nextEvent(c, 'del');
		assert.equal(ev.id, gone.id);
		assert.equal(tagValue(ev, 'op'), 'delete');
		// and a restore as the restore revision
		const back = await accept(stack, admin, { d: tagValue(rev, 'd'), h: X, op: 'restore', prev: gone.id,
			title: 'back' });
		assert.equal((await nextEvent(c, 'del')).id, back.id);
		await quiet(c, 'del');
		c.send(['CLOSE', 'del']);
	});

	test('a move out arrives as the moved marker, a move back in as the revision', async () => {
		const rev = await create(X);
		await openSync(c, 'mv', { artifact: 'current', '#h': [X] });
		const moved = await move(rev, C);
		const marker = await nextEvent(c, 'mv');
		assert.equal(marker.kind, 45011);
		assert.equal(marker.pubkey, stack.relayPubkey);
		assert.equal(tagValue(marker, 'reason'), 'moved');
		assert.equal(tagValue(marker, 'd'), tagValue(rev, 'd'));
		assert.equal(tagValue(marker, 'h'), X);
		assert.equal(tagValue(marker, 'prev'), rev.id);
		assert.ok(!JSON.stringify(marker).includes(C), 'the marker names the destination');
		await quiet(c, 'mv');
		// edits elsewhere say nothing
		const there = await update(moved);
		await quiet(c, 'mv');
		const home = await move(there, X);
		assert.deepEqual(await nextEvent(c, 'mv'), plain(home));
		await quiet(c, 'mv');
		c.send(['CLOSE', 'mv']);
	});

	test('a move between two synced channels sends only the new revision', async () => {
		const rev = await create(X);
		await openSync(c, 'both', { artifact: 'current', '#h': [X, Y] });
		const moved = await move(rev, Y);
		assert.deepEqual(await nextEvent(c, 'both'), plain(moved));
		await quiet(c, 'both');
		c.send(['CLOSE', 'both']);
	});

	test('one move reaches each sync as its channels say, syncs that held it among syncs that did not', async () => {
		// Woken by the same move, served together: those that held the
		// artifact need its stored move, the others only its new head.
		const rev = await create(X);
		const held = ['from1', 'from2', 'from3'];
		const gaining = ['to1', 'to2', 'to3'];
		for (const id of held)
			await openSync(c, id, { artifact: 'current', '#h': [X] });
		for (const id of gaining)
			await openSync(c, id, { artifact: 'current', '#h': [Y] });
		await openSync(c, 'span', { artifact: 'current', '#h': [X, Y] });
		const moved = await move(rev, Y);
		for (const id of held) {
			const marker = await nextEvent(c, id);
			assert.equal(marker.kind, 45011, `${id} gets the moved marker`);
			assert.equal(tagValue(marker, 'reason'), 'moved');
			assert.equal(tagValue(marker, 'prev'), rev.id);
		}
		for (const id of [...gaining, 'span'])
			assert.deepEqual(await nextEvent(c, id), plain(moved), `${id} gets the new revision`);
		await Promise.all([...held, ...gaining, 'span'].map((id) => quiet(c, id)));
		for (const id of [...held, ...gaining, 'span'])
			c.send(['CLOSE', id]);
	});

	test('a redaction arrives as the redacted marker and the sync stays open', async () => {
		const rev = await update(await create(X));
		await openSync(c, 'red', { artifact: 'current', '#h': [X] });
		await redact(rev);
		const marker = await nextEvent(c, 'red');
		assert.equal(marker.kind, 45011);
		assert.equal(tagValue(marker, 'reason'), 'redacted');
		assert.equal(tagValue(marker, 'e'), rev.id);
		assert.equal(tagValue(marker, 'd'), tagValue(rev, 'd'));
		assert.equal(tagValue(marker, 'op'), 'update');
		assert.equal(tagValue(marker, 'prev'), tagValue(rev, 'prev'));
		assert.equal(tagValue(marker, 'title'), undefined);
		await quiet(c, 'red');
		// the redacted current revision can still be edited
		const later = await update(rev);
		assert.deepEqual(await nextEvent(c, 'red'), plain(later));
		// redacting a revision that is no longer current sends nothing
		const newer = await update(later);
		assert.deepEqual(await nextEvent(c, 'red'), plain(newer));
		await redact(later);
		await quiet(c, 'red');
		c.send(['CLOSE', 'red']);
	});

	test('chat messages, moderation and other kinds cause no frame', async () => {
		await create(X);
		await openSync(c, 'chat', { artifact: 'current', '#h': [X] });
		c.send(['REQ', 'msgs', { kinds: [9], '#h': [X] }]);
		await c.next((m) => m[0] === 'EOSE' && m[1] === 'msgs');
		const msg = await chat(stack, writer.sk, X, 'no frame for this');
		// the signal did flow: the plain REQ got the message
		assert.equal((await c.next((m) => m[0] === 'EVENT' && m[1] === 'msgs')).at(2).id, msg.id);
		await editChannel(stack, admin, X, [['name', 'renamed']]);
		await addMember(stack, admin, X, newKey().pk);
		await quiet(c, 'chat');
		c.send(['CLOSE', 'chat']);
		c.send(['CLOSE', 'msgs']);
	});

	test('after CLOSE nothing more arrives', async () => {
		const rev = await create(X);
		await openSync(c, 'gone', { artifact: 'current', '#h': [X] });
		c.send(['CLOSE', 'gone']);
		await update(rev);
		await quiet(c, 'gone');
	});

	test('a REQ with the id of an open sync replaces it', async () => {
		const rev = await create(X);
		await openSync(c, 'again', { artifact: 'current', '#h': [Y] });
		const snap = await openSync(c, 'again', { artifact: 'current', '#h': [X] });
		assert.ok(snap.some((e) => e.id === rev.id));
		const edited = await update(rev);
		assert.equal((await nextEvent(c, 'again')).id, edited.id);
		await quiet(c, 'again');
		c.send(['CLOSE', 'again']);
	});
});

// --- access ------------------------------------------------------------------

describe('access', () => {
	test('removing the reader closes the sync with resync: access changed', async () => {
		const R = await createChannel(stack, admin, { name: 'r', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, R, who.pk);
		await create(R);
		const c = await client(who.sk);
		await openSync(c, 'mine', { artifact: 'current', '#h': [R, A] });
		await removeMember(stack, admin, R, who.pk);
		assert.equal(await closedReason(c, 'mine'), 'resync: access changed');
		// and reopening is refused now
		assert.equal(await refusedSync(c, 'mine', { artifact: 'current', '#h': [R] }),
			'restricted: not a channel member');
	});

	test('leaving closes the sync', async () => {
		const L = await createChannel(stack, admin, { name: 'leave', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, L, who.pk);
		const c = await client(who.sk);
		await openSync(c, 'left', { artifact: 'current', '#h': [L] });
		assertAccepted(await publish(stack, who.sk, { kind: 9022, tags: [['h', L]] }), 'leave');
		assert.equal(await closedReason(c, 'left'), 'resync: access changed');
	});

	test('a visibility change that makes a channel unreadable closes the sync', async () => {
		const V = await createChannel(stack, admin, { name: 'v' });
		await create(V);
		const c = await client(outsider.sk);
		await openSync(c, 'vis', { artifact: 'current', '#h': [V] });
		await editChannel(stack, admin, V, [['visibility', 'private']]);
		assert.equal(await closedReason(c, 'vis'), 'resync: access changed');
	});

	test('deleting a channel closes the sync', async () => {
		const D = await createChannel(stack, admin, { name: 'doomed' });
		const c = await client(outsider.sk);
		await openSync(c, 'doom', { artifact: 'current', '#h': [D] });
		assertAccepted(await publish(stack, admin, { kind: 9008, tags: [['h', D]] }), 'delete channel');
		assert.equal(await closedReason(c, 'doom'), 'resync: access changed');
	});

	test('a channel made private closes only the syncs of readers who lost it, among several readers\' syncs', async () => {
		const S = await createChannel(stack, admin, { name: 'shared' });
		const gone = newKey(), kept = newKey();
		await addMember(stack, admin, S, kept.pk);
		const rev = await create(S);
		// two connections per reader, each with two syncs of the channel:
		// one channel signal checks all eight in one access query
		const syncs = [];
		for (const who of [gone, kept, gone, kept]) {
			const c = await client(who.sk);
			for (const id of ['s1', 's2']) {
				await openSync(c, id, { artifact: 'current', '#h': [S] });
				syncs.push({ c, id, who });
			}
		}
		await editChannel(stack, admin, S, [['visibility', 'private']]);
		const edited = await update(rev);
		for (const { c, id, who } of syncs) {
			if (who === gone)
				assert.equal(await closedReason(c, id), 'resync: access changed');
			else
				assert.deepEqual(await nextEvent(c, id), plain(edited));
		}
	});

	test('grants and other members\' changes never close a sync', async () => {
		const G = await createChannel(stack, admin, { name: 'g', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, G, who.pk);
		const rev = await create(G);
		const c = await client(who.sk);
		await openSync(c, 'grant', { artifact: 'current', '#h': [G] });
		await addMember(stack, admin, G, newKey().pk);               // someone else
		await addMember(stack, admin, G, who.pk, 'admin');            // a promotion
		await editChannel(stack, admin, G, [['visibility', 'open']]); // wider
		await editChannel(stack, admin, G, [['archived', 'true']]);   // still readable
		await quiet(c, 'grant');
		await editChannel(stack, admin, G, [['archived', 'false']]);
		const edited = await update(rev);
		assert.deepEqual(await nextEvent(c, 'grant'), plain(edited));
	});
});

// --- a re-read that fails ----------------------------------------------------

describe('a re-read the database cannot answer', () => {
	test('closes the sync with the reason instead of leaving it stale; a new sync is whole', async () => {
		const F = await createChannel(stack, admin, { name: 'failing re-read' });
		const rev = await create(F);
		const c = await client(reader.sk);
		await openSync(c, 'fail', { artifact: 'current', '#h': [F] });
		// The re-read of a changed head joins artifact_redactions, which
		// an edit does not touch: a lock on it holds the re-read past the
		// statement budget (2 s) while the edit is stored.
		const lock = psqlSession(stack.dbName);
		let edited;
		try {
			await lock.run('BEGIN; LOCK TABLE artifact_redactions IN ACCESS EXCLUSIVE MODE;');
			edited = await update(rev);
			assert.equal(await closedReason(c, 'fail'), 'error: query budget exceeded');
		} finally {
			await lock.close();
		}
		// The node's connections serve the next sync, which holds the edit.
		const again = await openSync(c, 'again', { artifact: 'current', '#h': [F] });
		assert.deepEqual(again.map((e) => e.id), [edited.id]);
		const later = await update(edited);
		assert.deepEqual(await nextEvent(c, 'again'), plain(later));
		c.send(['CLOSE', 'again']);
	});
});

// --- refusals ----------------------------------------------------------------

describe('refusals', () => {
	let c;

	before(async () => {
		c = await client(outsider.sk);
	});

	test('limit, offset and any other predicate are refused with invalid', async () => {
		assert.equal(await refusedSync(c, 'l', { artifact: 'current', '#h': [A], limit: 10 }),
			'invalid: a sync takes no limit');
		assert.equal(await refusedSync(c, 'o', { artifact: 'current', '#h': [A], offset: 0 }),
			'invalid: a sync takes no offset');
		for (const extra of [{ '#status': ['open'] }, { '#p': ['0'.repeat(64)] }, { since: 1 },
			{ authors: ['0'.repeat(64)] }, { color: 'blue' }]) {
			assert.match(await refusedSync(c, 'x', { artifact: 'current', '#h': [A], ...extra }),
				/^invalid: a sync filter may hold only #h, #type, #d and kinds$/, JSON.stringify(extra));
		}
		assert.match(await refusedSync(c, 'k', { artifact: 'current', '#h': [A], kinds: [9] }), /^invalid: /);
		assert.match(await refusedSync(c, 'u', { artifact: 'current', '#h': ['not-a-uuid'] }), /^invalid: /);
		assert.match(await refusedSync(c, 'e', { artifact: 'current', '#h': [] }), /^invalid: /);
	});

	test('an unreadable or unknown channel is refused without EOSE', async () => {
		await create(P);
		assert.equal(await refusedSync(c, 'p', { artifact: 'current', '#h': [P] }),
			'restricted: not a channel member');
		assert.equal(await refusedSync(c, 'ap', { artifact: 'current', '#h': [A, P] }),
			'restricted: not a channel member');
		assert.equal(await refusedSync(c, 'none', { artifact: 'current', '#h': [uuid()] }),
			'restricted: not a channel member');
		// the member may
		const m = await client(reader.sk);
		assert.ok((await openSync(m, 'p', { artifact: 'current', '#h': [P] })).length >= 1);
	});

	test('a set over max_events is refused; one that grows past it is closed', async () => {
		const S = await createChannel(stack, admin, { name: 'big' });
		let last;
		for (let i = 0; i < MAX_EVENTS; i++)
			last = await create(S);
		const snap = await openSync(c, 'full', { artifact: 'current', '#h': [S] });
		assert.equal(snap.length, MAX_EVENTS);
		// a new revision of a known artifact is fine
		const edited = await update(last);
		assert.equal((await nextEvent(c, 'full')).id, edited.id);
		await create(S);
		assert.equal(await closedReason(c, 'full'), 'resync: sync set too large');
		assert.equal(await refusedSync(c, 'over', { artifact: 'current', '#h': [S] }),
			'invalid: sync set too large');
		// #type narrows the set below the limit
		await create(S, { type: 'demo.small' });
		assert.equal((await openSync(c, 'narrow', { artifact: 'current', '#h': [S], '#type': ['demo.small'] }))
			.length, 1);
	});

	test('a sync needs authentication', async () => {
		const anon = await connectWs(stack.url, null);
		sockets.push(anon);
		assert.match(await refusedSync(anon, 's', { artifact: 'current', '#h': [A] }), /^auth-required: /);
	});
});

// --- a slow reader -------------------------------------------------------------

describe('a slow reader', () => {
	test('gets resync: slow consumer while another subscriber keeps receiving', async () => {
		const S = await createChannel(stack, admin, { name: 'slow' });
		const big = 'x'.repeat(60000);
		const revs = [];
		for (let i = 0; i < 8; i++)
			revs.push(await create(S, { content: big }));
		const slow = await client(newKey().sk);
		const fast = await client(newKey().sk);
		await openSync(slow, 'slow', { artifact: 'current', '#h': [S] });
		await openSync(fast, 'fast', { artifact: 'current', '#h': [S] });
		const received = [];
		fast.ws.on('message', (data) => {
			const m = JSON.parse(data.toString());
			if (m[0] === 'EVENT' && m[1] === 'fast')
				received.push(m[2].id);
		});
		// The slow client stops reading: its TCP buffers and then its
		// outbound queue on the relay fill up.
		slow.ws.pause();
		const ids = [];
		const position = new Map();  // revision id -> [d, index in its chain]
		let closedAt = null;
		const t0 = Date.now();
		// about 16 MB of revisions, well above socket buffers and the queue
		for (let round = 0; round < 35; round++) {
			const next = await Promise.all(revs.map((r) => update(r, { content: big })));
			for (let i = 0; i < revs.length; i++) {
				revs[i] = next[i];
				ids.push(next[i].id);
				position.set(next[i].id, [i, round]);
			}
		}
		const lastWrite = Date.now();
		// the fast subscriber got the last revision of every artifact,
		// promptly (one a re-read finds superseded already is not sent: a
		// sync sends what is current), and never an older revision of an
		// artifact after a newer one
		const last = revs.map((r) => r.id);
		for (;;) {
			if (last.every((id) => received.includes(id)))
				break;
			assert.ok(Date.now() - lastWrite < 15000,
				`the fast subscriber lacks the last revision of ${last.filter((id) => !received.includes(id)).length} artifacts`);
			await new Promise((r) => setTimeout(r, 20));
		}
		const fastRound = new Map();
		for (const id of received) {
			if (!position.has(id))
				continue;
			const [i, round] = position.get(id);
			assert.ok(!fastRound.has(i) || fastRound.get(i) < round,
				'the fast subscriber got an older revision after a newer one');
			fastRound.set(i, round);
		}
		const caughtUp = Date.now() - lastWrite;
		// (generous: a loaded CI machine; the slow reader's stall costs the
		// fast one nothing, which is what this checks)
		assert.ok(caughtUp < 10000, `the fast subscriber lagged ${caughtUp} ms behind the writes`);
		// the slow one reads again and finds its sync closed
		slow.ws.resume();
		const seen = [];
		for (;;) {
			const m = await slow.next(isFor('slow'), 10000);
			if (m[0] === 'CLOSED') {
				closedAt = Date.now();
				assert.equal(m[2], 'resync: slow consumer');
				break;
			}
			seen.push(m[2].id);
		}
		assert.ok(seen.length < ids.length, 'the slow reader was never cut off');
		// what it got before was in order: never an older revision after a newer one
		const lastRound = new Map();
		for (const id of seen) {
			if (!position.has(id))
				continue;
			const [i, round] = position.get(id);
			assert.ok(!lastRound.has(i) || lastRound.get(i) < round, 'an older revision after a newer one');
			lastRound.set(i, round);
		}
		assert.ok(closedAt >= t0);
		// the connection itself still works: a new sync opens
		assert.equal((await openSync(slow, 'again', { artifact: 'current', '#h': [S] })).length, revs.length);
	});
});
