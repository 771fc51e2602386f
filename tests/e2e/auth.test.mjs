// NIP-98 authorization of every POST (PROTOCOL.md section 2): each way a
// token can be wrong is answered 401 `auth-required: ...` and writes
// nothing; a token is single use across every relay node sharing Redis;
// without Redis the relay fails closed with 503.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import {
	freePort, newKey, nip98Header, now, post, signEvent, startRelay,
} from './lib/harness.mjs';

let stack;
let admin;
let channel;

function nonce() {
	return ['nonce', crypto.randomBytes(8).toString('hex')];
}

async function stored(s, id) {
	const rows = await s.query(`SELECT count(*) FROM events WHERE id = '${id}'`);
	return Number(rows[0][0]);
}

// A chat message into the open test channel: stored if it ever got through.
function message(sk) {
	return signEvent(sk, { kind: 9, tags: [['h', channel]], content: crypto.randomBytes(8).toString('hex') });
}

function eventsUrl(s) {
	return `http://localhost:${s.port}/events`;
}

// Re-encodes a token after fn changed its event.
function tamper(header, fn) {
	const ev = JSON.parse(Buffer.from(header.slice('Nostr '.length), 'base64').toString('utf8'));
	fn(ev);
	return `Nostr ${Buffer.from(JSON.stringify(ev)).toString('base64')}`;
}

// Sends ev to /events with the prepared Authorization header (or none) and
// asserts a 401 with exactly message, in the {"error"} shape, nothing stored.
async function assertUnauthorized(s, ev, auth, message) {
	const opts = auth === null ? {} : { auth };
	const r = await post(s.url, '/events', ev, null, opts);
	assert.equal(r.status, 401, r.body);
	assert.deepEqual(r.json(), { error: message });
	assert.equal(await stored(s, ev.id), 0, 'nothing is stored');
}

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	channel = crypto.randomUUID();
	const create = signEvent(admin, { kind: 9007, tags: [['h', channel], ['name', 'auth']] });
	const r = await post(stack.url, '/events', create, admin);
	assert.equal(r.status, 200, r.body);
});

after(async () => {
	await stack?.stop();
});

describe('NIP-98 rejections', () => {
	test('a valid token is accepted (extra tags and content are ignored)', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		const token = signEvent(alice.sk, {
			kind: 27235,
			content: 'any text',
			tags: [['u', eventsUrl(stack)], ['method', 'POST'],
				['payload', crypto.createHash('sha256').update(JSON.stringify(ev)).digest('hex')],
				nonce(), ['client', 'e2e']],
		});
		const auth = `Nostr ${Buffer.from(JSON.stringify(token)).toString('base64')}`;
		const r = await post(stack.url, '/events', ev, null, { auth });
		assert.equal(r.status, 200, r.body);
		assert.deepEqual(r.json(), { id: ev.id, accepted: true, message: '' });
		assert.equal(await stored(stack, ev.id), 1);
	});

	test('a missing header', async () => {
		await assertUnauthorized(stack, message(newKey().sk), null, 'auth-required: missing authorization');
		const r = await post(stack.url, '/query', [{}], null);
		assert.equal(r.status, 401);
		assert.deepEqual(r.json(), { error: 'auth-required: missing authorization' });
		const c = await post(stack.url, '/count', [{}], null);
		assert.equal(c.status, 401);
		assert.deepEqual(c.json(), { error: 'auth-required: missing authorization' });
	});

	test('a header that is not a base64 NIP-98 event', async () => {
		const ev = message(newKey().sk);
		await assertUnauthorized(stack, ev, 'Nostr !!!not-base64!!!', 'auth-required: malformed authorization');
		await assertUnauthorized(stack, ev, 'Nostr ', 'auth-required: malformed authorization');
		await assertUnauthorized(stack, ev, 'Bearer abc', 'auth-required: unsupported authorization scheme');
		await assertUnauthorized(stack, ev, `Nostr ${Buffer.from('{"hello":1}').toString('base64')}`,
			'auth-required: invalid authorization event');
	});

	test('a token of the wrong kind', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		const auth = await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { kind: 1, extraTags: [nonce()] });
		await assertUnauthorized(stack, ev, auth, 'auth-required: wrong kind');
	});

	test('a stale and a future created_at', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { createdAt: now() - 120 }),
			'auth-required: stale authorization');
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { createdAt: now() + 120 }),
			'auth-required: authorization from the future');
	});

	test('a wrong u tag', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		for (const url of [
			`http://localhost:${stack.port}/query`,
			`http://example.com:${stack.port}/events`,
			`ftp://localhost:${stack.port}/events`,
			`http://localhost:${stack.port}/events?x=1`,
			`http://localhost/events`,
		]) {
			await assertUnauthorized(stack, ev,
				await nip98Header(alice.sk, url, 'POST', ev, { extraTags: [nonce()] }),
				'auth-required: url mismatch');
		}
		// https and another case of the host are accepted.
		const ok = await nip98Header(alice.sk, `https://LOCALHOST:${stack.port}/events`, 'POST', ev,
			{ extraTags: [nonce()] });
		const r = await post(stack.url, '/events', ev, null, { auth: ok });
		assert.equal(r.status, 200, r.body);
	});

	test('a wrong method', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'GET', ev, { extraTags: [nonce()] }),
			'auth-required: method mismatch');
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'post', ev, { extraTags: [nonce()] }),
			'auth-required: method mismatch');
	});

	test('a wrong or missing payload', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { payloadHash: 'ab'.repeat(32) }),
			'auth-required: payload mismatch');
		// The payload of another body.
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'POST', message(alice.sk), {}),
			'auth-required: payload mismatch');
		await assertUnauthorized(stack, ev,
			await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { payloadHash: null }),
			'auth-required: missing payload tag');
	});

	test('a bad signature or a bad id', async () => {
		const alice = newKey();
		const ev = message(alice.sk);
		const good = await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { extraTags: [nonce()] });
		await assertUnauthorized(stack, ev, tamper(good, (t) => {
			t.sig = (t.sig[0] === '0' ? '1' : '0') + t.sig.slice(1);
		}), 'auth-required: bad signature');
		// Signed by someone else over the same id.
		const bob = newKey();
		const other = await nip98Header(bob.sk, eventsUrl(stack), 'POST', ev, { extraTags: [nonce()] });
		await assertUnauthorized(stack, ev, tamper(good, (t) => {
			t.pubkey = JSON.parse(Buffer.from(other.slice(6), 'base64').toString()).pubkey;
		}), 'auth-required: bad event id');
		await assertUnauthorized(stack, ev, tamper(good, (t) => {
			t.content = 'changed after signing';
		}), 'auth-required: bad event id');
		// The untouched token still works: none of the above consumed it.
		const r = await post(stack.url, '/events', ev, null, { auth: good });
		assert.equal(r.status, 200, r.body);
	});

	test('a replayed token', async () => {
		const alice = newKey();
		const body = [{ kinds: [9] }];
		const auth = await nip98Header(alice.sk, `http://localhost:${stack.port}/query`, 'POST', body,
			{ extraTags: [nonce()] });
		const first = await post(stack.url, '/query', body, null, { auth });
		assert.equal(first.status, 200, first.body);
		const second = await post(stack.url, '/query', body, null, { auth });
		assert.equal(second.status, 401);
		assert.deepEqual(second.json(), { error: 'auth-required: authorization already used' });

		// every kind of /query and /count answer records the token's use;
		// an incremental read does it in the call that admits it
		for (const [path, b] of [
			['/query', [{ artifact: 'incremental', limit: 5 }]],
			['/query', [{ artifact: 'incremental', cursor: 'not a cursor' }]],
			['/query', [{ artifact: 'current' }]],
			['/query', [{ kinds: [9] }, { kinds: [1] }]],
			['/query', { not: 'an array' }],
			['/count', [{ kinds: [9] }]],
		]) {
			const a = await nip98Header(alice.sk, `http://localhost:${stack.port}${path}`, 'POST', b,
				{ extraTags: [nonce()] });
			const one = await post(stack.url, path, b, null, { auth: a });
			assert.notEqual(one.status, 401, one.body);
			const two = await post(stack.url, path, b, null, { auth: a });
			assert.equal(two.status, 401, `${path} ${JSON.stringify(b)}: ${two.body}`);
			assert.deepEqual(two.json(), { error: 'auth-required: authorization already used' });
		}

		const ev = message(alice.sk);
		const evAuth = await nip98Header(alice.sk, eventsUrl(stack), 'POST', ev, { extraTags: [nonce()] });
		assert.equal((await post(stack.url, '/events', ev, null, { auth: evAuth })).status, 200);
		await stack.psql(`DELETE FROM event_tags WHERE event_seq = (SELECT seq FROM events WHERE id = '${ev.id}');` +
			` DELETE FROM events WHERE id = '${ev.id}'`);
		await assertUnauthorized(stack, ev, evAuth, 'auth-required: authorization already used');
	});

	test('the event author must be the authenticated user', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const ev = message(alice.sk);
		const r = await post(stack.url, '/events', ev, bob.sk);
		assert.equal(r.status, 403);
		assert.deepEqual(r.json(), {
			id: ev.id, accepted: false, message: 'restricted: event author is not the authenticated user',
		});
		assert.equal(await stored(stack, ev.id), 0);
	});
});

describe('the replay store is shared and fails closed', () => {
	test('a token used on one relay node is refused by another', async () => {
		const two = await startRelay({ nodes: 2 });
		try {
			const alice = newKey();
			const host = `localhost:${two.ports[0]}`;
			for (const [first, second] of [[0, 1], [1, 0]]) {
				const body = [{ authors: [alice.pk] }];
				const auth = await nip98Header(alice.sk, `http://${host}/query`, 'POST', body,
					{ extraTags: [nonce()] });
				const a = await post(two.urls[first], '/query', body, null, { auth, host });
				assert.equal(a.status, 200, a.body);
				const b = await post(two.urls[second], '/query', body, null, { auth, host });
				assert.equal(b.status, 401, b.body);
				assert.deepEqual(b.json(), { error: 'auth-required: authorization already used' });
			}
		} finally {
			await two.stop();
		}
	});

	test('with Redis unreachable a request fails with 503 and writes nothing', async () => {
		const dead = await freePort();
		const s = await startRelay({
			env: { COMB_REDIS_URL: `redis://127.0.0.1:${dead}/0` },
			capture: false,
			ready: false,
		});
		try {
			const sAdmin = s.admins[0];
			const c = crypto.randomUUID();
			const create = signEvent(sAdmin, { kind: 9007, tags: [['h', c], ['name', 'x']] });
			const r = await post(s.url, '/events', create, sAdmin);
			assert.equal(r.status, 503, r.body);
			assert.deepEqual(r.json(), { error: 'error: replay store unavailable' });
			assert.match(r.headers['retry-after'] ?? '', /^[0-9]+$/);
			assert.equal(await stored(s, create.id), 0);
			assert.deepEqual(await s.query(`SELECT count(*) FROM channels WHERE id = '${c}'`), [['0']]);
			const q = await post(s.url, '/query', [{}], sAdmin);
			assert.equal(q.status, 503);
			assert.deepEqual(q.json(), { error: 'error: replay store unavailable' });
			const inc = await post(s.url, '/query', [{ artifact: 'incremental' }], sAdmin);
			assert.equal(inc.status, 503, inc.body);
			assert.deepEqual(inc.json(), { error: 'error: replay store unavailable' });
		} finally {
			await s.stop();
		}
	});
});
