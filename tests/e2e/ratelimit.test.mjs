// The per-pubkey write budget (PROTOCOL.md section 2, issue 7 item 5): a
// token bucket per pubkey in the Redis every relay node shares. Two nodes
// run with a small budget (COMB_WRITE_BURST writes at once, refilled at
// COMB_WRITE_RATE per minute): a budget spent on one node is spent on the
// other, over HTTP (`429 rate-limited: ...` with Retry-After) and over
// WebSocket (OK false with the same message) alike; pubkeys do not share
// budgets; the budget comes back after Retry-After; refused writes store
// nothing; NIP-11 advertises the budget; and a relay that cannot reach
// Redis refuses writes with 503 instead of letting them through.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, freePort, get, newKey, post, signEvent, startRelay } from './lib/harness.mjs';
import { createChannel } from './lib/artifacts.mjs';

const RATE = 20;   // per minute: one write comes back every 3 s
const BURST = 3;
const RETRY_AFTER = 3;
const LIMITED = `rate-limited: write budget of ${RATE} events per minute exhausted`;

let stack;
let channel;
const sockets = [];

before(async () => {
	stack = await startRelay({
		nodes: 2,
		env: { COMB_WRITE_RATE: RATE, COMB_WRITE_BURST: BURST },
	});
	channel = await createChannel(stack, stack.admins[0]);
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

function chat(sk) {
	return signEvent(sk, { kind: 9, tags: [['h', channel]], content: crypto.randomBytes(8).toString('hex') });
}

// POSTs ev to /events on node `node`; resolves to {status, retryAfter, json}.
async function httpWrite(node, sk, ev) {
	const r = await post(stack.urls[node], '/events', ev, sk);
	return { status: r.status, retryAfter: r.headers['retry-after'], json: r.json() };
}

async function accepted(node, sk) {
	const ev = chat(sk);
	const r = await httpWrite(node, sk, ev);
	assert.deepEqual({ status: r.status, json: r.json },
		{ status: 200, json: { id: ev.id, accepted: true, message: '' } });
	return ev;
}

async function limited(node, sk) {
	const ev = chat(sk);
	const r = await httpWrite(node, sk, ev);
	assert.deepEqual(r, {
		status: 429, retryAfter: String(RETRY_AFTER),
		json: { id: ev.id, accepted: false, message: LIMITED },
	});
	return ev;
}

async function wsClient(node, sk) {
	const c = await connectWs(stack.urls[node], sk);
	sockets.push(c);
	return c;
}

async function wsWrite(c, ev) {
	c.send(['EVENT', ev]);
	return c.next((m) => m[0] === 'OK' && m[1] === ev.id);
}

async function stored(ids) {
	const list = ids.map((id) => `'${id}'`).join(',');
	const rows = await stack.query(`SELECT count(*) FROM events WHERE id IN (${list})`);
	return Number(rows[0][0]);
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

describe('NIP-11', () => {
	test('every node advertises the write budget beside the other limits', async () => {
		for (const url of stack.urls) {
			const info = (await get(url, '/', { headers: { accept: 'application/nostr+json' } })).json();
			assert.equal(info.limitation.write_rate_per_minute, RATE);
			assert.equal(info.limitation.write_burst, BURST);
			for (const key of ['auth_required', 'max_message_length', 'max_subscriptions', 'max_filters',
				'max_limit', 'created_at_lower_limit', 'created_at_upper_limit'])
				assert.ok(key in info.limitation, `limitation keeps ${key}`);
		}
	});
});

describe('the budget is per pubkey and shared by every node', () => {
	test('a budget spent on one node is refused on the other with 429 and Retry-After', async () => {
		const alice = newKey();
		for (let i = 0; i < BURST; i++)
			await accepted(0, alice.sk);
		const refused = [await limited(1, alice.sk), await limited(0, alice.sk)];
		assert.equal(await stored(refused.map((e) => e.id)), 0, 'refused writes store nothing');
	});

	test('WebSocket writes draw on the same budget and get the same message', async () => {
		const dave = newKey();
		const c0 = await wsClient(0, dave.sk);
		const c1 = await wsClient(1, dave.sk);
		for (const c of [c0, c1]) {
			const ev = chat(dave.sk);
			assert.deepEqual(await wsWrite(c, ev), ['OK', ev.id, true, '']);
		}
		await accepted(1, dave.sk);
		const ev = chat(dave.sk);
		assert.deepEqual(await wsWrite(c0, ev), ['OK', ev.id, false, LIMITED]);
		await limited(0, dave.sk);
		assert.equal(await stored([ev.id]), 0);
	});

	test('pubkeys have budgets of their own', async () => {
		const alice = newKey();
		const bob = newKey();
		for (let i = 0; i < BURST; i++)
			await accepted(i % 2, alice.sk);
		await limited(1, alice.sk);
		// Bob is untouched by Alice's exhaustion, and Alice by Bob's writes.
		for (let i = 0; i < BURST; i++)
			await accepted(1 - (i % 2), bob.sk);
		await limited(0, bob.sk);
		await limited(0, alice.sk);
	});

	test('the budget comes back after Retry-After, one write per interval', async () => {
		const carol = newKey();
		for (let i = 0; i < BURST; i++)
			await accepted(0, carol.sk);
		// Refused writes take nothing: hammering does not push recovery back.
		for (let i = 0; i < 5; i++)
			await limited(i % 2, carol.sk);
		await sleep(RETRY_AFTER * 1000 + 250);
		await accepted(1, carol.sk);
		await limited(0, carol.sk);
		await sleep(RETRY_AFTER * 1000 + 250);
		await accepted(0, carol.sk);
	});
});

describe('without Redis', () => {
	test('writes fail closed with 503 instead of bypassing the budget', async () => {
		const dead = await freePort();
		const lone = await startRelay({
			capture: false,
			ready: false,
			env: { COMB_WRITE_RATE: RATE, COMB_WRITE_BURST: BURST, COMB_REDIS_URL: `redis://127.0.0.1:${dead}/0` },
		});
		try {
			// NIP-42 needs no Redis, so the write reaches the budget check.
			const erin = newKey();
			const c = await connectWs(lone.url, erin.sk);
			try {
				const ev = signEvent(erin.sk, { kind: 9, tags: [['h', crypto.randomUUID()]], content: 'x' });
				assert.deepEqual(await wsWrite(c, ev), ['OK', ev.id, false, 'error: rate limiter unavailable']);
				const rows = await lone.query(`SELECT count(*) FROM events WHERE id = '${ev.id}'`);
				assert.equal(rows[0][0], '0');
			} finally {
				c.ws.terminate();
			}
		} finally {
			await lone.stop();
		}
	});
});
