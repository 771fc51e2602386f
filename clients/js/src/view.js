// ArtifactView: an exact local copy of the current artifacts of some
// channels (PROTOCOL.md sections 7 and 8), kept in a store.
//
// How it stays current, when the relay offers a resumable sync (NIP-11
// `artifacts.sync.modes` lists "changes") and a WebSocket is at hand (the
// transport "changes", PROTOCOL.md section 7.1):
//   1. a REQ `"artifact":"changes"` from the stored cursor (none: the whole
//      set); its catch-up arrives as CHANGES frames, then EOSE, which
//      resolves `ready`, then every change as a CHANGES frame. Each frame's
//      items are stored with its cursor, so a reconnect, a reload or a
//      restart resumes from the last frame applied.
//   2. `resync:` and `error:` closes reopen from that cursor after a
//      jittered backoff, `incremental_busy` after a longer one;
//      `incremental_reset` and a foreign cursor start over without one;
//      `error: incremental_unavailable` switches to the transport below.
//   Frames, EOSE and CLOSED of one connection are handled one after
//   another, so the view applies them in the relay's commit order.
//
// Otherwise (the transport "current"):
//   1. catch-up: incremental reads from the stored cursor until `more` is
//      false; they carry every change since the cursor, removals with
//      their reasons. The first complete catch-up resolves `ready`.
//   2. live: a sync (`"artifact":"current"`) on the channels: its snapshot
//      replaces the copy at EOSE (an artifact held but absent from the
//      snapshot is looked up by id for its removal reason), then every
//      frame is applied as it comes.
//   3. a `resync:` close or a dropped connection goes back to 1 and then
//      2, after a jittered backoff.
//   Without a WebSocket, without channels, with a set over the sync's
//   max_events, or while the relay refuses the sync, the view polls with
//   catch-ups instead (pollInterval).
// Reads never run while a sync is open, so the two never race: the view
// never shows an older revision of an artifact after a newer one.
//
// Both: a dropped connection reconnects after a jittered backoff, and
// after three failures in a row the view polls over HTTP and tries the
// WebSocket again later. In a browser, the window's `offline` event drops
// the socket at once (an open WebSocket may otherwise linger for minutes
// on a dead network) and `online` cuts every wait short, so the view
// catches up as soon as the network is back.
//   Starting over (no cursor: the first start, or after incremental_reset)
// reads the whole set; what the view holds and that set lacks left while
// the view was away, and a known-ID read names why. Until that is done the
// store keeps its old cursor, so a restart in between starts over again.

import { CombError } from './errors.js';
import { IncrementalReader, storeChange } from './reader.js';
import { Outbox, inScope, shownRevision, shownRevisions } from './outbox.js';
import { MemoryStore } from './stores.js';
import { tagValue } from './tags.js';

const REVISION_KIND = 45010;
const REMOVAL_KIND = 45011;
const MAX_BACKOFF_MS = 30000;

let subCounter = 0;

// A delay between half and all of base * 2^attempt, capped.
function backoffMs(attempt, base = 250) {
	const full = Math.min(MAX_BACKOFF_MS, base * 2 ** Math.min(attempt, 16));
	return full / 2 + Math.random() * (full / 2);
}

// Answers that mean: read again without a cursor.
function startsOver(err) {
	return err.code === 'incremental_reset' || err.code === 'incremental_bad_cursor';
}

// Errors a retry cannot fix: a malformed request or an unknown scope.
function fatal(err) {
	return err instanceof CombError &&
		(err.code === 'incremental_bad_request' || err.code === 'invalid' || err.status === 404);
}

class Closed extends Error {}

export class ArtifactView {
	/**
	 * options: channels (channel ids; without them the view reads every
	 * readable channel), types, store (default a MemoryStore),
	 * pollInterval (ms, default 5000), pageSize (the limit of each
	 * incremental read over HTTP; default the relay's), resumable (default true: use the
	 * relay's resumable sync when it offers one; false keeps to the sync
	 * and incremental reads), onViolation(message) (told of every answer,
	 * frame or change that breaks the protocol; the view skips them either
	 * way), merge(entry, head) (after a conflict: the changes to make on
	 * head in place of entry.changes, or null to give the write up;
	 * default the same changes; see src/outbox.js).
	 */
	constructor(client, options = {}) {
		this.client = client;
		this.channels = options.channels ? [...options.channels] : null;
		this.types = options.types ? [...options.types] : null;
		this.store = options.store ?? new MemoryStore();
		this.pollInterval = options.pollInterval ?? 5000;
		this.pageSize = options.pageSize;   // incremental reads' limit (default the relay's)
		this.resumable = options.resumable ?? true;
		this.mode = null;              // 'changes' or 'current', once known
		this.scope = {};
		if (this.channels)
			this.scope['#h'] = this.channels;
		if (this.types)
			this.scope['#type'] = this.types;
		// builds and checks the reads; the view applies them itself
		this.reader = new IncrementalReader(client, {
			channels: this.channels, types: this.types, onViolation: options.onViolation,
		});
		this.items = new Map();        // d -> current revision
		this.superseded = new Map();   // d -> ids of revisions known to be older
		this.cursor = undefined;
		this.fresh = null;             // while starting over: the ds the new read holds
		this.status = 'connecting';
		this.listeners = { change: new Set(), status: new Set(), error: new Set(), pending: new Set() };
		this.outbox = new Outbox(this, options.merge);
		this.stats = { reads: 0, fetched: 0, knownReads: 0, resets: 0, snapshots: 0,
			syncEvents: 0, resyncs: 0, connects: 0, resumes: 0, frames: 0 };
		this.closed = false;
		this.storeChain = Promise.resolve();   // the last store call queued
		this.sub = null;               // the socket: {ws, url, id, mode, state, snapshot, chain}
		this.syncAttempt = 0;
		this.timer = null;             // the one pending step (poll, reconnect)
		this.timerFn = null;
		this.naps = new Set();         // resolvers of retry waits
		this.retryWaits = new Set();   // resolvers of waits for retry()
		this.retrySyncAt = null;       // while polling: when to try the sync again
		this.listenNetwork();
		this.ready = new Promise((resolve, reject) => {
			this.resolveReady = resolve;
			this.rejectReady = reject;
		});
		this.ready.catch(() => {});
		this.run();
	}

	/**
	 * The current revision of artifact d as this view shows it, or
	 * undefined: the last write of d not yet accepted (marked `pending:
	 * true`; undefined for a delete or a move out of the view), else one
	 * accepted but not read back yet, else the one read.
	 */
	get(d) {
		return shownRevision(d, this.items, this.outbox.entries, this.outbox.acked, (ev) => this.inScope(ev));
	}

	/** Every current revision as shown (see get). */
	all() {
		return shownRevisions(this.items, this.outbox.entries, this.outbox.acked, (ev) => this.inScope(ev));
	}

	/** Whether d has a write not yet accepted. */
	isPending(d) {
		return this.outbox.last(d) !== undefined;
	}

	/** How many writes are not accepted yet. */
	get pending() {
		return this.outbox.size;
	}

	// Whether revision ev belongs in this view (its channels and types).
	inScope(ev) {
		return inScope(ev, this.channels, this.types);
	}

	// ------------------------------------------------------------------
	// writes, through the outbox: each resolves to the signed event once
	// it is stored (shown at once as pending), and is sent in order

	/** Creates an artifact: spec h, type, title, content, tags, d (generated when absent), root. */
	create(spec) {
		const d = spec.d ?? crypto.randomUUID();
		return this.outbox.add({ op: 'create', d, changes: { ...spec, d } }, null);
	}

	/** A new revision of d as shown now; changes as CombClient.updateArtifact's. */
	update(d, changes = {}) {
		return this.outbox.add({ op: 'update', d, changes }, this.get(d));
	}

	/** Moves d to channel toH (changes as update's). */
	move(d, toH, changes = {}) {
		return this.outbox.add({ op: 'move', d, toH, changes }, this.get(d));
	}

	/** Deletes d. */
	delete(d) {
		return this.outbox.add({ op: 'delete', d, changes: {} }, this.get(d));
	}

	// The outbox changed: listeners of 'pending' get the count.
	outboxChanged() {
		this.emit('pending', this.outbox.size);
	}

	// A retry delay for the outbox (ms).
	backoff(attempt) {
		return backoffMs(attempt, 500);
	}

	/**
	 * Adds a listener: 'change' ({changes, upserts, removals}: changes in
	 * the order read and applied), 'pending' (the count of writes not yet
	 * accepted, after every change of the outbox), 'status' (status),
	 * 'error' (CombError).
	 */
	on(event, fn) {
		this.listeners[event].add(fn);
		return this;
	}

	/** Removes a listener added with on(). */
	off(event, fn) {
		this.listeners[event].delete(fn);
		return this;
	}

	/** Stops every read and the sync, and closes the store. */
	async close() {
		if (this.closed)
			return;
		this.closed = true;
		this.cancelLater();
		this.unlistenNetwork();
		for (const wake of this.naps)
			wake();
		this.retry();
		this.outbox.stop();
		this.dropSocket();
		this.rejectReady(new CombError('closed', { code: 'closed' }));
		await this.storeChain;
		await this.store.close();
	}

	emit(event, value) {
		for (const fn of this.listeners[event]) {
			try {
				fn(value);
			} catch (err) {
				queueMicrotask(() => {
					throw err;
				});
			}
		}
	}

	setStatus(status) {
		if (this.closed || this.status === status)
			return;
		this.status = status;
		if (status === 'live')
			this.outbox.wake();
		this.emit('status', status);
	}

	// ------------------------------------------------------------------
	// waiting, and the browser's network events

	// Runs fn after ms, replacing the pending step.
	later(fn, ms) {
		this.cancelLater();
		this.timerFn = fn;
		this.timer = setTimeout(() => {
			this.timer = null;
			this.timerFn = null;
			fn();
		}, ms);
	}

	cancelLater() {
		clearTimeout(this.timer);
		this.timer = null;
		this.timerFn = null;
	}

	// Waits ms, or less when the network comes back.
	nap(ms) {
		return new Promise((resolve) => {
			const wake = () => {
				clearTimeout(t);
				this.naps.delete(wake);
				resolve();
			};
			const t = setTimeout(wake, ms);
			this.naps.add(wake);
		});
	}

	listenNetwork() {
		const target = globalThis;
		if (typeof target.addEventListener !== 'function' || typeof globalThis.navigator?.onLine !== 'boolean')
			return;
		this.onOffline = () => {
			if (this.closed)
				return;
			this.setStatus('offline');
			const sub = this.sub;
			if (sub) {
				this.dropSocket();
				this.emit('error', new CombError('network: the browser is offline', { code: 'network' }));
				this.reopen('network');
			}
		};
		this.onOnline = () => {
			if (this.closed)
				return;
			this.syncAttempt = 0;
			if (this.retrySyncAt)
				this.retrySyncAt = 0;
			for (const wake of this.naps)
				wake();
			this.outbox.wake();
			const fn = this.timerFn;
			if (fn) {
				this.cancelLater();
				fn();
			}
		};
		target.addEventListener('offline', this.onOffline);
		target.addEventListener('online', this.onOnline);
	}

	unlistenNetwork() {
		if (this.onOffline) {
			globalThis.removeEventListener('offline', this.onOffline);
			globalThis.removeEventListener('online', this.onOnline);
		}
	}

	// ------------------------------------------------------------------
	// applying changes

	// Replaces d's revision with ev unless ev is what we hold or older;
	// appends what it did to out ({op: 'upsert', event}).
	upsert(ev, out) {
		const d = tagValue(ev, 'd');
		const cur = this.items.get(d);
		if (cur?.id === ev.id || this.superseded.get(d)?.has(ev.id))
			return;
		this.supersede(d, cur?.id, tagValue(ev, 'prev'));
		this.items.set(d, ev);
		this.outbox.seen(d, false);
		out.push({ op: 'upsert', event: ev });
	}

	// Drops d; appends what it did to out ({op: 'remove', d, h, reason}).
	// removed: the id of the revision the removal is about, when it names
	// one (a sync's markers do): the removal changes nothing unless the
	// view holds that revision, and makes it old for good. An incremental
	// removal names none: it drops whatever the view holds and makes
	// nothing old, because a catch-up that replays changes from an older
	// cursor sends the removal of d from a channel it left and then its
	// newer revision elsewhere, which must come back.
	remove(d, h, reason, out, removed) {
		const cur = this.items.get(d);
		if (!cur || (removed && cur.id !== removed))
			return;
		if (removed)
			this.supersede(d, removed);
		this.items.delete(d);
		this.outbox.seen(d, true);
		out.push({ op: 'remove', d, h: h ?? tagValue(cur, 'h'), reason });
	}

	supersede(d, ...ids) {
		let set = this.superseded.get(d);
		if (!set) {
			set = new Set();
			this.superseded.set(d, set);
		}
		for (const id of ids) {
			if (id)
				set.add(id);
		}
	}

	// Tells listeners of the changes applied (in order), then stores them
	// in that order with the cursor after them, in one store write.
	async commit(changes, cursor) {
		if (changes.length)
			this.emitChange(changes);
		if (changes.length || cursor !== undefined)
			await this.storeWrite(() => this.store.write(changes.map(storeChange), cursor));
		if (cursor !== undefined)
			this.cursor = cursor;
	}

	// Runs fn (a store call) after every store call made before it, so
	// the store sees changes in the order the view applied them, whatever
	// the store; resolves or rejects as fn does.
	storeWrite(fn) {
		const p = this.storeChain.then(fn);
		this.storeChain = p.catch(() => {});
		return p;
	}

	// The 'change' event: changes in order, and for convenience the
	// upserts (revisions) and removals ({d, h, reason}) among them.
	emitChange(changes) {
		const upserts = [], removals = [];
		for (const c of changes) {
			if (c.op === 'upsert')
				upserts.push(c.event);
			else if (c.op === 'remove')
				removals.push({ d: c.d, h: c.h, reason: c.reason });
		}
		this.emit('change', { changes, upserts, removals });
	}

	// Applies an incremental answer's changes (PROTOCOL.md section 8),
	// those that keep to the protocol, in order.
	async apply(changes, cursor) {
		const out = [];
		for (const c of this.reader.validChanges(changes)) {
			if (c.op === 'upsert')
				this.upsert(c.event, out);
			else
				this.remove(c.d, c.h, c.reason, out);
		}
		await this.commit(out, cursor);
	}

	// ------------------------------------------------------------------
	// incremental reads

	// Runs one read (fetch resolves to its answer) unless the view closes.
	async read(fetch) {
		if (this.closed)
			throw new Closed();
		const body = await fetch();
		if (this.closed)
			throw new Closed();
		this.stats.fetched += body.changes.filter((c) => c.op === 'upsert').length;
		return body;
	}

	// Reads from the cursor until `more` is false.
	async catchUp() {
		for (;;) {
			if (this.cursor === undefined && !this.fresh)
				this.fresh = new Set();
			this.reader.cursor = this.cursor;
			let body;
			try {
				body = await this.read(() => this.reader.fetchPage(this.pageSize));
			} catch (err) {
				if (!startsOver(err))
					throw err;
				this.startOver();
				continue;
			}
			this.stats.reads++;
			await this.applyCatchUp(body.changes, body.cursor);
			if (!body.more)
				break;
		}
		await this.caughtUp();
	}

	// The cursor is too old or not ours: the next read is the whole set.
	startOver() {
		this.stats.resets++;
		this.cursor = undefined;
		this.fresh = new Set();
	}

	// Applies one page of a catch-up. While starting over it notes what
	// the page holds, and the store keeps its old cursor.
	async applyCatchUp(changes, cursor) {
		if (!this.fresh) {
			await this.apply(changes, cursor);
			return;
		}
		for (const c of changes)
			this.fresh.add(c.op === 'upsert' ? tagValue(c.event, 'd') : c.d);
		await this.apply(changes);
		this.cursor = cursor;
	}

	// The end of a complete catch-up. After starting over, what the view
	// holds and the new read lacks changed while the view was away: a
	// known-ID read names why (an upsert there came back since, and the
	// next read or frame brings it), then the store gets the new cursor.
	// sub: the socket whose catch-up this is (none for HTTP reads).
	async caughtUp(sub = null) {
		const fresh = this.fresh;
		if (fresh) {
			const gone = [...this.items.keys()].filter((d) => !fresh.has(d));
			if (!await this.lookUp(gone, { sub }))
				return;
			this.fresh = null;
			await this.storeWrite(() => this.store.write([], this.cursor));
		}
		this.resolveReady(this);
	}

	// Known-ID reads of ds, held but missing from a complete read: the
	// removal of each with its reason (`access` covers unknown and
	// unreadable ids alike) is applied while the view still holds the
	// revision it held when the look-up began; an upsert there, or a
	// newer revision held meanwhile, came back after that read, and the
	// next read or frame brings it. With sub, answers that arrive after
	// sub was replaced are dropped: resolves false then.
	async lookUp(ds, { sub = null } = {}) {
		if (!ds.length)
			return true;
		const held = new Map(ds.map((d) => [d, this.items.get(d)?.id]));
		const max = (await this.client.info()).artifacts?.incremental?.max_ids ?? 1000;
		for (let i = 0; i < ds.length; i += max) {
			const filter = { artifact: 'incremental', '#d': ds.slice(i, i + max), ...this.scope };
			const body = await this.read(() => this.client.query(filter));
			this.stats.knownReads++;
			if (sub && sub !== this.sub)
				return false;
			await this.apply(body.changes.filter((c) => c.op === 'remove' && this.items.get(c.d)?.id === held.get(c.d)));
		}
		return true;
	}

	// Runs fn until it succeeds, waiting between attempts (Retry-After
	// when the relay gives one). Network failures make the view offline.
	async retrying(fn) {
		for (let attempt = 0; ; attempt++) {
			try {
				return await fn();
			} catch (err) {
				if (err instanceof Closed || this.closed || fatal(err))
					throw err;
				this.emit('error', err);
				if (err.code === 'unauthorized') {
					await this.untilRetry();
					continue;
				}
				if (err.code === 'network')
					this.setStatus('offline');
				const wait = err.retryAfter ? err.retryAfter * 1000 * (1 + Math.random() / 2) : backoffMs(attempt, 500);
				await this.nap(wait);
				if (this.closed)
					throw new Closed();
			}
		}
	}

	// The signer declined: status `unauthorized` until retry() (asking
	// again on a timer would prompt the user again and again). Rejects
	// with Closed when the view closes meanwhile.
	async untilRetry() {
		this.setStatus('unauthorized');
		await new Promise((resolve) => {
			this.retryWaits.add(resolve);
		});
		if (this.closed)
			throw new Closed();
	}

	/**
	 * After status `unauthorized` (the signer declined): asks the signer
	 * again and carries on. A no-op otherwise.
	 */
	retry() {
		const waits = [...this.retryWaits];
		this.retryWaits.clear();
		for (const wake of waits)
			wake();
	}

	// ------------------------------------------------------------------
	// the loop

	async run() {
		try {
			const { events, cursor, outbox } = await this.store.load();
			this.outbox.restore(outbox);
			if (this.outbox.size) {
				this.outboxChanged();
				this.outbox.send();
			}
			const loaded = [];
			for (const ev of events)
				this.upsert(ev, loaded);
			this.cursor = cursor ?? undefined;
			if (loaded.length)
				this.emitChange(loaded);
			const info = await this.retrying(() => this.client.info());
			const modes = info.artifacts?.sync?.modes ?? [];
			if (this.resumable && this.client.WebSocket && modes.includes('changes')) {
				this.mode = 'changes';
				this.connect();
				return;
			}
			this.mode = 'current';
			await this.retrying(() => this.catchUp());
			await this.goLive();
		} catch (err) {
			if (err instanceof Closed || this.closed)
				return;
			this.setStatus('offline');
			this.emit('error', err);
			this.rejectReady(err);
		}
	}

	// The transport "current": opens the sync when it can serve this
	// view, else polls.
	async goLive() {
		const info = await this.retrying(() => this.client.info());
		const sync = info.artifacts?.sync;
		const fits = sync && this.items.size <= (sync.max_events ?? Infinity);
		if (this.client.WebSocket && this.channels && fits)
			this.connect();
		else
			this.poll(null);
	}

	// Polling: a catch-up now and every pollInterval; retrySync (a delay)
	// tries the sync again after that long (or once the network is back).
	poll(retrySync) {
		this.cancelLater();
		if (this.closed)
			return;
		this.retrySyncAt = retrySync === null ? null : Date.now() + retrySync;
		const tick = async () => {
			try {
				await this.retrying(() => this.catchUp());
			} catch (err) {
				if (err instanceof Closed || this.closed)
					return;
				this.emit('error', err);
				this.rejectReady(err);
			}
			if (this.closed)
				return;
			this.setStatus('live');
			if (this.retrySyncAt !== null && Date.now() >= this.retrySyncAt) {
				this.connect();
				return;
			}
			this.later(tick, this.pollInterval);
		};
		tick();
	}

	// ------------------------------------------------------------------
	// the socket: a resumable sync or a sync, by this.mode

	connect() {
		if (this.closed)
			return;
		this.setStatus('catching-up');
		this.stats.connects++;
		const url = this.client.wsUrl;
		let ws;
		try {
			ws = this.client.openSocket();
		} catch (err) {
			this.emit('error', err);
			this.poll(null);
			return;
		}
		const sub = { ws, url, id: `view${++subCounter}`, mode: this.mode, state: 'auth', snapshot: null,
			authId: null, chain: Promise.resolve() };
		this.sub = sub;
		ws.onmessage = (e) => this.onFrame(sub, e.data).catch((err) => {
			if (!(err instanceof Closed) && !this.closed)
				this.emit('error', err);
		});
		ws.onclose = () => this.onSocketClosed(sub);
		ws.onerror = () => {};
	}

	dropSocket() {
		const sub = this.sub;
		this.sub = null;
		if (sub) {
			sub.ws.onclose = null;
			sub.ws.onmessage = null;
			try {
				sub.ws.close();
			} catch {
				// already closed
			}
		}
	}

	send(sub, msg) {
		if (sub.ws.readyState === 1)
			sub.ws.send(JSON.stringify(msg));
	}

	// After a dropped connection (or, for a sync, a resync): open again
	// (a sync catches up first).
	reopen(reason) {
		this.cancelLater();
		if (globalThis.navigator?.onLine === false) {
			// the browser knows it is offline: its `online` event reconnects
			this.setStatus('offline');
			this.later(() => this.connect(), MAX_BACKOFF_MS);
			return;
		}
		const attempt = this.syncAttempt++;
		if (attempt >= 3) {
			// WebSockets keep failing: poll over HTTP, try again later
			this.poll(backoffMs(attempt, 1000));
			return;
		}
		this.setStatus(reason === 'network' ? 'offline' : 'catching-up');
		this.later(() => this.connect(), backoffMs(attempt));
	}

	onSocketClosed(sub) {
		if (sub !== this.sub || this.closed)
			return;
		this.sub = null;
		this.client.failOver();
		this.emit('error', new CombError('network: connection closed', { code: 'network' }));
		this.reopen('network');
	}

	async onFrame(sub, data) {
		if (sub !== this.sub)
			return;
		let msg;
		try {
			msg = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data));
		} catch {
			return;
		}
		if (!Array.isArray(msg))
			return;
		switch (msg[0]) {
		case 'AUTH': {
			let ev;
			try {
				ev = await this.client.authEvent(msg[1], sub.url);
			} catch (err) {
				// declined: no socket until retry()
				this.dropSocket();
				this.emit('error', err);
				await this.untilRetry();
				this.connect();
				return;
			}
			if (sub !== this.sub)
				return;
			sub.authId = ev.id;
			this.send(sub, ['AUTH', ev]);
			return;
		}
		case 'OK':
			if (msg[1] === sub.authId) {
				if (msg[2] !== true) {
					this.emit('error', new CombError(String(msg[3])));
					this.dropSocket();
					this.poll(backoffMs(this.syncAttempt++, 1000));
					return;
				}
				if (sub.mode === 'changes')
					this.openChanges(sub);
				else
					await this.openSync(sub);
			}
			return;
		case 'CHANGES':
			if (msg[1] === sub.id && sub.mode === 'changes' && this.reader.wellFormed(msg[2], { frame: true }))
				this.inTurn(sub, () => this.onChanges(sub, msg[2]));
			return;
		case 'EVENT':
			if (msg[1] === sub.id && sub.mode === 'current')
				this.onEvent(sub, msg[2]);
			return;
		case 'EOSE':
			if (msg[1] !== sub.id)
				return;
			if (sub.mode === 'changes')
				this.inTurn(sub, () => this.onChangesEose(sub));
			else
				await this.onEose(sub);
			return;
		case 'CLOSED':
			if (msg[1] !== sub.id)
				return;
			if (sub.mode === 'changes')
				this.inTurn(sub, () => this.onChangesClosed(sub, String(msg[2] ?? '')));
			else
				this.onClosed(sub, String(msg[2] ?? ''));
			return;
		default:
			return;
		}
	}

	// ------------------------------------------------------------------
	// the resumable sync

	// Runs fn after everything received before it on sub, while sub is
	// the view's socket.
	inTurn(sub, fn) {
		sub.chain = sub.chain.then(() => (sub === this.sub ? fn() : undefined)).catch((err) => {
			if (!(err instanceof Closed) && !this.closed)
				this.emit('error', err);
		});
	}

	// Sends the REQ from the cursor (none: the whole set).
	openChanges(sub) {
		if (sub !== this.sub || this.closed)
			return;
		if (this.cursor === undefined && !this.fresh)
			this.fresh = new Set();
		const filter = { artifact: 'changes', ...this.scope };
		if (this.cursor !== undefined)
			filter.cursor = this.cursor;
		sub.state = 'catching-up';
		this.stats.resumes++;
		this.setStatus('catching-up');
		this.send(sub, ['REQ', sub.id, filter]);
	}

	// A frame is an incremental answer: its items, then its cursor, stored
	// together. Catch-up items count as fetched, live ones as sync events.
	async onChanges(sub, body) {
		this.stats.frames++;
		if (sub.state === 'live') {
			this.stats.syncEvents += body.changes.length;
			await this.apply(body.changes, body.cursor);
			return;
		}
		this.stats.fetched += body.changes.filter((c) => c.op === 'upsert').length;
		await this.applyCatchUp(body.changes, body.cursor);
	}

	async onChangesEose(sub) {
		sub.state = 'live';
		try {
			await this.retrying(() => this.caughtUp(sub));
		} catch (err) {
			if (err instanceof Closed || this.closed)
				return;
			this.emit('error', err);
		}
		if (sub !== this.sub)
			return;
		this.syncAttempt = 0;
		this.setStatus('live');
	}

	// PROTOCOL.md section 7.1, "CLOSED reasons": every retry starts from
	// the last cursor stored (frames before the CLOSED are applied).
	onChangesClosed(sub, reason) {
		sub.state = 'closed';
		const err = new CombError(reason);
		this.emit('error', err);
		const again = (ms) => {
			this.setStatus('catching-up');
			this.later(() => this.openChanges(sub), ms);
		};
		if (startsOver(err)) {
			this.startOver();
			again(0);
		} else if (err.code === 'incremental_busy') {
			again(backoffMs(this.syncAttempt++, 1000));
		} else if (err.code === 'resync') {
			this.stats.resyncs++;
			again(backoffMs(this.syncAttempt++));
		} else if (reason === 'error: incremental_unavailable') {
			// the relay no longer offers it: a sync and incremental reads
			this.dropSocket();
			this.mode = 'current';
			this.goLive().catch((e) => {
				if (!(e instanceof Closed) && !this.closed)
					this.emit('error', e);
			});
		} else if (err.code === 'error') {
			again(backoffMs(this.syncAttempt++, 1000));
		} else {
			// refused (invalid:, auth-required:): the same REQ would be too
			this.dropSocket();
			this.poll(null);
		}
	}

	// ------------------------------------------------------------------
	// the sync

	// Catches up (no sync is open meanwhile), then sends the REQ.
	async openSync(sub) {
		try {
			await this.retrying(() => this.catchUp());
		} catch (err) {
			if (err instanceof Closed || this.closed)
				return;
			this.emit('error', err);
		}
		if (sub !== this.sub)
			return;
		const filter = { artifact: 'current', '#h': this.channels };
		if (this.types)
			filter['#type'] = this.types;
		sub.state = 'opening';
		sub.snapshot = new Map();
		this.send(sub, ['REQ', sub.id, filter]);
	}

	onEvent(sub, ev) {
		this.stats.syncEvents++;
		const d = tagValue(ev, 'd');
		if (sub.state === 'opening') {
			if (ev.kind === REVISION_KIND && d)
				sub.snapshot.set(d, ev);
			return;
		}
		if (sub.state !== 'live' || !d)
			return;
		const out = [];
		const h = tagValue(ev, 'h');
		if (ev.kind === REVISION_KIND) {
			if (tagValue(ev, 'op') === 'delete') {
				this.supersede(d, ev.id, tagValue(ev, 'prev'));
				this.remove(d, h, 'deleted', out);
			} else {
				this.upsert(ev, out);
			}
		} else if (ev.kind === REMOVAL_KIND) {
			// a marker is about the revision it names: a redaction's e, a
			// move's prev
			const reason = tagValue(ev, 'reason');
			this.remove(d, h, reason, out, tagValue(ev, reason === 'redacted' ? 'e' : 'prev'));
		}
		this.commit(out).catch((err) => this.emit('error', err));
	}

	// The snapshot replaces the copy of these channels; what we held and
	// it lacks changed between the catch-up and the snapshot, and a
	// known-ID read names why (an upsert there means it came back after
	// the snapshot: the sync delivers it).
	async onEose(sub) {
		const snapshot = sub.snapshot;
		sub.snapshot = null;
		sub.state = 'live';
		this.stats.snapshots++;
		this.syncAttempt = 0;
		const out = [];
		for (const ev of snapshot.values())
			this.upsert(ev, out);
		const gone = [...this.items.keys()].filter((d) => !snapshot.has(d));
		await this.commit(out);
		if (gone.length) {
			try {
				await this.retrying(() => this.lookUp(gone));
			} catch (err) {
				if (err instanceof Closed || this.closed)
					return;
				this.emit('error', err);
			}
		}
		if (sub === this.sub)
			this.setStatus('live');
	}

	onClosed(sub, reason) {
		if (reason.startsWith('resync:')) {
			this.stats.resyncs++;
			sub.state = 'closed';
			this.emit('error', new CombError(reason, { code: 'resync' }));
			// the connection stays; a new REQ on it after the catch-up
			this.setStatus('catching-up');
			this.later(() => {
				if (sub === this.sub)
					this.openSync(sub);
			}, backoffMs(this.syncAttempt++));
			return;
		}
		// refused (restricted:, invalid: sync set too large, error:):
		// incremental reads keep the view exact, the sync is tried again later
		this.emit('error', new CombError(reason));
		this.dropSocket();
		if (reason.startsWith('invalid:') && reason !== 'invalid: sync set too large')
			this.poll(null);
		else
			this.poll(backoffMs(this.syncAttempt++, 2000));
	}
}
