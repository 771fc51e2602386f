// Exactness at the edges of what the write path's locks allow (issue 10).
//
// Positions are transaction ids, and removals for a lost channel are the
// artifacts that were in it when the loss committed. Writers that move an
// artifact share-lock both channels (in uuid order) in one statement, and
// membership or policy changes lock the channel FOR UPDATE, so between two
// such writers xid order is commit order, with one exception: a move takes
// its xid when it locks its first channel, so a membership change on the
// second channel can take a later xid and still commit first. These tests
// build exactly that interleaving, deterministically: the relay's own move
// statements run step by step in a psql session (comb_artifact_write, the
// moved marker, the move record, as services/relay/write/artifact_write.c
// runs them), and the membership change goes through the relay between
// the move's first channel lock and the rest of it.
//
// For each of the four races (the reader gains or loses the channel while
// an artifact enters or leaves it) a broad incremental store must end
// equal to a fresh `current` read; the only harmless excess allowed is the
// documented one, a removal of an artifact the reader never saw.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { newKey, now, post, psqlSession, signEvent, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, createChannel, editChannel, publish, query, removeMember, revisionTags, uuid,
} from './lib/artifacts.mjs';
import { quiesce } from './lib/checker.mjs';
import { IncrementalStore, truthFor } from './lib/clients.mjs';

let stack;
let admin;
let community;

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	community = stack.communities[0].id;
});

after(async () => {
	await stack?.stop();
});

/** A SQL string literal. */
function lit(text) {
	return `'${text.replaceAll("'", "''")}'`;
}

/** Two new private channels as [low, high] in uuid order. */
async function channelPair() {
	const x = await createChannel(stack, admin, { visibility: 'private' });
	const y = await createChannel(stack, admin, { visibility: 'private' });
	return x < y ? [x, y] : [y, x];
}

/**
 * The relay's move of d from `from` to `to` (replacing revision prev) as
 * a transaction held in psql. lockFirst() begins it and share-locks the
 * lower channel, as the move's statement does first, and resolves to the
 * transaction's xid; finish() runs the rest of the move and commits.
 */
function heldMove(d, from, to, prev) {
	const ev = signEvent(admin, {
		kind: 45010, created_at: now(), content: 'moved',
		tags: revisionTags({ d, h: to, op: 'move', prev }),
	});
	const marker = signEvent(stack.relaySecretKey, {
		kind: 45011, created_at: now(), content: '',
		tags: [['ar', '1'], ['d', d], ['h', from], ['reason', 'moved'], ['prev', prev]],
	});
	const s = psqlSession(stack.dbName);
	return {
		async lockFirst() {
			await s.run('BEGIN;');
			await s.run(`SELECT 1 FROM channels WHERE community_id = ${community}` +
				` AND id = '${from < to ? from : to}' FOR SHARE;`);
			return BigInt(await s.run('SELECT pg_current_xact_id();'));
		},
		async finish() {
			const outcome = await s.run('SELECT outcome FROM comb_artifact_write(' +
				`${community}, '${ev.id}', '${ev.pubkey}', ${ev.created_at}, ${lit(JSON.stringify(ev))},` +
				` ${lit(JSON.stringify(ev.tags))}::json, '${d}', '${to}', 'demo.task', 'move',` +
				` '${prev}', NULL, true, ARRAY(SELECT generate_series(0, 1023)), NULL);`);
			assert.equal(outcome, '0', 'the move is stored');
			await s.run(`SELECT seq FROM comb_store_event(${community}, '${marker.id}',` +
				` '${marker.pubkey}', ${marker.created_at}, 45011, '${from}',` +
				` ${lit(JSON.stringify(marker))}, ${lit(JSON.stringify(marker.tags))}::json);`);
			await s.run('INSERT INTO artifact_moves (community_id, d, from_channel, to_channel,' +
				' replaced_revision, revision_id, marker_id)' +
				` VALUES (${community}, '${d}', '${from}', '${to}', '${prev}', '${ev.id}', '${marker.id}');`);
			await s.run('COMMIT;');
		},
		close: () => s.close(),
	};
}

/** The xid of the reader's latest membership change in channel h. */
async function memberXid(h, pk) {
	const [[xid]] = await stack.query(
		`SELECT changed_xid::text FROM members WHERE channel_id = '${h}' AND pubkey = '${pk}'`);
	return BigInt(xid);
}

const RACES = [
	// access  the artifact   the reader holds it at the end
	['gains', 'enters', true],
	['gains', 'leaves', false],
	['loses', 'enters', false],
	['loses', 'leaves', false],
];

for (const [access, movement, kept] of RACES) {
	test(`a reader who ${access} a channel while an artifact ${movement} it: the store equals a fresh read`, async () => {
		// A is the channel whose access changes; the move locks B first
		const [B, A] = await channelPair();
		const reader = newKey();
		const d = uuid();
		const created = await accept(stack, admin, { d, h: movement === 'enters' ? B : A, op: 'create' });
		if (access === 'loses')
			await addMember(stack, admin, A, reader.pk);
		const store = new IncrementalStore([stack.url], reader.sk, {}, { keepLog: true });
		await store.sync(stack);
		assert.equal(store.items.has(d), access === 'loses' && movement === 'leaves',
			'before the race the reader holds the artifact exactly when it can read it');

		const move = heldMove(d, movement === 'enters' ? B : A, movement === 'enters' ? A : B, created.id);
		try {
			const moveXid = await move.lockFirst();
			if (access === 'gains')
				await addMember(stack, admin, A, reader.pk);
			else
				await removeMember(stack, admin, A, reader.pk);
			const accessXid = await memberXid(A, reader.pk);
			assert.ok(moveXid < accessXid, `the move's xid ${moveXid} is below the membership change's ${accessXid}`);

			// the open move holds the horizon below the committed change
			const during = await store.pull();
			assert.deepEqual(during, [], 'nothing past the open move is delivered');
			await move.finish();
		} finally {
			await move.close();
		}

		const after = await store.sync(stack);
		const truth = await truthFor(stack.url, reader.sk, {});
		assert.deepEqual([...store.revisions()], [...truth], 'the store equals a fresh current read');
		assert.equal(store.items.has(d), kept);
		if (!kept) {
			// never an upsert of it after the race; a removal of an artifact
			// never seen (the reader loses the channel it enters) is harmless
			assert.ok(!after.some((c) => c.op === 'upsert' && c.event.tags.some((t) => t[0] === 'd' && t[1] === d)),
				JSON.stringify(after));
		}
	});
}

// The convergence checker compares every store with a fresh read once the
// writers are done. A write whose client gave up (its timeout, a dropped
// connection) may still be running in the relay or its database session
// and commit after that final read: the store then keeps an artifact the
// fresh read no longer has, a divergence of the comparison, not of the
// relay. settle() alone cannot see such a write (it holds no xid yet while
// it waits for a lock); quiesce() in lib/checker.mjs waits for it.
test('a write whose client gave up is waited for before stores are compared', async () => {
	const slow = await startRelay({ env: { COMB_QUERY_TIMEOUT_MS: '20000' } });
	const s = psqlSession(slow.dbName);
	try {
		const sk = slow.admins[0];
		const h = await createChannel(slow, sk, { visibility: 'open' });
		const d = uuid();
		const created = await accept(slow, sk, { d, h, op: 'create' });
		const reader = newKey();
		const store = new IncrementalStore([slow.url], reader.sk, {});
		await store.sync(slow);
		assert.ok(store.items.has(d));

		// the delete waits for the artifact's lock, holding no xid yet; its
		// client stops waiting
		const lock = `hashtextextended('comb.artifact:${slow.communities[0].id}:${d}', 0)`;
		await s.run(`SELECT pg_advisory_lock(${lock});`);
		const del = signEvent(sk, { kind: 45010, tags: revisionTags({ d, h, op: 'delete', prev: created.id }) });
		await assert.rejects(post(slow.url, '/events', del, sk, { timeoutMs: 300 }), /timed out/);

		// settle() passes and the store reads everything up to the horizon...
		await store.sync(slow);
		assert.ok(store.items.has(d), 'the delete has not committed yet');
		// ...but the write commits once its lock is free: quiesce() waits
		let done = false;
		const fenced = quiesce(slow).then(() => { done = true; });
		await new Promise((r) => setTimeout(r, 1000));
		assert.equal(done, false, 'quiesce() waits while the abandoned write is pending');
		await s.run(`SELECT pg_advisory_unlock(${lock});`);
		await fenced;
		const [[deleted]] = await slow.query(`SELECT deleted FROM artifact_heads WHERE d = '${d}'`);
		assert.equal(deleted, 't', 'the abandoned delete committed');
		await store.sync(slow);
		assert.deepEqual([...store.revisions()], [...await truthFor(slow.url, reader.sk, {})]);
	} finally {
		await s.close();
		await slow.stop();
	}
});

// An incremental read decides access with the state of its snapshot, which
// may include changes committed above its horizon: a removal-type head
// change below the horizon (a deletion, a redaction) in a channel that such
// a later change took out of view is passed over, and the later loss must
// answer for it. When access comes back before that loss is read, the grant
// answers for it instead: it carries the channel's deleted and redacted
// heads as removals. Found by the checker (seed 70108, a broad store kept a
// redacted artifact across a TTL set and cleared); these build it directly.
async function passedOver(setup, hide, restore) {
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = newKey();
	await addMember(stack, admin, h, reader.pk);
	const d = uuid();
	const created = await accept(stack, admin, { d, h, op: 'create' });
	const store = new IncrementalStore([stack.url], reader.sk, {}, { keepLog: true });
	await store.sync(stack);
	assert.ok(store.items.has(d));
	await setup({ h, d, created, reader });        // commits below the next horizon
	const s = psqlSession(stack.dbName);
	try {
		await s.run('BEGIN;');
		await s.run('SELECT pg_current_xact_id();'); // the next read's horizon
		await hide({ h, reader });                    // commits above it
		await store.pull();
		await s.run('COMMIT;');
	} finally {
		await s.close();
	}
	await restore({ h, reader });
	await store.sync(stack);
	assert.deepEqual([...store.revisions()], [...await truthFor(stack.url, reader.sk, {})],
		'the store equals a fresh current read');
	assert.ok(!store.items.has(d), 'the removed artifact is gone');
}

test('a deletion passed over while the reader was revoked, then granted again, is delivered', async () => {
	await passedOver(
		({ h, d, created }) => accept(stack, admin, { d, h, op: 'delete', prev: created.id }),
		({ h, reader }) => removeMember(stack, admin, h, reader.pk),
		({ h, reader }) => addMember(stack, admin, h, reader.pk));
});

test('a redaction passed over while the channel had a TTL, then cleared, is delivered', async () => {
	await passedOver(
		async ({ h, created }) => assertAccepted(await publish(stack, admin,
			{ kind: 9005, tags: [['h', h], ['e', created.id]], content: 'redact' })),
		({ h }) => editChannel(stack, admin, h, [['ttl', '600']]),
		({ h }) => editChannel(stack, admin, h, [['ttl', '0']]));
});

/** An incremental change's d (an upsert's from its event). */
const dOf = (c) => c.event?.tags.find((t) => t[0] === 'd')?.[1] ?? c.d;

/**
 * Reads reader's incremental filter on from cursor, page after page, until
 * a read that began once the horizon had passed xid reaches the end
 * (another test's transaction on the shared cluster may hold the horizon
 * a while: up to timeoutMs). Resolves to {changes, passed}.
 */
async function readPast(reader, filter, cursor, xid, timeoutMs) {
	const changes = [];
	let passed = false;
	for (const end = Date.now() + timeoutMs; Date.now() < end;) {
		const [[horizon]] = await stack.query('SELECT pg_snapshot_xmin(pg_current_snapshot())::text');
		passed = BigInt(horizon) > BigInt(xid);
		const r = await query(stack, reader.sk, { ...filter, cursor });
		assert.equal(r.status, 200, r.raw);
		changes.push(...r.body.changes);
		cursor = r.body.cursor;
		if (passed && !r.body.more)
			break;
		if (!r.body.more)
			await new Promise((res) => setTimeout(res, 50));
	}
	return { changes, passed };
}

// A grant (or a policy or admin change that brings a channel into view)
// carries the channel's heads; a head whose change lies above the read's
// horizon (a transaction older than it still open) must not come with it:
// its own head change comes once the horizon passes it, and the artifact
// came twice to a client that stored each answer with its cursor.
test('an artifact created above the horizon after a grant below it comes once', async () => {
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = newKey();
	const older = psqlSession(stack.dbName);
	const newer = psqlSession(stack.dbName);
	const filter = { artifact: 'incremental', '#h': [h] };
	try {
		// an open transaction below the grant holds the first read's horizon
		await older.run('BEGIN;');
		await older.run('SELECT pg_current_xact_id();');
		await addMember(stack, admin, h, reader.pk);
		const d1 = uuid();
		await accept(stack, admin, { d: d1, h, op: 'create' });
		const first = await query(stack, reader.sk, filter);
		assert.equal(first.status, 200, first.raw);
		assert.deepEqual(first.body.changes.map(dOf), [d1], 'the listing');

		// the horizon moves past the grant, and stops below d3's creation
		await newer.run('BEGIN;');
		await newer.run('SELECT pg_current_xact_id();');
		await older.run('COMMIT;');
		const d3 = uuid();
		const created = await accept(stack, admin, { d: d3, h, op: 'create' });
		/** Reads from cursor until the answer has changes, for up to 30 s
		 * (another test's transaction on the shared cluster may hold the
		 * horizon a while). */
		const readOn = async (cursor) => {
			for (const end = Date.now() + 30000; ;) {
				const r = await query(stack, reader.sk, { ...filter, cursor });
				assert.equal(r.status, 200, r.raw);
				if (r.body.changes.length > 0 || Date.now() > end)
					return r.body;
				await new Promise((res) => setTimeout(res, 100));
			}
		};
		// the horizon passed the grant (d1 again is the listing rule: its
		// grant lay above the first read's horizon)
		const second = await readOn(first.body.cursor);
		assert.ok(second.changes.some((c) => dOf(c) === d1), JSON.stringify(second.changes.map(dOf)));
		await newer.run('COMMIT;');
		const third = await readOn(second.cursor);
		const d3s = [...second.changes, ...third.changes].filter((c) => dOf(c) === d3);
		assert.deepEqual(d3s.map((c) => [c.op, c.event?.id]), [['upsert', created.id]],
			`d3 once, not twice (${JSON.stringify(second.changes.map(dOf))} then ${JSON.stringify(third.changes.map(dOf))})`);
	} finally {
		await older.close();
		await newer.close();
	}
});

// The other way round: the artifact's change lies below the read's horizon
// and a grant that brought its channel into view above it. The read saw
// the channel readable (the grant committed) and sent the artifact by its
// own change; the next read, past the grant, sent it again with the grant
// ("however old"). Its own change now leaves it to the grant. grant(h,
// reader) brings private channel h into the reader's view; it returns how
// to find the grant's xid.
async function grantAboveHorizon(grant) {
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = newKey();
	const held = psqlSession(stack.dbName);
	const filter = { artifact: 'incremental', '#h': [h] };
	try {
		const first = await query(stack, reader.sk, filter);
		assert.equal(first.status, 200, first.raw);
		assert.deepEqual(first.body.changes, [], 'nothing readable before the grant');
		const d = uuid();
		const created = await accept(stack, admin, { d, h, op: 'create' });
		// an open transaction between the creation and the grant holds the
		// next read's horizon below the grant
		await held.run('BEGIN;');
		await held.run('SELECT pg_current_xact_id();');
		const grantXidSql = await grant(h, reader);
		const below = await query(stack, reader.sk, { ...filter, cursor: first.body.cursor });
		assert.equal(below.status, 200, below.raw);
		await held.run('COMMIT;');
		// until the horizon passed the grant
		const [[grantXid]] = await stack.query(grantXidSql);
		const after = await readPast(reader, filter, below.body.cursor, grantXid, 30000);
		assert.ok(after.passed, 'the horizon passed the grant');
		const got = [...below.body.changes, ...after.changes];
		assert.deepEqual(got.map((c) => [dOf(c), c.op, c.event?.id]), [[d, 'upsert', created.id]],
			`the artifact once (${JSON.stringify(below.body.changes.map(dOf))} below the grant)`);
	} finally {
		await held.close();
	}
}

test('an artifact changed before a membership grant that lies above the horizon comes once', async () => {
	await grantAboveHorizon(async (h, reader) => {
		await addMember(stack, admin, h, reader.pk);
		return `SELECT changed_xid::text FROM members WHERE channel_id = '${h}' AND pubkey = '${reader.pk}'`;
	});
});

test('an artifact changed before a channel opened above the horizon comes once', async () => {
	await grantAboveHorizon(async (h) => {
		await editChannel(stack, admin, h, [['visibility', 'open']]);
		return `SELECT max(xid)::text FROM channel_policy_log WHERE channel_id = '${h}'`;
	});
});

test('an artifact changed before its reader was made a community admin above the horizon comes once', async () => {
	await grantAboveHorizon(async (h, reader) => {
		const r = await stack.admin(['community', 'add-admin', '--id', String(community), reader.pk]);
		assert.equal(r.code, 0, r.stderr);
		return `SELECT max(xid)::text FROM community_admin_log WHERE pubkey = '${reader.pk}'`;
	});
});

// edit, and the edit's own change, on a later page, carried it again.
test('an artifact edited after a grant, the grant read in pages: the edit comes once', async () => {
	const h = await createChannel(stack, admin, { visibility: 'private' });
	const reader = newKey();
	const ds = [uuid(), uuid(), uuid()].sort();
	const created = {};
	for (const d of ds)
		created[d] = await accept(stack, admin, { d, h, op: 'create' });
	const filter = { artifact: 'incremental', '#h': [h] };
	const first = await query(stack, reader.sk, filter);
	assert.equal(first.status, 200, first.raw);
	assert.deepEqual(first.body.changes, [], 'nothing readable before the grant');
	await addMember(stack, admin, h, reader.pk);
	const edited = await accept(stack, admin, { d: ds[0], h, op: 'update', prev: created[ds[0]].id, title: 'edited' });
	// until the horizon passed the edit: its own change then read too
	const [[editXid]] = await stack.query(`SELECT changed_xid::text FROM artifact_heads WHERE d = '${ds[0]}'`);
	const after = await readPast(reader, { ...filter, limit: 1 }, first.body.cursor, editXid, 60000);
	const got = after.changes.map((c) => c.event.id);
	assert.ok(after.passed, `the reads reached the horizon past the edit (${JSON.stringify(got)})`);
	// (an artifact created before the grant comes with the grant alone:
	// since migration 0027 its own change leaves it to the grant)
	assert.equal(got.filter((id) => id === edited.id).length, 1, JSON.stringify(got));
	assert.ok(!got.includes(created[ds[0]].id) || got.indexOf(created[ds[0]].id) < got.indexOf(edited.id),
		'never the older revision after the edit');
});
