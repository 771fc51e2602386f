// Replay protection against clock skew (issue 35 item 10; PROTOCOL.md
// section 2, NIP-98): a token accepted at either edge of the allowed skew
// (created_at 60 s either side of the relay's clock) is refused as a
// replay for as long as any node could still accept it: its use is kept in
// Redis until created_at + 60 s + 300 s of clock margin, so that a node
// whose clock trails by up to five minutes refuses it too.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { newKey, nip98Header, now, post, readStackEnv, startRelay } from './lib/harness.mjs';

const execFileP = promisify(execFile);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const MAX_SKEW = 60;
const CLOCK_MARGIN = 300;
// How far inside the skew the tokens are made: close to the edge, yet far
// enough that a busy machine still sends them before they go stale.
const EDGE_SLACK = 5;

// The token's event id, from an `Authorization: Nostr <base64>` value.
function tokenId(header) {
	return JSON.parse(Buffer.from(header.slice('Nostr '.length), 'base64').toString()).id;
}

test('a token accepted at the edge of the skew stays refused as a replay while it could be accepted', async () => {
	const stack = await startRelay();
	const port = readStackEnv().COMB_TEST_REDIS_PORT;
	const redis = async (...args) => (await execFileP('redis-cli',
		['-p', String(port), '-n', String(stack.redisDb), ...args])).stdout.trim();
	try {
		const k = newKey();
		const body = JSON.stringify([{ kinds: [9], limit: 1 }]);
		const url = `http://${new URL(stack.url).host}/query`;
		const send = (auth, payload = body) => post(stack.url, '/query', payload, k.sk, { auth });
		for (const edge of [MAX_SKEW - EDGE_SLACK, -(MAX_SKEW - EDGE_SLACK)]) {
			const createdAt = now() + edge;
			const auth = await nip98Header(k.sk, url, 'POST', body, { createdAt });
			const first = await send(auth);
			assert.equal(first.status, 200, `created_at now${edge > 0 ? '+' : ''}${edge}: ${first.body}`);
			const again = await send(auth);
			assert.equal(again.status, 401);
			assert.deepEqual(again.json(), { error: 'auth-required: authorization already used' });
			// remembered until no node, even one whose clock trails by the
			// margin, could accept it
			const expires = Number(await redis('EXPIRETIME', `comb:nip98:${tokenId(auth)}`));
			assert.equal(expires, createdAt + MAX_SKEW + CLOCK_MARGIN, `the use of the token at ${edge}`);
		}
		// the past-edge token: once it is too old to be accepted at all, it
		// is refused as stale, and its use is still remembered (another body,
		// so that its token differs from the loop's even when made in the
		// same second)
		const lateBody = JSON.stringify([{ kinds: [9], limit: 2 }]);
		const createdAt = now() - (MAX_SKEW - EDGE_SLACK);
		const auth = await nip98Header(k.sk, url, 'POST', lateBody, { createdAt });
		assert.equal((await send(auth, lateBody)).status, 200);
		assert.deepEqual((await send(auth, lateBody)).json(), { error: 'auth-required: authorization already used' });
		while (now() <= createdAt + MAX_SKEW)
			await sleep(200);
		const late = await send(auth, lateBody);
		assert.equal(late.status, 401);
		assert.match(late.json().error, /^auth-required: /);
		assert.ok(Number(await redis('TTL', `comb:nip98:${tokenId(auth)}`)) > 0,
			'its use outlives the time it could be accepted on this node');
	} finally {
		await stack.stop();
	}
});
