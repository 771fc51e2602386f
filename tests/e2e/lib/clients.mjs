// Client-side stores shared by the incremental, fault and convergence
// tests: what a real comb client keeps locally, built only from what the
// relay sends. They run on comb-client (clients/js), so that the library
// is what the tests trust: its CombClient signs every request and socket
// and fails over between relay nodes, its IncrementalReader reads, checks
// and applies incremental answers and CHANGES frames. What stays here is
// what a test needs and an application must not do (see each class).
//
//   IncrementalStore  d -> current revision, kept by incremental reads
//                     (PROTOCOL.md section 8): cursor, paging with `more`,
//                     a restart from scratch on `incremental_reset`, and a
//                     move to another relay node when one stops answering
//   SyncStore         d -> current revision, kept by one WebSocket sync
//                     (section 7): snapshot, EOSE, live revisions and
//                     markers, reopened on every `resync:` close and after
//                     a dropped connection
//   ResumeStore       d -> current revision, kept by one resumable sync
//                     (section 7.1): CHANGES frames and their cursor,
//                     reopened from the cursor after every close or drop
//   settle()          waits until the incremental horizon has passed every
//                     transaction begun so far (no sleeps, no clock bound)
//   truthFor()        the server's truth for a reader: a fresh, paged
//                     `current` read as that reader, made without
//                     comb-client so that a fault of the library cannot
//                     make a store and its truth agree
//   diffStores()      a readable difference between two d -> id maps
//   pidListeningOn(), rssKb()  which process serves a port, and its RSS
//
// Every store reports what it went through in `stats`, and anything that
// breaks the protocol's promises (an older revision after a newer one, an
// unexpected kind on a sync, a bad cursor, a change or frame the library
// finds malformed) in `violations`.

import crypto from 'node:crypto';
import fs from 'node:fs';

import WebSocket from 'ws';

import { CombClient, CombError, MemoryStore } from '../../../clients/js/index.js';
import { post } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** NIP-98 options with a random nonce: tokens are single use. */
export function nonceOpts() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

/** The first value of the first tag called name, or undefined. */
export function tagOf(event, name) {
	return event.tags.find((t) => t[0] === name)?.[1];
}

/** An HTTP answer that was not the expected one (status 0: no answer). */
export class ReadError extends Error {
	constructor(status, body, what) {
		super(`${what}: ${status === 0 ? body : `${status} ${body}`}`);
		this.status = status;
		this.body = body;
	}
}

/**
 * POSTs [filter] to url's /query as sk; resolves to {status, body (parsed
 * or null), raw, headers}. A network failure resolves with status 0.
 */
export async function queryAt(url, sk, filter) {
	let r;
	try {
		r = await post(url, '/query', [filter], sk, { ...nonceOpts(), timeoutMs: 15000 });
	} catch (err) {
		return { status: 0, body: null, raw: err.message, headers: {} };
	}
	let body = null;
	try {
		body = JSON.parse(r.body);
	} catch {
		// left null
	}
	return { status: r.status, body, raw: r.body, headers: r.headers };
}

/**
 * Waits until the incremental horizon (pg_snapshot_xmin) has passed a
 * transaction id taken now, so that a read sees everything committed
 * before this call. stack.query runs SQL on the stack's database.
 */
export async function settle(stack, timeoutMs = 60000) {
	const [[x]] = await stack.query('SELECT pg_current_xact_id()::text');
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const [[ok]] = await stack.query(
			`SELECT pg_snapshot_xmin(pg_current_snapshot()) > '${x}'::xid8`);
		if (ok === 't')
			return;
		if (Date.now() > deadline)
			throw new Error(`the horizon did not pass ${x} within ${timeoutMs} ms`);
		await sleep(5);
	}
}

/**
 * Every event a `current` read as sk returns, paged by 1000 (extra adds
 * predicates such as #h). Rejects with ReadError on any other answer.
 */
export async function currentEvents(url, sk, extra = {}) {
	const out = [];
	for (let offset = 0; ; offset += 1000) {
		const r = await queryAt(url, sk, { artifact: 'current', limit: 1000, offset, ...extra });
		if (r.status !== 200 || !Array.isArray(r.body))
			throw new ReadError(r.status, r.raw, 'current read');
		out.push(...r.body);
		if (r.body.length < 1000)
			return out;
	}
}

/**
 * The truth for one store: d -> current revision id from a fresh `current`
 * read as sk over scope (#h, #type). ttlChannels (a Set of channel ids),
 * when given, drops artifacts living there: incremental reads never serve
 * them.
 */
export async function truthFor(url, sk, scope = {}, ttlChannels = null) {
	const m = new Map();
	for (const ev of await currentEvents(url, sk, scope)) {
		if (ttlChannels && ttlChannels.has(tagOf(ev, 'h')))
			continue;
		m.set(tagOf(ev, 'd'), ev.id);
	}
	return m;
}

/** Channel ids with a TTL, read from the database. */
export async function ttlChannels(stack) {
	const rows = await stack.query('SELECT id::text FROM channels WHERE ttl IS NOT NULL');
	return new Set(rows.map((r) => r[0]));
}

/**
 * The difference between a store (d -> id) and the truth: null when they
 * are equal, else {missing, extra, stale} with up to `max` entries each.
 */
export function diffStores(store, truth, max = 10) {
	const missing = [], extra = [], stale = [];
	for (const [d, id] of truth) {
		if (!store.has(d))
			missing.push(d);
		else if (store.get(d) !== id)
			stale.push(`${d} has ${store.get(d).slice(0, 12)}, current ${id.slice(0, 12)}`);
	}
	for (const d of store.keys())
		if (!truth.has(d))
			extra.push(d);
	if (!missing.length && !extra.length && !stale.length)
		return null;
	return {
		counts: { missing: missing.length, extra: extra.length, stale: stale.length,
			store: store.size, truth: truth.size },
		missing: missing.slice(0, max), extra: extra.slice(0, max), stale: stale.slice(0, max),
	};
}

// ---------------------------------------------------------------------------
// incremental reads

// The reader options of a test scope ({'#h': [...], '#type': [...]});
// throws for any other key, which the library's reads would not carry.
function readerScope(scope) {
	const { '#h': channels, '#type': types, ...rest } = scope;
	if (Object.keys(rest).length)
		throw new TypeError(`a store scope takes #h and #type only, not ${Object.keys(rest)}`);
	return { channels, types };
}

/**
 * A local store kept by incremental reads: comb-client's IncrementalReader
 * over a MemoryStore, on a CombClient that fails over between urls (it
 * starts on urls[opts.node] and moves on after an unanswered or 5xx read).
 * scope: {'#h': [...], '#type': [...]} or {} for a broad read. What the
 * library reports as a protocol violation lands in `violations`, with a
 * 400 answer; opts.keepLog keeps every change read in `log`, opts.trail
 * every good read in `trail`.
 */
export class IncrementalStore {
	constructor(urls, sk, scope = {}, opts = {}) {
		this.client = new CombClient({
			urls: Array.isArray(urls) ? urls : [urls], node: opts.node ?? 0, secretKey: sk,
			timeout: 15000,
		});
		this.sk = sk;
		this.name = opts.name ?? 'incremental';
		this.log = opts.keepLog ? [] : null;
		// opts.trail: every good read, {node, cursor, next, changes: [[op,
		// d, id or reason]]}, to tell what the store read with when it differs
		this.trail = opts.trail ? [] : null;
		this.stats = { reads: 0, changes: 0, upserts: 0, removals: {}, errors: {}, resets: 0, moves: 0 };
		this.violations = [];
		this.lock = Promise.resolve();
		this.pulling = 0;
		this.memory = new MemoryStore();
		this.useScope(scope);
	}

	// A new reader of scope over the same memory, from no cursor.
	useScope(scope) {
		this.scope = scope;
		this.incremental = this.client.incremental({
			...readerScope(scope),
			store: this.memory,
			onViolation: (message) => this.violations.push(`${this.name}: ${message}`),
			onPage: ({ url, cursor, answer }) => this.noteRead(url, cursor, answer),
		});
	}

	// Counts and keeps (log, trail) a good read, before it is applied.
	noteRead(url, cursor, answer) {
		this.stats.reads++;
		this.account(answer.changes);
		this.trail?.push({
			node: this.client.urls.indexOf(url), cursor, next: answer.cursor,
			changes: answer.changes.map((c) => (c.op === 'upsert' ?
				['upsert', tagOf(c.event, 'd'), c.event.id] : [c.op, c.d, c.reason])),
		});
	}

	account(changes) {
		for (const c of changes) {
			this.log?.push(c);
			this.stats.changes++;
			if (c.op === 'upsert')
				this.stats.upserts++;
			else if (c.op === 'remove')
				this.stats.removals[c.reason] = (this.stats.removals[c.reason] ?? 0) + 1;
		}
	}

	/** The node the next read goes to (an index in urls). */
	get node() {
		return this.client.node;
	}

	get url() {
		return this.client.url;
	}

	/** d -> event held. */
	get items() {
		return this.memory.items;
	}

	/** Where the next read starts (undefined: the whole set); settable. */
	get cursor() {
		return this.incremental.cursor;
	}

	set cursor(cursor) {
		this.incremental.cursor = cursor;
	}

	/** Applies changes read elsewhere (the cursor stays); resolves to those applied. */
	apply(changes) {
		this.account(changes);
		return this.incremental.apply(changes);
	}

	/**
	 * Reads until `more` is false (pages of `limit`); resolves to every
	 * change applied. Rejects with ReadError on the first failed read,
	 * counted in stats.errors: after `incremental_reset` the store starts
	 * over (no cursor, emptied), after a 400 answer a violation is noted,
	 * after no answer or a 5xx one the client has moved to the next node.
	 * The cursor stays where the last good page left it, so calling again
	 * continues. Calls are serialized, as a client's reads of one store
	 * would be.
	 */
	async pull(limit) {
		const prev = this.lock;
		let release;
		this.lock = new Promise((r) => { release = r; });
		this.pulling++;
		try {
			await prev;
			return await this.incremental.catchUp(limit);
		} catch (err) {
			throw this.readFailed(err);
		} finally {
			this.pulling--;
			release();
		}
	}

	// Counts a failed read and reacts to it; returns the ReadError to throw.
	readFailed(err) {
		if (!(err instanceof CombError))
			return err;
		this.stats.reads++;
		const code = err.status === 0 ? 'network' : `${err.status} ${err.message.slice(0, 60)}`;
		this.stats.errors[code] = (this.stats.errors[code] ?? 0) + 1;
		if (err.code === 'incremental_reset') {
			// Start again without a cursor; the first read replaces everything.
			this.incremental.startOver();
			this.memory.items.clear();
			this.stats.resets++;
		} else if (err.status === 400) {
			this.violations.push(`${this.name}: 400 ${err.message}`);
		} else if (err.status === 0 || err.status >= 500) {
			this.stats.moves++;
		}
		return new ReadError(err.status, err.message, `${this.name} read`);
	}

	/** Like pull, retrying failed reads until timeoutMs has passed. */
	async pullRetry(limit, timeoutMs = 60000) {
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			try {
				return await this.pull(limit);
			} catch (err) {
				if (!(err instanceof ReadError) || err.status === 400 || Date.now() > deadline)
					throw err;
				await sleep(100 + Math.floor(Math.random() * 200));
			}
		}
	}

	/** Waits for the horizon (settle) and then pulls everything. */
	async sync(stack, limit) {
		await settle(stack);
		return this.pull(limit);
	}

	/** Starts over with another scope: no cursor, an empty store (call
	 * it between pulls). */
	rescope(scope) {
		this.useScope(scope);
		this.memory.items.clear();
		this.stats.rescopes = (this.stats.rescopes ?? 0) + 1;
	}

	/** d -> revision id. */
	revisions() {
		const m = new Map();
		for (const [d, ev] of this.items)
			m.set(d, ev.id);
		return m;
	}

	ids() {
		return [...this.items.keys()].sort();
	}
}

// ---------------------------------------------------------------------------
// WebSocket syncs

let subCounter = 0;

/**
 * One sync subscription on its own connection, opened and authenticated
 * (NIP-42) by a comb-client CombClient that fails over between urls.
 * channels: the #h set; extra: more filter keys (#type, #d).
 * opts.onEvent(ev, store) is called for every live frame after EOSE (for
 * latency measurements). The store reconnects by itself after a dropped
 * connection (to the next node) and reopens after every `resync:` close;
 * a `restricted:` close leaves it empty in state `refused`, and an
 * `error:` close (a dependency down) in state `failed`, until refresh()
 * tries again.
 *
 * What it does with the frames stays here, not in comb-client: it checks
 * what the sync alone delivers (the snapshot replaces the copy, live
 * frames are applied as they come), while the library's ArtifactView
 * completes a sync with incremental reads, looks up by id what a snapshot
 * lacks and drops a revision it has seen replaced, which would hide the
 * very faults this store must record.
 */
export class SyncStore {
	constructor(urls, sk, channels, opts = {}) {
		this.client = new CombClient({
			urls: Array.isArray(urls) ? urls : [urls], node: opts.node ?? 0, secretKey: sk, WebSocket,
		});
		this.channels = channels;
		this.extra = opts.extra ?? {};
		this.name = opts.name ?? `sync ${channels.map((h) => h.slice(0, 8)).join(',')}`;
		this.onEvent = opts.onEvent ?? null;
		this.subId = `s${++subCounter}`;
		this.items = new Map();      // d -> event (live view)
		this.snapshot = null;        // d -> event while the snapshot arrives
		this.seen = new Map();       // d -> Set of revision ids received live
		this.state = 'idle';         // connecting, opening, live, refused, unavailable, failed, closed
		this.closedReason = null;
		this.ws = null;
		this.closing = false;
		this.reconnectTimer = null;
		this.waiters = [];
		this.stats = { connects: 0, opens: 0, eoses: 0, resyncs: {}, refused: 0, drops: 0,
			errors: {}, frames: 0, liveRevisions: 0, markers: {} };
		this.violations = [];
	}

	/** The node the next connection goes to (an index in urls). */
	get node() {
		return this.client.node;
	}

	get url() {
		return this.client.url;
	}

	filter() {
		return { artifact: 'current', '#h': this.channels, ...this.extra };
	}

	/** Connects (when needed) and opens the sync; resolves once it is
	 * live, refused or unavailable, or rejects after timeoutMs. */
	async open(timeoutMs = 20000) {
		this.closing = false;
		if (!this.ws || this.ws.readyState > 1)
			this.connect();
		else
			this.sendReq();
		return this.whenSettled(timeoutMs);
	}

	/** Resolves when the state is one of live/refused/unavailable/failed. */
	whenSettled(timeoutMs = 20000) {
		if (['live', 'refused', 'unavailable', 'failed'].includes(this.state))
			return Promise.resolve(this.state);
		return new Promise((resolve, reject) => {
			const w = { resolve };
			w.timer = setTimeout(() => {
				this.waiters = this.waiters.filter((x) => x !== w);
				reject(new Error(`${this.name}: still ${this.state} after ${timeoutMs} ms`));
			}, timeoutMs);
			this.waiters.push(w);
		});
	}

	setState(state) {
		this.state = state;
		if (['live', 'refused', 'unavailable', 'failed'].includes(state)) {
			const ws = this.waiters;
			this.waiters = [];
			for (const w of ws) {
				clearTimeout(w.timer);
				w.resolve(state);
			}
		}
	}

	connect() {
		if (this.closing)
			return;
		this.setState('connecting');
		this.stats.connects++;
		this.socketUrl = this.client.wsUrl;
		const ws = this.client.openSocket();
		this.ws = ws;
		ws.on('message', (data) => this.onMessage(ws, data));
		ws.on('close', () => {
			if (this.ws !== ws)
				return;
			this.ws = null;
			if (this.closing)
				return;
			this.stats.drops++;
			this.client.failOver();
			this.setState('connecting');
			clearTimeout(this.reconnectTimer);
			this.reconnectTimer = setTimeout(() => this.connect(), 100 + Math.floor(Math.random() * 400));
		});
		ws.on('error', () => {});
	}

	sendReq() {
		this.snapshot = new Map();
		this.stats.opens++;
		this.setState('opening');
		this.send(['REQ', this.subId, this.filter()]);
	}

	send(msg) {
		if (this.ws && this.ws.readyState === 1)
			this.ws.send(JSON.stringify(msg));
	}

	onMessage(ws, data) {
		if (ws !== this.ws)
			return;
		let msg;
		try {
			msg = JSON.parse(data.toString('utf8'));
		} catch {
			this.violations.push(`${this.name}: frame is not JSON`);
			return;
		}
		if (!Array.isArray(msg))
			return;
		switch (msg[0]) {
		case 'AUTH':
			Promise.resolve(this.client.authEvent(msg[1], this.socketUrl)).then((ev) => {
				if (ws !== this.ws)
					return;
				this.authId = ev.id;
				this.send(['AUTH', ev]);
			});
			return;
		case 'OK':
			if (msg[1] === this.authId) {
				if (msg[2] !== true) {
					this.violations.push(`${this.name}: AUTH refused: ${msg[3]}`);
					this.setState('failed');
					return;
				}
				this.sendReq();
			}
			return;
		case 'EVENT':
			if (msg[1] === this.subId)
				this.onEvent_(msg[2]);
			return;
		case 'EOSE':
			if (msg[1] !== this.subId)
				return;
			if (this.state !== 'opening') {
				this.violations.push(`${this.name}: EOSE in state ${this.state}`);
				return;
			}
			this.items = this.snapshot;
			this.snapshot = null;
			this.stats.eoses++;
			this.setState('live');
			return;
		case 'CLOSED':
			if (msg[1] === this.subId)
				this.onClosed(String(msg[2] ?? ''));
			return;
		default:
			return;
		}
	}

	onEvent_(ev) {
		this.stats.frames++;
		const d = tagOf(ev, 'd');
		if (!d) {
			this.violations.push(`${this.name}: event without d (kind ${ev.kind})`);
			return;
		}
		if (this.state === 'opening') {
			if (ev.kind !== 45010)
				this.violations.push(`${this.name}: kind ${ev.kind} in a snapshot`);
			else
				this.snapshot.set(d, ev);
			return;
		}
		if (this.state !== 'live') {
			this.violations.push(`${this.name}: EVENT in state ${this.state}`);
			return;
		}
		if (ev.kind === 45010) {
			this.stats.liveRevisions++;
			let seen = this.seen.get(d);
			if (!seen) {
				seen = new Set();
				this.seen.set(d, seen);
			}
			if (seen.has(ev.id) && this.items.get(d)?.id !== ev.id)
				this.violations.push(`${this.name}: ${d} received ${ev.id.slice(0, 12)} again after a newer revision`);
			seen.add(ev.id);
			if (tagOf(ev, 'op') === 'delete')
				this.items.delete(d);
			else
				this.items.set(d, ev);
		} else if (ev.kind === 45011) {
			const reason = tagOf(ev, 'reason');
			this.stats.markers[reason] = (this.stats.markers[reason] ?? 0) + 1;
			this.items.delete(d);
		} else {
			this.violations.push(`${this.name}: kind ${ev.kind} on a sync`);
			return;
		}
		this.onEvent?.(ev, this);
	}

	onClosed(reason) {
		this.closedReason = reason;
		this.snapshot = null;
		if (reason.startsWith('resync:')) {
			this.stats.resyncs[reason] = (this.stats.resyncs[reason] ?? 0) + 1;
			if (!this.closing)
				this.sendReq();
			return;
		}
		this.items = new Map();
		if (reason.startsWith('restricted:')) {
			this.stats.refused++;
			this.setState('refused');
		} else if (reason.startsWith('invalid: sync not available')) {
			this.setState('unavailable');
		} else if (reason.startsWith('error:')) {
			// a dependency is down: try again later (refresh)
			this.stats.errors[reason] = (this.stats.errors[reason] ?? 0) + 1;
			this.setState('failed');
		} else {
			this.violations.push(`${this.name}: CLOSED ${reason}`);
			this.setState('failed');
		}
	}

	/** Reopens a refused or failed sync (access may have come back). */
	refresh() {
		if (this.state === 'refused' || this.state === 'failed') {
			if (this.ws && this.ws.readyState === 1)
				this.sendReq();
			else if (!this.ws)
				this.connect();
		}
	}

	/** d -> revision id (empty unless live). */
	revisions() {
		const m = new Map();
		if (this.state !== 'live')
			return m;
		for (const [d, ev] of this.items)
			m.set(d, ev.id);
		return m;
	}

	close() {
		this.closing = true;
		clearTimeout(this.reconnectTimer);
		this.setState('closed');
		if (this.ws) {
			this.ws.removeAllListeners('close');
			this.ws.terminate();
			this.ws = null;
		}
	}
}

/**
 * A local store kept by one resumable sync (PROTOCOL.md section 7.1):
 * every CHANGES frame checked and applied with its cursor by comb-client's
 * IncrementalReader over a MemoryStore, in the order received, reopened
 * from the last cursor after a `resync:` or `error:` close and a dropped
 * connection, started again without a cursor on `incremental_reset`.
 * scope: {'#h': [...], '#type': [...]} or {} for every readable channel.
 *
 * When to reopen stays here: the checker needs a sync that reports its
 * state (live, failed) and reopens at once on the next node, where the
 * library's ArtifactView backs off and falls back to polling over HTTP,
 * which would hide whether the resumable sync itself converged.
 */
export class ResumeStore extends SyncStore {
	constructor(urls, sk, scope = {}, opts = {}) {
		super(urls, sk, scope['#h'] ?? [], { ...opts, name: opts.name ?? 'resume' });
		this.scope = scope;
		const memory = new MemoryStore();
		memory.items = this.items;
		this.incremental = this.client.incremental({
			...readerScope(scope),
			store: memory,
			onViolation: (message) => this.violations.push(`${this.name}: ${message}`),
		});
		// frames, EOSE, CLOSED and REQs one after another, as received
		this.turns = Promise.resolve();
		Object.assign(this.stats, { changes: 0, removals: {}, resets: 0 });
	}

	/** Where the next REQ starts (undefined: the whole set). */
	get cursor() {
		return this.incremental.cursor;
	}

	filter() {
		return { artifact: 'changes', ...this.incremental.scope, ...(this.cursor ? { cursor: this.cursor } : {}) };
	}

	// Runs fn after everything received before it has been handled.
	inTurn(fn) {
		this.turns = this.turns.then(fn).catch((err) => {
			this.violations.push(`${this.name}: ${err.stack ?? err.message}`);
		});
	}

	sendReq() {
		this.inTurn(() => super.sendReq());
	}

	onMessage(ws, data) {
		let msg = null;
		try {
			msg = JSON.parse(data.toString('utf8'));
		} catch {
			// SyncStore reports it
		}
		if (ws === this.ws && Array.isArray(msg) && msg[1] === this.subId) {
			if (msg[0] === 'CHANGES') {
				this.onChanges(msg[2]);
				return;
			}
			if (msg[0] === 'EOSE') {
				if (this.state !== 'opening')
					this.violations.push(`${this.name}: EOSE in state ${this.state}`);
				this.stats.eoses++;
				this.inTurn(() => this.setState('live'));
				return;
			}
			if (msg[0] === 'CLOSED') {
				const reason = String(msg[2] ?? '');
				this.inTurn(() => this.onClosed(reason));
				return;
			}
			if (msg[0] === 'EVENT') {
				this.violations.push(`${this.name}: EVENT on a resumable sync`);
				return;
			}
		}
		super.onMessage(ws, data);
	}

	onChanges(body) {
		if (this.state !== 'opening' && this.state !== 'live') {
			this.violations.push(`${this.name}: CHANGES in state ${this.state}`);
			return;
		}
		this.stats.frames++;
		if (!this.incremental.wellFormed(body, { frame: true }))
			return;
		for (const c of body.changes) {
			this.stats.changes++;
			if (c.op === 'remove')
				this.stats.removals[c.reason] = (this.stats.removals[c.reason] ?? 0) + 1;
		}
		this.inTurn(() => this.incremental.apply(body.changes, body.cursor));
	}

	onClosed(reason) {
		this.closedReason = reason;
		if (reason.startsWith('resync:')) {
			this.stats.resyncs[reason] = (this.stats.resyncs[reason] ?? 0) + 1;
			if (!this.closing)
				this.sendReq();
		} else if (reason.startsWith('incremental_reset:')) {
			this.stats.resets++;
			this.incremental.startOver();
			this.items.clear();
			if (!this.closing)
				this.sendReq();
		} else if (reason.startsWith('error:') || reason.startsWith('incremental_busy:')) {
			// a dependency is down: reopen later from the cursor (refresh)
			this.stats.errors[reason] = (this.stats.errors[reason] ?? 0) + 1;
			this.setState('failed');
		} else {
			this.violations.push(`${this.name}: CLOSED ${reason}`);
			this.setState('failed');
		}
	}
}

/**
 * Resolves to true when the relay at url serves syncs (a sync REQ on an
 * open channel is not refused with `invalid: sync not available`).
 */
export async function syncAvailable(url, sk, channel) {
	const s = new SyncStore([url], sk, [channel], { name: 'probe' });
	try {
		const state = await s.open(10000);
		return state !== 'unavailable';
	} finally {
		s.close();
	}
}

// ---------------------------------------------------------------------------
// processes

/**
 * The pid of the process listening on 127.0.0.1:port (TCP), found through
 * /proc/net/tcp and the processes' descriptors; null when none.
 */
export function pidListeningOn(port) {
	const hex = port.toString(16).toUpperCase().padStart(4, '0');
	let inode = null;
	for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
		const f = line.trim().split(/\s+/);
		if (f.length > 9 && f[1].endsWith(`:${hex}`) && f[3] === '0A') {
			inode = f[9];
			break;
		}
	}
	if (!inode)
		return null;
	const target = `socket:[${inode}]`;
	for (const pid of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
		let fds;
		try {
			fds = fs.readdirSync(`/proc/${pid}/fd`);
		} catch {
			continue;
		}
		for (const fd of fds) {
			try {
				if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === target)
					return Number(pid);
			} catch {
				// closed meanwhile
			}
		}
	}
	return null;
}

/** Resident set size of pid in KiB (VmRSS), or null when it is gone. */
export function rssKb(pid) {
	try {
		const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
		return m ? Number(m[1]) : null;
	} catch {
		return null;
	}
}
