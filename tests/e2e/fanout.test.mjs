// Live fan-out without a thread wake-up per frame (docs/operations.md,
// `comb_ws_frames_total`): a live change reaching many syncs is written to
// each socket by the thread that fans it out whenever the socket has room
// and nothing waits in that connection's queue; only the rest goes to the
// connection's writer thread. Readers that keep up get every edit exactly
// once and in order either way. (A reader that stops reading is still
// closed with `resync: slow consumer`: tests/e2e/faults.test.mjs.)

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { connectWs, scrapeMetrics, startRelay } from './lib/harness.mjs';
import { accept, createChannel, tagValue, uuid } from './lib/artifacts.mjs';

const SYNCS = 20;
const EDITS = 10;

let stack;
const sockets = [];

before(async () => {
	stack = await startRelay({ env: { COMB_WRITE_RATE: '0' } });
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
});

async function frames() {
	const m = await scrapeMetrics(stack.url);
	return {
		atOnce: m.value('comb_ws_frames_total{path="at_once"}'),
		waited: m.value('comb_ws_frames_total{path="waited"}'),
	};
}

test('live frames to readers that keep up are written by the fan-out, each once and in order', async () => {
	const admin = stack.admins[0];
	const X = await createChannel(stack, admin, { name: 'fan-out' });
	let rev = await accept(stack, admin, { d: uuid(), h: X, op: 'create', title: 'v0' });
	const readers = [];
	for (let i = 0; i < SYNCS; i++) {
		const c = await connectWs(stack.url, admin);
		sockets.push(c);
		c.send(['REQ', 's', { artifact: 'current', '#h': [X] }]);
		const first = await c.next((m) => m[1] === 's' && m[0] === 'EVENT');
		assert.equal(first[2].id, rev.id);
		assert.deepEqual(await c.next((m) => m[1] === 's'), ['EOSE', 's']);
		readers.push(c);
	}
	const before = await frames();
	const edits = [];
	for (let i = 1; i <= EDITS; i++) {
		rev = await accept(stack, admin, { d: tagValue(rev, 'd'), h: X, op: 'update', prev: rev.id,
			title: `v${i}` });
		edits.push(rev.id);
		for (const c of readers) {
			const m = await c.next((x) => x[1] === 's', 10000);
			assert.equal(m[0], 'EVENT', JSON.stringify(m));
			assert.equal(m[2].id, rev.id);
		}
	}
	for (const c of readers)
		await c.none((m) => m[1] === 's', 300);
	const after = await frames();
	// Every reader's socket had room: the frames went out at once (the
	// writers' OKs on their own connection may queue, nothing else).
	assert.ok(after.atOnce - before.atOnce >= SYNCS * EDITS,
		`${after.atOnce - before.atOnce} frames written at once for ${SYNCS * EDITS} live frames`);
	assert.ok(after.waited - before.waited < SYNCS,
		`${after.waited - before.waited} frames waited for their clients`);
});
