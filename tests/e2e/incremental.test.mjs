// Incremental reads (PROTOCOL.md section 8), end to end over HTTP with
// nostr-tools-signed NIP-98 requests: the first read, every change source
// and removal reason, paging inside large channels, cursor binding and
// forgery, known-ID reads, the exactness test with a writer transaction
// held open, and a randomized history checked against a fresh read.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, get, newKey, post, psqlSession, pubkeyOf, readStackEnv, scrapeMetrics, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, createChannel, editChannel, publish,
	removeMember, uuid,
} from './lib/artifacts.mjs';
import { IncrementalStore, currentEvents, settle, tagOf } from './lib/clients.mjs';

let stack;
let admin;

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
});

after(async () => {
	await stack?.stop();
});

// --- a client -----------------------------------------------------------------

// NIP-98 tokens are single use: a nonce keeps two identical reads apart.
function nonce() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function read(sk, filter) {
	const r = await post(stack.url, '/query', [{ artifact: 'incremental', ...filter }], sk, nonce());
	return { status: r.status, body: r.body ? JSON.parse(r.body) : null, raw: r.body, headers: r.headers };
}

async function readOk(sk, filter) {
	const r = await read(sk, filter);
	assert.equal(r.status, 200, r.raw);
	return r.body;
}

// A client's local store kept by incremental reads (d -> event), bound to
// this file's stack; sync() first waits for the horizon (settle() in
// lib/clients.mjs): no sleeps, no timing assumption.
class Store extends IncrementalStore {
	constructor(sk, scope = {}) {
		super([stack.url], sk, scope, { keepLog: true });
	}

	sync(limit) {
		return super.sync(stack, limit);
	}
}

async function currentIds(sk, extra = {}) {
	return (await currentEvents(stack.url, sk, extra)).map((ev) => tagOf(ev, 'd')).sort();
}

function removals(changes, reason) {
	return changes.filter((c) => c.op === 'remove' && c.reason === reason).map((c) => c.d).sort();
}

function upserts(changes) {
	return changes.filter((c) => c.op === 'upsert').map((c) => c.event.tags.find((t) => t[0] === 'd')[1]).sort();
}

async function member(h, role = 'member') {
	const k = newKey();
	await addMember(stack, admin, h, k.pk, role);
	return k;
}

async function createArtifacts(h, n, sk = admin) {
	const out = [];
	for (let i = 0; i < n; i++) {
		const d = uuid();
		const ev = await accept(stack, sk, { d, h, op: 'create' });
		out.push({ d, h, id: ev.id });
	}
	return out;
}

// --- the gate and request checks ---------------------------------------------

describe('gate', () => {
	test('off: 503 incremental_unavailable and NIP-11 omits it', async () => {
		const off = await startRelay({ env: { COMB_INCREMENTAL_ENABLED: 'false' } });
		try {
			const k = off.admins[0];
			const r = await post(off.url, '/query', [{ artifact: 'incremental' }], k);
			assert.equal(r.status, 503);
			assert.equal(JSON.parse(r.body).error, 'incremental_unavailable');
			const info = await get(off.url, '/', { headers: { accept: 'application/nostr+json' } });
			const doc = JSON.parse(info.body);
			assert.equal(doc.artifacts.incremental, undefined);
			assert.ok(!doc.artifacts.modes.includes('incremental'));
		} finally {
			await off.stop();
		}
		const info = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
		const doc = JSON.parse(info.body);
		assert.deepEqual(doc.artifacts.incremental, { max_page_size: 1000, max_ids: 1000 });
		assert.ok(doc.artifacts.modes.includes('incremental'));
	});

	test('bad requests and cursors', async () => {
		const bad = [
			[{ '#e': ['x'] }, 'incremental_bad_request'],
			[{ '#h': ['not-a-uuid'] }, 'incremental_bad_request'],
			[{ limit: 0 }, 'incremental_bad_request'],
			[{ limit: 1001 }, 'incremental_bad_request'],
			[{ limit: 'ten' }, 'incremental_bad_request'],
			[{ '#type': ['Bad'] }, 'incremental_bad_request'],
			[{ '#d': [uuid()], cursor: 'abc' }, 'incremental_bad_request'],
			[{ cursor: '' }, 'incremental_bad_cursor'],
			[{ cursor: 'not a cursor' }, 'incremental_bad_cursor'],
		];
		for (const [filter, code] of bad) {
			const r = await read(admin, filter);
			assert.equal(r.status, 400, JSON.stringify(filter));
			assert.equal(r.body.error, code, JSON.stringify(filter));
			assert.equal(typeof r.body.message, 'string');
		}
		const r = await post(stack.url, '/query', [{ artifact: 'incremental' }], null);
		assert.equal(r.status, 401);
		const c = await post(stack.url, '/count', [{ artifact: 'incremental' }], admin, nonce());
		assert.equal(c.status, 400);
		assert.match(JSON.parse(c.body).error, /^invalid: /);
	});
});

test('admission: a full cluster answers 503 incremental_busy with a jittered Retry-After', async () => {
	// its Redis database is its own (every stack's is), so that other
	// tests never see the slot taken
	const busy = await startRelay({ env: { COMB_INCREMENTAL_MAX_CONCURRENT: '1' } });
	const port = readStackEnv().COMB_TEST_REDIS_PORT;
	const db = String(busy.redisDb);
	try {
		const k = busy.admins[0];
		let r;
		// each read gives its slot back before the next one asks (the
		// release is sent without waiting, its reply read by the next user
		// of the Redis connection)
		for (let i = 0; i < 5; i++) {
			r = await post(busy.url, '/query', [{ artifact: 'incremental' }], k, nonce());
			assert.equal(r.status, 200, r.body);
		}
		// another node holds the only slot
		const { execFileSync } = await import('node:child_process');
		execFileSync('redis-cli', ['-p', port, '-n', db, 'ZADD', 'comb:incremental:active',
			String(Date.now()), 'other-node']);
		const delays = new Set();
		for (let i = 0; i < 8; i++) {
			r = await post(busy.url, '/query', [{ artifact: 'incremental' }], k, nonce());
			assert.equal(r.status, 503);
			assert.deepEqual(JSON.parse(r.body), { error: 'incremental_busy',
				message: 'too many incremental reads are running' });
			delays.add(r.headers['retry-after']);
		}
		assert.ok([...delays].every((d) => Number(d) >= 1), 'Retry-After is set');
		assert.ok(delays.size > 1, 'Retry-After is jittered');
		execFileSync('redis-cli', ['-p', port, '-n', db, 'DEL', 'comb:incremental:active']);
		r = await post(busy.url, '/query', [{ artifact: 'incremental' }], k, nonce());
		assert.equal(r.status, 200, r.body);
	} finally {
		await busy.stop();
	}
});

test('admission: a resumable sync\'s catch-up waits up to 2 s for a slot, then closes busy', async () => {
	const busy = await startRelay({ env: { COMB_INCREMENTAL_MAX_CONCURRENT: '1' } });
	const port = readStackEnv().COMB_TEST_REDIS_PORT;
	const db = String(busy.redisDb);
	const { execFileSync } = await import('node:child_process');
	const redis = (...args) => execFileSync('redis-cli', ['-p', port, '-n', db, ...args]);
	const sockets = [];
	try {
		const k = busy.admins[0];
		// thirty syncs opened at once through one slot: each takes its turn
		const opened = await Promise.all(Array.from({ length: 30 }, () => connectWs(busy.url, k)));
		sockets.push(...opened);
		for (const ws of opened)
			ws.send(['REQ', 's', { artifact: 'changes' }]);
		const ends = await Promise.all(opened.map((ws) =>
			ws.next((m) => (m[0] === 'EOSE' || m[0] === 'CLOSED') && m[1] === 's', 15000)));
		assert.deepEqual(ends.map((m) => m[0]), ends.map(() => 'EOSE'), JSON.stringify(ends));

		// another node holds the only slot for a moment: the catch-up waits
		redis('ZADD', 'comb:incremental:active', String(Date.now()), 'other-node');
		const waiting = await connectWs(busy.url, k);
		sockets.push(waiting);
		waiting.send(['REQ', 's', { artifact: 'changes' }]);
		setTimeout(() => redis('DEL', 'comb:incremental:active'), 500);
		assert.equal((await waiting.next((m) => m[1] === 's', 10000))[0], 'CHANGES');

		// held for longer than the wait: closed busy, as the protocol says
		redis('ZADD', 'comb:incremental:active', String(Date.now()), 'other-node');
		const refused = await connectWs(busy.url, k);
		sockets.push(refused);
		const asked = Date.now();
		refused.send(['REQ', 's', { artifact: 'changes' }]);
		assert.deepEqual(await refused.next((m) => m[1] === 's', 10000),
			['CLOSED', 's', 'incremental_busy: too many incremental reads are running']);
		assert.ok(Date.now() - asked >= 1900, 'it waited for a slot first');
	} finally {
		for (const ws of sockets)
			ws.ws.terminate();
		await busy.stop();
	}
});

// --- first read and paging ------------------------------------------------------

describe('first read and paging', () => {
	test('pages of exactly 100 and 3 items, no removals', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const made = await createArtifacts(h, 104);
		// deleted and redacted heads are omitted from a first read
		const gone = made[0];
		await accept(stack, admin, { d: gone.d, h, op: 'delete', prev: gone.id });
		// The first read's horizon must pass these writes for its pages to
		// hold them all: a transaction that got its id before the delete
		// and ends after it (comb-capture's heartbeat, a write of another
		// test) holds the horizon below it meanwhile, and the delete then
		// comes again, rightly, as a removal after the listing.
		await settle(stack);
		const store = new Store(reader.sk, { '#h': [h] });
		const first = await readOk(reader.sk, { '#h': [h], limit: 100 });
		assert.equal(first.changes.length, 100);
		assert.equal(first.more, true);
		const second = await readOk(reader.sk, { '#h': [h], limit: 100, cursor: first.cursor });
		assert.equal(second.changes.length, 3);
		assert.equal(second.more, false);
		// a page of more than 16 items is sent as it is written (chunked);
		// one of 16 or fewer comes whole, with its length; both read alike
		const big = await read(reader.sk, { '#h': [h], limit: 100 });
		assert.equal(big.headers['transfer-encoding'], 'chunked');
		assert.deepEqual(big.body.changes, first.changes);
		const small = await read(reader.sk, { '#h': [h], limit: 16 });
		assert.equal(small.headers['content-length'], String(Buffer.byteLength(small.raw)));
		assert.deepEqual(small.body.changes, first.changes.slice(0, 16));
		await store.apply(first.changes);
		await store.apply(second.changes);
		assert.ok([...first.changes, ...second.changes].every((c) => c.op === 'upsert'));
		assert.deepEqual(store.ids(), made.slice(1).map((a) => a.d).sort());
		// one more artifact: the next read carries exactly it
		const extra = await createArtifacts(h, 1);
		await settle(stack);
		const third = await readOk(reader.sk, { '#h': [h], limit: 100, cursor: second.cursor });
		assert.deepEqual(upserts(third.changes), [extra[0].d]);
		assert.equal(third.more, false);
	});

	test('the same cursor read twice gives the same items plus anything newer', async () => {
		const h = await createChannel(stack, admin);
		const reader = newKey();
		const made = await createArtifacts(h, 3);
		const store = new Store(reader.sk, { '#h': [h] });
		await store.sync();
		const cursor = store.cursor;
		await accept(stack, admin, { d: made[0].d, h, op: 'update', prev: made[0].id, title: 'edited' });
		// an accepted write shows once the horizon passes it (another
		// writer's open transaction may hold the horizon back a moment)
		await settle(stack);
		const a = await readOk(reader.sk, { '#h': [h], cursor });
		const b = await readOk(reader.sk, { '#h': [h], cursor });
		assert.deepEqual(b.changes, a.changes);
		assert.deepEqual(upserts(a.changes), [made[0].d]);
		const more = await createArtifacts(h, 1);
		await settle(stack);
		const c = await readOk(reader.sk, { '#h': [h], cursor });
		assert.deepEqual(upserts(c.changes), [made[0].d, more[0].d].sort());
	});

	test('a page that ends the listing and goes on with changes names each artifact once', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		await createArtifacts(h, 2);
		await settle(stack);
		// the listing's first page pins a horizon that an open transaction
		// holds below the next write
		const s = psqlSession(stack.dbName);
		let first;
		const last = `ffffffff-ffff-4fff-bfff-${crypto.randomBytes(6).toString('hex')}`;
		try {
			await s.run('BEGIN; SELECT pg_current_xact_id();');
			first = await readOk(reader.sk, { '#h': [h], limit: 1 });
			assert.equal(first.changes.length, 1);
			assert.equal(first.more, true);
			// an artifact written above that horizon, listed last
			await accept(stack, admin, { d: last, h, op: 'create' });
			await s.run('COMMIT;');
		} finally {
			await s.close();
		}
		await settle(stack);
		// the next page lists it and, the horizon past it, has its change
		// too: one item for it, not two
		const second = await readOk(reader.sk, { '#h': [h], limit: 100, cursor: first.cursor });
		const named = second.changes.map((c) => (c.op === 'upsert' ? tagOf(c.event, 'd') : c.d));
		assert.equal(new Set(named).size, named.length, `an artifact named twice: ${named}`);
		assert.ok(upserts(second.changes).includes(last));
		assert.equal(second.more, false);
	});
});

// --- every change source and removal reason ----------------------------------------

describe('change sources', () => {
	test('edit, delete, restore and redaction of a head', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const [a] = await createArtifacts(h, 1);
		const store = new Store(reader.sk, { '#h': [h] });
		await store.sync();
		const edit = await accept(stack, admin, { d: a.d, h, op: 'update', prev: a.id, title: 'edited' });
		let seen = await store.sync();
		assert.deepEqual(upserts(seen), [a.d]);
		assert.equal(store.items.get(a.d).id, edit.id);
		const del = await accept(stack, admin, { d: a.d, h, op: 'delete', prev: edit.id });
		seen = await store.sync();
		assert.deepEqual(seen.map((c) => [c.op, c.d, c.h, c.reason]), [['remove', a.d, h, 'deleted']]);
		const restore = await accept(stack, admin, { d: a.d, h, op: 'restore', prev: del.id });
		seen = await store.sync();
		assert.deepEqual(upserts(seen), [a.d]);
		const red = await publish(stack, admin, { kind: 9005, tags: [['h', h], ['e', restore.id]] });
		assertAccepted(red);
		seen = await store.sync();
		assert.deepEqual(seen.map((c) => [c.op, c.d, c.h, c.reason]), [['remove', a.d, h, 'redacted']]);
		assert.equal(store.items.size, 0);
	});

	test('moves: out of view, out of scope, into a TTL channel, between readable channels', async () => {
		const a = await createChannel(stack, admin, { visibility: 'private' });
		const b = await createChannel(stack, admin, { visibility: 'private' });
		const t = await createChannel(stack, admin, { visibility: 'private', ttl: 3600 });
		const reader = await member(a);
		await addMember(stack, admin, t, reader.pk);
		const made = await createArtifacts(a, 3);
		const broad = new Store(reader.sk);
		const scoped = new Store(reader.sk, { '#h': [a] });
		await broad.sync();
		await scoped.sync();
		// a -> b (b unreadable): moved, never naming b
		const m1 = await accept(stack, admin, { d: made[0].d, h: b, op: 'move', prev: made[0].id });
		// a -> t (TTL): ttl
		await accept(stack, admin, { d: made[1].d, h: t, op: 'move', prev: made[1].id });
		let seen = await broad.sync();
		assert.deepEqual(seen.map((c) => [c.d, c.h, c.reason]).sort(),
			[[made[0].d, a, 'moved'], [made[1].d, a, 'ttl']].sort());
		assert.ok(!JSON.stringify(seen).includes(b), 'the destination is never named');
		seen = await scoped.sync();
		assert.deepEqual(removals(seen, 'moved').concat(removals(seen, 'ttl')).sort(),
			[made[0].d, made[1].d].sort());
		// granted b: the moved artifact comes back as an upsert in the broad read
		await addMember(stack, admin, b, reader.pk);
		seen = await broad.sync();
		assert.deepEqual(upserts(seen), [made[0].d]);
		// b -> a while both are readable: only the new revision
		const back = await accept(stack, admin, { d: made[0].d, h: a, op: 'move', prev: m1.id });
		seen = await broad.sync();
		assert.deepEqual(seen.map((c) => c.op), ['upsert']);
		assert.equal(broad.items.get(made[0].d).id, back.id);
		// the scoped store (#h a only) sees it arrive in scope
		seen = await scoped.sync();
		assert.deepEqual(upserts(seen), [made[0].d]);
		assert.deepEqual(scoped.ids(), [made[0].d, made[2].d].sort());
	});

	test('a grant yields every artifact of the channel, once each, in pages of 50', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const made = await createArtifacts(h, 150);
		const reader = newKey();
		const store = new Store(reader.sk);
		await store.sync();
		assert.equal(store.items.size > 0 ? [...store.items.values()].some((e) => e.tags.find((t) => t[0] === 'h')[1] === h) : false, false);
		await addMember(stack, admin, h, reader.pk);
		const seen = await store.sync(50);
		const got = upserts(seen).filter((d) => made.some((a) => a.d === d));
		assert.equal(got.length, 150);
		assert.equal(new Set(got).size, 150, 'each once');
	});

	test('revocation, leave and rejoin', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const made = await createArtifacts(h, 4);
		const store = new Store(reader.sk);
		await store.sync();
		await removeMember(stack, admin, h, reader.pk);
		let seen = await store.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
		assert.ok(seen.every((c) => c.h === h));
		await addMember(stack, admin, h, reader.pk);
		seen = await store.sync();
		assert.deepEqual(upserts(seen), made.map((a) => a.d).sort());
		const leave = await publish(stack, reader.sk, { kind: 9022, tags: [['h', h]] });
		assertAccepted(leave);
		seen = await store.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
	});

	test('artifacts moved out of a channel before the reader lost it are removed', async () => {
		const a = await createChannel(stack, admin, { visibility: 'private' });
		const b = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(a);
		const [x] = await createArtifacts(a, 1);
		const store = new Store(reader.sk);
		await store.sync();
		await accept(stack, admin, { d: x.d, h: b, op: 'move', prev: x.id });
		await removeMember(stack, admin, a, reader.pk);
		await store.sync();
		assert.equal(store.items.has(x.d), false);
	});

	test('visibility, TTL and deletion of a channel, without resetting anyone', async () => {
		const h = await createChannel(stack, admin, { visibility: 'open' });
		const made = await createArtifacts(h, 3);
		const outsider = newKey();
		const insider = await member(h);
		const outside = new Store(outsider.sk);
		const inside = new Store(insider.sk);
		await outside.sync();
		await inside.sync();
		for (const s of [outside, inside])
			assert.ok(made.every((a) => s.items.has(a.d)));
		await editChannel(stack, admin, h, [['visibility', 'private']]);
		let seen = await outside.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
		seen = await inside.sync();
		assert.equal(removals(seen, 'access').length, 0, 'members keep a channel that turned private');
		await editChannel(stack, admin, h, [['visibility', 'open']]);
		seen = await outside.sync();
		assert.deepEqual(upserts(seen), made.map((a) => a.d).sort());
		await editChannel(stack, admin, h, [['ttl', '600']]);
		seen = await inside.sync();
		assert.deepEqual(removals(seen, 'ttl'), made.map((a) => a.d).sort());
		// an edit in a TTL channel is never served
		await accept(stack, admin, { d: made[0].d, h, op: 'update', prev: made[0].id, title: 'x' });
		seen = await inside.sync();
		assert.deepEqual(seen, []);
		await editChannel(stack, admin, h, [['ttl', '0']]);
		seen = await inside.sync();
		assert.deepEqual(upserts(seen), made.map((a) => a.d).sort());
		const del = await publish(stack, admin, { kind: 9008, tags: [['h', h]] });
		assertAccepted(del);
		seen = await inside.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
		seen = await outside.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
	});

	test('unlisted channels: only when named or joined', async () => {
		const h = await createChannel(stack, admin, { visibility: 'unlisted' });
		const made = await createArtifacts(h, 2);
		const reader = newKey();
		const broad = new Store(reader.sk);
		await broad.sync();
		assert.ok(made.every((a) => !broad.items.has(a.d)));
		const named = new Store(reader.sk, { '#h': [h] });
		await named.sync();
		assert.deepEqual(named.ids(), made.map((a) => a.d).sort());
		assertAccepted(await publish(stack, reader.sk, { kind: 9021, tags: [['h', h]] }));
		await broad.sync();
		assert.ok(made.every((a) => broad.items.has(a.d)));
		assertAccepted(await publish(stack, reader.sk, { kind: 9022, tags: [['h', h]] }));
		const seen = await broad.sync();
		assert.deepEqual(removals(seen, 'access'), made.map((a) => a.d).sort());
		const kept = await named.sync();
		assert.equal(removals(kept, 'access').length, 0, 'a read naming the channel keeps them');
		assert.deepEqual(named.ids(), made.map((a) => a.d).sort());
	});

	test('#h limits candidates before pagination, #type filters types', async () => {
		const a = await createChannel(stack, admin);
		const b = await createChannel(stack, admin);
		const reader = newKey();
		const inA = await createArtifacts(a, 3);
		await createArtifacts(b, 3);
		const task = await accept(stack, admin, { d: uuid(), h: a, op: 'create', type: 'demo.note' });
		const first = await readOk(reader.sk, { '#h': [a], limit: 3 });
		assert.equal(first.changes.length, 3);
		const s = new Store(reader.sk, { '#h': [a] });
		await s.sync(2);
		assert.deepEqual(s.ids(), [...inA.map((x) => x.d), task.tags.find((t) => t[0] === 'd')[1]].sort());
		const notes = new Store(reader.sk, { '#h': [a], '#type': ['demo.note'] });
		await notes.sync();
		assert.deepEqual(notes.ids(), [task.tags.find((t) => t[0] === 'd')[1]]);
	});
});

// --- cursors ---------------------------------------------------------------------

describe('cursor binding', () => {
	test('another reader, scope or community is a bad cursor; reset-cursors is 409', async () => {
		const h = await createChannel(stack, admin);
		const reader = newKey();
		const other = newKey();
		const s = new Store(reader.sk, { '#h': [h] });
		await s.sync();
		let r = await read(other.sk, { '#h': [h], cursor: s.cursor });
		assert.equal(r.status, 400);
		assert.equal(r.body.error, 'incremental_bad_cursor');
		r = await read(reader.sk, { cursor: s.cursor });
		assert.equal(r.body.error, 'incremental_bad_cursor');
		// scope is a set: order and duplicates do not matter
		r = await read(reader.sk, { '#h': [h, h], cursor: s.cursor });
		assert.equal(r.status, 200, r.raw);
		const tampered = Buffer.from(s.cursor, 'base64');
		tampered[5] ^= 1;
		r = await read(reader.sk, { '#h': [h], cursor: tampered.toString('base64') });
		assert.equal(r.body.error, 'incremental_bad_cursor');
		const res = await stack.admin(['community', 'reset-cursors', '--host', 'localhost']);
		assert.equal(res.code, 0, res.stderr);
		r = await read(reader.sk, { '#h': [h], cursor: s.cursor });
		assert.equal(r.status, 409);
		assert.equal(r.body.error, 'incremental_reset');
	});

	test('a cursor from one relay node works on another sharing the key', async () => {
		const two = await startRelay({ nodes: 2 });
		try {
			const k = two.admins[0];
			const h = (await publish(two, k, { kind: 9007, tags: [['h', uuid()], ['name', 'x']] })).event.tags[0][1];
			await accept(two, k, { d: uuid(), h, op: 'create' });
			// below the first read's horizon, so that it is not read again
			await settle(two);
			const r1 = await post(two.urls[0], '/query', [{ artifact: 'incremental' }], k, nonce());
			const c = JSON.parse(r1.body).cursor;
			await accept(two, k, { d: uuid(), h, op: 'create' });
			// The protocol promises the write once the horizon passes it,
			// not at its OK: a transaction that got its id before this
			// write's and commits after it (comb-capture's heartbeat
			// NOTIFY, another writer) holds the horizon below it meanwhile.
			await settle(two);
			const r2 = await post(two.urls[1], '/query', [{ artifact: 'incremental', cursor: c }], k, nonce());
			assert.equal(r2.status, 200, r2.body);
			assert.equal(JSON.parse(r2.body).changes.length, 1);
		} finally {
			await two.stop();
		}
	});
});

// --- known-ID reads ------------------------------------------------------------------

test('known-ID reads answer each id, unknown and unreadable alike', async () => {
	const open = await createChannel(stack, admin);
	const priv = await createChannel(stack, admin, { visibility: 'private' });
	const ttl = await createChannel(stack, admin, { ttl: 60 });
	const reader = newKey();
	const [live, del, red] = await createArtifacts(open, 3);
	const [hidden] = await createArtifacts(priv, 1);
	const [short] = await createArtifacts(ttl, 1);
	await accept(stack, admin, { d: del.d, h: open, op: 'delete', prev: del.id });
	assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', open], ['e', red.id]] }));
	const unknown = uuid();
	const body = await readOk(reader.sk, { '#d': [live.d, del.d, red.d, hidden.d, short.d, unknown] });
	assert.equal(body.cursor, undefined);
	const [a, b, c, d, e, f] = body.changes;
	assert.equal(a.op, 'upsert');
	assert.equal(a.event.id, live.id);
	assert.deepEqual(b, { op: 'remove', d: del.d, h: open, reason: 'deleted' });
	assert.deepEqual(c, { op: 'remove', d: red.d, h: open, reason: 'redacted' });
	assert.deepEqual(d, { op: 'remove', d: hidden.d, reason: 'access' });
	assert.deepEqual(e, { op: 'remove', d: short.d, h: ttl, reason: 'ttl' });
	assert.deepEqual(f, { op: 'remove', d: unknown, reason: 'access' });
});

test('a community admin reads as one in the read\'s own snapshot, and stops when removed', async () => {
	// The reader's admin status is read by each read's statement, with the
	// data (READER_KEYS in read/incremental.c): as a community admin it
	// reads private channels it is not a member of, then no longer.
	const priv = await createChannel(stack, admin, { visibility: 'private' });
	const [art] = await createArtifacts(priv, 1);
	const u = newKey();
	const community = String(stack.communities[0].id);
	const firstRead = async (extra = {}) => (await readOk(u.sk, { limit: 1000, ...extra })).changes;
	const listed = (changes) => changes.some((c) => c.op === 'upsert' && c.event.id === art.id);
	assert.ok(!listed(await firstRead()), 'a plain member read a private channel');
	assert.ok(!listed(await firstRead({ '#h': [priv] })));
	let r = await stack.admin(['community', 'add-admin', '--id', community, u.pk]);
	assert.equal(r.code, 0, r.stderr);
	try {
		assert.ok(listed(await firstRead()), 'a community admin did not read a private channel');
		assert.ok(listed(await firstRead({ '#h': [priv] })));
		const known = await readOk(u.sk, { '#d': [art.d] });
		assert.equal(known.changes[0].event?.id, art.id);
	} finally {
		r = await stack.admin(['community', 'remove-admin', '--id', community, u.pk]);
		assert.equal(r.code, 0, r.stderr);
	}
	assert.ok(!listed(await firstRead()), 'a removed admin still read a private channel');
	const known = await readOk(u.sk, { '#d': [art.d] });
	assert.deepEqual(known.changes[0], { op: 'remove', d: art.d, reason: 'access' });
});

// --- exactness ----------------------------------------------------------------------

test('a writer transaction held open is never skipped', async () => {
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = await member(h);
	const [held, other] = await createArtifacts(h, 2);
	const store = new Store(reader.sk, { '#h': [h] });
	await store.sync();
	const s = psqlSession(stack.dbName);
	let during;
	try {
		// stamps the head of `held` inside a transaction that stays open
		await s.run('BEGIN;');
		await s.run(`UPDATE artifact_heads SET deleted = true WHERE d = '${held.d}';`);
		// a later writer commits and the reader reads meanwhile: the open
		// transaction holds the horizon, so nothing past it is delivered
		// yet, and the cursor does not move past the held change
		await accept(stack, admin, { d: other.d, h, op: 'update', prev: other.id, title: 'later' });
		during = await readOk(reader.sk, { '#h': [h], cursor: store.cursor });
		await store.apply(during.changes);
		store.cursor = during.cursor;
		assert.deepEqual(during.changes, []);
		assert.equal(during.more, false);
		await s.run('COMMIT;');
	} finally {
		await s.close();
	}
	const seen = await store.sync();
	assert.deepEqual(seen.map((c) => (c.op === 'upsert' ?
		[c.event.tags.find((t) => t[0] === 'd')[1], 'upsert'] : [c.d, c.reason])).sort(),
		[[held.d, 'deleted'], [other.d, 'upsert']].sort());
});

// --- the no-change short-circuit ----------------------------------------------------

// comb_incremental_reads_total of this file's relay, by outcome.
async function outcomes() {
	const out = {};
	for (const [series, n] of (await scrapeMetrics(stack.url)).series) {
		const outcome = /^comb_incremental_reads_total\{outcome="(\w+)"\}$/.exec(series)?.[1];
		if (outcome)
			out[outcome] = n;
	}
	return out;
}

// Runs fn and returns how many reads of each outcome it caused.
async function counted(fn) {
	const before = await outcomes();
	const value = await fn();
	const after = await outcomes();
	const delta = {};
	for (const k of Object.keys(after))
		delta[k] = after[k] - (before[k] ?? 0);
	return { value, delta };
}

describe('the no-change short-circuit', () => {
	test('fires for a caught-up cursor, however far the horizon moved', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		await createArtifacts(h, 2);
		const store = new Store(reader.sk, { '#h': [h] });
		await store.sync();
		// transactions outside the community move the horizon
		await stack.query('SELECT pg_current_xact_id()');
		await settle(stack);
		const { value, delta } = await counted(async () => {
			const first = await readOk(reader.sk, { '#h': [h], cursor: store.cursor });
			const again = await readOk(reader.sk, { '#h': [h], cursor: first.cursor });
			return [first, again];
		});
		for (const answer of value) {
			assert.deepEqual(answer.changes, []);
			assert.equal(answer.more, false);
		}
		assert.equal(delta.short_circuit, 2, JSON.stringify(delta));
		assert.equal(delta.changes, 0, JSON.stringify(delta));
	});

	test('does not fire when a write commits between two reads, which stay exact', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const [a] = await createArtifacts(h, 1);
		const store = new Store(reader.sk, { '#h': [h] });
		await store.sync();
		const edited = await accept(stack, admin, { d: a.d, h, op: 'update', prev: a.id, title: 'edited' });
		await settle(stack);
		const { value, delta } = await counted(() =>
			readOk(reader.sk, { '#h': [h], cursor: store.cursor }));
		assert.deepEqual(value.changes.map((c) => c.event.id), [edited.id]);
		assert.equal(delta.changes, 1, JSON.stringify(delta));
		assert.equal(delta.short_circuit, 0, JSON.stringify(delta));
	});

	test('does not fire for a write whose transaction was open when the cursor was issued', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const [held] = await createArtifacts(h, 1);
		const store = new Store(reader.sk, { '#h': [h] });
		await store.sync();
		const s = psqlSession(stack.dbName);
		let cursor;
		try {
			await s.run('BEGIN;');
			await s.run(`UPDATE artifact_heads SET deleted = true WHERE d = '${held.d}';`);
			// the cursor is issued while the writer is open: its horizon
			// stays at or below the writer, and nothing is delivered yet
			const during = await counted(async () => {
				const first = await readOk(reader.sk, { '#h': [h], cursor: store.cursor });
				const again = await readOk(reader.sk, { '#h': [h], cursor: first.cursor });
				return again;
			});
			assert.deepEqual(during.value.changes, []);
			assert.equal(during.delta.short_circuit + during.delta.changes, 2);
			cursor = during.value.cursor;
			await s.run('COMMIT;');
		} finally {
			await s.close();
		}
		await settle(stack);
		const { value, delta } = await counted(() => readOk(reader.sk, { '#h': [h], cursor }));
		assert.deepEqual(value.changes, [{ op: 'remove', d: held.d, h, reason: 'deleted' }]);
		assert.equal(delta.changes, 1, JSON.stringify(delta));
		assert.equal(delta.short_circuit, 0, JSON.stringify(delta));
	});
});

// --- a randomized history ---------------------------------------------------------------

function rng(seed) {
	let x = seed >>> 0;
	return () => {
		x ^= x << 13; x >>>= 0;
		x ^= x >>> 17;
		x ^= x << 5; x >>>= 0;
		return x / 0x100000000;
	};
}

test('randomized history: every store equals a fresh read of what its reader can read', async () => {
	const random = rng(Number(process.env.COMB_SEED ?? 20261130));
	const pick = (arr) => arr[Math.floor(random() * arr.length)];
	const channels = [];
	for (const visibility of ['open', 'private', 'private', 'unlisted'])
		channels.push({ h: await createChannel(stack, admin, { visibility }), visibility });
	const writers = [admin, newKey().sk, newKey().sk];
	const readers = [newKey(), newKey(), newKey()];
	const live = new Map(); // d -> {h, id, deleted}
	for (const c of channels)
		for (const w of writers.slice(1))
			await addMember(stack, admin, c.h, pubkeyOf(w), 'admin');
	const stores = readers.map((r) => new Store(r.sk));
	const scoped = new Store(readers[0].sk, { '#h': [channels[1].h, channels[3].h] });
	const member = readers.map(() => new Set());
	let ops = 0;
	while (ops < 300) {
		const roll = random();
		const w = pick(writers);
		const c = pick(channels);
		const items = [...live.entries()];
		if (roll < 0.3 || items.length === 0) {
			const d = uuid();
			const ev = await accept(stack, w, { d, h: c.h, op: 'create' });
			live.set(d, { h: c.h, id: ev.id, deleted: false });
		} else if (roll < 0.5) {
			const [d, a] = pick(items);
			if (!a.deleted) {
				const ev = await accept(stack, w, { d, h: a.h, op: 'update', prev: a.id, title: `t${ops}` });
				a.id = ev.id;
			}
		} else if (roll < 0.6) {
			const [d, a] = pick(items);
			if (!a.deleted && a.h !== c.h) {
				const ev = await accept(stack, w, { d, h: c.h, op: 'move', prev: a.id });
				a.id = ev.id;
				a.h = c.h;
			}
		} else if (roll < 0.67) {
			const [d, a] = pick(items);
			const ev = await accept(stack, w, { d, h: a.h, op: a.deleted ? 'restore' : 'delete', prev: a.id });
			a.id = ev.id;
			a.deleted = !a.deleted;
		} else if (roll < 0.72) {
			const [, a] = pick(items);
			assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', a.h], ['e', a.id]] }));
		} else if (roll < 0.82) {
			const i = Math.floor(random() * readers.length);
			if (member[i].has(c.h)) {
				await removeMember(stack, admin, c.h, readers[i].pk);
				member[i].delete(c.h);
			} else {
				await addMember(stack, admin, c.h, readers[i].pk);
				member[i].add(c.h);
			}
		} else if (roll < 0.86) {
			const v = pick(['open', 'private', 'unlisted']);
			await editChannel(stack, admin, c.h, [['visibility', v]]);
			c.visibility = v;
		} else if (roll < 0.88) {
			await editChannel(stack, admin, c.h, [['ttl', random() < 0.5 ? '600' : '0']]);
		} else {
			const s = pick([...stores, scoped]);
			await s.sync(1 + Math.floor(random() * 7));
		}
		ops++;
	}
	for (let i = 0; i < readers.length; i++) {
		await stores[i].sync(13);
		const ttlFree = await currentIds(readers[i].sk);
		// TTL channels are never served incrementally
		const ttlChannels = new Set((await stack.query(
			"SELECT id::text FROM channels WHERE ttl IS NOT NULL")).map((r) => r[0]));
		const expect = [];
		for (const d of ttlFree) {
			const rows = await stack.query(`SELECT channel_id::text FROM artifact_heads WHERE d = '${d}'`);
			if (!ttlChannels.has(rows[0][0]))
				expect.push(d);
		}
		assert.deepEqual(stores[i].ids(), expect.sort(), `reader ${i}`);
	}
	await scoped.sync(5);
	const named = await currentIds(readers[0].sk, { '#h': [channels[1].h, channels[3].h] });
	const ttlChannels = new Set((await stack.query(
		"SELECT id::text FROM channels WHERE ttl IS NOT NULL")).map((r) => r[0]));
	const expect = [];
	for (const d of named) {
		const rows = await stack.query(`SELECT channel_id::text FROM artifact_heads WHERE d = '${d}'`);
		if (!ttlChannels.has(rows[0][0]))
			expect.push(d);
	}
	assert.deepEqual(scoped.ids(), expect.sort(), 'scoped reader');
});
