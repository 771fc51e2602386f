// A stand-in for comb-capture's publishing side, for tests that need to
// produce exactly the feed they want: heartbeats, marks, signals with any
// epoch and sequence number, gaps. It speaks ZMTP 3.0 (the NULL mechanism,
// as a PUB socket) over TCP, which is what a relay's ZeroMQ SUB socket
// connects to, and encodes signals in msgpack as comb/signal.h describes.
// No ZeroMQ library is needed on the Node side.
//
//   const fake = new FakeCapture();
//   const endpoint = await fake.listen();        // tcp://127.0.0.1:PORT
//   fake.onSubscribe = (prefix) => {...};        // a Buffer, e.g. "7:"
//   fake.marksOnSubscribe(() => epoch);          // or answer them as capture does
//   fake.heartbeat(epoch); fake.mark(epoch, community, seq);
//   fake.signal({epoch, seq, community, type: 'head', channel, d, id, xid});
//   fake.beatEvery(epoch, ms); fake.stopBeats(); await fake.close();

import net from 'node:net';

const TYPES = { heartbeat: 0, head: 1, move: 2, redaction: 3, member: 4, channel: 5, event: 6, ephemeral: 7 };

// --- msgpack (only what signals use) -----------------------------------------

function mpUint(v) {
	const n = BigInt(v);
	if (n < 0n)
		throw new RangeError('unsigned values only');
	if (n < 128n)
		return Buffer.from([Number(n)]);
	if (n < 256n)
		return Buffer.from([0xcc, Number(n)]);
	if (n < 65536n) {
		const b = Buffer.alloc(3);
		b[0] = 0xcd;
		b.writeUInt16BE(Number(n), 1);
		return b;
	}
	if (n < 4294967296n) {
		const b = Buffer.alloc(5);
		b[0] = 0xce;
		b.writeUInt32BE(Number(n), 1);
		return b;
	}
	const b = Buffer.alloc(9);
	b[0] = 0xcf;
	b.writeBigUInt64BE(n, 1);
	return b;
}

function mpStr(s) {
	const body = Buffer.from(s, 'utf8');
	if (body.length < 32)
		return Buffer.concat([Buffer.from([0xa0 | body.length]), body]);
	if (body.length < 256)
		return Buffer.concat([Buffer.from([0xd9, body.length]), body]);
	const head = Buffer.alloc(3);
	head[0] = 0xda;
	head.writeUInt16BE(body.length, 1);
	return Buffer.concat([head, body]);
}

function mpBin(bytes) {
	const body = Buffer.from(bytes);
	let head;
	if (body.length < 256) {
		head = Buffer.from([0xc4, body.length]);
	} else if (body.length < 65536) {
		head = Buffer.alloc(3);
		head[0] = 0xc5;
		head.writeUInt16BE(body.length, 1);
	} else {
		head = Buffer.alloc(5);
		head[0] = 0xc6;
		head.writeUInt32BE(body.length, 1);
	}
	return Buffer.concat([head, body]);
}

/** The community a subscription prefix ("<community>:") names, or null
 * for any other prefix ("hb", a channel's topic). */
export function communityOf(prefix) {
	const m = /^([0-9]+):$/.exec(prefix.toString());
	return m ? Number(m[1]) : null;
}

/** The msgpack map of a signal (fields as in comb/signal.h). */
export function encodeSignal(s) {
	const parts = [];
	const put = (k, v) => parts.push(mpStr(k), v);
	put('e', mpUint(s.epoch));
	put('s', mpUint(s.seq ?? 0));
	put('c', mpUint(s.community ?? 0));
	put('t', mpUint(typeof s.type === 'string' ? TYPES[s.type] : (s.type ?? 0)));
	if (s.xid !== undefined)
		put('x', mpUint(s.xid));
	if (s.channel)
		put('h', mpStr(s.channel));
	if (s.d)
		put('d', mpStr(s.d));
	if (s.pubkey)
		put('p', mpStr(s.pubkey));
	if (s.id)
		put('i', mpStr(s.id));
	if (s.kind)
		put('k', mpUint(s.kind));
	if (s.payload)
		put('b', mpBin(Buffer.from(s.payload)));
	const n = parts.length / 2;
	return Buffer.concat([Buffer.from([0x80 | n]), ...parts]);
}

/** The topic of a signal, with its NUL, as comb_signal_topic writes it. */
export function topicOf(s) {
	if (!s.community)
		return Buffer.from('hb\0');
	return Buffer.from(`${s.community}:${s.channel || '*'}\0`);
}

// --- ZMTP 3.0 ----------------------------------------------------------------

function greeting() {
	const g = Buffer.alloc(64);
	g[0] = 0xff;
	g[8] = 0x01;         // padding: the length field of ZMTP 1.0 peers
	g[9] = 0x7f;
	g[10] = 3;           // version 3.0
	g[11] = 0;
	g.write('NULL', 12, 'ascii');
	g[32] = 1;           // as-server
	return g;
}

function frame(body, { more = false, command = false } = {}) {
	const long = body.length > 255;
	const flags = (more ? 1 : 0) | (long ? 2 : 0) | (command ? 4 : 0);
	let head;
	if (long) {
		head = Buffer.alloc(9);
		head[0] = flags;
		head.writeBigUInt64BE(BigInt(body.length), 1);
	} else {
		head = Buffer.from([flags, body.length]);
	}
	return Buffer.concat([head, body]);
}

function readyCommand() {
	const name = Buffer.from('READY');
	const prop = Buffer.from('Socket-Type');
	const value = Buffer.from('PUB');
	const len = Buffer.alloc(4);
	len.writeUInt32BE(value.length);
	return frame(Buffer.concat([Buffer.from([name.length]), name,
		Buffer.from([prop.length]), prop, len, value]), { command: true });
}

class Peer {
	constructor(fake, sock) {
		this.fake = fake;
		this.sock = sock;
		this.buf = Buffer.alloc(0);
		this.greeted = false;
		this.ready = false;
		this.subscriptions = [];
		sock.setNoDelay(true);
		sock.on('data', (d) => this.onData(d));
		sock.on('error', () => {});
		sock.on('close', () => fake.peers.delete(this));
		sock.write(greeting());
	}

	onData(d) {
		this.buf = Buffer.concat([this.buf, d]);
		if (!this.greeted) {
			if (this.buf.length < 64)
				return;
			this.buf = this.buf.subarray(64);
			this.greeted = true;
			this.sock.write(readyCommand());
		}
		for (;;) {
			if (this.buf.length < 2)
				return;
			const flags = this.buf[0];
			let size;
			let off;
			if (flags & 2) {
				if (this.buf.length < 9)
					return;
				size = Number(this.buf.readBigUInt64BE(1));
				off = 9;
			} else {
				size = this.buf[1];
				off = 2;
			}
			if (this.buf.length < off + size)
				return;
			const body = this.buf.subarray(off, off + size);
			this.buf = this.buf.subarray(off + size);
			if (flags & 4)
				this.onCommand(body);
			else
				this.onMessage(body);
		}
	}

	onCommand(body) {
		const name = body.subarray(1, 1 + body[0]).toString('ascii');
		if (name === 'READY') {
			this.ready = true;
			this.fake.peers.add(this);
		} else if (name === 'SUBSCRIBE') {
			this.subscribed(Buffer.from(body.subarray(1 + body[0])));
		}
	}

	onMessage(body) {
		// ZMTP 3.0: a subscription is a message starting with 1.
		if (body.length >= 1 && body[0] === 1)
			this.subscribed(Buffer.from(body.subarray(1)));
	}

	subscribed(prefix) {
		this.subscriptions.push(prefix);
		this.fake.subscriptions.push(prefix);
		this.fake.onSubscribe?.(prefix, this);
	}

	wants(topic) {
		return this.subscriptions.some((p) => topic.subarray(0, p.length).equals(p));
	}

	send(topic, body) {
		if (this.ready && this.wants(topic))
			this.sock.write(Buffer.concat([frame(topic, { more: true }), frame(body)]));
	}
}

export class FakeCapture {
	constructor() {
		this.peers = new Set();
		this.sockets = new Set();
		this.subscriptions = [];
		this.server = net.createServer((sock) => {
			this.sockets.add(sock);
			sock.on('close', () => this.sockets.delete(sock));
			new Peer(this, sock);
		});
		this.beatTimer = null;
	}

	/** Listens on 127.0.0.1 (a free port); resolves to the endpoint. */
	listen() {
		return new Promise((resolve, reject) => {
			this.server.once('error', reject);
			this.server.listen(0, '127.0.0.1', () => {
				this.endpoint = `tcp://127.0.0.1:${this.server.address().port}`;
				resolve(this.endpoint);
			});
		});
	}

	/** Answers each subscription to a community ("<community>:") as
	 * capture does: with a mark of seq 0 in the epoch epochOf() gives. */
	marksOnSubscribe(epochOf) {
		this.onSubscribe = (prefix) => {
			const c = communityOf(prefix);
			if (c !== null)
				this.mark(epochOf(), c, 0);
		};
	}

	/** Sends a signal (see encodeSignal) to every peer whose subscription matches. */
	signal(s) {
		const topic = topicOf(s);
		const body = encodeSignal(s);
		for (const p of this.peers)
			p.send(topic, body);
	}

	heartbeat(epoch) {
		this.signal({ epoch, type: 'heartbeat' });
	}

	mark(epoch, community, seq) {
		this.signal({ epoch, community, seq, type: 'heartbeat' });
	}

	/** Sends a heartbeat of epoch now and every ms. */
	beatEvery(epoch, ms) {
		this.stopBeats();
		this.heartbeat(epoch);
		this.beatTimer = setInterval(() => this.heartbeat(this.beatEpoch), ms);
		this.beatEpoch = epoch;
	}

	/** Changes the epoch of the running heartbeats. */
	set epochOfBeats(epoch) {
		this.beatEpoch = epoch;
	}

	stopBeats() {
		if (this.beatTimer)
			clearInterval(this.beatTimer);
		this.beatTimer = null;
	}

	/** Resolves once a subscription starting with prefix (string) arrived. */
	async subscribed(prefix, timeoutMs = 5000) {
		const want = Buffer.from(prefix);
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			if (this.subscriptions.some((p) => p.equals(want)))
				return;
			if (Date.now() > deadline)
				throw new Error(`no subscription to ${JSON.stringify(prefix)} within ${timeoutMs} ms; ` +
					`got ${JSON.stringify(this.subscriptions.map((p) => p.toString()))}`);
			await new Promise((r) => setTimeout(r, 10));
		}
	}

	close() {
		this.stopBeats();
		for (const sock of this.sockets)
			sock.destroy();
		return new Promise((resolve) => this.server.close(() => resolve()));
	}
}
