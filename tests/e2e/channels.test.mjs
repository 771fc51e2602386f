// Channels and membership (PROTOCOL.md sections 4 and 10): every row of the
// moderation table with its permission failures, the last-owner rule,
// archived, deleted and unlisted channels, and DMs. Every refusal is
// checked for its exact status and message and for having stored nothing.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { newKey, post, signEvent, startRelay } from './lib/harness.mjs';

let stack;
let admin; // the community admin's secret key

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
});

after(async () => {
	await stack?.stop();
});

// --- helpers ---------------------------------------------------------------

// Two requests alike within one second would carry the same NIP-98 token
// (refused as a replay) and two events alike the same id: a nonce tag in
// the token and random content keep them apart.
function authOpts() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function send(sk, template) {
	const ev = signEvent(sk, { content: crypto.randomBytes(4).toString('hex'), ...template });
	const r = await post(stack.url, '/events', ev, sk, authOpts());
	return { ev, status: r.status, json: r.json() };
}

function assertAccepted(res) {
	assert.deepEqual({ status: res.status, json: res.json },
		{ status: 200, json: { id: res.ev.id, accepted: true, message: '' } });
}

async function stored(id) {
	const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${id}'`);
	return Number(rows[0][0]);
}

// Asserts a refusal with exactly this status and message, and that the
// refused event was not stored.
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

async function createChannel(sk, extraTags = [], name = 'general') {
	const id = crypto.randomUUID();
	await accept(sk, { kind: 9007, tags: [['h', id], ['name', name], ...extraTags] });
	return id;
}

async function putUser(sk, channel, pk, role) {
	const tags = [['h', channel], role ? ['p', pk, role] : ['p', pk]];
	return accept(sk, { kind: 9000, tags });
}

async function chat(sk, channel, content = 'hello') {
	return accept(sk, { kind: 9, tags: [['h', channel]], content });
}

async function read(sk, filter) {
	const r = await post(stack.url, '/query', [filter], sk, authOpts());
	assert.equal(r.status, 200, r.body);
	return r.json();
}

async function readIds(sk, filter) {
	return (await read(sk, filter)).map((e) => e.id);
}

async function count(sk, filter) {
	const r = await post(stack.url, '/count', [filter], sk, authOpts());
	assert.equal(r.status, 200, r.body);
	return r.json().count;
}

async function member(channel, pk) {
	const rows = await stack.query(`SELECT role, active FROM members WHERE channel_id = '${channel}' AND pubkey = '${pk}'`);
	return rows.length ? { role: Number(rows[0][0]), active: rows[0][1] === 't' } : null;
}

async function channelRow(channel) {
	const rows = await stack.query('SELECT name, visibility, is_dm, ttl, archived, deleted, created_by' +
		` FROM channels WHERE id = '${channel}'`);
	if (!rows.length)
		return null;
	const [name, visibility, isDm, ttl, archived, deleted, createdBy] = rows[0];
	return {
		name, visibility: Number(visibility), isDm: isDm === 't', ttl: ttl === null ? null : Number(ttl),
		archived: archived === 't', deleted: deleted === 't', createdBy,
	};
}

const NOT_MEMBER = 'restricted: not a channel member';

// --- 9007 ------------------------------------------------------------------

describe('9007 create', () => {
	test('a community admin creates a channel and becomes its owner', async () => {
		const adminPk = stack.communities[0].owner;
		const id = crypto.randomUUID();
		const ev = await accept(admin, { kind: 9007, tags: [['h', id], ['name', 'general']] });
		assert.deepEqual(await channelRow(id), {
			name: 'general', visibility: 0, isDm: false, ttl: null,
			archived: false, deleted: false, createdBy: adminPk,
		});
		assert.deepEqual(await member(id, adminPk), { role: 3, active: true });
		const rows = await stack.query(`SELECT channel_id, kind FROM events WHERE id = '${ev.id}'`);
		assert.deepEqual(rows, [[id, '9007']]);
		// Sent again, the same event is accepted and changes nothing.
		const again = await post(stack.url, '/events', ev, admin, authOpts());
		assert.equal(again.status, 200);
		assert.deepEqual(again.json(), { id: ev.id, accepted: true, message: '' });
		assert.equal(await stored(ev.id), 1);
	});

	test('visibility, ttl and type tags are stored', async () => {
		const u = await createChannel(admin, [['visibility', 'unlisted'], ['ttl', '3600']]);
		assert.deepEqual(await channelRow(u), {
			name: 'general', visibility: 1, isDm: false, ttl: 3600,
			archived: false, deleted: false, createdBy: stack.communities[0].owner,
		});
		const p = await createChannel(admin, [['visibility', 'private'], ['type', 'stream']]);
		assert.equal((await channelRow(p)).visibility, 2);
	});

	test('someone who is not a community admin may not create channels', async () => {
		const alice = newKey();
		const id = crypto.randomUUID();
		await assertRefused(await send(alice.sk, { kind: 9007, tags: [['h', id], ['name', 'x']] }),
			403, 'restricted: not allowed to create channels');
		assert.equal(await channelRow(id), null);
		assert.equal(await member(id, alice.pk), null);
	});

	test('an existing channel id is refused', async () => {
		const id = await createChannel(admin, [], 'first');
		await assertRefused(await send(admin, { kind: 9007, tags: [['h', id], ['name', 'second']] }),
			400, 'invalid: channel already exists');
		assert.equal((await channelRow(id)).name, 'first');
	});

	test('malformed create requests are refused', async () => {
		const cases = [
			[[['name', 'x']], 'invalid: moderation events need exactly one h tag'],
			[[['h', crypto.randomUUID()], ['h', crypto.randomUUID()], ['name', 'x']],
				'invalid: moderation events need exactly one h tag'],
			[[['h', crypto.randomUUID().toUpperCase()], ['name', 'x']],
				'invalid: h must be a canonical channel uuid'],
			[[['h', '00000000-0000-0000-0000-000000000000'], ['name', 'x']],
				'invalid: h must be a canonical channel uuid'],
			[[['h', crypto.randomUUID()]], 'invalid: a channel needs a name tag'],
			[[['h', crypto.randomUUID()], ['name', '']], 'invalid: name must be 1 to 4096 bytes'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['name', 'y']],
				'invalid: expected one name tag with a value'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['visibility', 'secret']],
				'invalid: visibility must be open, unlisted or private'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['type', 'forum']],
				'invalid: type must be stream or dm'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['ttl', '0']],
				'invalid: ttl must be a positive number of seconds'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['ttl', '-5']],
				'invalid: ttl must be a positive number of seconds'],
			[[['h', crypto.randomUUID()], ['name', 'x'], ['ttl', '1h']],
				'invalid: ttl must be a positive number of seconds'],
		];
		for (const [tags, message] of cases) {
			const res = await send(admin, { kind: 9007, tags });
			await assertRefused(res, 400, message);
			const h = tags.find((t) => t[0] === 'h');
			if (h)
				assert.equal(await channelRow(h[1].toLowerCase()), null, JSON.stringify(tags));
		}
	});
});

// --- 9000 ------------------------------------------------------------------

describe('9000 put user', () => {
	test('an owner adds members; the role is the third p element or a role tag', async () => {
		const [alice, bob, carol] = [newKey(), newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk);
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });
		await putUser(admin, c, bob.pk, 'admin');
		assert.deepEqual(await member(c, bob.pk), { role: 2, active: true });
		await accept(admin, { kind: 9000, tags: [['h', c], ['p', carol.pk], ['role', 'owner']] });
		assert.deepEqual(await member(c, carol.pk), { role: 3, active: true });
		// Re-putting changes the role.
		await putUser(admin, c, alice.pk, 'admin');
		assert.deepEqual(await member(c, alice.pk), { role: 2, active: true });
	});

	test('channel admins may add members, plain members may not', async () => {
		const [alice, bob, carol] = [newKey(), newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk, 'admin');
		await putUser(admin, c, bob.pk);
		await assertRefused(await send(bob.sk, { kind: 9000, tags: [['h', c], ['p', carol.pk]] }),
			403, 'restricted: not allowed to add members to this channel');
		assert.equal(await member(c, carol.pk), null);
		await putUser(alice.sk, c, carol.pk);
		assert.deepEqual(await member(c, carol.pk), { role: 1, active: true });
	});

	test('outsiders learn nothing: an unreadable and a missing channel answer alike', async () => {
		const [mallory, bob] = [newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await assertRefused(await send(mallory.sk, { kind: 9000, tags: [['h', c], ['p', bob.pk]] }),
			403, NOT_MEMBER);
		await assertRefused(await send(mallory.sk,
			{ kind: 9000, tags: [['h', crypto.randomUUID()], ['p', bob.pk]] }), 403, NOT_MEMBER);
		assert.equal(await member(c, bob.pk), null);
	});

	test('a community admin who is not a member still moderates', async () => {
		const adminPk = stack.communities[0].owner;
		const [alice, bob] = [newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk, 'owner');
		await accept(admin, { kind: 9022, tags: [['h', c]] });
		assert.deepEqual(await member(c, adminPk), { role: 3, active: false });
		await putUser(admin, c, bob.pk);
		assert.deepEqual(await member(c, bob.pk), { role: 1, active: true });
	});

	test('re-adding a removed member restores access', async () => {
		const alice = newKey();
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk);
		const m = await chat(admin, c);
		assert.deepEqual(await readIds(alice.sk, { '#h': [c], kinds: [9] }), [m.id]);
		await accept(admin, { kind: 9001, tags: [['h', c], ['p', alice.pk]] });
		assert.deepEqual(await readIds(alice.sk, { '#h': [c], kinds: [9] }), []);
		await putUser(admin, c, alice.pk);
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });
		assert.deepEqual(await readIds(alice.sk, { '#h': [c], kinds: [9] }), [m.id]);
	});

	test('malformed put requests are refused', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const c = await createChannel(admin);
		const cases = [
			[[['h', c]], 'invalid: expected one p tag holding a pubkey'],
			[[['h', c], ['p', alice.pk], ['p', bob.pk]], 'invalid: expected one p tag holding a pubkey'],
			[[['h', c], ['p', 'not-a-key']], 'invalid: expected one p tag holding a pubkey'],
			[[['h', c], ['p', alice.pk, 'boss']], 'invalid: role must be owner, admin or member'],
			[[['h', c], ['p', alice.pk], ['role', 'boss']], 'invalid: role must be owner, admin or member'],
			[[['h', c], ['p', alice.pk, 'admin'], ['role', 'member']],
				'invalid: the p tag and the role tag disagree'],
		];
		for (const [tags, message] of cases)
			await assertRefused(await send(admin, { kind: 9000, tags }), 400, message);
		assert.equal(await member(c, alice.pk), null);
		assert.equal(await member(c, bob.pk), null);
	});
});

// --- 9001 ------------------------------------------------------------------

describe('9001 remove user', () => {
	test('channel admins remove members, members remove themselves, others are refused', async () => {
		const [alice, bob, carol, mallory] = [newKey(), newKey(), newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk);
		await putUser(admin, c, bob.pk);
		await putUser(admin, c, carol.pk, 'admin');
		await assertRefused(await send(bob.sk, { kind: 9001, tags: [['h', c], ['p', alice.pk]] }),
			403, 'restricted: not allowed to remove members from this channel');
		await assertRefused(await send(mallory.sk, { kind: 9001, tags: [['h', c], ['p', alice.pk]] }),
			403, NOT_MEMBER);
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });

		await accept(carol.sk, { kind: 9001, tags: [['h', c], ['p', alice.pk]] });
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: false });
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', c]], content: 'x' }),
			403, NOT_MEMBER);

		await accept(bob.sk, { kind: 9001, tags: [['h', c], ['p', bob.pk]] });
		assert.deepEqual(await member(c, bob.pk), { role: 1, active: false });
	});

	test('removing someone who is not a member is refused', async () => {
		const dave = newKey();
		const c = await createChannel(admin);
		await assertRefused(await send(admin, { kind: 9001, tags: [['h', c], ['p', dave.pk]] }),
			400, 'invalid: not a channel member');
	});

	test('the last owner can be neither removed nor demoted', async () => {
		const adminPk = stack.communities[0].owner;
		const carol = newKey();
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, carol.pk, 'admin');
		// a channel admin may not remove an owner at all (PROTOCOL.md
		// section 10), the last one or not
		await assertRefused(await send(carol.sk, { kind: 9001, tags: [['h', c], ['p', adminPk]] }),
			403, 'restricted: cannot remove a role above your own');
		await assertRefused(await send(admin, { kind: 9001, tags: [['h', c], ['p', adminPk]] }),
			400, 'invalid: the last owner cannot be removed');
		await assertRefused(await send(admin, { kind: 9000, tags: [['h', c], ['p', adminPk, 'member']] }),
			400, 'invalid: the last owner cannot be demoted');
		assert.deepEqual(await member(c, adminPk), { role: 3, active: true });
		// With a second owner the first may go.
		await putUser(admin, c, carol.pk, 'owner');
		await accept(carol.sk, { kind: 9001, tags: [['h', c], ['p', adminPk]] });
		assert.deepEqual(await member(c, adminPk), { role: 3, active: false });
	});
});

// --- 9002 ------------------------------------------------------------------

describe('9002 edit metadata', () => {
	test('owners edit name, visibility, ttl and archived; ttl 0 clears it', async () => {
		const c = await createChannel(admin, [], 'before');
		await accept(admin, {
			kind: 9002,
			tags: [['h', c], ['name', 'after'], ['visibility', 'unlisted'], ['ttl', '60'], ['archived', 'true']],
		});
		let row = await channelRow(c);
		assert.deepEqual([row.name, row.visibility, row.ttl, row.archived], ['after', 1, 60, true]);
		await accept(admin, { kind: 9002, tags: [['h', c], ['ttl', '0'], ['archived', 'false']] });
		row = await channelRow(c);
		assert.deepEqual([row.name, row.visibility, row.ttl, row.archived], ['after', 1, null, false]);
	});

	test('channel admins may edit, members and outsiders may not', async () => {
		const [alice, bob, mallory] = [newKey(), newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']], 'orig');
		await putUser(admin, c, alice.pk, 'admin');
		await putUser(admin, c, bob.pk);
		await assertRefused(await send(bob.sk, { kind: 9002, tags: [['h', c], ['name', 'bob']] }),
			403, 'restricted: not allowed to edit this channel');
		await assertRefused(await send(mallory.sk, { kind: 9002, tags: [['h', c], ['name', 'm']] }),
			403, NOT_MEMBER);
		assert.equal((await channelRow(c)).name, 'orig');
		await accept(alice.sk, { kind: 9002, tags: [['h', c], ['name', 'alice']] });
		assert.equal((await channelRow(c)).name, 'alice');
	});

	test('malformed edits are refused', async () => {
		const c = await createChannel(admin, [], 'orig');
		const cases = [
			[[['h', c]], 'invalid: nothing to edit'],
			[[['h', c], ['archived', 'yes']], 'invalid: archived must be true or false'],
			[[['h', c], ['ttl', 'x']], 'invalid: ttl must be a number of seconds (0 clears it)'],
			[[['h', c], ['visibility', 'public']], 'invalid: visibility must be open, unlisted or private'],
			[[['h', c], ['name', '']], 'invalid: name must be 1 to 4096 bytes'],
		];
		for (const [tags, message] of cases)
			await assertRefused(await send(admin, { kind: 9002, tags }), 400, message);
		assert.equal((await channelRow(c)).name, 'orig');
	});
});

// --- 9005 ------------------------------------------------------------------

describe('9005 redact', () => {
	test('a channel admin redacts a message, which every read then withholds', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const c = await createChannel(admin);
		await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
		await accept(bob.sk, { kind: 9021, tags: [['h', c]] });
		const m = await chat(alice.sk, c, 'oops');
		await assertRefused(await send(bob.sk, { kind: 9005, tags: [['h', c], ['e', m.id]] }),
			403, 'restricted: not allowed to redact events in this channel');
		assert.deepEqual(await readIds(bob.sk, { ids: [m.id] }), [m.id]);

		await accept(admin, { kind: 9005, tags: [['h', c], ['e', m.id]] });
		for (const sk of [alice.sk, bob.sk, admin]) {
			assert.deepEqual(await readIds(sk, { ids: [m.id] }), []);
			assert.deepEqual(await readIds(sk, { '#h': [c], kinds: [9] }), []);
			assert.equal(await count(sk, { ids: [m.id] }), 0);
		}
		const rows = await stack.query(`SELECT redacted FROM events WHERE id = '${m.id}'`);
		assert.deepEqual(rows, [['t']]);
	});

	test('unknown events, events of another channel and removal markers are refused', async () => {
		const c = await createChannel(admin);
		const d = await createChannel(admin);
		const other = await chat(admin, d);
		await assertRefused(await send(admin, { kind: 9005, tags: [['h', c], ['e', 'ab'.repeat(32)]] }),
			400, 'invalid: unknown event');
		await assertRefused(await send(admin, { kind: 9005, tags: [['h', c], ['e', other.id]] }),
			400, 'invalid: unknown event');
		assert.deepEqual(await stack.query(`SELECT redacted FROM events WHERE id = '${other.id}'`), [['f']]);

		// A removal marker is relay-signed; store one as the relay would.
		const marker = signEvent(crypto.randomBytes(32), {
			kind: 45011,
			tags: [['ar', '1'], ['d', crypto.randomUUID()], ['h', c], ['reason', 'moved'], ['prev', 'cd'.repeat(32)]],
		});
		await stack.psql('INSERT INTO events (community_id, id, pubkey, created_at, kind, channel_id, raw)' +
			` VALUES (${stack.communities[0].id}, '${marker.id}', '${marker.pubkey}', ${marker.created_at},` +
			` 45011, '${c}', '${JSON.stringify(marker)}')`);
		await assertRefused(await send(admin, { kind: 9005, tags: [['h', c], ['e', marker.id]] }),
			400, 'invalid: removal markers cannot be redacted');
		assert.deepEqual(await stack.query(`SELECT redacted FROM events WHERE id = '${marker.id}'`), [['f']]);
	});

	test('outsiders of a private channel learn nothing about its events', async () => {
		const mallory = newKey();
		const c = await createChannel(admin, [['visibility', 'private']]);
		const m = await chat(admin, c);
		await assertRefused(await send(mallory.sk, { kind: 9005, tags: [['h', c], ['e', m.id]] }),
			403, NOT_MEMBER);
		await assertRefused(await send(mallory.sk, { kind: 9005, tags: [['h', c], ['e', 'ab'.repeat(32)]] }),
			403, NOT_MEMBER);
	});

	test('malformed redactions are refused', async () => {
		const c = await createChannel(admin);
		for (const tags of [[['h', c]], [['h', c], ['e', 'xyz']], [['h', c], ['e', 'ab'.repeat(32)], ['e', 'cd'.repeat(32)]]]) {
			await assertRefused(await send(admin, { kind: 9005, tags }), 400,
				'invalid: expected one e tag holding an event id');
		}
	});
});

// --- 9008 ------------------------------------------------------------------

describe('9008 delete channel', () => {
	test('only owners delete; afterwards nobody reads or writes the channel', async () => {
		const adminPk = stack.communities[0].owner;
		const [alice, bob, carol] = [newKey(), newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk, 'admin');
		await putUser(admin, c, bob.pk, 'owner');
		await putUser(admin, c, carol.pk);
		const m = await chat(carol.sk, c);
		await assertRefused(await send(alice.sk, { kind: 9008, tags: [['h', c]] }),
			403, 'restricted: not allowed to delete this channel');
		await assertRefused(await send(carol.sk, { kind: 9008, tags: [['h', c]] }),
			403, 'restricted: not allowed to delete this channel');
		assert.equal((await channelRow(c)).deleted, false);

		await accept(bob.sk, { kind: 9008, tags: [['h', c]] });
		assert.equal((await channelRow(c)).deleted, true);
		for (const sk of [admin, alice.sk, bob.sk, carol.sk]) {
			assert.deepEqual(await read(sk, { '#h': [c] }), []);
			assert.deepEqual(await readIds(sk, { ids: [m.id] }), []);
			assert.equal(await count(sk, { '#h': [c] }), 0);
		}
		await assertRefused(await send(carol.sk, { kind: 9, tags: [['h', c]], content: 'x' }), 403, NOT_MEMBER);
		await assertRefused(await send(bob.sk, { kind: 9, tags: [['h', c]], content: 'x' }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9008, tags: [['h', c]] }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9002, tags: [['h', c], ['name', 'back']] }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9000, tags: [['h', c], ['p', adminPk]] }), 403, NOT_MEMBER);
	});

	test('a community admin deletes any non-DM channel', async () => {
		const alice = newKey();
		const c = await createChannel(admin);
		await putUser(admin, c, alice.pk, 'owner');
		await accept(admin, { kind: 9022, tags: [['h', c]] });
		await accept(admin, { kind: 9008, tags: [['h', c]] });
		assert.equal((await channelRow(c)).deleted, true);
		await assertRefused(await send(alice.sk, { kind: 9021, tags: [['h', c]] }), 403, NOT_MEMBER);
	});
});

// --- 9021 / 9022 -----------------------------------------------------------

describe('9021 join', () => {
	test('open and unlisted channels can be joined, idempotently', async () => {
		const alice = newKey();
		for (const visibility of ['open', 'unlisted']) {
			const c = await createChannel(admin, [['visibility', visibility]]);
			await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
			assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });
			await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
			assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });
		}
		// Joining again keeps a higher role.
		const c = await createChannel(admin);
		await putUser(admin, c, alice.pk, 'admin');
		await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
		assert.deepEqual(await member(c, alice.pk), { role: 2, active: true });
	});

	test('private and missing channels cannot be joined and answer alike', async () => {
		const alice = newKey();
		const c = await createChannel(admin, [['visibility', 'private']]);
		await assertRefused(await send(alice.sk, { kind: 9021, tags: [['h', c]] }), 403, NOT_MEMBER);
		await assertRefused(await send(alice.sk, { kind: 9021, tags: [['h', crypto.randomUUID()]] }),
			403, NOT_MEMBER);
		assert.equal(await member(c, alice.pk), null);
	});

	test('a removed member rejoins an open channel as a member', async () => {
		const alice = newKey();
		const c = await createChannel(admin);
		await putUser(admin, c, alice.pk, 'admin');
		await accept(admin, { kind: 9001, tags: [['h', c], ['p', alice.pk]] });
		await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: true });
	});
});

describe('9022 leave', () => {
	test('members leave; leaving again or leaving a channel one is not in is refused', async () => {
		const alice = newKey();
		const c = await createChannel(admin);
		await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
		await accept(alice.sk, { kind: 9022, tags: [['h', c]] });
		assert.deepEqual(await member(c, alice.pk), { role: 1, active: false });
		await assertRefused(await send(alice.sk, { kind: 9022, tags: [['h', c]] }),
			400, 'invalid: not a channel member');
		await assertRefused(await send(alice.sk, { kind: 9022, tags: [['h', crypto.randomUUID()]] }),
			400, 'invalid: not a channel member');
	});

	test('the last owner cannot leave', async () => {
		const adminPk = stack.communities[0].owner;
		const alice = newKey();
		const c = await createChannel(admin);
		await assertRefused(await send(admin, { kind: 9022, tags: [['h', c]] }),
			400, 'invalid: the last owner cannot leave');
		assert.deepEqual(await member(c, adminPk), { role: 3, active: true });
		await putUser(admin, c, alice.pk, 'owner');
		await accept(admin, { kind: 9022, tags: [['h', c]] });
		await assertRefused(await send(alice.sk, { kind: 9022, tags: [['h', c]] }),
			400, 'invalid: the last owner cannot leave');
		assert.deepEqual(await member(c, alice.pk), { role: 3, active: true });
	});
});

// --- channel states --------------------------------------------------------

describe('channel states', () => {
	test('an archived channel refuses writes and stays readable', async () => {
		const alice = newKey();
		const c = await createChannel(admin);
		await accept(alice.sk, { kind: 9021, tags: [['h', c]] });
		const m = await chat(alice.sk, c, 'before archiving');
		await accept(admin, { kind: 9002, tags: [['h', c], ['archived', 'true']] });
		await assertRefused(await send(alice.sk, { kind: 9, tags: [['h', c]], content: 'after' }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9, tags: [['h', c]], content: 'after' }), 403, NOT_MEMBER);
		assert.deepEqual(await readIds(alice.sk, { '#h': [c], kinds: [9] }), [m.id]);
		assert.ok((await readIds(alice.sk, { kinds: [9], authors: [alice.pk] })).includes(m.id));
		await accept(admin, { kind: 9002, tags: [['h', c], ['archived', 'false']] });
		await chat(alice.sk, c, 'after unarchiving');
	});

	test('an unlisted channel is hidden from broad reads unless joined, readable with #h', async () => {
		const alice = newKey();
		const u = await createChannel(admin, [['visibility', 'unlisted']]);
		const m = await chat(admin, u, 'unlisted message');
		const broad = { kinds: [9], authors: [stack.communities[0].owner] };
		assert.ok(!(await readIds(alice.sk, broad)).includes(m.id), 'hidden from a broad read');
		assert.deepEqual(await readIds(alice.sk, { ids: [m.id] }), []);
		assert.deepEqual(await readIds(alice.sk, { '#h': [u], kinds: [9] }), [m.id]);
		assert.equal(await count(alice.sk, { '#h': [u], kinds: [9] }), 1);
		// Anyone who names it may write to it, as for an open channel.
		const mine = await chat(alice.sk, u, 'named and written');
		assert.deepEqual(await readIds(alice.sk, { ids: [mine.id] }), []);
		await accept(alice.sk, { kind: 9021, tags: [['h', u]] });
		assert.ok((await readIds(alice.sk, broad)).includes(m.id), 'visible once joined');
		await accept(alice.sk, { kind: 9022, tags: [['h', u]] });
		assert.ok(!(await readIds(alice.sk, broad)).includes(m.id), 'hidden again after leaving');
	});

	test('a private channel is readable and writable by its members only', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const c = await createChannel(admin, [['visibility', 'private']]);
		await putUser(admin, c, alice.pk);
		const m = await chat(alice.sk, c);
		assert.deepEqual(await readIds(bob.sk, { '#h': [c] }), []);
		assert.deepEqual(await readIds(bob.sk, { ids: [m.id] }), []);
		assert.equal(await count(bob.sk, { '#h': [c] }), 0);
		await assertRefused(await send(bob.sk, { kind: 9, tags: [['h', c]], content: 'x' }), 403, NOT_MEMBER);
		// The community admin reads every non-DM channel.
		assert.deepEqual(await readIds(admin, { ids: [m.id] }), [m.id]);
	});
});

// --- DMs -------------------------------------------------------------------

describe('DMs', () => {
	test('participants become members of a private DM', async () => {
		const adminPk = stack.communities[0].owner;
		const [alice, bob, carol] = [newKey(), newKey(), newKey()];
		const d = await createChannel(admin, [['type', 'dm'], ['p', alice.pk], ['p', bob.pk], ['p', adminPk]]);
		const row = await channelRow(d);
		assert.deepEqual([row.isDm, row.visibility], [true, 2]);
		assert.deepEqual(await member(d, adminPk), { role: 3, active: true });
		assert.deepEqual(await member(d, alice.pk), { role: 1, active: true });
		assert.deepEqual(await member(d, bob.pk), { role: 1, active: true });
		assert.equal(await member(d, carol.pk), null);

		const m = await chat(alice.sk, d, 'psst');
		assert.deepEqual(await readIds(bob.sk, { '#h': [d], kinds: [9] }), [m.id]);
		assert.deepEqual(await readIds(carol.sk, { '#h': [d] }), []);
		await assertRefused(await send(carol.sk, { kind: 9, tags: [['h', d]], content: 'x' }), 403, NOT_MEMBER);
		await assertRefused(await send(carol.sk, { kind: 9021, tags: [['h', d]] }), 403, NOT_MEMBER);
		// An explicit private visibility is fine.
		await createChannel(admin, [['type', 'dm'], ['visibility', 'private'], ['p', alice.pk]]);
	});

	test('a DM is always private and needs participants', async () => {
		const alice = newKey();
		const cases = [
			[[['type', 'dm'], ['visibility', 'open'], ['p', alice.pk]], 'invalid: a dm is always private'],
			[[['type', 'dm'], ['visibility', 'unlisted'], ['p', alice.pk]], 'invalid: a dm is always private'],
			[[['type', 'dm']], 'invalid: a dm needs at least one p tag'],
			[[['type', 'dm'], ['p', 'nope']], 'invalid: p tags must hold pubkeys'],
		];
		for (const [extra, message] of cases) {
			const id = crypto.randomUUID();
			await assertRefused(await send(admin, { kind: 9007, tags: [['h', id], ['name', 'dm'], ...extra] }),
				400, message);
			assert.equal(await channelRow(id), null);
		}
		const d = await createChannel(admin, [['type', 'dm'], ['p', alice.pk]]);
		await assertRefused(await send(admin, { kind: 9002, tags: [['h', d], ['visibility', 'open']] }),
			400, 'invalid: a dm is always private');
		assert.equal((await channelRow(d)).visibility, 2);
		await accept(admin, { kind: 9002, tags: [['h', d], ['visibility', 'private'], ['name', 'renamed']] });
	});

	test('a community admin outside a DM can neither read nor moderate it', async () => {
		const [alice, bob] = [newKey(), newKey()];
		const d = await createChannel(admin, [['type', 'dm'], ['p', alice.pk], ['p', bob.pk]]);
		await putUser(admin, d, alice.pk, 'owner');
		await accept(admin, { kind: 9022, tags: [['h', d]] });
		const m = await chat(bob.sk, d, 'between us');
		assert.deepEqual(await readIds(admin, { ids: [m.id] }), []);
		assert.deepEqual(await read(admin, { '#h': [d] }), []);
		await assertRefused(await send(admin, { kind: 9, tags: [['h', d]], content: 'x' }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9000, tags: [['h', d], ['p', newKey().pk]] }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9005, tags: [['h', d], ['e', m.id]] }), 403, NOT_MEMBER);
		await assertRefused(await send(admin, { kind: 9008, tags: [['h', d]] }), 403, NOT_MEMBER);
		assert.deepEqual(await readIds(alice.sk, { ids: [m.id] }), [m.id]);
	});
});
