// Delivery of sync snapshots (PROTOCOL.md section 7) through the revision
// cache, on two relay nodes sharing one database: node 0 with the cache
// (COMB_REVISION_CACHE_MB default), node 1 with it off (0).
//
// - A snapshot far larger than a connection's outbox (1 MiB) and than the
//   kernel's socket buffers is streamed: while the client does not read,
//   the relay has fetched only part of the set (its revision lookups, in
//   /metrics, stop well short of the whole), and once the client reads
//   again it gets every revision exactly once, ordered by d, then EOSE.
// - A second sync of the same set on node 0 takes every revision from the
//   cache (hits grow by the set's size, misses do not) and is identical.
// - Node 1, without a cache, serves the same snapshot; its cache holds
//   nothing and every lookup is a miss.
// - Messages a node stored are in its cache from their write on: a plain
//   REQ for them on that node takes every one from the cache (no miss),
//   and they are exactly the events sent.
// - So are the artifact revisions it stored, created together (a run of
//   creates) or one by one, and updated: a sync of their channel on that
//   node takes every current revision from the cache, exactly the
//   accepted ones.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { connectWs, post, psqlSession, scrapeMetrics, signEvent, startRelay } from './lib/harness.mjs';
import { accept, createChannel, revisionTags, tagValue, uuid } from './lib/artifacts.mjs';

// 400 revisions of about 60 KB: 24 MB, well above the outbox (1 MiB) and
// the loopback socket buffers of both ends (a few MB each).
const COUNT = 400;
const CONTENT = 'x'.repeat(60000);

let stack;
let admin;
let S;
const created = new Map();   // d -> revision id
const sockets = [];

before(async () => {
	stack = await startRelay({
		nodes: 2,
		env: { COMB_WRITE_RATE: '0' },
		nodeEnv: [{}, { COMB_REVISION_CACHE_MB: '0' }],
	});
	admin = stack.admins[0];
	S = await createChannel(stack, admin, { name: 'big' });
	for (let i = 0; i < COUNT; i += 16) {
		const revs = await Promise.all(Array.from({ length: Math.min(16, COUNT - i) }, () =>
			accept(stack, admin, { d: uuid(), h: S, op: 'create', type: 'demo.task', content: CONTENT })));
		for (const r of revs)
			created.set(tagValue(r, 'd'), r.id);
	}
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

async function metrics(node) {
	const m = await scrapeMetrics(stack.urls[node]);
	return {
		hits: m.value('comb_revision_cache_hits_total'),
		misses: m.value('comb_revision_cache_misses_total'),
		bytes: m.value('comb_revision_cache_bytes'),
		entries: m.value('comb_revision_cache_entries'),
		max: m.value('comb_revision_cache_max_bytes'),
	};
}

const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

// Reads sync id up to EOSE; asserts exactly the created set, ordered by d.
async function readSnapshot(c, id) {
	const ds = [];
	for (;;) {
		const m = await c.next(isFor(id), 20000);
		if (m[0] === 'EOSE')
			break;
		assert.equal(m[0], 'EVENT', `sync ${id}: ${JSON.stringify(m).slice(0, 200)}`);
		const d = tagValue(m[2], 'd');
		assert.equal(m[2].id, created.get(d), `sync ${id}: not the created revision of ${d}`);
		ds.push(d);
	}
	assert.equal(ds.length, COUNT);
	for (let i = 1; i < ds.length; i++)
		assert.ok(ds[i - 1] < ds[i], `sync ${id}: not strictly ordered by d at ${i}`);
	return ds;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('snapshots through the revision cache', () => {
	test('a snapshot larger than the outbox is streamed, not held whole', async () => {
		const c = await connectWs(stack.wsUrls[0], admin);
		sockets.push(c);
		const before = await metrics(0);
		c.send(['REQ', 'big', { artifact: 'current', '#h': [S] }]);
		c.ws.pause();
		// Wait until the relay stops fetching: the client does not read.
		let last = -1, fetched = 0;
		for (let stable = 0; stable < 5;) {
			await sleep(200);
			const m = await metrics(0);
			fetched = m.hits + m.misses - before.hits - before.misses;
			stable = fetched === last ? stable + 1 : 0;
			last = fetched;
		}
		assert.ok(fetched > 0, 'the relay fetched nothing');
		assert.ok(fetched < COUNT * 3 / 4,
			`the relay fetched ${fetched} of ${COUNT} revisions for a client that does not read`);
		c.ws.resume();
		await readSnapshot(c, 'big');
		const after = await metrics(0);
		assert.equal(after.hits + after.misses - before.hits - before.misses, COUNT);
		assert.ok(after.entries >= COUNT && after.bytes <= after.max);
	});

	test('a second snapshot comes from the cache, identical', async () => {
		const c = await connectWs(stack.wsUrls[0], admin);
		sockets.push(c);
		const before = await metrics(0);
		c.send(['REQ', 'again', { artifact: 'current', '#h': [S] }]);
		await readSnapshot(c, 'again');
		const after = await metrics(0);
		assert.equal(after.hits - before.hits, COUNT);
		assert.equal(after.misses, before.misses);
	});

	test('with the cache off the snapshot is the same, every lookup a miss', async () => {
		const c = await connectWs(stack.wsUrls[1], admin);
		sockets.push(c);
		const before = await metrics(1);
		assert.equal(before.max, 0);
		c.send(['REQ', 'nocache', { artifact: 'current', '#h': [S] }]);
		await readSnapshot(c, 'nocache');
		const after = await metrics(1);
		assert.equal(after.hits, 0);
		assert.equal(after.bytes, 0);
		assert.equal(after.entries, 0);
		assert.equal(after.misses - before.misses, COUNT);
	});

	test('messages stored on a node are read from its cache', async () => {
		const sent = [];
		for (let i = 0; i < 20; i++) {
			const ev = signEvent(admin, { kind: 9, tags: [['h', S]], content: `cached ${i}` });
			const r = await post(stack.urls[0], '/events', ev, admin);
			assert.deepEqual(JSON.parse(r.body), { id: ev.id, accepted: true, message: '' });
			sent.push(ev);
		}
		const c = await connectWs(stack.wsUrls[0], admin);
		sockets.push(c);
		const before = await metrics(0);
		// More than 16 asked for: the bytes come from the cache, not with
		// the query (read/query.c, query_small_filter).
		c.send(['REQ', 'msgs', { kinds: [9], '#h': [S], limit: 100 }]);
		const got = new Map();
		for (;;) {
			const m = await c.next(isFor('msgs'), 20000);
			if (m[0] === 'EOSE')
				break;
			assert.equal(m[0], 'EVENT', JSON.stringify(m).slice(0, 200));
			got.set(m[2].id, m[2]);
		}
		assert.equal(got.size, sent.length);
		for (const ev of sent)
			assert.deepEqual(got.get(ev.id), JSON.parse(JSON.stringify(ev)));
		const after = await metrics(0);
		assert.equal(after.misses, before.misses, 'a message stored on this node was not in its cache');
		assert.equal(after.hits - before.hits, sent.length);
	});

	test('artifact revisions stored on a node are read from its cache', async () => {
		const T = await createChannel(stack, admin, { name: 'written' });
		const current = new Map();   // d -> revision id
		// Sixteen creates pipelined on one connection while the channel is
		// locked, so that all but the first wait and are stored together
		// (one run of creates, comb_artifact_create_run), and four posted
		// one after another (each alone, comb_artifact_write).
		const together = Array.from({ length: 16 }, (_, i) => signEvent(admin, {
			kind: 45010,
			tags: revisionTags({ d: uuid(), h: T, op: 'create' }),
			content: `together ${i}`,
		}));
		const w = await connectWs(stack.wsUrls[0], admin);
		sockets.push(w);
		const lock = psqlSession(stack.dbName);
		await lock.run('BEGIN;');
		await lock.run(`SELECT 1 FROM channels WHERE id = '${T}' FOR UPDATE;`);
		for (const ev of together)
			w.send(['EVENT', ev]);
		await sleep(300);
		await lock.run('COMMIT;');
		await lock.close();
		for (const ev of together) {
			const ok = await w.next((m) => m[0] === 'OK' && m[1] === ev.id, 10000);
			assert.deepEqual(ok, ['OK', ev.id, true, '']);
		}
		const alone = [];
		for (let i = 0; i < 4; i++)
			alone.push(await accept(stack, admin, { d: uuid(), h: T, op: 'create',
				type: 'demo.task', content: `alone ${i}` }));
		for (const r of [...together, ...alone])
			current.set(tagValue(r, 'd'), r.id);
		// Updates of five of them: the updated revisions are current.
		for (const r of [...together.slice(0, 3), ...alone.slice(0, 2)]) {
			const u = await accept(stack, admin, { d: tagValue(r, 'd'), h: T, op: 'update',
				type: 'demo.task', prev: r.id, content: 'updated' });
			current.set(tagValue(u, 'd'), u.id);
		}
		const c = await connectWs(stack.wsUrls[0], admin);
		sockets.push(c);
		const before = await metrics(0);
		c.send(['REQ', 'written', { artifact: 'current', '#h': [T] }]);
		const got = new Map();
		for (;;) {
			const m = await c.next(isFor('written'), 20000);
			if (m[0] === 'EOSE')
				break;
			assert.equal(m[0], 'EVENT', JSON.stringify(m).slice(0, 200));
			got.set(tagValue(m[2], 'd'), m[2].id);
		}
		assert.deepEqual(got, current);
		const after = await metrics(0);
		assert.equal(after.misses, before.misses,
			'an artifact revision stored on this node was not in its cache');
		assert.equal(after.hits - before.hits, current.size);
	});
});
