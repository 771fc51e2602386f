// Change stamps (PROTOCOL.md section 8, "Exactness"): every change a
// reader could need to learn about carries the xid8 of the transaction that
// made it, set in that transaction. Each kind of change is made through the
// relay with real events and its stamp is read back with psql: artifact
// head changes (create, update, move in, delete, restore, redaction of the
// current revision), move records, membership changes (grant, role change,
// removal, rejoin, join, leave) and channel policy changes (visibility,
// TTL, deletion). A rolled-back write leaves no stamp anywhere.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { newKey, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, assertRefused, createChannel, editChannel, publish,
	removeMember, uuid, writeRevision,
} from './lib/artifacts.mjs';

let stack;
let admin;
const alice = newKey();
let O, O2;

const xid = (v) => BigInt(v);

async function headStamp(d) {
	const [[v]] = await stack.query(`SELECT changed_xid FROM artifact_heads WHERE d = '${d}'`);
	return xid(v);
}

async function revisionStamp(id) {
	const [[v]] = await stack.query(`SELECT xid FROM events WHERE d IS NOT NULL AND id = '${id}'`);
	return xid(v);
}

async function memberStamp(h, pk) {
	const rows = await stack.query(
		`SELECT changed_xid, active, role FROM members WHERE channel_id = '${h}' AND pubkey = '${pk}'`);
	return rows.length ? { xid: xid(rows[0][0]), active: rows[0][1] === 't', role: Number(rows[0][2]) } : null;
}

async function policyStamp(h) {
	const [[v]] = await stack.query(`SELECT policy_xid FROM channels WHERE id = '${h}'`);
	return xid(v);
}

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	O = await createChannel(stack, admin, { name: 'one' });
	O2 = await createChannel(stack, admin, { name: 'two' });
});

after(async () => {
	await stack?.stop();
});

describe('artifact heads and move records', () => {
	test('every head change advances changed_xid to the writing transaction', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		let last = await headStamp(d);
		assert.equal(last, await revisionStamp(c.id), 'create: the head and the revision share the stamp');

		const steps = [
			['update', { h: O, op: 'update', title: 'edited' }],
			['move', { h: O2, op: 'move' }],
			['delete', { h: O2, op: 'delete' }],
			['restore', { h: O2, op: 'restore', title: 'back' }],
		];
		let prev = c.id;
		for (const [what, spec] of steps) {
			const ev = await accept(stack, alice.sk, { d, prev, ...spec });
			const now = await headStamp(d);
			assert.ok(now > last, `${what} advances the head stamp (${last} -> ${now})`);
			assert.equal(now, await revisionStamp(ev.id), `${what}: the stamp is the writing transaction's`);
			last = now;
			prev = ev.id;
		}
		const [[moved, since]] = await stack.query(
			`SELECT moved_xid, from_since_xid FROM artifact_moves WHERE d = '${d}'`);
		const [[moveRevision]] = await stack.query(
			`SELECT revision_id FROM artifact_moves WHERE d = '${d}'`);
		assert.equal(xid(moved), await revisionStamp(moveRevision), 'the move record carries the move\'s stamp');
		assert.ok(xid(since) <= xid(moved));
	});

	test('redacting the current revision advances the head stamp; an older one does not', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const u = await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'two' });
		const before = await headStamp(d);
		assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', O], ['e', c.id]] }), 'redact old');
		assert.equal(await headStamp(d), before, 'the head did not change');
		const [[oldStamp]] = await stack.query(
			`SELECT redacted_xid FROM artifact_redactions WHERE revision_id = '${c.id}'`);
		assert.ok(xid(oldStamp) > before, 'the redaction record is stamped');
		assertAccepted(await publish(stack, admin, { kind: 9005, tags: [['h', O], ['e', u.id]] }), 'redact current');
		const after = await headStamp(d);
		assert.ok(after > xid(oldStamp));
		const [[curStamp]] = await stack.query(
			`SELECT redacted_xid FROM artifact_redactions WHERE revision_id = '${u.id}'`);
		assert.equal(xid(curStamp), after, 'the head and the redaction share the stamp');
	});

	test('refused writes leave every stamp as it was', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'two' });
		const before = await stack.query(
			`SELECT (SELECT string_agg(changed_xid::text, ',' ORDER BY d) FROM artifact_heads),
			        (SELECT count(*) FROM artifact_moves), (SELECT count(*) FROM events WHERE d IS NOT NULL)`);
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'late' }),
			409, 'conflict: artifact head changed');
		assertRefused(await writeRevision(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, root: 'f'.repeat(64) }),
			409, 'conflict: artifact head changed');
		assertRefused(await writeRevision(stack, alice.sk, { d: uuid(), h: O, op: 'create', root: 'f'.repeat(64) }),
			400, 'invalid: root must be a message in the home channel');
		assert.deepEqual(await stack.query(
			`SELECT (SELECT string_agg(changed_xid::text, ',' ORDER BY d) FROM artifact_heads),
			        (SELECT count(*) FROM artifact_moves), (SELECT count(*) FROM events WHERE d IS NOT NULL)`), before);
	});

	test('a rolled-back write leaves no stamp behind', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create' });
		const before = await headStamp(d);
		// One transaction that changes the head, records a move, a member
		// and a channel policy change, then fails and rolls back.
		let message = '';
		try {
			await stack.query(`DO $$
				DECLARE x xid8 := pg_current_xact_id();
				BEGIN
					UPDATE artifact_heads SET revision_id = repeat('e', 64), channel_id = '${O2}'
					 WHERE d = '${d}';
					INSERT INTO artifact_moves (community_id, d, from_channel, to_channel,
						replaced_revision, revision_id, marker_id)
					SELECT community_id, d, '${O}', '${O2}', '${c.id}', repeat('e', 64), repeat('e', 64)
					  FROM artifact_heads WHERE d = '${d}';
					INSERT INTO members (community_id, channel_id, pubkey, role)
					SELECT community_id, '${O}', repeat('a', 64), 1 FROM channels WHERE id = '${O}';
					UPDATE channels SET visibility = 2 WHERE id = '${O}';
					RAISE EXCEPTION 'rolled back %', x;
				END $$`);
		} catch (err) {
			message = err.message;
		}
		const m = /rolled back (\d+)/.exec(message);
		assert.ok(m, `the transaction failed as planned: ${message}`);
		const x = m[1];
		assert.equal(await headStamp(d), before);
		const [[n]] = await stack.query(
			`SELECT (SELECT count(*) FROM artifact_heads WHERE changed_xid = '${x}'::xid8)
			      + (SELECT count(*) FROM artifact_moves WHERE moved_xid = '${x}'::xid8)
			      + (SELECT count(*) FROM events WHERE d IS NOT NULL AND xid = '${x}'::xid8)
			      + (SELECT count(*) FROM artifact_redactions WHERE redacted_xid = '${x}'::xid8)
			      + (SELECT count(*) FROM members WHERE changed_xid = '${x}'::xid8)
			      + (SELECT count(*) FROM channels WHERE policy_xid = '${x}'::xid8)`);
		assert.equal(n, '0');
		// the transaction is known to have aborted
		const [[status]] = await stack.query(`SELECT pg_xact_status('${x}'::xid8)`);
		assert.equal(status, 'aborted');
		// and the next committed write is stamped as usual
		await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, title: 'after' });
		assert.ok(await headStamp(d) > xid(x));
	});
});

describe('membership', () => {
	test('grant, role change, removal, rejoin, join and leave each advance the member stamp', async () => {
		const bob = newKey();
		const P = await createChannel(stack, admin, { visibility: 'private' });
		await addMember(stack, admin, P, bob.pk);
		let s = await memberStamp(P, bob.pk);
		assert.deepEqual([s.active, s.role], [true, 1]);
		let last = s.xid;
		const step = async (what, fn, want) => {
			await fn();
			s = await memberStamp(P, bob.pk);
			assert.ok(s.xid > last, `${what} advances the stamp (${last} -> ${s.xid})`);
			assert.deepEqual([s.active, s.role], want, what);
			last = s.xid;
		};
		await step('role change', () => addMember(stack, admin, P, bob.pk, 'admin'), [true, 2]);
		await step('removal', () => removeMember(stack, admin, P, bob.pk), [false, 2]);
		await step('rejoin', () => addMember(stack, admin, P, bob.pk), [true, 1]);
		await step('leave', async () => assertAccepted(
			await publish(stack, bob.sk, { kind: 9022, tags: [['h', P]] }), 'leave'), [false, 1]);

		// joining an open channel creates a stamped membership
		const carol = newKey();
		const before = await policyStamp(O);
		assertAccepted(await publish(stack, carol.sk, { kind: 9021, tags: [['h', O]] }), 'join');
		const j = await memberStamp(O, carol.pk);
		assert.ok(j && j.active && j.xid > before, 'join is stamped');
		assertAccepted(await publish(stack, carol.sk, { kind: 9022, tags: [['h', O]] }), 'leave');
		assert.ok((await memberStamp(O, carol.pk)).xid > j.xid, 'leave is stamped');
	});
});

describe('channel policy', () => {
	test('visibility, TTL set and clear, and deletion each advance the policy stamp', async () => {
		const C = await createChannel(stack, admin, { name: 'policy' });
		let last = await policyStamp(C);
		const step = async (what, tags) => {
			if (tags)
				await editChannel(stack, admin, C, tags);
			else
				assertAccepted(await publish(stack, admin, { kind: 9008, tags: [['h', C]] }), 'delete channel');
			const now = await policyStamp(C);
			assert.ok(now > last, `${what} advances the policy stamp (${last} -> ${now})`);
			last = now;
		};
		await step('visibility unlisted', [['visibility', 'unlisted']]);
		await step('visibility private', [['visibility', 'private']]);
		await step('TTL set', [['ttl', '3600']]);
		await step('TTL cleared', [['ttl', '0']]);
		await step('deletion', null);
	});
});
