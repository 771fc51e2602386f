// A relay's stop is bounded (docs/operations.md, "Stopping a relay node";
// issue 35 item 9): the signal takes effect at once, and a step that
// waits on the database without end cannot hold the process past
// COMB_SHUTDOWN_GRACE_MS + 5 s: the stop watchdog ends it with status 1.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { createChannel } from './lib/artifacts.mjs';
import { newKey, post, psqlSession, signEvent, startRelay } from './lib/harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const GRACE_MS = 1000;
const STOP_TAIL_MS = 5000;

test('a write stuck on the database cannot hold a stop past the grace period and the tail', async () => {
	const stack = await startRelay({ env: {
		COMB_SHUTDOWN_GRACE_MS: String(GRACE_MS),
		// the stuck write never runs out of time by itself
		COMB_QUERY_TIMEOUT_MS: '600000',
	} });
	const locker = psqlSession(stack.dbName);
	try {
		const admin = stack.admins[0];
		const h = await createChannel(stack, admin, { visibility: 'open' });
		await locker.run('BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE;');
		const k = newKey();
		const stuck = post(stack.url, '/events', signEvent(k.sk, { kind: 9, tags: [['h', h]], content: 'stuck' }),
			k.sk, { timeoutMs: 60000 }).catch((err) => err);
		await sleep(1000);
		const t0 = Date.now();
		let complaint = '';
		try {
			await stack.stopNode(0);
		} catch (err) {
			complaint = err.message;
		}
		const took = Date.now() - t0;
		assert.match(complaint, /relay 0 exited with status 1/, complaint);
		const log = fs.readFileSync(stack.logs.relays[0], 'utf8');
		assert.match(log, /stopping: SIGTERM received/);
		assert.match(log, /stopping: grace period over with 0 WebSocket connections and 1 requests left/);
		assert.match(log, new RegExp(`stopping: not stopped ${GRACE_MS + STOP_TAIL_MS} ms after the signal; exiting now`));
		assert.ok(took >= GRACE_MS + STOP_TAIL_MS - 500, `the watchdog waited its time (${took} ms)`);
		await stuck;
	} finally {
		await locker.run('COMMIT;').catch(() => {});
		await locker.close();
		// a fresh node, so that the stack stops cleanly and drops its database
		await stack.startNode(0);
		await stack.stop();
	}
});
