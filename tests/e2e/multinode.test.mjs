// Several relay nodes behind one capture feed (ARCHITECTURE.md "Properties
// the design must keep", PROTOCOL.md section 7): two comb-relay processes
// and comb-capture on one database. A write through node A reaches syncs
// and plain live REQs on node B; ephemeral events reach live readers of
// their channel on both nodes and are never stored; the snapshot race: a
// sync of 2,000 artifacts opened on B while 20 of them are edited through
// A ends with exactly the set a fresh `head` read returns; killing capture
// with SIGKILL closes every sync with `resync: change feed interrupted`
// within the heartbeat window and reopened syncs work once a new capture
// runs; a standby capture takes over when the leader is killed.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { connectWs, freePort, get, newKey, post, signEvent, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, chat, createChannel, events, publish, revisionTags, tagValue,
	uuid,
} from './lib/artifacts.mjs';

const HEARTBEAT_MS = 200;
// Three missed heartbeats, plus the relay's check period and scheduling.
const WINDOW_MS = 3 * HEARTBEAT_MS + 500;
const QUIET_MS = 600;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let stack;
let admin;
let endpoints;
const reader = newKey();
const sockets = [];

before(async () => {
	endpoints = [`tcp://127.0.0.1:${await freePort()}`, `tcp://127.0.0.1:${await freePort()}`].join(',');
	stack = await startRelay({
		nodes: 2,
		env: { COMB_CAPTURE_ENDPOINT: endpoints, COMB_CAPTURE_HEARTBEAT_MS: String(HEARTBEAT_MS),
			COMB_WRITE_RATE: '0' },
		captureEnv: { COMB_CAPTURE_ENDPOINT: endpoints, COMB_CAPTURE_HEARTBEAT_MS: String(HEARTBEAT_MS) },
	});
	admin = stack.admins[0];
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

// --- helpers -----------------------------------------------------------------

async function client(node, sk) {
	const c = await connectWs(stack.urls[node], sk);
	sockets.push(c);
	return c;
}

const plain = (ev) => JSON.parse(JSON.stringify(ev));
const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

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

function update(rev, sk = admin) {
	return accept(stack, sk, {
		d: tagValue(rev, 'd'), h: tagValue(rev, 'h'), op: 'update', prev: rev.id,
		type: tagValue(rev, 'type'), title: `edit ${crypto.randomBytes(3).toString('hex')}`,
	});
}

// Signs template and POSTs it to /events of node (a NIP-98 token for that
// node's URL); resolves like publish() of lib/artifacts.mjs.
async function publishOn(node, sk, template) {
	const event = signEvent(sk, template);
	const r = await post(stack.urls[node], '/events', event, sk);
	return { status: r.status, body: JSON.parse(r.body), raw: r.body, event };
}

async function waitReady(node, want) {
	const deadline = Date.now() + 10000;
	for (;;) {
		const r = await get(stack.urls[node], '/readyz');
		assert.equal(r.status, 200, r.body);
		if ((r.json().feed === 'up') === want)
			return r;
		assert.ok(Date.now() < deadline, `node ${node} /readyz stayed ${r.status}: ${r.body}`);
		await sleep(50);
	}
}

async function waitLog(file, re, timeoutMs = 8000) {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		let text = '';
		try {
			text = fs.readFileSync(file, 'utf8');
		} catch {
			// not written yet
		}
		if (re.test(text))
			return;
		assert.ok(Date.now() < deadline, `${file} never matched ${re}:\n${text.slice(-2000)}`);
		await sleep(50);
	}
}

// Creates n artifacts in channel h through node A's WebSocket: four
// authenticated connections, at most 64 unacknowledged events each.
async function bulkCreate(n, h) {
	const conns = await Promise.all([0, 1, 2, 3].map(() => client(0, admin)));
	const revs = [];
	for (let i = 0; i < n; i++)
		revs.push(signEvent(admin, {
			kind: 45010,
			tags: [['ar', '1'], ['d', uuid()], ['h', h], ['type', 'demo.task'], ['op', 'create'],
				['title', `task ${i}`]],
			content: `bulk ${i}`,
		}));
	let next = 0;
	await Promise.all(conns.map(async (c) => {
		const inflight = new Set();
		for (;;) {
			while (inflight.size < 64 && next < revs.length) {
				const ev = revs[next++];
				inflight.add(ev.id);
				c.send(['EVENT', ev]);
			}
			if (inflight.size === 0)
				return;
			const ok = await c.next((m) => m[0] === 'OK' && inflight.has(m[1]), 20000);
			assert.equal(ok[2], true, `bulk create refused: ${ok[3]}`);
			inflight.delete(ok[1]);
		}
	}));
	for (const c of conns)
		c.ws.terminate();
	return revs;
}

// The current revision id of every d, read fresh with `head` queries.
async function headIds(ds) {
	const ids = new Map();
	for (let i = 0; i < ds.length; i += 250) {
		const rows = await events(stack, admin, { artifact: 'head', '#d': ds.slice(i, i + 250) });
		for (const ev of rows)
			ids.set(tagValue(ev, 'd'), ev.id);
	}
	return ids;
}

// --- across nodes ------------------------------------------------------------

describe('across nodes', () => {
	test('a write through node A reaches syncs on both nodes', async () => {
		const X = await createChannel(stack, admin, { name: 'x' });
		const rev = await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'shared' });
		const onB = await client(1, reader.sk);
		const onA = await client(0, reader.sk);
		assert.deepEqual(await openSync(onB, 's', { artifact: 'current', '#h': [X] }), [plain(rev)]);
		assert.deepEqual(await openSync(onA, 's', { artifact: 'current', '#h': [X] }), [plain(rev)]);
		const edited = await update(rev);
		assert.deepEqual(await nextEvent(onB, 's'), plain(edited));
		assert.deepEqual(await nextEvent(onA, 's'), plain(edited));
		// and through node B to node A
		const viaB = await publishOn(1, admin, { kind: 45010, content: 'via b',
			tags: revisionTags({ d: tagValue(rev, 'd'), h: X, op: 'update', prev: edited.id, title: 'via b' }) });
		assertAccepted(viaB, 'update through node b');
		const again = viaB.event;
		assert.equal((await nextEvent(onA, 's')).id, again.id);
		assert.equal((await nextEvent(onB, 's')).id, again.id);
		await onB.none(isFor('s'), QUIET_MS);
	});

	test('a plain live REQ on node B gets what is written through node A', async () => {
		const X = await createChannel(stack, admin, { name: 'chat' });
		const onB = await client(1, reader.sk);
		onB.send(['REQ', 'chat', { kinds: [9], '#h': [X] }]);
		await onB.next((m) => m[0] === 'EOSE' && m[1] === 'chat');
		const msg = await chat(stack, admin, X, 'from node a');
		assert.deepEqual(await nextEvent(onB, 'chat'), plain(msg));
		// revisions reach plain REQs too
		onB.send(['REQ', 'revs', { kinds: [45010], '#h': [X] }]);
		await onB.next((m) => m[0] === 'EOSE' && m[1] === 'revs');
		const rev = await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'plain' });
		assert.deepEqual(await nextEvent(onB, 'revs'), plain(rev));
		await onB.none((m) => m[0] === 'EVENT', QUIET_MS);
	});

	test('ephemeral events reach live readers on both nodes, by access, and are never stored', async () => {
		const X = await createChannel(stack, admin, { name: 'typing' });
		const Q = await createChannel(stack, admin, { name: 'secret typing', visibility: 'private' });
		const member = newKey();
		await addMember(stack, admin, Q, member.pk);
		const filter = { kinds: [20001], '#h': [X, Q] };
		const readers = [await client(0, reader.sk), await client(1, reader.sk)];
		const members = [await client(0, member.sk), await client(1, member.sk)];
		for (const c of [...readers, ...members]) {
			c.send(['REQ', 'eph', filter]);
			await c.next((m) => m[0] === 'EOSE' && m[1] === 'eph');
		}
		const open = await publish(stack, admin, { kind: 20001, tags: [['h', X]], content: 'typing...' });
		assertAccepted(open, 'ephemeral in an open channel');
		for (const c of [...readers, ...members])
			assert.deepEqual(await nextEvent(c, 'eph'), plain(open.event));
		const secret = await publishOn(1, member.sk, { kind: 20001, tags: [['h', Q]], content: 'psst' });
		assertAccepted(secret, 'ephemeral in a private channel');
		for (const c of members)
			assert.deepEqual(await nextEvent(c, 'eph'), plain(secret.event));
		for (const c of readers)
			await c.none((m) => m[0] === 'EVENT' && m[1] === 'eph', QUIET_MS);
		const stored = await stack.query(`SELECT count(*) FROM events WHERE id IN ('${open.event.id}',
			'${secret.event.id}')`);
		assert.equal(stored[0][0], '0');
		const later = await client(1, member.sk);
		later.send(['REQ', 'eph', filter]);
		assert.deepEqual(await later.next((m) => m[1] === 'eph'), ['EOSE', 'eph']);
	});
});

// --- the snapshot race ---------------------------------------------------------

describe('the snapshot race', () => {
	test('a sync of 2,000 artifacts opened during 20 concurrent edit streams ends exact', async () => {
		const X = await createChannel(stack, admin, { name: 'race' });
		const revs = await bulkCreate(2000, X);
		const ds = revs.map((e) => tagValue(e, 'd'));
		const hot = revs.filter((_, i) => i % 100 === 7);
		assert.equal(hot.length, 20);
		const chains = new Map(hot.map((e) => [tagValue(e, 'd'), [e.id]]));
		const c = await client(1, reader.sk);

		let eose = false;
		const editors = hot.map(async (first) => {
			let cur = first;
			// keep editing until well after EOSE
			for (let since = 0; since < 4; since += eose ? 1 : 0) {
				cur = await update(cur);
				chains.get(tagValue(cur, 'd')).push(cur.id);
			}
		});
		await sleep(40);
		// The client: snapshot, then live changes, applied in order.
		const held = new Map();
		const received = new Map();  // d -> ids in arrival order
		let snapshotSize = 0;
		let lastD = '';
		const apply = (ev) => {
			const d = tagValue(ev, 'd');
			if (!received.has(d))
				received.set(d, []);
			received.get(d).push(ev.id);
			if (ev.kind === 45011 || tagValue(ev, 'op') === 'delete')
				held.delete(d);
			else
				held.set(d, ev.id);
		};
		const t0 = Date.now();
		c.send(['REQ', 'race', { artifact: 'current', '#h': [X] }]);
		for (;;) {
			const m = await c.next(isFor('race'), 20000);
			assert.notEqual(m[0], 'CLOSED', `the sync closed: ${m[2]}`);
			if (m[0] === 'EOSE')
				break;
			const d = tagValue(m[2], 'd');
			assert.ok(d > lastD, 'the snapshot is not ordered by d');
			lastD = d;
			snapshotSize++;
			apply(m[2]);
		}
		const snapshotMs = Date.now() - t0;
		eose = true;
		assert.equal(snapshotSize, 2000);
		const pump = (async () => {
			for (;;) {
				const m = await c.next(isFor('race'), 3000).catch(() => null);
				if (!m)
					return;
				assert.equal(m[0], 'EVENT', `unexpected ${JSON.stringify(m).slice(0, 200)}`);
				apply(m[2]);
			}
		})();
		await Promise.all(editors);
		await pump;  // ends 3 s after the last frame
		// same current ids as a fresh head read of all 2,000
		const heads = await headIds(ds);
		assert.equal(heads.size, 2000);
		assert.equal(held.size, 2000);
		for (const d of ds)
			assert.equal(held.get(d), heads.get(d), `artifact ${d} differs`);
		// never an older revision after a newer one, and every edit chain
		// ends at its last revision
		for (const [d, chain] of chains) {
			const got = received.get(d).map((id) => chain.indexOf(id));
			for (let i = 1; i < got.length; i++)
				assert.ok(got[i] > got[i - 1], `artifact ${d}: revision ${got[i]} after ${got[i - 1]}`);
			assert.equal(got.at(-1), chain.length - 1);
		}
		assert.ok(snapshotMs < 10000, `snapshot took ${snapshotMs} ms`);
	});
});

// --- capture failures ----------------------------------------------------------

describe('capture failures', () => {
	let leader = 0;

	test('killing capture closes syncs and live REQs within the heartbeat window', async () => {
		const X = await createChannel(stack, admin, { name: 'kill' });
		const rev = await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'k' });
		const onB = await client(1, reader.sk);
		const onA = await client(0, reader.sk);
		await openSync(onB, 's', { artifact: 'current', '#h': [X] });
		await openSync(onA, 's', { artifact: 'current', '#h': [X] });
		onB.send(['REQ', 'chat', { kinds: [9], '#h': [X] }]);
		await onB.next((m) => m[0] === 'EOSE' && m[1] === 'chat');

		const killedAt = Date.now();
		await stack.stopCapture(leader, 'SIGKILL');
		assert.equal(await closedReason(onB, 's', WINDOW_MS + 1000), 'resync: change feed interrupted');
		const took = Date.now() - killedAt;
		assert.ok(took <= WINDOW_MS, `the sync was closed ${took} ms after the kill`);
		assert.equal(await closedReason(onA, 's', 1000), 'resync: change feed interrupted');
		assert.equal(await closedReason(onB, 'chat', 1000), 'resync: change feed interrupted');
		const r = await waitReady(1, false);
		assert.deepEqual(r.json(), { ready: true, database: 'ok', redis: 'ok', feed: 'down', stopping: false });
		await waitReady(0, false);

		// no sync can start without the feed
		onB.send(['REQ', 'early', { artifact: 'current', '#h': [X] }]);
		assert.equal(await closedReason(onB, 'early', 5000), 'error: change feed unavailable');

		// a new capture: reopened syncs work across nodes
		leader = await stack.startCapture();
		await waitReady(0, true);
		await waitReady(1, true);
		assert.deepEqual((await openSync(onB, 's', { artifact: 'current', '#h': [X] })).map((e) => e.id), [rev.id]);
		const edited = await update(rev);
		assert.deepEqual(await nextEvent(onB, 's'), plain(edited));
	});

	test('a standby capture takes over when the leader is killed', async () => {
		const standby = await stack.startCapture();
		await waitLog(stack.logs.captures[standby], /standing by/);
		const X = await createChannel(stack, admin, { name: 'failover' });
		const rev = await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'f' });
		const onB = await client(1, reader.sk);
		await openSync(onB, 's', { artifact: 'current', '#h': [X] });

		await stack.stopCapture(leader, 'SIGKILL');
		assert.equal(await closedReason(onB, 's', 5000), 'resync: change feed interrupted');
		await waitLog(stack.logs.captures[standby], /leadership acquired/);
		leader = standby;
		await waitReady(1, true);
		// reopened syncs are served by the new leader's feed
		assert.deepEqual((await openSync(onB, 's', { artifact: 'current', '#h': [X] })).map((e) => e.id), [rev.id]);
		const edited = await update(rev);
		assert.deepEqual(await nextEvent(onB, 's'), plain(edited));
		const moved = await accept(stack, admin, { d: tagValue(rev, 'd'), h: await createChannel(stack, admin),
			op: 'move', prev: edited.id, title: 'away' });
		const marker = await nextEvent(onB, 's');
		assert.equal(tagValue(marker, 'reason'), 'moved');
		assert.equal(tagValue(marker, 'prev'), edited.id);
		assert.equal(moved.kind, 45010);
	});
});
