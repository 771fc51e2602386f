// IncrementalReader: incremental reads of one scope (PROTOCOL.md section
// 8), the job every exact copy shares. It builds each read from the scope
// and its cursor, checks each answer against the protocol, writes the
// changes of a page to a store in order, with the cursor past them in the
// same store write, and pages until the relay says there is no more. Resumable syncs (section
// 7.1) send the same answers as CHANGES frames: apply() takes those too.
//
// What breaks the protocol (an answer without changes or cursor, a change
// that is neither an upsert of an artifact revision nor a removal with a
// known reason) is left out of what is applied, and reported to
// onViolation when one is given.

import { CombError } from './errors.js';
import { MemoryStore } from './stores.js';
import { tagValue } from './tags.js';

const REVISION_KIND = 45010;

/** The reasons a removal may carry (PROTOCOL.md section 8). */
export const REMOVAL_REASONS = new Set(['deleted', 'moved', 'access', 'redacted', 'ttl']);

// The incremental filter keys of options.channels and options.types.
function scopeOf(options) {
	const scope = {};
	if (options.channels)
		scope['#h'] = [...options.channels];
	if (options.types)
		scope['#type'] = [...options.types];
	return scope;
}

/** A valid change of an answer as a store applies it. */
export function storeChange(c) {
	return c.op === 'upsert' ? { op: 'upsert', event: c.event } : { op: 'remove', d: c.d };
}

export class IncrementalReader {
	/**
	 * client: a CombClient. options: channels, types (the scope; without
	 * channels every readable channel), store (where pages go, default a
	 * MemoryStore), cursor (where the first read starts; default none:
	 * the whole set), onViolation(message) (told of every answer or change
	 * that breaks the protocol; they are skipped either way), onPage({url,
	 * cursor, answer}) (told of every answer read, with the node that gave
	 * it and the cursor it was read from, before it is applied).
	 */
	constructor(client, options = {}) {
		this.client = client;
		this.scope = scopeOf(options);
		this.store = options.store ?? new MemoryStore();
		this.cursor = options.cursor;
		this.onViolation = options.onViolation ?? null;
		this.onPage = options.onPage ?? null;
	}

	/** Reports a protocol violation (to onViolation, when given). */
	violation(message) {
		this.onViolation?.(message);
	}

	/**
	 * The changes of an answer that keep to the protocol, in order: upserts
	 * of kind-45010 revisions with a d, and removals of a d with a known
	 * reason. Every other change is reported and left out.
	 */
	validChanges(changes) {
		const valid = [];
		for (const c of changes) {
			if (c?.op === 'upsert' && c.event && typeof c.event === 'object') {
				if (c.event.kind !== REVISION_KIND)
					this.violation(`upsert of kind ${c.event.kind}`);
				else if (!tagValue(c.event, 'd'))
					this.violation(`upsert of ${String(c.event.id).slice(0, 12)} without d`);
				else
					valid.push(c);
			} else if (c?.op === 'remove' && typeof c.d === 'string') {
				if (!REMOVAL_REASONS.has(c.reason))
					this.violation(`removal of ${c.d} with reason ${JSON.stringify(c.reason)}`);
				else
					valid.push(c);
			} else {
				this.violation(`unknown change ${JSON.stringify(c).slice(0, 200)}`);
			}
		}
		return valid;
	}

	/**
	 * Whether answer has the shape of an incremental answer (a changes
	 * array, a non-empty cursor, a boolean `more` unless it is a frame);
	 * reports it when it has not.
	 */
	wellFormed(answer, { frame = false } = {}) {
		const ok = answer && typeof answer === 'object' && Array.isArray(answer.changes) &&
			typeof answer.cursor === 'string' && answer.cursor !== '' &&
			(frame || typeof answer.more === 'boolean');
		if (!ok)
			this.violation(`malformed ${frame ? 'frame' : 'answer'} ${JSON.stringify(answer).slice(0, 200)}`);
		return ok;
	}

	/** The filter of the next read: the scope, the cursor, and limit. */
	filter(limit) {
		const filter = { artifact: 'incremental', ...this.scope };
		if (this.cursor !== undefined)
			filter.cursor = this.cursor;
		if (limit)
			filter.limit = limit;
		return filter;
	}

	/**
	 * Reads one page at the cursor without applying it; resolves to the
	 * answer. Rejects with the CombError of a refused read (code
	 * `incremental_reset` or `incremental_bad_cursor`: call startOver), or
	 * of code `invalid_answer` for an answer that is not one.
	 */
	async fetchPage(limit) {
		const filter = this.filter(limit);
		const url = this.client.url;
		const answer = await this.client.query(filter);
		if (!this.wellFormed(answer))
			throw new CombError('invalid_answer: not an incremental answer', { code: 'invalid_answer', status: 200 });
		this.onPage?.({ url, cursor: filter.cursor ?? null, answer });
		return answer;
	}

	/**
	 * Writes the valid ones of changes to the store in order, with the
	 * cursor, in one store write, then moves the cursor there (undefined
	 * keeps both where they are). Resolves to the changes applied.
	 */
	async apply(changes, cursor) {
		const valid = this.validChanges(changes);
		await this.store.write(valid.map(storeChange), cursor);
		if (cursor !== undefined)
			this.cursor = cursor;
		return valid;
	}

	/** Reads and applies one page; resolves to the answer with the changes applied. */
	async read(limit) {
		const answer = await this.fetchPage(limit);
		return { ...answer, changes: await this.apply(answer.changes, answer.cursor) };
	}

	/**
	 * Reads pages of limit (default the relay's) until `more` is false;
	 * resolves to every change applied. A rejected read leaves the cursor
	 * after the last page applied, so calling again continues from there.
	 */
	async catchUp(limit) {
		const seen = [];
		for (;;) {
			const answer = await this.read(limit);
			seen.push(...answer.changes);
			if (!answer.more)
				return seen;
		}
	}

	/** Drops the cursor: the next read is the whole set (after incremental_reset). */
	startOver() {
		this.cursor = undefined;
	}
}
