// Type declarations of comb-client.

export interface NostrEvent {
  id: string;
  pubkey: string;
  created_at: number;
  kind: number;
  tags: string[][];
  content: string;
  sig: string;
}

export interface EventTemplate {
  kind: number;
  created_at?: number;
  tags?: string[][];
  content?: string;
}

/** A NIP-07 style signer (window.nostr works as is). */
export interface Signer {
  getPublicKey(): string | Promise<string>;
  signEvent(template: EventTemplate & { created_at: number }): NostrEvent | Promise<NostrEvent>;
}

export interface ClientOptions {
  /** http:// or https:// URL of the relay; its host selects the community. */
  url: string;
  /** 64 hex characters or 32 bytes; or give `signer`. */
  secretKey?: string | Uint8Array;
  signer?: Signer;
  /** A WebSocket class where the platform has none (Node 20: `ws`). */
  WebSocket?: unknown;
  fetch?: typeof fetch;
}

/** A refusal or failure; `message` is the relay's exact message. */
export class CombError extends Error {
  /** The message's prefix (`conflict`, `invalid`, `restricted`, `auth-required`,
   * `rate-limited`, `error`, `incremental_busy`, ...), `resync`, or `network`. */
  code: string;
  /** HTTP status, 0 when there was no HTTP answer. */
  status: number;
  /** Seconds, from the Retry-After header. */
  retryAfter?: number;
  /** The refused event (writes). */
  event?: NostrEvent;
  /** On `conflict: artifact head changed`: the newer current revision (its
   * delete revision when deleted); null when it cannot be read. */
  head?: NostrEvent | null;
}

export interface CreateSpec {
  h: string;
  type: string;
  title: string;
  content?: string;
  /** Client tags, e.g. [['status', 'open']]. */
  tags?: string[][];
  /** Generated (a random UUID) when absent. */
  d?: string;
  root?: string;
}

export interface Changes {
  title?: string;
  content?: string;
  root?: string;
  /** An array replaces the client tags; an object sets tags by name (null drops one). */
  tags?: string[][] | Record<string, string | number | null>;
}

export interface Removal {
  d: string;
  h?: string;
  reason: 'deleted' | 'moved' | 'access' | 'redacted' | 'ttl';
}

export interface Change {
  upserts: NostrEvent[];
  removals: Removal[];
}

export type ViewStatus = 'connecting' | 'live' | 'catching-up' | 'offline';

export interface Store {
  load(): Promise<{ events: NostrEvent[]; cursor?: string }>;
  get(d: string): Promise<NostrEvent | undefined>;
  put(events: NostrEvent[], cursor?: string): Promise<void>;
  delete(ds: string[], cursor?: string): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}

export class MemoryStore implements Store {
  constructor();
  load(): Promise<{ events: NostrEvent[]; cursor?: string }>;
  get(d: string): Promise<NostrEvent | undefined>;
  put(events: NostrEvent[], cursor?: string): Promise<void>;
  delete(ds: string[], cursor?: string): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}

export class IndexedDBStore implements Store {
  constructor(name: string, indexedDB?: unknown);
  load(): Promise<{ events: NostrEvent[]; cursor?: string }>;
  get(d: string): Promise<NostrEvent | undefined>;
  put(events: NostrEvent[], cursor?: string): Promise<void>;
  delete(ds: string[], cursor?: string): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}

export interface ViewOptions {
  /** Channel ids. Without them the view covers every readable channel (and,
   * without a resumable sync, polls). */
  channels?: string[];
  types?: string[];
  store?: Store;
  /** Milliseconds between catch-ups while no sync serves the view (default 5000). */
  pollInterval?: number;
  /** Use the relay's resumable sync when NIP-11 lists it (default true);
   * false keeps to the sync and incremental reads. */
  resumable?: boolean;
}

export interface ViewStats {
  reads: number;
  /** Artifacts received by incremental and known-ID reads and by the
   * catch-up of resumable syncs. */
  fetched: number;
  knownReads: number;
  resets: number;
  snapshots: number;
  /** Frames received on syncs, snapshots included, and items of live
   * CHANGES frames. */
  syncEvents: number;
  resyncs: number;
  connects: number;
  /** Resumable syncs opened (REQ `"artifact":"changes"`). */
  resumes: number;
  /** CHANGES frames received. */
  frames: number;
}

export class ArtifactView {
  /** Resolves after the first complete read; rejects when the view cannot work. */
  readonly ready: Promise<ArtifactView>;
  readonly status: ViewStatus;
  readonly stats: ViewStats;
  get(d: string): NostrEvent | undefined;
  all(): NostrEvent[];
  on(event: 'change', fn: (change: Change) => void): this;
  on(event: 'status', fn: (status: ViewStatus) => void): this;
  on(event: 'error', fn: (error: CombError) => void): this;
  off(event: 'change' | 'status' | 'error', fn: (...args: any[]) => void): this;
  close(): Promise<void>;
}

export class CombClient {
  constructor(options: ClientOptions);
  readonly url: string;
  getPublicKey(): Promise<string>;
  sign(template: EventTemplate): Promise<NostrEvent>;
  /** The relay's NIP-11 document. */
  info(): Promise<any>;
  /** POST /query with one filter: an array of events, or an incremental answer. */
  query(filter: Record<string, unknown>): Promise<any>;
  /** The current revision of d (its delete revision when deleted), or null. */
  head(d: string): Promise<NostrEvent | null>;
  /** Signs and publishes any event; resolves once accepted. */
  publish(template: EventTemplate): Promise<NostrEvent>;
  createArtifact(spec: CreateSpec): Promise<NostrEvent>;
  updateArtifact(current: NostrEvent, changes?: Changes): Promise<NostrEvent>;
  moveArtifact(current: NostrEvent, toH: string, changes?: Changes): Promise<NostrEvent>;
  deleteArtifact(current: NostrEvent): Promise<NostrEvent>;
  restoreArtifact(current: NostrEvent, changes?: Changes): Promise<NostrEvent>;
  artifacts(options?: ViewOptions): ArtifactView;
}

export function tagValue(event: NostrEvent, name: string): string | undefined;
export function clientTags(event: NostrEvent): string[][];
