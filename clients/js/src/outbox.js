// Outbox: a view's writes that the relay has not accepted yet (issue 36).
//
// A write (view.create, update, move, remove) is signed at once, kept in
// the view's store, and shown by the view with `pending: true` until the
// relay accepts it. Writes are sent one at a time, in the order made; one
// that fails for the network (or a busy, rate-limited or failing relay) is
// sent again later, the same signed event (the relay accepts an accepted
// revision again, so a lost answer is harmless). On `conflict: artifact
// head changed` the write is rebased on the head the relay names: the
// merge function (default: the same changes) gives the changes to make on
// that head, and the new revision is signed and sent in its place. A write
// refused for good (`restricted:`, `invalid:`, any other 4xx) leaves the
// outbox, and the view tells its `error` listeners, naming it.
//
// An entry (kept as JSON in the store): {op ('create', 'update', 'move',
// 'delete'), d, event (signed), changes (what the app asked for: title,
// content, root, tags; for a create the whole spec), toH (a move's
// destination), rebases (how often it was rebased)}.

import { CombError } from './errors.js';
import { fieldsOf, revision } from './revisions.js';
import { tagValue } from './tags.js';

/** How often one write may be rebased before it is given up. */
export const MAX_REBASES = 5;

// Answers after which the same event is sent again later (a signer that
// declined the request's NIP-98 token is asked again then).
function transient(err) {
	return err.code === 'network' || err.code === 'rate-limited' || err.code === 'error' ||
		err.code === 'auth-required' || err.code === 'unauthorized' || err.status >= 500 || err.status === 429 ||
		err.message === 'conflict: artifact head unavailable';
}

/** The default merge: the same changes, on whatever the head is now. */
export function sameChanges(entry) {
	return entry.changes;
}

// The event template of entry's write made on head (the current revision,
// or null when the artifact does not exist), with changes; null when it
// cannot be made (a change to a deleted or unknown artifact).
function templateOn(entry, head, changes) {
	if (entry.op === 'create')
		return head ? null : revision({ ...createFields(changes), op: 'create' });
	if (!head)
		return null;
	const deleted = tagValue(head, 'op') === 'delete';
	if (entry.op === 'delete')
		return deleted ? null : revision({
			d: entry.d, h: tagValue(head, 'h'), type: tagValue(head, 'type'),
			op: 'delete', prev: head.id, content: '', tags: [],
		});
	if (deleted)
		return null;
	const fields = fieldsOf(head, changes);
	if (entry.op === 'move')
		return revision({ ...fields, h: entry.toH, root: changes.root, op: 'move', prev: head.id });
	return revision({ ...fields, op: 'update', prev: head.id });
}

// The fields of a create from its spec.
function createFields(spec) {
	return {
		d: spec.d, h: spec.h, type: spec.type, root: spec.root,
		title: spec.title, content: spec.content ?? '', tags: spec.tags ?? [],
	};
}

/** Whether revision ev belongs to channels and types (null: any). */
export function inScope(ev, channels, types) {
	return (!channels || channels.includes(tagValue(ev, 'h'))) && (!types || types.includes(tagValue(ev, 'type')));
}

/**
 * The revision of d shown with writes pending: the last entry of d among
 * entries (marked `pending: true`; undefined for a delete or a revision
 * outside the view), else the accepted event of d in acked (a Map) not
 * read back yet, else items.get(d). inScope(ev) says whether a revision
 * belongs in the view.
 */
export function shownRevision(d, items, entries, acked, inScope) {
	for (let i = entries.length - 1; i >= 0; i--) {
		const entry = entries[i];
		if (entry.d === d)
			return entry.op === 'delete' || !inScope(entry.event) ? undefined : { ...entry.event, pending: true };
	}
	const ack = acked.get(d);
	if (ack)
		return tagValue(ack, 'op') === 'delete' || !inScope(ack) ? undefined : ack;
	return items.get(d);
}

/** Every revision shown (see shownRevision). */
export function shownRevisions(items, entries, acked, inScope) {
	const ds = new Set([...items.keys(), ...entries.map((e) => e.d), ...acked.keys()]);
	const out = [];
	for (const d of ds) {
		const ev = shownRevision(d, items, entries, acked, inScope);
		if (ev)
			out.push(ev);
	}
	return out;
}

export class Outbox {
	/**
	 * view: the ArtifactView whose writes these are (its client signs and
	 * sends, its store keeps the entries, its listeners hear of them).
	 * merge(entry, head): the changes to make on head instead of
	 * entry.changes after a conflict, or null to give the write up
	 * (default: the same changes).
	 */
	constructor(view, merge = sameChanges) {
		this.view = view;
		this.merge = merge;
		this.entries = [];
		this.acked = new Map();   // d -> accepted event, shown until the view reads it
		this.sending = false;
		this.attempt = 0;
		this.timer = null;        // the next attempt after a wait
	}

	/** Takes the entries a store kept (at start). */
	restore(entries) {
		this.entries = entries ?? [];
	}

	/** How many writes wait. */
	get size() {
		return this.entries.length;
	}

	/** The pending revision of d shown in place of the view's: the last entry's event, or undefined. */
	last(d) {
		for (let i = this.entries.length - 1; i >= 0; i--) {
			if (this.entries[i].d === d)
				return this.entries[i];
		}
		return undefined;
	}

	/**
	 * Signs entry's write on base (the revision it changes, as shown
	 * now), keeps it, and starts sending. Resolves to the signed event
	 * once stored.
	 */
	async add(entry, base) {
		const template = templateOn(entry, base, entry.changes);
		if (!template)
			throw new CombError(`invalid: cannot ${entry.op} ${entry.d}: ${base ? 'it is deleted' : 'no such artifact here'}`,
				{ code: 'invalid' });
		entry.event = await this.view.client.sign(template);
		entry.rebases = 0;
		this.entries.push(entry);
		await this.save();
		this.view.outboxChanged();
		this.send();
		return entry.event;
	}

	// Stores a copy of the entries (after the view's store calls before it).
	save() {
		const copy = this.entries.map((e) => ({ ...e }));
		return this.view.storeWrite(() => this.view.store.saveOutbox(copy));
	}

	/**
	 * The view applied a change of d: an accepted write of d stops
	 * showing once the view holds it or something newer, or d left.
	 */
	seen(d, removed) {
		const acked = this.acked.get(d);
		if (!acked)
			return;
		const cur = this.view.items.get(d);
		if (removed || cur?.id === acked.id || this.view.superseded.get(d)?.has(acked.id))
			this.acked.delete(d);
	}

	/** Sends now what waits for a retry (the network is back). */
	wake() {
		if (this.timer) {
			clearTimeout(this.timer);
			this.timer = null;
			this.send();
		}
	}

	/** Stops the retries (the view closes). */
	stop() {
		clearTimeout(this.timer);
		this.timer = null;
	}

	/**
	 * Sends the entries in order until none is left or one must wait
	 * (then tries again after a backoff, or on wake()). Never rejects:
	 * what goes wrong goes to the view's error listeners.
	 */
	async send() {
		if (this.sending || this.timer || this.view.closed)
			return;
		this.sending = true;
		try {
			while (this.entries.length && !this.view.closed) {
				const entry = this.entries[0];
				let outcome;
				try {
					await this.view.client.submit(entry.event);
					outcome = 'accepted';
				} catch (err) {
					outcome = await this.refused(entry, err);
				}
				if (this.view.closed)
					return;
				if (outcome === 'wait') {
					this.timer = setTimeout(() => {
						this.timer = null;
						this.send();
					}, this.view.backoff(this.attempt++));
					return;
				}
				this.attempt = 0;
				if (outcome === 'accepted') {
					this.entries.shift();
					this.acked.set(entry.d, entry.event);
					this.seen(entry.d, false);
				}
				await this.save();
				this.view.outboxChanged();
			}
		} finally {
			this.sending = false;
		}
	}

	// What to do with the first entry after err: 'wait' (send it again
	// later), 'rebased' (it was replaced by a write on the head), or
	// 'dropped' (given up: the view's error listeners are told).
	async refused(entry, err) {
		if (err.message?.startsWith('duplicate:'))
			return 'accepted';
		if (!(err instanceof CombError) || transient(err)) {
			this.view.emit('error', err);
			return 'wait';
		}
		if (err.message === 'conflict: artifact head changed' && entry.rebases < MAX_REBASES) {
			let changes = null;
			try {
				changes = this.merge(structuredClone(entry), err.head);
			} catch (mergeErr) {
				this.view.emit('error', mergeErr);
			}
			const template = changes && templateOn(entry, err.head, changes);
			if (template) {
				try {
					entry.event = await this.view.client.sign(template);
				} catch (signErr) {
					this.view.emit('error', signErr);
					return 'wait';
				}
				entry.changes = changes;
				entry.rebases++;
				return 'rebased';
			}
			if (entry.op === 'delete' && err.head && tagValue(err.head, 'op') === 'delete')
				return 'accepted';   // someone deleted it first: what we wanted
		}
		this.entries.shift();
		const refused = new CombError(`${err.message} (${entry.op} of ${entry.d} rolled back)`,
			{ code: err.code, status: err.status, event: entry.event, head: err.head });
		refused.entry = entry;
		this.view.emit('error', refused);
		return 'dropped';
	}
}
