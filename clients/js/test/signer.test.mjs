// Signers (issue 36, item 4): a signer that declines the NIP-42 challenge
// (a browser extension's "deny") or a NIP-98 token is an `error` event and
// the status `unauthorized`, never an unhandled rejection; view.retry()
// asks again. A fake WebSocket plays the relay's side of the resumable sync.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { finalizeEvent, getPublicKey } from 'nostr-tools/pure';

import { ArtifactView, CombClient } from '../index.js';

const SK = new Uint8Array(32).fill(0x22);

// A signer that declines everything while `allow` is false.
function declining() {
	const signer = {
		allow: false,
		getPublicKey: () => getPublicKey(SK),
		signEvent: async (t) => {
			if (!signer.allow)
				throw new Error('user denied');
			return finalizeEvent(t, SK);
		},
	};
	return signer;
}

// A WebSocket that challenges, accepts any AUTH, and answers a REQ with EOSE.
class FakeSocket {
	static opened = 0;
	constructor(url) {
		this.url = url;
		this.readyState = 1;
		FakeSocket.opened++;
		setTimeout(() => this.deliver(['AUTH', 'challenge']), 1);
	}

	deliver(msg) {
		if (this.readyState === 1)
			this.onmessage?.({ data: JSON.stringify(msg) });
	}

	send(text) {
		const msg = JSON.parse(text);
		if (msg[0] === 'AUTH')
			setTimeout(() => this.deliver(['OK', msg[1].id, true, '']), 1);
		else if (msg[0] === 'REQ')
			setTimeout(() => {
				this.deliver(['CHANGES', msg[1], { changes: [], cursor: 'k1' }]);
				this.deliver(['EOSE', msg[1]]);
			}, 1);
	}

	close() {
		this.readyState = 3;
	}
}

const info = { artifacts: { sync: { modes: ['changes'] } } };

function until(fn, what, ms = 3000) {
	return new Promise((resolve, reject) => {
		const t0 = Date.now();
		const tick = () => {
			if (fn())
				resolve();
			else if (Date.now() - t0 > ms)
				reject(new Error(`${what}: not reached`));
			else
				setTimeout(tick, 5);
		};
		tick();
	});
}

test('a declined NIP-42 challenge: status unauthorized and an error event, no unhandled rejection; retry() recovers', async () => {
	const unhandled = [];
	const onUnhandled = (err) => unhandled.push(err);
	process.on('unhandledRejection', onUnhandled);
	const signer = declining();
	const fetch = async () => new Response(JSON.stringify(info), { status: 200 });
	const c = new CombClient({ url: 'http://relay.test', signer, fetch, WebSocket: FakeSocket });
	c.WebSocket = FakeSocket;
	const v = new ArtifactView(c);
	const errors = [];
	const statuses = [];
	v.on('error', (e) => errors.push(e));
	v.on('status', (s) => statuses.push(s));
	try {
		await until(() => v.status === 'unauthorized', 'unauthorized');
		assert.equal(errors.length, 1);
		assert.equal(errors[0].code, 'unauthorized');
		assert.match(errors[0].message, /^unauthorized: the signer declined: user denied/);
		const sockets = FakeSocket.opened;
		// it does not ask again by itself
		await new Promise((r) => setTimeout(r, 100));
		assert.equal(FakeSocket.opened, sockets);
		signer.allow = true;
		v.retry();
		await v.ready;
		await until(() => v.status === 'live', 'live');
		assert.equal(await v.store.cursor(), 'k1');
		assert.deepEqual(unhandled, []);
		assert.ok(statuses.indexOf('unauthorized') < statuses.lastIndexOf('live'));
	} finally {
		await v.close();
		process.off('unhandledRejection', onUnhandled);
	}
});

test('a declined NIP-98 token: reads wait in status unauthorized; writes reject with code unauthorized', async () => {
	const signer = declining();
	const fetch = async (url, init = {}) => new Response(JSON.stringify(init.method ? { changes: [], cursor: 'k', more: false } : { artifacts: {} }), { status: 200 });
	const c = new CombClient({ url: 'http://relay.test', signer, fetch });
	c.WebSocket = null;
	const v = new ArtifactView(c, { pollInterval: 60000 });
	const errors = [];
	v.on('error', (e) => errors.push(e.code));
	try {
		await until(() => v.status === 'unauthorized', 'unauthorized');
		assert.deepEqual(errors, ['unauthorized']);
		await assert.rejects(c.createArtifact({ h: 'x', type: 't', title: 'a' }), (e) => e.code === 'unauthorized');
		signer.allow = true;
		v.retry();
		await v.ready;
	} finally {
		await v.close();
	}
});
