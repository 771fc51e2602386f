// The revision cache's warm when a node starts (services/relay/revcache/
// revcache_warm.c, COMB_REVISION_CACHE_WARM_MB, docs/operations.md): a
// restarted node reads the newest stored events that are neither deleted nor
// redacted into its empty cache, exactly as many as its budget holds, newest
// first; 0 turns it off. Whatever the warm holds, a deleted or redacted event
// is never served: a read lists its events in its own snapshot, the cache
// only gives their bytes.
//
// The race of a removal with the warm (the warm reads an event's row, the
// event's deletion or redaction commits, the warm then keeps its bytes) ends
// in the state the second test builds deterministically: the cache holds the
// bytes of an event removed since. A removal that commits before the warm
// reads the row leaves the event out of the warm (third test). There is no
// third outcome to time: the cache has no invalidation that a put could undo.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { connectWs, scrapeMetrics, startRelay } from './lib/harness.mjs';
import { assertAccepted, chat, createChannel, publish } from './lib/artifacts.mjs';
import { reqFrames } from './lib/subscriptions.mjs';

// What one entry costs the cache beyond its bytes (REVCACHE_ENTRY_COST).
const ENTRY_COST = 64;
// The node's cache (16 MiB: entries up to 128 KiB) and its warm (1 MiB,
// within half of the cache), smaller than the 48 messages of about 30 KB.
const CACHE_MB = 16;
const WARM_MB = 1;
const MESSAGES = 48;

/** Node 0's revision cache figures from /metrics. */
async function cacheMetrics(stack) {
	const m = await scrapeMetrics(stack.urls[0]);
	return {
		hits: m.value('comb_revision_cache_hits_total'),
		misses: m.value('comb_revision_cache_misses_total'),
		evictions: m.value('comb_revision_cache_evictions_total'),
		entries: m.value('comb_revision_cache_entries'),
		bytes: m.value('comb_revision_cache_bytes'),
		warmEvents: m.value('comb_revision_cache_warm_events'),
		warmBytes: m.value('comb_revision_cache_warm_bytes'),
		warmRunning: m.value('comb_revision_cache_warm_running'),
	};
}

/** Waits until node 0's warm has ended; resolves to its metrics. */
async function warmEnded(stack) {
	const end = Date.now() + 30000;
	for (;;) {
		const m = await cacheMetrics(stack);
		if (m.warmRunning === 0)
			return m;
		if (Date.now() > end)
			throw new Error('the warm did not end within 30 s');
		await new Promise((r) => setTimeout(r, 50));
	}
}

/** The lines of node 0's log that report a warm. */
function warmLines(stack) {
	return fs.readFileSync(stack.logs.relays[0], 'utf8').split('\n')
		.filter((l) => l.includes('revision cache warm:'));
}

/** Restarts node 0 with env changes (the mutable nodeEnv entry). */
async function restart(stack, nodeEnv, changes = {}) {
	await stack.stopNode(0);
	Object.assign(nodeEnv, changes);
	await stack.startNode(0);
}

/**
 * What the warm must hold, from the database: the stored events neither
 * deleted nor redacted, newest first, while their entries fit in budget
 * bytes. Resolves to [{seq, id, cost}].
 */
async function expectedWarm(stack, budget) {
	const rows = await stack.query('SELECT seq, id, octet_length(raw) FROM events' +
		' WHERE NOT deleted AND NOT redacted ORDER BY seq DESC');
	const out = [];
	let used = 0;
	for (const [seq, id, len] of rows) {
		const cost = Number(len) + ENTRY_COST;
		if (used + cost > budget)
			break;
		used += cost;
		out.push({ seq: Number(seq), id, cost });
	}
	assert.ok(out.length < rows.length, 'the budget holds every stored event: the test proves nothing');
	return out;
}

/** Asserts that every event of got (by id) is the one written. */
function assertAsWritten(got, written) {
	for (const [id, ev] of got)
		assert.ok(isDeepStrictEqual(ev, written.get(id)), `event ${id} is not as written`);
}

/** The EVENTs a REQ of filters answers on a new connection, by id. */
async function reqEvents(stack, sk, filters) {
	const c = await connectWs(stack.wsUrls[0], sk);
	try {
		const frames = await reqFrames(c, 'r', filters);
		assert.equal(frames.at(-1)[0], 'EOSE', JSON.stringify(frames.at(-1)));
		return new Map(frames.filter((f) => f[0] === 'EVENT').map((f) => [f[2].id, f[2]]));
	} finally {
		await c.close();
	}
}

describe('the revision cache warm at start-up', () => {
	const nodeEnv = {
		COMB_REVISION_CACHE_MB: String(CACHE_MB),
		COMB_REVISION_CACHE_WARM_MB: String(WARM_MB),
		COMB_MAX_LIMIT: '1000',
	};
	let stack;
	let admin;
	let h;
	const written = new Map();   // id -> the event as written (plain JSON)
	let warmed;                  // expectedWarm after the first restart

	before(async () => {
		stack = await startRelay({ nodeEnv: [nodeEnv] });
		admin = stack.admins[0];
		h = await createChannel(stack, admin);
		for (let i = 0; i < MESSAGES; i++) {
			const m = await chat(stack, admin, h, `${i} ${'x'.repeat(30000)}`);
			written.set(m.id, JSON.parse(JSON.stringify(m)));
		}
	});

	after(async () => {
		await stack?.stop();
	});

	test('fills the empty cache with the newest stored events within its budget', async () => {
		const lines = warmLines(stack).length;
		await restart(stack, nodeEnv);
		const m = await warmEnded(stack);
		warmed = await expectedWarm(stack, WARM_MB << 20);
		const cost = warmed.reduce((s, e) => s + e.cost, 0);
		assert.equal(m.warmEvents, warmed.length);
		assert.equal(m.warmBytes, cost);
		assert.ok(m.warmBytes <= WARM_MB << 20);
		// nothing else was read since the start
		assert.equal(m.entries, warmed.length);
		assert.equal(m.bytes, cost);
		const logged = warmLines(stack).slice(lines);
		assert.equal(logged.length, 1, logged.join('\n'));
		assert.match(logged[0], new RegExp(`: ${warmed.length} events, ${cost} bytes in \\d+ ms \\(budget reached\\)`));

		// The warmed messages come from the cache, the older ones from
		// PostgreSQL, byte for byte what was written.
		const inWarm = new Set(warmed.map((e) => e.id));
		const hot = [...written.keys()].filter((id) => inWarm.has(id));
		const cold = [...written.keys()].filter((id) => !inWarm.has(id));
		assert.ok(hot.length > 0 && cold.length > 0, `${hot.length} warmed, ${cold.length} not`);
		for (const [ids, hits, misses] of [[hot, hot.length, 0], [cold, 0, cold.length]]) {
			const m0 = await cacheMetrics(stack);
			// a limit above READ_SMALL_ANSWER: the bytes come from the
			// cache or a second statement, not with the listing
			const got = await reqEvents(stack, admin, [{ ids, limit: 1000 }]);
			const m1 = await cacheMetrics(stack);
			assert.deepEqual({ hits: m1.hits - m0.hits, misses: m1.misses - m0.misses }, { hits, misses });
			assert.equal(got.size, ids.length);
			assertAsWritten(got, written);
		}
	});

	test('a message deleted or redacted after the warm is never served from it', async () => {
		assert.ok(warmed, 'needs the first test');
		// two warmed messages (older than the removals that follow)
		const inWarm = new Set(warmed.map((e) => e.id));
		const [deleted, redacted] = [...written.keys()].filter((id) => inWarm.has(id)).slice(-2);
		assertAccepted(await publish(stack, admin, { kind: 5, tags: [['h', h], ['e', deleted]] }), 'kind 5');
		assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', h], ['e', redacted]] }), 'kind 9005');
		const byChannel = await reqEvents(stack, admin, [{ kinds: [9], '#h': [h], limit: 1000 }]);
		const byIds = await reqEvents(stack, admin, [{ ids: [deleted, redacted], limit: 1000 }]);
		// their bytes are still in the cache (it never evicted) ...
		assert.equal((await cacheMetrics(stack)).evictions, 0);
		// ... and no read sends them
		assert.equal(byIds.size, 0);
		assert.equal(byChannel.has(deleted), false, 'a deleted message was served');
		assert.equal(byChannel.has(redacted), false, 'a redacted message was served');
		assert.equal(byChannel.size, MESSAGES - 2);
		assertAsWritten(byChannel, written);
	});

	test('a message removed before the warm reads it is not warmed', async () => {
		const [deleted] = await stack.query("SELECT id FROM events WHERE deleted");
		await restart(stack, nodeEnv);
		const m = await warmEnded(stack);
		const now = await expectedWarm(stack, WARM_MB << 20);
		assert.ok(!now.some((e) => e.id === deleted[0]));
		assert.equal(m.warmEvents, now.length);
		assert.equal(m.warmBytes, now.reduce((s, e) => s + e.cost, 0));
		assert.equal(m.entries, now.length);
		const byChannel = await reqEvents(stack, admin, [{ kinds: [9], '#h': [h], limit: 1000 }]);
		assert.equal(byChannel.size, MESSAGES - 2);
		assertAsWritten(byChannel, written);
	});

	test('0 turns it off, and so does a node without a cache', async () => {
		for (const changes of [{ COMB_REVISION_CACHE_WARM_MB: '0' },
			{ COMB_REVISION_CACHE_WARM_MB: String(WARM_MB), COMB_REVISION_CACHE_MB: '0' }]) {
			const lines = warmLines(stack).length;
			await restart(stack, nodeEnv, changes);
			const m = await cacheMetrics(stack);
			assert.deepEqual({ events: m.warmEvents, bytes: m.warmBytes, running: m.warmRunning, entries: m.entries },
				{ events: 0, bytes: 0, running: 0, entries: 0 }, JSON.stringify(changes));
			assert.equal(warmLines(stack).length, lines, 'a node without a warm logged one');
			// and it still answers, from PostgreSQL
			const byChannel = await reqEvents(stack, admin, [{ kinds: [9], '#h': [h], limit: 1000 }]);
			assert.equal(byChannel.size, MESSAGES - 2);
		}
	});
});
