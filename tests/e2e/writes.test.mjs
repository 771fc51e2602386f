// Pipelined EVENTs and group commit (issue 15): a connection's EVENTs enter
// the write path without waiting for the previous OK, every OK comes once
// and only after its write committed, the per-connection bound stops the
// relay from reading further, and the writes that queued up meanwhile are
// committed together in one transaction (one xid) with every rule of
// PROTOCOL.md section 5 holding as if they ran one after another: a
// competing edit of the same d is refused, a refused write and a failing
// write leave the others accepted. A relay killed with SIGKILL while
// batches commit loses no acknowledged write. Chat messages queued together
// are decided and stored as one run (services/relay/write/chat.c) with the
// same answers, each once, and moderation events in the same pipeline take
// effect for the messages after them; a run of artifact writes is one call
// with each write answered as if it ran alone in arrival order, its
// stretches of creates of distinct d stored together with the same
// answers, rows, seq order and notifications as one by one.
//
// Writes are made to queue up deterministically by holding the channel's
// row FOR UPDATE in a psql session: every artifact write share-locks its
// channel, so the first one waits on the lock (in a batch of its own) and
// the rest wait in the relay's queue until the lock goes.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';

import { connectWs, get, newKey, now, psqlSession, signEvent, startRelay } from './lib/harness.mjs';
import { addMember, createChannel, publishSigned, revisionTags, uuid } from './lib/artifacts.mjs';
import { tagOf } from './lib/clients.mjs';

const QUIET_MS = 700;
const PER_CONNECTION = 64;

let stack;
let admin;
let community;

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	community = stack.communities[0].id;
});

after(async () => {
	await stack?.stop();
});

function create(h, extra = {}) {
	const d = extra.d ?? uuid();
	return signEvent(admin, {
		kind: 45010, created_at: now(), content: extra.content ?? `content of ${d}`,
		tags: revisionTags({ d, h, op: extra.op ?? 'create', prev: extra.prev }),
	});
}

/** Holds channel h's row FOR UPDATE until release() is called. */
async function lockChannel(h) {
	const s = psqlSession(stack.dbName);
	await s.run('BEGIN;');
	await s.run(`SELECT 1 FROM channels WHERE community_id = ${community} AND id = '${h}' FOR UPDATE;`);
	return {
		async release() {
			await s.run('COMMIT;');
			await s.close();
		},
	};
}

/** The accepted_xid of each stored revision id. */
async function xids(ids) {
	const rows = await stack.query('SELECT id, xid::text FROM events' +
		` WHERE d IS NOT NULL AND community_id = ${community} AND id IN (${ids.map((i) => `'${i}'`).join(',')})`);
	return new Map(rows);
}

async function storedIds(ids) {
	if (ids.length === 0)
		return new Set();
	const rows = await stack.query(`SELECT id FROM events WHERE community_id = ${community}` +
		` AND id IN (${ids.map((i) => `'${i}'`).join(',')})`);
	return new Set(rows.map((r) => r[0]));
}

/** Makes storing any event whose JSON contains marker fail, until remove(). */
async function plantFailure(marker) {
	await stack.psql(`CREATE FUNCTION test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.raw::text LIKE '%${marker}%' THEN RAISE EXCEPTION 'planted failure'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER test_fail BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_fail();`);
	return {
		remove: () => stack.psql('DROP TRIGGER test_fail ON events; DROP FUNCTION test_fail();'),
	};
}

function message(sk, h, content = `message ${uuid()}`, tags = [['h', h]]) {
	return signEvent(sk, { kind: 9, created_at: now(), tags, content });
}

/** The events' xid by id (stored ones only). */
async function eventXids(ids) {
	const rows = await stack.query('SELECT id, xid::text FROM events' +
		` WHERE community_id = ${community} AND id IN (${ids.map((i) => `'${i}'`).join(',')})`);
	return new Map(rows);
}

/**
 * Sends events on c while channel h is locked, so that all but the first
 * queue up and then run as one batch, and collects every OK that arrives
 * until quiet: resolves to the list of OKs.
 */
async function pipelineBehindLock(c, h, events) {
	const lock = await lockChannel(h);
	const isOk = (m) => m[0] === 'OK';
	try {
		c.send(['EVENT', events[0]]);
		await new Promise((r) => setTimeout(r, 200));
		for (const ev of events.slice(1))
			c.send(['EVENT', ev]);
		await new Promise((r) => setTimeout(r, 300));
		assert.equal(c.queue.filter(isOk).length, 0, 'nothing answered before the lock went');
	} finally {
		await lock.release();
	}
	const deadline = Date.now() + 15000;
	while (c.queue.filter(isOk).length < events.length && Date.now() < deadline)
		await new Promise((r) => setTimeout(r, 50));
	const oks = c.drain().filter(isOk);
	await c.none(isOk, QUIET_MS);
	return oks;
}

/**
 * Asserts that of events, pipelined behind a lock and answered by oks,
 * only events[bad] failed, with error:, and was not stored, and that the
 * others after the first were committed by one transaction (stampsOf:
 * their xids by id). Resolves to the ids of the others.
 */
async function assertOnlyFailed(oks, events, bad, stampsOf) {
	assert.equal(oks.length, events.length);
	const answer = new Map(oks.map((m) => [m[1], m.slice(2)]));
	const badId = events[bad].id;
	assert.equal(answer.get(badId)[0], false);
	assert.match(answer.get(badId)[1], /^error: /);
	const good = events.filter((ev) => ev.id !== badId).map((ev) => ev.id);
	assert.ok(good.every((id) => answer.get(id)[0] === true));
	const x = await stampsOf(good.slice(1));
	assert.equal(x.size, good.length - 1);
	assert.equal(new Set(x.values()).size, 1);
	assert.deepEqual([...await storedIds([badId])], []);
	return good;
}

function okFor(client, id, ms = 10000) {
	return client.next((m) => m[0] === 'OK' && m[1] === id, ms);
}

test('NIP-11 advertises the write bounds', async () => {
	const res = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
	const lim = JSON.parse(res.body).limitation;
	assert.equal(lim.max_writes_in_flight, PER_CONNECTION);
	assert.equal(lim.max_node_writes_in_flight, 1024);
});

test('64 pipelined EVENTs on one connection: 64 OKs, each once and after commit', async () => {
	const h = await createChannel(stack, admin);
	const c = await connectWs(stack.url, admin);
	const events = Array.from({ length: 64 }, () => create(h));
	const ids = new Set(events.map((e) => e.id));
	const oks = [];
	const seenStored = [];
	const done = new Promise((resolve) => {
		c.ws.on('message', async (data) => {
			const m = JSON.parse(data.toString('utf8'));
			if (m[0] !== 'OK')
				return;
			oks.push(m);
			// Each OK's write is visible to another session the moment it
			// arrives: committed before it was answered.
			seenStored.push(storedIds([m[1]]).then((s) => s.has(m[1])));
			if (oks.length === 64)
				resolve();
		});
	});
	for (const ev of events)
		c.send(['EVENT', ev]);
	await done;
	assert.deepEqual(oks.filter((m) => m[2] !== true), []);
	assert.equal(new Set(oks.map((m) => m[1])).size, 64);
	assert.ok(oks.every((m) => ids.has(m[1])));
	assert.deepEqual((await Promise.all(seenStored)).filter((x) => !x), []);
	assert.equal(c.drain().filter((m) => m[0] === 'OK').length, 64);
	await c.none((m) => m[0] === 'OK', QUIET_MS);
	c.ws.terminate();
});

test('the per-connection bound: beyond it the relay stops reading the connection', async () => {
	const h = await createChannel(stack, admin);
	const c = await connectWs(stack.url, admin);
	const lock = await lockChannel(h);
	const events = Array.from({ length: PER_CONNECTION + 1 }, () => create(h));
	try {
		for (const ev of events.slice(0, PER_CONNECTION))
			c.send(['EVENT', ev]);
		// 64 in flight: the connection is still read.
		c.send('not json');
		await c.next((m) => m[0] === 'NOTICE', 5000);
		// The 65th waits for room, and nothing after it is read.
		c.send(['EVENT', events[PER_CONNECTION]]);
		c.send('not json');
		await c.none((m) => m[0] === 'NOTICE' || m[0] === 'OK', QUIET_MS);
	} finally {
		await lock.release();
	}
	for (const ev of events)
		assert.equal((await okFor(c, ev.id))[2], true);
	await c.next((m) => m[0] === 'NOTICE', 5000);
	c.ws.terminate();
});

test('one batch: competing edits of one d, a refused write, accepted ones beside them', async () => {
	const h = await createChannel(stack, admin);
	const outsider = newKey();
	const c = await connectWs(stack.url, admin);
	const lock = await lockChannel(h);
	const first = create(h);
	const base = create(h);
	const d = base.tags.find((t) => t[0] === 'd')[1];
	const edit1 = create(h, { d, op: 'update', prev: base.id, content: 'edit one' });
	const edit2 = create(h, { d, op: 'update', prev: base.id, content: 'edit two' });
	const taken = create(h, { d, content: 'same d again' });
	const other = create(h);
	try {
		c.send(['EVENT', first]);
		await new Promise((r) => setTimeout(r, 200));
		for (const ev of [base, edit1, edit2, taken, other])
			c.send(['EVENT', ev]);
		await c.none((m) => m[0] === 'OK', 300);
	} finally {
		await lock.release();
	}
	assert.equal((await okFor(c, first.id))[2], true);
	assert.equal((await okFor(c, base.id))[2], true);
	assert.equal((await okFor(c, edit1.id))[2], true);
	assert.deepEqual((await okFor(c, edit2.id)).slice(2), [false, 'conflict: artifact head changed']);
	assert.deepEqual((await okFor(c, taken.id)).slice(2), [false, 'conflict: artifact identity is taken']);
	assert.equal((await okFor(c, other.id))[2], true);
	// The four accepted after the lock committed together.
	const x = await xids([first.id, base.id, edit1.id, other.id]);
	assert.equal(new Set([x.get(base.id), x.get(edit1.id), x.get(other.id)]).size, 1);
	assert.notEqual(x.get(first.id), x.get(base.id));
	assert.deepEqual([...await storedIds([edit2.id, taken.id])], []);
	const head = await stack.query(`SELECT revision_id FROM artifact_heads WHERE community_id = ${community} AND d = '${d}'`);
	assert.equal(head[0][0], edit1.id);
	// A refusal before the database (another author) in the same stream.
	const foreign = signEvent(outsider.sk, { kind: 9, created_at: now(), tags: [['h', h]], content: 'x' });
	c.send(['EVENT', foreign]);
	assert.deepEqual((await okFor(c, foreign.id)).slice(2),
		[false, 'restricted: event author is not the authenticated user']);
	c.ws.terminate();
});

test('a database failure mid-batch fails only the write it touched, with error:', async () => {
	const h = await createChannel(stack, admin);
	const planted = await plantFailure('fail-me');
	const c = await connectWs(stack.url, admin);
	const lock = await lockChannel(h);
	const first = create(h);
	const a = create(h);
	const bad = create(h, { content: 'fail-me' });
	const b = create(h);
	try {
		c.send(['EVENT', first]);
		await new Promise((r) => setTimeout(r, 200));
		for (const ev of [a, bad, b])
			c.send(['EVENT', ev]);
		await c.none((m) => m[0] === 'OK', 300);
	} finally {
		await lock.release();
	}
	try {
		assert.equal((await okFor(c, first.id))[2], true);
		assert.equal((await okFor(c, a.id))[2], true);
		const failed = await okFor(c, bad.id);
		assert.equal(failed[2], false);
		assert.match(failed[3], /^error: /);
		assert.equal((await okFor(c, b.id))[2], true);
		const x = await xids([a.id, b.id]);
		assert.equal(x.get(a.id), x.get(b.id));
		assert.deepEqual([...await storedIds([a.id, bad.id, b.id])].sort(), [a.id, b.id].sort());
	} finally {
		await planted.remove();
		c.ws.terminate();
	}
});

test('SIGKILL while batches commit: every acknowledged write is stored', async () => {
	const h = await createChannel(stack, admin);
	const c = await connectWs(stack.url, admin);
	const events = Array.from({ length: 400 }, () => create(h));
	const acked = [];
	let killed;
	const enough = new Promise((resolve) => {
		c.ws.on('message', (data) => {
			const m = JSON.parse(data.toString('utf8'));
			if (m[0] === 'OK' && !killed) {
				acked.push(m);
				if (acked.length === 40)
					resolve();
			}
		});
	});
	let sent = 0;
	const pump = setInterval(() => {
		for (let i = 0; i < 20 && sent < events.length && c.ws.readyState === 1; i++)
			c.send(['EVENT', events[sent++]]);
	}, 5);
	await enough;
	killed = stack.stopNode(0, 'SIGKILL');
	await killed;
	clearInterval(pump);
	assert.deepEqual(acked.filter((m) => m[2] !== true), []);
	const ids = acked.map((m) => m[1]);
	const stored = await storedIds(ids);
	assert.deepEqual(ids.filter((id) => !stored.has(id)), []);
	await stack.startNode(0);
});

test('64 pipelined chat messages, accepted and refused, in one batch: each OK once, right answers', async () => {
	const user = newKey();
	const open = await createChannel(stack, admin);
	const closed = await createChannel(stack, admin, { visibility: 'private' });
	const mine = await createChannel(stack, admin, { visibility: 'private' });
	await addMember(stack, admin, mine, user.pk);
	const before = message(user.sk, open, 'stored before the pipeline');
	assert.equal((await publishSigned(stack, user.sk, before)).status, 200);
	const c = await connectWs(stack.url, user.sk);
	const twice = message(user.sk, open, 'sent twice in the batch');
	const refused = new Map();
	const events = [message(user.sk, open, 'first, waits for the lock')];
	for (let i = 1; i < 64; i++) {
		let ev;
		switch (i % 8) {
		case 1:
			ev = message(user.sk, closed);
			refused.set(ev.id, 'restricted: not a channel member');
			break;
		case 2:
			ev = message(user.sk, uuid());
			refused.set(ev.id, 'restricted: not a channel member');
			break;
		case 3:
			ev = message(user.sk, 'not-a-uuid');
			refused.set(ev.id, 'invalid: h must be a canonical channel uuid');
			break;
		case 4:
			ev = message(user.sk, open, 'two h', [['h', open], ['h', mine]]);
			refused.set(ev.id, 'invalid: chat messages need exactly one h tag');
			break;
		case 5:
			ev = message(user.sk, mine);
			break;
		default:
			ev = message(user.sk, open);
		}
		events.push(ev);
	}
	events[20] = twice;
	events[40] = twice;
	events[50] = before;
	const oks = await pipelineBehindLock(c, open, events);

	assert.equal(oks.length, 64);
	const sent = new Map();
	for (const ev of events)
		sent.set(ev.id, (sent.get(ev.id) ?? 0) + 1);
	const answered = new Map();
	for (const m of oks) {
		answered.set(m[1], (answered.get(m[1]) ?? 0) + 1);
		const want = refused.get(m[1]);
		assert.deepEqual(m.slice(2), want ? [false, want] : [true, ''], `OK for ${m[1]}`);
	}
	assert.deepEqual([...answered].sort(), [...sent].sort());

	const accepted = [...sent.keys()].filter((id) => !refused.has(id));
	const rows = await stack.query(`SELECT id, count(*) FROM events WHERE community_id = ${community}` +
		` AND id IN (${[...sent.keys()].map((i) => `'${i}'`).join(',')}) GROUP BY id`);
	assert.deepEqual(rows.map((r) => r[0]).sort(), accepted.sort());
	assert.ok(rows.every((r) => Number(r[1]) === 1));
	// The messages after the first were stored by one transaction.
	const x = await eventXids(accepted.filter((id) => id !== events[0].id && id !== before.id));
	assert.equal(new Set(x.values()).size, 1);
	c.ws.terminate();
});

test('moderation in a pipeline of chat messages: the messages after it see its effect', async () => {
	const user = newKey();
	const h = await createChannel(stack, admin, { visibility: 'private' });
	await addMember(stack, admin, h, user.pk);
	const c = await connectWs(stack.url, user.sk);
	const leave = signEvent(user.sk, { kind: 9022, created_at: now(), tags: [['h', h]], content: 'bye' });
	const events = [message(user.sk, h), message(user.sk, h), message(user.sk, h), leave,
		message(user.sk, h), message(user.sk, h)];
	const oks = await pipelineBehindLock(c, h, events);
	assert.equal(oks.length, events.length);
	const answer = new Map(oks.map((m) => [m[1], m.slice(2)]));
	assert.deepEqual(events.map((ev) => answer.get(ev.id)), [
		[true, ''], [true, ''], [true, ''], [true, ''],
		[false, 'restricted: not a channel member'], [false, 'restricted: not a channel member'],
	]);

	// A community admin in a channel that is archived, then unarchived.
	const open = await createChannel(stack, admin);
	const a = await connectWs(stack.url, admin);
	const edit = (archived) => signEvent(admin, {
		kind: 9002, created_at: now(), tags: [['h', open], ['archived', archived]], content: `archived ${archived}`,
	});
	const seq = [message(admin, open), message(admin, open), edit('true'), message(admin, open),
		message(admin, open), edit('false'), message(admin, open), message(admin, open)];
	const oks2 = await pipelineBehindLock(a, open, seq);
	const answer2 = new Map(oks2.map((m) => [m[1], m.slice(2)]));
	const refusedMsg = [false, 'restricted: not a channel member'];
	assert.deepEqual(seq.map((ev) => answer2.get(ev.id)), [
		[true, ''], [true, ''], [true, ''], refusedMsg, refusedMsg, [true, ''], [true, ''], [true, ''],
	]);
	c.ws.terminate();
	a.ws.terminate();
});

test('a database failure in a run of chat messages fails only the message it touched', async () => {
	const h = await createChannel(stack, admin);
	const planted = await plantFailure('fail-chat');
	const c = await connectWs(stack.url, admin);
	const events = [message(admin, h), message(admin, h), message(admin, h), message(admin, h, 'fail-chat'),
		message(admin, h), message(admin, h)];
	try {
		await assertOnlyFailed(await pipelineBehindLock(c, h, events), events, 3, eventXids);
	} finally {
		await planted.remove();
		c.ws.terminate();
	}
});

test('a run of artifact writes with refusals before and inside the database: each answered as alone', async () => {
	const h = await createChannel(stack, admin);
	const user = newKey();
	const closed = await createChannel(stack, admin, { visibility: 'private' });
	const c = await connectWs(stack.url, user.sk);
	const write = (channel, extra = {}) => signEvent(user.sk, {
		kind: 45010, created_at: now(), content: `content ${uuid()}`,
		tags: revisionTags({ d: extra.d ?? uuid(), h: channel, op: extra.op ?? 'create', prev: extra.prev,
			title: extra.title }),
	});
	const base = write(h);
	const d = base.tags.find((t) => t[0] === 'd')[1];
	const events = [write(h), base, write(h, { title: ' ' }), write(closed),
		write(h, { d, op: 'update', prev: base.id }), write(h, { d, op: 'update', prev: base.id }), write(h)];
	const oks = await pipelineBehindLock(c, h, events);
	assert.equal(oks.length, events.length);
	const answer = new Map(oks.map((m) => [m[1], m.slice(2)]));
	assert.deepEqual(events.map((ev) => answer.get(ev.id)), [
		[true, ''], [true, ''], [false, 'invalid: title must not be blank'],
		[false, 'restricted: not a channel member'], [true, ''],
		[false, 'conflict: artifact head changed'], [true, ''],
	]);
	const accepted = [1, 4, 6].map((i) => events[i].id);
	const x = await xids(accepted);
	assert.equal(x.size, 3);
	assert.equal(new Set(x.values()).size, 1);
	assert.deepEqual([...await storedIds([2, 3, 5].map((i) => events[i].id))], []);
	c.ws.terminate();
});

/** The "head" notifications psql session s heard (payload fields by name). */
/** The artifact an event of a test names (its d tag). */
const dOf = (ev) => tagOf(ev, 'd');

function heardHeads(s) {
	const re = /Asynchronous notification "comb" with payload "([^"]*)" received/g;
	return [...s.output().matchAll(re)].map((m) => m[1].split(' '))
		.filter((f) => f[0] === 'head')
		.map(([, cid, channel, xid, d, , id]) => ({ cid, channel, xid, d, id }));
}

/** The head rows a client tag set gives: (name, first value), once each. */
function headTagsOf(ev) {
	const rows = ev.tags.filter((t) => t.length >= 2 && !['d', 'h', 'type'].includes(t[0]))
		.map((t) => `${t[0]}=${t[1]}`);
	return [...new Set(rows)].sort();
}

test('a run of creates of distinct d among repeats, stale prevs and refusals: answered and stored as one by one', async () => {
	const user = newKey();
	const h = await createChannel(stack, admin);
	const closed = await createChannel(stack, admin, { visibility: 'private' });
	const anchor = message(user.sk, h, 'a root for an artifact');
	assert.equal((await publishSigned(stack, user.sk, anchor)).status, 200);
	const write = (extra = {}) => signEvent(user.sk, {
		kind: 45010, created_at: extra.created_at ?? now(), content: extra.content ?? `content ${uuid()}`,
		tags: revisionTags({ d: extra.d ?? uuid(), h: extra.h ?? h, op: extra.op ?? 'create',
			prev: extra.prev, root: extra.root, extra: extra.tags ?? [] }),
	});
	const old = write();
	assert.equal((await publishSigned(stack, user.sk, old)).status, 200);
	const listen = psqlSession(stack.dbName);
	await listen.run('LISTEN comb;');

	const first = write();
	const c1 = write({ tags: [['x', '1'], ['x', '1'], ['x', '2'], ['status', 'open']] });
	const c2 = write();
	const repeat = write({ d: dOf(c1), content: 'the same d again' });
	const c3 = write();
	const edit = write({ d: dOf(c2), op: 'update', prev: c2.id });
	const stale = write({ d: dOf(c2), op: 'update', prev: c2.id, content: 'names a replaced head' });
	const rooted = write({ root: anchor.id });
	const badRoot = write({ root: 'f'.repeat(64) });
	const inClosed = write({ h: closed });
	const taken = write({ d: dOf(old), content: 'a d created before' });
	const tooOld = write({ created_at: now() - 7 * 24 * 3600 });
	const c4 = write();
	const c5 = write();
	const events = [first, c1, c2, repeat, c3, edit, stale, rooted, badRoot, inClosed, taken, c1,
		tooOld, c4, c5];
	const fallbacks = () => fs.readFileSync(stack.logs.relays[0], 'utf8').split('artifact writes failed').length;
	const fellBackBefore = fallbacks();
	const c = await connectWs(stack.url, user.sk);
	const oks = await pipelineBehindLock(c, h, events);
	c.ws.terminate();
	assert.equal(fallbacks(), fellBackBefore, 'the run was stored without falling back to one by one');

	assert.equal(oks.length, events.length);
	const answers = new Map();
	for (const m of oks)
		answers.set(m[1], [...(answers.get(m[1]) ?? []), m.slice(2)]);
	const ok = [true, ''];
	assert.deepEqual(events.map((ev) => answers.get(ev.id)[0]), [
		ok, ok, ok, [false, 'conflict: artifact identity is taken'], ok, ok,
		[false, 'conflict: artifact head changed'], ok,
		[false, 'invalid: root must be a message in the home channel'],
		[false, 'restricted: not a channel member'], [false, 'conflict: artifact identity is taken'],
		ok, [false, 'invalid: created_at is too far from the relay\'s clock'], ok, ok,
	]);
	assert.deepEqual(answers.get(c1.id), [ok, ok], 'c1 and its resubmission each answered once');

	// Stored exactly once each, in arrival order, one transaction after
	// the first.
	const accepted = [first, c1, c2, c3, edit, rooted, c4, c5];
	const refused = [repeat, stale, badRoot, inClosed, taken, tooOld];
	const ids = (evs) => evs.map((ev) => `'${ev.id}'`).join(',');
	const revs = await stack.query('SELECT r.id, r.seq, r.xid::text FROM events r' +
		` WHERE r.community_id = ${community} AND r.d IS NOT NULL` +
		` AND r.id IN (${ids([...accepted, ...refused])}) ORDER BY r.seq`);
	assert.deepEqual(revs.map((r) => r[0]), accepted.map((ev) => ev.id));
	assert.equal(new Set(revs.slice(1).map((r) => r[2])).size, 1);
	assert.notEqual(revs[0][2], revs[1][2]);
	assert.deepEqual([...await storedIds(refused.map((ev) => ev.id))], []);

	// Heads, their tags and the events' single-letter tags as one by one.
	const current = [old, first, c1, c3, edit, rooted, c4, c5];
	const heads = await stack.query('SELECT d, revision_id, accepted_seq, creator, coalesce(root, \'\'),' +
		' type, channel_id FROM artifact_heads' +
		` WHERE community_id = ${community} AND channel_id = '${h}' ORDER BY accepted_seq`);
	const seqOf = new Map(revs.map((r) => [r[0], r[1]]));
	assert.deepEqual(heads.map((r) => [r[0], r[1]]), current.map((ev) => [dOf(ev), ev.id]));
	for (const r of heads.slice(1)) {
		const ev = current.find((e) => e.id === r[1]);
		assert.equal(r[2], seqOf.get(r[1]));
		assert.deepEqual([r[3], r[4], r[5], r[6]], [user.pk, ev === rooted ? anchor.id : '', 'demo.task', h]);
		const tags = await stack.query('SELECT name || \'=\' || value FROM artifact_head_tags' +
			` WHERE community_id = ${community} AND d = '${r[0]}' ORDER BY 1`);
		assert.deepEqual(tags.map((t) => t[0]), headTagsOf(ev), `head tags of ${r[0]}`);
	}
	// Their single-letter tags but h (their channel) and d (their row's
	// column, migrations 0023 and 0025) are event_tags rows.
	const eventTags = await stack.query('SELECT e.id, coalesce(string_agg(t.name || \'=\' || t.value, \',\'' +
		' ORDER BY t.name, t.value), \'\') FROM events e LEFT JOIN event_tags t ON t.event_seq = e.seq' +
		` WHERE e.community_id = ${community} AND e.id IN (${ids(accepted)}) GROUP BY e.id`);
	const letterTags = (ev) => ev.tags.filter((t) => t.length >= 2 && t[0].length === 1 && t[0] !== 'h' && t[0] !== 'd')
		.map((t) => `${t[0]}=${t[1]}`).sort().join(',');
	assert.deepEqual(new Map(eventTags), new Map(accepted.map((ev) => [ev.id, letterTags(ev)])));

	// Capture hears one head change per accepted write, in arrival order.
	await listen.run('SELECT 1;');
	const heard = heardHeads(listen);
	await listen.close();
	assert.deepEqual(heard.map((s) => [s.cid, s.channel, s.d, s.id]),
		accepted.map((ev) => [String(community), h, dOf(ev), ev.id]));
	assert.equal(new Set(heard.slice(1).map((s) => s.xid)).size, 1);

	// A sync of the channel afterwards holds exactly the current heads.
	const reader = await connectWs(stack.url, user.sk);
	reader.send(['REQ', 'all', { artifact: 'current', '#h': [h] }]);
	const synced = [];
	for (;;) {
		const m = await reader.next((x) => x[1] === 'all', 10000);
		if (m[0] !== 'EVENT')
			break;
		synced.push(m[2].id);
	}
	reader.ws.terminate();
	assert.deepEqual(synced.sort(), current.map((ev) => ev.id).sort());
});

test('a run of creates all stored: each head and its tags once, one notification per head, in order', async () => {
	// Every create of the run is stored, so its arrays go to the database
	// as they came (comb_pick's whole-array case, migration 0014), and the
	// new heads are announced by one statement trigger.
	const h = await createChannel(stack, admin);
	const events = Array.from({ length: 12 }, (_, i) => signEvent(admin, {
		kind: 45010, created_at: now(), content: `run member ${i}`,
		tags: revisionTags({ d: uuid(), h, op: 'create', extra: [['x', `${i % 3}`], ['status', 'open']] }),
	}));
	const listen = psqlSession(stack.dbName);
	await listen.run('LISTEN comb;');
	const c = await connectWs(stack.url, admin);
	const oks = await pipelineBehindLock(c, h, events);
	c.ws.terminate();
	assert.deepEqual(oks.map((m) => m.slice(2)).filter((a) => a[0] !== true), []);
	assert.deepEqual(new Set(oks.map((m) => m[1])), new Set(events.map((ev) => ev.id)));

	const heads = await stack.query('SELECT d, revision_id FROM artifact_heads' +
		` WHERE community_id = ${community} AND channel_id = '${h}' ORDER BY accepted_seq`);
	assert.deepEqual(heads, events.map((ev) => [dOf(ev), ev.id]));
	const tags = await stack.query('SELECT d, string_agg(name || \'=\' || value, \',\' ORDER BY name, value)' +
		` FROM artifact_head_tags WHERE community_id = ${community}` +
		` AND d IN (${events.map((ev) => `'${dOf(ev)}'`).join(',')}) GROUP BY d`);
	assert.deepEqual(new Map(tags), new Map(events.map((ev) => [dOf(ev), headTagsOf(ev).join(',')])));

	await listen.run('SELECT 1;');
	const heard = heardHeads(listen);
	await listen.close();
	assert.deepEqual(heard.map((n) => [n.cid, n.channel, n.d, n.id]),
		events.map((ev) => [String(community), h, dOf(ev), ev.id]));
	assert.equal(new Set(heard.slice(1).map((n) => n.xid)).size, 1, 'the run after the first is one transaction');
});

test('comb_pick: the elements at the positions asked for, in their order', async () => {
	const rows = await stack.query("SELECT comb_pick(ARRAY[10, 20, 30], ARRAY[3, 1])::text," +
		" comb_pick(ARRAY[10, 20, 30], ARRAY[1, 2, 3])::text," +
		" comb_pick(ARRAY[10, 20, 30], ARRAY[1, 3, 2])::text," +
		" comb_pick('[0:2]={10,20,30}'::int[], ARRAY[0, 2])::text," +
		" comb_pick('[0:2]={10,20,30}'::int[], ARRAY[1, 2, 3])::text," +
		" comb_pick(ARRAY['a', 'b'], ARRAY[2])::text");
	assert.deepEqual(rows, [['{30,10}', '{10,20,30}', '{10,30,20}', '{10,30}', '{20,30,NULL}', '{b}']]);
});

test('a database failure inside a run of creates fails only the create it touched', async () => {
	const h = await createChannel(stack, admin);
	const planted = await plantFailure('fail-create');
	const c = await connectWs(stack.url, admin);
	const events = [create(h), create(h), create(h), create(h, { content: 'fail-create' }), create(h), create(h)];
	try {
		const good = await assertOnlyFailed(await pipelineBehindLock(c, h, events), events, 3, xids);
		const heads = await stack.query('SELECT revision_id FROM artifact_heads' +
			` WHERE community_id = ${community} AND channel_id = '${h}'`);
		assert.deepEqual(heads.map((r) => r[0]).sort(), [...good].sort());
	} finally {
		await planted.remove();
		c.ws.terminate();
	}
});

test('the ids every write stores are checked as exactly 64 lowercase hex digits', async () => {
	const hex = 'a'.repeat(64);
	const d = uuid();
	const rows = {
		events_id_check: (v) => 'INSERT INTO events (community_id, id, pubkey, created_at, kind, raw)' +
			` VALUES (${community}, ${v}, 'x', 0, 1, '{}')`,
		events_prev_check: (v) => 'INSERT INTO events (community_id, id, pubkey, created_at, kind, raw,' +
			` d, type, op, prev) VALUES (${community}, '${hex}', 'x', 0, 45010, '{}', '${d}', 't', 'update', ${v})`,
		artifact_heads_revision_id_check: (v) => 'INSERT INTO artifact_heads (community_id, d, revision_id,' +
			` accepted_seq, channel_id, type, creator) VALUES (${community}, '${d}', ${v}, 1, '${d}', 't', '${hex}')`,
		artifact_heads_creator_check: (v) => 'INSERT INTO artifact_heads (community_id, d, revision_id,' +
			` accepted_seq, channel_id, type, creator) VALUES (${community}, '${d}', '${hex}', 1, '${d}', 't', ${v})`,
		artifact_heads_root_check: (v) => 'INSERT INTO artifact_heads (community_id, d, revision_id,' +
			` accepted_seq, channel_id, type, creator, root) VALUES (${community}, '${d}', '${hex}', 1, '${d}', 't',` +
			` '${hex}', ${v})`,
	};
	const bad = [`'${'A'.repeat(64)}'`, `'${'a'.repeat(63)}'`, `'${'a'.repeat(65)}'`, `'${'a'.repeat(63)}g'`,
		`'${'a'.repeat(62)}é'`, `E'${'a'.repeat(63)}\\n'`, `'${'a'.repeat(63)} '`, '\'\''];
	for (const [check, insert] of Object.entries(rows)) {
		await stack.psql(`BEGIN; ${insert(`'${'0123456789abcdef'.repeat(4)}'`)}; ROLLBACK;`);
		for (const v of bad)
			await assert.rejects(stack.psql(`BEGIN; ${insert(v)}; ROLLBACK;`),
				new RegExp(`violates check constraint "${check}"`), `${check} refuses ${v}`);
	}
	await stack.psql(`BEGIN; ${rows.artifact_heads_root_check('NULL')}; ${rows.events_prev_check('NULL')};` +
		' ROLLBACK;');
});

test('a revision is stored whole in its event\'s row: d, type and op together, a known op', async () => {
	const d = uuid();
	const insert = (cols, vals) => `BEGIN; INSERT INTO events (community_id, id, pubkey, created_at, kind, raw, ${cols})` +
		` VALUES (${community}, '${'b'.repeat(64)}', 'x', 0, 45010, '{}', ${vals}); ROLLBACK;`;
	await stack.psql(insert('d, type, op', `'${d}', 't', 'create'`));
	for (const [cols, vals, check] of [
		['d, type', `'${d}', 't'`, 'events_revision_check'],
		['type, op', '\'t\', \'create\'', 'events_revision_check'],
		['prev', `'${'a'.repeat(64)}'`, 'events_revision_check'],
		['d, type, op', `'${d}', 't', 'erase'`, 'events_op_check'],
	])
		await assert.rejects(stack.psql(insert(cols, vals)),
			new RegExp(`violates check constraint "${check}"`), `${check} refuses (${cols}) = (${vals})`);
});
