// Order (issue 36, item 1): a page or frame is applied change by change,
// in order, by the view in memory, by every store (memory, JSON file) and
// in the 'change' event, with the cursor in the same store write. A page
// holding a removal of d and then an upsert of d (d left the scope and
// came back) must leave d held everywhere, also after a reload; the
// reverse order must leave it removed. Chromium's IndexedDB store is
// checked by tests/e2e/client_checker.test.mjs.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { ArtifactView, CombClient, MemoryStore } from '../index.js';
import { JsonFileStore } from '../src/file-store.js';

const SK = '11'.repeat(32);
const H = '00000000-0000-4000-8000-000000000001';

function revision(d, id, prev) {
	const tags = [['d', d], ['h', H]];
	if (prev)
		tags.push(['prev', prev]);
	return { id, kind: 45010, tags, content: '', pubkey: '', created_at: 0, sig: '' };
}

// page 1 creates a and b; page 2 moves a out and back (removal, then a
// newer upsert) and updates b then deletes it (upsert, then removal)
const PAGES = [
	{ changes: [{ op: 'upsert', event: revision('a', 'a1') }, { op: 'upsert', event: revision('b', 'b1') }],
		cursor: 'c1', more: true },
	{ changes: [
		{ op: 'remove', d: 'a', h: H, reason: 'moved' },
		{ op: 'upsert', event: revision('a', 'a2', 'a1') },
		{ op: 'upsert', event: revision('b', 'b2', 'b1') },
		{ op: 'remove', d: 'b', h: H, reason: 'deleted' },
	], cursor: 'c2', more: false },
];

// A fetch answering /query with the pages in turn (then the last page's
// cursor with no changes) and GET / with a NIP-11 without syncs.
function pagedFetch(pages) {
	let next = 0;
	return async (url, init = {}) => {
		if (!init.method)
			return new Response(JSON.stringify({ artifacts: {} }), { status: 200 });
		const page = pages[next++] ?? { changes: [], cursor: pages.at(-1).cursor, more: false };
		return new Response(JSON.stringify(page), { status: 200 });
	};
}

function client(fetch) {
	const c = new CombClient({ url: 'http://relay.test', secretKey: SK, fetch });
	c.WebSocket = null;   // the view polls with incremental reads
	return c;
}

const ids = (events) => events.map((e) => e.id).sort();

test('the reader stores a page in order: removal then upsert keeps d, upsert then removal drops it', async () => {
	for (const store of [new MemoryStore(), new JsonFileStore(tmpFile())]) {
		const reader = client(pagedFetch(PAGES)).incremental({ store });
		await reader.catchUp();
		const { events, cursor } = await store.load();
		assert.deepEqual(ids(events), ['a2'], store.constructor.name);
		assert.equal(cursor, 'c2');
		await store.close();
	}
});

test('a view applies a page in order in memory, in its store and in the change event; a reload agrees', async () => {
	const file = tmpFile();
	const v = new ArtifactView(client(pagedFetch(PAGES)), { store: new JsonFileStore(file), pollInterval: 60000 });
	const events = [];
	v.on('change', (e) => events.push(e));
	await v.ready;
	assert.deepEqual(ids(v.all()), ['a2']);
	assert.deepEqual(events.map((e) => e.changes.map((c) => `${c.op} ${c.op === 'upsert' ? c.event.id : c.d}`)), [
		['upsert a1', 'upsert b1'],
		['remove a', 'upsert a2', 'upsert b2', 'remove b'],
	]);
	assert.deepEqual(events[1].upserts.map((e) => e.id), ['a2', 'b2']);
	assert.deepEqual(events[1].removals, [{ d: 'a', h: H, reason: 'moved' }, { d: 'b', h: H, reason: 'deleted' }]);
	await v.close();
	const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
	assert.deepEqual(Object.keys(saved.artifacts), ['a']);
	assert.equal(saved.artifacts.a.id, 'a2');
	assert.equal(saved.cursor, 'c2');
	// a reload starts from the file and holds the same
	const again = new ArtifactView(client(pagedFetch([{ changes: [], cursor: 'c2', more: false }])),
		{ store: new JsonFileStore(file), pollInterval: 60000 });
	await again.ready;
	assert.deepEqual(ids(again.all()), ['a2']);
	await again.close();
});

test('stores apply one write in order with its cursor', async () => {
	for (const store of [new MemoryStore(), new JsonFileStore(tmpFile())]) {
		await store.write([{ op: 'upsert', event: revision('x', 'x1') }], 'k1');
		await store.write([
			{ op: 'remove', d: 'x' }, { op: 'upsert', event: revision('x', 'x2') },
			{ op: 'upsert', event: revision('y', 'y1') }, { op: 'remove', d: 'y' },
		], 'k2');
		const { events, cursor } = await store.load();
		assert.deepEqual(ids(events), ['x2']);
		assert.equal(cursor, 'k2');
		assert.equal((await store.get('x')).id, 'x2');
		assert.equal(await store.get('y'), undefined);
		await store.close();
	}
});

let tmpDir = null;
function tmpFile() {
	tmpDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'comb-order-'));
	return path.join(tmpDir, `${Math.random().toString(16).slice(2)}.json`);
}
