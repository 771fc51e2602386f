// POST /query and POST /count with plain NIP-01 filters (PROTOCOL.md
// sections 6 and 10): every predicate, ordering and limits, access applied
// before LIMIT, unreadable channels answering like missing ones, every
// refusal, and the execution budget.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { accept as acceptRevision } from './lib/artifacts.mjs';
import { newKey, now, post, signEvent, startRelay, strayChannelEvents } from './lib/harness.mjs';

let stack;
let admin;
let open;
let secret;
let unlisted;
const alice = newKey(); // member of the private channel
const bob = newKey();   // member of nothing

function authOpts(extra = {}) {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] }, ...extra };
}

async function accept(sk, template, s = stack) {
	const ev = signEvent(sk, { content: crypto.randomBytes(4).toString('hex'), ...template });
	const r = await post(s.url, '/events', ev, sk, authOpts());
	assert.equal(r.status, 200, r.body);
	assert.deepEqual(r.json(), { id: ev.id, accepted: true, message: '' });
	return ev;
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
	const body = r.json();
	assert.deepEqual(Object.keys(body), ['count']);
	return body.count;
}

// The order of a plain query: created_at descending, then id ascending.
function ordered(events) {
	return [...events].sort((a, b) => (b.created_at - a.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function canonical(ev) {
	const { id, pubkey, created_at: createdAt, kind, tags, content, sig } = ev;
	return { id, pubkey, created_at: createdAt, kind, tags, content, sig };
}

before(async () => {
	stack = await startRelay();
	admin = stack.admins[0];
	open = crypto.randomUUID();
	secret = crypto.randomUUID();
	unlisted = crypto.randomUUID();
	await accept(admin, { kind: 9007, tags: [['h', open], ['name', 'open']] });
	await accept(admin, { kind: 9007, tags: [['h', secret], ['name', 'secret'], ['visibility', 'private']] });
	await accept(admin, { kind: 9007, tags: [['h', unlisted], ['name', 'unlisted'], ['visibility', 'unlisted']] });
	await accept(admin, { kind: 9000, tags: [['h', secret], ['p', alice.pk]] });
});

after(async () => {
	await stack?.stop();
});

describe('plain filters', () => {
	test('the answer is a bare array of the raw events, newest first, ties by id', async () => {
		const carol = newKey();
		const t = now() - 300;
		const evs = [];
		for (const [dt, content] of [[0, 'a'], [0, 'b'], [0, 'c'], [5, 'd'], [-5, 'e']])
			evs.push(await accept(carol.sk, { kind: 9, tags: [['h', open]], content, created_at: t + dt }));
		const r = await post(stack.url, '/query', [{ authors: [carol.pk] }], carol.sk, authOpts());
		assert.equal(r.status, 200);
		assert.match(r.headers['content-type'], /^application\/json/);
		assert.equal(r.body, JSON.stringify(ordered(evs).map(canonical)));
		assert.equal(await count(carol.sk, { authors: [carol.pk] }), 5);
	});

	test('each predicate, alone and together', async () => {
		const [carol, dave] = [newKey(), newKey()];
		const t = now() - 200;
		const target = 'ab'.repeat(32);
		const m1 = await accept(carol.sk, { kind: 9, tags: [['h', open], ['e', target], ['p', dave.pk]], created_at: t });
		const m2 = await accept(carol.sk, { kind: 9, tags: [['h', open], ['d', 'doc-1']], created_at: t + 10 });
		const m3 = await accept(dave.sk, { kind: 9, tags: [['h', open], ['p', carol.pk]], created_at: t + 20 });
		const j = await accept(dave.sk, { kind: 9021, tags: [['h', open]], created_at: t + 30 });
		const both = { authors: [carol.pk, dave.pk] };
		const cases = [
			[{ ids: [m1.id, m3.id] }, [m3, m1]],
			[{ ids: [] }, []],
			[{ authors: [carol.pk] }, [m2, m1]],
			[{ ...both, kinds: [9] }, [m3, m2, m1]],
			[{ ...both, kinds: [9021] }, [j]],
			[{ ...both, kinds: [5, 9021] }, [j]],
			[{ '#e': [target] }, [m1]],
			[{ ...both, '#p': [dave.pk, carol.pk] }, [m3, m1]],
			[{ '#d': ['doc-1'], ...both }, [m2]],
			[{ ...both, '#h': [open] }, [j, m3, m2, m1]],
			[{ ...both, since: t + 10 }, [j, m3, m2]],
			[{ ...both, until: t + 10 }, [m2, m1]],
			[{ ...both, since: t + 10, until: t + 20 }, [m3, m2]],
			[{ ...both, limit: 2 }, [j, m3]],
			[{ ...both, kinds: [9], '#p': [dave.pk, carol.pk], since: t + 5, limit: 5 }, [m3]],
			[{ ...both, '#d': ['doc-2'] }, []],
			[{ ...both, '#h': [] }, []],
		];
		for (const [filter, want] of cases) {
			assert.deepEqual(await readIds(bob.sk, filter), want.map((e) => e.id), JSON.stringify(filter));
			const { limit, ...unlimited } = filter;
			const all = limit === undefined ? want.length : (await readIds(bob.sk, { ...unlimited, limit: 1000 })).length;
			assert.equal(await count(bob.sk, filter), all, `count ${JSON.stringify(filter)}`);
		}
	});

	test('#d finds every revision of an artifact and other kinds\' d tags', async () => {
		// An artifact revision's d is read from its event's row, other
		// kinds' from event_tags (migrations 0023, 0025): both answer alike.
		const d = crypto.randomUUID();
		const c = await acceptRevision(stack, admin, { d, h: open, op: 'create', title: 'one' });
		const u = await acceptRevision(stack, admin, { d, h: open, op: 'update', prev: c.id, title: 'two' });
		const o = await acceptRevision(stack, admin, { d: crypto.randomUUID(), h: open, op: 'create' });
		const m = await accept(admin, { kind: 9, tags: [['h', open], ['d', d]] });
		const cases = [
			[{ '#d': [d] }, [c, u, m]],
			[{ '#d': [d], kinds: [45010] }, [c, u]],
			[{ '#d': [d], kinds: [9] }, [m]],
			[{ '#d': ['x', d, o.tags[1][1]] }, [c, u, m, o]],
			[{ '#d': [d.toUpperCase()] }, []],
			[{ '#d': [d], '#h': [open], limit: 2 }, [c, u, m]],
		];
		for (const [filter, want] of cases) {
			const got = await readIds(bob.sk, filter);
			const all = ordered(want).map((e) => e.id);
			assert.deepEqual(got, filter.limit ? all.slice(0, filter.limit) : all, JSON.stringify(filter));
			assert.equal(await count(bob.sk, filter), want.length, `count ${JSON.stringify(filter)}`);
		}
	});

	test('the default limit is 100 and the largest 1000', async () => {
		const carol = newKey();
		const t = now() - 100;
		for (let i = 0; i < 105; i += 15) {
			await Promise.all(Array.from({ length: Math.min(15, 105 - i) }, (_, k) =>
				accept(carol.sk, { kind: 9, tags: [['h', open]], created_at: t + i + k })));
		}
		assert.equal((await read(carol.sk, { authors: [carol.pk] })).length, 100);
		assert.equal((await read(carol.sk, { authors: [carol.pk], limit: 1000 })).length, 105);
		assert.equal(await count(carol.sk, { authors: [carol.pk] }), 105);
		// The newest come first, so the oldest five are left out.
		const page = await read(carol.sk, { authors: [carol.pk] });
		assert.equal(page[0].created_at, t + 104);
		assert.equal(page[99].created_at, t + 5);
		// A larger answer is sent as it is read (chunked); one of 16 events
		// or fewer comes whole, with its length. Both read alike.
		const big = await post(stack.url, '/query', [{ authors: [carol.pk], limit: 1000 }], carol.sk, authOpts());
		assert.equal(big.headers['transfer-encoding'], 'chunked');
		const small = await post(stack.url, '/query', [{ authors: [carol.pk], limit: 5 }], carol.sk, authOpts());
		assert.equal(small.headers['content-length'], String(Buffer.byteLength(small.body)));
		assert.deepEqual(JSON.parse(small.body), JSON.parse(big.body).slice(0, 5));
	});
});

describe('filters of one channel', () => {
	// A filter naming one channel in #h and narrowing it only by kinds,
	// since, until and limit is read by comb_channel_events; naming a second,
	// non-canonical value sends the same filter the general way.
	test('read exactly as the general form: kinds, since, until, limits, ties, deletions', async () => {
		const ch = crypto.randomUUID();
		const created = await accept(admin, { kind: 9007, tags: [['h', ch], ['name', 'one']] });
		const [carol, dave] = [newKey(), newKey()];
		const t = now() - 400;
		const msgs = [];
		for (const [who, dt] of [[carol, 0], [dave, 0], [carol, 0], [dave, 10], [carol, 20], [dave, 30]])
			msgs.push(await accept(who.sk, { kind: 9, tags: [['h', ch]], created_at: t + dt }));
		const join = await accept(dave.sk, { kind: 9021, tags: [['h', ch]], created_at: t + 15 });
		const del = await accept(carol.sk, { kind: 5, tags: [['h', ch], ['e', msgs[2].id]], created_at: t + 25 });
		const stored = ordered([created, join, del, ...msgs.filter((m) => m !== msgs[2])]);
		const cases = [
			{}, { kinds: [9] }, { kinds: [9, 5] }, { kinds: [9021] }, { kinds: [7] },
			{ since: t + 10 }, { until: t + 10 }, { since: t + 5, until: t + 25 }, { since: t + 31, until: t + 29 },
			{ limit: 2 }, { kinds: [9], limit: 3 }, { kinds: [9], limit: 17 }, { until: t, limit: 1 },
		];
		for (const filter of cases) {
			const want = stored.filter((e) => (!filter.kinds || filter.kinds.includes(e.kind)) &&
				(filter.since === undefined || e.created_at >= filter.since) &&
				(filter.until === undefined || e.created_at <= filter.until))
				.slice(0, filter.limit ?? 100).map((e) => e.id);
			assert.deepEqual(await readIds(bob.sk, { ...filter, '#h': [ch] }), want, JSON.stringify(filter));
			assert.deepEqual(await readIds(bob.sk, { ...filter, '#h': [ch, 'not-a-uuid'] }), want,
				`general ${JSON.stringify(filter)}`);
		}
		// An upper-case spelling names no stored channel.
		assert.deepEqual(await readIds(bob.sk, { '#h': [ch.toUpperCase()] }), []);
	});

	test('every event stored here names its channel in its h tag', async () => {
		// Messages, moderation events and deletions of this file so far.
		assert.ok(Number((await stack.query('SELECT count(*) FROM events'))[0][0]) > 10);
		assert.deepEqual(await strayChannelEvents(stack), []);
	});
});

describe('access', () => {
	test('a private channel reads as a missing one for non-members', async () => {
		const m = await accept(alice.sk, { kind: 9, tags: [['h', secret]], content: 'private words' });
		const missing = crypto.randomUUID();
		for (const filter of [{ '#h': [secret] }, { '#h': [missing] }, { ids: [m.id] }, { authors: [alice.pk], kinds: [9] }]) {
			const r = await post(stack.url, '/query', [filter], bob.sk, authOpts());
			assert.equal(r.status, 200);
			assert.equal(r.body, '[]', JSON.stringify(filter));
			const c = await post(stack.url, '/count', [filter], bob.sk, authOpts());
			assert.equal(c.status, 200);
			assert.equal(c.body, '{"count":0}');
		}
		assert.deepEqual(await readIds(alice.sk, { '#h': [secret], kinds: [9] }), [m.id]);
		assert.deepEqual(await readIds(alice.sk, { ids: [m.id] }), [m.id]);
		assert.equal(await count(alice.sk, { '#h': [secret, missing], kinds: [9] }), 1);
	});

	test('access applies before LIMIT', async () => {
		const carol = newKey();
		await accept(admin, { kind: 9000, tags: [['h', secret], ['p', carol.pk]] });
		const t = now() - 50;
		const visible = await accept(carol.sk, { kind: 9, tags: [['h', open]], created_at: t });
		for (let i = 1; i <= 5; i++)
			await accept(carol.sk, { kind: 9, tags: [['h', secret]], created_at: t + i });
		// Bob cannot read the five newer ones: his single result is the older.
		assert.deepEqual(await readIds(bob.sk, { authors: [carol.pk], limit: 1 }), [visible.id]);
		assert.equal(await count(bob.sk, { authors: [carol.pk] }), 1);
		assert.equal(await count(carol.sk, { authors: [carol.pk] }), 6);
	});

	test('unlisted channels: broad reads skip them unless joined, #h reads them', async () => {
		const carol = newKey();
		const m = await accept(admin, { kind: 9, tags: [['h', unlisted]], content: 'unlisted' });
		assert.deepEqual(await readIds(carol.sk, { ids: [m.id] }), []);
		assert.deepEqual(await readIds(carol.sk, { ids: [m.id], '#h': [unlisted] }), [m.id]);
		assert.deepEqual(await readIds(carol.sk, { ids: [m.id], '#h': [unlisted, open] }), [m.id]);
		assert.ok((await readIds(carol.sk, { '#h': [unlisted], kinds: [9] })).includes(m.id));
		assert.equal(await count(carol.sk, { ids: [m.id] }), 0);
		await accept(carol.sk, { kind: 9021, tags: [['h', unlisted]] });
		assert.deepEqual(await readIds(carol.sk, { ids: [m.id] }), [m.id]);
	});
});

function hex64s(n) {
	return Array.from({ length: n }, (_, i) => i.toString(16).padStart(64, '0'));
}

function strings(prefix, n) {
	return Array.from({ length: n }, (_, i) => `${prefix}${i}`);
}

describe('refusals', () => {
	const badBodies = [
		['{}', 'invalid: the body must be a json array holding exactly one filter'],
		['[]', 'invalid: the body must be a json array holding exactly one filter'],
		['[{},{}]', 'invalid: the body must be a json array holding exactly one filter'],
		['[1]', 'invalid: the body must be a json array holding exactly one filter'],
		['[[]]', 'invalid: the body must be a json array holding exactly one filter'],
		['[{"kinds":[9]', 'invalid: invalid json'],
		['', 'invalid: invalid json'],
		['[{"kinds":[9],"kinds":[5]}]', 'invalid: duplicate key'],
		['[{"search":"x"}]', 'invalid: unknown filter key search'],
		['[{"#type":["demo.task"]}]', 'invalid: multi-character tag predicates need an artifact filter'],
		['[{"#t":["x"]}]', 'invalid: unsupported tag predicate #t'],
		['[{"limit":0}]', 'invalid: limit must be an integer from 1 to 1000'],
		['[{"limit":1001}]', 'invalid: limit must be an integer from 1 to 1000'],
		['[{"limit":"5"}]', 'invalid: limit must be an integer from 1 to 1000'],
		['[{"since":-1}]', 'invalid: since must be a non-negative integer'],
		['[{"until":1.5}]', 'invalid: until must be a non-negative integer'],
		['[{"kinds":[70000]}]', 'invalid: kinds must be integers from 0 to 65535'],
		['[{"ids":["ABC"]}]', 'invalid: ids entries must be 64 lowercase hex digits'],
		['[{"authors":"x"}]', 'invalid: authors must be an array'],
		['[{"#e":[1]}]', 'invalid: #e values must be strings'],
		[JSON.stringify([{ ids: hex64s(257) }]), 'invalid: ids holds more than 256 entries'],
		[JSON.stringify([{ authors: hex64s(257) }]), 'invalid: authors holds more than 256 entries'],
		[JSON.stringify([{ '#e': strings('e', 200), '#p': strings('p', 57) }]),
			'invalid: more than 256 tag values'],
		[JSON.stringify([{ '#d': ['x'.repeat(4097)] }]), 'invalid: a tag value is longer than 4096 bytes'],
	];

	test('malformed bodies and filters get 400 invalid on /query and /count', async () => {
		for (const path of ['/query', '/count']) {
			for (const [body, error] of badBodies) {
				const r = await post(stack.url, path, body, bob.sk, authOpts());
				assert.equal(r.status, 400, `${path} ${body.slice(0, 80)}: ${r.body}`);
				assert.deepEqual(r.json(), { error }, `${path} ${body.slice(0, 80)}`);
			}
		}
	});

	test('the largest accepted filters', async () => {
		const ids = hex64s(256);
		assert.deepEqual(await read(bob.sk, { ids, authors: ids, kinds: [9], limit: 1000 }), []);
		assert.deepEqual(await read(bob.sk, {
			'#e': strings('e', 200),
			'#p': strings('p"\\{},', 56),
			'#d': [], '#h': [],
		}), []);
		assert.deepEqual(await read(bob.sk, { '#d': ['x'.repeat(4096)] }), []);
	});

	test('a body over max_message_length gets 413', async () => {
		const body = JSON.stringify([{ '#d': Array.from({ length: 20 }, () => 'y'.repeat(4000)) }]);
		for (const path of ['/query', '/count']) {
			const r = await post(stack.url, path, body, bob.sk, authOpts());
			assert.equal(r.status, 413);
			assert.deepEqual(r.json(), { error: 'invalid: body too large' });
		}
	});
});

describe('execution budget', () => {
	test('a query running past the budget answers 503 query budget exceeded', async () => {
		// The smallest budget the relay accepts: on the fastest machine
		// seen, counting the 200,000 events below takes 45 to 70 ms, so a
		// budget of 50 ms was not always exceeded.
		const s = await startRelay({ env: { COMB_QUERY_TIMEOUT_MS: '10' } });
		try {
			const reader = newKey();
			// Events without a channel are the author's own: a full scan.
			await s.psql('INSERT INTO events (community_id, id, pubkey, created_at, kind, raw)' +
				` SELECT ${s.communities[0].id}, lpad(to_hex(g), 64, '0'), '${reader.pk}', g, 9, '{}'` +
				' FROM generate_series(1, 200000) g; ANALYZE events');
			// Counting the reader's own 200,000 events, and a stranger's broad
			// read that must check every one of them and finds none.
			const stranger = newKey();
			for (const [path, sk] of [['/count', reader.sk], ['/query', stranger.sk]]) {
				const r = await post(s.url, path, [{}], sk, authOpts());
				assert.equal(r.status, 503, `${path}: ${r.body}`);
				assert.deepEqual(r.json(), { error: 'error: query budget exceeded' });
				assert.match(r.headers['retry-after'] ?? '', /^[0-9]+$/);
			}
			// The connection stays usable: a narrow query still answers (on
			// a loaded machine even a probe may exceed 10 ms now and then,
			// so it gets a few tries; each failure must be the budget's).
			let ok;
			for (let i = 0; i < 5; i++) {
				ok = await post(s.url, '/query', [{ ids: ['00'.repeat(32)] }], reader.sk, authOpts());
				if (ok.status === 200)
					break;
				assert.deepEqual(ok.json(), { error: 'error: query budget exceeded' });
			}
			assert.equal(ok.status, 200, ok.body);
			assert.equal(ok.body, '[]');
		} finally {
			await s.stop();
		}
	});
});
