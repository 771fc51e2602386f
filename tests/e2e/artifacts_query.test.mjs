// Artifact queries end to end (PROTOCOL.md sections 6 and 10): current,
// history and head over POST /query and /count, predicate semantics
// (first value only, OR within a name, AND across names, multi-character
// names), access before pagination, redaction markers, every refusal and
// limit, and the query budget.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { verifyEvent } from 'nostr-tools/pure';

import { newKey, readStackEnv, startRelay } from './lib/harness.mjs';
import {
	accept, addMember, assertAccepted, count, createChannel, events, publish, query, uuid,
} from './lib/artifacts.mjs';

let stack;
let admin;
const alice = newKey();   // member of P; not of Q; has not joined U
const eve = newKey();     // no membership
let O, P, Q, U;           // open, private (alice), private (admin only), unlisted

// A value unique to one test, put on its artifacts as ["run", value].
const newRun = () => crypto.randomBytes(6).toString('hex');

// The event as JSON.stringify writes it in NIP-01 key order.
const canonical = (e) => JSON.stringify({
	id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind,
	tags: e.tags, content: e.content, sig: e.sig,
});

const ids = (list) => list.map((e) => e.id);

async function redact(sk, h, id) {
	const res = await publish(stack, sk, { kind: 9005, tags: [['h', h], ['e', id]] });
	assertAccepted(res, `redact ${id}`);
	return res.event;
}

before(async () => {
	// A larger body limit, so that the 65536-byte predicate limit itself
	// can be exceeded by a request.
	stack = await startRelay({ env: { COMB_MAX_MESSAGE_LENGTH: '262144' } });
	admin = stack.admins[0];
	O = await createChannel(stack, admin, { name: 'open' });
	P = await createChannel(stack, admin, { name: 'private', visibility: 'private' });
	Q = await createChannel(stack, admin, { name: 'hidden', visibility: 'private' });
	U = await createChannel(stack, admin, { name: 'unlisted', visibility: 'unlisted' });
	await addMember(stack, admin, P, alice.pk);
});

after(async () => {
	await stack?.stop();
});

describe('current', () => {
	test('answers a bare array of the stored events, byte for byte', async () => {
		const run = newRun();
		const ev = await accept(stack, alice.sk, {
			d: uuid(), h: O, op: 'create', title: 'quotes " and \\ and ünïcödé',
			content: 'line\nbreak\ttab \u0001 control "quoted" 🙂', extra: [['run', run]],
		});
		const r = await query(stack, alice.sk, { artifact: 'current', '#run': [run] });
		assert.equal(r.status, 200);
		assert.equal(r.raw, `[${canonical(ev)}]`);
		const empty = await query(stack, alice.sk, { artifact: 'current', '#run': ['nothing'] });
		assert.equal(empty.raw, '[]');
	});

	test('predicates match a tag\'s name and first value; OR within a name, AND across names', async () => {
		const run = newRun();
		const mk = (extra) => accept(stack, alice.sk, { d: uuid(), h: O, op: 'create', extra: [['run', run], ...extra] });
		const a1 = await mk([['status', 'open'], ['assignee', 'x', 'y']]);
		const a2 = await mk([['status', 'done'], ['assignee', 'y']]);
		const a3 = await mk([['status', 'open'], ['label', 'a'], ['label', 'b'], ['priority-level', 'high']]);
		const a4 = await mk([['status', 'open'], ['assignee', 'x']]);
		const q = async (preds) => new Set(ids(await events(stack, alice.sk,
			{ artifact: 'current', '#run': [run], ...preds })));
		// first value only: a1's "y" is its second value
		assert.deepEqual(await q({ '#assignee': ['y'] }), new Set([a2.id]));
		assert.deepEqual(await q({ '#assignee': ['x'] }), new Set([a1.id, a4.id]));
		// each tag of a name counts
		assert.deepEqual(await q({ '#label': ['b'] }), new Set([a3.id]));
		// OR within a name
		assert.deepEqual(await q({ '#status': ['done', 'open'] }), new Set([a1.id, a2.id, a3.id, a4.id]));
		assert.deepEqual(await q({ '#assignee': ['y', 'x'] }), new Set([a1.id, a2.id, a4.id]));
		// AND across names
		assert.deepEqual(await q({ '#status': ['open'], '#assignee': ['x'] }), new Set([a1.id, a4.id]));
		assert.deepEqual(await q({ '#status': ['done'], '#assignee': ['x'] }), new Set());
		// multi-character names, and envelope tags as predicates
		assert.deepEqual(await q({ '#priority-level': ['high'] }), new Set([a3.id]));
		assert.deepEqual(await q({ '#type': ['demo.task'], '#op': ['create'], '#label': ['a'] }), new Set([a3.id]));
		assert.deepEqual(await q({ '#h': [O], '#d': [tagD(a2)] }), new Set([a2.id]));
		assert.deepEqual(await q({ '#type': ['demo.other'] }), new Set());
		// case and exactness: no prefix or case-insensitive matching
		assert.deepEqual(await q({ '#status': ['Open', 'ope', 'open '] }), new Set());
	});

	test('names and values are matched exactly, whatever characters they hold', async () => {
		// Each predicate becomes a jsonpath over the head's tags (migration
		// 0018): quotes, backslashes, jsonpath syntax, control characters
		// and non-ASCII must be matched as the bytes they are.
		const run = newRun();
		const values = ['a"b', 'a\\b', '$.k ? (@ == "x")', '" || @ == "', 'x\u0001y', "it's", 'ünï🙂', 'a/b', ''];
		const made = [];
		for (const v of values)
			made.push(await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create', extra: [['run', run], ['k', v]] }));
		const named = await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create',
			extra: [['run', run], ['k"q.z', 'v'], ['k', 'plain']] });
		const q = async (preds) => new Set(ids(await events(stack, alice.sk,
			{ artifact: 'current', '#run': [run], ...preds })));
		for (let i = 0; i < values.length; i++)
			assert.deepEqual(await q({ '#k': [values[i]] }), new Set([made[i].id]), `#k ${JSON.stringify(values[i])}`);
		assert.deepEqual(await q({ '#k': ['a', 'b', 'x', '$.k', '@', 'ünï'] }), new Set());
		assert.deepEqual(await q({ '#k': [values[0], values[2], 'plain'] }), new Set([made[0].id, made[2].id, named.id]));
		assert.deepEqual(await q({ '#k"q.z': ['v'] }), new Set([named.id]));
		assert.deepEqual(await q({ '#k"q': ['v'] }), new Set());
		assert.deepEqual((await count(stack, alice.sk, { artifact: 'current', '#run': [run], '#k': values })).body,
			{ count: values.length });
	});

	test('only the current revision matches', async () => {
		const run = newRun();
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create', extra: [['run', run], ['status', 'open']] });
		const u = await accept(stack, alice.sk, { d, h: O, op: 'update', prev: c.id, extra: [['run', run], ['status', 'done']] });
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], '#status': ['open'] })), []);
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], '#status': ['done'] })), [u.id]);
	});

	test('access applies before the limit: 5 readable of 10 matches with limit 5', async () => {
		const run = newRun();
		const readable = [];
		for (let i = 0; i < 5; i++)
			readable.push(await accept(stack, admin, { d: uuid(), h: O, op: 'create', extra: [['run', run]] }));
		// newer, so a page taken before access checks would hold only these
		for (let i = 0; i < 5; i++)
			await accept(stack, admin, { d: uuid(), h: Q, op: 'create', extra: [['run', run]] });
		const page = await events(stack, alice.sk, { artifact: 'current', '#run': [run], limit: 5 });
		assert.deepEqual(ids(page), ids(readable).reverse());
		assert.deepEqual((await count(stack, alice.sk, { artifact: 'current', '#run': [run] })).body, { count: 5 });
		assert.deepEqual((await count(stack, admin, { artifact: 'current', '#run': [run] })).body, { count: 10 });
		// a channel the reader cannot read answers as one that does not exist
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'current', '#h': [Q] }), []);
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'current', '#h': [uuid()] }), []);
		assert.deepEqual((await count(stack, alice.sk, { artifact: 'current', '#h': [Q] })).body, { count: 0 });
	});

	test('newest accepted first, with limit and offset', async () => {
		const run = newRun();
		const made = [];
		for (let i = 0; i < 7; i++)
			made.push(await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create', extra: [['run', run]] }));
		// editing the oldest makes it the newest
		const edit = await accept(stack, alice.sk, {
			d: tagD(made[0]), h: O, op: 'update', prev: made[0].id, extra: [['run', run]],
		});
		const order = [edit.id, ...ids(made.slice(1)).reverse()];
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run] })), order);
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], limit: 3 })), order.slice(0, 3));
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], limit: 3, offset: 3 })),
			order.slice(3, 6));
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], offset: 6 })), order.slice(6));
		assert.deepEqual(ids(await events(stack, alice.sk, {
			artifact: 'current', kinds: [45010], '#run': [run], limit: 1,
		})), order.slice(0, 1));
		// count ignores the page
		assert.deepEqual((await count(stack, alice.sk, { artifact: 'current', '#run': [run], limit: 2 })).body, { count: 7 });
	});

	test('unlisted channels count only when named in #h (or joined)', async () => {
		const run = newRun();
		const u = await accept(stack, alice.sk, { d: uuid(), h: U, op: 'create', extra: [['run', run]] });
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'current', '#run': [run] }), []);
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run], '#h': [U] })), [u.id]);
		assertAccepted(await publish(stack, alice.sk, { kind: 9021, tags: [['h', U]] }), 'join');
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run] })), [u.id]);
	});
});

describe('deleted and redacted artifacts', () => {
	test('deleted artifacts are absent from current and present in head', async () => {
		const run = newRun();
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: O, op: 'create', extra: [['run', run]] });
		const del = await accept(stack, alice.sk, { d, h: O, op: 'delete', prev: c.id });
		const live = await accept(stack, alice.sk, { d: uuid(), h: O, op: 'create', extra: [['run', run]] });
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run] })), [live.id]);
		const heads = await events(stack, alice.sk, { artifact: 'head', '#d': [d, tagD(live), uuid()] });
		assert.deepEqual(new Set(ids(heads)), new Set([del.id, live.id]));
		assert.equal(heads.find((e) => e.id === del.id).tags.find((t) => t[0] === 'op')[1], 'delete');
		// head omits unknown and unreadable ids
		const hidden = uuid();
		await accept(stack, admin, { d: hidden, h: Q, op: 'create' });
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'head', '#d': [hidden, uuid()] }), []);
		assert.equal((await events(stack, admin, { artifact: 'head', '#d': [hidden] })).length, 1);
	});

	test('history is in acceptance order, with redacted revisions as relay-signed markers', async () => {
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create', extra: [['secret', 'one']] });
		const u1 = await accept(stack, alice.sk, { d, h: P, op: 'update', prev: c.id, title: 'two', extra: [['secret', 'two']] });
		const u2 = await accept(stack, alice.sk, { d, h: P, op: 'update', prev: u1.id, title: 'three' });
		const r1 = await redact(admin, P, u1.id);
		const r0 = await redact(admin, P, c.id);
		const hist = await events(stack, alice.sk, { artifact: 'history', '#d': [d] });
		assert.equal(hist.length, 3);
		assert.equal(hist[2].id, u2.id);
		const [m0, m1] = hist;
		for (const m of [m0, m1]) {
			assert.equal(m.kind, 45011);
			assert.equal(m.pubkey, stack.relayPubkey);
			assert.equal(m.content, '');
			assert.ok(verifyEvent(m), 'the marker verifies');
		}
		assert.deepEqual(m1.tags, [['ar', '1'], ['d', d], ['h', P], ['type', 'demo.task'], ['op', 'update'],
			['prev', c.id], ['reason', 'redacted'], ['e', u1.id]]);
		assert.equal(m1.created_at, r1.created_at);
		// a create has no prev, so neither has its marker
		assert.deepEqual(m0.tags, [['ar', '1'], ['d', d], ['h', P], ['type', 'demo.task'], ['op', 'create'],
			['reason', 'redacted'], ['e', c.id]]);
		assert.equal(m0.created_at, r0.created_at);
		// no title, content or client tag of a redacted revision is served
		const raw = (await query(stack, alice.sk, { artifact: 'history', '#d': [d] })).raw;
		assert.ok(!raw.includes('secret'));
		// predicates see what is served
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'history', '#d': [d], '#secret': ['two'] }), []);
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'history', '#d': [d], '#reason': ['redacted'] })),
			[m0.id, m1.id]);
		// pages of history
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'history', '#d': [d], limit: 1, offset: 1 })), [m1.id]);
		assert.deepEqual((await count(stack, alice.sk, { artifact: 'history', '#d': [d] })).body, { count: 3 });
		// readers of P only
		assert.deepEqual(await events(stack, eve.sk, { artifact: 'history', '#d': [d] }), []);
		// a marker cannot be redacted
		const res = await publish(stack, admin, { kind: 9005, tags: [['h', P], ['e', m1.id]] });
		assert.equal(res.body.message, 'invalid: removal markers cannot be redacted');
	});

	test('a redacted current revision leaves current, is its marker in head, and stays editable', async () => {
		const run = newRun();
		const d = uuid();
		const c = await accept(stack, alice.sk, { d, h: P, op: 'create', extra: [['run', run], ['status', 'open']] });
		const r = await redact(admin, P, c.id);
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'current', '#run': [run] }), []);
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'current', '#d': [d] }), []);
		const first = await query(stack, alice.sk, { artifact: 'head', '#d': [d] });
		const second = await query(stack, alice.sk, { artifact: 'head', '#d': [d] });
		assert.equal(first.raw, second.raw, 'every read serves the same marker bytes');
		const [marker] = first.body;
		assert.equal(marker.kind, 45011);
		assert.equal(marker.created_at, r.created_at);
		assert.deepEqual(marker.tags.slice(-2), [['reason', 'redacted'], ['e', c.id]]);
		// the same bytes in history
		const hist = await query(stack, alice.sk, { artifact: 'history', '#d': [d] });
		assert.equal(hist.raw, first.raw);
		// predicates on withheld tags never match the head
		assert.deepEqual(await events(stack, alice.sk, { artifact: 'head', '#d': [d], '#status': ['open'] }), []);
		// the next edit is current again
		const u = await accept(stack, alice.sk, { d, h: P, op: 'update', prev: c.id, extra: [['run', run]] });
		assert.deepEqual(ids(await events(stack, alice.sk, { artifact: 'current', '#run': [run] })), [u.id]);
		// redacting the same revision twice changes nothing
		await redact(admin, P, c.id);
		const [[n]] = await stack.query(`SELECT count(*) FROM artifact_redactions WHERE revision_id = '${c.id}'`);
		assert.equal(n, '1');
	});
});

describe('refusals', () => {
	const big = (n, ch = 'x') => ch.repeat(n);
	const names = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`#n${i}`, ['v']]));
	const cases = [
		['an unknown key', { artifact: 'current', since: 1 }, 'invalid: unknown filter key since'],
		['ids in an artifact filter', { artifact: 'current', ids: ['a'] }, 'invalid: unknown filter key ids'],
		['an unknown mode', { artifact: 'latest' }, 'invalid: artifact must be current, history, head or incremental'],
		['kinds other than [45010]', { artifact: 'current', kinds: [9] }, 'invalid: kinds of an artifact filter must be [45010]'],
		['history without #d', { artifact: 'history' }, 'invalid: history needs #d'],
		['head without #d', { artifact: 'head', '#h': ['5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84'] }, 'invalid: head needs #d'],
		['limit 0', { artifact: 'current', limit: 0 }, 'invalid: limit must be an integer from 1 to 1000'],
		['limit 1001', { artifact: 'current', limit: 1001 }, 'invalid: limit must be an integer from 1 to 1000'],
		['offset 10001', { artifact: 'current', offset: 10001 }, 'invalid: offset must be an integer from 0 to 10000'],
		['a non-uuid #h', { artifact: 'current', '#h': ['general'] }, 'invalid: #h values must be canonical uuids'],
		['an empty predicate', { artifact: 'current', '#status': [] }, 'invalid: #status must be a non-empty array of strings'],
		['33 predicate names', { artifact: 'current', ...names(33) }, 'invalid: more than 32 predicates'],
		['257 values', { artifact: 'current', '#a': Array.from({ length: 200 }, (_, i) => `a${i}`),
			'#b': Array.from({ length: 57 }, (_, i) => `b${i}`) }, 'invalid: more than 256 predicate values'],
		['a value over 4096 bytes', { artifact: 'current', '#a': [big(4097)] }, 'invalid: a #a value is longer than 4096 bytes'],
		['predicates over 65536 bytes', { artifact: 'current', '#a': Array.from({ length: 16 }, () => big(4096)) },
			'invalid: predicates longer than 65536 bytes in all'],
		['a name over 128 bytes', { artifact: 'current', [`#${big(129, 'n')}`]: ['v'] },
			'invalid: a predicate tag name is longer than 128 bytes'],
	];
	for (const [what, filter, message] of cases) {
		test(`${what}: ${message}`, async () => {
			const r = await query(stack, alice.sk, filter);
			assert.deepEqual({ status: r.status, body: r.body }, { status: 400, body: { error: message } });
			const c = await count(stack, alice.sk, filter);
			assert.deepEqual({ status: c.status, body: c.body }, { status: 400, body: { error: message } });
		});
	}

	test('/count with an incremental filter is invalid', async () => {
		const c = await count(stack, alice.sk, { artifact: 'incremental' });
		assert.deepEqual({ status: c.status, body: c.body },
			{ status: 400, body: { error: 'invalid: incremental filters cannot be counted' } });
	});

	test('exactly the limits pass: 32 names, 256 values, 4096-byte values', async () => {
		const r1 = await query(stack, alice.sk, { artifact: 'current', ...names(32) });
		assert.equal(r1.status, 200);
		const r2 = await query(stack, alice.sk, { artifact: 'current', '#a': Array.from({ length: 256 }, (_, i) => `v${i}`) });
		assert.equal(r2.status, 200);
		const r3 = await query(stack, alice.sk, { artifact: 'current', '#a': Array.from({ length: 15 }, () => big(4096)) });
		assert.equal(r3.status, 200);
	});
});

describe('query budget', () => {
	test('a query that runs past the budget answers 503 error: query budget exceeded', async () => {
		const env = readStackEnv();
		// Hold an exclusive lock on the heads so the query waits past its
		// statement_timeout (2000 ms by default).
		const holder = spawn('psql', ['-X', '-q', '-h', env.PGHOST, '-p', env.PGPORT, '-U', env.PGUSER ?? 'postgres',
			'-d', stack.dbName, '-c',
			'BEGIN; LOCK TABLE artifact_heads IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(8); COMMIT;'],
		{ stdio: 'ignore', env: { ...process.env, PGAPPNAME: 'comb-budget-test' } });
		const done = new Promise((resolve) => holder.once('exit', resolve));
		try {
			for (let i = 0; ; i++) {
				const rows = await stack.query(
					"SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation" +
					" WHERE c.relname = 'artifact_heads' AND l.mode = 'AccessExclusiveLock' AND l.granted");
				if (rows[0][0] !== '0')
					break;
				assert.ok(i < 100, 'the lock was taken');
				await new Promise((r) => setTimeout(r, 50));
			}
			const started = Date.now();
			const r = await query(stack, alice.sk, { artifact: 'current' });
			assert.deepEqual({ status: r.status, body: r.body },
				{ status: 503, body: { error: 'error: query budget exceeded' } });
			assert.match(r.headers['retry-after'] ?? '', /^[0-9]+$/);
			assert.ok(Date.now() - started >= 1500, 'it ran for its budget');
			const c = await count(stack, alice.sk, { artifact: 'current' });
			assert.equal(c.status, 503);
		} finally {
			await stack.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity" +
				" WHERE application_name = 'comb-budget-test'");
			await done;
		}
		// and the relay answers normally afterwards
		assert.equal((await query(stack, alice.sk, { artifact: 'current', limit: 1 })).status, 200);
	});
});

function tagD(ev) {
	return ev.tags.find((t) => t[0] === 'd')[1];
}
