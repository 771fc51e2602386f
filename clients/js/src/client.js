// CombClient: one relay, one identity. HTTP requests carry a fresh NIP-98
// token each (with a random nonce: tokens are single use), WebSockets
// answer the relay's NIP-42 challenge, and artifact writes resolve with the
// accepted event or reject with the relay's exact message.

import { makeAuthEvent } from 'nostr-tools/nip42';
import { hashPayload } from 'nostr-tools/nip98';
import { finalizeEvent, getPublicKey } from 'nostr-tools/pure';

import { CombError, errorFromAnswer } from './errors.js';
import { IncrementalReader } from './reader.js';
import { REVISION_KIND, fieldsOf, revision } from './revisions.js';
import { tagValue } from './tags.js';
import { IndexedDBStore } from './stores.js';
import { TabView, tabsSupported } from './tabs.js';
import { ArtifactView } from './view.js';

export { CombError };

function hexToBytes(hex) {
	if (typeof hex !== 'string' || !/^[0-9a-fA-F]{64}$/.test(hex))
		throw new TypeError('secretKey must be 32 bytes or 64 hex characters');
	const out = new Uint8Array(32);
	for (let i = 0; i < 32; i++)
		out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
	return out;
}

function base64Utf8(text) {
	const bytes = new TextEncoder().encode(text);
	let bin = '';
	for (const b of bytes)
		bin += String.fromCharCode(b);
	return btoa(bin);
}

function randomHex(n) {
	const b = crypto.getRandomValues(new Uint8Array(n));
	return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

const now = () => Math.floor(Date.now() / 1000);

// The http(s) origin of a relay URL; throws TypeError for other schemes.
function relayOrigin(url) {
	const u = new URL(url);
	if (u.protocol !== 'http:' && u.protocol !== 'https:')
		throw new TypeError('url must be http:// or https://');
	return `${u.protocol}//${u.host}`;
}

export class CombClient {
	/**
	 * options: url (http:// or https:// of the relay), or urls (several
	 * nodes of one relay cluster: requests go to one of them, node (an
	 * index, default 0) at first, and move to the next after a request
	 * that got no answer or a 5xx one; see failOver), and either
	 * secretKey (64 hex characters or 32 bytes) or signer
	 * ({getPublicKey(), signEvent(template)}, sync or async, as NIP-07's
	 * window.nostr); WebSocket: a WebSocket class for platforms without a
	 * global one (Node 20: the `ws` package's); fetch: a fetch function
	 * (default the global one); timeout: milliseconds after which an HTTP
	 * request counts as unanswered (default none).
	 */
	constructor(options = {}) {
		const urls = options.urls ?? (options.url ? [options.url] : []);
		if (!urls.length)
			throw new TypeError('url is required');
		this.urls = urls.map(relayOrigin);
		this.node = (options.node ?? 0) % this.urls.length;
		if (options.signer) {
			this.signer = options.signer;
		} else if (options.secretKey) {
			const sk = options.secretKey instanceof Uint8Array ? options.secretKey : hexToBytes(options.secretKey);
			this.signer = {
				getPublicKey: () => getPublicKey(sk),
				signEvent: (template) => finalizeEvent(template, sk),
			};
		} else {
			throw new TypeError('secretKey or signer is required');
		}
		this.WebSocket = globalThis.WebSocket ?? options.WebSocket ?? null;
		this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
		this.timeout = options.timeout ?? null;
		this.infoPromise = null;
	}

	/** The relay node requests go to now (its http(s) origin). */
	get url() {
		return this.urls[this.node];
	}

	/** The WebSocket address of that node. */
	get wsUrl() {
		return this.url.replace(/^http/, 'ws');
	}

	/**
	 * Moves to the next of the client's urls (a no-op with one): later
	 * requests and sockets go there. Requests call it themselves after a
	 * missing or 5xx answer; a socket's owner calls it when the socket
	 * drops. Returns the new url.
	 */
	failOver() {
		this.node = (this.node + 1) % this.urls.length;
		return this.url;
	}

	/** The signer's public key (hex). */
	async getPublicKey() {
		return this.signer.getPublicKey();
	}

	/**
	 * Signs an event template (created_at defaults to now). A signer that
	 * declines or fails (a NIP-07 extension's "deny") rejects with a
	 * CombError of code `unauthorized`.
	 */
	async sign(template) {
		const ev = await this.signWith({ created_at: now(), tags: [], content: '', ...template });
		const { id, pubkey, created_at, kind, tags, content, sig } = ev;
		return { id, pubkey, created_at, kind, tags, content, sig };
	}

	/** The relay's NIP-11 document (fetched once; refetched after a failure). */
	info() {
		if (!this.infoPromise) {
			this.infoPromise = (async () => {
				let res;
				try {
					res = await this.fetch(`${this.url}/`, { headers: { accept: 'application/nostr+json' } });
				} catch (err) {
					throw new CombError(`network: ${err.message}`, { code: 'network', cause: err });
				}
				const text = await res.text();
				if (res.status !== 200)
					throw errorFromAnswer(res.status, text, res.headers);
				return JSON.parse(text);
			})();
			this.infoPromise.catch(() => {
				this.infoPromise = null;
			});
		}
		return this.infoPromise;
	}

	/** A NIP-98 Authorization header value for one request. */
	async authorization(url, method, body) {
		const tags = [['u', url], ['method', method], ['payload', hashPayload(body)],
			['nonce', randomHex(8)]];
		const ev = await this.sign({ kind: 27235, tags });
		return `Nostr ${base64Utf8(JSON.stringify(ev))}`;
	}

	/**
	 * POSTs body (sent as JSON) to path with NIP-98. Resolves to
	 * {status, body (parsed or null), text, headers}; rejects with a
	 * CombError of code `network` when no answer came. Either way, and
	 * after a 5xx answer, later requests go to the next of the urls.
	 */
	async post(path, body) {
		const url = `${this.url}${path}`;
		const text = JSON.stringify(body);
		let res, answer;
		// Up to two more attempts after a network failure (kept-alive
		// connections the relay had just closed: the relay ends idle ones
		// after half a second, and a client may hold several), none after
		// the timeout: every request here may be repeated, an event by
		// its id, a read as it is; the token is new each time.
		for (let attempt = 0; ; attempt++) {
			const authorization = await this.authorization(url, 'POST', body);
			try {
				res = await this.fetch(url, {
					method: 'POST', body: text,
					headers: { authorization, 'content-type': 'application/json' },
					...(this.timeout ? { signal: AbortSignal.timeout(this.timeout) } : {}),
				});
				answer = await res.text();
				break;
			} catch (err) {
				if (attempt >= 2 || err?.name === 'TimeoutError') {
					this.failOver();
					throw new CombError(`network: ${err.message}`, { code: 'network', cause: err });
				}
			}
		}
		if (res.status >= 500)
			this.failOver();
		let parsed = null;
		try {
			parsed = JSON.parse(answer);
		} catch {
			// not JSON: the caller reports the text
		}
		return { status: res.status, body: parsed, text: answer, headers: res.headers };
	}

	/**
	 * POST /query with one filter; resolves to the answer (an array of
	 * events, or an incremental answer object) or rejects with CombError.
	 */
	async query(filter) {
		const r = await this.post('/query', [filter]);
		if (r.status !== 200 || r.body === null)
			throw errorFromAnswer(r.status, r.text, r.headers);
		return r.body;
	}

	/** The current revision of artifact d (its delete revision when deleted), or null. */
	async head(d) {
		const [ev] = await this.query({ artifact: 'head', '#d': [d] });
		return ev ?? null;
	}

	/** Signs and publishes an event; resolves to it once accepted. */
	async publish(template) {
		return this.submit(await this.sign(template));
	}

	/**
	 * Publishes an event signed already; resolves to it once accepted.
	 * Sending an accepted event again is accepted again, so a lost answer
	 * is harmless. Rejects with a CombError with the relay's message and
	 * the event; for `conflict: artifact head changed` its head is the
	 * current revision (null when unknown).
	 */
	async submit(event) {
		const r = await this.post('/events', event);
		if (r.status === 200 && r.body?.accepted === true)
			return event;
		const message = r.body?.message ?? r.body?.error ?? r.text;
		const err = errorFromAnswer(r.status, r.text, r.headers, message);
		err.event = event;
		if (message === 'conflict: artifact head changed')
			err.head = await this.head(tagValue(event, 'd')).catch(() => null);
		else if (message === 'conflict: artifact head unavailable')
			err.head = null;
		throw err;
	}

	/**
	 * Creates an artifact. spec: h (channel), type, title, content, tags
	 * (client tags), d (generated when absent), root.
	 */
	createArtifact(spec) {
		const d = spec.d ?? crypto.randomUUID();
		return this.publish(revision({
			d, h: spec.h, type: spec.type, op: 'create', root: spec.root,
			title: spec.title, content: spec.content ?? '', tags: spec.tags ?? [],
		}));
	}

	/**
	 * A new revision of current (the revision the caller holds, sent as
	 * prev). changes: title, content, root, and tags: an array replaces the
	 * client tags, an object sets single-valued tags by name (null drops
	 * one). On `conflict: artifact head changed` the error's head is the
	 * newer revision, to merge and retry.
	 */
	updateArtifact(current, changes = {}) {
		return this.publish(revision({
			...fieldsOf(current, changes), op: 'update', prev: current.id,
		}));
	}

	/** Moves current to channel toH (the relay stores a `moved` marker in the old one). */
	moveArtifact(current, toH, changes = {}) {
		return this.publish(revision({
			...fieldsOf(current, changes), h: toH, root: changes.root, op: 'move', prev: current.id,
		}));
	}

	/** Deletes the artifact whose current revision is current. */
	deleteArtifact(current) {
		return this.publish(revision({
			d: tagValue(current, 'd'), h: tagValue(current, 'h'), type: tagValue(current, 'type'),
			op: 'delete', prev: current.id, content: '', tags: [],
		}));
	}

	/**
	 * Restores a deleted artifact. current is its delete revision, or any
	 * earlier revision the caller kept; title, content and client tags
	 * come from the last revision before the deletion unless changes says
	 * otherwise.
	 */
	async restoreArtifact(current, changes = {}) {
		const d = tagValue(current, 'd');
		let head = current;
		if (tagValue(current, 'op') !== 'delete')
			head = (await this.head(d)) ?? current;
		let base = current;
		if (tagValue(base, 'op') === 'delete') {
			const history = await this.query({ artifact: 'history', '#d': [d] });
			base = history.filter((e) => e.kind === REVISION_KIND && tagValue(e, 'op') !== 'delete').pop() ?? current;
		}
		return this.publish(revision({
			...fieldsOf(base, changes), h: tagValue(head, 'h'), op: 'restore', prev: head.id,
		}));
	}

	/**
	 * A live, exact local copy of the current artifacts of some channels
	 * (see ArtifactView): options channels, types, store, pollInterval,
	 * pageSize, resumable, merge, onViolation, and tabs: a name; in a
	 * browser with Web Locks and BroadcastChannel the tabs that open a
	 * view of that name share one connection and the IndexedDB store of
	 * that name (see TabView); elsewhere the view keeps to that store
	 * when IndexedDB exists.
	 */
	artifacts(options = {}) {
		if (options.tabs) {
			if (tabsSupported())
				return new TabView(this, { ...options, name: options.tabs });
			if (globalThis.indexedDB)
				return new ArtifactView(this, { ...options, store: new IndexedDBStore(options.tabs) });
		}
		return new ArtifactView(this, options);
	}

	/**
	 * Incremental reads of one scope, applied to a store (see
	 * IncrementalReader): options channels, types, store, cursor,
	 * onViolation, onPage.
	 */
	incremental(options = {}) {
		return new IncrementalReader(this, options);
	}

	/** Opens a WebSocket to the node requests go to now (answer its AUTH
	 * with authEvent); see ArtifactView. */
	openSocket() {
		if (!this.WebSocket)
			throw new CombError('network: no WebSocket implementation', { code: 'network' });
		return new this.WebSocket(this.wsUrl);
	}

	/** The NIP-42 answer to challenge, for a socket open to socketUrl
	 * (default the node requests go to now); rejects with code
	 * `unauthorized` when the signer declines. */
	authEvent(challenge, socketUrl = this.wsUrl) {
		return this.signWith(makeAuthEvent(socketUrl, challenge));
	}

	// The signer's signature of template; its refusal or failure as a
	// CombError of code `unauthorized`.
	async signWith(template) {
		try {
			return await this.signer.signEvent(template);
		} catch (err) {
			throw new CombError(`unauthorized: the signer declined: ${err?.message ?? String(err)}`,
				{ code: 'unauthorized', cause: err });
		}
	}
}
