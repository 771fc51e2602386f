// The NIP-01/NIP-42 WebSocket (PROTOCOL.md sections 1, 7 and 10): the AUTH
// handshake and every way it fails, EVENT answered as POST /events answers,
// REQ with stored events, EOSE and live delivery (from HTTP and WebSocket
// writers, access checked per recipient), CLOSE, the NIP-11 limits, close
// frames, fragmented messages, the upgrade refusal for unknown hosts and
// the idle timeout of unauthenticated connections. Driven through ws and
// nostr-tools (including its Relay class, as a real client would).

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent } from 'nostr-tools/pure';
import { Relay } from 'nostr-tools/relay';
import {
	connectWs, get, newKey, now, openSocket, post, signEvent, startRelay, toSecretBytes,
} from './lib/harness.mjs';

const AUTH_TIMEOUT_S = 30;
// How long "nothing arrives" is watched for.
const QUIET_MS = 700;

let stack;
let admin;           // the community admin's secret key
let openChannel;     // an open channel everyone reads
let privateChannel;  // a private channel with `member` as its only member
let member;          // a key pair with access to privateChannel
let idle;            // a socket left unauthenticated from the start
let veteran;         // a socket authenticated from the start
let idleOpenedAt;
const sockets = [];

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	idle = await connectWs(stack.url, null);
	idleOpenedAt = Date.now();
	veteran = await connectWs(stack.url, newKey().sk);
	member = newKey();
	openChannel = await createChannel(admin);
	privateChannel = await createChannel(admin, [['visibility', 'private']], 'secret');
	await accept(admin, { kind: 9000, tags: [['h', privateChannel], ['p', member.pk]] });
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	idle?.ws.terminate();
	veteran?.ws.terminate();
	await stack?.stop();
});

// --- helpers ---------------------------------------------------------------

// NIP-98 tokens and events alike within a second would collide; a nonce tag
// and random content keep them apart.
function authOpts() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

// An event as plain JSON (nostr-tools marks signed events with a symbol).
function plain(ev) {
	return JSON.parse(JSON.stringify(ev));
}

function sign(sk, template) {
	return signEvent(sk, { content: crypto.randomBytes(6).toString('hex'), ...template });
}

async function postEvent(sk, ev) {
	const r = await post(stack.url, '/events', ev, sk, authOpts());
	return { status: r.status, json: r.json() };
}

async function accept(sk, template) {
	const ev = sign(sk, template);
	const r = await postEvent(sk, ev);
	assert.deepEqual(r.json, { id: ev.id, accepted: true, message: '' }, JSON.stringify(r));
	return ev;
}

async function createChannel(sk, extraTags = [], name = 'general') {
	const id = crypto.randomUUID();
	await accept(sk, { kind: 9007, tags: [['h', id], ['name', name], ...extraTags] });
	return id;
}

function chatTemplate(channel, content) {
	return { kind: 9, tags: [['h', channel]], content: content ?? crypto.randomBytes(6).toString('hex') };
}

// An authenticated client, closed after the file.
async function client(sk) {
	const c = await connectWs(stack.url, sk ?? newKey().sk);
	sockets.push(c);
	return c;
}

// An unauthenticated client that has read its AUTH challenge.
async function anonymous() {
	const c = await connectWs(stack.url, null);
	sockets.push(c);
	return c;
}

function authEvent(sk, challenge, opts = {}) {
	const t = makeAuthEvent(opts.relay ?? `ws://localhost:${stack.port}`, challenge);
	if (opts.createdAt !== undefined)
		t.created_at = opts.createdAt;
	return finalizeEvent(t, toSecretBytes(sk));
}

async function sendAuth(c, ev) {
	c.send(['AUTH', ev]);
	return c.next((m) => m[0] === 'OK' && m[1] === ev.id);
}

async function sendEvent(c, ev) {
	c.send(['EVENT', ev]);
	return c.next((m) => m[0] === 'OK' && m[1] === ev.id);
}

// Opens subscription id and collects its stored events up to EOSE.
async function subscribe(c, id, ...filters) {
	c.send(['REQ', id, ...filters]);
	const events = [];
	for (;;) {
		const m = await c.next((x) => (x[0] === 'EVENT' || x[0] === 'EOSE' || x[0] === 'CLOSED') &&
			x[1] === id);
		if (m[0] === 'EOSE')
			return events;
		if (m[0] === 'CLOSED')
			throw new Error(`subscription ${id} closed: ${m[2]}`);
		events.push(m[2]);
	}
}

async function closedWith(c, id) {
	const m = await c.next((x) => x[1] === id && ['CLOSED', 'EOSE', 'EVENT'].includes(x[0]));
	assert.equal(m[0], 'CLOSED', `expected CLOSED for ${id}, got ${JSON.stringify(m)}`);
	return m[2];
}

function liveEvent(c, id, eventId, ms = 5000) {
	return c.next((m) => m[0] === 'EVENT' && m[1] === id && m[2].id === eventId, ms);
}

function noEvent(c, id, ms = QUIET_MS) {
	return c.none((m) => m[0] === 'EVENT' && m[1] === id, ms);
}

// --- NIP-42 ----------------------------------------------------------------

describe('NIP-42 authentication', () => {
	test('the relay opens with a fresh AUTH challenge and accepts a valid answer', async () => {
		const a = await anonymous();
		const b = await anonymous();
		assert.match(a.challenge, /^[0-9a-f]{64}$/);
		assert.notEqual(a.challenge, b.challenge, 'each connection gets its own challenge');
		const k = newKey();
		const ok = await sendAuth(a, authEvent(k.sk, a.challenge));
		assert.deepEqual(ok.slice(2), [true, '']);
		// Authenticated now: a REQ is served.
		assert.deepEqual(await subscribe(a, 's', { kinds: [9], '#h': [crypto.randomUUID()] }), []);
	});

	test('REQ and EVENT before AUTH are answered auth-required', async () => {
		const c = await anonymous();
		c.send(['REQ', 'early', { kinds: [9] }]);
		assert.match(await closedWith(c, 'early'), /^auth-required: /);
		const ev = sign(admin, chatTemplate(openChannel));
		const ok = await sendEvent(c, ev);
		assert.equal(ok[2], false);
		assert.match(ok[3], /^auth-required: /);
		const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${ev.id}'`);
		assert.equal(rows[0][0], '0', 'nothing is stored without authentication');
	});

	const failures = [
		['a wrong challenge', (sk, c) => authEvent(sk, 'f'.repeat(64)), /^auth-required: challenge mismatch$/],
		['another relay', (sk, c) => authEvent(sk, c.challenge, { relay: 'ws://elsewhere.example' }),
			/^auth-required: relay mismatch$/],
		['another port of the host', (sk, c) => authEvent(sk, c.challenge,
			{ relay: `ws://localhost:${stack.port + 1}` }), /^auth-required: relay mismatch$/],
		['a bad signature', (sk, c) => {
			const ev = authEvent(sk, c.challenge);
			const last = ev.sig.at(-1) === '0' ? '1' : '0';
			return { ...ev, sig: ev.sig.slice(0, -1) + last };
		}, /^auth-required: bad signature$/],
		['a stale event', (sk, c) => authEvent(sk, c.challenge, { createdAt: now() - 700 }),
			/^auth-required: stale authentication$/],
		['the wrong kind', (sk, c) => finalizeEvent({
			kind: 1, created_at: now(), content: '',
			tags: [['relay', `ws://localhost:${stack.port}`], ['challenge', c.challenge]],
		}, toSecretBytes(sk)), /^auth-required: wrong kind$/],
		['no challenge tag', (sk, c) => finalizeEvent({
			kind: 22242, created_at: now(), content: '',
			tags: [['relay', `ws://localhost:${stack.port}`]],
		}, toSecretBytes(sk)), /^auth-required: missing challenge tag$/],
	];
	for (const [what, make, expected] of failures) {
		test(`AUTH with ${what} is refused auth-required and leaves the socket unauthenticated`, async () => {
			const c = await anonymous();
			const ok = await sendAuth(c, make(newKey().sk, c));
			assert.equal(ok[2], false);
			assert.match(ok[3], expected);
			c.send(['REQ', 'after', { kinds: [9] }]);
			assert.match(await closedWith(c, 'after'), /^auth-required: /);
		});
	}

	test('a malformed AUTH event is refused auth-required', async () => {
		const c = await anonymous();
		const ev = authEvent(newKey().sk, c.challenge);
		const ok = await sendAuth(c, { ...ev, extra: 1 });
		assert.equal(ok[2], false);
		assert.match(ok[3], /^auth-required: /);
	});

	test('the relay tag may carry a path and a trailing slash', async () => {
		const c = await anonymous();
		const ok = await sendAuth(c, authEvent(newKey().sk, c.challenge,
			{ relay: `ws://LOCALHOST:${stack.port}/some/path/` }));
		assert.deepEqual(ok.slice(2), [true, '']);
	});

	test('a second AUTH for another key on the same connection is refused', async () => {
		const k = newKey();
		const c = await client(k.sk);
		const again = await sendAuth(c, authEvent(k.sk, c.challenge));
		assert.deepEqual(again.slice(2), [true, ''], 'the same key again is fine');
		const other = await sendAuth(c, authEvent(newKey().sk, c.challenge));
		assert.equal(other[2], false);
		assert.match(other[3], /^restricted: /);
	});

	test('nostr-tools Relay authenticates, publishes and subscribes', async () => {
		const k = newKey();
		const relay = await Relay.connect(`ws://localhost:${stack.port}`);
		try {
			// The challenge arrives right after the handshake.
			for (let i = 0; i < 50 && !relay.challenge; i++)
				await new Promise((r) => setTimeout(r, 20));
			await relay.auth(async (t) => finalizeEvent(t, k.sk));
			const first = sign(k.sk, chatTemplate(openChannel));
			await relay.publish(first);
			const received = [];
			let eose;
			const eosed = new Promise((r) => { eose = r; });
			const second = sign(k.sk, chatTemplate(openChannel));
			const gotSecond = new Promise((resolve) => {
				relay.subscribe([{ kinds: [9], authors: [k.pk] }], {
					onevent: (e) => {
						received.push(e.id);
						if (e.id === second.id)
							resolve();
					},
					oneose: eose,
				});
			});
			await eosed;
			assert.deepEqual(received, [first.id]);
			await relay.publish(second);
			await gotSecond;
			assert.deepEqual(received, [first.id, second.id]);
		} finally {
			relay.close();
		}
	});
});

// --- EVENT -----------------------------------------------------------------

describe('EVENT', () => {
	test('answers exactly as POST /events does, case by case', async () => {
		const writer = newKey();
		const ws = await client(writer.sk);
		const other = newKey();
		const cases = [
			['a chat message', () => sign(writer.sk, chatTemplate(openChannel))],
			['an unsupported kind', () => sign(writer.sk, { kind: 1 })],
			['a relay-signed kind', () => sign(writer.sk, { kind: 45011, tags: [['h', openChannel]] })],
			['a chat message without h', () => sign(writer.sk, { kind: 9 })],
			['a chat message in a private channel', () => sign(writer.sk, chatTemplate(privateChannel))],
			['a stale chat message', () => sign(writer.sk, { ...chatTemplate(openChannel), created_at: now() - 2000 })],
			['a bad signature', () => {
				const ev = sign(writer.sk, chatTemplate(openChannel));
				return { ...ev, sig: ev.sig.replace(/^./, ev.sig[0] === 'a' ? 'b' : 'a') };
			}],
			['a bad id', () => {
				const ev = sign(writer.sk, chatTemplate(openChannel));
				return { ...ev, content: ev.content + 'x' };
			}],
		];
		for (const [what, make] of cases) {
			const viaHttp = make();
			const viaWs = make();
			const h = await postEvent(writer.sk, viaHttp);
			const w = await sendEvent(ws, viaWs);
			assert.deepEqual([w[2], w[3]], [h.json.accepted, h.json.message], what);
		}
		// Another author than the authenticated key.
		const h = await postEvent(writer.sk, sign(other.sk, chatTemplate(openChannel)));
		const w = await sendEvent(ws, sign(other.sk, chatTemplate(openChannel)));
		assert.equal(h.json.accepted, false);
		assert.deepEqual([w[2], w[3]], [h.json.accepted, h.json.message]);
	});

	test('an event accepted over HTTP is accepted again over WebSocket and stored once', async () => {
		const k = newKey();
		const ev = sign(k.sk, chatTemplate(openChannel));
		assert.equal((await postEvent(k.sk, ev)).json.accepted, true);
		const c = await client(k.sk);
		assert.deepEqual((await sendEvent(c, ev)).slice(2), [true, '']);
		const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${ev.id}'`);
		assert.equal(rows[0][0], '1');
	});

	test('a malformed event is answered with OK false invalid when it has an id, else a NOTICE', async () => {
		const c = await client();
		const ev = sign(admin, chatTemplate(openChannel));
		c.send(['EVENT', { ...ev, kind: 'nine' }]);
		const ok = await c.next((m) => m[0] === 'OK' && m[1] === ev.id);
		assert.equal(ok[2], false);
		assert.match(ok[3], /^invalid: /);
		c.send(['EVENT', { content: 'no id' }]);
		const notice = await c.next((m) => m[0] === 'NOTICE');
		assert.match(notice[1], /^invalid: /);
	});

	test('messages that are not NIP-01 get a NOTICE and the connection stays usable', async () => {
		const c = await client();
		const deep = '['.repeat(5000) + ']'.repeat(5000);
		for (const bad of ['not json', '{"a":1}', '["NOPE"]', '[]', '["REQ"]', '["CLOSE", 5]', deep]) {
			c.send(bad);
			const n = await c.next((m) => m[0] === 'NOTICE');
			assert.match(n[1], /^invalid: /, bad.slice(0, 20));
		}
		assert.deepEqual(await subscribe(c, 'still', { kinds: [9], '#h': [crypto.randomUUID()] }), []);
	});
});

// --- REQ -------------------------------------------------------------------

describe('REQ', () => {
	test('sends stored matches newest first, then EOSE', async () => {
		const channel = await createChannel(admin);
		const a = await accept(admin, { ...chatTemplate(channel), created_at: now() - 3 });
		const b = await accept(admin, { ...chatTemplate(channel), created_at: now() - 2 });
		const c = await accept(admin, { ...chatTemplate(channel), created_at: now() - 1 });
		const reader = await client();
		const got = await subscribe(reader, 'stored', { kinds: [9], '#h': [channel] });
		assert.deepEqual(got.map((e) => e.id), [c.id, b.id, a.id]);
		assert.deepEqual(got[0], plain(c), 'events are served exactly as signed');
		const limited = await subscribe(reader, 'limited', { kinds: [9], '#h': [channel], limit: 2 });
		assert.deepEqual(limited.map((e) => e.id), [c.id, b.id]);
		// Several filters: their union, each event once.
		const union = await subscribe(reader, 'union',
			{ ids: [a.id, b.id] }, { ids: [b.id, c.id] });
		assert.deepEqual(union.map((e) => e.id).sort(), [a.id, b.id, c.id].sort());
	});

	test('delivers live matches written over HTTP and over WebSocket by other clients', async () => {
		const channel = await createChannel(admin);
		const reader = await client();
		assert.deepEqual(await subscribe(reader, 'live', { kinds: [9], '#h': [channel] }), []);
		const viaHttp = await accept(admin, chatTemplate(channel));
		const got = await liveEvent(reader, 'live', viaHttp.id);
		assert.deepEqual(got[2], plain(viaHttp));
		const writer = newKey();
		const ws = await client(writer.sk);
		const viaWs = sign(writer.sk, chatTemplate(channel));
		assert.deepEqual((await sendEvent(ws, viaWs)).slice(2), [true, '']);
		assert.deepEqual((await liveEvent(reader, 'live', viaWs.id))[2], plain(viaWs));
		// Events that do not match the filter do not arrive.
		await accept(admin, chatTemplate(openChannel));
		await noEvent(reader, 'live');
	});

	test('a broad REQ gets live events of open channels and of its own author', async () => {
		const k = newKey();
		const reader = await client(k.sk);
		await subscribe(reader, 'mine', { authors: [k.pk] });
		const ev = await accept(k.sk, chatTemplate(openChannel));
		await liveEvent(reader, 'mine', ev.id);
	});

	test('ephemeral events reach live readers of their channel and are never stored', async () => {
		const reader = await client();
		await subscribe(reader, 'eph', { kinds: [20001], '#h': [openChannel] });
		const ev = await accept(admin, { kind: 20001, tags: [['h', openChannel]] });
		assert.deepEqual((await liveEvent(reader, 'eph', ev.id))[2], plain(ev));
		const later = await client();
		assert.deepEqual(await subscribe(later, 'eph', { kinds: [20001], '#h': [openChannel] }), []);
	});

	test('a reader without access to a private channel gets none of its live events', async () => {
		const outsider = await client();
		const insider = await client(member.sk);
		for (const c of [outsider, insider]) {
			await subscribe(c, 'broad', { kinds: [9] });
			await subscribe(c, 'named', { kinds: [9], '#h': [privateChannel] });
		}
		const secret = await accept(admin, chatTemplate(privateChannel, 'secret'));
		await liveEvent(insider, 'broad', secret.id);
		await liveEvent(insider, 'named', secret.id);
		await noEvent(outsider, 'broad');
		await noEvent(outsider, 'named');
		// Access is checked at delivery: once removed, the member gets nothing.
		await accept(admin, { kind: 9001, tags: [['h', privateChannel], ['p', member.pk]] });
		const after = await accept(admin, chatTemplate(privateChannel));
		await noEvent(insider, 'broad');
		await accept(admin, { kind: 9000, tags: [['h', privateChannel], ['p', member.pk]] });
		const back = await accept(admin, chatTemplate(privateChannel));
		await liveEvent(insider, 'named', back.id);
		assert.notEqual(after.id, back.id);
		// The outsider's stored read is empty too.
		assert.deepEqual(await subscribe(outsider, 'stored', { '#h': [privateChannel] }), []);
		// Control: the outsider does get open channels live.
		const open = await accept(admin, chatTemplate(openChannel));
		await liveEvent(outsider, 'broad', open.id);
	});

	test('an unlisted channel reaches a live REQ that names it, not a broad one', async () => {
		const unlisted = await createChannel(admin, [['visibility', 'unlisted']]);
		const outsider = await client();
		await subscribe(outsider, 'broad', { kinds: [9] });
		await subscribe(outsider, 'named', { kinds: [9], '#h': [unlisted] });
		// both filters in one REQ: the one naming the channel lets it through
		await subscribe(outsider, 'both', { kinds: [9] }, { kinds: [9], '#h': [unlisted] });
		const ev = await accept(admin, chatTemplate(unlisted, 'quiet corner'));
		await liveEvent(outsider, 'named', ev.id);
		await liveEvent(outsider, 'both', ev.id);
		await noEvent(outsider, 'broad');
	});

	test('CLOSE stops delivery at once and other subscriptions go on', async () => {
		const channel = await createChannel(admin);
		const reader = await client();
		await subscribe(reader, 'a', { kinds: [9], '#h': [channel] });
		await subscribe(reader, 'b', { kinds: [9], '#h': [channel] });
		reader.send(['CLOSE', 'a']);
		// The CLOSE is handled before the next message on the connection.
		await subscribe(reader, 'sync-point', { ids: ['0'.repeat(64)] });
		const ev = await accept(admin, chatTemplate(channel));
		await liveEvent(reader, 'b', ev.id);
		await noEvent(reader, 'a');
		// Reusing an id replaces the subscription.
		await subscribe(reader, 'b', { kinds: [9], '#h': [openChannel] });
		const other = await accept(admin, chatTemplate(channel));
		await noEvent(reader, 'b');
		assert.ok(other.id);
	});
});

// --- slow consumers --------------------------------------------------------

describe('slow consumers', () => {
	test('a reader that stops reading is closed resync: slow consumer; others keep up', async () => {
		const channel = await createChannel(admin);
		const slow = await client();
		const fast = await client();
		await subscribe(slow, 'feed', { kinds: [9], '#h': [channel] });
		await subscribe(fast, 'feed', { kinds: [9], '#h': [channel] });
		// The slow reader's socket buffers and its outbox (1 MiB) fill up
		// well before 20 MB of events have been written.
		slow.ws._socket.pause();
		const filler = 'x'.repeat(50000);
		let last;
		// ten writes at a time: on a loaded machine 400 writes one by one
		// outlast the relay's ping timeout of the paused reader
		for (let i = 0; i < 400; i += 10) {
			const batch = await Promise.all(Array.from({ length: 10 },
				(_, j) => accept(admin, chatTemplate(channel, `${i + j} ${filler}`))));
			for (const ev of batch)
				await liveEvent(fast, 'feed', ev.id, 10000);
			last = batch[batch.length - 1];
		}
		slow.ws._socket.resume();
		const reason = await closedAfterEvents(slow, 'feed', 30000);
		assert.equal(reason, 'resync: slow consumer');
		// The connection itself stays usable.
		assert.deepEqual(await subscribe(slow, 'again', { ids: [last.id] }),
			[plain(last)]);
	});
});

// The CLOSED of subscription id, skipping its events (a slow reader has
// many queued before it).
async function closedAfterEvents(c, id, ms) {
	for (;;) {
		const m = await c.next((x) => x[1] === id && ['CLOSED', 'EVENT'].includes(x[0]), ms);
		if (m[0] === 'CLOSED')
			return m[2];
	}
}

// --- limits ----------------------------------------------------------------

describe('limits', () => {
	test('max_subscriptions is enforced with CLOSED and freed by CLOSE', async () => {
		const info = (await get(stack.url, '/',
			{ headers: { accept: 'application/nostr+json' } })).json();
		const max = info.limitation.max_subscriptions;
		const c = await client();
		for (let i = 0; i < max; i++)
			c.send(['REQ', `s${i}`, { ids: ['0'.repeat(64)] }]);
		for (let i = 0; i < max; i++)
			await c.next((m) => m[0] === 'EOSE' && m[1] === `s${i}`);
		c.send(['REQ', 'one-too-many', { ids: ['0'.repeat(64)] }]);
		assert.match(await closedWith(c, 'one-too-many'), /^invalid: too many subscriptions/);
		// Replacing an open one is fine; closing one makes room.
		assert.deepEqual(await subscribe(c, 's0', { ids: ['1'.repeat(64)] }), []);
		c.send(['CLOSE', 's1']);
		assert.deepEqual(await subscribe(c, 'one-more', { ids: ['0'.repeat(64)] }), []);
	});

	test('max_filters, limit and bad filters are refused with CLOSED invalid', async () => {
		const info = (await get(stack.url, '/',
			{ headers: { accept: 'application/nostr+json' } })).json();
		const c = await client();
		const filters = Array.from({ length: info.limitation.max_filters + 1 }, () => ({ kinds: [9] }));
		c.send(['REQ', 'many', ...filters]);
		assert.match(await closedWith(c, 'many'), /^invalid: too many filters/);
		c.send(['REQ', 'lim', { kinds: [9], limit: info.limitation.max_limit + 1 }]);
		assert.match(await closedWith(c, 'lim'), /^invalid: limit/);
		c.send(['REQ', 'none']);
		assert.match(await closedWith(c, 'none'), /^invalid: /);
		c.send(['REQ', 'unknown', { kinds: [9], color: 'blue' }]);
		assert.match(await closedWith(c, 'unknown'), /^invalid: /);
		c.send(['REQ', 'multi', { '#type': ['x'] }]);
		assert.match(await closedWith(c, 'multi'), /^invalid: /);
		c.send(['REQ', 'x'.repeat(65), { kinds: [9] }]);
		assert.match((await c.next((m) => m[0] === 'NOTICE'))[1], /^invalid: /);
		// The full number of filters is fine.
		assert.deepEqual(await subscribe(c, 'max', ...filters.slice(1).map(() => ({ ids: ['0'.repeat(64)] }))), []);
	});

	test('a sync REQ reaches the sync (sync.test.mjs); other artifact REQs are refused', async () => {
		const c = await client();
		c.send(['REQ', 'sync', { artifact: 'current', '#h': [openChannel] }]);
		assert.deepEqual(await c.next((m) => m[1] === 'sync'), ['EOSE', 'sync']);
		c.send(['REQ', 'hist', { artifact: 'history', '#d': [crypto.randomUUID()] }]);
		assert.match(await closedWith(c, 'hist'), /^invalid: /);
	});

	test('a message over max_message_length gets close code 1009', async () => {
		const c = await client();
		c.send(JSON.stringify(['REQ', 'big', { kinds: [9], '#h': ['x'.repeat(70000)] }]));
		const closed = await c.closed;
		assert.equal(closed.code, 1009);
		assert.equal(String(closed.reason), 'message too large');
	});

	test('a fragmented message over the limit is refused the same way', async () => {
		const c = await client();
		const part = 'x'.repeat(40000);
		c.ws.send(`["REQ","big",{"#h":["${part}`, { fin: false });
		c.ws.send(part, { fin: false });
		c.ws.send('"]}]', { fin: true });
		assert.equal((await c.closed).code, 1009);
	});
});

// --- framing ---------------------------------------------------------------

describe('framing', () => {
	test('a fragmented message is reassembled', async () => {
		const c = await client();
		const ev = await accept(admin, chatTemplate(openChannel));
		const text = JSON.stringify(['REQ', 'frag', { ids: [ev.id] }]);
		const cut = [0, 5, 17, 30, text.length];
		for (let i = 0; i + 1 < cut.length; i++)
			c.ws.send(text.slice(cut[i], cut[i + 1]), { fin: i + 2 === cut.length });
		const got = await c.next((m) => m[0] === 'EVENT' && m[1] === 'frag');
		assert.deepEqual(got[2], plain(ev));
		await c.next((m) => m[0] === 'EOSE' && m[1] === 'frag');
		// An AUTH split in two frames works as well.
		const a = await anonymous();
		const auth = JSON.stringify(['AUTH', authEvent(newKey().sk, a.challenge)]);
		a.ws.send(auth.slice(0, 40), { fin: false });
		a.ws.send(auth.slice(40), { fin: true });
		assert.deepEqual((await a.next((m) => m[0] === 'OK')).slice(2), [true, '']);
	});

	test('a client close frame is echoed with its code', async () => {
		const c = await client();
		const t0 = Date.now();
		const closed = await c.close(4001, 'done');
		assert.equal(closed.code, 4001);
		assert.ok(Date.now() - t0 < 3000, 'the echo comes at once, not after a timeout');
	});

	test('pings are answered', async () => {
		const c = await client();
		const pong = new Promise((resolve) => c.ws.once('pong', (d) => resolve(d.toString())));
		c.ws.ping('hello');
		assert.equal(await pong, 'hello');
	});

	test('binary messages get a NOTICE', async () => {
		const c = await client();
		c.ws.send(Buffer.from('["REQ","b",{}]'), { binary: true });
		assert.match((await c.next((m) => m[0] === 'NOTICE'))[1], /^invalid: binary/);
	});
});

// --- admission -------------------------------------------------------------

describe('admission', () => {
	test('an unknown host is refused with 404 unknown community and no upgrade', async () => {
		await assert.rejects(openSocket(stack.url, { host: 'unknown.example' }), (err) => {
			assert.equal(err.status, 404);
			assert.deepEqual(JSON.parse(err.body), { error: 'unknown community' });
			return true;
		});
	});

	test('another path is refused with 404', async () => {
		await assert.rejects(openSocket(stack.url, { path: '/elsewhere' }), (err) => {
			assert.equal(err.status, 404);
			return true;
		});
	});

	test('the host is matched without its port and case-insensitively', async () => {
		const c = await connectWs(stack.url, newKey().sk, { host: `LOCALHOST:${stack.port + 7}` });
		sockets.push(c);
		assert.deepEqual(await subscribe(c, 's', { ids: ['0'.repeat(64)] }), []);
	});
});

// --- idle timeout (last: it waits for the socket opened before the tests) ---

describe('idle timeout', () => {
	test(`an unauthenticated socket is closed after ${AUTH_TIMEOUT_S} s`, async () => {
		const wait = AUTH_TIMEOUT_S * 1000 + 3000 - (Date.now() - idleOpenedAt);
		const notice = await idle.next((m) => m[0] === 'NOTICE', Math.max(wait, 100));
		assert.match(notice[1], /^auth-required: /);
		const closed = await idle.closed;
		assert.equal(closed.code, 1008);
		assert.ok(Date.now() - idleOpenedAt >= AUTH_TIMEOUT_S * 1000 - 1000);
		// An authenticated socket as old stays open.
		assert.deepEqual(await subscribe(veteran, 's', { ids: ['0'.repeat(64)] }), []);
	});
});
