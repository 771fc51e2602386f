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
  /** http:// or https:// URL of the relay; its host selects the community.
   * Give it or `urls`. */
  url?: string;
  /** Several nodes of one relay cluster: requests go to one of them and move
   * to the next after a request that got no answer or a 5xx one. */
  urls?: string[];
  /** The index in `urls` of the node to start on (default 0). */
  node?: number;
  /** Milliseconds after which an HTTP request counts as unanswered (default none). */
  timeout?: number;
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
  /** Told of every answer, frame or change that breaks the protocol; the
   * view skips them either way. */
  onViolation?: (message: string) => void;
}

/** One change of an incremental answer or CHANGES frame. */
export type IncrementalChange =
  | { op: 'upsert'; event: NostrEvent }
  | { op: 'remove'; d: string; h?: string; reason: Removal['reason'] };

/** An incremental answer (a CHANGES frame has no `more`). */
export interface IncrementalAnswer {
  changes: IncrementalChange[];
  cursor: string;
  more?: boolean;
}

export interface ReaderOptions {
  /** Channel ids; without them every readable channel. */
  channels?: string[];
  types?: string[];
  /** Where pages go (default a MemoryStore). */
  store?: Store;
  /** Where the first read starts (default none: the whole set). */
  cursor?: string;
  /** Told of every answer or change that breaks the protocol (an answer
   * without changes or cursor, a change that is neither an upsert of a
   * kind-45010 revision with a d nor a removal of a d with a known
   * reason); they are skipped either way. */
  onViolation?: (message: string) => void;
  /** Told of every answer read, before it is applied: the node that gave
   * it and the cursor it was read from (null: none). */
  onPage?: (page: { url: string; cursor: string | null; answer: IncrementalAnswer }) => void;
}

/** Incremental reads of one scope, applied to a store (PROTOCOL.md section 8). */
export class IncrementalReader {
  constructor(client: CombClient, options?: ReaderOptions);
  /** Where the next read starts; undefined: the whole set. */
  cursor: string | undefined;
  readonly store: Store;
  /** The scope's filter keys (`#h`, `#type`). */
  readonly scope: Record<string, string[]>;
  /** Reads one page at the cursor without applying it; rejects with the
   * relay's CombError (`incremental_reset`, `incremental_bad_cursor`: call
   * startOver) or `invalid_answer`. */
  fetchPage(limit?: number): Promise<IncrementalAnswer>;
  /** Stores the valid ones of changes, then moves the cursor to cursor
   * (when given); resolves to the changes applied. */
  apply(changes: IncrementalChange[], cursor?: string): Promise<IncrementalChange[]>;
  /** Reads and applies one page. */
  read(limit?: number): Promise<IncrementalAnswer>;
  /** Reads pages until `more` is false; resolves to every change applied. */
  catchUp(limit?: number): Promise<IncrementalChange[]>;
  /** The changes that keep to the protocol; reports the others. */
  validChanges(changes: unknown[]): IncrementalChange[];
  /** Whether answer is an incremental answer (frame: a CHANGES frame's,
   * without `more`); reports it when not. */
  wellFormed(answer: unknown, options?: { frame?: boolean }): boolean;
  /** Drops the cursor: the next read is the whole set. */
  startOver(): void;
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
  /** The node requests go to now. */
  readonly url: string;
  /** Its WebSocket address. */
  readonly wsUrl: string;
  /** Every node, as http(s) origins. */
  readonly urls: string[];
  /** The index of `url` in `urls`. */
  readonly node: number;
  /** Moves to the next of `urls` (a no-op with one); returns the new url. */
  failOver(): string;
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
  /** Incremental reads of one scope (see IncrementalReader). */
  incremental(options?: ReaderOptions): IncrementalReader;
  /** A WebSocket to `wsUrl`; answer its AUTH challenge with authEvent. */
  openSocket(): WebSocket;
  /** The signed NIP-42 answer to challenge for a socket open to socketUrl
   * (default `wsUrl`). */
  authEvent(challenge: string, socketUrl?: string): NostrEvent | Promise<NostrEvent>;
}

export function tagValue(event: NostrEvent, name: string): string | undefined;
export function clientTags(event: NostrEvent): string[][];
