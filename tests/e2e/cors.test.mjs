// CORS (PROTOCOL.md section 10 "Browsers"): every path answers an OPTIONS
// preflight with 204 and the Access-Control-* headers on any host and
// without authorization, whether or not the request carries a browser's
// Origin and Access-Control-Request-* headers; every other answer, errors
// included, carries Access-Control-Allow-Origin: *.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { createChannel, uuid } from './lib/artifacts.mjs';
import { get, newKey, post, request, startRelay } from './lib/harness.mjs';

let stack;
let admin;

before(async () => {
	stack = await startRelay({ env: { COMB_MAX_MESSAGE_LENGTH: '4096' } });
	admin = stack.admins[0];
});

after(async () => {
	await stack?.stop();
});

const PREFLIGHT = {
	'access-control-allow-origin': '*',
	'access-control-allow-methods': 'GET, POST, OPTIONS',
	'access-control-allow-headers': 'Authorization, Content-Type, Accept',
	'access-control-max-age': '86400',
};

const BROWSER = {
	origin: 'http://board.example:8080',
	'access-control-request-method': 'POST',
	'access-control-request-headers': 'authorization,content-type',
};

function corsHeaders(headers) {
	return Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith('access-control-')));
}

test('OPTIONS answers 204 with the preflight headers on every path and host', async () => {
	for (const path of ['/', '/events', '/query', '/count', '/healthz', '/readyz', '/metrics', '/no/such/path']) {
		for (const host of [`localhost:${stack.port}`, 'unknown.example']) {
			for (const headers of [{}, BROWSER]) {
				const r = await request(stack.url, { method: 'OPTIONS', path, host, headers });
				const what = `OPTIONS ${path} on ${host} ${headers.origin ? 'from a browser' : 'bare'}`;
				assert.equal(r.status, 204, `${what}: ${r.body}`);
				assert.deepEqual(corsHeaders(r.headers), PREFLIGHT, what);
				assert.equal(r.body, '', what);
			}
		}
	}
});

test('every other answer carries Access-Control-Allow-Origin: *', async () => {
	const sk = newKey().sk;
	const h = await createChannel(stack, admin);
	const answers = {
		healthz: await get(stack.url, '/healthz'),
		readyz: await get(stack.url, '/readyz'),
		metrics: await get(stack.url, '/metrics'),
		nip11: await get(stack.url, '/', { headers: { accept: 'application/nostr+json' } }),
		'unknown community': await get(stack.url, '/', { host: 'unknown.example' }),
		'unknown path': await get(stack.url, '/nope'),
		'no authorization': await post(stack.url, '/events', { kind: 9 }, null),
		'invalid filter': await post(stack.url, '/query', [{ artifact: 'nope' }], sk),
		'body too large': await post(stack.url, '/query', [{ '#x': ['y'.repeat(5000)] }], sk),
		'query': await post(stack.url, '/query', [{ artifact: 'current', '#h': [h] }], sk),
		'count': await post(stack.url, '/count', [{ artifact: 'current', '#h': [h] }], sk),
		'incremental': await post(stack.url, '/query', [{ artifact: 'incremental', '#h': [h] }], sk),
		'bad cursor': await post(stack.url, '/query', [{ artifact: 'incremental', cursor: 'x' }], sk),
		'refused event': await post(stack.url, '/events', {
			id: '0'.repeat(64), pubkey: '0'.repeat(64), created_at: 1, kind: 45010,
			tags: [['d', uuid()]], content: '', sig: '0'.repeat(128),
		}, sk),
	};
	const statuses = {};
	for (const [what, r] of Object.entries(answers)) {
		statuses[what] = r.status;
		assert.equal(r.headers['access-control-allow-origin'], '*', `${what} (${r.status} ${r.body.slice(0, 80)})`);
	}
	// the answers cover successes and each kind of error
	assert.deepEqual(new Set(Object.values(statuses)), new Set([200, 400, 401, 404, 413]),
		JSON.stringify(statuses));
});

test('a refused WebSocket upgrade carries Access-Control-Allow-Origin: *', async () => {
	const r = await request(stack.url, {
		host: 'unknown.example',
		headers: {
			connection: 'Upgrade', upgrade: 'websocket',
			'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
		},
	});
	assert.equal(r.status, 404);
	assert.deepEqual(r.json(), { error: 'unknown community' });
	assert.equal(r.headers['access-control-allow-origin'], '*');
});
