// WebSocket reads served by a PostgreSQL streaming standby (docs/operations.md,
// "Read standbys"): a plain REQ's stored events and a sync's snapshot are read
// at the primary's WAL position of the moment they registered for live changes,
// or later, on the standby when it has replayed that far, else (after the
// bounded wait) on the primary; a live re-read where its signal's position has
// been replayed, likewise. Node 0 reads
// from the primary only; node 1 from the standby, whose replay is paused with
// pg_wal_replay_pause() to make it lag on purpose. A last node takes its
// signals through tests/tools/comb-signal-hold, which makes them late.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
	connectWs, newKey, scrapeMetrics, startRelay, startSignalHold,
} from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, chat, createChannel, publish, tagValue, uuid,
} from './lib/artifacts.mjs';
import { isFor, reqFrames } from './lib/subscriptions.mjs';

/** Node `node`'s reads served by the standby and by the primary. */
async function served(stack, node) {
	const m = await scrapeMetrics(stack.urls[node]);
	return {
		standby: m.sum('comb_read_standby_reads_total'),
		primary: m.sum('comb_read_primary_total'),
	};
}

/** Waits until the standby has replayed everything written so far. */
async function caughtUp(stack) {
	const [[target]] = await stack.query('SELECT pg_current_wal_insert_lsn()::text');
	await replayedTo(stack, target);
}

/** Waits until the standby has replayed WAL position target (pg_lsn text). */
async function replayedTo(stack, target) {
	const end = Date.now() + 30000;
	for (;;) {
		const rows = await stack.standby.query('postgres',
			`SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn`);
		if (rows[0][0] === 't')
			return;
		if (Date.now() > end)
			throw new Error('the standby did not catch up');
		await new Promise((r) => setTimeout(r, 50));
	}
}

describe('WebSocket reads on a standby', () => {
	let stack;
	let admin;
	let h;
	const reader = newKey();

	before(async () => {
		stack = await startRelay({
			standby: true,
			nodes: 2,
			// in rotation however long it is paused: positions, not lag
			env: { COMB_READ_MAX_LAG_MS: '3600000' },
			nodeEnv: [{ COMB_READ_DATABASE_URLS: null }, {}],
		});
		admin = stack.admins[0];
		h = await createChannel(stack, admin, { visibility: 'private' });
		await addMember(stack, admin, h, reader.pk);
		await caughtUp(stack);
	});

	after(async () => {
		await stack?.standby?.resume().catch(() => {});
		await stack?.stop();
	});

	test('a plain REQ reads its stored events on the standby once it has replayed them', async () => {
		const m = await chat(stack, admin, h, 'replayed');
		await caughtUp(stack);
		const c = await connectWs(stack.wsUrls[1], reader.sk);
		// A REQ reads at the primary's position of its start, which other
		// tests' writes on the shared primary move on: an attempt whose
		// standby had not replayed that far within the bounded wait read
		// the primary (correctly) and is not the one measured (at most
		// three attempts).
		let onStandby = false;
		for (let attempt = 0; attempt < 3 && !onStandby; attempt++) {
			const before = await served(stack, 1);
			const frames = await reqFrames(c, `chat${attempt}`, [{ kinds: [9], '#h': [h] }]);
			const after = await served(stack, 1);
			assert.ok(frames.some((f) => f[0] === 'EVENT' && f[2].id === m.id));
			onStandby = after.standby > before.standby;
		}
		assert.ok(onStandby, 'the standby served the stored events');
		await c.close();
	});

	test('a plain REQ never misses what committed before it, on a standby behind', async () => {
		const c = await connectWs(stack.wsUrls[1], reader.sk);
		await stack.standby.pause();
		try {
			const m = await chat(stack, admin, h, 'not replayed yet');
			const frames = await reqFrames(c, 'chat', [{ kinds: [9], '#h': [h], limit: 5 }]);
			assert.ok(frames.some((f) => f[0] === 'EVENT' && f[2].id === m.id),
				'a message committed before the REQ was missing from its stored events');
			// and a later one arrives live, once
			const live = await chat(stack, admin, h, 'live');
			const got = await c.next((f) => isFor('chat')(f) && f[0] === 'EVENT', 10000);
			assert.equal(got[2].id, live.id);
		} finally {
			await stack.standby.resume();
		}
		await c.close();
	});

	test('100 syncs hold what committed before them, and a live edit reaches each, on a standby behind', async () => {
		const sockets = [];
		for (let i = 0; i < 10; i++)
			sockets.push(await connectWs(stack.wsUrls[1], reader.sk));
		await stack.standby.pause();
		try {
			const rev = await accept(stack, admin, { d: uuid(), h, op: 'create' });
			for (const c of sockets) {
				for (let j = 0; j < 10; j++) {
					const frames = await reqFrames(c, `sync${j}`, [{ artifact: 'current', '#h': [h] }]);
					assert.equal(frames.at(-1)[0], 'EOSE', JSON.stringify(frames.at(-1)));
					assert.ok(frames.some((f) => f[0] === 'EVENT' && f[2].id === rev.id),
						'an artifact created before the sync was missing from its snapshot');
				}
			}
			const edited = await accept(stack, admin, {
				d: tagValue(rev, 'd'), h, op: 'update', prev: rev.id, title: 'edited',
			});
			for (const c of sockets) {
				for (let j = 0; j < 10; j++) {
					const got = await c.next((f) => isFor(`sync${j}`)(f) && f[0] === 'EVENT', 10000);
					assert.equal(got[2].id, edited.id);
				}
			}
		} finally {
			await stack.standby.resume();
		}
		await Promise.all(sockets.map((c) => c.close()));
	});
});

describe('a subscription on a standby never goes back in time', () => {
	let stack;
	let hold;

	before(async () => {
		stack = await startRelay({
			standby: true,
			env: { COMB_READ_MAX_LAG_MS: '3600000' },
			nodeEnv: [async (s) => {
				hold ??= await startSignalHold(s.captureEndpoint);
				return { COMB_CAPTURE_ENDPOINT: hold.endpoint };
			}],
		});
	});

	after(async () => {
		await stack?.standby?.resume().catch(() => {});
		await stack?.stop();
		await hold?.stop();
	});

	/**
	 * Opens a subscription of filters on c once a change was taken out of
	 * view behind the standby's back: change() makes a change whose signal
	 * (the first kept matching isSignal) is held back, the standby replays
	 * past that signal and is paused, remove(changed) takes the change's
	 * event out of view, then the subscription opens (its first read on
	 * the primary, the standby being behind) and must not hold it
	 * (inView(event, changed) says whether an event shows it). Then the
	 * feed is let go: re-read at the held signal's position, on the paused
	 * standby, the change would come back. Neither the change nor its
	 * removal may come live before sentinel()'s event.
	 */
	async function lateSignal(c, filters, { change, isSignal, remove, inView, sentinel }) {
		// the community's feed is trusted (its mark came) before it is held
		const warm = await reqFrames(c, 'warm', filters);
		assert.equal(warm.at(-1)[0], 'EOSE', JSON.stringify(warm.at(-1)));
		c.send(['CLOSE', 'warm']);
		await caughtUp(stack);
		await hold.hold();
		try {
			const changed = await change();
			const signal = await hold.queued(isSignal);
			assert.notEqual(signal.lsn, '0/0', 'capture gave the signal no position');
			await replayedTo(stack, signal.lsn);
			await stack.standby.pause();
			const removed = await remove(changed);
			const frames = await reqFrames(c, 'late', filters);
			assert.equal(frames.at(-1)[0], 'EOSE', JSON.stringify(frames.at(-1)));
			assert.ok(!frames.some((f) => f[0] === 'EVENT' && inView(f[2], changed)),
				'the first read holds what was taken out of view before it');
			assert.ok(await hold.release() >= 2, 'the change and its removal were not both held');
			const last = await sentinel();
			for (;;) {
				const f = await c.next((m) => isFor('late')(m) && m[0] === 'EVENT', 10000);
				assert.notEqual(f[2].id, changed.id, 'the change came live after a first read without it');
				assert.notEqual(f[2].id, removed.id, 'its removal came live to a client that never held it');
				if (f[2].id === last.id)
					break;
			}
		} finally {
			await hold.release();
			await stack.standby.resume();
		}
	}

	// A sync: the snapshot falls back to the primary (the standby is paused
	// behind the delete); the edit's signal, held back until after EOSE,
	// names a position the paused standby has replayed.
	test('a signal that arrives after the snapshot is re-read no earlier than the snapshot', async () => {
		const admin = stack.admins[0];
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const created = await accept(stack, admin, { d: uuid(), h, op: 'create' });
		const d = tagValue(created, 'd');
		const c = await connectWs(stack.wsUrl, admin);
		await lateSignal(c, [{ artifact: 'current', '#h': [h] }], {
			change: () => accept(stack, admin, { d, h, op: 'update', prev: created.id, title: 'edited' }),
			isSignal: (q) => q.type === 'head' && q.d === d,
			remove: (edited) => accept(stack, admin, { d, h, op: 'delete', prev: edited.id }),
			inView: (ev) => tagValue(ev, 'd') === d,
			sentinel: () => accept(stack, admin, { d: uuid(), h, op: 'create' }),
		});
		await c.close();
	});

	// A plain REQ: its stored events read on the primary, where the message
	// was already withheld (kind 9005); loaded on the paused standby, which
	// has it still, it would reach a client whose stored events left it out.
	test('a plain REQ never receives live an event its stored read saw withheld', async () => {
		const admin = stack.admins[0];
		const h = await createChannel(stack, admin, { visibility: 'private' });
		const c = await connectWs(stack.wsUrl, admin);
		await lateSignal(c, [{ kinds: [9], '#h': [h] }], {
			change: () => chat(stack, admin, h, 'soon withheld'),
			isSignal: (q) => q.type === 'event' && q.community > 0,
			remove: async (m) => {
				const res = await publish(stack, admin, { kind: 9005, tags: [['h', h], ['e', m.id]] });
				assertAccepted(res, 'withhold the message');
				return res.event;
			},
			inView: (ev, message) => ev.id === message.id,
			sentinel: () => chat(stack, admin, h, 'after'),
		});
		await c.close();
	});
});
