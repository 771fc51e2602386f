// A relay follows every capture endpoint of COMB_CAPTURE_ENDPOINT, and an
// endpoint whose host name resolves slowly must not hold up the others
// (docs/operations.md "Endpoints"). ZeroMQ looks a name up again at each
// reconnect, in the I/O thread that serves the connection: when the
// container of a capture that died loses its DNS record, those lookups can
// take seconds. Sharing one I/O thread with the capture that took over,
// they held its heartbeats back for longer than three intervals, and the
// relay closed every sync a second time (compose-test saw it once).
//
// tests/tools/comb-slow-resolve.so, loaded into the relay, makes one name
// take two seconds to fail; lib/fakecapture.mjs is the live endpoint. A
// node follows at most eight endpoints (an I/O thread each) and says so
// at start when given more.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
	buildDir, connectWs, runRelayUntilExit, scrapeMetrics, stackDir, startRelay,
} from './lib/harness.mjs';
import { createChannel } from './lib/artifacts.mjs';
import { FakeCapture } from './lib/fakecapture.mjs';

// Three missed intervals (0.9 s) are a lost feed; a slow lookup takes 2 s.
const HEARTBEAT_MS = 300;
const SLOW_MS = 2000;
const SLOW_HOST = 'slow-capture.invalid';
const EPOCH = 0xe1n;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let fake;
let stack;
let socket;
const slowLog = path.join(stackDir, 'logs', `feed_endpoints-${process.pid}-lookups.log`);

before(async () => {
	fake = new FakeCapture();
	await fake.listen();
	fake.marksOnSubscribe(() => EPOCH);
	fake.beatEvery(EPOCH, HEARTBEAT_MS);
	fs.mkdirSync(path.dirname(slowLog), { recursive: true });
	fs.rmSync(slowLog, { force: true });
	const asan = process.env.ASAN_OPTIONS;
	stack = await startRelay({
		capture: false,
		ready: false,
		env: {
			// the slow endpoint first, as compose.yaml lists the capture
			// that died before the standby
			COMB_CAPTURE_ENDPOINT: `tcp://${SLOW_HOST}:7450,${fake.endpoint}`,
			COMB_CAPTURE_HEARTBEAT_MS: String(HEARTBEAT_MS),
			LD_PRELOAD: path.join(buildDir, 'lib', 'comb-slow-resolve.so'),
			SLOW_RESOLVE_HOST: SLOW_HOST,
			SLOW_RESOLVE_MS: String(SLOW_MS),
			SLOW_RESOLVE_LOG: slowLog,
			// a sanitized relay accepts a library loaded before its runtime
			ASAN_OPTIONS: `${asan ? `${asan}:` : ''}verify_asan_link_order=0`,
		},
	});
});

after(async () => {
	socket?.ws.terminate();
	await stack?.stop();
	fake?.stopBeats();
	await fake?.close();
});

const isFor = (id) => (m) => ['EVENT', 'EOSE', 'CLOSED'].includes(m[0]) && m[1] === id;

function slowLookups() {
	return fs.existsSync(slowLog) ? fs.readFileSync(slowLog, 'utf8').split('\n').filter(Boolean).length : 0;
}

test('an endpoint whose name resolves slowly does not hold up the live one', async () => {
	const X = await createChannel(stack, stack.admins[0], { name: 'endpoints' });
	socket = await connectWs(stack.url, stack.admins[0]);
	socket.send(['REQ', 'sync', { artifact: 'current', '#h': [X] }]);
	assert.deepEqual(await socket.next(isFor('sync'), 10000), ['EOSE', 'sync']);

	const before = slowLookups();
	// Three slow lookups or more, each longer than three intervals.
	await socket.none(isFor('sync'), 3 * SLOW_MS + 1000);
	assert.ok(slowLookups() - before >= 2,
		`the relay looked ${SLOW_HOST} up ${slowLookups() - before} times meanwhile`);
	const m = await scrapeMetrics(stack.url);
	assert.deepEqual({ alive: m.value('comb_feed_alive'), losses: m.value('comb_feed_heartbeat_losses_total') },
		{ alive: 1, losses: 0 });
});

test('more capture endpoints than a node follows stop it at start, saying so', async () => {
	const endpoints = Array.from({ length: 9 }, (_, i) => `tcp://127.0.0.1:${17450 + i}`);
	const r = await runRelayUntilExit({ COMB_CAPTURE_ENDPOINT: endpoints.join(',') });
	assert.notEqual(r.code, 0, r.output);
	assert.match(r.output, /COMB_CAPTURE_ENDPOINT names 9 endpoints, at most 8/);
});
