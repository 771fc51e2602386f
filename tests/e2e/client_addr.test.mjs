// The client address and the per-address limits (PROTOCOL.md section 10,
// issue 35): the address is the TCP peer, or, only from a trusted proxy,
// X-Forwarded-For's last untrusted entry; every per-address cap applies to
// it. Distinct clients come from the loopback range (127.0.0.2, .3, ...);
// the proxy is a small one started here, which adds the client's address
// to X-Forwarded-For as the compose stack's nginx does
// ($proxy_add_x_forwarded_for) and connects to the relay from 127.0.0.1.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { test } from 'node:test';

import { createChannel } from './lib/artifacts.mjs';
import {
	connectWs, get, newKey, nip98Header, psqlSession, signEvent, startRelay,
} from './lib/harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The relay's deadline for a connection's request line and headers.
const HEADER_DEADLINE_MS = 10000;

/**
 * A proxy on 127.0.0.1 in front of the relay on port: each client
 * connection gets its own connection to the relay, from 127.0.0.1, whose
 * request head carries X-Forwarded-For with the client's address appended
 * (after what the client sent). Resolves to {port, close()}.
 */
async function startProxy(port) {
	const conns = new Set();
	const server = net.createServer((client) => {
		conns.add(client);
		client.on('close', () => conns.delete(client));
		client.on('error', () => {});
		let head = Buffer.alloc(0);
		const onData = (chunk) => {
			head = Buffer.concat([head, chunk]);
			const end = head.indexOf('\r\n\r\n');
			if (end < 0)
				return;
			client.off('data', onData);
			client.pause();
			const lines = head.subarray(0, end).toString().split('\r\n');
			const rest = head.subarray(end + 4);
			const from = client.remoteAddress.replace(/^::ffff:/, '');
			const i = lines.findIndex((l) => /^x-forwarded-for:/i.test(l));
			if (i >= 0)
				lines[i] = `${lines[i]}, ${from}`;
			else
				lines.push(`X-Forwarded-For: ${from}`);
			const upstream = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.1' });
			conns.add(upstream);
			upstream.on('close', () => { conns.delete(upstream); client.destroy(); });
			upstream.on('error', () => client.destroy());
			client.on('close', () => upstream.destroy());
			upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
			upstream.write(rest);
			client.pipe(upstream);
			upstream.pipe(client);
			client.resume();
		};
		client.on('data', onData);
	});
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	return {
		port: server.address().port,
		close: () => {
			for (const c of conns)
				c.destroy();
			server.close();
		},
	};
}

/**
 * Connects to port from localAddress and writes head (then each of
 * opts.trickle every opts.gapMs). Resolves to {socket, answer, closed}:
 * answer resolves to the status of the answer once its head is in (0 when
 * the connection closed without one), closed once the socket closed.
 */
async function rawClient(port, localAddress, head, opts = {}) {
	const socket = net.connect({ host: '127.0.0.1', port, localAddress });
	await new Promise((r, j) => socket.once('connect', r).once('error', j));
	socket.on('error', () => {});
	let text = '';
	const closed = new Promise((r) => socket.once('close', r));
	const answer = new Promise((resolve) => {
		socket.on('data', (c) => {
			text += c;
			if (text.includes('\r\n\r\n'))
				resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
		});
		closed.then(() => resolve({ status: 0, text }));
	});
	socket.write(head);
	if (opts.trickle) {
		const timer = setInterval(() => {
			if (!socket.destroyed)
				socket.write(opts.trickle);
		}, opts.gapMs ?? 1000);
		closed.then(() => clearInterval(timer));
	}
	return { socket, answer, closed };
}

// A WebSocket upgrade request for the relay on relayPort.
function upgradeHead(relayPort, extra = '') {
	return `GET / HTTP/1.1\r\nHost: localhost:${relayPort}\r\n` +
		'Upgrade: websocket\r\nConnection: Upgrade\r\n' +
		`Sec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\n` +
		`Sec-WebSocket-Version: 13\r\n${extra}\r\n`;
}

// Resolves to the answer's status within ms, or 'none'.
function statusWithin(c, ms) {
	return Promise.race([c.answer.then((a) => a.status), sleep(ms).then(() => 'none')]);
}

test('slow headers from one address hold no worker another address needs', async () => {
	// few workers, so that slow headers would hold them all without the cap
	const stack = await startRelay({ env: {
		COMB_NUM_THREADS: '12', COMB_MAX_CONNECTIONS_PER_IP: '2', COMB_MAX_HTTP_CONNECTIONS_PER_IP: '2',
	} });
	const slow = [];
	try {
		const port = stack.ports[0];
		// 127.0.0.2 sends a request line, then a header byte a second
		for (let i = 0; i < 10; i++) {
			slow.push(await rawClient(port, '127.0.0.2', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ',
				{ trickle: 'a', gapMs: 1000 }));
		}
		const t0 = Date.now();
		// over its cap of 2 + 2 connections, it is refused at once
		const statuses = await Promise.all(slow.map((c) => statusWithin(c, 3000)));
		assert.equal(statuses.filter((s) => s === 503).length, 6, JSON.stringify(statuses));
		assert.equal(statuses.filter((s) => s === 'none').length, 4, JSON.stringify(statuses));
		const refused = await slow[statuses.indexOf(503)].answer;
		assert.match(refused.text, /\{"error":"error: too many connections"\}$/);
		// another address is served meanwhile, long before the deadline
		const other = await rawClient(port, '127.0.0.3', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
		assert.equal(await statusWithin(other, 5000), 200);
		other.socket.destroy();
		assert.ok(Date.now() - t0 < HEADER_DEADLINE_MS, 'served before the slow headers\' deadline');
		// the held ones are closed at the deadline for the headers
		const held = slow.filter((c, i) => statuses[i] === 'none');
		const gone = await Promise.all(held.map((c) => Promise.race([
			c.closed.then(() => true), sleep(HEADER_DEADLINE_MS + 10000).then(() => false)])));
		assert.deepEqual(gone, held.map(() => true), 'slow headers are cut off');
		assert.ok(Date.now() - t0 >= HEADER_DEADLINE_MS - 1000, 'not before the deadline');
		// and the address may connect again
		const again = await rawClient(port, '127.0.0.2', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
		assert.equal(await statusWithin(again, 5000), 200);
		again.socket.destroy();
	} finally {
		for (const c of slow)
			c.socket.destroy();
		await stack.stop();
	}
});

test('behind a trusted proxy, each client address has its own WebSocket share', async () => {
	const stack = await startRelay({ env: {
		COMB_MAX_CONNECTIONS_PER_IP: '2', COMB_TRUSTED_PROXIES: '127.0.0.1',
	} });
	const proxy = await startProxy(stack.ports[0]);
	const held = [];
	try {
		const relayPort = stack.ports[0];
		const nip11 = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
		assert.equal(nip11.json().limitation.max_connections_per_ip, 2, 'NIP-11 still advertises the cap');
		const open = async (localAddress, extra) => {
			const c = await rawClient(proxy.port, localAddress, upgradeHead(relayPort, extra));
			held.push(c);
			return statusWithin(c, 5000);
		};
		assert.equal(await open('127.0.0.2'), 101);
		assert.equal(await open('127.0.0.2'), 101);
		assert.equal(await open('127.0.0.2'), 503, 'one client is over its share');
		// what a client writes itself into X-Forwarded-For is not believed
		assert.equal(await open('127.0.0.2', 'X-Forwarded-For: 10.9.9.9\r\n'), 503);
		// another client behind the same proxy is not locked out
		assert.equal(await open('127.0.0.3'), 101);
		assert.equal(await open('127.0.0.3'), 101);
		// a peer that is not a trusted proxy is its own address, whatever
		// it forwards
		const direct = [];
		for (const xff of ['127.0.0.50', '127.0.0.51', '127.0.0.52']) {
			const c = await rawClient(relayPort, '127.0.0.4', upgradeHead(relayPort, `X-Forwarded-For: ${xff}\r\n`));
			held.push(c);
			direct.push(await statusWithin(c, 5000));
		}
		assert.deepEqual(direct, [101, 101, 503]);
	} finally {
		for (const c of held)
			c.socket.destroy();
		proxy.close();
		await stack.stop();
	}
});

test('behind a trusted proxy, HTTP requests in progress are capped per client address', async () => {
	const stack = await startRelay({ env: {
		COMB_MAX_HTTP_CONNECTIONS_PER_IP: '2', COMB_TRUSTED_PROXIES: '127.0.0.1',
	} });
	const proxy = await startProxy(stack.ports[0]);
	const slow = [];
	try {
		// bodies that trickle in hold their requests (no database connection)
		const slowPost = 'POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
			'Content-Length: 1000\r\nConnection: close\r\n\r\n{';
		for (let i = 0; i < 2; i++)
			slow.push(await rawClient(proxy.port, '127.0.0.2', slowPost, { trickle: ' ', gapMs: 500 }));
		await sleep(500);
		const third = await rawClient(proxy.port, '127.0.0.2', slowPost);
		slow.push(third);
		const a = await Promise.race([third.answer, sleep(5000).then(() => ({ status: 'none' }))]);
		assert.equal(a.status, 503, a.text);
		assert.match(a.text, /\{"error":"error: too many connections"\}$/);
		// another client of the same proxy is answered
		const k = newKey();
		const body = '[{"kinds":[9],"limit":1}]';
		const auth = await nip98Header(k.sk, `http://localhost:${stack.ports[0]}/query`, 'POST', body);
		const q = await rawClient(proxy.port, '127.0.0.3', `POST /query HTTP/1.1\r\nHost: localhost:${stack.ports[0]}\r\n` +
			`Authorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
			`Connection: close\r\n\r\n${body}`);
		slow.push(q);
		assert.equal(await statusWithin(q, 5000), 200);
		// the two slow ones end with 408 at the body deadline
		const late = await Promise.all(slow.slice(0, 2).map((c) => statusWithin(c, 15000)));
		assert.deepEqual(late, [408, 408]);
	} finally {
		for (const c of slow)
			c.socket.destroy();
		proxy.close();
		await stack.stop();
	}
});

test('one address saturating writes leaves room in the write queue for another', async () => {
	const stack = await startRelay({ env: {
		COMB_WRITE_RATE: '0', COMB_WRITE_INFLIGHT_PER_NODE: '64', COMB_WRITE_INFLIGHT_PER_IP: '16',
		COMB_WRITE_INFLIGHT_PER_CONNECTION: '64', COMB_DB_POOL_SIZE: '2',
		// writes wait on a lock below without running out of time
		COMB_QUERY_TIMEOUT_MS: '120000',
	} });
	const admin = stack.admins[0];
	const clients = [];
	const locker = psqlSession(stack.dbName);
	try {
		const h = await createChannel(stack, admin, { visibility: 'open' });
		// commits wait on a lock, so that what is in flight stays in flight
		await locker.run('BEGIN; LOCK TABLE events IN SHARE MODE;');
		const flooder = newKey();
		let floodOks = 0;
		const refused = [];
		for (let c = 0; c < 4; c++) {
			const ws = await connectWs(stack.url, flooder.sk, { localAddress: '127.0.0.2' });
			clients.push(ws);
			ws.ws.on('message', (d) => {
				const m = JSON.parse(d.toString());
				if (m[0] === 'OK')
					floodOks++;
				if (m[0] === 'OK' && m[2] !== true)
					refused.push(m[3]);
			});
			for (let i = 0; i < 64; i++)
				ws.send(['EVENT', signEvent(flooder.sk, { kind: 9, tags: [['h', h]], content: `flood ${c} ${i}` })]);
		}
		await sleep(1000);
		const victim = newKey();
		const v = await connectWs(stack.url, victim.sk, { localAddress: '127.0.0.3' });
		clients.push(v);
		const ev = signEvent(victim.sk, { kind: 9, tags: [['h', h]], content: 'mine' });
		v.send(['EVENT', ev]);
		await sleep(1000);
		assert.equal(floodOks, 0, `nothing committed while the lock is held: ${refused.join('; ')}`);
		let before = null;
		const ok = v.next((m) => m[0] === 'OK' && m[1] === ev.id, 60000).then((m) => {
			before = floodOks;
			return m;
		});
		await locker.run('COMMIT;');
		assert.deepEqual(await ok, ['OK', ev.id, true, '']);
		// the victim's write was queued behind at most the flooder's share
		// (16), not behind the node's whole queue (64); flood writes admitted
		// after it may commit in its group or on the pool's other connection
		// and be answered a moment before it, so the bound leaves them room
		assert.ok(before < 32, `${before} of the flood's writes were answered first`);
		assert.deepEqual(refused, []);
	} finally {
		for (const c of clients)
			c.ws.terminate();
		await locker.close();
		await stack.stop();
	}
});
