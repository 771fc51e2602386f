import type { NostrEvent, Store } from './index.js';

/** A store in one JSON file (Node only). */
export class JsonFileStore implements Store {
  constructor(path: string);
  load(): Promise<{ events: NostrEvent[]; cursor?: string }>;
  get(d: string): Promise<NostrEvent | undefined>;
  put(events: NostrEvent[], cursor?: string): Promise<void>;
  delete(ds: string[], cursor?: string): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}
