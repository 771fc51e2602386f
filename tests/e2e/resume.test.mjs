// Resumable sync (PROTOCOL.md section 7.1), end to end over WebSocket: a
// REQ {"artifact":"changes"} sends the catch-up from a cursor as CHANGES
// frames, EOSE, then every later change as CHANGES frames with the cursor
// to persist, removals with their reasons and grants as upserts, never
// closing on access changes. Its cursors are the HTTP incremental ones.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, get, newKey, post, psqlSession, scrapeMetrics, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, createChannel, publish, removeMember, uuid,
} from './lib/artifacts.mjs';
import { diffStores, nonceOpts, settle, tagOf, truthFor } from './lib/clients.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let stack;
let admin;

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
});

after(async () => {
	await stack?.stop();
});

/**
 * One resumable sync of sk over scope on a relay: applies every CHANGES
 * frame to a d -> event store and keeps the cursor of the last frame, as
 * a client that persists both together.
 */
class Resume {
	constructor(relay, sk, scope = {}) {
		this.relay = relay;
		this.sk = sk;
		this.scope = scope;
		this.items = new Map();
		this.cursor = undefined;
		this.frames = [];       // every CHANGES object, in order
		this.applied = [];      // [frame index, change] in order
	}

	/** Opens the sync from the stored cursor; resolves after EOSE. */
	async open(sub = 's') {
		this.sub = sub;
		this.closed = null;
		this.eose = false;
		if (!this.ws) {
			this.ws = await connectWs(this.relay.wsUrl, this.sk);
			this.ws.ws.on('message', (data) => this.onMessage(JSON.parse(data.toString('utf8'))));
		}
		const filter = { artifact: 'changes', ...this.scope };
		if (this.cursor)
			filter.cursor = this.cursor;
		this.ws.send(['REQ', sub, filter]);
		await this.until(() => this.eose || this.closed, 20000, 'EOSE');
		if (this.closed)
			throw new Error(`closed: ${this.closed}`);
	}

	onMessage(m) {
		if (m[1] !== this.sub)
			return;
		if (m[0] === 'CHANGES') {
			const body = m[2];
			this.frames.push({ ...body, live: this.eose });
			for (const c of body.changes) {
				this.applied.push([this.frames.length - 1, c]);
				if (c.op === 'upsert')
					this.items.set(tagOf(c.event, 'd'), c.event);
				else
					this.items.delete(c.d);
			}
			this.cursor = body.cursor;
		} else if (m[0] === 'EOSE') {
			this.eose = true;
		} else if (m[0] === 'CLOSED') {
			this.closed = m[2];
		}
	}

	async until(pred, ms, what) {
		const deadline = Date.now() + ms;
		while (!pred()) {
			if (Date.now() > deadline)
				throw new Error(`no ${what} within ${ms} ms; frames ${JSON.stringify(this.frames).slice(-600)}`);
			await sleep(10);
		}
	}

	revisions() {
		return new Map([...this.items].map(([d, ev]) => [d, ev.id]));
	}

	/** Waits until the store equals a fresh `current` read over its scope. */
	async converges(ttl = null, ms = 15000) {
		await settle(this.relay);
		const truth = await truthFor(this.relay.url, this.sk, this.scope, ttl);
		const deadline = Date.now() + ms;
		for (;;) {
			const diff = diffStores(this.revisions(), truth);
			if (!diff)
				return;
			if (Date.now() > deadline)
				assert.fail(`the store differs from a fresh read: ${JSON.stringify(diff)}`);
			await sleep(20);
		}
	}

	/** The next live change matching pred, waiting for it. */
	async change(pred, ms = 10000) {
		let found;
		await this.until(() => (found = this.applied.find(([i, c]) => this.frames[i].live && !c.seen && pred(c))),
			ms, 'matching change');
		found[1].seen = true;
		return found[1];
	}

	close() {
		return this.ws?.close();
	}
}

async function member(...channels) {
	const k = newKey();
	for (const h of channels)
		await addMember(stack, admin, h, k.pk);
	return k;
}

/** n new artifacts in channel h, written 10 at a time. */
async function artifacts(h, n) {
	const out = [];
	for (let i = 0; i < n; i += 10) {
		const batch = Array.from({ length: Math.min(10, n - i) }, (_, j) => {
			const d = uuid();
			return accept(stack, admin, { d, h, op: 'create', title: `item ${i + j}` }).then((a) => ({ d, ...a }));
		});
		out.push(...await Promise.all(batch));
	}
	return out;
}

async function reqAnswer(sk, filter, relay = stack) {
	const c = await connectWs(relay.wsUrl, sk);
	c.send(['REQ', 'x', filter]);
	const m = await c.next((x) => x[1] === 'x' && (x[0] === 'CLOSED' || x[0] === 'EOSE'), 10000);
	await c.close();
	return m;
}

async function httpRead(sk, filter) {
	const r = await post(stack.url, '/query', [{ artifact: 'incremental', ...filter }], sk, nonceOpts());
	assert.equal(r.status, 200, r.body);
	return JSON.parse(r.body);
}

// --- the REQ ---------------------------------------------------------------------

describe('opening', () => {
	test('NIP-11 lists the mode while incremental reads are on', async () => {
		const r = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
		assert.deepEqual(JSON.parse(r.body).artifacts.sync.modes, ['current', 'changes']);
	});

	test('refusals: limit, other predicates, a foreign or forged cursor', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		assert.deepEqual(await reqAnswer(reader.sk, { artifact: 'changes', limit: 5 }),
			['CLOSED', 'x', 'invalid: a resumable sync takes no limit']);
		assert.deepEqual(await reqAnswer(reader.sk, { artifact: 'changes', offset: 5 }),
			['CLOSED', 'x', 'invalid: a resumable sync takes no offset']);
		assert.match((await reqAnswer(reader.sk, { artifact: 'changes', '#d': [uuid()] }))[2], /^invalid: /);
		const forged = await reqAnswer(reader.sk, { artifact: 'changes', cursor: 'AAAA' });
		assert.match(forged[2], /^incremental_bad_cursor: /);
		// a cursor of another scope, and of another reader
		const { cursor } = await httpRead(reader.sk, { '#h': [h] });
		assert.match((await reqAnswer(reader.sk, { artifact: 'changes', cursor }))[2], /^incremental_bad_cursor: /);
		assert.match((await reqAnswer(admin, { artifact: 'changes', '#h': [h], cursor }))[2],
			/^incremental_bad_cursor: /);
		// before AUTH
		const anon = await connectWs(stack.wsUrl, null);
		anon.send(['REQ', 'x', { artifact: 'changes' }]);
		assert.match((await anon.next((m) => m[0] === 'CLOSED'))[2], /^auth-required: /);
		await anon.close();
	});

	test('while incremental reads are off: error: incremental_unavailable, and NIP-11 lists only current', async () => {
		const off = await startRelay({ env: { COMB_INCREMENTAL_ENABLED: 'false' } });
		try {
			assert.deepEqual(await reqAnswer(off.admins[0], { artifact: 'changes' }, off),
				['CLOSED', 'x', 'error: incremental_unavailable']);
			const r = await get(off.url, '/', { headers: { accept: 'application/nostr+json' } });
			assert.deepEqual(JSON.parse(r.body).artifacts.sync.modes, ['current']);
		} finally {
			await off.stop();
		}
	});

	test('the catch-up is paged CHANGES frames, then EOSE, and equals a fresh read', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		// a catch-up page holds at most 1,000 items (an HTTP read's largest)
		await artifacts(h, 1001);
		const r = new Resume(stack, reader.sk, { '#h': [h] });
		await r.open();
		assert.ok(r.frames.length >= 2, 'more than one page');
		assert.deepEqual(r.frames.map((f) => f.more), [...r.frames.slice(1).map(() => true), false]);
		assert.equal(r.items.size, 1001);
		await r.converges();
		await r.close();
	});
});

// --- live ---------------------------------------------------------------------------

describe('live', () => {
	test('every removal reason and a grant arrive live, and the sync stays open', async () => {
		const a = await createChannel(stack, admin, { visibility: 'private' });
		const b = await createChannel(stack, admin, { visibility: 'private' });
		const hidden = await createChannel(stack, admin, { visibility: 'private' });
		const ttl = await createChannel(stack, admin, { visibility: 'private', ttl: 3600 });
		const reader = await member(a, b, ttl);
		const [x, y, z, w] = await artifacts(a, 4);
		const [inB] = await artifacts(b, 1);
		const [inHidden] = await artifacts(hidden, 1);
		const r = new Resume(stack, reader.sk);
		await r.open();
		assert.ok(r.items.has(x.d) && r.items.has(inB.d) && !r.items.has(inHidden.d));

		const edit = await accept(stack, admin, { d: x.d, h: a, op: 'update', prev: x.id, title: 'edited' });
		assert.equal((await r.change((c) => c.op === 'upsert' && c.event.id === edit.id)).event.id, edit.id);
		await accept(stack, admin, { d: y.d, h: a, op: 'delete', prev: y.id });
		assert.deepEqual(await r.change((c) => c.d === y.d), { op: 'remove', d: y.d, h: a, reason: 'deleted', seen: true });
		await accept(stack, admin, { d: z.d, h: hidden, op: 'move', prev: z.id });
		assert.deepEqual(await r.change((c) => c.d === z.d), { op: 'remove', d: z.d, h: a, reason: 'moved', seen: true });
		await accept(stack, admin, { d: w.d, h: ttl, op: 'move', prev: w.id });
		assert.deepEqual(await r.change((c) => c.d === w.d), { op: 'remove', d: w.d, h: a, reason: 'ttl', seen: true });
		assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', a], ['e', edit.id]] }));
		assert.deepEqual(await r.change((c) => c.d === x.d), { op: 'remove', d: x.d, h: a, reason: 'redacted', seen: true });
		// revocation: access removals, no close
		await removeMember(stack, admin, b, reader.pk);
		assert.deepEqual(await r.change((c) => c.d === inB.d), { op: 'remove', d: inB.d, h: b, reason: 'access', seen: true });
		// grant: the channel's artifacts, however old, as upserts
		await addMember(stack, admin, hidden, reader.pk);
		const granted = await r.change((c) => c.op === 'upsert' && tagOf(c.event, 'd') === inHidden.d);
		assert.equal(granted.event.id, inHidden.id);
		assert.equal(r.closed, null, 'never closed across access changes');
		await r.converges(new Set([ttl]));
		// every live frame carries a cursor, and HTTP continues from the last one
		assert.ok(r.frames.filter((f) => f.live).every((f) => typeof f.cursor === 'string' && f.more === false));
		const rest = await httpRead(reader.sk, { cursor: r.cursor });
		assert.deepEqual(rest.changes, [], 'nothing delivered live is read again over HTTP');
		await r.close();
	});

	test('cursors move between HTTP and WebSocket both ways', async () => {
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const reader = await member(h);
		const first = await artifacts(h, 3);
		// below the first read's horizon, so that no later read replays them
		await settle(stack);
		// HTTP first read, then a write, then the WebSocket resumes from it
		const http1 = await httpRead(reader.sk, { '#h': [h] });
		assert.equal(http1.changes.length, 3);
		const edit = await accept(stack, admin, { d: first[0].d, h, op: 'update', prev: first[0].id, title: 'e1' });
		await settle(stack);
		const r = new Resume(stack, reader.sk, { '#h': [h] });
		r.cursor = http1.cursor;
		await r.open();
		const caught = r.frames.flatMap((f) => f.changes);
		assert.deepEqual(caught.map((c) => c.event?.id), [edit.id], 'only what changed since the HTTP cursor');
		// a live change, then HTTP continues from the frame's cursor
		const edit2 = await accept(stack, admin, { d: first[1].d, h, op: 'update', prev: first[1].id, title: 'e2' });
		await r.change((c) => c.event?.id === edit2.id);
		const wsCursor = r.cursor;
		await r.close();
		const edit3 = await accept(stack, admin, { d: first[2].d, h, op: 'update', prev: first[2].id, title: 'e3' });
		await settle(stack);
		const http2 = await httpRead(reader.sk, { '#h': [h], cursor: wsCursor });
		assert.deepEqual(http2.changes.map((c) => c.event.id), [edit3.id]);
	});
});

// --- exactness across reconnects ----------------------------------------------------------

test('a cursor from the middle of a live burst resumes without gap or duplicate, across a held write transaction', async () => {
	const seed = Number(process.env.COMB_TEST_SEED ?? crypto.randomInt(1 << 30));
	let state = seed;
	const rand = (n) => {
		state = (state * 1103515245 + 12345) % 2147483648;
		return state % n;
	};
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = await member(h);
	const live = await artifacts(h, 6);
	const heads = new Map(live.map((a) => [a.d, a.id]));
	const written = [];
	const write = async () => {
		const ds = [...heads.keys()];
		const d = ds[rand(ds.length)];
		const op = rand(5) === 0 ? 'delete' : 'update';
		const res = await accept(stack, admin, { d, h, op, prev: heads.get(d), title: `t${rand(1000)}` });
		written.push(res.id);
		if (op === 'delete') {
			heads.delete(d);
			const nd = uuid();
			const created = await accept(stack, admin, { d: nd, h, op: 'create' });
			written.push(created.id);
			heads.set(nd, created.id);
		} else {
			heads.set(d, res.id);
		}
	};
	const r = new Resume(stack, reader.sk, { '#h': [h] });
	await r.open();
	const burst = write_n(write, 20 + rand(20));
	// take the cursor and the store of some frame in the middle of the
	// burst: after some live changes (counted as changes, not frames, as a
	// busy relay may carry several writes in one frame)
	const cut = 2 + rand(6);
	const liveChanges = () => r.frames.filter((f) => f.live).reduce((n, f) => n + f.changes.length, 0);
	await r.until(() => liveChanges() >= cut, 20000, `${cut} live changes`);
	const held = new Map(r.items);
	const cursor = r.cursor;
	const cutFrame = r.frames.length;
	await r.close();
	const tx = psqlSession(stack.dbName);
	try {
		// a writing transaction holds the horizon across the reconnect
		await tx.run('BEGIN;');
		await tx.run('SELECT pg_current_xact_id();');
		await burst;
		// and writes after it, held back until it ends
		const before = written.length;
		await write_n(write, 3 + rand(5));
		const afterHold = new Set(written.slice(before));
		const resumed = new Resume(stack, reader.sk, { '#h': [h] });
		resumed.items = new Map(held);
		resumed.cursor = cursor;
		await resumed.open();
		const during = resumed.frames.flatMap((f) => f.changes);
		for (const c of during)
			if (c.op === 'upsert')
				assert.notEqual(held.get(tagOf(c.event, 'd'))?.id, c.event.id,
					`seed ${seed}: a revision applied before the cut (frame ${cutFrame}) is sent again`);
		assert.ok(!during.some((c) => c.op === 'upsert' && afterHold.has(c.event.id)),
			`seed ${seed}: a write above the held transaction was sent while it was open`);
		await tx.run('COMMIT;');
		// no signal follows the commit: the relay reads again until the
		// horizon passed what it was told about
		await resumed.converges();
		assert.ok(resumed.frames.some((f) => f.live && f.changes.length > 0), 'the held-back writes came live');
		for (const [, c] of resumed.applied)
			if (c.op === 'upsert')
				assert.notEqual(held.get(tagOf(c.event, 'd'))?.id, c.event.id, `seed ${seed}: duplicate`);
		await resumed.close();
	} finally {
		await tx.close();
	}
});

async function write_n(write, n) {
	for (let i = 0; i < n; i++)
		await write();
}

test('a resync: close reopens from the last cursor without loss', async () => {
	const beat = { COMB_CAPTURE_HEARTBEAT_MS: '200' };
	const own = await startRelay({ env: beat, captureEnv: beat });
	try {
		const sk = own.admins[0];
		const h = await createChannel(own, sk, { visibility: 'private' });
		const reader = newKey();
		assertAccepted(await publish(own, sk, { kind: 9000, tags: [['h', h], ['p', reader.pk, 'member']] }));
		const made = [];
		for (let i = 0; i < 3; i++) {
			const d = uuid();
			made.push({ d, ...(await accept(own, sk, { d, h, op: 'create' })) });
		}
		const r = new Resume(own, reader.sk, { '#h': [h] });
		await r.open();
		await own.stopCapture(0, 'SIGKILL');
		await r.until(() => r.closed, 10000, 'CLOSED');
		assert.equal(r.closed, 'resync: change feed interrupted');
		// writes while the sync is closed
		const edit = await accept(own, sk, { d: made[0].d, h, op: 'update', prev: made[0].id, title: 'while away' });
		await accept(own, sk, { d: made[1].d, h, op: 'delete', prev: made[1].id });
		await own.startCapture();
		await r.open('s2');
		// The catch-up holds every change below the horizon at its read;
		// a write the horizon had not passed yet (another transaction
		// older than it still running) follows live, right after EOSE.
		await r.until(() => r.items.get(made[0].d)?.id === edit.id && !r.items.has(made[1].d),
			5000, 'the edit and the delete made while away');
		await r.converges();
		await r.close();
	} finally {
		await own.stop();
	}
});

test('a quiet sync gets an empty CHANGES with a newer cursor, no more often than the quiet interval', async () => {
	const own = await startRelay({ env: { COMB_SYNC_QUIET_MS: '400' } });
	try {
		const sk = own.admins[0];
		const h = await createChannel(own, sk, { visibility: 'private' });
		const other = await createChannel(own, sk, { visibility: 'private' });
		const r = new Resume(own, sk, { '#h': [h] });
		await r.open();
		const start = Date.now();
		// writes outside the scope move the horizon, but send nothing
		for (let i = 0; i < 3; i++) {
			const d = uuid();
			await accept(own, sk, { d, h: other, op: 'create' });
		}
		await r.until(() => r.frames.some((f) => f.live), 5000, 'a quiet frame');
		const quiet = r.frames.filter((f) => f.live);
		assert.ok(Date.now() - start >= 300, 'not before the quiet interval');
		assert.deepEqual(quiet[0].changes, []);
		assert.notEqual(quiet[0].cursor, r.frames[0].cursor, 'a newer cursor');
		await sleep(1000);
		const all = r.frames.filter((f) => f.live);
		assert.ok(all.length <= 3, `at most one per interval, got ${all.length}`);
		await r.close();
	} finally {
		await own.stop();
	}
});

test('syncs of one scope at one cursor are answered by one read each change', async () => {
	const SUBS = 10;
	const EDITS = 5;
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = await member(h);
	let [rev] = await artifacts(h, 1);
	// reads that found the change: one per change and cursor (reads that
	// found the horizon still behind it are repeated, more of them when
	// other tests' transactions hold the cluster's horizon back)
	const reads = async () => (await scrapeMetrics(stack.url)).value('comb_resumable_reads_total{found="changes"}');
	const syncs = Array.from({ length: SUBS }, () => new Resume(stack, reader.sk, { '#h': [h] }));
	await Promise.all(syncs.map((r) => r.open()));
	const edit = async (i) => {
		rev = { d: rev.d, ...await accept(stack, admin, { d: rev.d, h, op: 'update', prev: rev.id, title: `v${i}` }) };
		for (const r of syncs)
			assert.equal((await r.change((c) => c.op === 'upsert' && c.event.id === rev.id)).event.id, rev.id);
	};
	// The first changes may find the syncs at different cursors: each read
	// leaves its syncs at the horizon it saw, which other tests' commits
	// move between two reads. Syncs read together stay together, so
	// changes are made until one read has left them all at one cursor.
	const cursors = () => new Set(syncs.map((r) => r.cursor)).size;
	let warm = 0;
	do
		await edit(warm++);
	while (cursors() > 1 && warm < 20);
	assert.equal(cursors(), 1, `the syncs still held ${cursors()} cursors after ${warm} changes`);
	const before = await reads();
	for (let i = 0; i < EDITS; i++)
		await edit(warm + i);
	const used = await reads() - before;
	assert.ok(used < SUBS * EDITS / 2, `${used} reads for ${SUBS} syncs and ${EDITS} changes`);
	for (const r of syncs) {
		await r.converges();
		await r.close();
	}
});
