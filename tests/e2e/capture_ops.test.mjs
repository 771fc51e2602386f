// comb-capture for operators (issue 18 items 2 and 3): its HTTP endpoint
// (COMB_CAPTURE_METRICS_LISTEN) scraped after a short scripted session
// (a channel created, a chat message, an ephemeral event), /healthz on a
// leader, a standby and a capture that cannot reach Redis, and SIGTERM: the
// leader exits 0 at once, releasing the lock, and the standby takes over.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { freePort, get, scrapeMetrics, startRelay } from './lib/harness.mjs';
import { assertAccepted, chat, createChannel, publish } from './lib/artifacts.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// scrapeMetrics of the capture's metrics listener on port, which also
// answers in the text format's version 0.0.4.
async function scrape(port) {
	const m = await scrapeMetrics(`http://127.0.0.1:${port}`);
	assert.match(m.headers['content-type'], /^text\/plain; version=0\.0\.4/);
	return m;
}

// Polls until pred(metrics) holds; resolves to the milliseconds it took.
async function until(port, pred, what, timeoutMs = 8000) {
	const start = Date.now();
	for (;;) {
		try {
			if (pred(await scrape(port)))
				return Date.now() - start;
		} catch {
			// not listening yet
		}
		if (Date.now() - start > timeoutMs)
			throw new Error(`${what} not seen within ${timeoutMs} ms`);
		await sleep(50);
	}
}

describe('capture metrics, health and SIGTERM', () => {
	let stack;
	let leaderPort;
	let standbyPort;

	before(async () => {
		leaderPort = await freePort();
		// Each capture binds the first free endpoint; relays connect to all.
		const endpoints = [];
		for (let i = 0; i < 3; i++)
			endpoints.push(`tcp://127.0.0.1:${await freePort()}`);
		const feed = { COMB_CAPTURE_ENDPOINT: endpoints.join(',') };
		stack = await startRelay({
			env: feed,
			captureEnv: { ...feed, COMB_CAPTURE_METRICS_LISTEN: `127.0.0.1:${leaderPort}` },
		});
		await until(leaderPort, (m) => m.value('comb_capture_leader') === 1, 'leadership');
		standbyPort = await freePort();
		await stack.startCapture({ COMB_CAPTURE_METRICS_LISTEN: `127.0.0.1:${standbyPort}` });
		await until(standbyPort, (m) => m.value('comb_capture_database_connected') === 1, 'standby connected');
	});
	after(() => stack?.stop());

	test('a scrape after a session counts what was published', async () => {
		const admin = stack.admins[0];
		const h = await createChannel(stack, admin, { name: 'ops' });
		await chat(stack, admin, h, 'hello');
		assertAccepted(await publish(stack, admin, { kind: 20001, tags: [['h', h]], content: 'typing' }), 'ephemeral');
		await until(leaderPort, (m) => m.value('comb_capture_signals_published_total{type="ephemeral"}') >= 1,
			'the ephemeral signal');
		const m = await scrape(leaderPort);
		assert.equal(m.value('comb_capture_leader'), 1);
		assert.equal(m.value('comb_capture_reconnecting'), 0);
		assert.equal(m.value('comb_capture_database_connected'), 1);
		assert.equal(m.value('comb_capture_redis_connected'), 1);
		assert.ok(m.value('comb_capture_signals_published_total{type="channel"}') >= 1, m.text);
		assert.ok(m.value('comb_capture_signals_published_total{type="event"}') >= 2, m.text);
		assert.ok(m.value('comb_capture_signals_published_total{type="heartbeat"}') >= 1, m.text);
		assert.ok(m.value('comb_capture_notifications_total') >= 3, m.text);
		assert.equal(m.value('comb_capture_epochs_total'), 1);
		assert.equal(m.value('comb_capture_inputs_rejected_total'), 0);
		assert.equal(m.value('comb_capture_database_reconnects_total'), 0);
		assert.equal(m.value('comb_capture_redis_reconnects_total'), 0);
		assert.match(m.text, /^comb_capture_epoch_info\{epoch="[0-9a-f]{16}"\} 1$/m);
		assert.ok(Math.abs(m.value('comb_capture_last_heartbeat_timestamp_seconds') - Date.now() / 1000) < 5, m.text);
		assert.match(m.text, /^# TYPE comb_capture_signals_published_total counter$/m);

		const standby = await scrape(standbyPort);
		assert.equal(standby.value('comb_capture_leader'), 0);
		assert.equal(standby.value('comb_capture_signals_published_total{type="heartbeat"}'), 0);
	});

	test('/healthz: 200 on leader and standby, 503 without Redis', async () => {
		let r = await get(`http://127.0.0.1:${leaderPort}`, '/healthz');
		assert.equal(r.status, 200);
		assert.equal(r.body, 'loop ok\ndatabase ok\nredis ok\nrole leader\n');
		r = await get(`http://127.0.0.1:${standbyPort}`, '/healthz');
		assert.equal(r.status, 200);
		assert.equal(r.body, 'loop ok\ndatabase ok\nredis ok\nrole standby\n');
		r = await get(`http://127.0.0.1:${leaderPort}`, '/other');
		assert.equal(r.status, 404);

		const port = await freePort();
		const i = await stack.startCapture({
			COMB_CAPTURE_METRICS_LISTEN: `127.0.0.1:${port}`,
			COMB_REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
		});
		await until(port, (m) => m.value('comb_capture_database_connected') === 1, 'third capture connected');
		r = await get(`http://127.0.0.1:${port}`, '/healthz');
		assert.equal(r.status, 503);
		assert.match(r.body, /^redis disconnected$/m);
		await stack.stopCapture(i);
	});

	test('SIGTERM: the leader exits 0 and the standby takes over', async () => {
		const start = Date.now();
		const stopped = stack.stopCapture(0).then(() => Date.now() - start); // throws unless exit 0
		const takeoverMs = await until(standbyPort, (m) => m.value('comb_capture_leader') === 1, 'takeover', 5000);
		const exitMs = await stopped;
		console.log(`after SIGTERM: the standby led in ${takeoverMs} ms, the leader exited in ${exitMs} ms`);
		assert.ok(takeoverMs < 2000, `takeover took ${takeoverMs} ms`);
		assert.ok(exitMs < 5000, `exit took ${exitMs} ms`);
		assert.equal((await scrape(standbyPort)).value('comb_capture_epochs_total'), 1);
	});
});
