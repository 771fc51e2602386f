import type { NostrEvent, OutboxEntry, Store, StoreChange, StoreContents } from './index.js';

/** A store in one JSON file (Node only). */
export class JsonFileStore implements Store {
  constructor(path: string);
  load(): Promise<StoreContents>;
  get(d: string): Promise<NostrEvent | undefined>;
  write(changes: StoreChange[], cursor?: string): Promise<void>;
  saveOutbox(entries: OutboxEntry[]): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}
