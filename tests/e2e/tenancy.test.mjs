// Tenancy (PROTOCOL.md sections 1 and 10): every request belongs to the
// community of its Host header; nothing of one community is visible from
// another, even for equal channel UUIDs or the same signed event; an
// unknown host gets 404 and nothing is written.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { get, newKey, post, signEvent, startRelay } from './lib/harness.mjs';

let stack;
let adminA;
let adminB;

const A = 'a.example';
const B = 'b.example';

function opts(host) {
	return { host, nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function sendEvent(host, sk, ev) {
	const r = await post(stack.url, '/events', ev, sk, opts(host));
	return { ev, status: r.status, json: r.json() };
}

async function send(host, sk, template) {
	return sendEvent(host, sk, signEvent(sk, { content: crypto.randomBytes(4).toString('hex'), ...template }));
}

async function accept(host, sk, template) {
	const res = await send(host, sk, template);
	assert.deepEqual({ status: res.status, json: res.json },
		{ status: 200, json: { id: res.ev.id, accepted: true, message: '' } });
	return res.ev;
}

async function readIds(host, sk, filter) {
	const r = await post(stack.url, '/query', [filter], sk, opts(host));
	assert.equal(r.status, 200, r.body);
	return r.json().map((e) => e.id);
}

async function communityOf(id) {
	const rows = await stack.query(`SELECT community_id FROM events WHERE id = '${id}' ORDER BY community_id`);
	return rows.map((r) => r[0]);
}

before(async () => {
	stack = await startRelay({ communities: [{ hosts: [A, 'a2.example'] }, { hosts: [B] }] });
	[adminA, adminB] = stack.admins;
});

after(async () => {
	await stack?.stop();
});

describe('communities are separate', () => {
	test('the same channel UUID in two communities stays two channels', async () => {
		const alice = newKey();
		const id = crypto.randomUUID();
		await accept(A, adminA, { kind: 9007, tags: [['h', id], ['name', 'in a'], ['visibility', 'private']] });
		await accept(B, adminB, { kind: 9007, tags: [['h', id], ['name', 'in b']] });
		const rows = await stack.query(`SELECT community_id, name, visibility FROM channels WHERE id = '${id}' ORDER BY community_id`);
		assert.deepEqual(rows, [
			[stack.communities[0].id, 'in a', '2'],
			[stack.communities[1].id, 'in b', '0'],
		]);
		// Alice may write to B's open channel, not to A's private one.
		const inB = await accept(B, alice.sk, { kind: 9, tags: [['h', id]], content: 'in b' });
		const refused = await send(A, alice.sk, { kind: 9, tags: [['h', id]], content: 'in a' });
		assert.deepEqual({ status: refused.status, json: refused.json }, {
			status: 403, json: { id: refused.ev.id, accepted: false, message: 'restricted: not a channel member' },
		});
		assert.deepEqual(await communityOf(refused.ev.id), []);
		// A's member reads nothing of B through A.
		await accept(A, adminA, { kind: 9000, tags: [['h', id], ['p', alice.pk]] });
		const inA = await accept(A, alice.sk, { kind: 9, tags: [['h', id]], content: 'in a' });
		assert.deepEqual(await readIds(A, alice.sk, { '#h': [id], kinds: [9] }), [inA.id]);
		assert.deepEqual(await readIds(B, alice.sk, { '#h': [id], kinds: [9] }), [inB.id]);
		assert.deepEqual(await readIds(A, alice.sk, { ids: [inB.id] }), []);
		assert.deepEqual(await readIds(B, alice.sk, { ids: [inA.id] }), []);
		// Membership in A grants nothing in B.
		assert.deepEqual(await stack.query(`SELECT count(*) FROM members WHERE channel_id = '${id}' AND pubkey = '${alice.pk}'`),
			[['1']]);
	});

	test('the same signed event stored in two communities never interacts', async () => {
		const alice = newKey();
		const id = crypto.randomUUID();
		await accept(A, adminA, { kind: 9007, tags: [['h', id], ['name', 'a']] });
		await accept(B, adminB, { kind: 9007, tags: [['h', id], ['name', 'b']] });
		const ev = signEvent(alice.sk, { kind: 9, tags: [['h', id]], content: 'twice' });
		for (const host of [A, B]) {
			const r = await sendEvent(host, alice.sk, ev);
			assert.deepEqual(r.json, { id: ev.id, accepted: true, message: '' });
		}
		assert.deepEqual(await communityOf(ev.id), [stack.communities[0].id, stack.communities[1].id]);
		// Deleting it in A leaves B's copy alone.
		await accept(A, alice.sk, { kind: 5, tags: [['h', id], ['e', ev.id]] });
		assert.deepEqual(await readIds(A, alice.sk, { ids: [ev.id] }), []);
		assert.deepEqual(await readIds(B, alice.sk, { ids: [ev.id] }), [ev.id]);
	});

	test('a community admin is an admin of their own community only', async () => {
		const id = crypto.randomUUID();
		const res = await send(B, adminA, { kind: 9007, tags: [['h', id], ['name', 'x']] });
		assert.deepEqual({ status: res.status, json: res.json }, {
			status: 403, json: { id: res.ev.id, accepted: false, message: 'restricted: not allowed to create channels' },
		});
		await accept(B, adminB, { kind: 9007, tags: [['h', id], ['name', 'b'], ['visibility', 'private']] });
		const m = await accept(B, adminB, { kind: 9, tags: [['h', id]] });
		assert.deepEqual(await readIds(B, adminA, { ids: [m.id] }), []);
		const mod = await send(B, adminA, { kind: 9002, tags: [['h', id], ['name', 'taken']] });
		assert.deepEqual(mod.json, { id: mod.ev.id, accepted: false, message: 'restricted: not a channel member' });
		assert.deepEqual(await stack.query(`SELECT name FROM channels WHERE id = '${id}'`), [['b']]);
	});

	test('every host of a community, in any case and with any port, reaches it', async () => {
		const id = crypto.randomUUID();
		await accept(A, adminA, { kind: 9007, tags: [['h', id], ['name', 'a']] });
		const m = await accept('A2.Example:9999', adminA, { kind: 9, tags: [['h', id]] });
		assert.deepEqual(await readIds(`a.EXAMPLE:${stack.port}`, adminA, { ids: [m.id] }), [m.id]);
		assert.deepEqual(await readIds(B, adminA, { ids: [m.id] }), []);
	});
});

describe('an unknown host', () => {
	test('gets 404 unknown community for every route and writes nothing', async () => {
		const alice = newKey();
		const host = 'nobody.example';
		const ev = signEvent(alice.sk, { kind: 9, tags: [['h', crypto.randomUUID()]], content: 'x' });
		for (const [path, body] of [['/events', ev], ['/query', [{}]], ['/count', [{}]]]) {
			const r = await post(stack.url, path, body, alice.sk, opts(host));
			assert.equal(r.status, 404, `${path}: ${r.body}`);
			assert.deepEqual(r.json(), { error: 'unknown community' });
		}
		const nip11 = await get(stack.url, '/', { host, headers: { accept: 'application/nostr+json' } });
		assert.equal(nip11.status, 404);
		assert.deepEqual(nip11.json(), { error: 'unknown community' });
		assert.deepEqual(await communityOf(ev.id), []);
	});
});
