// Authorization leak tests (issue 7 item 4; PROTOCOL.md sections 1, 4, 6,
// 7, 8 and 10). Two private channels C and D of community A hold chat
// messages, a chat redaction, artifacts that are edited, deleted, restored,
// redacted and moved between them, and their removal markers. Three
// outsiders then try every read surface on A:
//   - a non-member authenticated in A (`stranger`);
//   - a member of C removed before the second half of the history
//     (`removed`), who keeps the cursors and sockets of their member days;
//   - a member of community B's channel that has C's UUID and holds an
//     artifact with one of C's artifact UUIDs (`foreigner`).
// Surfaces: plain /query and /count (named channel, ids, #d, #e, broad),
// artifact current, count, head and history, incremental first reads,
// cursor reads and known-ID reads, WebSocket plain REQ stored events and
// live delivery, and syncs (refusals, live frames of a sync on an open
// channel an artifact leaves for C, a member's sync when it is removed).
// Nothing of C or D may reach an outsider, and where the protocol says a
// denial looks like absence, the answer is byte for byte the one for a
// channel or artifact that does not exist. A member of C and D reads the
// same surfaces as a positive control, so no check passes for want of
// data.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, newKey, post, pubkeyOf, signEvent, startRelay, strayChannelEvents } from './lib/harness.mjs';

const A = 'localhost';
const B = 'b.example';
// How long "nothing arrives" is watched for after the barrier event.
const QUIET_MS = 700;
const ALL_KINDS = [5, 9, 9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022, 45010, 45011];

let stack;
let adminA;
let adminB;
const member = newKey();    // member of C and D throughout: the positive control
const removed = newKey();   // member of C until phase 2
const stranger = newKey();  // authenticated in A, never a member
const foreigner = newKey(); // member of B's channel that has C's UUID

let C;                      // private channels of A
let D;
let O;                      // open channel of A: something readable for all
const privateIds = new Set();     // every event of A's C and D
const privateDs = new Set();      // every artifact that ever lived in C or D
const redactedIds = new Set();    // redacted chat messages and revisions
const foreignIds = new Set();     // events of B
const art = {};                   // name -> {d, h, last}
let openArtifact;                 // an artifact of O
let leaver;                       // an artifact of O moved into C in phase 2
let shared;                       // the artifact UUID used in A's C and B's C

// Outsiders' state from phase 1: cursors, sockets, what `removed` held.
const outsiders = {};
const sockets = [];

// --- clients -------------------------------------------------------------------

function nonce() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function publish(host, sk, template) {
	const ev = signEvent(sk, { content: crypto.randomBytes(6).toString('hex'), ...template });
	const r = await post(stack.url, '/events', ev, sk, { host, ...nonce() });
	assert.deepEqual(r.json(), { id: ev.id, accepted: true, message: '' },
		`${template.kind} on ${host}: ${r.body}`);
	return ev;
}

// Publishes into A; every event naming C or D is private.
async function inA(template) {
	const ev = await publish(A, adminA, template);
	const h = ev.tags.find((t) => t[0] === 'h')?.[1];
	if (h === C || h === D)
		privateIds.add(ev.id);
	return ev;
}

async function createChannel(host, sk, id, visibility) {
	return publish(host, sk, { kind: 9007, tags: [['h', id], ['name', `channel ${id.slice(0, 8)}`],
		['visibility', visibility]] });
}

function revision({ d, h, op, prev, title = 'a task' }) {
	const tags = [['ar', '1'], ['d', d], ['h', h], ['type', 'demo.task'], ['op', op]];
	if (prev)
		tags.push(['prev', prev]);
	if (op !== 'delete')
		tags.push(['title', title], ['status', 'open']);
	return { kind: 45010, tags, content: op === 'delete' ? '' : `secret content of ${d}` };
}

// Creates or changes artifact `name` of A (admin signs).
async function artifact(name, op, h) {
	if (op === 'create') {
		art[name] = { d: art[name]?.d ?? crypto.randomUUID(), h };
		privateDs.add(art[name].d);
	}
	const a = art[name];
	const ev = await inA(revision({ d: a.d, h: h ?? a.h, op, prev: a.last?.id }));
	a.last = ev;
	a.h = h ?? a.h;
	return ev;
}

async function read(host, sk, path, filter) {
	const r = await post(stack.url, path, [filter], sk, { host, ...nonce() });
	return { status: r.status, raw: r.body, body: JSON.parse(r.body) };
}

async function readOk(host, sk, path, filter) {
	const r = await read(host, sk, path, filter);
	assert.equal(r.status, 200, `${path} ${JSON.stringify(filter)}: ${r.raw}`);
	return r;
}

// A read returns only changes below the horizon of every transaction still
// running: wait until it has passed a transaction id taken now.
async function settle() {
	const [[x]] = await stack.query('SELECT pg_current_xact_id()::text');
	for (let i = 0; i < 2000; i++) {
		const [[ok]] = await stack.query(
			`SELECT pg_snapshot_xmin(pg_current_snapshot()) > '${x}'::xid8`);
		if (ok === 't')
			return;
		await new Promise((r) => setTimeout(r, 5));
	}
	throw new Error('the horizon never passed the last write');
}

// Every change of an incremental read, following `more`.
async function incremental(host, sk, filter) {
	const changes = [];
	let cursor = filter.cursor;
	for (let i = 0; i < 100; i++) {
		const f = { artifact: 'incremental', ...filter };
		if (cursor)
			f.cursor = cursor;
		const r = await readOk(host, sk, '/query', f);
		changes.push(...r.body.changes);
		cursor = r.body.cursor;
		if (!r.body.more)
			return { changes, cursor };
	}
	throw new Error('incremental read never finished');
}

async function socket(sk, host = A) {
	const c = await connectWs(stack.url, sk, { host });
	sockets.push(c);
	return c;
}

// Opens REQ id and returns every message up to and including EOSE.
async function req(c, id, ...filters) {
	c.send(['REQ', id, ...filters]);
	const got = [];
	for (;;) {
		const m = await c.next((x) => ['EVENT', 'EOSE', 'CLOSED'].includes(x[0]) && x[1] === id);
		got.push(m);
		if (m[0] !== 'EVENT')
			return got;
	}
}

// --- what counts as a leak ------------------------------------------------------

const tagOf = (e, name) => e.tags.find((t) => t[0] === name)?.[1];

function leaks(e) {
	return privateIds.has(e.id) || foreignIds.has(e.id) ||
		[C, D].includes(tagOf(e, 'h')) || privateDs.has(tagOf(e, 'd')) ||
		privateIds.has(tagOf(e, 'e'));
}

function assertNoLeak(events, what) {
	const bad = events.filter(leaks);
	assert.deepEqual(bad, [], `${what} leaked ${bad.length} event(s)`);
}

function changeD(c) {
	return c.op === 'upsert' ? tagOf(c.event, 'd') : c.d;
}

// Random stand-ins: the same shape as the private values, naming nothing.
const fresh = () => crypto.randomUUID();
const freshHex = () => crypto.randomBytes(32).toString('hex');

// --- the history -----------------------------------------------------------------

before(async () => {
	stack = await startRelay({ communities: [{ hosts: [A] }, { hosts: [B] }] });
	[adminA, adminB] = stack.admins;
	C = fresh();
	D = fresh();
	O = fresh();
	privateIds.add((await createChannel(A, adminA, C, 'private')).id);
	privateIds.add((await createChannel(A, adminA, D, 'private')).id);
	await createChannel(A, adminA, O, 'open');
	await inA({ kind: 9000, tags: [['h', C], ['p', member.pk]] });
	await inA({ kind: 9000, tags: [['h', D], ['p', member.pk]] });
	await inA({ kind: 9000, tags: [['h', C], ['p', removed.pk]] });

	// Phase 1: chat, a chat redaction, artifacts in every state.
	await inA({ kind: 9, tags: [['h', C]], content: 'secret chat one' });
	const gone = await inA({ kind: 9, tags: [['h', C]], content: 'secret chat two' });
	redactedIds.add(gone.id);
	await inA({ kind: 9005, tags: [['h', C], ['e', gone.id]] });
	await artifact('a1', 'create', C);
	await artifact('a2', 'create', C);
	await artifact('a2', 'update');
	await artifact('a3', 'create', C);
	await artifact('a3', 'delete');
	const r4 = await artifact('a4', 'create', C);
	redactedIds.add(r4.id);
	await inA({ kind: 9005, tags: [['h', C], ['e', r4.id]] });
	await artifact('a5', 'create', C);
	await artifact('a6', 'create', C);
	await artifact('a6', 'move', D);     // a moved marker in C
	await artifact('a7', 'create', D);
	shared = art.a1.d;
	const open = await publish(A, adminA, revision({ d: fresh(), h: O, op: 'create' }));
	openArtifact = { d: tagOf(open, 'd'), id: open.id };
	const left = await publish(A, adminA, revision({ d: fresh(), h: O, op: 'create' }));
	leaver = { d: tagOf(left, 'd'), id: left.id };

	// Community B: a channel with C's UUID holding an artifact with a1's UUID.
	foreignIds.add((await createChannel(B, adminB, C, 'private')).id);
	foreignIds.add((await publish(B, adminB, { kind: 9000, tags: [['h', C], ['p', foreigner.pk]] })).id);
	foreignIds.add((await publish(B, adminB, { kind: 9, tags: [['h', C]], content: 'b chat' })).id);
	foreignIds.add((await publish(B, adminB, revision({ d: shared, h: C, op: 'create', title: 'b task' }))).id);

	// Cursors and sockets of phase 1 (removed is still a member here).
	await settle();
	for (const [name, key] of [['stranger', stranger], ['removed', removed], ['foreigner', foreigner]]) {
		const o = { key };
		o.broad = await incremental(A, key.sk, {});
		o.scoped = await incremental(A, key.sk, { '#h': [C, D] });
		o.ws = await socket(key.sk);
		o.stored = [
			...await req(o.ws, 'named', { '#h': [C, D] }),
			...await req(o.ws, 'broad', { kinds: ALL_KINDS, limit: 1000 }),
			...await req(o.ws, 'ids', { '#d': [...privateDs] }),
		];
		// Syncs on their own socket: a sync of the open channel, and
		// the removed member's sync of C while still a member.
		o.syncWs = await socket(key.sk);
		o.openSync = await req(o.syncWs, 'open', { artifact: 'current', '#h': [O] });
		if (name === 'removed')
			o.mineSync = await req(o.syncWs, 'mine', { artifact: 'current', '#h': [C] });
		outsiders[name] = o;
	}
	const control = await socket(member.sk);
	await req(control, 'named', { '#h': [C, D] });
	const controlSync = await socket(member.sk);
	const snapshot = await req(controlSync, 'sync', { artifact: 'current', '#h': [C, D] });
	outsiders.control = { ws: control, syncWs: controlSync, snapshot };

	// The removal, then phase 2: edits, a create, a delete, a restore, a
	// redaction of a current revision, moves both ways, chat and its
	// redaction, a rename.
	await inA({ kind: 9001, tags: [['h', C], ['p', removed.pk]] });
	await artifact('a1', 'update');
	const r1 = await artifact('a1', 'update');
	redactedIds.add(r1.id);
	await inA({ kind: 9005, tags: [['h', C], ['e', r1.id]] });
	await artifact('a2', 'delete');
	await artifact('a3', 'restore');
	await artifact('a5', 'move', D);
	await artifact('a7', 'move', C);
	await artifact('a8', 'create', C);
	const moved = await inA(revision({ d: leaver.d, h: C, op: 'move', prev: leaver.id }));
	const late = await inA({ kind: 9, tags: [['h', C]], content: 'secret chat three' });
	redactedIds.add(late.id);
	await inA({ kind: 9005, tags: [['h', C], ['e', late.id]] });
	await inA({ kind: 9002, tags: [['h', C], ['name', 'renamed secret']] });
	// The barrier: once the member has this live, every earlier event has
	// been dispatched to every subscription.
	const barrier = await inA({ kind: 9, tags: [['h', C]], content: 'last' });
	await control.next((m) => m[0] === 'EVENT' && m[1] === 'named' && m[2].id === barrier.id, 10000);
	await controlSync.next((m) => m[0] === 'EVENT' && m[1] === 'sync' && m[2].id === moved.id, 10000);
	await new Promise((r) => setTimeout(r, QUIET_MS));

	// Relay-signed markers are private too: the member finds them.
	const markers = await readOk(A, member.sk, '/query', { kinds: [45011], '#h': [C, D] });
	assert.ok(markers.body.length >= 3, 'moved and redacted markers exist');
	for (const m of markers.body)
		privateIds.add(m.id);
	await settle();
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

// --- the positive control ----------------------------------------------------------

test('the member reads the private history on every surface (the checks below are not vacuous)', async () => {
	const named = await readOk(A, member.sk, '/query', { '#h': [C, D], limit: 1000 });
	assert.ok(named.body.length >= 20, `member sees ${named.body.length} events`);
	const current = await readOk(A, member.sk, '/query', { artifact: 'current', '#h': [C, D] });
	assert.deepEqual(current.body.map((e) => tagOf(e, 'd')).sort(),
		[art.a3.d, art.a5.d, art.a6.d, art.a7.d, art.a8.d, leaver.d].sort());
	const head = await readOk(A, member.sk, '/query', { artifact: 'head', '#d': [...privateDs] });
	assert.equal(head.body.length, privateDs.size);
	const hist = await readOk(A, member.sk, '/query', { artifact: 'history', '#d': [art.a1.d] });
	assert.equal(hist.body.length, 3);
	const known = await readOk(A, member.sk, '/query', { artifact: 'incremental', '#d': [art.a8.d] });
	assert.equal(known.body.changes[0].op, 'upsert');
	assert.ok(outsiders.control.ws.queue.some((m) => m[0] === 'EVENT' && leaks(m[2])),
		'the member got live events of C');
	const snap = outsiders.control.snapshot;
	assert.deepEqual(snap.at(-1), ['EOSE', 'sync']);
	assert.deepEqual(snap.slice(0, -1).map((m) => tagOf(m[2], 'd')).sort(),
		[art.a1.d, art.a2.d, art.a5.d, art.a6.d, art.a7.d].sort());
});

// --- the outsiders ---------------------------------------------------------------

const who = [
	['a non-member', 'stranger'],
	['a removed member', 'removed'],
	['a member of another community', 'foreigner'],
];

for (const [label, name] of who) {
	describe(`${label} reads nothing of a private channel`, () => {
		const sk = () => outsiders[name].key.sk;

		// The answer for the private values and for fresh ones of the
		// same shape must be the same bytes.
		async function sameAsAbsent(path, filter, absent) {
			const got = await read(A, sk(), path, filter);
			const none = await read(A, sk(), path, absent);
			assert.equal(got.status, 200, got.raw);
			assert.equal(got.raw, none.raw, `${path} ${JSON.stringify(filter).slice(0, 200)}`);
			return got;
		}

		test('plain /query and /count answer as for a channel that does not exist', async () => {
			const ids = [...privateIds];
			const probes = [
				[{ '#h': [C] }, { '#h': [fresh()] }],
				[{ '#h': [C, D], kinds: ALL_KINDS, limit: 1000 }, { '#h': [fresh(), fresh()], kinds: ALL_KINDS, limit: 1000 }],
				[{ ids }, { ids: ids.map(freshHex) }],
				[{ '#d': [...privateDs] }, { '#d': [...privateDs].map(fresh) }],
				[{ '#e': [...redactedIds] }, { '#e': [...redactedIds].map(freshHex) }],
				[{ authors: [pubkeyOf(adminA)], '#h': [C] }, { authors: [pubkeyOf(adminA)], '#h': [fresh()] }],
			];
			for (const [filter, absent] of probes) {
				const q = await sameAsAbsent('/query', filter, absent);
				assert.equal(q.raw, '[]');
				const c = await sameAsAbsent('/count', filter, absent);
				assert.deepEqual(c.body, { count: 0 });
			}
		});

		test('a broad plain query returns open events and nothing private', async () => {
			const r = await readOk(A, sk(), '/query', { kinds: ALL_KINDS, limit: 1000 });
			assertNoLeak(r.body, 'broad query');
			assert.ok(r.body.some((e) => e.id === openArtifact.id), 'the open channel is readable');
		});

		test('artifact current, count, head and history answer as for artifacts that do not exist', async () => {
			const ds = [...privateDs];
			const freshDs = ds.map(fresh);
			for (const [filter, absent] of [
				[{ artifact: 'current', '#h': [C] }, { artifact: 'current', '#h': [fresh()] }],
				[{ artifact: 'current', '#h': [C, D], '#status': ['open'] }, { artifact: 'current', '#h': [fresh(), fresh()], '#status': ['open'] }],
				[{ artifact: 'current', '#d': ds }, { artifact: 'current', '#d': freshDs }],
				[{ artifact: 'head', '#d': ds }, { artifact: 'head', '#d': freshDs }],
				[{ artifact: 'history', '#d': ds }, { artifact: 'history', '#d': freshDs }],
				[{ artifact: 'history', '#d': [shared], '#h': [C] }, { artifact: 'history', '#d': [fresh()], '#h': [fresh()] }],
			]) {
				const q = await sameAsAbsent('/query', filter, absent);
				assert.equal(q.raw, '[]');
				const c = await sameAsAbsent('/count', filter, absent);
				assert.deepEqual(c.body, { count: 0 });
			}
			const broad = await readOk(A, sk(), '/query', { artifact: 'current', limit: 1000 });
			assertNoLeak(broad.body, 'broad current');
			assert.ok(broad.body.some((e) => e.id === openArtifact.id));
		});

		test('incremental first reads and known-ID reads answer as for nothing at all', async () => {
			// A scoped first read: no changes, as for a channel that does
			// not exist (the cursors differ only by the scope they bind).
			const got = await readOk(A, sk(), '/query', { artifact: 'incremental', '#h': [C, D] });
			const none = await readOk(A, sk(), '/query', { artifact: 'incremental', '#h': [fresh(), fresh()] });
			assert.deepEqual(got.body.changes, []);
			assert.equal(got.raw.replace(got.body.cursor, ''), none.raw.replace(none.body.cursor, ''));
			// A broad first read: the open artifact only.
			const broad = await incremental(A, sk(), {});
			assert.deepEqual(broad.changes.filter((c) => privateDs.has(changeD(c))), []);
			assert.ok(broad.changes.some((c) => changeD(c) === openArtifact.d));
			// Known-ID: every private id is an `access` removal without h,
			// byte for byte the answer for unknown ids.
			const ds = [...privateDs];
			const freshDs = ds.map(fresh);
			const known = await readOk(A, sk(), '/query', { artifact: 'incremental', '#d': ds });
			const unknown = await readOk(A, sk(), '/query', { artifact: 'incremental', '#d': freshDs });
			let substituted = known.raw;
			ds.forEach((d, i) => { substituted = substituted.replaceAll(d, freshDs[i]); });
			assert.equal(substituted, unknown.raw);
			assert.deepEqual(known.body.changes, ds.map((d) => ({ op: 'remove', d, reason: 'access' })));
			// Known-ID scoped to the channel: the same.
			const scoped = await readOk(A, sk(), '/query', { artifact: 'incremental', '#d': ds, '#h': [C] });
			const scopedNone = await readOk(A, sk(), '/query', { artifact: 'incremental', '#d': freshDs, '#h': [fresh()] });
			substituted = scoped.raw;
			ds.forEach((d, i) => { substituted = substituted.replaceAll(d, freshDs[i]); });
			assert.equal(substituted, scopedNone.raw);
		});

		test('incremental cursor reads from before the history carry nothing new', async () => {
			const o = outsiders[name];
			// What a member of C could know of when it was removed: the
			// artifacts whose home was C then (a3 deleted and a4 redacted
			// included: head and history showed them to members). Nothing
			// created or moved into C later may be named.
			const known = name === 'removed' ?
				new Set([art.a1.d, art.a2.d, art.a3.d, art.a4.d, art.a5.d]) : new Set();
			const nameOf = (d) => Object.keys(art).find((k) => art[k].d === d);
			for (const [what, first] of [['scoped', o.scoped], ['broad', o.broad]]) {
				// What this reader held after phase 1 (only `removed` held anything).
				const held = new Set(first.changes.filter((c) => c.op === 'upsert' &&
					privateDs.has(changeD(c))).map(changeD));
				if (name === 'removed')
					assert.deepEqual([...held].sort(), [art.a1.d, art.a2.d, art.a5.d].sort(), what);
				else
					assert.equal(held.size, 0);
				const filter = what === 'scoped' ? { '#h': [C, D] } : {};
				const next = await incremental(A, o.key.sk, { ...filter, cursor: first.cursor });
				const privateChanges = next.changes.filter((c) => privateDs.has(changeD(c)));
				// Only the loss of access, as an `access` removal from C of
				// what the reader could know of: no upsert, no other reason
				// (a5 moved and a2 deleted after the removal: the reader
				// must not learn that), nothing about a7 or a8.
				for (const c of privateChanges)
					assert.deepEqual({ ...c, name: nameOf(c.d) },
						{ op: 'remove', d: c.d, h: C, reason: 'access', name: nameOf(c.d) }, what);
				assert.deepEqual([...new Set(privateChanges.map((c) => nameOf(c.d)))].sort(),
					[...known].map(nameOf).sort(), what);
				// The open artifact that moved into C: a `moved` removal from
				// O for broad reads (it left a readable channel), never
				// naming C; nothing for reads scoped to C and D.
				assert.deepEqual(next.changes.filter((c) => changeD(c) === leaver.d),
					what === 'broad' ? [{ op: 'remove', d: leaver.d, h: O, reason: 'moved' }] : [], what);
				// And then nothing at all, whatever changes meanwhile.
				await artifact('a8', 'update');
				await settle();
				const after = await incremental(A, o.key.sk, { ...filter, cursor: next.cursor });
				assert.deepEqual(after.changes.filter((c) => privateDs.has(changeD(c))), []);
			}
		});

		test('WebSocket REQ: stored events as for a channel that does not exist, and no live event', async () => {
			const o = outsiders[name];
			// Stored events from phase 1: only `removed`, then a member,
			// saw C; nobody saw D.
			const stored = o.stored.filter((m) => m[0] === 'EVENT').map((m) => m[2]);
			if (name === 'removed')
				assert.ok(stored.some((e) => tagOf(e, 'h') === C));
			else
				assert.deepEqual(stored.filter(leaks), []);
			assert.deepEqual(stored.filter((e) => tagOf(e, 'h') === D), []);
			// Live: nothing of phase 2 (after the removal) reached any
			// subscription, even those opened while a member.
			const live = o.ws.drain().filter((m) => m[0] === 'EVENT').map((m) => m[2]);
			assertNoLeak(live, 'live delivery');
			// A new REQ now: the same frames as for a channel that does not exist.
			const c = await socket(o.key.sk);
			const ids = [...privateIds];
			for (const [filter, absent] of [
				[{ '#h': [C] }, { '#h': [fresh()] }],
				[{ '#h': [C, D], kinds: ALL_KINDS }, { '#h': [fresh(), fresh()], kinds: ALL_KINDS }],
				[{ ids }, { ids: ids.map(freshHex) }],
				[{ '#d': [...privateDs] }, { '#d': [...privateDs].map(fresh) }],
			]) {
				assert.deepEqual(await req(c, 'probe', filter), [['EOSE', 'probe']]);
				assert.deepEqual(await req(c, 'probe', absent), [['EOSE', 'probe']]);
			}
			const broad = await req(c, 'broad', { kinds: ALL_KINDS, limit: 1000 });
			assertNoLeak(broad.filter((m) => m[0] === 'EVENT').map((m) => m[2]), 'REQ broad');
			assert.ok(broad.some((m) => m[0] === 'EVENT' && m[2].id === openArtifact.id));
			// Subscriptions open now see nothing of new private events.
			const probe = await inA({ kind: 9, tags: [['h', C]], content: 'after' });
			await outsiders.control.ws.next((m) => m[0] === 'EVENT' && m[2].id === probe.id, 10000);
			await c.none((m) => m[0] === 'EVENT', QUIET_MS);
			assertNoLeak(o.ws.drain().filter((m) => m[0] === 'EVENT').map((m) => m[2]), 'live delivery');
		});

		test('WebSocket sync: refused as for a channel that does not exist, and no frame of C', async () => {
			const o = outsiders[name];
			const c = await socket(o.key.sk);
			const ds = [...privateDs];
			const refused = (id) => [['CLOSED', id, 'restricted: not a channel member']];
			for (const [filter, absent] of [
				[{ '#h': [C] }, { '#h': [fresh()] }],
				[{ '#h': [C, D] }, { '#h': [fresh(), fresh()] }],
				[{ '#h': [O, C] }, { '#h': [O, fresh()] }],
				[{ '#h': [C], '#d': ds, '#type': ['demo.task'] }, { '#h': [fresh()], '#d': ds.map(fresh), '#type': ['demo.task'] }],
			]) {
				assert.deepEqual(await req(c, 'sync', { artifact: 'current', ...filter }), refused('sync'));
				assert.deepEqual(await req(c, 'sync', { artifact: 'current', ...absent }), refused('sync'));
			}
			// The sync of the open channel opened in phase 1: its snapshot
			// held the open artifacts; since then only the `moved` marker
			// of the artifact that left for C, which never names C.
			assert.deepEqual(o.openSync.at(-1), ['EOSE', 'open']);
			assert.deepEqual(o.openSync.slice(0, -1).map((m) => m[2].id).sort(),
				[openArtifact.id, leaver.id].sort());
			const all = o.syncWs.drain();
			const frames = all.filter((m) => m[1] === 'open');
			assert.equal(frames.length, 1, JSON.stringify(frames).slice(0, 600));
			const [, , marker] = frames[0];
			assert.equal(frames[0][0], 'EVENT');
			assert.equal(marker.kind, 45011);
			assert.deepEqual(marker.tags, [['ar', '1'], ['d', leaver.d], ['h', O], ['reason', 'moved'], ['prev', leaver.id]]);
			assert.ok(!JSON.stringify(marker).includes(C));
			// The removed member's sync of C: its snapshot as a member,
			// then closed on the removal, before any change made after it.
			if (name === 'removed') {
				assert.deepEqual(o.mineSync.at(-1), ['EOSE', 'mine']);
				assert.deepEqual(o.mineSync.slice(0, -1).map((m) => tagOf(m[2], 'd')).sort(),
					[art.a1.d, art.a2.d, art.a5.d].sort());
				assert.deepEqual(all.filter((m) => m[1] === 'mine'),
					[['CLOSED', 'mine', 'resync: access changed']]);
			}
			assert.equal(all.length, frames.length + (name === 'removed' ? 1 : 0));
		});
	});
}

// --- the other community -----------------------------------------------------------

describe('the same UUIDs in another community', () => {
	test('B\'s member reads B\'s channel and artifact under C\'s UUIDs, never A\'s', async () => {
		const named = await readOk(B, foreigner.sk, '/query', { '#h': [C], limit: 1000 });
		assert.ok(named.body.length >= 3);
		for (const e of named.body)
			assert.ok(foreignIds.has(e.id) && !privateIds.has(e.id), `${e.id} is not B's`);
		const head = await readOk(B, foreigner.sk, '/query', { artifact: 'head', '#d': [...privateDs] });
		assert.equal(head.body.length, 1);
		assert.ok(foreignIds.has(head.body[0].id), 'the shared UUID names B\'s artifact in B');
		const known = await readOk(B, foreigner.sk, '/query', { artifact: 'incremental', '#d': [shared] });
		assert.equal(known.body.changes.length, 1);
		assert.ok(foreignIds.has(known.body.changes[0].event.id));
		const hist = await readOk(B, foreigner.sk, '/query', { artifact: 'history', '#d': [shared] });
		assert.deepEqual(hist.body.map((e) => e.id), [head.body[0].id]);
		// and B's admin, an admin of every B channel, reads nothing of A
		const all = await readOk(B, adminB, '/query', { '#h': [C, D], kinds: ALL_KINDS, limit: 1000 });
		for (const e of all.body)
			assert.ok(foreignIds.has(e.id) && !privateIds.has(e.id));
	});

	test('a WebSocket on B gets B\'s events only', async () => {
		const c = await socket(foreigner.sk, B);
		const got = (await req(c, 'named', { '#h': [C, D], kinds: ALL_KINDS })).filter((m) => m[0] === 'EVENT');
		assert.ok(got.length >= 3);
		for (const m of got)
			assert.ok(foreignIds.has(m[2].id), `${m[2].id} is not B's`);
		const probe = await inA({ kind: 9, tags: [['h', C]], content: 'in a only' });
		await outsiders.control.ws.next((m) => m[0] === 'EVENT' && m[2].id === probe.id, 10000);
		await c.none((m) => m[0] === 'EVENT', QUIET_MS);
	});
});

// Plain filters read "#h" by channel: whatever this file stored (messages,
// redactions, artifacts created, updated, deleted, restored, moved and
// redacted, the relay's markers, moderation events) names its channel in
// its h tag.
test('every event stored names its channel in its h tag', async () => {
	assert.deepEqual(await strayChannelEvents(stack), []);
});
