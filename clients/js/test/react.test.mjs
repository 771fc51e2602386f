// comb-client/react without React: a stand-in useSyncExternalStore that
// subscribes and reads snapshots as React does. The snapshot is the same
// object until the view changes, and holds pending writes.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ArtifactView, CombClient, tagValue } from '../index.js';
import { artifactStore, bindUseArtifacts } from '../react.js';

const H = '00000000-0000-4000-8000-00000000000c';

test('useArtifacts gives a stable snapshot that follows the view, pending writes included', async () => {
	const fetch = async (url, init = {}) => {
		if (!init.method)
			return new Response(JSON.stringify({ artifacts: {} }), { status: 200 });
		if (new URL(url).pathname === '/events')
			throw new TypeError('fetch failed');   // offline: writes stay pending
		return new Response(JSON.stringify({ changes: [], cursor: 'k', more: false }), { status: 200 });
	};
	const c = new CombClient({ url: 'http://relay.test', secretKey: '55'.repeat(32), fetch });
	c.WebSocket = null;
	const view = new ArtifactView(c, { channels: [H], pollInterval: 60000 });
	let notified = 0;
	const fakeUseSyncExternalStore = (subscribe, getSnapshot) => {
		fakeUseSyncExternalStore.unsubscribe ??= subscribe(() => notified++);
		return getSnapshot();
	};
	const useArtifacts = bindUseArtifacts(fakeUseSyncExternalStore);
	try {
		await view.ready;
		const first = useArtifacts(view);
		assert.equal(useArtifacts(view), first, 'the same snapshot while nothing changed');
		assert.deepEqual(first.artifacts, []);
		assert.equal(first.pending, 0);
		const ev = await view.create({ h: H, type: 'demo.task', title: 'from a hook' });
		assert.ok(notified > 0);
		const second = useArtifacts(view);
		assert.notEqual(second, first);
		assert.equal(second.pending, 1);
		assert.deepEqual(second.artifacts.map((e) => [e.id, tagValue(e, 'title'), e.pending]), [[ev.id, 'from a hook', true]]);
		assert.equal(second.status, view.status);
		assert.equal(artifactStore(view), artifactStore(view));
		fakeUseSyncExternalStore.unsubscribe();
		const seen = notified;
		await view.update(tagValue(ev, 'd'), { title: 'again' });
		assert.equal(notified, seen, 'no notice after unsubscribing');
		assert.equal(tagValue(useArtifacts(view).artifacts[0], 'title'), 'again');
	} finally {
		await view.close();
	}
});
