// comb-client (clients/js) against real relays: views become ready and
// live, writes from one client reach another client's view with their
// removal reasons, a sync closed with `resync:` or a dropped connection is
// reopened, a view over a JSON file resumes from its cursor, and refused
// writes reject with the relay's exact message. Views run over both
// transports: the resumable sync the relay offers (`"artifact":"changes"`)
// and, with `resumable: false`, the sync and incremental reads that serve
// relays without it.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import WebSocket from 'ws';

import { CombClient, CombError } from '../../clients/js/index.js';
import { JsonFileStore } from '../../clients/js/src/file-store.js';
import { addMember, createChannel, editChannel, publish, removeMember } from './lib/artifacts.mjs';
import { settle } from './lib/clients.mjs';
import { newKey, startRelay } from './lib/harness.mjs';

let stack;
let admin;
let tmp;
const views = [];

// Short heartbeats: a killed capture closes syncs within a second.
const beat = { COMB_CAPTURE_HEARTBEAT_MS: '200' };

before(async () => {
	stack = await startRelay({ env: beat, captureEnv: beat });
	admin = stack.admins[0];
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-client-'));
});

after(async () => {
	for (const v of views)
		await v.close();
	await stack?.stop();
	fs.rmSync(tmp, { recursive: true, force: true });
});

function client(sk) {
	return new CombClient({ url: stack.url, secretKey: sk, WebSocket });
}

function view(c, options) {
	const v = c.artifacts(options);
	views.push(v);
	return v;
}

// Resolves when pred(view) holds, checked after every change and status.
function until(v, pred, what, timeoutMs = 10000) {
	return new Promise((resolve, reject) => {
		const check = () => {
			if (pred(v)) {
				v.off('change', check).off('status', check).off('error', check);
				clearTimeout(timer);
				resolve();
			}
		};
		const timer = setTimeout(() => {
			v.off('change', check).off('status', check).off('error', check);
			reject(new Error(`${what}: not reached in ${timeoutMs} ms (status ${v.status}, ` +
				`${v.all().length} artifacts)`));
		}, timeoutMs);
		v.on('change', check).on('status', check).on('error', check);
		check();
	});
}

// Collects every removal a view reports.
function removals(v) {
	const out = [];
	v.on('change', (c) => out.push(...c.removals));
	return out;
}

// Checks that a view never replaces a revision by one it replaced before.
function watchOrder(v) {
	const seen = new Map();
	const violations = [];
	v.on('change', ({ upserts }) => {
		for (const ev of upserts) {
			const d = ev.tags.find((t) => t[0] === 'd')[1];
			const ids = seen.get(d) ?? [];
			if (ids.includes(ev.id))
				violations.push(`${d} went back to ${ev.id}`);
			ids.push(ev.id);
			seen.set(d, ids);
		}
	});
	return violations;
}

const writer = newKey();
const reader = newKey();

const TRANSPORTS = [
	{ name: 'resumable sync', resumable: true },
	{ name: 'sync and incremental reads', resumable: false },
];

// What a view's stats say about the transport it used.
function assertTransport(v, resumable) {
	if (resumable) {
		assert.ok(v.stats.resumes >= 1 && v.stats.frames >= 1, JSON.stringify(v.stats));
		assert.equal(v.stats.snapshots, 0, 'no snapshot');
		assert.equal(v.stats.reads, 0, 'no incremental read over HTTP');
	} else {
		assert.equal(v.stats.resumes, 0);
		assert.equal(v.stats.frames, 0);
		assert.ok(v.stats.reads >= 1, JSON.stringify(v.stats));
	}
}

for (const { name, resumable } of TRANSPORTS) {
	describe(`views over the ${name}`, () => {
		let A, B;

		before(async () => {
			A = await createChannel(stack, admin, { name: 'a' });
			B = await createChannel(stack, admin, { name: 'b' });
		});

		test('a view is ready with every artifact, then live', async () => {
			const w = client(writer.sk);
			const one = await w.createArtifact({ h: A, type: 'demo.task', title: 'one', tags: [['status', 'open']] });
			const two = await w.createArtifact({ h: A, type: 'demo.task', title: 'two', content: 'body' });
			await w.createArtifact({ h: A, type: 'demo.note', title: 'not a task' });
			await settle(stack);  // each read once (see the restart test)
			const v = view(client(reader.sk), { channels: [A], types: ['demo.task'], resumable });
			assert.equal(v.status, 'connecting');
			await v.ready;
			assert.deepEqual(new Set(v.all().map((e) => e.id)), new Set([one.id, two.id]));
			assert.deepEqual(v.get(two.tags.find((t) => t[0] === 'd')[1]), two);
			await until(v, (x) => x.status === 'live', 'live');
			assertTransport(v, resumable);
			assert.equal(v.stats.fetched, 2);
			if (!resumable)
				assert.equal(v.stats.snapshots, 1);
		});

		test('writes of one client reach another client\'s view, with removal reasons', async () => {
			const w = client(writer.sk);
			const v = view(client(reader.sk), { channels: [A], resumable });
			const gone = removals(v);
			const order = watchOrder(v);
			await until(v, (x) => x.status === 'live', 'live');

			const t = await w.createArtifact({ h: A, type: 'demo.task', title: 'live', tags: [['status', 'open']] });
			const d = t.tags.find((x) => x[0] === 'd')[1];
			await until(v, (x) => x.get(d)?.id === t.id, 'create');

			const u = await w.updateArtifact(t, { tags: { status: 'done' }, title: 'live, done' });
			assert.deepEqual(u.tags.filter((x) => x[0] === 'status'), [['status', 'done']]);
			await until(v, (x) => x.get(d)?.id === u.id, 'update');

			const m = await w.moveArtifact(u, B);
			await until(v, (x) => !x.get(d), 'move away');
			assert.deepEqual(gone.at(-1), { d, h: A, reason: 'moved' });

			const back = await w.moveArtifact(m, A);
			await until(v, (x) => x.get(d)?.id === back.id, 'move back');

			const del = await w.deleteArtifact(back);
			await until(v, (x) => !x.get(d), 'delete');
			assert.deepEqual(gone.at(-1), { d, h: A, reason: 'deleted' });

			const res = await w.restoreArtifact(del);
			assert.equal(res.tags.find((x) => x[0] === 'title')[1], 'live, done');
			assert.deepEqual(res.tags.filter((x) => x[0] === 'status'), [['status', 'done']]);
			await until(v, (x) => x.get(d)?.id === res.id, 'restore');

			// a redaction of the current revision (by the channel's admin)
			const r = await publish(stack, admin, { kind: 9005, tags: [['h', A], ['e', res.id]] });
			assert.equal(r.status, 200, r.raw);
			await until(v, (x) => !x.get(d), 'redaction');
			assert.deepEqual(gone.at(-1), { d, h: A, reason: 'redacted' });
			assert.deepEqual(order, []);
			assertTransport(v, resumable);
			// everything came live: one connection, one catch-up
			assert.equal(v.stats.connects, 1);
			if (resumable)
				assert.equal(v.stats.resumes, 1);
		});

		test('a view without channels names `ttl` removals', async () => {
			const T = await createChannel(stack, admin, { name: 't' });
			const mine = newKey();
			const v = view(client(mine.sk), { types: ['demo.ttl'], pollInterval: 100, resumable });
			const gone = removals(v);
			await v.ready;
			const t = await client(admin).createArtifact({ h: T, type: 'demo.ttl', title: 'short lived' });
			await until(v, (x) => x.get(t.tags[1][1])?.id === t.id, 'create');
			await editChannel(stack, admin, T, [['ttl', '3600']]);
			await until(v, (x) => !x.get(t.tags[1][1]), 'ttl removal');
			assert.deepEqual(gone.at(-1), { d: t.tags[1][1], h: T, reason: 'ttl' });
			assert.equal(v.stats.snapshots, 0);
			// without channels only the resumable sync is live; else it polls
			assert.equal(v.stats.connects, resumable ? 1 : 0);
			assertTransport(v, resumable);
		});

		test('a view reconnects after the relay restarts and catches up', async () => {
			const w = client(writer.sk);
			const C = await createChannel(stack, admin, { name: 'restart' });
			for (let i = 0; i < 5; i++)
				await w.createArtifact({ h: C, type: 'demo.task', title: `before ${i}` });
			// below the horizon, so that the first read carries each once
			// (another test's open transaction may hold the horizon back, and
			// a first read then lists an artifact and delivers it again with
			// the changes after its pinned horizon, as the protocol allows)
			await settle(stack);
			const v = view(client(reader.sk), { channels: [C], resumable });
			const statuses = [];
			v.on('status', (s) => statuses.push(s));
			await until(v, (x) => x.status === 'live', 'live');
			const fetched = v.stats.fetched;
			assert.equal(fetched, 5);
			await stack.stopNode(0);
			await until(v, (x) => x.status === 'offline', 'offline');
			await stack.startNode(0);
			const t = await w.createArtifact({ h: C, type: 'demo.task', title: 'after the restart' });
			await until(v, (x) => x.get(t.tags[1][1])?.id === t.id && x.status === 'live', 'caught up', 20000);
			assert.ok(statuses.includes('offline'), statuses.join(' '));
			assert.equal(v.all().length, 6);
			// from the cursor: at most the new artifact is read again
			assert.ok(v.stats.fetched - fetched <= 1, JSON.stringify(v.stats));
			assert.equal(v.stats.resets, 0);
		});
	});
}

describe('a view over the sync and incremental reads', () => {
	test('a lost channel closes the sync: the view polls, names `access`, and syncs again', async () => {
		const A = await createChannel(stack, admin, { name: 'lost' });
		const P = await createChannel(stack, admin, { name: 'p', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, P, who.pk);
		const w = client(admin);
		const secret = await w.createArtifact({ h: P, type: 'demo.task', title: 'secret' });
		const open = await w.createArtifact({ h: A, type: 'demo.task', title: 'open' });
		const v = view(client(who.sk), { channels: [A, P], pollInterval: 200, resumable: false });
		const gone = removals(v);
		const errors = [];
		v.on('error', (e) => errors.push(e.message));
		await until(v, (x) => x.status === 'live', 'live');
		assert.ok(v.get(secret.tags[1][1]) && v.get(open.tags[1][1]));

		await removeMember(stack, admin, P, who.pk);
		await until(v, (x) => !x.get(secret.tags[1][1]), 'access removal');
		assert.deepEqual(gone.at(-1), { d: secret.tags[1][1], h: P, reason: 'access' });
		assert.ok(errors.includes('resync: access changed'), errors.join(', '));
		// the reopened sync is refused: the view polls
		await until(v, () => errors.includes('restricted: not a channel member'), 'refused');
		assert.equal(v.stats.resyncs, 1);

		// polled meanwhile
		const later = await w.updateArtifact(open, { title: 'open, later' });
		await until(v, (x) => x.get(open.tags[1][1])?.id === later.id, 'polled update');

		// access comes back: the artifacts too, and the sync again
		await addMember(stack, admin, P, who.pk);
		await until(v, (x) => x.get(secret.tags[1][1])?.id === secret.id, 'grant');
		await until(v, (x) => x.stats.snapshots >= 2 && x.status === 'live', 'sync again', 20000);
		const again = await w.updateArtifact(secret, { title: 'secret, again' });
		await until(v, (x) => x.get(secret.tags[1][1])?.id === again.id, 'live after the grant');
	});
});

describe('a view over the resumable sync', () => {
	test('a lost channel arrives as `access` removals, and the sync stays open', async () => {
		const A = await createChannel(stack, admin, { name: 'kept' });
		const P = await createChannel(stack, admin, { name: 'q', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, P, who.pk);
		const w = client(admin);
		const secrets = [];
		for (let i = 0; i < 3; i++)
			secrets.push(await w.createArtifact({ h: P, type: 'demo.task', title: `secret ${i}` }));
		const open = await w.createArtifact({ h: A, type: 'demo.task', title: 'open' });
		const v = view(client(who.sk), { channels: [A, P] });
		const gone = removals(v);
		const errors = [];
		v.on('error', (e) => errors.push(e.message));
		await until(v, (x) => x.status === 'live', 'live');
		assert.equal(v.all().length, 4);

		await removeMember(stack, admin, P, who.pk);
		await until(v, (x) => x.all().length === 1, 'access removals');
		assert.deepEqual(new Set(gone.map((r) => JSON.stringify(r))),
			new Set(secrets.map((s) => JSON.stringify({ d: s.tags[1][1], h: P, reason: 'access' }))));
		// still live on the same sync
		const later = await w.updateArtifact(open, { title: 'open, later' });
		await until(v, (x) => x.get(open.tags[1][1])?.id === later.id, 'live update');

		// access comes back: the artifacts arrive on the same sync
		await addMember(stack, admin, P, who.pk);
		await until(v, (x) => x.all().length === 4, 'grant');
		const again = await w.updateArtifact(secrets[0], { title: 'secret, again' });
		await until(v, (x) => x.get(secrets[0].tags[1][1])?.id === again.id, 'live after the grant');
		assert.deepEqual(errors, []);
		assert.equal(v.status, 'live');
		assert.deepEqual([v.stats.connects, v.stats.resumes, v.stats.resyncs, v.stats.reads], [1, 1, 0, 0]);
	});

	test('a resync: close reopens from the last stored cursor', async () => {
		const C = await createChannel(stack, admin, { name: 'resync' });
		const w = client(writer.sk);
		const made = [];
		for (let i = 0; i < 6; i++)
			made.push(await w.createArtifact({ h: C, type: 'demo.task', title: `task ${i}` }));
		await settle(stack);  // each read once (see the restart test)
		const v = view(client(reader.sk), { channels: [C] });
		const gone = removals(v);
		const errors = [];
		v.on('error', (e) => errors.push(e.message));
		await until(v, (x) => x.status === 'live', 'live');
		const fetched = v.stats.fetched;
		assert.equal(fetched, 6);

		await stack.stopCapture(0, 'SIGKILL');
		await until(v, () => errors.includes('resync: change feed interrupted'), 'resync');
		// while the feed is away: an edit and a deletion
		const edited = await w.updateArtifact(made[2], { title: 'task 2, edited' });
		await w.deleteArtifact(made[4]);
		await stack.startCapture();
		await until(v, (x) => x.get(made[2].tags[1][1])?.id === edited.id && !x.get(made[4].tags[1][1]) &&
			x.status === 'live', 'caught up', 20000);
		assert.deepEqual(gone, [{ d: made[4].tags[1][1], h: C, reason: 'deleted' }]);
		assert.equal(v.all().length, 5);
		assert.ok(v.stats.resyncs >= 1 && v.stats.resumes >= 2, JSON.stringify(v.stats));
		// resumed from the cursor: only the edit is read again, nothing starts over
		assert.ok(v.stats.fetched - fetched <= 1, JSON.stringify(v.stats));
		assert.equal(v.stats.resets, 0);
		assert.equal(v.stats.connects, 1, 'the connection stays');
	});

	test('a foreign cursor starts over, and what left meanwhile is named', async () => {
		const C = await createChannel(stack, admin, { name: 'foreign' });
		const w = client(writer.sk);
		const made = [];
		for (let i = 0; i < 3; i++)
			made.push(await w.createArtifact({ h: C, type: 'demo.task', title: `task ${i}` }));
		const file = path.join(tmp, 'foreign.json');
		const first = client(reader.sk).artifacts({ channels: [C], store: new JsonFileStore(file) });
		await first.ready;
		await first.close();
		await w.deleteArtifact(made[1]);
		// the same store under another key: its cursor is not this reader's
		const other = newKey();
		const v = view(client(other.sk), { channels: [C], store: new JsonFileStore(file) });
		const gone = removals(v);
		await v.ready;
		assert.equal(v.stats.resets, 1);
		assert.deepEqual(gone, [{ d: made[1].tags[1][1], h: C, reason: 'deleted' }]);
		assert.deepEqual(new Set(v.all().map((e) => e.id)), new Set([made[0].id, made[2].id]));
		await until(v, (x) => x.status === 'live', 'live');
		await v.close();
		// the store now holds this reader's cursor: a restart resumes from it
		const again = view(client(other.sk), { channels: [C], store: new JsonFileStore(file) });
		await again.ready;
		assert.deepEqual([again.stats.resets, again.stats.fetched], [0, 0]);
	});
});

for (const { name, resumable } of TRANSPORTS) {
	describe(`a view over a JSON file, over the ${name}`, () => {
		test('resumes from its cursor without reading everything again', async () => {
			const C = await createChannel(stack, admin, { name: 'c' });
			const w = client(writer.sk);
			const made = [];
			for (let i = 0; i < 20; i++)
				made.push(await w.createArtifact({ h: C, type: 'demo.task', title: `task ${i}` }));
			await settle(stack);  // each read once (see the restart test)
			const file = path.join(tmp, `view-${resumable}.json`);
			const first = client(reader.sk).artifacts({ channels: [C], store: new JsonFileStore(file), resumable });
			await first.ready;
			assert.equal(first.stats.fetched, 20);
			assertTransport(first, resumable);
			await first.close();

			// while it is closed: one edit, one creation, one deletion
			const edited = await w.updateArtifact(made[3], { title: 'task 3, edited' });
			const added = await w.createArtifact({ h: C, type: 'demo.task', title: 'task 20' });
			await w.deleteArtifact(made[7]);
			await settle(stack);

			const second = view(client(reader.sk), { channels: [C], store: new JsonFileStore(file), resumable });
			const gone = removals(second);
			await second.ready;
			assert.equal(second.stats.fetched, 2, 'only the edited and the new artifact are read');
			assert.equal(second.all().length, 20);
			assert.equal(second.get(made[3].tags[1][1]).id, edited.id);
			assert.equal(second.get(added.tags[1][1]).id, added.id);
			assert.deepEqual(gone, [{ d: made[7].tags[1][1], h: C, reason: 'deleted' }]);
			await until(second, (x) => x.status === 'live', 'live');

			// a live change is stored with its cursor
			const live = await w.updateArtifact(made[5], { title: 'task 5, live' });
			await until(second, (x) => x.get(made[5].tags[1][1])?.id === live.id, 'live edit');
			await second.close();
			const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
			assert.equal(Object.keys(saved.artifacts).length, 20);
			assert.equal(saved.artifacts[made[5].tags[1][1]].id, live.id);
			assert.equal(typeof saved.cursor, 'string');
			if (resumable)
				assert.equal(saved.cursor, second.cursor, 'the cursor of the last frame');

			// a restart reads only what the store lacks: nothing over the
			// resumable sync, the live edit over a sync (its frames carry no
			// cursor)
			await settle(stack);
			const third = view(client(reader.sk), { channels: [C], store: new JsonFileStore(file), resumable });
			await third.ready;
			assert.equal(third.all().length, 20);
			assert.equal(third.stats.fetched, resumable ? 0 : 1);
			assert.equal(third.stats.resets, 0);
		});
	});
}

describe('writes', () => {
	let A;

	before(async () => {
		A = await createChannel(stack, admin, { name: 'w' });
	});

	test('a stale update rejects with the relay\'s message and the newer head', async () => {
		const w = client(writer.sk);
		const t = await w.createArtifact({ h: A, type: 'demo.task', title: 'contended' });
		const newer = await client(admin).updateArtifact(t, { title: 'theirs' });
		await assert.rejects(w.updateArtifact(t, { title: 'mine' }), (err) => {
			assert.ok(err instanceof CombError);
			assert.equal(err.message, 'conflict: artifact head changed');
			assert.equal(err.code, 'conflict');
			assert.equal(err.status, 409);
			assert.deepEqual(err.head, newer);
			assert.equal(err.event.tags.find((x) => x[0] === 'prev')[1], t.id);
			return true;
		});
		// merging onto the head succeeds
		const merged = await w.updateArtifact(newer, { title: 'theirs and mine' });
		assert.equal(merged.tags.find((x) => x[0] === 'prev')[1], newer.id);
	});

	test('other refusals reject with the exact message', async () => {
		const w = client(writer.sk);
		const t = await w.createArtifact({ h: A, type: 'demo.task', title: 'taken' });
		await assert.rejects(w.createArtifact({ h: A, type: 'demo.task', title: 'again', d: t.tags[1][1] }),
			{ message: 'conflict: artifact identity is taken', code: 'conflict', status: 409 });
		const P = await createChannel(stack, admin, { name: 'closed', visibility: 'private' });
		await assert.rejects(w.moveArtifact(t, P),
			{ message: 'restricted: not a channel member', code: 'restricted', status: 403 });
		await assert.rejects(client(newKey().sk).deleteArtifact(t),
			{ message: 'restricted: only the creator or a channel admin may delete or restore', status: 403 });
		await assert.rejects(w.createArtifact({ h: A, type: 'Bad', title: 'x' }), (err) => {
			assert.equal(err.code, 'invalid');
			assert.equal(err.status, 400);
			return true;
		});
	});
});
