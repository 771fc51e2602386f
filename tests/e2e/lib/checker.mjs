// The randomized convergence checker (issue 7, item 2), in the manner of
// Jepsen: seeded histories from several concurrent writers, readers that
// keep local stores the way real clients do, optional faults at random
// points, and at the end a comparison of every store with the server's
// truth for its reader.
//
// A history mixes artifact creates, edits, moves, deletes, restores and
// redactions (of current and of older revisions) with grants,
// revocations, joins, leaves, visibility and TTL changes, channel
// deletions and chat messages. Writers are community admins, so what
// they may do depends only on the state of the artifact and channel they
// touch; a writer's model of that state is only a guide for choosing the
// next operation (a refusal or an uncertain outcome makes it re-read the
// row from the database), never the truth.
//
// Readers keep, each on its relay node:
//   - a broad incremental store, and one scoped by #h (and #type);
//   - syncs on one channel and on two channels, when the relay serves
//     syncs (reopened on every `resync:`, reconnected after drops).
// They read while the writers write, with random page sizes.
//
// At the end (writers done, every service back) each incremental store
// reads up to the horizon and must equal a fresh `current` read by its
// reader over its scope, TTL channels left out; each sync must equal the
// same read over its channels once live, or be refused exactly when one
// of its channels is unreadable; no store may have seen an older revision
// after a newer one or anything but artifacts; and every event the relay
// accepted must still be stored.
//
// runChecker() never throws for a divergence: it returns a report whose
// `failures` say what differed and `seed` how to run it again.

import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';

import { newKey, request } from './harness.mjs';
import { publish, revisionTags, uuid } from './artifacts.mjs';
import {
	IncrementalStore, ReadError, ResumeStore, SyncStore, diffStores, settle, syncAvailable,
	truthFor, ttlChannels,
} from './clients.mjs';

const execFileP = promisify(execFile);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** mulberry32: a small deterministic generator of floats in [0, 1). */
export function rng(seed) {
	let x = seed >>> 0;
	return () => {
		x = (x + 0x6d2b79f5) >>> 0;
		let t = x;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 0x100000000;
	};
}

const VISIBILITIES = ['open', 'unlisted', 'private'];
const VIS_NUM = { open: '0', unlisted: '1', private: '2' };
const VIS_NAME = { 0: 'open', 1: 'unlisted', 2: 'private' };
const TYPES = ['demo.task', 'demo.note'];

// Cumulative weights of the writers' operations.
const OPS = [
	['create', 20], ['update', 18], ['move', 12], ['delete', 5], ['restore', 3],
	['redact', 5], ['grant', 8], ['revoke', 5], ['join', 4], ['leave', 3],
	['visibility', 6], ['ttl', 4], ['channelDelete', 1.5], ['chat', 2],
];

/** Waits until every relay node answers /readyz with 200. */
async function readyAll(stack, timeoutMs = 60000) {
	const deadline = Date.now() + timeoutMs;
	for (const url of stack.urls) {
		for (;;) {
			let status = 0;
			try {
				status = (await request(url, { path: '/readyz', host: 'localhost', timeoutMs: 3000 })).status;
			} catch {
				// down
			}
			if (status === 200)
				break;
			if (Date.now() > deadline)
				throw new Error(`${url} not ready within ${timeoutMs} ms`);
			await sleep(100);
		}
	}
}

/** Runs SQL on the stack's database, retrying while it is unreachable. */
async function sqlRetry(stack, sql, timeoutMs = 60000) {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		try {
			return await stack.query(sql);
		} catch (err) {
			if (Date.now() > deadline)
				throw err;
			await sleep(200);
		}
	}
}

// The capture instance running now, per stack (a restart starts a new one).
const currentCapture = new WeakMap();

/**
 * The fault injectors a harness stack supports by itself. `hooks` may add
 * or replace any (pg, redis: for stacks whose servers the test owns).
 * Each resolves once the fault is over (the service is back).
 */
export function standardFaults(stack, hooks = {}) {
	return {
		// kill -9 of capture mid-stream; a new instance takes over
		async capture(random) {
			await stack.stopCapture(currentCapture.get(stack) ?? 0, 'SIGKILL');
			await sleep(Math.floor(random() * 1500));
			currentCapture.set(stack, await stack.startCapture());
		},
		// kill -9 of one relay node (opts.node, else a random one); it
		// comes back on its port
		async node(random, opts = {}) {
			const i = opts.node ?? Math.floor(random() * stack.urls.length);
			await stack.stopNode(i, 'SIGKILL');
			await sleep(opts.downMs ?? Math.floor(random() * 1500));
			await stack.startNode(i);
		},
		// a writing transaction left open (an xid taken, nothing written):
		// the horizon stops, readers must wait and never skip. The horizon
		// is cluster-wide: use it only on a cluster no other test shares
		async hold(random, opts = {}) {
			const ms = opts.holdMs ?? 2000 + Math.floor(random() * 3000);
			await execFileP('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', stack.dbUrl, '-c',
				`BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(${ms / 1000}); COMMIT;`],
			{ env: { ...process.env, PGCONNECT_TIMEOUT: '10' } }).catch(() => {});
		},
		...hooks,
	};
}

/**
 * Waits until no write a client gave up on can still change the database,
 * then brings every relay node back. A write whose answer never arrived
 * (the client's timeout, a dropped connection) may still be running in the
 * relay or in its database session, and commit after the final reads;
 * settle() only covers transactions that already hold an xid. So: every
 * node is stopped gracefully (civetweb finishes the requests it holds), then
 * no other session of the stack's database may be busy (a killed node's
 * statement ends within the statement budget), then the nodes start again.
 */
export async function quiesce(stack, timeoutMs = 60000) {
	for (let i = 0; i < stack.urls.length; i++)
		await stack.stopNode(i, 'SIGTERM').catch(() => {});
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const rows = await sqlRetry(stack,
			'SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()' +
			" AND pid <> pg_backend_pid() AND state <> 'idle'");
		if (rows[0][0] === '0')
			break;
		if (Date.now() > deadline)
			throw new Error(`sessions of the database stayed busy for ${timeoutMs} ms`);
		await sleep(50);
	}
	for (let i = 0; i < stack.urls.length; i++)
		await stack.startNode(i);
}

/**
 * The server-side history of artifact d as store s's reader sees it, for a
 * store that differs from the truth: the head, the revisions, the
 * moves, the reader's membership and the policy log of every channel the
 * artifact was ever in (with their xid stamps), the horizon now, and every
 * read of the store that touched d (with the cursor it read with).
 */
async function artifactHistory(stack, s, d) {
	const rows = (sql) => sqlRetry(stack, sql).catch((err) => [[`failed: ${err.message}`]]);
	const channels = `(SELECT channel_id FROM events WHERE d = '${d}'` +
		` UNION SELECT to_channel FROM artifact_moves WHERE d = '${d}')`;
	return {
		store: s.name, scope: s.scope, d,
		horizon: (await rows('SELECT pg_snapshot_xmin(pg_current_snapshot())::text'))[0][0],
		head: await rows('SELECT channel_id, revision_id, deleted, redacted, changed_xid, home_since_xid' +
			` FROM artifact_heads WHERE d = '${d}'`),
		revisions: await rows('SELECT id, op, channel_id, redacted, xid FROM events' +
			` WHERE d = '${d}' ORDER BY xid`),
		moves: await rows('SELECT from_channel, to_channel, moved_xid, from_since_xid FROM artifact_moves' +
			` WHERE d = '${d}' ORDER BY moved_xid`),
		membership: await rows('SELECT channel_id, role, active, changed_xid FROM members' +
			` WHERE pubkey = '${s.reader.pk}' AND channel_id IN ${channels}`),
		policy: await rows('SELECT channel_id, xid, was_visibility, was_deleted, was_ttl FROM channel_policy_log' +
			` WHERE channel_id IN ${channels} ORDER BY xid`),
		channels: await rows('SELECT id, visibility, ttl, deleted, policy_xid FROM channels' +
			` WHERE id IN ${channels}`),
		reads: (s.trail ?? []).filter((r) => r.changes.some((c) => c[1] === d)),
	};
}

/**
 * Runs one history against stack and checks convergence. opts:
 *   seed       the seed (default random); printed in every failure
 *   ops        number of writer operations in all (default 400), or
 *   durationMs write for this long instead
 *   writers, readers, channels (default 3, 3, 6)
 *   syncs      true (default), false, or 'auto' (when the relay serves them)
 *   resumes    true: each reader also keeps a broad and a scoped store by
 *              resumable sync (default false)
 *   faults     names of faults to inject at random points (see
 *              standardFaults), faultHooks to add pg/redis, faultGapMs
 *              [min, max] between faults (default [1500, 4000])
 *   schedule   faults at fixed points first: [{afterOps, fault, ...opts}]
 *   writeGapMs a writer waits up to this long between operations
 *   holdMs     how long `hold` keeps its transaction open
 *   log        a function for progress lines
 * Resolves to the report {seed, ok, failures[], ops, faults, stores, ...}.
 */
export async function runChecker(stack, opts = {}) {
	const seed = opts.seed ?? crypto.randomInt(1, 2 ** 31);
	const log = opts.log ?? (() => {});
	const nWriters = opts.writers ?? 3;
	const nReaders = opts.readers ?? 3;
	const nChannels = opts.channels ?? 6;
	const totalOps = opts.durationMs ? Infinity : (opts.ops ?? 400);
	const deadline = opts.durationMs ? Date.now() + opts.durationMs : Infinity;
	const setup = rng(seed);
	const urls = stack.urls;
	const admin = stack.admins[0];
	const community = stack.communities[0].id;
	const report = {
		seed, ok: false, failures: [], evidence: [], ops: {}, refusals: {}, uncertain: 0, unanswered: 0,
		faults: {}, faultErrors: [], stores: [], accepted: 0, elapsedMs: 0,
		syncs: false,
	};
	const started = Date.now();
	const accepted = [];
	const fail = (msg) => report.failures.push(msg);

	// --- the actors ----------------------------------------------------
	const writers = [{ sk: admin }];
	for (let i = 1; i < nWriters; i++) {
		const k = newKey();
		writers.push({ sk: k.sk });
		// more community admins: they may write and moderate everywhere
		await stack.psql(`INSERT INTO community_admins (community_id, pubkey) VALUES (${community}, '${k.pk}')`);
	}
	const readers = [];
	for (let i = 0; i < nReaders; i++)
		readers.push({ ...newKey(), i });

	// --- the model (a guide for choosing operations) -------------------
	const channels = [];          // {h, visibility, ttl, deleted}
	const byId = new Map();       // h -> channel
	const artifacts = new Map();  // d -> {h, id, deleted, type, older: []}
	const members = new Map();    // `${h}:${pk}` -> true when active

	const post = async (sk, template, node) => {
		const url = urls[node % urls.length];
		try {
			// publish() posts to its first argument's url
			const r = await publish({ url }, sk, template, { timeoutMs: 15000 });
			if (r.status >= 500)
				await sleep(100 + Math.floor(Math.random() * 200));
			return r;
		} catch (err) {
			await sleep(100 + Math.floor(Math.random() * 200));
			return { status: 0, body: null, raw: err.message, event: null };
		}
	};
	const isAccepted = (r) => r.status === 200 && r.body?.accepted === true;
	const note = (op, r) => {
		const o = report.ops[op] ?? (report.ops[op] = { tried: 0, accepted: 0 });
		o.tried++;
		if (isAccepted(r)) {
			o.accepted++;
			accepted.push(r.event.id);
			return true;
		}
		const why = r.status === 0 ? 'no answer' : `${r.status} ${r.body?.message ?? r.body?.error ?? r.raw.slice(0, 80)}`;
		const key = `${op}: ${why}`;
		report.refusals[key] = (report.refusals[key] ?? 0) + 1;
		if (r.status === 0 || r.status >= 500)
			report.uncertain++;
		if (r.status === 0)
			report.unanswered++;
		return false;
	};

	const refreshArtifact = async (d) => {
		const rows = await sqlRetry(stack,
			`SELECT revision_id, channel_id::text, deleted, type FROM artifact_heads WHERE d = '${d}'`).catch(() => null);
		if (!rows)
			return;
		if (rows.length === 0) {
			artifacts.delete(d);
			return;
		}
		const [id, h, deleted, type] = rows[0];
		const a = artifacts.get(d) ?? { older: [] };
		if (a.id && a.id !== id)
			a.older.push({ id: a.id, h: a.h });
		Object.assign(a, { id, h, deleted: deleted === 't', type });
		artifacts.set(d, a);
	};
	const refreshChannel = async (c) => {
		const rows = await sqlRetry(stack,
			`SELECT visibility, coalesce(ttl, 0), deleted FROM channels WHERE id = '${c.h}'`).catch(() => null);
		if (!rows || rows.length === 0)
			return;
		c.visibility = VIS_NAME[rows[0][0]];
		c.ttl = Number(rows[0][1]);
		c.deleted = rows[0][2] === 't';
	};
	const refreshMember = async (h, pk) => {
		const rows = await sqlRetry(stack,
			`SELECT active FROM members WHERE channel_id = '${h}' AND pubkey = '${pk}'`).catch(() => null);
		if (rows)
			members.set(`${h}:${pk}`, rows.length > 0 && rows[0][0] === 't');
	};

	const liveChannels = () => channels.filter((c) => !c.deleted);
	const createChannel = async (random, visibility, ttl, node = 0) => {
		const h = uuid();
		const tags = [['h', h], ['name', `c-${h.slice(0, 6)}`], ['visibility', visibility]];
		if (ttl)
			tags.push(['ttl', String(ttl)]);
		const r = await post(admin, { kind: 9007, tags }, node);
		if (note('channelCreate', r) || r.status === 0 || r.status >= 500) {
			const c = { h, visibility, ttl: ttl ?? 0, deleted: false };
			// An uncertain create enters the model only once the database
			// has it: operations running meanwhile (a sync's rescope) pick
			// their channels from the model.
			if (!isAccepted(r)) {
				const rows = await sqlRetry(stack, `SELECT 1 FROM channels WHERE id = '${h}'`).catch(() => []);
				if (rows.length === 0)
					return null;
				await refreshChannel(c);
			}
			channels.push(c);
			byId.set(h, c);
			return c;
		}
		return null;
	};

	// --- one writer operation ------------------------------------------
	let seq = 0;
	const ops = opts.weights ? OPS.map(([name, w]) => [name, opts.weights[name] ?? w]) : OPS;
	const pickOp = (random) => {
		const total = ops.reduce((s, [, w]) => s + w, 0);
		let x = random() * total;
		for (const [name, w] of ops) {
			if (x < w)
				return name;
			x -= w;
		}
		return 'create';
	};
	const pick = (random, arr) => arr[Math.floor(random() * arr.length)];

	const doOp = async (w, random) => {
		const op = pickOp(random);
		const node = Math.floor(random() * urls.length);
		const live = liveChannels();
		const c = pick(random, live);
		const n = ++seq;
		// artifacts of deleted channels can never be written again
		if (n % 200 === 0)
			for (const [d, a] of artifacts)
				if (byId.get(a.h)?.deleted)
					artifacts.delete(d);
		const items = [...artifacts.entries()].filter(([, a]) => !byId.get(a.h)?.deleted);
		const item = items.length ? pick(random, items) : null;
		const reader = pick(random, readers);
		switch (op) {
		case 'create':
		case 'update':
		case 'move':
		case 'delete':
		case 'restore': {
			let d, a, spec;
			if (op === 'create' || !item) {
				d = uuid();
				a = null;
				spec = { d, h: c.h, type: pick(random, TYPES), op: 'create', title: `t${n}` };
			} else {
				[d, a] = item;
				let kind = op;
				if (kind === 'delete' && a.deleted)
					kind = 'restore';
				else if (kind === 'restore' && !a.deleted)
					kind = 'delete';
				else if ((kind === 'update' || kind === 'move') && a.deleted)
					kind = 'restore';
				let h = a.h;
				if (kind === 'move') {
					const dest = live.filter((x) => x.h !== a.h);
					if (dest.length === 0)
						kind = 'update';
					else
						h = pick(random, dest).h;
				}
				spec = { d, h, type: a.type, op: kind, prev: a.id, title: `t${n}` };
			}
			// a delete carries only envelope tags
			const extra = spec.op === 'delete' ? [] : [['status', pick(random, ['open', 'done', 'blocked'])]];
			const r = await post(w.sk, {
				kind: 45010,
				tags: revisionTags({ ...spec, extra }),
				content: spec.op === 'delete' ? '' : `body ${n} ${crypto.randomBytes(4).toString('hex')}`,
			}, node);
			if (note(spec.op, r)) {
				if (!a) {
					artifacts.set(d, { h: spec.h, id: r.event.id, deleted: false, type: spec.type, older: [] });
				} else if (a.id === spec.prev) {
					a.older.push({ id: a.id, h: a.h });
					a.id = r.event.id;
					a.h = spec.h;
					a.deleted = spec.op === 'delete';
				} else {
					await refreshArtifact(d);
				}
			} else {
				await refreshArtifact(d);
			}
			return;
		}
		case 'redact': {
			if (!item)
				return;
			const [d, a] = item;
			// the current revision, or an older one (which changes nothing
			// current); a revision is redacted in the channel it was written in
			const t = a.older.length && random() < 0.3 ? pick(random, a.older) : a;
			const r = await post(w.sk, { kind: 9005, tags: [['h', t.h], ['e', t.id]], content: `r${n}` }, node);
			note(op, r);
			return;
		}
		case 'grant':
		case 'revoke': {
			const key = `${c.h}:${reader.pk}`;
			const kind = members.get(key) ? 9001 : 9000;
			const tags = kind === 9000 ? [['h', c.h], ['p', reader.pk, 'member']] : [['h', c.h], ['p', reader.pk]];
			const r = await post(w.sk, { kind, tags, content: `m${n}` }, node);
			if (note(kind === 9000 ? 'grant' : 'revoke', r))
				members.set(key, kind === 9000);
			else
				await refreshMember(c.h, reader.pk);
			return;
		}
		case 'join':
		case 'leave': {
			const key = `${c.h}:${reader.pk}`;
			const kind = members.get(key) ? 9022 : 9021;
			const r = await post(reader.sk, { kind, tags: [['h', c.h]], content: `j${n}` }, node);
			if (note(kind === 9021 ? 'join' : 'leave', r))
				members.set(key, kind === 9021);
			else
				await refreshMember(c.h, reader.pk);
			return;
		}
		case 'visibility': {
			const v = pick(random, VISIBILITIES.filter((x) => x !== c.visibility));
			const r = await post(w.sk, { kind: 9002, tags: [['h', c.h], ['visibility', v]], content: `v${n}` }, node);
			if (note(op, r))
				c.visibility = v;
			else
				await refreshChannel(c);
			return;
		}
		case 'ttl': {
			const ttl = c.ttl ? 0 : 600;
			const r = await post(w.sk, { kind: 9002, tags: [['h', c.h], ['ttl', String(ttl)]], content: `ttl${n}` }, node);
			if (note(op, r))
				c.ttl = ttl;
			else
				await refreshChannel(c);
			return;
		}
		case 'channelDelete': {
			if (live.length <= Math.max(3, nChannels - 2))
				return;
			const r = await post(w.sk, { kind: 9008, tags: [['h', c.h]], content: `x${n}` }, node);
			if (note(op, r))
				c.deleted = true;
			else
				await refreshChannel(c);
			if (c.deleted)
				await createChannel(random, pick(random, VISIBILITIES), 0, node);
			return;
		}
		case 'chat': {
			const r = await post(w.sk, { kind: 9, tags: [['h', c.h]], content: `chat ${n}` }, node);
			note(op, r);
			return;
		}
		default:
			throw new Error(`unknown operation ${op}`);
		}
	};

	// --- setup ----------------------------------------------------------
	for (let i = 0; i < nChannels; i++) {
		const visibility = i < 3 ? VISIBILITIES[i] : pick(setup, VISIBILITIES);
		await createChannel(setup, visibility, i === nChannels - 1 ? 600 : 0);
	}
	for (const r of readers) {
		for (const c of channels) {
			if (setup() < 0.5) {
				const res = await post(admin, { kind: 9000, tags: [['h', c.h], ['p', r.pk, 'member']], content: 'setup' }, 0);
				if (note('grant', res))
					members.set(`${c.h}:${r.pk}`, true);
			}
		}
	}
	for (let i = 0; i < nChannels * 3; i++) {
		const c = pick(setup, liveChannels());
		const d = uuid();
		const spec = { d, h: c.h, type: pick(setup, TYPES), op: 'create', title: `setup ${d.slice(0, 6)}` };
		const r = await post(admin, { kind: 45010, tags: revisionTags(spec), content: 'setup' }, 0);
		if (note('create', r))
			artifacts.set(d, { h: c.h, id: r.event.id, deleted: false, type: spec.type, older: [] });
	}

	// --- the stores -----------------------------------------------------
	// A client syncs channels it can read (by the model); a sync refused
	// because a channel was deleted moves to other channels.
	const readableByModel = (r, c) => !c.deleted &&
		(c.visibility !== 'private' || members.get(`${c.h}:${r.pk}`));
	const syncTargets = (random, r, n) => {
		const ok = liveChannels().filter((c) => readableByModel(r, c));
		const from = ok.length ? ok : liveChannels();
		return [...new Set(Array.from({ length: n }, () => pick(random, from).h))];
	};
	const stores = [];
	const incStores = [];
	const syncStores = [];
	const probeChannel = channels.find((c) => c.visibility === 'open' && !c.deleted);
	report.syncs = opts.syncs === 'auto' ?
		await syncAvailable(urls[0], readers[0].sk, probeChannel.h) : opts.syncs ?? true;
	for (const r of readers) {
		const node = r.i % urls.length;
		const broad = new IncrementalStore(urls, r.sk, {}, { node, name: `reader ${r.i} broad`, trail: true });
		const pair = [pick(setup, channels).h, pick(setup, channels).h];
		const scope = { '#h': [...new Set(pair)] };
		if (r.i === 0)
			scope['#type'] = ['demo.task'];
		const scoped = new IncrementalStore(urls, r.sk, scope, { node: node + 1, name: `reader ${r.i} scoped`, trail: true });
		for (const s of [broad, scoped]) {
			s.reader = r;
			incStores.push(s);
		}
		if (report.syncs) {
			const one = new SyncStore(urls, r.sk, syncTargets(setup, r, 1),
				{ node: node + 1, name: `reader ${r.i} sync one` });
			const two = new SyncStore(urls, r.sk, syncTargets(setup, r, 2),
				{ node, name: `reader ${r.i} sync two` });
			for (const s of [one, two]) {
				s.reader = r;
				syncStores.push(s);
			}
		}
	}
	const resumeStores = [];
	if (opts.resumes) {
		for (const s of incStores) {
			const r = new ResumeStore(urls, s.reader.sk, s.scope,
				{ node: s.node + 1, name: s.name.replace('reader', 'resumable') });
			r.reader = s.reader;
			resumeStores.push(r);
		}
	}
	stores.push(...incStores, ...syncStores, ...resumeStores);
	await settle(stack);
	for (const s of incStores)
		await s.pullRetry(1 + Math.floor(setup() * 40));
	await Promise.all([...syncStores, ...resumeStores].map((s) => s.open(30000)));
	log(`checker seed ${seed}: ${channels.length} channels, ${artifacts.size} artifacts, ` +
		`${incStores.length} incremental stores, ${syncStores.length} syncs`);

	// --- the run --------------------------------------------------------
	let running = true;
	let opsDone = 0;
	const writerLoop = async (w, i) => {
		const random = rng((seed ^ Math.imul(i + 1, 0x9e3779b9)) >>> 0);
		while (running && opsDone < totalOps && Date.now() < deadline) {
			opsDone++;
			await doOp(w, random);
			if (opts.writeGapMs)
				await sleep(Math.floor(random() * opts.writeGapMs));
		}
	};
	const readerLoop = async (i) => {
		const random = rng((seed ^ Math.imul(i + 1, 0x5bd1e995)) >>> 0);
		while (running) {
			const s = pick(random, incStores);
			// a view whose channels were all deleted is replaced by another
			if (s.pulling === 0 && s.scope['#h']?.every((h) => byId.get(h)?.deleted))
				s.rescope({ ...s.scope, '#h': [...new Set([pick(random, liveChannels()).h, pick(random, liveChannels()).h])] });
			try {
				await s.pull(1 + Math.floor(random() * 60));
			} catch (err) {
				if (!(err instanceof ReadError))
					throw err;
			}
			if (random() < 0.1) {
				for (const y of syncStores) {
					if (y.state === 'refused' &&
					    y.channels.some((h) => byId.get(h)?.deleted))
						y.channels = syncTargets(random, y.reader, y.channels.length);
					y.refresh();
				}
			}
			await sleep(10 + Math.floor(random() * 100));
		}
	};
	const faultNames = opts.faults ?? [];
	const faults = standardFaults(stack, opts.faultHooks);
	const inject = async (name, random, extra = {}) => {
		report.faults[name] = (report.faults[name] ?? 0) + 1;
		log(`fault ${name} after ${opsDone} operations`);
		try {
			await faults[name](random, { ...opts, ...extra });
		} catch (err) {
			report.faultErrors.push(`${name}: ${err.stack ?? err.message}`);
		}
	};
	const faultLoop = async () => {
		const random = rng((seed ^ 0x27d4eb2f) >>> 0);
		// faults at fixed points of the history: [{afterOps, fault, ...}]
		for (const { afterOps, fault, ...extra } of opts.schedule ?? []) {
			while (running && opsDone < afterOps)
				await sleep(10);
			if (!running) {
				report.faultErrors.push(`${fault}: the history ended before operation ${afterOps}`);
				return;
			}
			await inject(fault, random, extra);
		}
		const [lo, hi] = opts.faultGapMs ?? [1500, 4000];
		while (running && faultNames.length) {
			const until = Date.now() + lo + Math.floor(random() * (hi - lo));
			while (running && Date.now() < until)
				await sleep(50);
			if (!running)
				break;
			await inject(pick(random, faultNames), random);
		}
	};
	const writersDone = Promise.all(writers.map((w, i) => writerLoop(w, i)));
	const readersDone = Promise.all(Array.from({ length: opts.readerLoops ?? 2 }, (_, i) => readerLoop(i)));
	const faultsDone = faultLoop();
	try {
		await writersDone;
	} finally {
		running = false;
		await faultsDone;
		await readersDone;
	}
	report.opsDone = opsDone;
	log(`checker seed ${seed}: ${opsDone} operations done, reconciling`);

	// --- convergence ----------------------------------------------------
	// A write answered 503 is over (the relay rolled it back or lost its
	// session, whose transaction holds an xid settle() waits for); one
	// that got no answer may still be running.
	if (report.unanswered > 0)
		await quiesce(stack);
	await readyAll(stack);
	await settle(stack);
	for (const s of incStores) {
		try {
			await s.pullRetry(1 + Math.floor(setup() * 100));
		} catch (err) {
			fail(`${s.name}: final read failed: ${err.message}`);
		}
	}
	const ttl = await ttlChannels(stack);
	for (const s of incStores) {
		const truth = await truthFor(urls[0], s.reader.sk, s.scope, ttl);
		const diff = diffStores(s.revisions(), truth);
		if (diff) {
			fail(`${s.name} ${JSON.stringify(s.scope)} differs from the truth: ${JSON.stringify(diff)}`);
			const first = [...diff.extra, ...diff.missing, ...diff.stale.map((x) => x.split(' ')[0])][0];
			report.evidence.push(await artifactHistory(stack, s, first));
		}
	}

	const readable = async (pk, h) => {
		const found = await stack.query(`SELECT visibility, deleted FROM channels WHERE id = '${h}'`);
		if (found.length === 0)
			return false;  // an unknown channel is read by nobody
		const [[vis, deleted]] = found;
		if (deleted === 't')
			return false;
		if (vis !== '2')
			return true;
		const rows = await stack.query(`SELECT 1 FROM members WHERE channel_id = '${h}' AND pubkey = '${pk}' AND active`);
		return rows.length > 0;
	};
	for (const s of resumeStores) {
		let state;
		for (let i = 0; i < 20; i++) {
			s.refresh();
			state = await s.whenSettled(30000).catch((err) => err.message);
			if (state !== 'failed')
				break;
			await sleep(500);
		}
		if (state !== 'live') {
			fail(`${s.name}: ended ${state} (${s.closedReason})`);
			continue;
		}
		const truth = await truthFor(urls[0], s.reader.sk, s.scope, ttl);
		let diff = diffStores(s.revisions(), truth);
		for (const until = Date.now() + 20000; diff && Date.now() < until;) {
			await sleep(200);
			diff = diffStores(s.revisions(), truth);
		}
		if (diff)
			fail(`${s.name} ${JSON.stringify(s.scope)} differs from the truth: ${JSON.stringify(diff)}`);
	}
	for (const s of syncStores) {
		let state;
		try {
			// a dependency may still be coming back (`error:` closes)
			for (let i = 0; i < 20; i++) {
				s.refresh();
				state = await s.whenSettled(30000);
				if (state !== 'failed' || !s.closedReason?.startsWith('error:'))
					break;
				await sleep(500);
			}
		} catch (err) {
			fail(err.message);
			continue;
		}
		const all = (await Promise.all(s.channels.map((h) => readable(s.reader.pk, h)))).every(Boolean);
		if (state === 'refused') {
			if (all)
				fail(`${s.name}: refused although every channel is readable`);
			continue;
		}
		if (state !== 'live') {
			fail(`${s.name}: ended ${state} (${s.closedReason})`);
			continue;
		}
		if (!all)
			fail(`${s.name}: live although a channel is unreadable`);
		const truth = await truthFor(urls[0], s.reader.sk, { '#h': s.channels });
		let diff = diffStores(s.revisions(), truth);
		const until = Date.now() + 20000;
		while (diff && Date.now() < until) {
			await sleep(200);
			if (s.state !== 'live') {
				await s.whenSettled(30000).catch(() => {});
				if (s.state !== 'live')
					break;
			}
			diff = diffStores(s.revisions(), truth);
		}
		if (diff)
			fail(`${s.name} ${JSON.stringify(s.channels)} differs from the truth: ${JSON.stringify(diff)}`);
	}
	for (const s of stores)
		for (const v of s.violations)
			fail(v);

	// nothing the relay accepted may be lost
	for (let i = 0; i < accepted.length; i += 1000) {
		const chunk = accepted.slice(i, i + 1000);   // one psql argument
		const rows = await stack.query(
			`SELECT a.id FROM unnest(ARRAY['${chunk.join("','")}']) a(id)` +
			' WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.id)');
		for (const [id] of rows)
			fail(`accepted event ${id} is not stored`);
	}
	report.accepted = accepted.length;
	report.stores = stores.map((s) => ({ name: s.name, size: s.items.size, stats: s.stats,
		...(s.state ? { state: s.state } : {}) }));
	for (const s of [...syncStores, ...resumeStores])
		s.close();
	report.elapsedMs = Date.now() - started;
	report.ok = report.failures.length === 0;
	if (!report.ok)
		report.failures.unshift(`convergence failed with seed ${seed} ` +
			`(run again: COMB_SEED=${seed} node --test tests/e2e/convergence.test.mjs, ` +
			`or make soak SEED=${seed})`);
	return report;
}

/** A few lines summing a report up for a test log. */
export function summarize(report) {
	const ops = Object.entries(report.ops).map(([k, v]) => `${k} ${v.accepted}/${v.tried}`).join(', ');
	const lines = [
		`seed ${report.seed}: ${report.ok ? 'converged' : 'FAILED'} in ${(report.elapsedMs / 1000).toFixed(1)} s, ` +
		`${report.opsDone} operations, ${report.accepted} accepted events, ${report.uncertain} uncertain outcomes, syncs ${report.syncs ? 'on' : 'off'}`,
		`operations (accepted/tried): ${ops}`,
	];
	if (Object.keys(report.faults).length)
		lines.push(`faults: ${JSON.stringify(report.faults)}${report.faultErrors.length ? ` errors ${JSON.stringify(report.faultErrors)}` : ''}`);
	for (const s of report.stores)
		lines.push(`  ${s.name}: ${s.size} items${s.state ? ` (${s.state})` : ''} ${JSON.stringify(s.stats)}`);
	const refusals = Object.entries(report.refusals).sort((a, b) => b[1] - a[1]);
	if (refusals.length)
		lines.push(`refusals: ${refusals.map(([k, v]) => `${k} (${v})`).join('; ')}`);
	for (const f of report.failures)
		lines.push(`FAIL ${f}`);
	for (const e of report.evidence ?? [])
		lines.push(`evidence ${JSON.stringify(e)}`);
	return lines.join('\n');
}
