// A store in one JSON file (Node): {"cursor": "...", "artifacts": {d: event}}.
// Changes are written by replacing the file (write to a temporary file,
// then rename), coalesced: a promise resolves once a write holding its
// change has reached the file. Import from 'comb-client/file-store'.

import fs from 'node:fs/promises';

import { tagValue } from './tags.js';

export class JsonFileStore {
	constructor(path) {
		this.path = path;
		this.items = null;
		this.savedCursor = undefined;
		this.chain = Promise.resolve();   // the last write scheduled
		this.pending = null;              // a write not yet started
		this.calls = new Set();           // put and delete calls not yet done
	}

	// Runs a change; close() waits for it.
	track(fn) {
		const p = fn();
		this.calls.add(p);
		const done = () => this.calls.delete(p);
		p.then(done, done);
		return p;
	}

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
			}
		}
		return { events: [...this.items.values()], cursor: this.savedCursor };
	}

	async get(d) {
		await this.load();
		return this.items.get(d);
	}

	put(events, cursor) {
		return this.track(async () => {
			await this.load();
			for (const ev of events)
				this.items.set(tagValue(ev, 'd'), ev);
			if (cursor !== undefined)
				this.savedCursor = cursor;
			return this.flush();
		});
	}

	delete(ds, cursor) {
		return this.track(async () => {
			await this.load();
			for (const d of ds)
				this.items.delete(d);
			if (cursor !== undefined)
				this.savedCursor = cursor;
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

	async writeFile() {
		const data = { cursor: this.savedCursor ?? null, artifacts: Object.fromEntries(this.items) };
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
