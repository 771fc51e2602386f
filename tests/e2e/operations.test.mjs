// What an operator relies on (docs/operations.md): /readyz answers for
// PostgreSQL and Redis and only reports the capture feed; a SIGTERM drains
// the node (readiness 503 at once, new connections refused, a write in
// progress over HTTP and over a WebSocket finishes and is acknowledged,
// every WebSocket gets the close 1001 "going away", exit status 0); and
// /metrics counts what a scripted session did.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { chat, createChannel, uuid } from './lib/artifacts.mjs';
import {
	connectWs, get, newKey, post, psqlSession, signEvent, startRelay,
} from './lib/harness.mjs';

let stack;
let admin;
let channel;

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
		await stack.stopCapture(0);
		const down = await until('the feed reported down', async () => {
			const r = await get(stack.url, '/readyz');
			assert.equal(r.status, 200, r.body);
			return r.json().feed === 'down' && r.json();
		});
		assert.deepEqual(down, { ready: true, database: 'ok', redis: 'ok', feed: 'down', stopping: false });
		// HTTP writes and reads go on without capture.
		await chat(stack, admin, channel, 'written while capture is down');
		await stack.startCapture();
		await until('the feed up again', async () =>
			(await get(stack.url, '/readyz')).json().feed === 'up');
	});
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
			assert.ok(Date.now() - t0 < 5000, `stopped after ${Date.now() - t0} ms`);
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
