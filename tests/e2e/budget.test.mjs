// What one connection holds is bounded in bytes (PROTOCOL.md section 10):
// everything a WebSocket's subscriptions keep counts against
// `limitation.max_connection_bytes` (NIP-11), sized by what is held, never
// by a `limit` the client asks for. A subscription that would pass it is
// closed with `error: connection memory budget exceeded` and the
// connection stays usable. Each hostile shape below also checks the
// relay's resident memory and its own count of held bytes (/metrics
// comb_ws_held_bytes) against the advertised budgets.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { connectWs, get, newKey, scrapeMetrics, startRelay } from './lib/harness.mjs';
import { accept, addMember, chat, createChannel, uuid } from './lib/artifacts.mjs';
import { pidListeningOn, rssKb } from './lib/clients.mjs';
import { isFor, reqFrames } from './lib/subscriptions.mjs';

const BUDGET_EXCEEDED = 'error: connection memory budget exceeded';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The relay's resident memory may grow for reasons of its own (pools,
// caches, the sanitizers' bookkeeping in `make test` builds): what a test
// allows beyond the budgets it checks.
const SLACK_MIB = 64;
// In those builds freed memory waits in AddressSanitizer's quarantine
// (256 MiB) before it is reused, which a resident size measures as growth:
// these relays reuse it at once. (Ignored by builds without it.)
const ASAN_ENV = { ASAN_OPTIONS: 'quarantine_size_mb=0:thread_local_quarantine_size_kb=0' };

async function heldBytes(stack) {
	return (await scrapeMetrics(stack.url)).value('comb_ws_held_bytes');
}

async function nip11(stack) {
	const r = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
	return JSON.parse(r.body);
}

/** Sends a REQ and collects its frames up to EOSE (or CLOSED). */
const req = (c, sub, ...filters) => reqFrames(c, sub, filters);

describe('the default budget', () => {
	let stack;
	let owner;

	before(async () => {
		stack = await startRelay({ env: ASAN_ENV });
		owner = stack.admins[0];
	});

	after(async () => {
		await stack?.stop();
	});

	test('is advertised in NIP-11', async () => {
		const doc = await nip11(stack);
		assert.equal(doc.limitation.max_connection_bytes, 4 * 1024 * 1024);
	});

	test('many REQs with large limits hold what they found, not what they asked for', async () => {
		// The shape that grew a node by 523 MiB: four sockets of one
		// address, each with 64 REQs of 10 filters with limit 1000 on a
		// channel of five messages, each REQ sent three times under its id.
		const h = await createChannel(stack, owner);
		for (let i = 0; i < 5; i++)
			await chat(stack, owner, h, `message ${i}`);
		const { limitation } = await nip11(stack);
		const pid = pidListeningOn(stack.port);
		const rss0 = rssKb(pid);
		const sockets = [];
		for (let k = 0; k < 4; k++)
			sockets.push(await connectWs(stack.wsUrl, newKey().sk));
		const filters = Array.from({ length: 10 }, (_, i) => ({ kinds: [9], '#h': [h], limit: 1000 - i }));
		await Promise.all(sockets.map(async (c) => {
			for (let round = 0; round < 3; round++) {
				for (let i = 0; i < limitation.max_subscriptions; i++) {
					const frames = await req(c, `s${i}`, ...filters);
					assert.equal(frames.at(-1)[0], 'EOSE', JSON.stringify(frames.at(-1)));
					assert.equal(frames.length, 6);
				}
			}
		}));
		const held = await heldBytes(stack);
		const grown = (rssKb(pid) - rss0) / 1024;
		console.log(`# 4 x ${limitation.max_subscriptions} REQs x 3: held ${held} bytes, RSS grew ${grown.toFixed(1)} MiB`);
		assert.ok(held <= 4 * limitation.max_connection_bytes, `held ${held}`);
		assert.ok(grown < 4 * limitation.max_connection_bytes / 2 ** 20 + SLACK_MIB, `RSS grew ${grown} MiB`);
		await Promise.all(sockets.map((c) => c.close()));
		assert.equal(await heldBytes(stack), 0, 'closed connections still counted as holding');
	});
});

describe('a small budget', () => {
	let stack;
	let owner;
	const budget = 2 * 1024 * 1024;

	before(async () => {
		stack = await startRelay({ env: { ...ASAN_ENV, COMB_MAX_CONNECTION_BYTES: String(budget) } });
		owner = stack.admins[0];
	});

	after(async () => {
		await stack?.stop();
	});

	test('large filters: the REQ that would pass it is closed, the connection stays usable', async () => {
		const h = await createChannel(stack, owner);
		const c = await connectWs(stack.wsUrl, newKey().sk);
		// ten filters of about 6 KB each: about 60 KB a REQ, as parsed more
		const authors = Array.from({ length: 90 }, () => crypto.randomBytes(32).toString('hex'));
		const big = Array.from({ length: 10 }, () => ({ kinds: [9], '#h': [h], authors }));
		const answers = [];
		for (let i = 0; i < 64; i++) {
			const frames = await req(c, `big${i}`, ...big);
			answers.push(frames.at(-1));
			if (frames.at(-1)[0] === 'CLOSED')
				break;
		}
		const last = answers.at(-1);
		assert.deepEqual(last, ['CLOSED', `big${answers.length - 1}`, BUDGET_EXCEEDED],
			`${answers.length} REQs of about 60 KB each were all kept`);
		assert.ok(answers.length > 2, 'the budget refused the first REQs');
		assert.ok(await heldBytes(stack) <= budget);
		// closing some makes room again, on the same connection
		c.send(['CLOSE', 'big0']);
		c.send(['CLOSE', 'big1']);
		assert.equal((await req(c, 'again', ...big)).at(-1)[0], 'EOSE');
		await c.close();
	});

	test('events held while stored ones are sent to a client that does not read', async () => {
		const h = await createChannel(stack, owner);
		const content = 'x'.repeat(60000);
		// more stored bytes than the socket's buffers take, so that the
		// REQ is still sending them when the live ones arrive
		for (let i = 0; i < 330; i++)
			await chat(stack, owner, h, `${i} ${content}`);
		const pid = pidListeningOn(stack.port);
		const rss0 = rssKb(pid);
		const c = await connectWs(stack.wsUrl, newKey().sk);
		c.ws.pause();
		c.send(['REQ', 'slow', { kinds: [9], '#h': [h], limit: 1000 }]);
		await sleep(1000);
		// about 1.2 MB of live events while the REQ is pending
		for (let i = 0; i < 20; i++)
			await chat(stack, owner, h, `live ${i} ${content}`);
		const peak = (rssKb(pid) - rss0) / 1024;
		c.ws.resume();
		let events = 0;
		let closed = null;
		for (;;) {
			const m = await c.next(isFor('slow'), 30000);
			if (m[0] === 'EVENT')
				events++;
			else if (m[0] === 'CLOSED') {
				closed = m[2];
				break;
			}
		}
		console.log(`# held live events: ${events} frames, RSS grew ${peak.toFixed(1)} MiB while paused`);
		assert.equal(closed, BUDGET_EXCEEDED);
		assert.ok(events >= 330, `${events} stored events`);
		assert.ok(peak < budget / 2 ** 20 + SLACK_MIB, `RSS grew ${peak} MiB`);
		assert.equal((await req(c, 'after', { kinds: [9], '#h': [h], limit: 1 })).at(-1)[0], 'EOSE');
		await c.close();
	});

	test('syncs hold what they know of the client\'s copy, within the budget', async () => {
		const h = await createChannel(stack, owner);
		for (let i = 0; i < 300; i++)
			await accept(stack, owner, { d: uuid(), h, op: 'create' });
		const c = await connectWs(stack.wsUrl, newKey().sk);
		const answers = [];
		for (let i = 0; i < 64; i++) {
			const frames = await req(c, `sync${i}`, { artifact: 'current', '#h': [h] });
			answers.push(frames.at(-1));
			if (frames.at(-1)[0] === 'CLOSED')
				break;
			assert.equal(frames.length, 301);
		}
		assert.deepEqual(answers.at(-1), ['CLOSED', `sync${answers.length - 1}`, BUDGET_EXCEEDED],
			`${answers.length} syncs of 300 artifacts were all kept`);
		assert.ok(await heldBytes(stack) <= budget);
		c.send(['CLOSE', 'sync0']);
		assert.equal((await req(c, 'again', { artifact: 'current', '#h': [h] })).at(-1)[0], 'EOSE');
		await c.close();
	});

	test('a resumable catch-up comes in pages the budget can hold', async () => {
		const h = await createChannel(stack, owner, { visibility: 'private' });
		const reader = newKey();
		await addMember(stack, owner, h, reader.pk);
		const content = 'y'.repeat(40000);
		const ds = [];
		for (let i = 0; i < 120; i++) {
			const d = uuid();
			ds.push(d);
			await accept(stack, owner, { d, h, op: 'create', content });
		}
		const c = await connectWs(stack.wsUrl, reader.sk);
		const pages = [];
		const seen = new Set();
		c.send(['REQ', 'chg', { artifact: 'changes', '#h': [h] }]);
		for (;;) {
			const m = await c.next(isFor('chg'), 30000);
			if (m[0] === 'EOSE')
				break;
			assert.equal(m[0], 'CHANGES', JSON.stringify(m).slice(0, 300));
			pages.push(Buffer.byteLength(JSON.stringify(m)));
			for (const x of m[2].changes) {
				assert.equal(x.op, 'upsert');
				assert.ok(!seen.has(x.event.id), 'an item came twice');
				seen.add(x.event.id);
			}
		}
		console.log(`# catch-up of 120 x 40 KB: ${pages.length} pages, largest ${Math.max(...pages)} bytes`);
		assert.equal(seen.size, 120);
		assert.ok(pages.length > 2, 'one page held the whole catch-up');
		assert.ok(Math.max(...pages) <= budget, `a page of ${Math.max(...pages)} bytes`);
		await c.close();
	});
});
