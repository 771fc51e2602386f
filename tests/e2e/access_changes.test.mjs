// Access changes reach open connections (PROTOCOL.md section 10): a
// community admin added or removed by the operator (`comb-admin community
// add-admin` / `remove-admin`) changes what that key reads at once, on
// every kind of subscription it holds open and on its next requests:
//   - plain REQ: nothing written after the removal is delivered, and a new
//     REQ on the same socket no longer reads the channel;
//   - sync (`current`): CLOSED `resync: access changed`;
//   - resumable sync (`changes`): the lost channel's artifacts as removals
//     with reason `access`, the regained ones as upserts;
//   - incremental reads over HTTP: a cursor issued before the change
//     continues with the same removals.
// A sync's live re-read checks no membership while its community's access
// epoch stands (migrations/0022), so the epoch must move with every access
// change even when its signal is lost.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { connectWs, newKey, post, startRelay } from './lib/harness.mjs';
import { accept, addMember, chat, createChannel, uuid } from './lib/artifacts.mjs';
import { nonceOpts, settle } from './lib/clients.mjs';
import { isFor, reqFrames } from './lib/subscriptions.mjs';

let stack;
let owner;
let community;

before(async () => {
	stack = await startRelay();
	owner = stack.admins[0];
	community = String(stack.communities[0].id);
});

after(async () => {
	await stack?.stop();
});


async function setAdmin(pk, on) {
	const r = await stack.admin(['community', on ? 'add-admin' : 'remove-admin', '--id', community, pk]);
	assert.equal(r.code, 0, r.stderr);
}

async function incremental(sk, filter) {
	const r = await post(stack.url, '/query', [{ artifact: 'incremental', ...filter }], sk, nonceOpts());
	assert.equal(r.status, 200, r.body);
	return JSON.parse(r.body);
}

/** Sends a REQ and collects its frames up to EOSE (or CLOSED). */
const req = (c, sub, ...filters) => reqFrames(c, sub, filters, 10000);

test('a removed community admin loses a private channel on every open subscription', async () => {
	const P = await createChannel(stack, owner, { visibility: 'private' });
	const O = await createChannel(stack, owner);
	const art = await accept(stack, owner, { d: uuid(), h: P, op: 'create' });
	const u = newKey();
	await setAdmin(u.pk, true);

	const c = await connectWs(stack.wsUrl, u.sk);
	const chatFrames = await req(c, 'chat', { kinds: [9], '#h': [P] });
	assert.equal(chatFrames.at(-1)[0], 'EOSE');
	assert.equal((await req(c, 'open', { kinds: [9], '#h': [O] })).at(-1)[0], 'EOSE');
	const snapshot = await req(c, 'cur', { artifact: 'current', '#h': [P] });
	assert.ok(snapshot.some((m) => m[0] === 'EVENT' && m[2].id === art.id),
		'an admin\'s sync of a private channel lacked its artifact');
	const resumed = await req(c, 'chg', { artifact: 'changes' });
	assert.ok(resumed.some((m) => m[0] === 'CHANGES' &&
		m[2].changes.some((x) => x.op === 'upsert' && x.event.id === art.id)));
	const first = await incremental(u.sk, { limit: 1000 });
	assert.ok(first.changes.some((x) => x.op === 'upsert' && x.event.id === art.id));

	// as an admin it reads the channel's new messages live
	const before = await chat(stack, owner, P, 'before');
	assert.equal((await c.next(isFor('chat'))).at(2).id, before.id);

	const removedAt = Date.now();
	await setAdmin(u.pk, false);

	// the sync closes, the resumable sync removes the artifact
	assert.deepEqual(await c.next((m) => isFor('cur')(m) && m[0] === 'CLOSED', 5000),
		['CLOSED', 'cur', 'resync: access changed']);
	const closedMs = Date.now() - removedAt;
	// Before its removal the resumable sync may send the artifact its
	// catch-up held once more, the same revision, and nothing else: the
	// catch-up's cursor lies at the snapshot horizon, which another test's
	// open transaction on the shared cluster may hold below the admin grant
	// above, and a grant yields every artifact of the channel (an artifact
	// the client had, as docs/protocol.md 8.6 allows).
	const repeat = (x) => x.op === 'upsert' && x.event.id === art.id;
	const removal = await c.next((m) => isFor('chg')(m) && m[0] === 'CHANGES' &&
		m[2].changes.some((x) => x.op === 'remove'), 5000);
	assert.deepEqual(removal[2].changes.filter((x) => !repeat(x)),
		[{ op: 'remove', d: art.tags.find((t) => t[0] === 'd')[1], h: P, reason: 'access' }]);
	const earlier = c.drain().filter((m) => isFor('chg')(m) && m[0] === 'CHANGES');
	assert.deepEqual(earlier.flatMap((m) => m[2].changes).filter((x) => !repeat(x)), []);
	const removedMs = Date.now() - removedAt;
	console.log(`# after remove-admin: sync CLOSED in ${closedMs} ms, CHANGES removal in ${removedMs} ms`);

	// nothing written after the removal reaches the open plain REQ: a later
	// message of an open channel arrives, the private one before it never
	const hidden = await chat(stack, owner, P, 'after');
	const marker = await chat(stack, owner, O, 'marker');
	assert.equal((await c.next(isFor('open'), 5000))[2].id, marker.id);
	const leaked = c.drain().filter((m) => isFor('chat')(m) && m[0] === 'EVENT');
	assert.deepEqual(leaked, [], `a removed admin received ${hidden.id}`);

	// a new REQ on the same socket no longer reads the channel
	const again = await req(c, 'chat2', { kinds: [9], '#h': [P] });
	assert.deepEqual(again, [['EOSE', 'chat2']]);
	assert.equal((await req(c, 'cur2', { artifact: 'current', '#h': [P] })).at(-1)[2],
		'restricted: not a channel member');

	// the HTTP cursor from before the change continues with the removal
	await settle(stack);
	const next = await incremental(u.sk, { limit: 1000, cursor: first.cursor });
	assert.ok(next.changes.some((x) => x.op === 'remove' && x.h === P && x.reason === 'access' &&
		x.d === art.tags.find((t) => t[0] === 'd')[1]), JSON.stringify(next.changes));
	assert.ok(!next.changes.some((x) => x.op === 'upsert' && x.event.tags.some((t) => t[0] === 'h' && t[1] === P)));

	// made an admin again: the resumable sync gets the artifact back
	await setAdmin(u.pk, true);
	const granted = await c.next((m) => isFor('chg')(m) && m[0] === 'CHANGES' &&
		m[2].changes.some((x) => x.op === 'upsert' && x.event.id === art.id), 5000);
	assert.ok(granted);
	assert.equal((await req(c, 'chat3', { kinds: [9], '#h': [P] })).filter((m) => m[0] === 'EVENT').length, 2);
	await c.close();
});

test('a key made an admin while its socket is open reads at once, and its open REQ receives', async () => {
	const P = await createChannel(stack, owner, { visibility: 'private' });
	const u = newKey();
	const c = await connectWs(stack.wsUrl, u.sk);
	assert.equal((await req(c, 'chat', { kinds: [9], '#h': [P] })).at(-1)[0], 'EOSE');
	assert.equal((await req(c, 'cur', { artifact: 'current', '#h': [P] })).at(-1)[2],
		'restricted: not a channel member');
	await setAdmin(u.pk, true);
	// the next REQ finds the change even before its signal arrived
	assert.equal((await req(c, 'cur', { artifact: 'current', '#h': [P] })).at(-1)[0], 'EOSE');
	const m = await chat(stack, owner, P, 'welcome');
	assert.equal((await c.next((x) => isFor('chat')(x) && x[0] === 'EVENT', 5000))[2].id, m.id);
	await setAdmin(u.pk, false);
	await c.close();
});

test('a membership ended without a signal: the sync\'s next re-read finds the access epoch moved, closes, and sends nothing written after', async () => {
	const P = await createChannel(stack, owner, { visibility: 'private' });
	const d = uuid();
	const made = await accept(stack, owner, { d, h: P, op: 'create' });
	const u = newKey();
	await addMember(stack, owner, P, u.pk);
	const c = await connectWs(stack.wsUrl, u.sk);
	assert.equal((await req(c, 'cur', { artifact: 'current', '#h': [P] })).at(-1)[0], 'EOSE');

	// an edit arrives live: the epoch vouches for the reader's access
	const first = await accept(stack, owner, { d, h: P, op: 'update', prev: made.id });
	assert.equal((await c.next(isFor('cur'), 5000))[2].id, first.id);

	// the membership ends in a transaction that raises no notification,
	// as if its signal were lost; only the epoch records it
	await stack.psql(`BEGIN; ALTER TABLE members DISABLE TRIGGER members_notify;
		UPDATE members SET active = false WHERE channel_id = '${P}' AND pubkey = '${u.pk}';
		ALTER TABLE members ENABLE TRIGGER members_notify; COMMIT;`);
	const second = await accept(stack, owner, { d, h: P, op: 'update', prev: first.id });
	assert.deepEqual(await c.next(isFor('cur'), 5000), ['CLOSED', 'cur', 'resync: access changed']);
	const leaked = c.drain().filter((m) => m[0] === 'EVENT' && m[2].id === second.id);
	assert.deepEqual(leaked, [], 'the edit written after the membership ended reached its former member');
	await c.close();
});
