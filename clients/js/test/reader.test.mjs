// Unit tests of comb-client without a relay: a fake fetch answers each
// request. They cover the incremental reader (paging, the store, the
// cursor, onPage, onViolation), a client's failover between urls and its
// request timeout, and a view's onViolation. tests/e2e/client.test.mjs
// runs the library against real relays.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ArtifactView, CombClient, CombError, IncrementalReader, MemoryStore } from '../index.js';

const SK = '11'.repeat(32);
const H = '00000000-0000-4000-8000-000000000001';

// A kind-45010 revision of d (only what the reader looks at).
function revision(d, id = `${d}-1`, kind = 45010) {
	return { id, kind, tags: [['d', d], ['h', H]], content: '', pubkey: '', created_at: 0, sig: '' };
}

const upsert = (d, id) => ({ op: 'upsert', event: revision(d, id) });
const remove = (d, reason) => ({ op: 'remove', d, h: H, reason });

/**
 * A fetch that answers POST /query with answers[i] in turn (an object is
 * sent as JSON with status 200; {status, body} as given; an Error is
 * thrown) and GET / with info. Records every request in `requests`.
 */
function fakeFetch(answers, info = { artifacts: {} }) {
	const requests = [];
	let next = 0;
	const fetch = async (url, init = {}) => {
		const body = init.body ? JSON.parse(init.body) : null;
		requests.push({ url, filter: body?.[0] ?? null, signal: init.signal });
		if (!init.method)
			return new Response(JSON.stringify(info), { status: 200 });
		const a = answers[Math.min(next++, answers.length - 1)];
		if (a instanceof Error)
			throw a;
		if (typeof a === 'function')
			return a(init);
		const { status = 200, body: answer = a } = a.status ? a : {};
		return new Response(JSON.stringify(answer), { status });
	};
	return { fetch, requests };
}

function client(fetch, options = {}) {
	return new CombClient({ url: 'http://relay.test', secretKey: SK, fetch, ...options });
}

test('catchUp pages until `more` is false, storing each page before moving the cursor', async () => {
	const { fetch, requests } = fakeFetch([
		{ changes: [upsert('a'), upsert('b')], cursor: 'c1', more: true },
		{ changes: [remove('a', 'deleted'), upsert('c')], cursor: 'c2', more: false },
	]);
	const store = new MemoryStore();
	const pages = [];
	const reader = client(fetch).incremental({
		channels: [H], types: ['demo.task'], store, onPage: (p) => pages.push(p),
	});
	assert.ok(reader instanceof IncrementalReader);
	const seen = await reader.catchUp(2);
	assert.deepEqual(seen.map((c) => c.op), ['upsert', 'upsert', 'remove', 'upsert']);
	assert.deepEqual([...store.items.keys()].sort(), ['b', 'c']);
	assert.equal(reader.cursor, 'c2');
	assert.equal(await store.cursor(), 'c2');
	assert.deepEqual(requests.map((r) => r.filter), [
		{ artifact: 'incremental', '#h': [H], '#type': ['demo.task'], limit: 2 },
		{ artifact: 'incremental', '#h': [H], '#type': ['demo.task'], cursor: 'c1', limit: 2 },
	]);
	assert.deepEqual(pages.map((p) => [p.url, p.cursor, p.answer.cursor]),
		[['http://relay.test', null, 'c1'], ['http://relay.test', 'c1', 'c2']]);
});

test('a cursor given at the start is read from; startOver drops it', async () => {
	const { fetch, requests } = fakeFetch([{ changes: [], cursor: 'c9', more: false }]);
	const reader = client(fetch).incremental({ cursor: 'c8' });
	await reader.read();
	assert.deepEqual(requests[0].filter, { artifact: 'incremental', cursor: 'c8' });
	reader.startOver();
	assert.equal(reader.cursor, undefined);
});

test('a refused read rejects with the relay\'s error and keeps the cursor', async () => {
	const { fetch } = fakeFetch([
		{ changes: [upsert('a')], cursor: 'c1', more: true },
		{ status: 409, body: { error: 'incremental_reset', message: 'too old' } },
	]);
	const reader = client(fetch).incremental();
	await assert.rejects(reader.catchUp(), (err) => err instanceof CombError &&
		err.code === 'incremental_reset' && err.status === 409);
	assert.equal(reader.cursor, 'c1');
	assert.ok(reader.store.items.has('a'));
});

test('onViolation is told of every change that breaks the protocol, which is skipped', async () => {
	const { fetch } = fakeFetch([{
		changes: [
			upsert('a'),
			{ op: 'upsert', event: revision('b', 'b-1', 9) },
			{ op: 'upsert', event: { ...revision('x'), tags: [] } },
			remove('c', 'vanished'),
			{ op: 'remove', reason: 'deleted' },
			{ op: 'replace', d: 'e' },
		],
		cursor: 'c1', more: false,
	}]);
	const violations = [];
	const reader = client(fetch).incremental({ onViolation: (m) => violations.push(m) });
	const seen = await reader.catchUp();
	assert.deepEqual(seen, [upsert('a')]);
	assert.deepEqual([...reader.store.items.keys()], ['a']);
	assert.equal(violations.length, 5, violations.join('\n'));
	assert.match(violations[0], /^upsert of kind 9$/);
	assert.match(violations[1], /without d/);
	assert.match(violations[2], /reason "vanished"/);
	assert.match(violations[3], /^unknown change /);
	assert.match(violations[4], /^unknown change .*replace/);
});

test('an answer that is not an incremental answer is a violation and rejects', async () => {
	for (const bad of [{ changes: [], more: false }, { cursor: 'c1', more: false }, [], { changes: [], cursor: 'c1' }]) {
		const { fetch } = fakeFetch([bad]);
		const violations = [];
		const reader = client(fetch).incremental({ onViolation: (m) => violations.push(m) });
		await assert.rejects(reader.read(), (err) => err.code === 'invalid_answer');
		assert.equal(violations.length, 1, JSON.stringify(bad));
		assert.match(violations[0], /^malformed answer/);
	}
	const reader = client(fakeFetch([]).fetch).incremental();
	assert.equal(reader.wellFormed({ changes: [], cursor: 'c1' }, { frame: true }), true);
});

test('apply stores a frame\'s changes and its cursor', async () => {
	const store = new MemoryStore();
	const reader = client(fakeFetch([]).fetch).incremental({ store });
	await reader.apply([upsert('a'), upsert('b')], 'f1');
	await reader.apply([remove('a', 'moved')], 'f2');
	assert.deepEqual([...store.items.keys()], ['b']);
	assert.equal(reader.cursor, 'f2');
	assert.equal(await store.cursor(), 'f2');
	await reader.apply([upsert('c')]);
	assert.equal(reader.cursor, 'f2', 'no cursor given: the cursor stays');
});

test('a client with urls moves to the next node after no answer or a 5xx one', async () => {
	const { fetch, requests } = fakeFetch([
		new TypeError('connection refused'), new TypeError('connection refused'),
		new TypeError('connection refused'),
		{ status: 503, body: { error: 'error: database unavailable' } },
		{ changes: [], cursor: 'c1', more: false },
	]);
	const c = new CombClient({ urls: ['http://a.test', 'http://b.test:81/x'], node: 1, secretKey: SK, fetch });
	assert.deepEqual(c.urls, ['http://a.test', 'http://b.test:81']);
	assert.equal(c.url, 'http://b.test:81');
	assert.equal(c.wsUrl, 'ws://b.test:81');
	const reader = c.incremental();
	// no answer: tried twice more on the same node, then the client moves on
	await assert.rejects(reader.read(), (err) => err.code === 'network');
	assert.equal(c.node, 0);
	await assert.rejects(reader.read(), (err) => err.status === 503);
	assert.equal(c.node, 1);
	const pages = [];
	reader.onPage = (p) => pages.push(p.url);
	await reader.read();
	assert.deepEqual(pages, ['http://b.test:81']);
	assert.deepEqual(requests.map((r) => new URL(r.url).host),
		['b.test:81', 'b.test:81', 'b.test:81', 'a.test', 'b.test:81']);
	assert.equal(c.failOver(), 'http://a.test');
	assert.equal(new CombClient({ url: 'https://one.test', secretKey: SK, fetch }).failOver(), 'https://one.test');
});

test('timeout: a request unanswered that long rejects as `network`', async () => {
	const hang = (init) => new Promise((resolve, reject) => {
		init.signal.addEventListener('abort', () => reject(init.signal.reason));
	});
	const { fetch } = fakeFetch([hang]);
	const c = client(fetch, { timeout: 50 });
	// the timeout's timer does not keep Node running by itself
	const alive = setTimeout(() => {}, 5000);
	const t0 = Date.now();
	try {
		await assert.rejects(c.query({ artifact: 'incremental' }), (err) => err.code === 'network');
	} finally {
		clearTimeout(alive);
	}
	assert.ok(Date.now() - t0 < 2000);
});

test('a view tells onViolation of a malformed change and skips it', async () => {
	const { fetch } = fakeFetch([{
		changes: [upsert('a'), { op: 'upsert', event: revision('b', 'b-1', 1) }], cursor: 'c1', more: false,
	}]);
	const violations = [];
	// no WebSocket: the view polls with incremental reads
	const c = client(fetch);
	c.WebSocket = null;
	const v = new ArtifactView(c, { pollInterval: 60000, onViolation: (m) => violations.push(m) });
	try {
		await v.ready;
		assert.deepEqual(v.all().map((e) => e.id), ['a-1']);
		assert.deepEqual(violations, ['upsert of kind 1']);
	} finally {
		await v.close();
	}
});
