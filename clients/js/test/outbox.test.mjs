// The outbox (issue 36, item 3) against a fake relay in memory that keeps
// heads, answers `conflict: artifact head changed` to a stale prev, accepts
// an accepted event again, refuses what it is told to, serves incremental
// reads from its log, and can be taken offline (fetch throws). Writes made
// offline are shown at once as pending, kept in the store across a reload,
// sent in order when the network is back; a conflict is rebased on the
// head; a refusal for good is rolled back with an error naming it.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { ArtifactView, CombClient, tagValue } from '../index.js';
import { JsonFileStore } from '../src/file-store.js';

const SK = '33'.repeat(32);
const H = '00000000-0000-4000-8000-00000000000a';
const OTHER = '00000000-0000-4000-8000-00000000000b';

function json(body, status = 200) {
	return new Response(JSON.stringify(body), { status });
}

/** A relay in memory (see the top of this file). */
function fakeRelay() {
	const relay = {
		online: true, log: [], heads: new Map(), accepted: new Set(), refuse: new Map(), posted: [],
	};
	relay.fetch = async (url, init = {}) => {
		if (!relay.online)
			throw new TypeError('fetch failed');
		if (!init.method)
			return json({ artifacts: {} });
		const body = JSON.parse(init.body);
		if (new URL(url).pathname === '/events') {
			const ev = body;
			const d = tagValue(ev, 'd');
			relay.posted.push(ev);
			if (relay.refuse.has(d))
				return json({ accepted: false, message: relay.refuse.get(d) }, 403);
			if (relay.accepted.has(ev.id))
				return json({ accepted: true });
			if (relay.heads.get(d)?.id !== tagValue(ev, 'prev'))
				return json({ accepted: false, message: 'conflict: artifact head changed' }, 409);
			relay.heads.set(d, ev);
			relay.accepted.add(ev.id);
			const h = tagValue(ev, 'h');
			const op = tagValue(ev, 'op');
			if (op === 'delete')
				relay.log.push({ op: 'remove', d, h, reason: 'deleted' });
			else if (h !== H)
				relay.log.push({ op: 'remove', d, h: H, reason: 'moved' });
			else
				relay.log.push({ op: 'upsert', event: ev });
			return json({ accepted: true });
		}
		const [filter] = body;
		if (filter.artifact === 'head')
			return json(filter['#d'].map((d) => relay.heads.get(d)).filter(Boolean));
		const from = Number(filter.cursor ?? 0);
		return json({ changes: relay.log.slice(from), cursor: String(relay.log.length), more: false });
	};
	return relay;
}

function view(relay, store, options = {}) {
	const c = new CombClient({ url: 'http://relay.test', secretKey: SK, fetch: relay.fetch });
	c.WebSocket = null;
	return new ArtifactView(c, { channels: [H], store, pollInterval: 30, ...options });
}

async function until(fn, what, ms = 8000) {
	const t0 = Date.now();
	while (!fn()) {
		if (Date.now() - t0 > ms)
			throw new Error(`${what}: not reached in ${ms} ms`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-outbox-'));
let files = 0;
const tmpFile = () => path.join(tmpDir, `${++files}.json`);

test('offline writes are pending at once, survive a reload, and are sent in order when back', async () => {
	const relay = fakeRelay();
	const file = tmpFile();
	const v = view(relay, new JsonFileStore(file));
	const errors = [];
	v.on('error', (e) => errors.push(e));
	await v.ready;
	// the outbox's last word on the create: emptied (and stored)
	const emptied = new Promise((resolve) => v.on('pending', (n) => n === 0 && resolve()));
	const task = await v.create({ h: H, type: 'demo.task', title: 'one', tags: [['status', 'open']] });
	const d = tagValue(task, 'd');
	await until(() => v.pending === 0 && v.get(d)?.id === task.id && !v.get(d).pending, 'the create accepted');
	await emptied;
	relay.online = false;
	const counts = [];
	v.on('pending', (n) => counts.push(n));
	const edited = await v.update(d, { title: 'two', tags: { status: 'doing' } });
	const second = await v.create({ h: H, type: 'demo.task', title: 'three' });
	// shown at once, marked pending
	assert.equal(v.get(d).title, undefined);
	assert.equal(tagValue(v.get(d), 'title'), 'two');
	assert.equal(v.get(d).pending, true);
	assert.equal(tagValue(v.get(d), 'prev'), task.id);
	assert.equal(v.isPending(tagValue(second, 'd')), true);
	assert.equal(v.pending, 2);
	assert.deepEqual(counts, [1, 2]);
	const removed = await v.delete(tagValue(second, 'd'));
	assert.equal(tagValue(removed, 'prev'), second.id);
	assert.equal(v.get(tagValue(second, 'd')), undefined);
	await v.close();
	// the file holds the outbox, signed
	const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
	assert.deepEqual(saved.outbox.map((e) => e.event.id), [edited.id, second.id, removed.id]);
	// a reload while still offline shows the same
	const again = view(relay, new JsonFileStore(file));
	again.on('error', (e) => errors.push(e));
	await until(() => again.pending === 3, 'outbox loaded');
	assert.equal(again.get(d).pending, true);
	assert.equal(tagValue(again.get(d), 'status'), 'doing');
	relay.online = true;
	await until(() => again.pending === 0, 'the outbox sent');
	await until(() => again.get(d)?.id === edited.id && !again.get(d).pending, 'the edit read back');
	assert.equal(again.get(tagValue(second, 'd')), undefined);
	// sent in order, each once accepted
	const firsts = relay.posted.filter((e) => [edited.id, second.id, removed.id].includes(e.id));
	assert.deepEqual([...new Set(firsts.map((e) => e.id))], [edited.id, second.id, removed.id]);
	assert.ok(errors.every((e) => e.code === 'network'), errors.map((e) => e.message).join('\n'));
	await again.close();
	assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')).outbox, []);
});

test('a conflict is rebased on the head with the same changes, or with the merge function given', async () => {
	const relay = fakeRelay();
	const v = view(relay, undefined);
	await v.ready;
	const task = await v.create({ h: H, type: 'demo.task', title: 'base', tags: [['status', 'open']] });
	const d = tagValue(task, 'd');
	await until(() => v.pending === 0, 'created');
	// another writer edits the title meanwhile
	const other = new CombClient({ url: 'http://relay.test', secretKey: '44'.repeat(32), fetch: relay.fetch });
	const theirs = await other.updateArtifact(task, { title: 'their title' });
	// this view has not read theirs yet: its write is on the old revision
	relay.online = false;
	const mine = await v.update(d, { tags: { status: 'done' } });
	assert.equal(tagValue(mine, 'prev'), task.id);
	relay.online = true;
	await until(() => v.pending === 0, 'rebased and sent');
	const head = relay.heads.get(d);
	assert.equal(tagValue(head, 'prev'), theirs.id);
	assert.equal(tagValue(head, 'title'), 'their title');
	assert.equal(tagValue(head, 'status'), 'done');
	await until(() => v.get(d)?.id === head.id, 'the rebased write read back');
	await v.close();

	// an app's merge: keeps their title, appends to it
	const merged = view(relay, undefined, {
		merge: (entry, h) => ({ ...entry.changes, title: `${tagValue(h, 'title')} + mine` }),
	});
	await merged.ready;
	const stale = merged.get(d);
	await other.updateArtifact(head, { title: 'newer' });
	relay.online = false;
	await merged.update(d, { title: 'mine only' });
	assert.equal(tagValue(merged.get(d), 'prev'), stale.id);
	relay.online = true;
	await until(() => merged.pending === 0, 'merged and sent');
	assert.equal(tagValue(relay.heads.get(d), 'title'), 'newer + mine');
	await merged.close();
});

test('a write refused for good is rolled back with an error naming it', async () => {
	const relay = fakeRelay();
	const v = view(relay, undefined);
	const errors = [];
	v.on('error', (e) => errors.push(e));
	await v.ready;
	const task = await v.create({ h: H, type: 'demo.task', title: 'keep' });
	const d = tagValue(task, 'd');
	await until(() => v.pending === 0 && v.get(d)?.id === task.id, 'created');
	relay.refuse.set(d, 'restricted: not a member of the destination');
	const move = await v.move(d, OTHER);
	assert.equal(v.get(d), undefined, 'a move out of the view hides it at once');
	await until(() => v.pending === 0, 'refused');
	assert.equal(v.get(d)?.id, task.id, 'rolled back to the revision read');
	const refused = errors.find((e) => e.code === 'restricted');
	assert.ok(refused);
	assert.match(refused.message, /^restricted: not a member of the destination \(move of .* rolled back\)$/);
	assert.equal(refused.event.id, move.id);
	assert.equal(refused.entry.op, 'move');
	// an invalid write of an unknown artifact is refused before it is kept
	await assert.rejects(v.update('no-such-d', { title: 'x' }), (e) => e.code === 'invalid');
	assert.equal(v.pending, 0);
	await v.close();
});
