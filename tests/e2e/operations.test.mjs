// What an operator relies on (docs/operations.md): /readyz answers for
// PostgreSQL and Redis and only reports the capture feed; a SIGTERM drains
// the node (readiness 503 at once, new connections refused, a write in
// progress over HTTP and over a WebSocket finishes and is acknowledged,
// every WebSocket gets the close 1001 "going away", exit status 0); and
// /metrics counts what a scripted session did.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { chat, createChannel, uuid } from './lib/artifacts.mjs';
import {
	connectWs, get, newKey, post, psqlSession, scrapeMetrics, signEvent, startRelay,
} from './lib/harness.mjs';

let stack;
let admin;
let channel;
let capture = 0;     // the running capture's index

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	channel = await createChannel(stack, admin, { name: 'ops' });
});

after(async () => {
	await stack?.stop();
});

// One HTTP/1.1 connection kept open across requests, as a load balancer's
// pooled connection: GET path on it, resolves to {status, body}.
function keepAlive(port) {
	const sock = net.connect(port, '127.0.0.1');
	let buf = '';
	let waiter = null;
	sock.setEncoding('utf8');
	sock.on('data', (d) => {
		buf += d;
		waiter?.();
	});
	const ready = new Promise((resolve, reject) => {
		sock.once('connect', resolve);
		sock.once('error', reject);
	});
	return {
		async get(path) {
			await ready;
			sock.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
			for (;;) {
				const end = buf.indexOf('\r\n\r\n');
				const m = end >= 0 && /content-length: *(\d+)/i.exec(buf.slice(0, end));
				if (m && buf.length >= end + 4 + Number(m[1])) {
					const status = Number(buf.slice(9, 12));
					const body = buf.slice(end + 4, end + 4 + Number(m[1]));
					buf = buf.slice(end + 4 + Number(m[1]));
					return { status, body };
				}
				await new Promise((resolve, reject) => {
					const t = setTimeout(() => reject(new Error(`no answer to ${path}: ${buf}`)), 5000);
					waiter = () => {
						clearTimeout(t);
						resolve();
					};
				});
			}
		},
		close: () => sock.destroy(),
	};
}

// Resolves to the error code of a new TCP connection to port, or 'connected'.
function dial(port) {
	return new Promise((resolve) => {
		const s = net.connect(port, '127.0.0.1');
		s.once('connect', () => {
			s.destroy();
			resolve('connected');
		});
		s.once('error', (err) => resolve(err.code));
	});
}

async function until(what, fn, ms = 5000) {
	const deadline = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v)
			return v;
		assert.ok(Date.now() < deadline, `${what} within ${ms} ms`);
		await sleep(25);
	}
}

describe('readiness', () => {
	test('ready with PostgreSQL and Redis; the feed is reported, not required', async () => {
		const up = await until('the feed up', async () => {
			const r = await get(stack.url, '/readyz');
			return r.status === 200 && r.json().feed === 'up' && r.json();
		});
		assert.deepEqual(up, { ready: true, database: 'ok', redis: 'ok', feed: 'up', stopping: false });
		await stack.stopCapture(capture);
		const down = await until('the feed reported down', async () => {
			const r = await get(stack.url, '/readyz');
			assert.equal(r.status, 200, r.body);
			return r.json().feed === 'down' && r.json();
		});
		assert.deepEqual(down, { ready: true, database: 'ok', redis: 'ok', feed: 'down', stopping: false });
		// HTTP writes and reads go on without capture.
		await chat(stack, admin, channel, 'written while capture is down');
		capture = await stack.startCapture();
		await until('the feed up again', async () =>
			(await get(stack.url, '/readyz')).json().feed === 'up');
	});
});

test('NIP-11 advertises the connections a node holds', async () => {
	const r = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
	// the default COMB_NUM_THREADS, 1200, less an eighth kept for HTTP
	assert.equal(r.json().limitation.max_connections, 1050);
});

describe('graceful stop', () => {
	test('SIGTERM: 503, refused connections, writes acknowledged, 1001, exit 0', async () => {
		const writer = await connectWs(stack.url, admin);
		const reader = await connectWs(stack.url, newKey().sk);
		const db = psqlSession(stack.dbName);
		let probe = null;
		try {
			// Both writes wait on a lock, so that they are in progress
			// when the signal arrives.
			await db.run('BEGIN; LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;');
			const wsEvent = signEvent(admin, { kind: 9, tags: [['h', channel]], content: `ws ${uuid()}` });
			writer.send(['EVENT', wsEvent]);
			const httpEvent = signEvent(admin, { kind: 9, tags: [['h', channel]], content: `http ${uuid()}` });
			const httpWrite = post(stack.url, '/events', httpEvent, admin);
			await until('both writes waiting on the lock', async () =>
				(await stack.psql("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'events'::regclass")).trim() === '2');

			// A load balancer's pooled connection (civetweb keeps an idle
			// one for 500 ms).
			probe = keepAlive(stack.port);
			assert.equal((await probe.get('/readyz')).status, 200);
			const t0 = Date.now();
			const stopped = stack.stopNode(0, 'SIGTERM');
			assert.deepEqual(await reader.closed, { code: 1001, reason: 'going away' });
			const ready = await probe.get('/readyz');
			assert.equal(ready.status, 503, ready.body);
			assert.deepEqual(JSON.parse(ready.body), {
				ready: false, error: 'error: shutting down', database: 'ok', redis: 'ok',
				feed: 'up', stopping: true,
			});
			assert.equal(await dial(stack.port), 'ECONNREFUSED');

			await sleep(300);
			await db.run('COMMIT;');
			const ok = await writer.next((m) => m[0] === 'OK' && m[1] === wsEvent.id);
			assert.deepEqual(ok, ['OK', wsEvent.id, true, '']);
			assert.deepEqual(await writer.closed, { code: 1001, reason: 'going away' });
			const h = await httpWrite;
			assert.equal(h.status, 200, h.body);
			assert.deepEqual(h.json(), { id: httpEvent.id, accepted: true, message: '' });
			assert.deepEqual(await stopped, { code: 0, signal: null });
			// Well inside the 10 s grace period: the node stops once its
			// last request is done instead of waiting the grace out
			// (stopping itself, civetweb's threads and the pools, takes
			// about 2 s of that under the sanitizers).
			assert.ok(Date.now() - t0 < 8000, `stopped after ${Date.now() - t0} ms`);
			const stored = await stack.psql(
				`SELECT count(*) FROM events WHERE id IN ('${wsEvent.id}', '${httpEvent.id}')`);
			assert.equal(stored.trim(), '2');
		} finally {
			probe?.close();
			writer.ws.terminate();
			reader.ws.terminate();
			await db.close();
		}
		await stack.startNode(0);
	});
});

function closed(id) {
	return (m) => m[0] === 'CLOSED' && m[1] === id;
}

describe('metrics', () => {
	test('a node opens its whole database pool when it starts', async () => {
		// The node was restarted by the stop test and has served nothing
		// since but /metrics, which needs no database connection.
		await until('every pooled connection open', async () => {
			const m = await scrapeMetrics(stack.url);
			return m.value('comb_db_pool_open') === m.value('comb_db_pool_size');
		});
		const m = await scrapeMetrics(stack.url);
		assert.ok(m.value('comb_db_pool_size') > 1);
		assert.equal(m.value('comb_db_pool_failures_total'), 0);
	});

	test('a scripted session shows in /metrics', async () => {
		// The node was restarted by the stop test: its counters start at 0.
		const before = await scrapeMetrics(stack.url);
		assert.equal(before.value('comb_ws_connections'), 0);
		assert.equal(before.value('comb_feed_alive'), 1);
		assert.equal(before.value('comb_stopping'), 0);
		assert.ok(before.value('comb_feed_heartbeat_age_seconds') >= 0);
		assert.ok(before.value('comb_feed_heartbeat_age_seconds') < 2);
		assert.equal(before.value('comb_feed_epochs_total'), 1);
		assert.ok(before.value('comb_feed_signals_total') > 0);

		const c = await connectWs(stack.url, admin);
		try {
			c.send(['REQ', 'live', { kinds: [9], '#h': [channel], limit: 1 }]);
			await c.next((m) => m[0] === 'EOSE' && m[1] === 'live');
			c.send(['REQ', 'sync', { artifact: 'current', '#h': [channel] }]);
			await c.next((m) => m[0] === 'EOSE' && m[1] === 'sync', 10000);
			const good = signEvent(admin, { kind: 9, tags: [['h', channel]], content: `m ${uuid()}` });
			c.send(['EVENT', good]);
			assert.deepEqual(await c.next((m) => m[0] === 'OK' && m[1] === good.id), ['OK', good.id, true, '']);
			const bad = signEvent(admin, { kind: 9, tags: [['h', uuid()]], content: 'nowhere' });
			c.send(['EVENT', bad]);
			const refused = await c.next((m) => m[0] === 'OK' && m[1] === bad.id);
			assert.equal(refused[2], false);
			const prefix = refused[3].slice(0, refused[3].indexOf(':'));
			const inc = await post(stack.url, '/query', [{ artifact: 'incremental', '#h': [channel] }], admin);
			assert.equal(inc.status, 200, inc.body);
			const badCursor = await post(stack.url, '/query',
				[{ artifact: 'incremental', '#h': [channel], cursor: 'not-a-cursor' }], admin);
			assert.equal(badCursor.status, 400, badCursor.body);

			const open = await scrapeMetrics(stack.url);
			assert.equal(open.value('comb_ws_connections'), 1);
			assert.equal(open.value('comb_ws_subscriptions'), 1);
			assert.equal(open.value('comb_syncs{mode="current"}'), 1);
			assert.equal(open.value('comb_http_requests_total{route="websocket",status="101"}'), 1);
			assert.equal(open.series.get('comb_http_requests_total{route="websocket",status="other"}'), undefined);
			assert.equal(open.value('comb_writes_total{outcome="accepted"}'), 1);
			assert.equal(open.value(`comb_writes_total{outcome="${prefix}"}`), 1, refused[3]);
			assert.equal(open.value('comb_incremental_reads_total{outcome="initial"}'), 1);
			assert.equal(open.value(`comb_incremental_reads_total{outcome="${badCursor.json().error}"}`), 1);

			// Capture goes away: the sync and the live REQ are closed, the
			// feed is reported down; it comes back with a new epoch.
			await stack.stopCapture(capture);
			assert.deepEqual(await c.next(closed('sync'), 5000), ['CLOSED', 'sync', 'resync: change feed interrupted']);
			assert.deepEqual(await c.next(closed('live'), 5000), ['CLOSED', 'live', 'resync: change feed interrupted']);
			const down = await scrapeMetrics(stack.url);
			assert.equal(down.value('comb_feed_alive'), 0);
			assert.ok(down.value('comb_feed_heartbeat_age_seconds') >= 1.5);
			assert.equal(down.value('comb_feed_heartbeat_losses_total'), 1);
			assert.equal(down.value('comb_resync_closes_total{reason="change feed interrupted"}'), 2);
			// held (as the relay's memory holds them) until the client's
			// CLOSE, a REQ reusing the id, or the end of the connection
			assert.equal(down.value('comb_syncs{mode="current"}'), 1);
			c.send(['CLOSE', 'sync']);
			c.send(['CLOSE', 'live']);
			await until('the closed sync and REQ released', async () => {
				const m = await scrapeMetrics(stack.url);
				return m.value('comb_syncs{mode="current"}') === 0 && m.value('comb_ws_subscriptions') === 0;
			});
			capture = await stack.startCapture();
			await until('the feed back', async () => (await scrapeMetrics(stack.url)).value('comb_feed_alive') === 1);
			assert.equal((await scrapeMetrics(stack.url)).value('comb_feed_epochs_total'), 2);
		} finally {
			await c.close();
		}
		await until('the connection counted closed', async () =>
			(await scrapeMetrics(stack.url)).value('comb_ws_connections') === 0);
	});
});

describe('access log', () => {
	test('COMB_ACCESS_LOG writes one line per HTTP request', async () => {
		const logged = await startRelay({ env: { COMB_ACCESS_LOG: 'true' }, capture: false });
		try {
			assert.equal((await get(logged.url, '/healthz')).status, 200);
			assert.equal((await get(logged.url, '/nowhere')).status, 404);
			await sleep(200);
			const log = fs.readFileSync(logged.logs.relays[0], 'utf8');
			assert.match(log, /access: 127\.0\.0\.1 GET \/healthz 200 \d+\.\d ms/);
			assert.match(log, /access: 127\.0\.0\.1 GET \/nowhere 404 \d+\.\d ms/);
		} finally {
			await logged.stop();
		}
		// off by default: this file's relay logs none
		assert.doesNotMatch(fs.readFileSync(stack.logs.relays[0], 'utf8'), /access: /);
	});
});
