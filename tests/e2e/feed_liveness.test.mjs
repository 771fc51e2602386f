// The heartbeat clock of the relay's capture feed, message by message
// (docs/operations.md "Epoch, sequence numbers, heartbeats and marks"),
// with lib/fakecapture.mjs standing in for capture. Its own file, with a
// slow heartbeat, so that the margins hold on a loaded machine.
//
// - A failover: the new leader's first message can be a mark that arrives
//   shortly before the former leader's heartbeats would count as missed.
//   The new epoch closes every sync once; a sync opened afterwards must
//   stay open while the new leader's heartbeats come, not be closed a
//   second time for the former leader's silence. (CI saw that second
//   close as an e2e/multinode failure: `resync: change feed interrupted`
//   on a sync opened after a standby took over.)
// - A relay that could not listen (its process stopped, or its feed
//   thread held up) does not count the heartbeats it could not read as
//   missed: they are waiting for it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { connectWs, scrapeMetrics, startRelay } from './lib/harness.mjs';
import { createChannel } from './lib/artifacts.mjs';
import { FakeCapture } from './lib/fakecapture.mjs';

// The relay counts three missed intervals (6 s) from the last heartbeat.
const HEARTBEAT_MS = 2000;
const FORMER = 0xaan;
const NEW = 0xbbn;
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

let fake;
let stack;
let epoch = FORMER;
const sockets = [];

before(async () => {
	fake = new FakeCapture();
	await fake.listen();
	// Like capture: a subscription to "<community>:" is answered by a mark.
	fake.marksOnSubscribe(() => epoch);
	stack = await startRelay({
		capture: false,
		ready: false,
		env: { COMB_CAPTURE_ENDPOINT: fake.endpoint, COMB_CAPTURE_HEARTBEAT_MS: String(HEARTBEAT_MS) },
	});
});

after(async () => {
	for (const s of sockets)
		s.ws.terminate();
	await stack?.stop();
	await fake?.close();
});

const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

async function openSync(c, id, h) {
	c.send(['REQ', id, { artifact: 'current', '#h': [h] }]);
	assert.deepEqual(await c.next(isFor(id), 10000), ['EOSE', id]);
}

async function feedMetrics() {
	const m = await scrapeMetrics(stack.url);
	return { alive: m.value('comb_feed_alive'), losses: m.value('comb_feed_heartbeat_losses_total') };
}

test('a new leader gets three heartbeat intervals from its first message', async () => {
	const X = await createChannel(stack, stack.admins[0], { name: 'failover' });
	const c = await connectWs(stack.url, stack.admins[0]);
	sockets.push(c);
	fake.beatEvery(epoch, HEARTBEAT_MS);
	await openSync(c, 'before', X);
	fake.stopBeats();

	// The former leader's last heartbeat: its silence starts here.
	fake.heartbeat(epoch);
	const lastBeat = Date.now();
	await sleep(1.5 * HEARTBEAT_MS);
	// The new leader's first message is a mark.
	epoch = NEW;
	fake.mark(epoch, Number(stack.communities[0].id), 0);
	assert.deepEqual(await c.next(isFor('before'), 5000),
		['CLOSED', 'before', 'resync: change feed interrupted']);
	await openSync(c, 'after', X);

	// Past three of the former leader's intervals, within three of the
	// new leader's first message: its first heartbeat.
	await sleep(lastBeat + 3.5 * HEARTBEAT_MS - Date.now());
	fake.heartbeat(epoch);
	await c.none(isFor('after'), 500);
	assert.deepEqual(await feedMetrics(), { alive: 1, losses: 0 });

	// The new leader's silence is still noticed.
	const newBeat = Date.now();
	assert.deepEqual(await c.next(isFor('after'), 4 * HEARTBEAT_MS),
		['CLOSED', 'after', 'resync: change feed interrupted']);
	const took = Date.now() - newBeat;
	assert.ok(took >= 2 * HEARTBEAT_MS, `closed ${took} ms after the new leader's heartbeat`);
	assert.deepEqual(await feedMetrics(), { alive: 0, losses: 1 });
});

test('heartbeats sent while the relay could not read them are not missed', async () => {
	const X = await createChannel(stack, stack.admins[0], { name: 'stalled' });
	const c = await connectWs(stack.url, stack.admins[0]);
	sockets.push(c);
	fake.beatEvery(epoch, HEARTBEAT_MS);
	await openSync(c, 'sync', X);
	const { losses } = await feedMetrics();
	// Longer than three intervals, while capture goes on beating.
	stack.signalNode(0, 'SIGSTOP');
	try {
		await sleep(3.5 * HEARTBEAT_MS);
	} finally {
		stack.signalNode(0, 'SIGCONT');
	}
	await c.none(isFor('sync'), HEARTBEAT_MS);
	assert.deepEqual(await feedMetrics(), { alive: 1, losses });
	fake.stopBeats();
});
