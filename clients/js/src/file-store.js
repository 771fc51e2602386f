// A store in one JSON file (Node): {"cursor": "...", "artifacts": {d: event},
// "outbox": [...]}, with the interface of src/stores.js. Changes are written
// by replacing the file (write to a temporary file, then rename), so the
// file always holds a cursor with exactly the changes before it; writes are
// coalesced: a promise resolves once a write holding its change has
// reached the file. Import from 'comb-client/file-store'.

import fs from 'node:fs/promises';

import { applyInOrder } from './stores.js';

export class JsonFileStore {
	constructor(path) {
		this.path = path;
		this.items = null;
		this.savedCursor = undefined;
		this.outbox = [];
		this.chain = Promise.resolve();   // the last write scheduled
		this.pending = null;              // a write not yet started
		this.calls = new Set();           // put and delete calls not yet done
	}

	// Runs a change (fn returns a promise); close() waits for it.
	track(fn) {
		const p = fn();
		this.calls.add(p);
		const done = () => this.calls.delete(p);
		p.then(done, done);
		return p;
	}

	/** Everything held: {events, cursor, outbox} (the file is read once). */
	async load() {
		if (!this.items) {
			this.items = new Map();
			let text = null;
			try {
				text = await fs.readFile(this.path, 'utf8');
			} catch (err) {
				if (err.code !== 'ENOENT')
					throw err;
			}
			if (text !== null) {
				const data = JSON.parse(text);
				for (const [d, ev] of Object.entries(data.artifacts ?? {}))
					this.items.set(d, ev);
				this.savedCursor = data.cursor ?? undefined;
				this.outbox = data.outbox ?? [];
			}
		}
		return { events: [...this.items.values()], cursor: this.savedCursor, outbox: structuredClone(this.outbox) };
	}

	async get(d) {
		await this.load();
		return this.items.get(d);
	}

	/** Applies changes in order, then the cursor; resolves once in the file. */
	write(changes, cursor) {
		return this.track(async () => {
			await this.load();
			applyInOrder(this.items, changes);
			if (cursor !== undefined)
				this.savedCursor = cursor;
			return this.flush();
		});
	}

	/** Replaces the outbox; resolves once in the file. */
	saveOutbox(entries) {
		return this.track(async () => {
			await this.load();
			this.outbox = structuredClone(entries);
			return this.flush();
		});
	}

	async cursor() {
		await this.load();
		return this.savedCursor;
	}

	// Resolves once the file holds everything changed before this call:
	// writes run one after another, and a write not yet started takes
	// every change made until it starts.
	flush() {
		if (!this.pending) {
			this.pending = this.chain.then(() => {
				this.pending = null;
				return this.writeFile();
			});
			this.chain = this.pending.catch(() => {});
		}
		return this.pending;
	}

	// Replaces the file with what is held now.
	async writeFile() {
		const data = { cursor: this.savedCursor ?? null, artifacts: Object.fromEntries(this.items), outbox: this.outbox };
		const tmp = `${this.path}.${process.pid}.tmp`;
		await fs.writeFile(tmp, JSON.stringify(data));
		await fs.rename(tmp, this.path);
	}

	// Resolves once every change made before it is in the file.
	async close() {
		await Promise.allSettled([...this.calls]);
		await this.chain;
	}
}
