// comb-client (clients/js) against real relays: views become ready and
// live, writes from one client reach another client's view with their
// removal reasons, a sync closed with `resync:` or a dropped connection is
// reopened, a view over a JSON file resumes from its cursor, and refused
// writes reject with the relay's exact message.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import WebSocket from 'ws';

import { CombClient, CombError } from '../../clients/js/index.js';
import { JsonFileStore } from '../../clients/js/src/file-store.js';
import { addMember, createChannel, editChannel, publish, removeMember } from './lib/artifacts.mjs';
import { newKey, startRelay } from './lib/harness.mjs';

let stack;
let admin;
let tmp;
const views = [];

before(async () => {
	stack = await startRelay();
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
				v.off('change', check).off('status', check);
				clearTimeout(timer);
				resolve();
			}
		};
		const timer = setTimeout(() => {
			v.off('change', check).off('status', check);
			reject(new Error(`${what}: not reached in ${timeoutMs} ms (status ${v.status}, ` +
				`${v.all().length} artifacts)`));
		}, timeoutMs);
		v.on('change', check).on('status', check);
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

describe('views', () => {
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
		const v = view(client(reader.sk), { channels: [A], types: ['demo.task'] });
		assert.equal(v.status, 'connecting');
		await v.ready;
		assert.deepEqual(new Set(v.all().map((e) => e.id)), new Set([one.id, two.id]));
		assert.deepEqual(v.get(two.tags.find((t) => t[0] === 'd')[1]), two);
		await until(v, (x) => x.status === 'live', 'live');
		assert.equal(v.stats.snapshots, 1);
	});

	test('writes of one client reach another client\'s view, with removal reasons', async () => {
		const w = client(writer.sk);
		const v = view(client(reader.sk), { channels: [A] });
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
	});

	test('a lost channel closes the sync: the view polls, names `access`, and syncs again', async () => {
		const P = await createChannel(stack, admin, { name: 'p', visibility: 'private' });
		const who = newKey();
		await addMember(stack, admin, P, who.pk);
		const w = client(admin);
		const secret = await w.createArtifact({ h: P, type: 'demo.task', title: 'secret' });
		const open = await w.createArtifact({ h: A, type: 'demo.task', title: 'open' });
		const v = view(client(who.sk), { channels: [A, P], pollInterval: 200 });
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

	test('a view without channels polls and names `ttl` removals', async () => {
		const T = await createChannel(stack, admin, { name: 't' });
		const mine = newKey();
		const v = view(client(mine.sk), { types: ['demo.ttl'], pollInterval: 100 });
		const gone = removals(v);
		await v.ready;
		const t = await client(admin).createArtifact({ h: T, type: 'demo.ttl', title: 'short lived' });
		await until(v, (x) => x.get(t.tags[1][1])?.id === t.id, 'polled create');
		await editChannel(stack, admin, T, [['ttl', '3600']]);
		await until(v, (x) => !x.get(t.tags[1][1]), 'ttl removal');
		assert.deepEqual(gone.at(-1), { d: t.tags[1][1], h: T, reason: 'ttl' });
		assert.equal(v.stats.snapshots, 0);
	});

	test('a view reconnects after the relay restarts and catches up', async () => {
		const w = client(writer.sk);
		const v = view(client(reader.sk), { channels: [B] });
		const statuses = [];
		v.on('status', (s) => statuses.push(s));
		await until(v, (x) => x.status === 'live', 'live');
		await stack.stopNode(0);
		await until(v, (x) => x.status === 'offline', 'offline');
		await stack.startNode(0);
		const t = await w.createArtifact({ h: B, type: 'demo.task', title: 'after the restart' });
		await until(v, (x) => x.get(t.tags[1][1])?.id === t.id && x.status === 'live', 'caught up', 20000);
		assert.ok(statuses.includes('offline'), statuses.join(' '));
	});
});

describe('a view over a JSON file', () => {
	test('resumes from its cursor without reading everything again', async () => {
		const C = await createChannel(stack, admin, { name: 'c' });
		const w = client(writer.sk);
		const made = [];
		for (let i = 0; i < 20; i++)
			made.push(await w.createArtifact({ h: C, type: 'demo.task', title: `task ${i}` }));
		const file = path.join(tmp, 'view.json');
		const first = client(reader.sk).artifacts({ channels: [C], store: new JsonFileStore(file) });
		await first.ready;
		assert.equal(first.stats.fetched, 20);
		await first.close();

		// while it is closed: one edit, one creation, one deletion
		const edited = await w.updateArtifact(made[3], { title: 'task 3, edited' });
		const added = await w.createArtifact({ h: C, type: 'demo.task', title: 'task 20' });
		await w.deleteArtifact(made[7]);

		const second = view(client(reader.sk), { channels: [C], store: new JsonFileStore(file) });
		const gone = removals(second);
		await second.ready;
		assert.equal(second.stats.fetched, 2, 'only the edited and the new artifact are read');
		assert.equal(second.all().length, 20);
		assert.equal(second.get(made[3].tags[1][1]).id, edited.id);
		assert.equal(second.get(added.tags[1][1]).id, added.id);
		assert.deepEqual(gone, [{ d: made[7].tags[1][1], h: C, reason: 'deleted' }]);
		await until(second, (x) => x.status === 'live', 'live');
		const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
		assert.equal(Object.keys(saved.artifacts).length, 20);
		assert.equal(typeof saved.cursor, 'string');
	});
});

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
