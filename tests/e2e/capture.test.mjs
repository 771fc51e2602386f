// comb-capture end to end (ARCHITECTURE.md "Data flow" and "Properties the
// design must keep"): real writes through the relay and through psql
// become signals on ZeroMQ with contiguous per-community sequence numbers
// and the writing transaction's xid; a rolled-back write gives nothing;
// exact channel topics never match another channel; heartbeats and marks
// arrive; ephemeral events published on Redis (by hand and by the relay)
// are forwarded; a capture whose database session is killed reconnects
// and catches up from its horizon in the same epoch (an open sync hears of
// the changes made meanwhile and stays open), unless another instance led
// in between, which gives a new epoch; and of two captures only the leader publishes, the
// standby taking over with a new epoch within a couple of seconds after
// the leader is killed with SIGKILL. Signals of changes carry a WAL
// position at or after their commit (for reads on standbys) while a
// standby streams from the primary, and none while none does (CTest runs
// the tests that start standbys one at a time: RESOURCE_LOCK pg_standby).
//
// The feed is read with tests/tools/comb-signal-tap, which prints each
// signal as one JSON line.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, describe, test } from 'node:test';

import {
	buildDir, connectWs, freePort, newKey, readStackEnv, signEvent, startRelay, startStandby,
} from './lib/harness.mjs';
import {
	accept, addMember, chat, createChannel, publish, assertAccepted, tagValue, uuid,
} from './lib/artifacts.mjs';

const tapBin = path.join(buildDir, 'bin', 'comb-signal-tap');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const taps = new Set();

process.on('exit', () => {
	for (const t of taps)
		t.child.kill('SIGKILL');
});

// A running comb-signal-tap: every decoded signal lands in `lines`;
// waitFor() resolves with the first line (from index `from`) matching.
class Tap {
	constructor(endpoints, args) {
		this.lines = [];
		this.waiters = [];
		this.stderr = '';
		this.child = spawn(tapBin, ['-e', endpoints, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
		taps.add(this);
		this.child.stderr.on('data', (d) => {
			this.stderr += d;
		});
		this.child.once('exit', () => taps.delete(this));
		readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
			const s = JSON.parse(line);
			s.at = Date.now();
			this.lines.push(s);
			this.waiters = this.waiters.filter((w) => !w.check());
		});
	}

	waitFor(pred, what, { from = 0, timeoutMs = 8000 } = {}) {
		return new Promise((resolve, reject) => {
			const w = {
				check: () => {
					for (let i = from; i < this.lines.length; i++) {
						if (pred(this.lines[i])) {
							clearTimeout(w.timer);
							resolve(this.lines[i]);
							return true;
						}
					}
					return false;
				},
			};
			if (w.check())
				return;
			w.timer = setTimeout(() => {
				this.waiters = this.waiters.filter((x) => x !== w);
				reject(new Error(`no ${what} within ${timeoutMs} ms; last lines:\n` +
					this.lines.slice(-10).map((l) => JSON.stringify(l)).join('\n') +
					(this.stderr ? `\ntap stderr: ${this.stderr}` : '')));
			}, timeoutMs);
			this.waiters.push(w);
		});
	}

	async stop() {
		if (this.child.exitCode !== null || this.child.signalCode !== null)
			return;
		const exited = new Promise((r) => this.child.once('exit', r));
		this.child.kill('SIGTERM');
		await exited;
	}
}

const isBeat = (s) => s.type === 'heartbeat' && s.community === 0;
const isMark = (cid) => (s) => s.type === 'heartbeat' && s.community === cid;

// Non-heartbeat signals of community cid in one epoch, in arrival order.
function signalsOf(tap, cid, epoch) {
	return tap.lines.filter((s) => s.community === cid && s.type !== 'heartbeat' &&
		s.epoch === epoch && !s.error);
}

// Asserts that the sequence numbers of community cid in epoch are
// contiguous from the first one seen, and that no mark is ahead of them.
function assertContiguous(tap, cid, epoch) {
	const all = tap.lines.filter((s) => s.community === cid && s.epoch === epoch);
	let last = null;
	for (const s of all) {
		if (s.type === 'heartbeat') {
			if (last !== null)
				assert.ok(s.seq <= last, `mark ${s.seq} ahead of the last signal ${last}`);
			else
				last = s.seq;
			continue;
		}
		if (last !== null)
			assert.equal(s.seq, last + 1, `seq gap: ${last} then ${JSON.stringify(s)}`);
		last = s.seq;
	}
}

// Opens a sync (REQ with artifact: current) on c and waits for its EOSE.
async function openSync(c, id, filter, ms = 10000) {
	c.send(['REQ', id, filter]);
	for (;;) {
		const m = await c.next((x) => ['EVENT', 'EOSE', 'CLOSED'].includes(x[0]) && x[1] === id, ms);
		if (m[0] === 'EOSE')
			return;
		if (m[0] === 'CLOSED')
			throw new Error(`sync ${id} closed: ${m[2]}`);
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
			return text;
		if (Date.now() > deadline)
			throw new Error(`${file} never matched ${re}:\n${text.slice(-2000)}`);
		await sleep(50);
	}
}

// PUBLISH on the fixture's Redis with a hand-written RESP command.
function redisPublish(channel, message) {
	const port = Number(readStackEnv().COMB_TEST_REDIS_PORT);
	const parts = ['PUBLISH', channel, message].map((p) => Buffer.from(p));
	const cmd = Buffer.concat([Buffer.from(`*${parts.length}\r\n`),
		...parts.flatMap((p) => [Buffer.from(`$${p.length}\r\n`), p, Buffer.from('\r\n')])]);
	return new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1', () => sock.write(cmd));
		let reply = '';
		sock.on('data', (d) => {
			reply += d;
			if (reply.endsWith('\r\n')) {
				sock.end();
				resolve(reply.trim());
			}
		});
		sock.on('error', reject);
	});
}

function randomHex(n) {
	return Buffer.from(Array.from({ length: n }, () => Math.floor(Math.random() * 256))).toString('hex');
}

describe('signals from real writes', () => {
	let stack, tap, cid, admin, epoch;

	before(async () => {
		stack = await startRelay({ capture: true, ready: false });
		cid = Number(stack.communities[0].id);
		admin = stack.admins[0];
		tap = new Tap(stack.captureEndpoint, ['-t', 'hb', '-t', `${cid}:`]);
		// The subscription is in effect once capture answered it with a mark.
		const mark = await tap.waitFor(isMark(cid), `mark for community ${cid}`);
		epoch = mark.epoch;
		await waitLog(stack.logs.captures[0], /leadership acquired/);
	});

	after(async () => {
		await tap?.stop();
		await stack?.stop();
	});

	test('heartbeats arrive every 500 ms with the epoch', async () => {
		const from = tap.lines.length;
		await sleep(2200);
		const beats = tap.lines.slice(from).filter(isBeat);
		assert.ok(beats.length >= 3 && beats.length <= 6, `${beats.length} heartbeats in 2.2 s`);
		for (const b of beats) {
			assert.equal(b.epoch, epoch);
			assert.equal(b.topic, 'hb');
			assert.equal(b.seq, 0);
		}
	});

	test('a change\'s signal carries a WAL position at or after its commit while a standby streams, none while none does', async () => {
		const h = await createChannel(stack, admin, { name: 'positions' });
		// One artifact create: its head signal and the primary's insert
		// position before the write and after the signal.
		const write = async () => {
			const from = tap.lines.length;
			const d = uuid();
			const [[before]] = await stack.query('SELECT pg_current_wal_insert_lsn()::text');
			await accept(stack, admin, { d, h, op: 'create' });
			const sig = await tap.waitFor((s) => s.type === 'head' && s.d === d, 'head signal', { from });
			const [[after]] = await stack.query('SELECT pg_current_wal_insert_lsn()::text');
			return { sig, before, after, from };
		};
		// No standby streams: a relay re-reads on the primary anyway, and
		// capture spares the position's round trip.
		await waitLog(stack.logs.captures[0], /no standby streams from the primary/);
		for (let i = 0; i < 3; i++)
			assert.equal((await write()).sig.lsn, '0/0', 'a position without a standby');
		const standby = await startStandby();
		try {
			// From capture's next check on (its pg_basebackup may have
			// been seen streaming already, the standby not yet).
			let w;
			for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(100)) {
				if ((w = await write()).sig.lsn !== '0/0')
					break;
			}
			for (const { sig, before, after, from } of [w, await write(), await write()]) {
				const [[ok]] = await stack.query(`SELECT '${sig.lsn}'::pg_lsn > '${before}'::pg_lsn
					AND '${sig.lsn}'::pg_lsn <= '${after}'::pg_lsn`);
				assert.equal(ok, 't', `${before} < ${sig.lsn} <= ${after}`);
				// heartbeats name no change and no position
				const beat = tap.lines.slice(from).find(isBeat);
				if (beat)
					assert.equal(beat.lsn, '0/0');
			}
		} finally {
			await standby.remove();
		}
		// Within two checks of its leaving, no position again.
		let lsn;
		for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(100)) {
			if ((lsn = (await write()).sig.lsn) === '0/0')
				break;
		}
		assert.equal(lsn, '0/0', 'a position after the standby left');
	});

	test('writes through the relay become signals with their transaction ids', async () => {
		const from = tap.lines.length;
		const bob = newKey();
		const h = await createChannel(stack, admin, { name: 'signals' });
		const channelSig = await tap.waitFor((s) => s.type === 'channel' && s.channel === h,
			'channel signal', { from });
		assert.equal(channelSig.topic, `${cid}:${h}`);
		assert.equal(channelSig.community, cid);
		const [[policyXid]] = await stack.query(`SELECT policy_xid FROM channels WHERE id = '${h}'`);
		assert.equal(channelSig.xid, policyXid);

		await addMember(stack, admin, h, bob.pk);
		const memberSig = await tap.waitFor((s) => s.type === 'member' && s.pubkey === bob.pk,
			'member signal', { from });
		assert.equal(memberSig.channel, h);
		const [[memberXid]] = await stack.query(
			`SELECT changed_xid FROM members WHERE channel_id = '${h}' AND pubkey = '${bob.pk}'`);
		assert.equal(memberSig.xid, memberXid);

		const msg = await chat(stack, admin, h, 'signal me');
		const eventSig = await tap.waitFor((s) => s.type === 'event' && s.id === msg.id,
			'event signal', { from });
		assert.equal(eventSig.kind, 9);
		assert.equal(eventSig.channel, h);
		assert.equal(eventSig.pubkey, msg.pubkey);

		const d = uuid();
		const rev = await accept(stack, admin, { d, h, op: 'create', title: 'signal task' });
		const headSig = await tap.waitFor((s) => s.type === 'head' && s.d === d, 'head signal', { from });
		assert.equal(headSig.channel, h);
		assert.equal(headSig.id, rev.id);
		const [[headXid]] = await stack.query(`SELECT changed_xid FROM artifact_heads WHERE d = '${d}'`);
		assert.equal(headSig.xid, headXid);
		// Artifact revisions reach relays as head signals, not as events.
		assert.ok(!tap.lines.some((s) => s.type === 'event' && s.id === rev.id));

		assertContiguous(tap, cid, epoch);
		// A mark after the last signal repeats its seq.
		const last = signalsOf(tap, cid, epoch).at(-1);
		const mark = await tap.waitFor((s) => isMark(cid)(s) && s.at > last.at, 'mark after writes');
		assert.ok(mark.seq >= last.seq);
	});

	test('a rolled-back write raises nothing and spends no seq', async () => {
		const h = uuid();
		const pk = randomHex(32);
		const from = tap.lines.length;
		const before = signalsOf(tap, cid, epoch).at(-1)?.seq ?? 0;
		await stack.psql(`BEGIN;
			INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
				VALUES (${cid}, '${h}', 'gone', 0, '${pk}', 1);
			INSERT INTO members (community_id, channel_id, pubkey, role)
				VALUES (${cid}, '${h}', '${pk}', 3);
			ROLLBACK;`);
		const h2 = uuid();
		await stack.psql(`INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
			VALUES (${cid}, '${h2}', 'kept', 0, '${pk}', 1)`);
		const sig = await tap.waitFor((s) => s.type === 'channel' && s.channel === h2, 'kept channel', { from });
		assert.ok(!tap.lines.some((s) => s.channel === h), 'the rolled-back channel was signalled');
		assertContiguous(tap, cid, epoch);
		// Other tests share Redis, so foreign ephemeral events may take
		// seqs in between; none of ours did.
		const between = signalsOf(tap, cid, epoch).filter((s) => s.seq > before && s.seq < sig.seq);
		assert.ok(between.every((s) => s.type === 'ephemeral'), JSON.stringify(between));
	});

	test('an exact channel topic never matches another channel', async () => {
		const pk = randomHex(32);
		const h1 = uuid();
		const h2 = uuid();
		await stack.psql(`INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
			VALUES (${cid}, '${h1}', 'one', 0, '${pk}', 1), (${cid}, '${h2}', 'two', 0, '${pk}', 1)`);
		const one = new Tap(stack.captureEndpoint, ['-c', `${cid}:${h1}`]);
		try {
			// No mark answers an exact subscription: change both channels
			// until a signal of h1 shows that the subscription is in.
			for (let i = 0; ; i++) {
				await stack.psql(`UPDATE channels SET archived = NOT archived WHERE id IN ('${h1}', '${h2}')`);
				try {
					await one.waitFor((s) => s.channel === h1, 'h1 signal', { timeoutMs: 500 });
					break;
				} catch (err) {
					if (i >= 10)
						throw err;
				}
			}
			await stack.psql(`UPDATE channels SET visibility = 1 WHERE id = '${h2}'`);
			await stack.psql(`UPDATE channels SET visibility = 1 WHERE id = '${h1}'`);
			const [[xid1]] = await stack.query(`SELECT policy_xid FROM channels WHERE id = '${h1}'`);
			const [[xid2]] = await stack.query(`SELECT policy_xid FROM channels WHERE id = '${h2}'`);
			await one.waitFor((s) => s.xid === xid1, 'the last h1 signal');
			await tap.waitFor((s) => s.xid === xid2 && s.channel === h2, 'h2 on the community tap');
			for (const s of one.lines) {
				assert.equal(s.channel, h1, `exact topic leaked ${JSON.stringify(s)}`);
				assert.equal(s.topic, `${cid}:${h1}`);
			}
		} finally {
			await one.stop();
		}
	});

	test('ephemeral events on Redis are forwarded', async () => {
		const h = uuid();
		const from = tap.lines.length;
		const json = JSON.stringify({ kind: 20001, content: `by hand ${h}`, tags: [['h', h]] });
		const channel = `comb:ephemeral:${stack.redisDb}`;
		assert.notEqual(channel, 'comb:ephemeral:0', 'the stack has a Redis database of its own');
		// Another database's channel, and the channel without a database,
		// are not ours: what is published there first never arrives.
		const foreign = uuid();
		const foreignJson = JSON.stringify({ kind: 20001, content: 'elsewhere', tags: [['h', foreign]] });
		await redisPublish('comb:ephemeral:0', `${cid}:${foreign}:${foreignJson}`);
		await redisPublish('comb:ephemeral', `${cid}:${foreign}:${foreignJson}`);
		const reply = await redisPublish(channel, `${cid}:${h}:${json}`);
		assert.match(reply, /^:[1-9][0-9]*$/, `no capture subscribed to ${channel}`);
		const sig = await tap.waitFor((s) => s.type === 'ephemeral' && s.channel === h, 'ephemeral signal', { from });
		assert.equal(sig.payload, json);
		assert.equal(sig.topic, `${cid}:${h}`);
		assert.equal(sig.xid, '0');
		assert.equal(tap.lines.slice(from).filter((s) => s.channel === foreign).length, 0,
			'an ephemeral event of another Redis database was forwarded');

		// Malformed messages are refused without disturbing the feed.
		await redisPublish(channel, `${cid}:not-a-channel:{}`);
		await redisPublish(channel, 'garbage');

		// And one published by the relay itself (POST /events, kind 20001).
		const ch = await createChannel(stack, admin, { name: 'typing' });
		const res = await publish(stack, admin, { kind: 20001, tags: [['h', ch]], content: 'typing...' });
		assertAccepted(res, 'ephemeral event');
		const relayed = await tap.waitFor((s) => s.type === 'ephemeral' && s.channel === ch,
			'ephemeral signal from the relay', { from });
		assert.equal(JSON.parse(relayed.payload).id, res.event.id);
		assertContiguous(tap, cid, epoch);
		assert.equal(tap.lines.filter((s) => s.error).length, 0);
	});

	test('a killed database session: capture catches up in the same epoch, syncs stay open', async () => {
		const h = await createChannel(stack, admin, { name: 'catch-up' });
		const d0 = uuid();
		const rev0 = await accept(stack, admin, { d: d0, h, op: 'create', title: 'to delete while capture is away' });
		await tap.waitFor((s) => s.type === 'head' && s.d === d0, 'head signal of d0');
		const c = await connectWs(stack.url, admin);
		try {
			await openSync(c, 's', { artifact: 'current', '#h': [h] });
			const from = tap.lines.length;
			const h2 = uuid();
			const ev = signEvent(admin, { kind: 9, tags: [['h', h]], content: 'stored while capture was away' });
			// The writes commit after capture's session is gone (the
			// terminate waits for it) and before capture reconnects (it
			// waits 100 ms first), so no notification carries them.
			const killed = await stack.query(`BEGIN;
				UPDATE artifact_heads SET deleted = true WHERE d = '${d0}';
				INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
					VALUES (${cid}, '${h2}', 'while away', 0, '${randomHex(32)}', 1);
				INSERT INTO events (community_id, id, pubkey, created_at, kind, channel_id, raw)
					VALUES (${cid}, '${ev.id}', '${ev.pubkey}', ${ev.created_at}, 9, '${h}',
						$raw$${JSON.stringify(ev)}$raw$);
				SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
					WHERE application_name = 'comb-capture' AND datname = current_database();
				COMMIT;`);
			assert.deepEqual(killed, [['1']]);
			const head = await tap.waitFor((s) => s.type === 'head' && s.d === d0, 'caught-up head signal', { from });
			const chan = await tap.waitFor((s) => s.type === 'channel' && s.channel === h2, 'caught-up channel signal', { from });
			const evSig = await tap.waitFor((s) => s.type === 'event' && s.id === ev.id, 'caught-up event signal', { from });
			for (const sig of [head, chan, evSig])
				assert.equal(sig.epoch, epoch, `a new epoch after the reconnect: ${JSON.stringify(sig)}`);
			const [[xid, eventXid]] = await stack.query(`SELECT h.changed_xid, e.xid FROM artifact_heads h, events e
				WHERE h.d = '${d0}' AND e.id = '${ev.id}'`);
			assert.equal(head.xid, xid);
			assert.equal(chan.xid, xid);
			assert.equal(evSig.xid, eventXid);
			const log = await waitLog(stack.logs.captures[0], /leadership regained .* goes on/);
			assert.match(log, /database connection lost/);
			assert.match(log, /caught up from horizon [0-9]+: [1-9][0-9]* signals/);
			assert.doesNotMatch(log, /leadership lost/);

			// The sync hears of the deletion and is not closed: a deleted
			// head the client holds is answered with the head's revision
			// (its delete revision; here the same create revision, since
			// the raw update wrote none), which nothing else would resend.
			const removed = await c.next((m) => m[1] === 's', 8000);
			assert.equal(removed[0], 'EVENT', JSON.stringify(removed).slice(0, 300));
			assert.equal(removed[2].kind, 45010);
			assert.equal(removed[2].id, rev0.id);
			// Later writes go on in the same epoch with the next seqs.
			const d1 = uuid();
			await accept(stack, admin, { d: d1, h, op: 'create', title: 'after the reconnect' });
			const after = await c.next((m) => m[1] === 's', 8000);
			assert.equal(after[0], 'EVENT', JSON.stringify(after).slice(0, 300));
			assert.equal(tagValue(after[2], 'd'), d1);
			const sig = await tap.waitFor((s) => s.type === 'head' && s.d === d1, 'head signal after the reconnect', { from });
			assert.equal(sig.epoch, epoch);
			await c.none((m) => m[1] === 's', 1500);

			assertContiguous(tap, cid, epoch);
			assert.ok(tap.lines.every((s) => s.epoch === epoch), 'another epoch appeared');
			// Each change was published once: by the catch-up only.
			const once = (pred, what) => assert.equal(tap.lines.slice(from).filter(pred).length, 1, what);
			once((s) => s.type === 'head' && s.d === d0, 'head of d0');
			once((s) => s.type === 'channel' && s.channel === h2, 'channel h2');
			once((s) => s.type === 'event' && s.id === ev.id, 'event');
			// Heartbeats went on while capture reconnected.
			const beats = tap.lines.slice(from).filter(isBeat);
			for (let i = 1; i < beats.length; i++)
				assert.ok(beats[i].at - beats[i - 1].at < 1200,
					`heartbeats paused for ${beats[i].at - beats[i - 1].at} ms`);
		} finally {
			c.ws.terminate();
		}
	});

	test('a reconnect after another instance led starts a new epoch', async () => {
		const from = tap.lines.length;
		// As if a standby had led (and stopped) while the session was away.
		const killed = await stack.query(`BEGIN;
			UPDATE capture_leader SET epoch = 'another';
			SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
				WHERE application_name = 'comb-capture' AND datname = current_database();
			COMMIT;`);
		assert.deepEqual(killed, [['1']]);
		const beat = await tap.waitFor((s) => isBeat(s) && s.epoch !== epoch, 'heartbeat of a new epoch', { from });
		const mark = await tap.waitFor((s) => isMark(cid)(s) && s.epoch === beat.epoch, 'mark of the new epoch',
			{ from });
		assert.equal(mark.seq, 0);
		await waitLog(stack.logs.captures[0], /cannot go on with epoch [0-9a-f]+ \(another instance led meanwhile\)/);
		const [[recorded]] = await stack.query('SELECT epoch FROM capture_leader');
		assert.equal(recorded, beat.epoch);

		const h = uuid();
		await stack.psql(`INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
			VALUES (${cid}, '${h}', 'after', 0, '${randomHex(32)}', 1)`);
		const sig = await tap.waitFor((s) => s.channel === h, 'signal after the reconnect', { from });
		assert.equal(sig.epoch, beat.epoch);
		assertContiguous(tap, cid, beat.epoch);
		assert.equal(signalsOf(tap, cid, beat.epoch)[0].seq, 1);
		// Nothing of the old epoch after the new one began.
		const firstNew = tap.lines.findIndex((s) => s.epoch === beat.epoch);
		assert.ok(tap.lines.slice(firstNew).every((s) => s.epoch === beat.epoch));
		epoch = beat.epoch;
	});
});

describe('leadership', () => {
	let stack, tap, cid, endpoints;

	before(async () => {
		endpoints = [`tcp://127.0.0.1:${await freePort()}`, `tcp://127.0.0.1:${await freePort()}`];
		stack = await startRelay({
			nodes: 0,
			capture: true,
			captureEnv: { COMB_CAPTURE_ENDPOINT: endpoints.join(','), COMB_CAPTURE_HEARTBEAT_MS: '200' },
		});
		cid = Number(stack.communities[0].id);
		await waitLog(stack.logs.captures[0], /leadership acquired/);
		await stack.startCapture();
		tap = new Tap(endpoints.join(','), ['-t', 'hb', '-t', `${cid}:`]);
	});

	after(async () => {
		await tap?.stop();
		await stack?.stop();
	});

	test('only the leader publishes; the standby takes over when it dies', async () => {
		const standbyLog = await waitLog(stack.logs.captures[1], /standing by/);
		assert.match(standbyLog, /bound to tcp:\/\/127\.0\.0\.1:/);
		assert.match(fs.readFileSync(stack.logs.captures[0], 'utf8'),
			new RegExp(`bound to ${endpoints[0].replace(/[./]/g, '\\$&')}`));
		assert.match(standbyLog, new RegExp(`bound to ${endpoints[1].replace(/[./]/g, '\\$&')}`));

		const first = await tap.waitFor(isBeat, 'first heartbeat');
		const e1 = first.epoch;
		await tap.waitFor(isMark(cid), 'mark');
		const h = uuid();
		await stack.psql(`INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
			VALUES (${cid}, '${h}', 'led', 0, '${randomHex(32)}', 1)`);
		await tap.waitFor((s) => s.channel === h, 'signal from the leader');
		await sleep(600);
		assert.equal(tap.lines.filter((s) => s.channel === h).length, 1, 'the standby published too');
		assert.ok(tap.lines.every((s) => s.epoch === e1), 'two epochs while one leader lives');
		const beats = tap.lines.filter(isBeat);
		assert.ok(beats.length >= 3, `${beats.length} heartbeats at 200 ms`);

		const from = tap.lines.length;
		const killedAt = Date.now();
		await stack.stopCapture(0, 'SIGKILL');
		const beat = await tap.waitFor((s) => isBeat(s) && s.epoch !== e1, 'heartbeat from the new leader',
			{ from, timeoutMs: 5000 });
		const took = beat.at - killedAt;
		assert.ok(took < 2500, `the standby took ${took} ms to take over`);
		await waitLog(stack.logs.captures[1], /leadership acquired/);
		// The standby kept track of subscriptions while it waited: its
		// first epoch starts with a mark for the tap's community.
		const mark = await tap.waitFor((s) => isMark(cid)(s) && s.epoch === beat.epoch,
			'mark from the new leader', { from });
		assert.equal(mark.seq, 0);

		const h2 = uuid();
		await stack.psql(`INSERT INTO channels (community_id, id, name, visibility, created_by, created_at)
			VALUES (${cid}, '${h2}', 'after failover', 0, '${randomHex(32)}', 1)`);
		const sig = await tap.waitFor((s) => s.channel === h2, 'signal from the new leader', { from });
		assert.equal(sig.epoch, beat.epoch);
		assertContiguous(tap, cid, beat.epoch);
		assert.equal(signalsOf(tap, cid, beat.epoch)[0].seq, 1);
		const firstNew = tap.lines.findIndex((s) => s.epoch === beat.epoch);
		assert.ok(tap.lines.slice(firstNew).every((s) => s.epoch === beat.epoch),
			'the old epoch went on after the takeover');

		// The old leader, restarted, binds its endpoint again and stands by.
		const i = await stack.startCapture();
		await waitLog(stack.logs.captures[i], /standing by/);
		await sleep(600);
		assert.ok(tap.lines.slice(firstNew).every((s) => s.epoch === beat.epoch));
	});
});
