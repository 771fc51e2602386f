// TabView: one connection per browser (issue 36). The tabs of one origin
// that show the same view share one WebSocket and one IndexedDB store:
//   - one tab leads: it holds a Web Lock named after the store, runs the
//     real ArtifactView (socket, reads, store writes, outbox) and tells
//     the others over a BroadcastChannel of the same name what changed;
//   - the others follow: they ask the leader for what it shows, then
//     apply its changes in the order sent, and hand their writes to it
//     (the leader keeps them in its outbox, in the store, before it
//     answers, so a write survives the leader's tab closing);
//   - when the leading tab closes (or calls close()), the browser gives
//     the lock to a follower, which starts an ArtifactView on the same
//     store: it resumes from the stored cursor and outbox, without a full
//     re-read.
// A TabView has the interface of an ArtifactView (get, all, isPending,
// pending, status, stats, ready, on/off, create, update, move, delete,
// retry, close) plus `role` ('leader' or 'follower').

import { CombError } from './errors.js';
import { inScope, shownRevision, shownRevisions } from './outbox.js';
import { IndexedDBStore } from './stores.js';
import { tagValue } from './tags.js';
import { ArtifactView } from './view.js';

const WRITES = new Set(['create', 'update', 'move', 'delete']);

/** Whether this platform can share a view between tabs. */
export function tabsSupported() {
	return typeof globalThis.BroadcastChannel === 'function' && typeof globalThis.navigator?.locks?.request === 'function' &&
		typeof globalThis.indexedDB === 'object';
}

let requestCounter = 0;

export class TabView {
	/**
	 * client: a CombClient. options: those of ArtifactView (without
	 * store) and name: the IndexedDB database name, which also names the
	 * lock and the channel (one per relay, key and scope).
	 */
	constructor(client, options) {
		if (!options?.name)
			throw new TypeError('name is required');
		this.client = client;
		this.options = options;
		this.name = options.name;
		this.channels = options.channels ? [...options.channels] : null;
		this.types = options.types ? [...options.types] : null;
		this.role = 'follower';
		this.view = null;              // the ArtifactView, while leading
		this.items = new Map();        // a follower's copy: d -> revision
		this.entries = [];             // a follower's copy of the outbox
		this.acked = new Map();
		this.synced = false;           // a follower has the leader's state
		this.leaderReady = false;      // a leader's view is ready
		this.status = 'connecting';
		this.closed = false;
		this.listeners = { change: new Set(), status: new Set(), error: new Set(), pending: new Set() };
		this.requests = new Map();     // id -> {resolve, reject} of writes sent to the leader
		this.ready = new Promise((resolve, reject) => {
			this.resolveReady = resolve;
			this.rejectReady = reject;
		});
		this.ready.catch(() => {});
		this.bus = new BroadcastChannel(`comb-tabs ${this.name}`);
		this.bus.onmessage = (e) => this.onMessage(e.data);
		this.stopLeading = null;
		this.abort = new AbortController();
		globalThis.navigator.locks.request(`comb-tabs ${this.name}`, { signal: this.abort.signal }, () => this.lead())
			.catch(() => {});
		this.post({ type: 'hello' });
	}

	/** The revision of d as shown (see ArtifactView.get). */
	get(d) {
		if (this.view)
			return this.view.get(d);
		return shownRevision(d, this.items, this.entries, this.acked, (ev) => inScope(ev, this.channels, this.types));
	}

	/** Every revision shown. */
	all() {
		if (this.view)
			return this.view.all();
		return shownRevisions(this.items, this.entries, this.acked, (ev) => inScope(ev, this.channels, this.types));
	}

	/** Whether d has a write not yet accepted. */
	isPending(d) {
		return this.view ? this.view.isPending(d) : this.entries.some((e) => e.d === d);
	}

	/** How many writes are not accepted yet. */
	get pending() {
		return this.view ? this.view.pending : this.entries.length;
	}

	/** The leading tab's view's stats (see ArtifactView); null in a follower. */
	get stats() {
		return this.view?.stats ?? null;
	}

	/** As ArtifactView.on. */
	on(event, fn) {
		this.listeners[event].add(fn);
		return this;
	}

	/** Removes a listener added with on(). */
	off(event, fn) {
		this.listeners[event].delete(fn);
		return this;
	}

	// Calls event's listeners with value; a listener's throw is rethrown
	// later, so one listener cannot stop the others.
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

	// Sets the status and tells the 'status' listeners when it changed.
	setStatus(status) {
		if (this.status === status)
			return;
		this.status = status;
		this.emit('status', status);
	}

	// Sends msg to the other tabs (none once closed).
	post(msg) {
		if (!this.closed)
			this.bus.postMessage(msg);
	}

	// ------------------------------------------------------------------
	// writes: the leader's outbox takes them

	/**
	 * As ArtifactView.create. The d is chosen here, so that a create the
	 * next leader makes again (its leader closed before answering) is
	 * the same artifact: the relay refuses the second, never makes two.
	 */
	create(spec) {
		return this.write('create', [{ ...spec, d: spec.d ?? crypto.randomUUID() }]);
	}

	/** As ArtifactView.update. */
	update(d, changes) {
		return this.write('update', [d, changes]);
	}

	/** As ArtifactView.move. */
	move(d, toH, changes) {
		return this.write('move', [d, toH, changes]);
	}

	/** As ArtifactView.delete. */
	delete(d) {
		return this.write('delete', [d]);
	}

	// Runs write op with args in the leader's view; resolves to the
	// signed event once the leader stored it.
	write(op, args) {
		if (this.view)
			return this.view[op](...args);
		if (this.closed)
			return Promise.reject(new CombError('closed', { code: 'closed' }));
		const id = `${Date.now()}-${++requestCounter}-${Math.random()}`;
		return new Promise((resolve, reject) => {
			this.requests.set(id, { resolve, reject, op, args });
			this.post({ type: 'write', id, op, args });
		});
	}

	/** As ArtifactView.retry (in the leading tab). */
	retry() {
		if (this.view)
			this.view.retry();
		else
			this.post({ type: 'retry' });
	}

	/** Stops this tab's part; a leader hands the lock to another tab. */
	async close() {
		if (this.closed)
			return;
		this.closed = true;
		this.abort.abort();
		for (const { reject } of this.requests.values())
			reject(new CombError('closed', { code: 'closed' }));
		this.requests.clear();
		this.rejectReady(new CombError('closed', { code: 'closed' }));
		const view = this.view;
		this.view = null;
		if (view)
			await view.close();
		this.bus.close();
		this.stopLeading?.();
	}

	// ------------------------------------------------------------------
	// leading

	// Holds the lock until close(): runs the view and tells the others.
	lead() {
		if (this.closed)
			return undefined;
		this.role = 'leader';
		const view = new ArtifactView(this.client, { ...this.options, store: new IndexedDBStore(this.name) });
		this.view = view;
		view.on('change', (change) => {
			this.post({ type: 'change', changes: change.changes });
			this.emit('change', change);
		});
		view.on('status', (status) => {
			this.post({ type: 'status', status });
			this.setStatus(status);
		});
		view.on('pending', (n) => {
			this.post(this.outboxState());
			this.emit('pending', n);
		});
		view.on('error', (err) => {
			this.post({ type: 'error', message: err.message, code: err.code, entry: err.entry });
			this.emit('error', err);
		});
		view.ready.then(() => {
			this.leaderReady = true;
			this.post({ type: 'ready' });
			this.resolveReady(this);
		}, () => {});
		// writes asked of the tab that led before and not answered: again here
		for (const [id, { op, args, resolve, reject }] of this.requests) {
			this.requests.delete(id);
			view[op](...args).then(resolve, reject);
		}
		// what a follower showed stays until the view loads the store
		this.items.clear();
		this.setStatus(view.status);
		this.post({ type: 'leader' });
		this.post(this.snapshot());
		return new Promise((resolve) => {
			this.stopLeading = resolve;
		});
	}

	// The leader's outbox for the other tabs: entries and accepted writes
	// not read back yet.
	outboxState() {
		return { type: 'outbox', entries: this.view.outbox.entries, acked: [...this.view.outbox.acked.values()] };
	}

	// What the leader shows, for a tab that said hello or a new follower.
	snapshot() {
		const { entries, acked } = this.outboxState();
		return { type: 'snapshot', events: [...this.view.items.values()], status: this.view.status,
			ready: this.leaderReady, entries, acked };
	}

	// ------------------------------------------------------------------
	// the bus

	// A message from another tab: a follower applies the leader's
	// snapshot, changes (in order), status, outbox and answers; the
	// leader serves hellos, writes and retries (onFollowerMessage).
	onMessage(msg) {
		if (this.closed || !msg || typeof msg !== 'object')
			return;
		if (this.view) {
			this.onFollowerMessage(msg);
			return;
		}
		switch (msg.type) {
		case 'snapshot': {
			this.synced = true;
			this.items = new Map(msg.events.map((ev) => [tagValue(ev, 'd'), ev]));
			this.setOutbox(msg.entries, msg.acked);
			this.setStatus(msg.status);
			if (msg.ready)
				this.resolveReady(this);
			const upserts = msg.events;
			this.emit('change', { changes: upserts.map((event) => ({ op: 'upsert', event })), upserts, removals: [] });
			return;
		}
		case 'leader':
			// a new leader: what it shows comes in its snapshot; writes not
			// answered by the old one are asked again
			this.synced = false;
			for (const [id, { op, args }] of this.requests)
				this.post({ type: 'write', id, op, args });
			return;
		case 'change':
			if (this.synced)
				this.applyChanges(msg.changes);
			return;
		case 'status':
			this.setStatus(msg.status);
			return;
		case 'ready':
			this.resolveReady(this);
			return;
		case 'outbox':
			this.setOutbox(msg.entries, msg.acked);
			this.emit('pending', this.entries.length);
			return;
		case 'error': {
			const err = new CombError(msg.message, { code: msg.code });
			if (msg.entry)
				err.entry = msg.entry;
			this.emit('error', err);
			return;
		}
		case 'written': {
			const req = this.requests.get(msg.id);
			if (!req)
				return;
			this.requests.delete(msg.id);
			if (msg.error)
				req.reject(new CombError(msg.error.message, { code: msg.error.code }));
			else
				req.resolve(msg.event);
			return;
		}
		default:
			return;
		}
	}

	// The leader's side: a follower said hello, asks for a write or a retry.
	onFollowerMessage(msg) {
		if (msg.type === 'hello') {
			this.post(this.snapshot());
		} else if (msg.type === 'write' && WRITES.has(msg.op) && Array.isArray(msg.args)) {
			this.view[msg.op](...msg.args).then(
				(event) => this.post({ type: 'written', id: msg.id, event }),
				(err) => this.post({ type: 'written', id: msg.id, error: { message: err.message, code: err.code } }));
		} else if (msg.type === 'retry') {
			this.view.retry();
		}
	}

	// A follower's copy of the leader's outbox.
	setOutbox(entries, acked) {
		this.entries = entries;
		this.acked = new Map(acked.map((ev) => [tagValue(ev, 'd'), ev]));
	}

	// A follower applies the leader's changes in order; a change of d
	// ends the showing of d's accepted write (the leader's next outbox
	// state says the same).
	applyChanges(changes) {
		const upserts = [], removals = [];
		for (const c of changes) {
			this.acked.delete(c.op === 'upsert' ? tagValue(c.event, 'd') : c.d);
			if (c.op === 'upsert') {
				this.items.set(tagValue(c.event, 'd'), c.event);
				upserts.push(c.event);
			} else {
				this.items.delete(c.d);
				removals.push({ d: c.d, h: c.h, reason: c.reason });
			}
		}
		this.emit('change', { changes, upserts, removals });
	}
}
