// The relay's capture feed subscriber against a scripted publisher
// (docs/operations.md "Epoch, sequence numbers, heartbeats and marks" and
// "What relay nodes do with gaps"): lib/fakecapture.mjs speaks ZeroMQ's
// wire protocol as a PUB socket and sends exactly the heartbeats, marks and
// signals each test needs, so every rule is exercised on purpose:
// readiness follows heartbeats; the relay subscribes to `hb` and, lazily,
// to the communities of its connections; a sync waits for the first mark
// (or the signal with seq 1) of the epoch; signals drive re-reads, access
// checks (in the same snapshot as the data) and plain live delivery; held
// changes are bounded; a seq gap or a mark ahead interrupts one community,
// a new epoch or lost heartbeats every community, and late messages of an
// epoch left behind are ignored; afterwards reopened syncs work. The data
// itself is real: a relay, PostgreSQL and Redis, with writes through the
// relay's HTTP API.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { connectWs, get, newKey, signEvent, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, chat, createChannel, publish, removeMember, tagValue, uuid,
} from './lib/artifacts.mjs';
import { FakeCapture, communityOf } from './lib/fakecapture.mjs';

const HEARTBEAT_MS = 200;
const WINDOW_MS = 3 * HEARTBEAT_MS + 500;
const QUIET_MS = 500;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let fake;
let stack;
let admin, admin2;
let cid, cid2;
let epoch = 0x1000n;
let autoMark = true;
const seqs = new Map();      // community -> last seq sent in this epoch
const reader = newKey();
const sockets = [];

before(async () => {
	fake = new FakeCapture();
	await fake.listen();
	// Like capture: a subscription to "<community>:" is answered by a mark.
	fake.onSubscribe = (prefix) => {
		const c = communityOf(prefix);
		if (c !== null && autoMark && fake.beatTimer)
			fake.mark(epoch, c, seqs.get(c) ?? 0);
	};
	stack = await startRelay({
		capture: false,
		ready: false,
		communities: [{ hosts: ['localhost'] }, { hosts: ['127.0.0.1'] }],
		env: { COMB_CAPTURE_ENDPOINT: fake.endpoint, COMB_CAPTURE_HEARTBEAT_MS: String(HEARTBEAT_MS) },
	});
	[admin, admin2] = stack.admins;
	cid = Number(stack.communities[0].id);
	cid2 = Number(stack.communities[1].id);
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
	await fake?.close();
});

// --- helpers -----------------------------------------------------------------

const host2 = () => `127.0.0.1:${stack.port}`;

async function client(sk, community = 1) {
	const c = await connectWs(stack.url, sk, community === 2 ? { host: host2() } : {});
	sockets.push(c);
	return c;
}

const plain = (ev) => JSON.parse(JSON.stringify(ev));
const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

async function openSync(c, id, filter, ms = 10000) {
	c.send(['REQ', id, filter]);
	const events = [];
	for (;;) {
		const m = await c.next(isFor(id), ms);
		if (m[0] === 'EOSE')
			return events;
		if (m[0] === 'CLOSED')
			throw new Error(`sync ${id} closed: ${m[2]}`);
		events.push(m[2]);
	}
}

async function closedReason(c, id, ms = 5000) {
	const m = await c.next(isFor(id), ms);
	assert.equal(m[0], 'CLOSED', `expected CLOSED on ${id}, got ${JSON.stringify(m).slice(0, 300)}`);
	return m[2];
}

async function nextEvent(c, id, ms = 5000) {
	const m = await c.next(isFor(id), ms);
	assert.equal(m[0], 'EVENT', `expected an EVENT on ${id}, got ${JSON.stringify(m).slice(0, 300)}`);
	return m[2];
}

const quiet = (c, id, ms = QUIET_MS) => c.none(isFor(id), ms);

async function plainReq(c, id, filter) {
	c.send(['REQ', id, filter]);
	await c.next((m) => m[0] === 'EOSE' && m[1] === id);
}

// Sends the next signal of community c in this epoch.
function signal(c, fields) {
	const seq = (seqs.get(c) ?? 0) + 1;
	seqs.set(c, seq);
	// ephemeral events have no transaction position
	fake.signal({ epoch, community: c, seq, ...(fields.type === 'ephemeral' ? {} : { xid: 1 }), ...fields });
	return seq;
}

// Starts a new epoch: heartbeats carry it, sequence numbers start over,
// and (when marks is set) every community gets its mark, as capture does.
function newEpoch(marks = true) {
	epoch += 1n;
	seqs.clear();
	fake.epochOfBeats = epoch;
	fake.heartbeat(epoch);
	if (marks) {
		fake.mark(epoch, cid, 0);
		fake.mark(epoch, cid2, 0);
	}
}

async function readyz() {
	return get(stack.url, '/readyz');
}

// Waits until /readyz reports the feed up (want) or down; the node stays
// ready (200) either way: readiness is PostgreSQL and Redis.
async function waitReady(want) {
	const deadline = Date.now() + 5000;
	for (;;) {
		const r = await readyz();
		assert.equal(r.status, 200, r.body);
		if ((r.json().feed === 'up') === want)
			return r;
		assert.ok(Date.now() < deadline, `/readyz stayed ${r.body}`);
		await sleep(25);
	}
}

// --- the rules -----------------------------------------------------------------

describe('the feed', () => {
	let X, P, X2;

	test('readiness reports the heartbeats without needing them', async () => {
		await fake.subscribed('hb\0');
		const r = await readyz();
		assert.equal(r.status, 200);
		assert.deepEqual(r.json(), { ready: true, database: 'ok', redis: 'ok', feed: 'down', stopping: false });
		fake.beatEvery(epoch, HEARTBEAT_MS);
		await waitReady(true);
	});

	test('communities are subscribed to lazily, when a connection opens', async () => {
		assert.ok(!fake.subscriptions.some((p) => p.toString().startsWith(`${cid}:`)));
		X = await createChannel(stack, admin, { name: 'x' });
		P = await createChannel(stack, admin, { name: 'p', visibility: 'private' });
		await addMember(stack, admin, P, reader.pk);
		await client(reader.sk);
		await fake.subscribed(`${cid}:`);
		assert.ok(!fake.subscriptions.some((p) => p.toString().startsWith(`${cid2}:`)),
			'subscribed to a community without connections');
		const res = await publish(stack, admin2, { kind: 9007, tags: [['h', X2 = uuid()], ['name', 'x2']] },
			{ host: host2() });
		assertAccepted(res, 'channel in community 2');
		await client(admin2, 2);
		await fake.subscribed(`${cid2}:`);
	});

	test('a sync waits for the first mark of the epoch', async () => {
		newEpoch(false);
		autoMark = false;
		const c = await client(reader.sk);
		c.send(['REQ', 'wait', { artifact: 'current', '#h': [X] }]);
		await quiet(c, 'wait', 400);
		fake.mark(epoch, cid, 5);
		seqs.set(cid, 5);
		assert.deepEqual(await c.next(isFor('wait')), ['EOSE', 'wait']);
		autoMark = true;
	});

	test('without a mark a sync is refused once the wait is over', async () => {
		autoMark = false;
		newEpoch(false);
		const c = await client(reader.sk);
		const t0 = Date.now();
		c.send(['REQ', 'nomark', { artifact: 'current', '#h': [X] }]);
		assert.equal(await closedReason(c, 'nomark', 5000), 'error: change feed unavailable');
		assert.ok(Date.now() - t0 >= 3 * HEARTBEAT_MS, 'refused without waiting');
		autoMark = true;
		// the relay keeps asking for a mark while capture is alive
		await openSync(c, 'nomark', { artifact: 'current', '#h': [X] });
	});

	test('a signal with seq 1 of a new epoch makes the community trusted', async () => {
		autoMark = false;
		newEpoch(false);
		const c = await client(reader.sk);
		c.send(['REQ', 'one', { artifact: 'current', '#h': [X] }]);
		await quiet(c, 'one', 300);
		signal(cid, { type: 'channel', channel: uuid() });
		assert.deepEqual(await c.next(isFor('one')), ['EOSE', 'one']);
		autoMark = true;
	});

	test('more held changes than a sync may hold close it before EOSE', async () => {
		autoMark = false;
		// Changes of n distinct artifacts arrive while the sync waits for
		// the community's trust (seq 1 of the epoch "lost", no mark yet).
		const held = async (n) => {
			newEpoch(false);
			seqs.set(cid, 1);
			const c = await client(reader.sk);
			c.send(['REQ', 'held', { artifact: 'current', '#h': [X] }]);
			await quiet(c, 'held', 200);
			for (let i = 0; i < n; i++)
				signal(cid, { type: 'head', channel: X, d: uuid(), id: '0'.repeat(64) });
			fake.mark(epoch, cid, seqs.get(cid));
			return c.next(isFor('held'));
		};
		assert.deepEqual(await held(1025), ['CLOSED', 'held', 'resync: too many held changes']);
		assert.deepEqual(await held(1024), ['EOSE', 'held']);
		autoMark = true;
	});

	test('signals drive re-reads and access checks', async () => {
		const rev = await accept(stack, admin, { d: uuid(), h: P, op: 'create', title: 'first' });
		const c = await client(reader.sk);
		assert.deepEqual(await openSync(c, 's', { artifact: 'current', '#h': [P] }), [plain(rev)]);
		const edited = await accept(stack, admin, { d: tagValue(rev, 'd'), h: P, op: 'update', prev: rev.id,
			title: 'second' });
		// no capture forwarded it: nothing yet
		await quiet(c, 's');
		// the head signal makes the relay re-read the artifact
		signal(cid, { type: 'head', channel: P, d: tagValue(rev, 'd'), id: edited.id });
		assert.deepEqual(await nextEvent(c, 's'), plain(edited));
		// a repeated signal sends nothing new
		signal(cid, { type: 'head', channel: P, d: tagValue(rev, 'd'), id: edited.id });
		await quiet(c, 's');
		// a member signal for another reader changes nothing
		await removeMember(stack, admin, P, reader.pk);
		signal(cid, { type: 'member', channel: P, pubkey: newKey().pk });
		await quiet(c, 's');
		// the reader's own member signal: the reader cannot read P now
		signal(cid, { type: 'member', channel: P, pubkey: reader.pk });
		assert.equal(await closedReason(c, 's'), 'resync: access changed');
		await addMember(stack, admin, P, reader.pk);
	});

	test('nothing written after the reader lost a channel is sent, whatever the signal order', async () => {
		const rev = await accept(stack, admin, { d: uuid(), h: P, op: 'create', title: 'before' });
		const c = await client(reader.sk);
		await openSync(c, 'late', { artifact: 'current', '#h': [P] });
		await removeMember(stack, admin, P, reader.pk);
		const after = await accept(stack, admin, { d: tagValue(rev, 'd'), h: P, op: 'update', prev: rev.id,
			title: 'after the removal' });
		// the head signal arrives first: the re-read finds P unreadable
		signal(cid, { type: 'head', channel: P, d: tagValue(rev, 'd'), id: after.id });
		assert.equal(await closedReason(c, 'late'), 'resync: access changed');
		await addMember(stack, admin, P, reader.pk);
	});

	test('stored and ephemeral events reach plain live REQs through signals only, by access', async () => {
		const c = await client(reader.sk);
		const outsider = await client(newKey().sk);
		for (const x of [c, outsider])
			await plainReq(x, 'live', { kinds: [9, 20001], '#h': [X, P] });
		// with the feed up the relay does not deliver its own writes itself
		const msg = await chat(stack, admin, P, 'only through the feed');
		await c.none((m) => m[0] === 'EVENT', QUIET_MS);
		signal(cid, { type: 'event', channel: P, id: msg.id, kind: 9, pubkey: msg.pubkey });
		assert.deepEqual(await nextEvent(c, 'live'), plain(msg));
		await outsider.none((m) => m[0] === 'EVENT', QUIET_MS);

		const typing = signEvent(admin, { kind: 20001, tags: [['h', X]], content: 'typing' });
		signal(cid, { type: 'ephemeral', channel: X, payload: JSON.stringify(typing) });
		assert.deepEqual(await nextEvent(c, 'live'), plain(typing));
		assert.deepEqual(await nextEvent(outsider, 'live'), plain(typing));
		const secret = signEvent(admin, { kind: 20001, tags: [['h', P]], content: 'secret' });
		signal(cid, { type: 'ephemeral', channel: P, payload: JSON.stringify(secret) });
		assert.deepEqual(await nextEvent(c, 'live'), plain(secret));
		await outsider.none((m) => m[0] === 'EVENT', QUIET_MS);
	});

	test('a seq gap interrupts the syncs and live REQs of that community only', async () => {
		await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'gap' });
		const c = await client(reader.sk);
		const other = await client(admin2, 2);
		await openSync(c, 'g', { artifact: 'current', '#h': [X] });
		await plainReq(c, 'chat', { kinds: [9], '#h': [X] });
		await openSync(other, 'g2', { artifact: 'current', '#h': [X2] });
		seqs.set(cid, (seqs.get(cid) ?? 0) + 1);  // one signal lost
		signal(cid, { type: 'channel', channel: uuid() });
		assert.equal(await closedReason(c, 'g'), 'resync: change feed interrupted');
		assert.equal(await closedReason(c, 'chat'), 'resync: change feed interrupted');
		await quiet(other, 'g2');
		// counting goes on from the signal that showed the gap
		await openSync(c, 'g', { artifact: 'current', '#h': [X] });
		signal(cid, { type: 'channel', channel: uuid() });
		await quiet(c, 'g');
		signal(cid2, { type: 'channel', channel: uuid() });
		await quiet(other, 'g2');
	});

	test('a mark ahead of the last signal interrupts', async () => {
		const c = await client(reader.sk);
		await openSync(c, 'm', { artifact: 'current', '#h': [X] });
		// a mark repeating the last seq is fine
		fake.mark(epoch, cid, seqs.get(cid) ?? 0);
		await quiet(c, 'm');
		seqs.set(cid, (seqs.get(cid) ?? 0) + 2);
		fake.mark(epoch, cid, seqs.get(cid));
		assert.equal(await closedReason(c, 'm'), 'resync: change feed interrupted');
		await openSync(c, 'm', { artifact: 'current', '#h': [X] });
	});

	test('a new epoch interrupts every community', async () => {
		const c = await client(reader.sk);
		const other = await client(admin2, 2);
		await openSync(c, 'e', { artifact: 'current', '#h': [X] });
		await openSync(other, 'e2', { artifact: 'current', '#h': [X2] });
		const before = epoch;
		newEpoch(true);
		assert.equal(await closedReason(c, 'e'), 'resync: change feed interrupted');
		assert.equal(await closedReason(other, 'e2'), 'resync: change feed interrupted');
		await openSync(c, 'e', { artifact: 'current', '#h': [X] });
		await openSync(other, 'e2', { artifact: 'current', '#h': [X2] });
		// a late message of the epoch left behind (a former leader) is stale
		fake.heartbeat(before);
		fake.signal({ epoch: before, community: cid, seq: 99, type: 'channel', channel: uuid(), xid: 1 });
		await quiet(c, 'e');
		await quiet(other, 'e2');
		signal(cid, { type: 'channel', channel: uuid() });
		await quiet(c, 'e');
	});

	test('missed heartbeats interrupt everything; the relay recovers when they return', async () => {
		const c = await client(reader.sk);
		const other = await client(admin2, 2);
		await openSync(c, 'h', { artifact: 'current', '#h': [X] });
		await openSync(other, 'h2', { artifact: 'current', '#h': [X2] });
		const t0 = Date.now();
		fake.stopBeats();
		assert.equal(await closedReason(c, 'h', WINDOW_MS + 1000), 'resync: change feed interrupted');
		const took = Date.now() - t0;
		assert.ok(took >= 2 * HEARTBEAT_MS && took <= WINDOW_MS, `closed ${took} ms after the last heartbeat`);
		assert.equal(await closedReason(other, 'h2', 1000), 'resync: change feed interrupted');
		await waitReady(false);
		// while the feed is down, a plain REQ waits for it as a sync does,
		// then is refused: writes through other nodes would never reach it
		c.send(['REQ', 'local', { kinds: [9], '#h': [X] }]);
		assert.deepEqual(await c.next((m) => m[1] === 'local', WINDOW_MS + 5000),
			['CLOSED', 'local', 'error: change feed unavailable']);
		// one that can match nothing live (no canonical channel) neither
		// registers nor waits: its stored part (none) and EOSE at once
		const asked = Date.now();
		c.send(['REQ', 'none', { kinds: [9], '#h': ['not-a-channel'] }]);
		assert.deepEqual(await c.next((m) => m[1] === 'none', 2000), ['EOSE', 'none']);
		// (the wait would be 1.3 s: four heartbeats and 500 ms)
		assert.ok(Date.now() - asked < 1000, 'it waited for the feed');
		// the same epoch comes back: the relay asks for marks again
		fake.beatEvery(epoch, HEARTBEAT_MS);
		await waitReady(true);
		await openSync(c, 'h', { artifact: 'current', '#h': [X] });
		await openSync(other, 'h2', { artifact: 'current', '#h': [X2] });
		await plainReq(c, 'live', { kinds: [9], '#h': [X] });
	});
});
