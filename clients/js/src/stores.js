// Stores keep a view's artifacts and its incremental cursor. Every store
// has the same small interface (all methods return promises):
//   load()                -> {events, cursor}: everything, at start
//   get(d)                -> the stored revision of d, or undefined
//   put(events, cursor?)  stores revisions (and the cursor after them)
//   delete(ds, cursor?)   drops artifacts (and stores the cursor after them)
//   cursor()              -> the stored cursor, or undefined
//   close()
// A view writes the items of a read before its cursor, and every read is
// idempotent, so a store that stops between two calls loses nothing.

import { tagValue } from './tags.js';

/** Keeps everything in memory: a view starts from scratch each time. */
export class MemoryStore {
	constructor() {
		this.items = new Map();
		this.savedCursor = undefined;
	}

	async load() {
		return { events: [...this.items.values()], cursor: this.savedCursor };
	}

	async get(d) {
		return this.items.get(d);
	}

	async put(events, cursor) {
		for (const ev of events)
			this.items.set(tagValue(ev, 'd'), ev);
		if (cursor !== undefined)
			this.savedCursor = cursor;
	}

	async delete(ds, cursor) {
		for (const d of ds)
			this.items.delete(d);
		if (cursor !== undefined)
			this.savedCursor = cursor;
	}

	async cursor() {
		return this.savedCursor;
	}

	async close() {}
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

	async open() {
		if (!this.db) {
			const req = this.idb.open(this.name, 1);
			req.onupgradeneeded = () => {
				req.result.createObjectStore('artifacts');
				req.result.createObjectStore('meta');
			};
			this.db = await done(req);
		}
		return this.db;
	}

	async load() {
		const db = await this.open();
		const tx = db.transaction(['artifacts', 'meta'], 'readonly');
		const [events, cursor] = await Promise.all([
			done(tx.objectStore('artifacts').getAll()),
			done(tx.objectStore('meta').get('cursor')),
		]);
		return { events, cursor };
	}

	async get(d) {
		const db = await this.open();
		return done(db.transaction('artifacts', 'readonly').objectStore('artifacts').get(d));
	}

	async write(fn, cursor) {
		const db = await this.open();
		const tx = db.transaction(['artifacts', 'meta'], 'readwrite');
		fn(tx.objectStore('artifacts'));
		if (cursor !== undefined)
			tx.objectStore('meta').put(cursor, 'cursor');
		await committed(tx);
	}

	put(events, cursor) {
		return this.write((s) => {
			for (const ev of events)
				s.put(ev, tagValue(ev, 'd'));
		}, cursor);
	}

	delete(ds, cursor) {
		return this.write((s) => {
			for (const d of ds)
				s.delete(d);
		}, cursor);
	}

	async cursor() {
		const db = await this.open();
		return done(db.transaction('meta', 'readonly').objectStore('meta').get('cursor'));
	}

	async close() {
		this.db?.close();
		this.db = null;
	}
}
