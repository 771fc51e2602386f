// Reads served by a PostgreSQL streaming standby (docs/operations.md, "Read
// standbys"): a real standby made by pg_basebackup -R from the fixture's
// primary, its replay paused with pg_wal_replay_pause() to make it lag on
// purpose. Node 0 reads from the primary only; node 1 reads from the
// standby. Which server answered is read from node 1's /metrics
// (comb_read_standby_reads_total, comb_read_primary_total, waits and
// fallbacks), the answers themselves from the incremental reads.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';

import { connectWs, get, newKey, post, psqlSession, scrapeMetrics, signEvent, startRelay } from './lib/harness.mjs';
import { accept, addMember, chat, count, createChannel, query, removeMember, uuid } from './lib/artifacts.mjs';

// NIP-98 tokens are single use: a nonce keeps two identical reads apart.
function nonce() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

/** One incremental read through node `node` of stack; asserts 200. */
async function readVia(stack, node, sk, filter) {
	const r = await post(stack.urls[node], '/query', [{ artifact: 'incremental', ...filter }], sk, nonce());
	assert.equal(r.status, 200, r.body);
	return JSON.parse(r.body);
}

/**
 * A reader's local copy, as far as these tests need it: the ids of the
 * events it has been sent. A first read (no cursor) lists every current
 * artifact, also those whose change lies above the horizon its cursor
 * stops at, which another test's open transaction on the shared
 * PostgreSQL can hold back; the next read sends those again
 * (docs/protocol.md 8.3). fresh(answer) records an answer and returns
 * what it told the reader that it had not been told before: the d tags
 * of new upserts and `remove <d>` for every removal, sorted.
 */
function localCopy(had = new Set()) {
	return {
		/** Another copy holding what this one holds now. */
		clone: () => localCopy(new Set(had)),
		fresh(body) {
			const news = [];
			for (const c of body.changes) {
				if (c.op !== 'upsert')
					news.push(`remove ${c.d}`);
				else if (!had.has(c.event.id)) {
					had.add(c.event.id);
					news.push(c.event.tags.find((t) => t[0] === 'd')[1]);
				}
			}
			return news.sort();
		},
	};
}

/**
 * Reads through node `node` until the reader's copy is told something new
 * (at most 10 s): a change appears in an incremental read only once it
 * lies below the read's horizon, which another test's open transaction on
 * the shared PostgreSQL can hold back for a moment. Returns the last
 * answer, what was new in all the reads, and how many reads it took.
 */
async function readFresh(stack, node, sk, filter, copy) {
	const end = Date.now() + 10000;
	const news = [];
	for (let reads = 1; ; reads++) {
		const body = await readVia(stack, node, sk, filter);
		news.push(...copy.fresh(body));
		if (news.length > 0 || Date.now() > end)
			return { body, news: news.sort(), reads };
		await new Promise((r) => setTimeout(r, 100));
	}
}

/** The d tags of the upserts of an answer, sorted. */
function upserts(body) {
	return body.changes.filter((c) => c.op === 'upsert')
		.map((c) => c.event.tags.find((t) => t[0] === 'd')[1]).sort();
}

/** Node `node`'s read-routing metrics: {standby, primary, waits, fallbacks,
 * inRotation, reachable}; the standby's figures are null on a node without
 * one. */
async function routing(stack, node) {
	const m = await scrapeMetrics(stack.urls[node]);
	const ofStandby = (name) => (m.value('comb_read_standbys') > 0 ? m.sum(name) : null);
	return {
		standby: ofStandby('comb_read_standby_reads_total'),
		primary: m.value('comb_read_primary_total'),
		waits: m.value('comb_read_waits_total'),
		fallbacks: m.value('comb_read_fallbacks_total'),
		inRotation: ofStandby('comb_read_standby_in_rotation'),
		reachable: ofStandby('comb_read_standby_reachable'),
	};
}

/**
 * Runs attempt(i) (a read or a live frame through node) up to three times,
 * until one made node fall back to the primary no read of it: the standby
 * may not reach an attempt's position within the wait while other tests'
 * writes move the shared primary on. Returns node's routing before and
 * after that attempt ({ before, m }), or null when all three fell back.
 */
async function withoutFallback(stack, node, attempt) {
	for (let i = 0; i < 3; i++) {
		const before = await routing(stack, node);
		await attempt(i);
		const m = await routing(stack, node);
		if (m.fallbacks === before.fallbacks)
			return { before, m };
	}
	return null;
}

/** Waits (polling, bounded) until check(await probe()) holds; returns the
 * last value. */
async function until(probe, check, what, ms = 30000) {
	const end = Date.now() + ms;
	for (;;) {
		const v = await probe();
		if (check(v))
			return v;
		if (Date.now() > end)
			throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
		await new Promise((r) => setTimeout(r, 50));
	}
}

/** Waits until the standby has replayed everything the primary has written
 * so far. */
async function caughtUp(stack) {
	const [[target]] = await stack.query('SELECT pg_current_wal_insert_lsn()::text');
	await until(() => stack.standby.query('postgres',
		`SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn`),
	(rows) => rows[0][0] === 't', 'the standby to catch up');
}

/** The d tag of an item's event (undefined for a removal). */
const dOf = (x) => x.event?.tags.find((t) => t[0] === 'd')?.[1];

/** What a first read (no cursor) sent, by d, and whether an item is one of
 * those revisions again: an artifact whose transaction lay above that
 * read's horizon comes once more, the same revision (docs/protocol.md
 * 7.3). */
function firstReadRepeats(read) {
	const firstRead = new Map(read.changes.map((x) => [dOf(x), x.event.id]));
	return { firstRead, isRepeat: (x) => x.op === 'upsert' && firstRead.get(dOf(x)) === x.event.id };
}

/** Opens the resumable sync `s` of channel h from cursor on node 1 as the
 * key sk and waits for its EOSE; resolves to { ws, all }, all() listing
 * every item of its CHANGES frames so far (any other frame as
 * { unexpected }). */
async function resumeOnNode1(stack, sk, h, cursor) {
	const frames = [];
	let eose = false;
	const ws = await connectWs(stack.wsUrls[1], sk);
	ws.ws.on('message', (data) => {
		const m = JSON.parse(data.toString('utf8'));
		if (m[1] !== 's')
			return;
		if (m[0] === 'CHANGES')
			frames.push(m[2]);
		else if (m[0] === 'EOSE')
			eose = true;
		else
			frames.push({ unexpected: m });
	});
	ws.send(['REQ', 's', { artifact: 'changes', '#h': [h], cursor }]);
	await until(async () => eose, (x) => x, 'EOSE');
	return { ws, all: () => frames.flatMap((f) => f.changes ?? [f]) };
}

describe('reads on a paused standby', () => {
	let stack;
	let admin;
	let h;
	const reader = newKey();
	const writer = newKey();

	before(async () => {
		stack = await startRelay({
			standby: true,
			nodes: 2,
			// The standby stays in rotation however long it is paused here:
			// these tests are about positions, not lag.
			env: { COMB_READ_MAX_LAG_MS: '3600000' },
			nodeEnv: [{ COMB_READ_DATABASE_URLS: null }, {}],
		});
		admin = stack.admins[0];
		h = await createChannel(stack, admin);
		await addMember(stack, admin, h, reader.pk);
		await addMember(stack, admin, h, writer.pk);
		await caughtUp(stack);
		await until(() => routing(stack, 1), (m) => m.inRotation === 1, 'the standby in rotation');
	});

	// a test that failed while the standby was paused leaves it replaying
	// for the next
	afterEach(async () => {
		await stack?.standby?.resume().catch(() => {});
	});

	after(async () => {
		await stack?.stop();
	});

	test('a read the standby has replayed is served by the standby', async () => {
		const d = uuid();
		await accept(stack, admin, { d, h, op: 'create' });
		await caughtUp(stack);
		const before = await routing(stack, 1);
		const viaStandby = await readVia(stack, 1, reader.sk, { '#h': [h] });
		const m = await routing(stack, 1);
		assert.equal(m.standby, before.standby + 1, 'the standby served the read');
		assert.equal(m.primary, before.primary, 'the primary served nothing');
		assert.ok(upserts(viaStandby).includes(d));
		const viaPrimary = await readVia(stack, 0, reader.sk, { '#h': [h] });
		assert.deepEqual(upserts(viaStandby), upserts(viaPrimary));
	});

	test('a WebSocket write batch of many authors through a node reading the standby: every write recorded, each author reads it back', async () => {
		const authors = Array.from({ length: 16 }, () => newKey());
		for (const a of authors)
			await addMember(stack, admin, h, a.pk);
		// commits wait on a lock, so that the node's group commit takes
		// all 32 writes (16 authors, 2 each) in one or two batches
		const locker = psqlSession(stack.dbName);
		try {
			const sockets = await Promise.all(authors.map((a) => connectWs(stack.wsUrls[1], a.sk)));
			await locker.run('BEGIN; LOCK TABLE events IN SHARE MODE;');
			const writes = authors.flatMap((a, k) => [1, 2].map((i) => {
				const ev = signEvent(a.sk, { kind: 9, tags: [['h', h]], content: `batch ${i}` });
				const ok = sockets[k].next((m) => m[0] === 'OK' && m[1] === ev.id, 20000);
				sockets[k].send(['EVENT', ev]);
				return ok.then((m) => ({ m, ev, a }));
			}));
			await new Promise((r) => setTimeout(r, 1000));
			await locker.run('COMMIT;');
			const done = await Promise.all(writes);
			for (const ws of sockets)
				ws.ws.close();
			for (const { m, ev } of done)
				assert.deepEqual(m, ['OK', ev.id, true, '']);
			// each author's next read on node 1 sees its write, whatever
			// the standby has replayed
			for (const { ev, a } of done.filter((_, i) => i % 2 === 0)) {
				const q = await post(stack.urls[1], '/query', [{ ids: [ev.id] }], a.sk, nonce());
				assert.equal(q.status, 200, q.body);
				assert.deepEqual(JSON.parse(q.body).map((e) => e.id), [ev.id]);
			}
			assert.equal((await get(stack.urls[1], '/healthz')).status, 200);
		} finally {
			await locker.close();
		}
	});

	test('a cursor from the primary is never served by a standby behind it', async () => {
		// The reader holds a cursor of everything so far.
		await caughtUp(stack);
		const copy = localCopy();
		const listing = await readVia(stack, 0, reader.sk, { '#h': [h] });
		copy.fresh(listing);
		await stack.standby.pause();
		const d1 = uuid();
		await accept(stack, admin, { d: d1, h, op: 'create' });
		// The primary's node moves the cursor past d1 (once every older
		// transaction of the shared cluster has ended: the changes stop
		// at the snapshot's horizon).
		const onPrimary = await readFresh(stack, 0, reader.sk,
			{ '#h': [h], cursor: listing.cursor }, copy);
		assert.deepEqual(onPrimary.news, [d1]);

		// The standby has not replayed d1: node 1 waits, then reads on the
		// primary; the cursor does not go back and nothing is repeated.
		const before = await routing(stack, 1);
		const next = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: onPrimary.body.cursor });
		let m = await routing(stack, 1);
		assert.deepEqual(copy.fresh(next), [], 'nothing new after the cursor yet');
		assert.ok(!upserts(next).includes(d1), 'd1 is not sent again');
		assert.equal(m.standby, before.standby, 'the paused standby served nothing');
		assert.equal(m.waits, before.waits + 1);
		assert.equal(m.fallbacks, before.fallbacks + 1);

		// A change made while the standby is still paused arrives, once.
		const d2 = uuid();
		await accept(stack, admin, { d: d2, h, op: 'create' });
		const later = await readFresh(stack, 1, reader.sk,
			{ '#h': [h], cursor: next.cursor }, copy);
		assert.deepEqual(later.news, [d2]);

		// Replay resumed and caught up, the standby serves the cursor again.
		await stack.standby.resume();
		await caughtUp(stack);
		const mid = await routing(stack, 1);
		const after = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: later.body.cursor });
		m = await routing(stack, 1);
		assert.deepEqual(copy.fresh(after), []);
		assert.equal(m.standby, mid.standby + 1, 'served by the standby again');
	});

	test('read-your-writes: a write is read back through a node reading a paused standby', async () => {
		await caughtUp(stack);
		const writerCopy = localCopy();
		const readerCopy = localCopy();
		const writerListing = await readVia(stack, 1, writer.sk, { '#h': [h] });
		const readerListing = await readVia(stack, 1, reader.sk, { '#h': [h] });
		writerCopy.fresh(writerListing);
		readerCopy.fresh(readerListing);
		await stack.standby.pause();
		const d = uuid();
		// written through node 1 itself, the node that reads the standby
		await accept({ ...stack, url: stack.urls[1] }, writer.sk, { d, h, op: 'create' });

		const before = await routing(stack, 1);
		const own = await readFresh(stack, 1, writer.sk,
			{ '#h': [h], cursor: writerListing.cursor }, writerCopy);
		const m = await routing(stack, 1);
		assert.deepEqual(own.news, [d], 'the writer sees its write');
		assert.equal(m.fallbacks, before.fallbacks + own.reads, 'every read on the primary');

		// Another reader, whose position the paused standby has, is still
		// served by it (and does not see the write yet: nothing promised it).
		const other = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: readerListing.cursor });
		const m2 = await routing(stack, 1);
		assert.equal(m2.standby, m.standby + 1, 'the other reader stays on the standby');
		assert.deepEqual(readerCopy.fresh(other), []);

		// A first read (no cursor) by the writer also sees the write.
		const listing = await readVia(stack, 1, writer.sk, { '#h': [h] });
		assert.ok(upserts(listing).includes(d));

		await stack.standby.resume();
		await caughtUp(stack);
		const caught = await readFresh(stack, 1, reader.sk,
			{ '#h': [h], cursor: other.cursor }, readerCopy);
		assert.deepEqual(caught.news, [d], 'the other reader gets it once replayed');
	});

	test('/query and /count: served by the standby, and the writer reads its writes', async () => {
		// more than a whole answer's worth (16), so the answer is streamed
		// and its events' bytes are read after the connection went back
		const ds = [];
		for (let i = 0; i < 20; i++) {
			ds.push(uuid());
			await accept(stack, admin, { d: ds[i], h, op: 'create' });
		}
		await caughtUp(stack);
		const node1 = { ...stack, url: stack.urls[1] };
		const plain = { kinds: [45010], '#h': [h], limit: 500 };
		const current = { artifact: 'current', '#h': [h], limit: 500 };

		let before = await routing(stack, 1);
		const viaStandby = await query(node1, reader.sk, plain);
		const currentViaStandby = await query(node1, reader.sk, current);
		const counted = await count(node1, reader.sk, plain);
		let m = await routing(stack, 1);
		// three reads, and the streamed answer's misses read on the standby too
		assert.ok(m.standby >= before.standby + 3, 'the standby served all three');
		assert.equal(m.primary, before.primary, 'the primary served nothing');
		const viaPrimary = await query(stack, reader.sk, plain);
		assert.equal(viaStandby.status, 200, viaStandby.raw);
		assert.ok(viaStandby.body.length > 16);
		assert.deepEqual(viaStandby.body.map((e) => e.id).sort(), viaPrimary.body.map((e) => e.id).sort());
		assert.deepEqual((await query(stack, reader.sk, current)).body.map((e) => e.id).sort(),
			currentViaStandby.body.map((e) => e.id).sort());
		assert.equal(counted.body.count, viaPrimary.body.length);
		// head and history of one artifact, and an artifact count, alike
		for (const filter of [{ artifact: 'head', '#d': [ds[0], ds[1]] },
			{ artifact: 'history', '#d': [ds[0]] }]) {
			const a = await query(node1, reader.sk, filter);
			const b = await query(stack, reader.sk, filter);
			assert.equal(a.status, 200, a.raw);
			assert.deepEqual(a.body.map((e) => e.id).sort(), b.body.map((e) => e.id).sort(), filter.artifact);
			assert.ok(a.body.length > 0, filter.artifact);
		}
		const artifactCount = await count(node1, reader.sk, { artifact: 'current', '#h': [h] });
		assert.equal(artifactCount.status, 200, artifactCount.raw);
		assert.equal(artifactCount.body.count, currentViaStandby.body.length);
		assert.equal((await routing(stack, 1)).primary, m.primary, 'still nothing on the primary');

		await stack.standby.pause();
		const d = uuid();
		const written = await accept(node1, writer.sk, { d, h, op: 'create' });
		before = await routing(stack, 1);
		const own = await query(node1, writer.sk, plain);
		const ownCount = await count(node1, writer.sk, plain);
		const ownCurrent = await query(node1, writer.sk, current);
		m = await routing(stack, 1);
		assert.ok(own.body.some((e) => e.id === written.id), 'the writer reads its write');
		assert.ok(ownCurrent.body.some((e) => e.id === written.id));
		assert.equal(ownCount.body.count, counted.body.count + 1);
		assert.ok(m.fallbacks >= before.fallbacks + 3, 'read on the primary');

		// the reader, who wrote nothing, is still served by the paused standby
		const theirs = await count(node1, reader.sk, plain);
		const m2 = await routing(stack, 1);
		assert.equal(m2.standby, m.standby + 1);
		assert.equal(theirs.body.count, counted.body.count);
		await stack.standby.resume();
	});
});


describe('standby failures', () => {
	test('a standby far behind leaves the rotation and returns once caught up', async () => {
		const stack = await startRelay({ standby: true, capture: false, env: { COMB_READ_MAX_LAG_MS: '500' } });
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin);
			await addMember(stack, admin, h, reader.pk);
			await caughtUp(stack);
			await until(() => routing(stack, 0), (m) => m.inRotation === 1, 'the standby in rotation');

			await stack.standby.pause();
			const d = uuid();
			await accept(stack, admin, { d, h, op: 'create' });
			await until(() => routing(stack, 0), (m) => m.inRotation === 0, 'the standby out of rotation');
			// Out of rotation, reads go to the primary without waiting.
			const before = await routing(stack, 0);
			const body = await readVia(stack, 0, reader.sk, { '#h': [h] });
			let m = await routing(stack, 0);
			assert.deepEqual(upserts(body), [d]);
			assert.equal(m.waits, before.waits, 'no wait for a standby out of rotation');
			assert.equal(m.primary, before.primary + 1);
			assert.equal(m.standby, before.standby);

			await stack.standby.resume();
			await until(() => routing(stack, 0), (x) => x.inRotation === 1, 'the standby back in rotation');
			const mid = await routing(stack, 0);
			const again = await readVia(stack, 0, reader.sk, { '#h': [h] });
			m = await routing(stack, 0);
			assert.deepEqual(upserts(again), [d]);
			assert.equal(m.standby, mid.standby + 1, 'served by the standby again');
		} finally {
			await stack.standby.resume().catch(() => {});
			await stack.stop();
		}
	});

	test('a standby killed during reads: every read is answered, from the primary, nothing lost', async () => {
		const stack = await startRelay({ standby: true, capture: false });
		try {
			const admin = stack.admins[0];
			const h = await createChannel(stack, admin);
			const readers = [newKey(), newKey(), newKey(), newKey()];
			for (const r of readers)
				await addMember(stack, admin, h, r.pk);
			const ds = [];
			for (let i = 0; i < 10; i++) {
				ds.push(uuid());
				await accept(stack, admin, { d: ds[i], h, op: 'create' });
			}
			await caughtUp(stack);
			await until(() => routing(stack, 0), (m) => m.inRotation === 1, 'the standby in rotation');

			// Each reader reads in a loop, a bounded number of times, its
			// cursor chain and /query alternating, while the standby dies.
			let killed = false;
			const statuses = [];
			const loop = async (r) => {
				let cursor;
				const seen = new Set();
				for (let i = 0; i < 30; i++) {
					const inc = await post(stack.url, '/query',
						[{ artifact: 'incremental', '#h': [h], ...(cursor ? { cursor } : {}) }], r.sk, nonce());
					statuses.push(inc.status);
					if (inc.status === 200) {
						const b = JSON.parse(inc.body);
						upserts(b).forEach((d) => seen.add(d));
						cursor = b.cursor;
					}
					const q = await query(stack, r.sk, { kinds: [45010], '#h': [h], limit: 100 });
					statuses.push(q.status);
					if (i === 5 && !killed) {
						killed = true;
						await stack.standby.kill();
					}
				}
				return seen;
			};
			const seen = await Promise.all(readers.map(loop));
			assert.deepEqual([...new Set(statuses)], [200], 'every read answered');
			for (const s of seen)
				assert.deepEqual([...s].sort(), [...ds].sort(), 'every reader has every artifact');
			const m = await until(() => routing(stack, 0), (x) => x.reachable === 0, 'the standby unreachable');
			assert.equal(m.inRotation, 0);
			assert.ok(m.primary > 0, 'the primary served the reads after the kill');
			// and after it: a write, then a read, both fine
			const d = uuid();
			await accept(stack, admin, { d, h, op: 'create' });
			const body = await readVia(stack, 0, readers[0].sk, { '#h': [h] });
			assert.ok(upserts(body).includes(d));
		} finally {
			await stack.stop();
		}
	});

	test('a standby connection lost under a read: the read is answered from the primary', async () => {
		const stack = await startRelay({ standby: true, capture: false });
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin);
			await addMember(stack, admin, h, reader.pk);
			const d = uuid();
			await accept(stack, admin, { d, h, op: 'create' });
			await caughtUp(stack);
			await until(() => routing(stack, 0), (m) => m.inRotation === 1, 'the standby in rotation');
			const node = { ...stack };
			for (const [path, filter] of [
				['incremental', { artifact: 'incremental', '#h': [h] }],
				['plain', { kinds: [45010], '#h': [h] }],
				['artifact', { artifact: 'current', '#h': [h] }],
			]) {
				// Every pooled connection of the relay to the standby ends;
				// the standby itself stays up and in rotation.
				await stack.standby.query('postgres', "SELECT count(pg_terminate_backend(pid)) " +
					"FROM pg_stat_activity WHERE application_name = 'comb'");
				const before = await routing(stack, 0);
				const r = await query(node, reader.sk, filter);
				const m = await routing(stack, 0);
				assert.equal(r.status, 200, `${path}: ${r.raw}`);
				const ids = (Array.isArray(r.body) ? r.body : r.body.changes.map((c) => c.event))
					.map((e) => e.tags.find((t) => t[0] === 'd')[1]);
				assert.deepEqual(ids, [d], path);
				assert.equal(m.fallbacks, before.fallbacks + 1, `${path}: read again on the primary`);
			}
		} finally {
			await stack.stop();
		}
	});

	test('a standby promoted while clients hold cursors: every cursor stays valid, nothing lost or repeated', async () => {
		const nodeEnv = [{}, {}];
		const stack = await startRelay({ standby: true, capture: false, nodes: 2, nodeEnv });
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin);
			await addMember(stack, admin, h, reader.pk);
			const d1 = uuid();
			await accept(stack, admin, { d: d1, h, op: 'create' });
			await caughtUp(stack);
			const copy = localCopy();
			const first = await readFresh(stack, 0, reader.sk, { '#h': [h] }, copy);
			assert.deepEqual(first.news, [d1]);
			const copyAtFirst = copy.clone();
			const d2 = uuid();
			await accept(stack, admin, { d: d2, h, op: 'create' });
			await caughtUp(stack);
			const second = await readFresh(stack, 0, reader.sk,
				{ '#h': [h], cursor: first.body.cursor }, copy);
			assert.deepEqual(second.news, [d2]);

			// Writes stop, the standby has replayed them all and is
			// promoted; node 1 comes back with it as its primary.
			await stack.stopNode(1);
			await stack.standby.promote();
			Object.assign(nodeEnv[1], {
				COMB_DATABASE_URL: stack.standby.urlFor(stack.dbName),
				COMB_READ_DATABASE_URLS: null,
			});
			await stack.startNode(1);

			// Both cursors continue on the promoted server.
			const fromSecond = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: second.body.cursor });
			assert.deepEqual(copy.fresh(fromSecond), []);
			const fromFirst = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: first.body.cursor });
			assert.deepEqual(copyAtFirst.fresh(fromFirst), [d2]);
			// A write on the new primary arrives once.
			const d3 = uuid();
			await accept({ ...stack, url: stack.urls[1] }, admin, { d: d3, h, op: 'create' });
			const third = await readFresh(stack, 1, reader.sk, { '#h': [h], cursor: fromSecond.cursor }, copy);
			assert.deepEqual(third.news, [d3]);
			const fourth = await readVia(stack, 1, reader.sk, { '#h': [h], cursor: third.body.cursor });
			assert.deepEqual(copy.fresh(fourth), []);
			const fresh = await readVia(stack, 1, reader.sk, { '#h': [h] });
			assert.deepEqual(upserts(fresh), [d1, d2, d3].sort());
		} finally {
			await stack.stop();
		}
	});
});

describe('plain REQs through a node reading a standby', () => {
	test('a plain REQ reads its events\' bytes on the standby too', async () => {
		// node 1 keeps no revision cache: every event's bytes are read; and
		// its reads wait long enough for the standby to reach a REQ's start
		// (the primary's WAL position then, which the standby may get only
		// after the next WAL flush) rather than going to the primary
		const stack = await startRelay({
			standby: true,
			nodes: 2,
			nodeEnv: [{ COMB_READ_DATABASE_URLS: null },
				{ COMB_REVISION_CACHE_MB: '0', COMB_READ_WAIT_MS: '3000' }],
		});
		let ws;
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin);
			await addMember(stack, admin, h, reader.pk);
			const ds = [];
			for (let i = 0; i < 24; i++) {
				ds.push(uuid());
				await accept(stack, admin, { d: ds.at(-1), h, op: 'create' });
			}
			await caughtUp(stack);
			await until(() => routing(stack, 1), (m) => m.inRotation === 1, 'the standby in rotation');
			ws = await connectWs(stack.wsUrls[1], reader.sk);
			const events = [];
			ws.ws.on('message', (data) => {
				const m = JSON.parse(data.toString('utf8'));
				if (m[0] === 'EVENT')
					events.push(m[2]);
			});
			// (an attempt whose read went to the primary is not the one
			// measured)
			const measured = await withoutFallback(stack, 1, async (attempt) => {
				events.length = 0;
				ws.send(['REQ', `r${attempt}`, { '#h': [h], '#d': ds, limit: 100 }]);
				await ws.next((m) => m[0] === 'EOSE' && m[1] === `r${attempt}`, 10000);
				ws.send(['CLOSE', `r${attempt}`]);
				assert.equal(new Set(events.map((e) => e.tags.find((t) => t[0] === 'd')[1])).size, ds.length);
			});
			assert.ok(measured, 'a REQ read on the standby');
			const { before, m } = measured;
			// the first 16 listed, their bytes, the rest listed, their bytes
			assert.equal(m.standby - before.standby, 4, 'the listings and the bytes on the standby');
			assert.equal(m.primary, before.primary, 'the primary served nothing');
		} finally {
			ws?.ws.close();
			await stack.stop();
		}
	});
});

describe('live reads through a node reading a standby', () => {
	test('a live edit is re-read, a live message loaded and checked, on the standby once it has replayed them, nothing on the primary', async () => {
		// node 1's reads wait long enough for the standby to replay the
		// edit (its signal's WAL position) rather than going to the primary
		const stack = await startRelay({
			standby: true,
			nodes: 2,
			nodeEnv: [{ COMB_READ_DATABASE_URLS: null }, { COMB_READ_WAIT_MS: '3000' }],
		});
		let ws;
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin, { visibility: 'private' });
			await addMember(stack, admin, h, reader.pk);
			let rev = await accept(stack, admin, { d: uuid(), h, op: 'create' });
			const d = rev.tags.find((t) => t[0] === 'd')[1];
			await caughtUp(stack);
			await until(() => routing(stack, 1), (m) => m.inRotation === 1, 'the standby in rotation');
			ws = await connectWs(stack.wsUrls[1], reader.sk);
			ws.send(['REQ', 'sync', { artifact: 'current', '#h': [h] }]);
			await ws.next((m) => m[0] === 'EOSE' && m[1] === 'sync', 10000);
			ws.drain();  // the snapshot
			// (an edit whose re-read went to the primary is not the one
			// measured)
			const measured = await withoutFallback(stack, 1, async (attempt) => {
				rev = await accept(stack, admin, { d, h, op: 'update', prev: rev.id, title: `edit ${attempt}` });
				const got = await ws.next((m) => m[0] === 'EVENT' && m[1] === 'sync', 10000);
				assert.equal(got[2].id, rev.id, 'the frame holds the edit');
			});
			assert.ok(measured, 'a re-read on the standby');
			const { before, m } = measured;
			assert.ok(m.standby > before.standby, 'the standby served the re-read');
			assert.equal(m.primary, before.primary, 'the primary served nothing');
			// a plain REQ's live message: loaded and its reader's access
			// checked on the standby too
			ws.send(['REQ', 'plain', { kinds: [9], '#h': [h], limit: 1 }]);
			await ws.next((f) => f[0] === 'EOSE' && f[1] === 'plain', 10000);
			ws.drain();
			const plain = await withoutFallback(stack, 1, async (attempt) => {
				const msg = await chat(stack, admin, h, `live ${attempt}`);
				const got = await ws.next((f) => f[0] === 'EVENT' && f[1] === 'plain', 10000);
				assert.equal(got[2].id, msg.id, 'the frame holds the message');
			});
			assert.ok(plain, 'a live delivery on the standby');
			// the load and the access check share one borrowed connection
			assert.ok(plain.m.standby > plain.before.standby, 'the load and the access check on the standby');
			assert.equal(plain.m.primary, plain.before.primary, 'the primary served nothing');
			// and a member removed on the primary: the next re-read, on the
			// standby, sees it in the same snapshot as the data
			await removeMember(stack, admin, h, reader.pk);
			const closed = await ws.next((f) => f[1] === 'sync' && ['CLOSED', 'EVENT'].includes(f[0]), 10000);
			assert.deepEqual(closed, ['CLOSED', 'sync', 'resync: access changed']);
		} finally {
			ws?.ws.close();
			await stack.stop();
		}
	});
});

describe('resumable syncs through a node reading a standby', () => {
	/* Node 0 reads the primary, node 1 the standby, which stays in
	 * rotation however far behind it is while paused. */
	const PAUSABLE = {
		standby: true,
		nodes: 2,
		env: { COMB_READ_MAX_LAG_MS: '3600000' },
		nodeEnv: [{ COMB_READ_DATABASE_URLS: null }, {}],
	};

	/** A channel with a reader and one artifact d1, replayed by the
	 * standby, which node 1 has in rotation. */
	async function channelWithOneArtifact(stack) {
		const admin = stack.admins[0];
		const reader = newKey();
		const h = await createChannel(stack, admin);
		await addMember(stack, admin, h, reader.pk);
		const d1 = uuid();
		await accept(stack, admin, { d: d1, h, op: 'create' });
		await caughtUp(stack);
		await until(() => routing(stack, 1), (m) => m.inRotation === 1, 'the standby in rotation');
		return { admin, reader, h, d1 };
	}

	test('a paused standby: the catch-up from a primary cursor and the live changes neither go back nor repeat', async () => {
		const stack = await startRelay(PAUSABLE);
		let ws;
		try {
			const { admin, reader, h, d1 } = await channelWithOneArtifact(stack);

			await stack.standby.pause();
			const d2 = uuid();
			await accept(stack, admin, { d: d2, h, op: 'create' });
			const onPrimary = await readVia(stack, 0, reader.sk, { '#h': [h] });
			assert.deepEqual(upserts(onPrimary), [d1, d2].sort());

			// the sync resumes on node 1 from the primary's cursor
			const before = await routing(stack, 1);
			let all;
			({ ws, all } = await resumeOnNode1(stack, reader.sk, h, onPrimary.cursor));
			// An artifact of the first read whose transaction lay above that
			// read's horizon (a writer still open then, on the test's
			// shared cluster) comes again once the horizon passes it, as on
			// the primary: the same revision, never an older one. Nothing
			// else is after the cursor yet.
			const { firstRead, isRepeat } = firstReadRepeats(onPrimary);
			assert.deepEqual(all().filter((x) => !isRepeat(x)), [], 'nothing after the cursor in the catch-up');
			assert.ok((await routing(stack, 1)).fallbacks > before.fallbacks, 'the catch-up went to the primary');

			// a change made while the standby is still paused arrives once
			const d3 = uuid();
			await accept(stack, admin, { d: d3, h, op: 'create' });
			await until(async () => all(), (c) => c.some((x) => x.op === 'upsert' &&
				x.event.tags.find((t) => t[0] === 'd')[1] === d3), 'the live change');
			await stack.standby.resume();
			await caughtUp(stack);
			const d4 = uuid();
			await accept(stack, admin, { d: d4, h, op: 'create' });
			await until(async () => all(), (c) => c.some((x) => x.op === 'upsert' &&
				x.event.tags.find((t) => t[0] === 'd')[1] === d4), 'the change after the resume');
			// Besides those repeats, everything comes once, in order.
			const repeated = all().filter((x) => x.op === 'upsert' && firstRead.has(dOf(x)));
			for (const x of repeated)
				assert.equal(x.event.id, firstRead.get(dOf(x)), 'an older revision came again');
			const ds = all().filter((x) => !repeated.includes(x))
				.map((x) => x.op === 'upsert' ? dOf(x) : x);
			assert.deepEqual(ds, [d3, d4], 'each change once, in order, nothing before the cursor');
		} finally {
			ws?.ws.close();
			await stack.standby?.resume().catch(() => {});
			await stack.stop();
		}
	});

	test('a paused standby, the horizon held below the grant and then below the live change: the live change comes once', async () => {
		// The failure seen once beside a horizon holder (a loop of
		// transactions holding an xid for 1.5 s), made on purpose: one
		// transaction holds the horizon below the reader's grant from before
		// the grant until the catch-up ends, the next one below the live
		// change d3 while d3 is read. The grant then carried d3 (committed
		// above the horizon), and d3's own change sent it again.
		const stack = await startRelay(PAUSABLE);
		const older = psqlSession(stack.dbName);
		const newer = psqlSession(stack.dbName);
		let ws;
		try {
			const admin = stack.admins[0];
			const reader = newKey();
			const h = await createChannel(stack, admin);
			await older.run('BEGIN;');
			await older.run('SELECT pg_current_xact_id();');
			await addMember(stack, admin, h, reader.pk);
			const d1 = uuid();
			await accept(stack, admin, { d: d1, h, op: 'create' });
			await caughtUp(stack);
			await until(() => routing(stack, 1), (m) => m.inRotation === 1, 'the standby in rotation');
			await stack.standby.pause();
			const d2 = uuid();
			await accept(stack, admin, { d: d2, h, op: 'create' });
			const onPrimary = await readVia(stack, 0, reader.sk, { '#h': [h] });
			assert.deepEqual(upserts(onPrimary), [d1, d2].sort());

			let all;
			({ ws, all } = await resumeOnNode1(stack, reader.sk, h, onPrimary.cursor));
			const { isRepeat } = firstReadRepeats(onPrimary);
			assert.deepEqual(all().filter((x) => !isRepeat(x)), [], 'nothing after the cursor in the catch-up');

			// the horizon passes the grant and stops below d3
			await newer.run('BEGIN;');
			await newer.run('SELECT pg_current_xact_id();');
			await older.run('COMMIT;');
			const d3 = uuid();
			await accept(stack, admin, { d: d3, h, op: 'create' });
			// the grant's frame (d1 and d2 again, the listing rule)
			await until(async () => all(), (c) => c.some((x) => dOf(x) === d1), 'the grant');
			await new Promise((r) => setTimeout(r, 300));
			await newer.run('COMMIT;');
			await until(async () => all(), (c) => c.some((x) => dOf(x) === d3), 'the live change');
			await new Promise((r) => setTimeout(r, 500));
			await stack.standby.resume();
			await caughtUp(stack);
			const d4 = uuid();
			await accept(stack, admin, { d: d4, h, op: 'create' });
			await until(async () => all(), (c) => c.some((x) => dOf(x) === d4), 'the change after the resume');
			const ds = all().filter((x) => !isRepeat(x)).map((x) => x.op === 'upsert' ? dOf(x) : x);
			assert.deepEqual(ds, [d3, d4], 'each change once, in order, nothing before the cursor');
		} finally {
			ws?.ws.close();
			await older.close();
			await newer.close();
			await stack.standby?.resume().catch(() => {});
			await stack.stop();
		}
	});

	test('a live change reaches a sync whose cursor a standby issued, while that standby is paused', async () => {
		const stack = await startRelay(PAUSABLE);
		let ws;
		try {
			const { admin, reader, h, d1 } = await channelWithOneArtifact(stack);

			const frames = [];
			let eose = false;
			ws = await connectWs(stack.wsUrls[1], reader.sk);
			ws.ws.on('message', (data) => {
				const m = JSON.parse(data.toString('utf8'));
				if (m[0] === 'CHANGES' && m[1] === 's')
					frames.push(...m[2].changes);
				else if (m[0] === 'EOSE' && m[1] === 's')
					eose = true;
			});
			const before = await routing(stack, 1);
			ws.send(['REQ', 's', { artifact: 'changes', '#h': [h] }]);
			await until(async () => eose, (x) => x, 'EOSE');
			assert.ok((await routing(stack, 1)).standby > before.standby, 'the standby served the catch-up');
			assert.ok(frames.map(dOf).includes(d1));

			// the signal names a position the paused standby has not
			// replayed: the live read goes where it has been
			await stack.standby.pause();
			const d2 = uuid();
			await accept(stack, admin, { d: d2, h, op: 'create' });
			await until(async () => frames.map(dOf), (ds) => ds.includes(d2),
				'the live change while the standby is paused', 10000);
			assert.equal(frames.map(dOf).filter((d) => d === d2).length, 1, 'the change came once');
		} finally {
			ws?.ws.close();
			await stack.standby?.resume().catch(() => {});
			await stack.stop();
		}
	});
});
