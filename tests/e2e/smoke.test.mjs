// Smoke test: one relay node answers health checks, binds requests to
// communities by Host header, and describes itself with NIP-11.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { get, openSocket, startRelay } from './lib/harness.mjs';

let stack;

before(async () => {
	stack = await startRelay();
});

after(async () => {
	await stack?.stop();
});

test('GET /healthz answers 200 ok', async () => {
	const r = await get(stack.url, '/healthz');
	assert.equal(r.status, 200);
	assert.equal(r.body.trim(), 'ok');
});

test('an unknown host gets 404 unknown community', async () => {
	const r = await get(stack.url, '/', {
		host: 'unknown.example',
		headers: { accept: 'application/nostr+json' },
	});
	assert.equal(r.status, 404);
	assert.deepEqual(r.json(), { error: 'unknown community' });
});

test('the community is bound to the host without its port, case-insensitively', async () => {
	const r = await get(stack.url, '/', {
		host: `LocalHost:${stack.port + 1}`,
		headers: { accept: 'application/nostr+json' },
	});
	assert.equal(r.status, 200);
});

test('a WebSocket upgrade on an unknown host is refused with 404', async () => {
	await assert.rejects(openSocket(stack.wsUrl, { host: 'unknown.example' }),
		(err) => {
			assert.equal(err.status, 404);
			assert.deepEqual(JSON.parse(err.body), { error: 'unknown community' });
			return true;
		});
});

test('NIP-11 on localhost names the relay, its key and its NIPs', async () => {
	const r = await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } });
	assert.equal(r.status, 200);
	assert.match(r.headers['content-type'] ?? '', /^application\/(nostr\+)?json/);
	const info = r.json();
	assert.equal(typeof info.name, 'string');
	assert.ok(info.name.length > 0, 'name is not empty');
	assert.equal(info.pubkey, stack.relayPubkey);
	assert.equal(info.software, 'comb');
	assert.ok(Array.isArray(info.supported_nips), 'supported_nips is an array');
	for (const nip of [1, 9, 11, 29, 42, 98])
		assert.ok(info.supported_nips.includes(nip), `supported_nips has ${nip}`);
	assert.equal(info.limitation.auth_required, true);
	assert.ok(info.artifacts.modes.includes('incremental'), 'incremental gate is on');
});
