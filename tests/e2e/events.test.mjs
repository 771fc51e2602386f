// POST /events (PROTOCOL.md sections 3 and 10): the answer shapes, every
// kind of malformed event (each answered `invalid:` and never stored),
// chat messages (kind 9) and deletion requests (kind 5).

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { newKey, now, post, signEvent, startRelay } from './lib/harness.mjs';

let stack;
let admin;
let open;      // an open channel
let secret;    // a private channel with no members but the admin

function authOpts() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function postBody(sk, body) {
	return post(stack.url, '/events', body, sk, authOpts());
}

async function send(sk, template) {
	const ev = signEvent(sk, { content: crypto.randomBytes(4).toString('hex'), ...template });
	const r = await postBody(sk, ev);
	return { ev, status: r.status, json: r.json() };
}

async function stored(id) {
	const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${id}'`);
	return Number(rows[0][0]);
}

async function eventCount() {
	return Number((await stack.query('SELECT count(*) FROM events'))[0][0]);
}

function assertAccepted(res) {
	assert.deepEqual({ status: res.status, json: res.json },
		{ status: 200, json: { id: res.ev.id, accepted: true, message: '' } });
}

async function assertRefused(res, status, message) {
	assert.deepEqual({ status: res.status, json: res.json },
		{ status, json: { id: res.ev.id, accepted: false, message } });
	assert.equal(await stored(res.ev.id), 0, 'a refused event is not stored');
}

async function accept(sk, template) {
	const res = await send(sk, template);
	assertAccepted(res);
	return res.ev;
}

// Posts a raw body and asserts an {"error"} answer; nothing new is stored.
async function assertBodyRefused(sk, body, status, error) {
	const before_ = await eventCount();
	const r = await postBody(sk, body);
	assert.equal(r.status, status, r.body);
	assert.deepEqual(r.json(), { error });
	assert.equal(await eventCount(), before_, 'nothing is stored');
}

// Posts an event that parses but breaks a limit: a 400 in the
// {"id","accepted","message"} shape; nothing new is stored.
async function assertEventRefused(sk, ev, message) {
	const before_ = await eventCount();
	const r = await postBody(sk, ev);
	assert.equal(r.status, 400, r.body);
	assert.deepEqual(r.json(), { id: ev.id, accepted: false, message });
	assert.equal(await eventCount(), before_, 'nothing is stored');
}

async function read(sk, filter) {
	const r = await post(stack.url, '/query', [filter], sk, authOpts());
	assert.equal(r.status, 200, r.body);
	return r.json();
}

async function readIds(sk, filter) {
	return (await read(sk, filter)).map((e) => e.id);
}

// Stores an event row directly, as the artifact path or the relay would.
async function insertRaw(ev, channel) {
	await stack.psql('INSERT INTO events (community_id, id, pubkey, created_at, kind, channel_id, raw)' +
		` VALUES (${stack.communities[0].id}, '${ev.id}', '${ev.pubkey}', ${ev.created_at}, ${ev.kind},` +
		` '${channel}', '${JSON.stringify(ev)}')`);
}

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	open = crypto.randomUUID();
	secret = crypto.randomUUID();
	await accept(admin, { kind: 9007, tags: [['h', open], ['name', 'open']] });
	await accept(admin, { kind: 9007, tags: [['h', secret], ['name', 'secret'], ['visibility', 'private']] });
});

after(async () => {
	await stack?.stop();
});

describe('chat messages (kind 9)', () => {
	test('a message is stored in its channel exactly as sent', async () => {
		const alice = newKey();
		const ev = await accept(alice.sk, { kind: 9, tags: [['h', open], ['p', stack.communities[0].owner]], content: 'héllo "you"\n\u0001' });
		const rows = await stack.query(`SELECT channel_id, kind, pubkey, created_at, deleted, redacted, raw FROM events WHERE id = '${ev.id}'`);
		assert.equal(rows.length, 1);
		const [ch, kind, pubkey, createdAt, deleted, redacted, raw] = rows[0];
		assert.deepEqual([ch, kind, pubkey, Number(createdAt), deleted, redacted],
			[open, '9', alice.pk, ev.created_at, 'f', 'f']);
		// raw is the event as served: JSON.stringify of the seven keys in NIP-01 order.
		const { id, sig, content, tags: evTags } = ev;
		assert.equal(raw, JSON.stringify({
			id, pubkey: ev.pubkey, created_at: ev.created_at, kind: ev.kind, tags: evTags, content, sig,
		}));
		assert.deepEqual(await read(alice.sk, { ids: [ev.id] }), [JSON.parse(JSON.stringify(ev))]);
		// Its single-letter tags are indexed for #p; #h is its channel.
		const tags = await stack.query('SELECT name, value FROM event_tags WHERE event_seq =' +
			` (SELECT seq FROM events WHERE id = '${ev.id}') ORDER BY name`);
		assert.deepEqual(tags, [['p', stack.communities[0].owner]]);
	});

	test('sending the same message again is accepted and stores it once', async () => {
		const alice = newKey();
		const ev = await accept(alice.sk, { kind: 9, tags: [['h', open]] });
		const r = await postBody(alice.sk, ev);
		assert.equal(r.status, 200);
		assert.deepEqual(r.json(), { id: ev.id, accepted: true, message: '' });
		assert.equal(await stored(ev.id), 1);
	});

	test('the channel tag must be exactly one canonical UUID', async () => {
		const alice = newKey();
		await assertRefused(await send(alice.sk, { kind: 9, tags: [] }), 400,
			'invalid: chat messages need exactly one h tag');
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', open], ['h', open]] }), 400,
			'invalid: chat messages need exactly one h tag');
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h']] }), 400,
			'invalid: chat messages need exactly one h tag');
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', open.toUpperCase()]] }), 400,
			'invalid: h must be a canonical channel uuid');
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', 'general']] }), 400,
			'invalid: h must be a canonical channel uuid');
	});

	test('a private or missing channel answers alike', async () => {
		const alice = newKey();
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', secret]] }), 403,
			'restricted: not a channel member');
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', crypto.randomUUID()]] }), 403,
			'restricted: not a channel member');
	});

	test('NUL is accepted in content and served back unchanged', async () => {
		const alice = newKey();
		const ev = await accept(alice.sk, { kind: 9, tags: [['h', open]], content: 'a\u0000b' });
		const [back] = await read(alice.sk, { ids: [ev.id] });
		assert.equal(back.content, 'a\u0000b');
	});
});

describe('malformed events are refused and never stored', () => {
	test('a wrong id', async () => {
		const alice = newKey();
		const ev = { ...signEvent(alice.sk, { kind: 9, tags: [['h', open]], content: 'x' }) };
		ev.content = 'changed';
		const r = await postBody(alice.sk, ev);
		assert.equal(r.status, 400);
		assert.deepEqual(r.json(), { id: ev.id, accepted: false, message: 'invalid: bad event id' });
		assert.equal(await stored(ev.id), 0);
	});

	test('a wrong signature', async () => {
		const alice = newKey();
		const ev = { ...signEvent(alice.sk, { kind: 9, tags: [['h', open]], content: 'x' }) };
		ev.sig = (ev.sig[0] === 'a' ? 'b' : 'a') + ev.sig.slice(1);
		const r = await postBody(alice.sk, ev);
		assert.equal(r.status, 400);
		assert.deepEqual(r.json(), { id: ev.id, accepted: false, message: 'invalid: bad signature' });
		assert.equal(await stored(ev.id), 0);
	});

	test('invalid JSON, duplicate keys and invalid UTF-8', async () => {
		const alice = newKey();
		const ev = signEvent(alice.sk, { kind: 9, tags: [['h', open]], content: 'zz' });
		const text = JSON.stringify(ev);
		await assertBodyRefused(alice.sk, text.slice(0, -1), 400, 'invalid: invalid json');
		await assertBodyRefused(alice.sk, '', 400, 'invalid: invalid json');
		await assertBodyRefused(alice.sk, `${text}x`, 400, 'invalid: invalid json');
		await assertBodyRefused(alice.sk, text.replace('"kind":9', '"kind":9,"kind":9'), 400,
			'invalid: duplicate key');
		const bytes = Buffer.from(text, 'utf8');
		const at = bytes.indexOf(Buffer.from('"zz"')) + 1;
		bytes[at] = 0xff;
		bytes[at + 1] = 0xfe;
		await assertBodyRefused(alice.sk, bytes, 400, 'invalid: invalid utf-8');
		await assertBodyRefused(alice.sk, '[1,2]', 400, 'invalid: event is not an object');
		await assertBodyRefused(alice.sk, JSON.stringify({ ...ev, extra: 1 }), 400, 'invalid: unknown key');
	});

	test('a body over max_message_length gets 413', async () => {
		const alice = newKey();
		const ev = signEvent(alice.sk, { kind: 9, tags: [['h', open]], content: 'x'.repeat(70000) });
		await assertBodyRefused(alice.sk, ev, 413, 'invalid: body too large');
		await assertBodyRefused(null, ev, 413, 'invalid: body too large');
	});

	test('more than 256 tags', async () => {
		const alice = newKey();
		const tags = [['h', open]];
		for (let i = 0; i < 255; i++)
			tags.push(['t', `t${i}`]);
		await accept(alice.sk, { kind: 9, tags });
		const ev = signEvent(alice.sk, { kind: 9, tags: [...tags, ['t', 'one too many']], content: 'x' });
		await assertEventRefused(alice.sk, ev, 'invalid: too many tags');
	});

	test('NUL in a tag', async () => {
		const alice = newKey();
		const ev = signEvent(alice.sk, { kind: 9, tags: [['h', open], ['t', 'a\u0000b']], content: 'x' });
		await assertEventRefused(alice.sk, ev, 'invalid: tag contains nul');
	});

	test('unsupported kinds and client-signed removal markers', async () => {
		const alice = newKey();
		for (const kind of [0, 1, 7, 9009, 30023, 45012])
			await assertRefused(await send(alice.sk, { kind, tags: [['h', open]] }), 400, 'invalid: unsupported kind');
		await assertRefused(await send(alice.sk, {
			kind: 45011, tags: [['ar', '1'], ['d', crypto.randomUUID()], ['h', open], ['reason', 'moved']],
		}), 400, 'invalid: removal markers are relay-signed');
	});

	test('created_at more than 900 seconds from the relay clock', async () => {
		const alice = newKey();
		const far = 'invalid: created_at is too far from the relay\'s clock';
		for (const createdAt of [now() - 1000, now() + 1000]) {
			await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', open]], created_at: createdAt }), 400, far);
			await assertRefused(await send(alice.sk, { kind: 9021, tags: [['h', open]], created_at: createdAt }), 400, far);
			await assertRefused(await send(alice.sk, { kind: 5, tags: [['e', 'ab'.repeat(32)]], created_at: createdAt }), 400, far);
			await assertRefused(await send(admin, {
				kind: 9007, tags: [['h', crypto.randomUUID()], ['name', 'late']], created_at: createdAt,
			}), 400, far);
		}
		await accept(alice.sk, { kind: 9, tags: [['h', open]], created_at: now() - 800 });
		await accept(alice.sk, { kind: 9, tags: [['h', open]], created_at: now() + 800 });
	});
});

describe('deletion requests (kind 5)', () => {
	test('an author deletes their own messages, which every read then withholds', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const m1 = await accept(alice.sk, { kind: 9, tags: [['h', open]], content: 'first' });
		const m2 = await accept(alice.sk, { kind: 9, tags: [['h', open]], content: 'second' });
		const del = await accept(alice.sk, { kind: 5, tags: [['h', open], ['e', m1.id]] });
		assert.deepEqual(await stack.query(`SELECT id, deleted FROM events WHERE id IN ('${m1.id}', '${m2.id}') ORDER BY id`),
			[[m1.id, 't'], [m2.id, 'f']].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
		for (const sk of [alice.sk, bob.sk, admin]) {
			assert.deepEqual(await readIds(sk, { ids: [m1.id, m2.id] }), [m2.id]);
			// The deletion itself is stored in the channel and found by #e.
			assert.deepEqual(await readIds(sk, { '#e': [m1.id] }), [del.id]);
		}
		assert.deepEqual(await stack.query(`SELECT channel_id, kind FROM events WHERE id = '${del.id}'`), [[open, '5']]);
	});

	test('someone else\'s event is refused and stays', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const theirs = await accept(alice.sk, { kind: 9, tags: [['h', open]] });
		const mine = await accept(bob.sk, { kind: 9, tags: [['h', open]] });
		await assertRefused(await send(bob.sk, { kind: 5, tags: [['e', theirs.id]] }), 403,
			'restricted: cannot delete someone else\'s event');
		// Nothing is deleted when any target is refused.
		await assertRefused(await send(bob.sk, { kind: 5, tags: [['e', mine.id], ['e', theirs.id]] }), 403,
			'restricted: cannot delete someone else\'s event');
		assert.deepEqual(await readIds(bob.sk, { ids: [theirs.id, mine.id] }).then((a) => a.sort()),
			[theirs.id, mine.id].sort());
	});

	test('artifact revisions and removal markers cannot be deleted', async () => {
		const alice = newKey();
		const d = crypto.randomUUID();
		const revision = signEvent(alice.sk, {
			kind: 45010,
			tags: [['ar', '1'], ['d', d], ['h', open], ['type', 'demo.task'], ['title', 't'], ['op', 'create']],
		});
		await insertRaw(revision, open);
		const marker = signEvent(crypto.randomBytes(32), {
			kind: 45011, tags: [['ar', '1'], ['d', d], ['h', open], ['reason', 'moved'], ['prev', revision.id]],
		});
		await insertRaw(marker, open);
		const message = await accept(alice.sk, { kind: 9, tags: [['h', open]] });
		for (const target of [revision.id, marker.id]) {
			await assertRefused(await send(alice.sk, { kind: 5, tags: [['e', message.id], ['e', target]] }), 400,
				'invalid: artifacts cannot be deleted with kind 5');
		}
		assert.deepEqual(await stack.query(`SELECT count(*) FROM events WHERE deleted AND id IN ('${revision.id}', '${marker.id}', '${message.id}')`),
			[['0']]);
	});

	test('unknown targets are ignored; a deletion without h is visible to its author only', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const del = await accept(alice.sk, { kind: 5, tags: [['e', 'ab'.repeat(32)]] });
		assert.deepEqual(await stack.query(`SELECT channel_id FROM events WHERE id = '${del.id}'`), [[null]]);
		assert.deepEqual(await readIds(alice.sk, { ids: [del.id] }), [del.id]);
		assert.deepEqual(await readIds(alice.sk, { kinds: [5], authors: [alice.pk] }), [del.id]);
		assert.deepEqual(await readIds(bob.sk, { ids: [del.id] }), []);
		assert.deepEqual(await readIds(admin, { kinds: [5], authors: [alice.pk] }), []);
	});

	test('only chat messages are deleted', async () => {
		const alice = newKey();
		const join = await accept(alice.sk, { kind: 9021, tags: [['h', open]] });
		await accept(alice.sk, { kind: 5, tags: [['e', join.id]] });
		assert.deepEqual(await readIds(alice.sk, { ids: [join.id] }), [join.id]);
	});

	test('malformed deletions and deletions into unwritable channels are refused', async () => {
		const alice = newKey();
		const m = await accept(alice.sk, { kind: 9, tags: [['h', open]] });
		await assertRefused(await send(alice.sk, { kind: 5, tags: [] }), 400,
			'invalid: a deletion needs at least one e tag');
		await assertRefused(await send(alice.sk, { kind: 5, tags: [['e', 'xyz']] }), 400,
			'invalid: e tags must hold event ids');
		await assertRefused(await send(alice.sk, { kind: 5, tags: [['e']] }), 400,
			'invalid: e tags must hold event ids');
		await assertRefused(await send(alice.sk, { kind: 5, tags: [['h', open], ['h', open], ['e', m.id]] }), 400,
			'invalid: a deletion names at most one h tag');
		await assertRefused(await send(alice.sk, { kind: 5, tags: [['h', 'x'], ['e', m.id]] }), 400,
			'invalid: h must be a canonical channel uuid');
		await assertRefused(await send(alice.sk, { kind: 5, tags: [['h', secret], ['e', m.id]] }), 403,
			'restricted: not a channel member');
		assert.deepEqual(await readIds(alice.sk, { ids: [m.id] }), [m.id]);
	});
});
