// A typed use of comb-client's declarations: `tsc -p clients/js` checks
// it against index.d.ts, file-store.d.ts and react.d.ts (see
// test/types.test.mjs). Never run.

import {
  ArtifactView, CombClient, CombError, IndexedDBStore, MemoryStore, TabView, clientTags, tabsSupported, tagValue,
} from 'comb-client';
import type { Change, NostrEvent, OutboxEntry, RelayInfo, ShownEvent, View, ViewStatus } from 'comb-client';
import { JsonFileStore } from 'comb-client/file-store';
import { artifactStore, bindUseArtifacts } from 'comb-client/react';
import type { ArtifactsSnapshot } from 'comb-client/react';

declare const useSyncExternalStore: <T>(subscribe: (onChange: () => void) => () => void, getSnapshot: () => T) => T;

export async function usage(): Promise<void> {
  const client = new CombClient({ url: 'http://127.0.0.1:7447', secretKey: '11'.repeat(32) });
  const info: RelayInfo = await client.info();
  const modes: string[] | undefined = info.artifacts?.sync?.modes;
  const answer = await client.query({ artifact: 'incremental' });
  const events: NostrEvent[] = Array.isArray(answer) ? answer : answer.changes.flatMap((c) => (c.op === 'upsert' ? [c.event] : []));
  const task = await client.createArtifact({ h: 'h', type: 'demo.task', title: 'a', tags: [['status', 'open']] });
  await client.updateArtifact(task, { tags: { status: 'done' } });
  await client.submit(task);

  const view = client.artifacts({
    channels: ['h'], types: ['demo.task'], store: new MemoryStore(), pageSize: 50, tabs: 'name',
    merge: (entry: OutboxEntry, head: NostrEvent | null) => (head ? entry.changes : null),
  });
  const status: ViewStatus = view.status;
  const pending: number = view.pending;
  view.on('change', (change: Change) => {
    for (const c of change.changes) {
      if (c.op === 'upsert')
        console.log(c.event.id);
      else
        console.log(c.d, c.reason);
    }
  });
  view.on('pending', (n: number) => console.log(n));
  view.on('error', (err) => console.log(err.code, 'entry' in err ? err.entry.op : null));
  const shown: ShownEvent | undefined = view.get('d');
  const flagged: boolean = shown?.pending === true || view.isPending('d');
  const made: NostrEvent = await view.create({ h: 'h', type: 'demo.task', title: 'b' });
  await view.update(tagValue(made, 'd') ?? '', { title: 'c' });
  await view.move('d', 'h2');
  await view.delete('d');
  view.retry();
  if (view instanceof TabView)
    console.log(view.role, view.stats?.connects);
  else if (view instanceof ArtifactView)
    console.log(view.stats.frames);
  const generic: View = view;
  await generic.ready;

  const useArtifacts = bindUseArtifacts(useSyncExternalStore);
  const snap: ArtifactsSnapshot = useArtifacts(generic);
  console.log(snap.artifacts.length, snap.status, snap.pending, artifactStore(generic).getSnapshot() === snap);

  const file = new JsonFileStore('/tmp/x.json');
  const { events: stored, cursor, outbox } = await file.load();
  await file.write([{ op: 'remove', d: 'd' }, { op: 'upsert', event: task }], cursor);
  await file.saveOutbox(outbox);
  const idb: IndexedDBStore | null = tabsSupported() ? new IndexedDBStore('db') : null;
  const err = new CombError('conflict: artifact head changed');
  console.log(status, pending, flagged, modes, events.length, stored.length, idb, err.head, clientTags(task));
  await view.close();
}
