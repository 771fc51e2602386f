// Stores keep a view's artifacts, its incremental cursor and its outbox
// (writes not yet accepted). Every store has the same small interface (all
// methods return promises):
//   load()                  -> {events, cursor, outbox}: everything, at start
//   get(d)                  -> the stored revision of d, or undefined
//   write(changes, cursor?) applies changes IN ORDER, and the cursor after
//                           them, as one transaction: every change is
//                           {op: 'upsert', event} or {op: 'remove', d}, so
//                           a removal of d followed by an upsert of d
//                           leaves d stored, and the reverse drops it
//   saveOutbox(entries)     replaces the stored outbox (an array of plain,
//                           JSON-serializable entries)
//   cursor()                -> the stored cursor, or undefined
//   close()
// A store never holds a cursor without the changes read before it, and
// every read is idempotent, so a store that stops between two calls loses
// nothing.

import { tagValue } from './tags.js';

/** Keeps everything in memory: a view starts from scratch each time. */
export class MemoryStore {
	constructor() {
		this.items = new Map();
		this.savedCursor = undefined;
		this.outbox = [];
	}

	/** Everything held: {events, cursor, outbox}. */
	async load() {
		return { events: [...this.items.values()], cursor: this.savedCursor, outbox: structuredClone(this.outbox) };
	}

	async get(d) {
		return this.items.get(d);
	}

	/** Applies changes in order, then the cursor (see the top of this file). */
	async write(changes, cursor) {
		applyInOrder(this.items, changes);
		if (cursor !== undefined)
			this.savedCursor = cursor;
	}

	/** Replaces the outbox. */
	async saveOutbox(entries) {
		this.outbox = structuredClone(entries);
	}

	async cursor() {
		return this.savedCursor;
	}

	async close() {}
}

/**
 * Applies ordered changes ({op: 'upsert', event} or {op: 'remove', d}) to
 * a Map of d -> revision. Shared by the stores that keep one in memory.
 */
export function applyInOrder(items, changes) {
	for (const c of changes) {
		if (c.op === 'upsert')
			items.set(tagValue(c.event, 'd'), c.event);
		else
			items.delete(c.d);
	}
}

function done(request) {
	return new Promise((resolve, reject) => {
		request.onsuccess = () => resolve(request.result);
		request.onerror = () => reject(request.error);
	});
}

function committed(tx) {
	return new Promise((resolve, reject) => {
		tx.oncomplete = () => resolve();
		tx.onerror = () => reject(tx.error);
		tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
	});
}

/**
 * Keeps artifacts and the cursor in IndexedDB (browsers): a page reload
 * starts from it. name: the database name; use one per relay, key and
 * scope (a cursor is bound to all three).
 */
export class IndexedDBStore {
	constructor(name, indexedDB = globalThis.indexedDB) {
		if (!indexedDB)
			throw new TypeError('IndexedDB is not available here');
		this.name = name;
		this.idb = indexedDB;
		this.db = null;
	}

	// The database, opened once (calls made meanwhile share the opening).
	open() {
		if (!this.db) {
			const req = this.idb.open(this.name, 1);
			req.onupgradeneeded = () => {
				req.result.createObjectStore('artifacts');
				req.result.createObjectStore('meta');
			};
			this.db = done(req);
			this.db.catch(() => {
				this.db = null;
			});
		}
		return this.db;
	}

	/** Everything held: {events, cursor, outbox}, read in one transaction. */
	async load() {
		const db = await this.open();
		const tx = db.transaction(['artifacts', 'meta'], 'readonly');
		const [events, cursor, outbox] = await Promise.all([
			done(tx.objectStore('artifacts').getAll()),
			done(tx.objectStore('meta').get('cursor')),
			done(tx.objectStore('meta').get('outbox')),
		]);
		return { events, cursor, outbox: outbox ?? [] };
	}

	async get(d) {
		const db = await this.open();
		return done(db.transaction('artifacts', 'readonly').objectStore('artifacts').get(d));
	}

	/**
	 * Applies changes in order and the cursor in one readwrite
	 * transaction: requests of one transaction run in the order made, so
	 * the last change of a d wins; a failure aborts all of it.
	 */
	async write(changes, cursor) {
		const db = await this.open();
		const tx = db.transaction(['artifacts', 'meta'], 'readwrite');
		const s = tx.objectStore('artifacts');
		for (const c of changes) {
			if (c.op === 'upsert')
				s.put(c.event, tagValue(c.event, 'd'));
			else
				s.delete(c.d);
		}
		if (cursor !== undefined)
			tx.objectStore('meta').put(cursor, 'cursor');
		await committed(tx);
	}

	/** Replaces the outbox (one transaction). */
	async saveOutbox(entries) {
		const db = await this.open();
		const tx = db.transaction('meta', 'readwrite');
		tx.objectStore('meta').put(entries, 'outbox');
		await committed(tx);
	}

	async cursor() {
		const db = await this.open();
		return done(db.transaction('meta', 'readonly').objectStore('meta').get('cursor'));
	}

	async close() {
		const db = this.db;
		this.db = null;
		(await db?.catch(() => null))?.close();
	}
}
