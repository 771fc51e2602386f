// Fair turns per connection: the subscriptions' work is queued per
// connection and served in rotation (services/relay/hub, "Turns"), so a
// connection holding many scopes cannot delay another connection's live
// frames by more than one turn, however many of its own are waiting.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { connectWs, newKey, startRelay } from './lib/harness.mjs';
import { accept, createChannel, uuid } from './lib/artifacts.mjs';
import { reqFrames } from './lib/subscriptions.mjs';

const SCOPES = 500;

let stack;
let owner;

before(async () => {
	stack = await startRelay({ env: { COMB_MAX_SUBSCRIPTIONS: String(SCOPES + 10) } });
	owner = stack.admins[0];
});

after(async () => {
	await stack?.stop();
});

const isChanges = (m) => Array.isArray(m) && m[0] === 'CHANGES' && m[2].changes.length > 0;

/** Opens a subscription and waits for its EOSE. */
async function open(c, sub, filter) {
	const frames = await reqFrames(c, sub, [filter]);
	assert.equal(frames.at(-1)[0], 'EOSE', JSON.stringify(frames.at(-1)));
}

test(`a connection with ${SCOPES} scopes delays another's live frame by at most a turn`, async () => {
	const X = await createChannel(stack, owner);
	// the one-scope connection subscribes first, so that a queue served in
	// arrival order would serve it last
	const single = await connectWs(stack.wsUrl, newKey().sk);
	await open(single, 'one', { artifact: 'changes', '#h': [X] });
	const many = await connectWs(stack.wsUrl, newKey().sk);
	for (let i = 0; i < SCOPES; i++)
		await open(many, `s${i}`, { artifact: 'changes', '#h': [X], '#type': ['demo.task', `other.t${i}`] });
	let manyFrames = 0;
	let manyBefore = null;
	many.ws.on('message', (data) => {
		if (isChanges(JSON.parse(data.toString('utf8'))))
			manyFrames++;
	});
	const arrived = single.next((m) => isChanges(m) && m[1] === 'one', 60000)
		.then((m) => { manyBefore = manyFrames; return m; });
	// one change that every scope of both connections holds: each of the
	// many scopes reads it on its own (their cursors differ)
	const rev = await accept(stack, owner, { d: uuid(), h: X, op: 'create' });
	const frame = await arrived;
	assert.equal(frame[2].changes[0].event.id, rev.id);
	const deadline = Date.now() + 120000;
	while (manyFrames < SCOPES && Date.now() < deadline)
		await new Promise((r) => setTimeout(r, 50));
	console.log(`# the one-scope connection's frame came after ${manyBefore} of the other's ${SCOPES}`);
	assert.equal(manyFrames, SCOPES, 'every scope of the busy connection got the change');
	// two workers: at most one turn of the busy connection on each before
	// the other's; the client may read the busy socket's frames written
	// meanwhile first, so the bound is loose (served in arrival order, the
	// other's frame came after all of them)
	assert.ok(manyBefore <= SCOPES / 10, `${manyBefore} frames of the busy connection went first`);
	await single.close();
	await many.close();
});

test(`syncs: a connection with ${SCOPES} of them waiting delays another's frame by at most a turn`, async () => {
	const X = await createChannel(stack, owner);
	// the busy connection's syncs register first, so that a queue served
	// in arrival order would serve the one-sync connection last
	const many = await connectWs(stack.wsUrl, newKey().sk);
	for (let i = 0; i < SCOPES; i++)
		await open(many, `c${i}`, { artifact: 'current', '#h': [X], '#type': ['demo.task', `other.t${i}`] });
	const single = await connectWs(stack.wsUrl, newKey().sk);
	await open(single, 'one', { artifact: 'current', '#h': [X] });
	let manyFrames = 0;
	let manyBefore = null;
	const isEvent = (m) => Array.isArray(m) && m[0] === 'EVENT';
	many.ws.on('message', (data) => {
		if (isEvent(JSON.parse(data.toString('utf8'))))
			manyFrames++;
	});
	const arrived = single.next((m) => isEvent(m) && m[1] === 'one', 60000)
		.then((m) => { manyBefore = manyFrames; return m; });
	const rev = await accept(stack, owner, { d: uuid(), h: X, op: 'create' });
	assert.equal((await arrived)[2].id, rev.id);
	const deadline = Date.now() + 120000;
	while (manyFrames < SCOPES && Date.now() < deadline)
		await new Promise((r) => setTimeout(r, 50));
	console.log(`# the one-sync connection's frame came after ${manyBefore} of the other's ${SCOPES}`);
	assert.equal(manyFrames, SCOPES, 'every sync of the busy connection got the change');
	// one batch of the workers serves every sync, in the connections'
	// turns: the other's frame is pushed second, and the busy connection's
	// frames pushed right after it may be read first by the client
	assert.ok(manyBefore <= SCOPES / 4, `${manyBefore} frames of the busy connection went first`);
	await single.close();
	await many.close();
});
