// Hostile WebSocket clients (PROTOCOL.md section 10, "One client cannot
// starve others"): a frame header declaring a huge payload, a payload that
// never arrives, unauthenticated connections that ignore the close frame
// while answering and sending pings, simultaneous upgrades racing for the
// last slots, and one address opening more connections than its share.
// The clients here speak raw WebSocket over TCP, so that they can do what
// no well-behaved library does.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { describe, test } from 'node:test';

import { pidListeningOn, rssKb } from './lib/clients.mjs';
import { connectWs, get, newKey, startRelay } from './lib/harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const AUTH_TIMEOUT_MS = 30000;
// After the close frame, the relay waits this long before shutting down
// the socket of a client that ignores it (CLOSE_DRAIN_MS in ws.c).
const CLOSE_GRACE_MS = 2000;
const MESSAGE_TIMEOUT_MS = 10000;

// One client frame, masked as RFC 6455 requires. `declared` overrides the
// payload length written in the header (the payload sent stays `payload`).
function frame(opcode, payload = Buffer.alloc(0), { fin = true, declared } = {}) {
	const len = declared ?? payload.length;
	let head;
	if (len < 126) {
		head = Buffer.from([0, 0x80 | len]);
	} else if (len < 65536) {
		head = Buffer.alloc(4);
		head[1] = 0x80 | 126;
		head.writeUInt16BE(len, 2);
	} else {
		head = Buffer.alloc(10);
		head[1] = 0x80 | 127;
		head.writeBigUInt64BE(BigInt(len), 2);
	}
	head[0] = (fin ? 0x80 : 0) | opcode;
	const mask = crypto.randomBytes(4);
	const body = Buffer.from(payload);
	for (let i = 0; i < body.length; i++)
		body[i] ^= mask[i & 3];
	return Buffer.concat([head, mask, body]);
}

// A raw WebSocket after a successful upgrade. It records the server's
// frames; it answers pings with pongs unless told not to, and never
// answers a close frame.
class RawWs {
	constructor(sock, rest) {
		this.sock = sock;
		this.buf = rest;
		this.frames = [];
		this.closeCode = null;
		this.ended = new Promise((resolve) => {
			sock.once('close', () => {
				this.endedAt = Date.now();
				resolve(this.endedAt);
			});
		});
		sock.on('error', () => { /* the relay may reset: 'close' follows */ });
		sock.on('data', (chunk) => {
			this.buf = Buffer.concat([this.buf, chunk]);
			this.parse();
		});
		this.parse();
	}

	parse() {
		for (;;) {
			const b = this.buf;
			if (b.length < 2)
				return;
			let len = b[1] & 0x7f;
			let off = 2;
			if (len === 126) {
				if (b.length < 4)
					return;
				len = b.readUInt16BE(2);
				off = 4;
			} else if (len === 127) {
				if (b.length < 10)
					return;
				len = Number(b.readBigUInt64BE(2));
				off = 10;
			}
			if (b.length < off + len)
				return;
			const opcode = b[0] & 0x0f;
			const payload = b.subarray(off, off + len);
			this.buf = b.subarray(off + len);
			this.frames.push({ opcode, payload });
			if (opcode === 0x9 && !this.sock.destroyed)
				this.sock.write(frame(0xa, payload));
			if (opcode === 0x8 && this.closeCode === null) {
				this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
				this.closeReason = payload.subarray(2).toString();
			}
		}
	}

	write(data) {
		if (this.sock.destroyed || this.sock.writableEnded)
			return Promise.resolve(false);
		return new Promise((resolve) => {
			this.sock.write(data, (err) => resolve(!err));
		});
	}

	destroy() {
		this.sock.destroy();
	}
}

// Upgrades a raw TCP connection to the relay on port. Resolves to
// {status, body} for a refusal, {status: 101, ws: RawWs} for an upgrade.
// The request is written at once; opts.hold (a promise) delays it, so that
// several connections can send their upgrade requests together.
function rawUpgrade(port, opts = {}) {
	return new Promise((resolve, reject) => {
		const sock = net.connect({ host: '127.0.0.1', port, localAddress: opts.localAddress });
		let buf = Buffer.alloc(0);
		let head = null;
		let need = 0;
		const onData = (chunk) => {
			buf = Buffer.concat([buf, chunk]);
			if (!head) {
				const end = buf.indexOf('\r\n\r\n');
				if (end < 0)
					return;
				head = buf.subarray(0, end).toString();
				buf = buf.subarray(end + 4);
				const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
				if (status === 101) {
					sock.off('data', onData);
					resolve({ status, ws: new RawWs(sock, buf) });
					return;
				}
				need = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
			}
			if (buf.length >= need) {
				sock.destroy();
				const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)[1]);
				resolve({ status, body: buf.subarray(0, need).toString() });
			}
		};
		sock.on('data', onData);
		sock.once('error', reject);
		sock.once('connect', async () => {
			await opts.hold;
			sock.write('GET / HTTP/1.1\r\n' +
				`Host: localhost:${port}\r\n` +
				'Upgrade: websocket\r\nConnection: Upgrade\r\n' +
				`Sec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\n` +
				'Sec-WebSocket-Version: 13\r\n\r\n');
		});
	});
}

async function upgraded(port, opts) {
	const r = await rawUpgrade(port, opts);
	assert.equal(r.status, 101, `upgrade answered ${r.status} ${r.body ?? ''}`);
	return r.ws;
}

function assertTooMany(r) {
	assert.equal(r.status, 503);
	assert.deepEqual(JSON.parse(r.body), { error: 'error: too many connections' });
}

// Resolves to whether p settled within ms.
function within(p, ms) {
	return Promise.race([p.then(() => true), sleep(ms).then(() => false)]);
}

async function until(what, cond, ms) {
	const deadline = Date.now() + ms;
	while (!(await cond())) {
		if (Date.now() > deadline)
			throw new Error(`${what}: not within ${ms} ms`);
		await sleep(100);
	}
}

describe('frames', () => {
	test('a frame header declaring 1 GiB is refused with 1009 before its payload is buffered', async (t) => {
		const stack = await startRelay();
		try {
			const pid = pidListeningOn(stack.ports[0]);
			const ws = await upgraded(stack.ports[0]);
			const rss0 = rssKb(pid);
			// The header, then up to 64 MiB of the payload for as long as
			// the relay takes it: a relay that buffers would grow by that.
			await ws.write(frame(0x1, Buffer.alloc(0), { declared: 1024 * 1024 * 1024 }));
			const chunk = Buffer.alloc(64 * 1024, 0x61);
			let sent = 0;
			while (sent < 64 * 1024 * 1024 && ws.closeCode === null && await ws.write(chunk)) {
				sent += chunk.length;
				await new Promise(setImmediate); // let the socket be read
			}
			const ended = await within(ws.ended, 10000);
			const rss1 = rssKb(pid);
			t.diagnostic(`relay RSS ${rss0} kB before, ${rss1} kB after; ${sent >> 10} KiB of payload sent`);
			assert.ok(rss1 - rss0 < 16 * 1024, `RSS grew by ${rss1 - rss0} kB`);
			assert.equal(ws.closeCode, 1009);
			assert.equal(ws.closeReason, 'message too large');
			assert.ok(ended, 'the connection ends');
			assert.equal((await get(stack.url, '/healthz')).status, 200);
		} finally {
			await stack.stop();
		}
	});

	test('a frame whose payload stops arriving is closed within the message deadline', async () => {
		const stack = await startRelay();
		try {
			const ws = await upgraded(stack.ports[0]);
			const t0 = Date.now();
			const payload = Buffer.alloc(5000, 0x20);
			const whole = frame(0x1, payload);
			await ws.write(whole.subarray(0, whole.length - 4900));
			assert.ok(await within(ws.ended, MESSAGE_TIMEOUT_MS + 5000), 'still open');
			const took = Date.now() - t0;
			assert.equal(ws.closeCode, 1008);
			assert.equal(ws.closeReason, 'message timeout');
			assert.ok(took >= MESSAGE_TIMEOUT_MS - 500 && took < MESSAGE_TIMEOUT_MS + 5000,
				`closed after ${took} ms`);
		} finally {
			await stack.stop();
		}
	});
});

describe('connection slots', () => {
	test('60 unauthenticated sockets that ignore the close frame are all disconnected after 30 s', async (t) => {
		// 68 threads: 60 WebSocket slots (the rest is HTTP's reserve), so the
		// 60 sockets hold every slot.
		const stack = await startRelay({ env: { COMB_NUM_THREADS: '68' } });
		const sockets = [];
		let pinger;
		try {
			const port = stack.ports[0];
			for (let i = 0; i < 60; i++)
				sockets.push({ ws: await upgraded(port), at: Date.now() });
			assertTooMany(await rawUpgrade(port));
			// They keep pinging and answer the relay's pings: alive by any
			// measure but authentication.
			pinger = setInterval(() => {
				for (const s of sockets)
					s.ws.write(frame(0x9, Buffer.from('hi')));
			}, 5000);
			await Promise.all(sockets.map((s) => Promise.race([s.ws.ended, sleep(45000)])));
			clearInterval(pinger);
			const lifetimes = sockets.map((s) => (s.ws.endedAt ?? Infinity) - s.at);
			const longest = Math.max(...lifetimes);
			t.diagnostic(`lifetimes ${Math.min(...lifetimes)} to ${longest} ms`);
			for (const [i, s] of sockets.entries()) {
				assert.ok(s.ws.endedAt, `socket ${i} still open after 45 s`);
				assert.equal(s.ws.closeCode, 1008, `socket ${i}: close frame before the shutdown`);
			}
			assert.ok(Math.min(...lifetimes) >= AUTH_TIMEOUT_MS - 1000);
			assert.ok(longest < AUTH_TIMEOUT_MS + CLOSE_GRACE_MS + 4000, `longest ${longest} ms`);
			// Every slot is free again: an authenticated client gets in.
			const c = await connectWs(stack.url, newKey().sk);
			c.ws.terminate();
		} finally {
			clearInterval(pinger);
			for (const s of sockets)
				s.ws.destroy();
			await stack.stop();
		}
	});

	test('simultaneous upgrades never exceed the connection cap', async (t) => {
		// 40 threads: 35 WebSocket slots. Each round frees 10 slots and
		// sends 30 upgrade requests at the same instant; the slots held must
		// never exceed 35.
		const stack = await startRelay({ env: { COMB_NUM_THREADS: '40', COMB_DB_POOL_SIZE: '40' } });
		const held = [];
		try {
			let most = 0;
			for (let round = 0; round < 15; round++) {
				for (const ws of held.splice(0, 10)) {
					ws.destroy();
					await ws.ended;
				}
				await sleep(200);
				let go;
				const hold = new Promise((r) => { go = r; });
				const pending = [];
				for (let i = 0; i < 30; i++)
					pending.push(rawUpgrade(stack.ports[0], { hold }));
				await sleep(300);
				go();
				for (const r of await Promise.all(pending)) {
					if (r.status === 101)
						held.push(r.ws);
					else
						assertTooMany(r);
				}
				most = Math.max(most, held.length);
				assert.ok(held.length <= 35, `round ${round}: ${held.length} connections upgraded`);
			}
			t.diagnostic(`at most ${most} connections held`);
			assert.equal(most, 35);
		} finally {
			for (const ws of held)
				ws.destroy();
			await stack.stop();
		}
	});

	test('one client address holds at most max_connections_per_ip connections', async () => {
		const stack = await startRelay({ env: { COMB_MAX_CONNECTIONS_PER_IP: '3' } });
		const held = [];
		try {
			const port = stack.ports[0];
			const nip11 = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
			assert.equal(nip11.json().limitation.max_connections_per_ip, 3);
			for (let i = 0; i < 3; i++)
				held.push(await upgraded(port, { localAddress: '127.0.0.1' }));
			assertTooMany(await rawUpgrade(port, { localAddress: '127.0.0.1' }));
			// Another address has its own share.
			held.push(await upgraded(port, { localAddress: '127.0.0.2' }));
			// A connection that ends gives its slot back.
			held[0].destroy();
			await held[0].ended;
			let again;
			await until('a slot for 127.0.0.1 again', async () => {
				const r = await rawUpgrade(port, { localAddress: '127.0.0.1' });
				if (r.status === 101)
					again = r.ws;
				else
					assertTooMany(r);
				return r.status === 101;
			}, 5000);
			held.push(again);
		} finally {
			for (const ws of held)
				ws.destroy();
			await stack.stop();
		}
	});
});
