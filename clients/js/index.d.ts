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
   * `rate-limited`, `error`, `incremental_busy`, ...), `resync`, `network`, or
   * `unauthorized` (the signer declined). */
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

/** A change as the view applied it, in order. */
export type AppliedChange =
  | { op: 'upsert'; event: NostrEvent }
  | { op: 'remove'; d: string; h?: string; reason: Removal['reason'] };

/** The 'change' event: changes in the order read and applied, and for
 * convenience the upserts and removals among them. */
export interface Change {
  changes: AppliedChange[];
  upserts: NostrEvent[];
  removals: Removal[];
}

export type ViewStatus = 'connecting' | 'live' | 'catching-up' | 'offline' | 'unauthorized';

/** A change as a store applies it. */
export type StoreChange = { op: 'upsert'; event: NostrEvent } | { op: 'remove'; d: string };

/** A write kept in the outbox until the relay accepts it (plain JSON). */
export interface OutboxEntry {
  op: 'create' | 'update' | 'move' | 'delete';
  d: string;
  /** The signed revision to send. */
  event: NostrEvent;
  /** What the app asked for (a create: its whole spec). */
  changes: Changes & Partial<CreateSpec>;
  /** A move's destination channel. */
  toH?: string;
  /** How often it was rebased after a conflict. */
  rebases: number;
}

/** A revision as a view shows it: `pending` while its write is not accepted. */
export type ShownEvent = NostrEvent & { pending?: true };

export interface StoreContents {
  events: NostrEvent[];
  cursor?: string;
  outbox: OutboxEntry[];
}

export interface Store {
  load(): Promise<StoreContents>;
  get(d: string): Promise<NostrEvent | undefined>;
  /** Applies changes in order, then the cursor, as one transaction. */
  write(changes: StoreChange[], cursor?: string): Promise<void>;
  /** Replaces the stored outbox. */
  saveOutbox(entries: OutboxEntry[]): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}

export class MemoryStore implements Store {
  constructor();
  load(): Promise<StoreContents>;
  get(d: string): Promise<NostrEvent | undefined>;
  write(changes: StoreChange[], cursor?: string): Promise<void>;
  saveOutbox(entries: OutboxEntry[]): Promise<void>;
  cursor(): Promise<string | undefined>;
  close(): Promise<void>;
}

export class IndexedDBStore implements Store {
  constructor(name: string, indexedDB?: IDBFactory);
  load(): Promise<StoreContents>;
  get(d: string): Promise<NostrEvent | undefined>;
  write(changes: StoreChange[], cursor?: string): Promise<void>;
  saveOutbox(entries: OutboxEntry[]): Promise<void>;
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
  /** The limit of each incremental read over HTTP (default the relay's). */
  pageSize?: number;
  /** Told of every answer, frame or change that breaks the protocol; the
   * view skips them either way. */
  onViolation?: (message: string) => void;
  /** After `conflict: artifact head changed`: the changes to make on head
   * instead of entry.changes, or null to give the write up (default: the
   * same changes). */
  merge?: (entry: OutboxEntry, head: NostrEvent | null) => Changes | null;
  /** A name: in a browser with Web Locks and BroadcastChannel the tabs that
   * open a view of that name share one connection and the IndexedDB store
   * of that name (the view is a TabView); elsewhere the view keeps to that
   * IndexedDB store when there is one. */
  tabs?: string;
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
  /** Stores the valid ones of changes in order with the cursor (when
   * given) in one store write, then moves the cursor there; resolves to
   * the changes applied. */
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

/** A write refused for good and rolled back (an 'error' event). */
export interface RolledBack extends CombError {
  entry: OutboxEntry;
}

/** What ArtifactView and TabView have in common. */
export interface View {
  /** Resolves after the first complete read; rejects when the view cannot work. */
  readonly ready: Promise<View>;
  readonly status: ViewStatus;
  /** How many writes are not accepted yet. */
  readonly pending: number;
  /** The revision of d as shown: a pending write's (marked), else the one read. */
  get(d: string): ShownEvent | undefined;
  all(): ShownEvent[];
  isPending(d: string): boolean;
  on(event: 'change', fn: (change: Change) => void): this;
  on(event: 'status', fn: (status: ViewStatus) => void): this;
  on(event: 'pending', fn: (count: number) => void): this;
  on(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  off(event: 'change', fn: (change: Change) => void): this;
  off(event: 'status', fn: (status: ViewStatus) => void): this;
  off(event: 'pending', fn: (count: number) => void): this;
  off(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  /** Writes through the outbox: each resolves to the signed event once it
   * is stored (shown at once as pending); rejects when it cannot be made. */
  create(spec: CreateSpec): Promise<NostrEvent>;
  update(d: string, changes?: Changes): Promise<NostrEvent>;
  move(d: string, toH: string, changes?: Changes): Promise<NostrEvent>;
  delete(d: string): Promise<NostrEvent>;
  /** After status `unauthorized`: asks the signer again. */
  retry(): void;
  close(): Promise<void>;
}

export class ArtifactView implements View {
  constructor(client: CombClient, options?: ViewOptions);
  readonly ready: Promise<ArtifactView>;
  readonly status: ViewStatus;
  readonly pending: number;
  readonly stats: ViewStats;
  get(d: string): ShownEvent | undefined;
  all(): ShownEvent[];
  isPending(d: string): boolean;
  on(event: 'change', fn: (change: Change) => void): this;
  on(event: 'status', fn: (status: ViewStatus) => void): this;
  on(event: 'pending', fn: (count: number) => void): this;
  on(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  off(event: 'change', fn: (change: Change) => void): this;
  off(event: 'status', fn: (status: ViewStatus) => void): this;
  off(event: 'pending', fn: (count: number) => void): this;
  off(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  create(spec: CreateSpec): Promise<NostrEvent>;
  update(d: string, changes?: Changes): Promise<NostrEvent>;
  move(d: string, toH: string, changes?: Changes): Promise<NostrEvent>;
  delete(d: string): Promise<NostrEvent>;
  retry(): void;
  close(): Promise<void>;
}

/** A view shared by the tabs of one browser (see ViewOptions.tabs). */
export class TabView implements View {
  constructor(client: CombClient, options: ViewOptions & { name: string });
  /** 'leader': this tab holds the connection and writes the store. */
  readonly role: 'leader' | 'follower';
  readonly ready: Promise<TabView>;
  readonly status: ViewStatus;
  readonly pending: number;
  /** The leading tab's view's stats; null in a follower. */
  readonly stats: ViewStats | null;
  get(d: string): ShownEvent | undefined;
  all(): ShownEvent[];
  isPending(d: string): boolean;
  on(event: 'change', fn: (change: Change) => void): this;
  on(event: 'status', fn: (status: ViewStatus) => void): this;
  on(event: 'pending', fn: (count: number) => void): this;
  on(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  off(event: 'change', fn: (change: Change) => void): this;
  off(event: 'status', fn: (status: ViewStatus) => void): this;
  off(event: 'pending', fn: (count: number) => void): this;
  off(event: 'error', fn: (error: CombError | RolledBack) => void): this;
  create(spec: CreateSpec): Promise<NostrEvent>;
  update(d: string, changes?: Changes): Promise<NostrEvent>;
  move(d: string, toH: string, changes?: Changes): Promise<NostrEvent>;
  delete(d: string): Promise<NostrEvent>;
  retry(): void;
  close(): Promise<void>;
}

/** Whether this platform can share a view between tabs. */
export function tabsSupported(): boolean;

/** The relay's NIP-11 document, the parts comb-client reads. */
export interface RelayInfo {
  name?: string;
  supported_nips?: number[];
  artifacts?: {
    sync?: { modes?: string[]; max_events?: number };
    incremental?: { max_ids?: number };
    [key: string]: unknown;
  };
  [key: string]: unknown;
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
  /** Rejects with code `unauthorized` when the signer declines. */
  sign(template: EventTemplate): Promise<NostrEvent>;
  /** The relay's NIP-11 document. */
  info(): Promise<RelayInfo>;
  /** POST /query with one filter: an array of events, or an incremental answer. */
  query(filter: Record<string, unknown>): Promise<NostrEvent[] | IncrementalAnswer>;
  /** The current revision of d (its delete revision when deleted), or null. */
  head(d: string): Promise<NostrEvent | null>;
  /** Signs and publishes any event; resolves once accepted. */
  publish(template: EventTemplate): Promise<NostrEvent>;
  /** Publishes an event signed already (again, after a lost answer, is fine). */
  submit(event: NostrEvent): Promise<NostrEvent>;
  createArtifact(spec: CreateSpec): Promise<NostrEvent>;
  updateArtifact(current: NostrEvent, changes?: Changes): Promise<NostrEvent>;
  moveArtifact(current: NostrEvent, toH: string, changes?: Changes): Promise<NostrEvent>;
  deleteArtifact(current: NostrEvent): Promise<NostrEvent>;
  restoreArtifact(current: NostrEvent, changes?: Changes): Promise<NostrEvent>;
  /** A view; a TabView when options.tabs is set and the browser can share it. */
  artifacts(options?: ViewOptions): ArtifactView | TabView;
  /** Incremental reads of one scope (see IncrementalReader). */
  incremental(options?: ReaderOptions): IncrementalReader;
  /** A WebSocket to `wsUrl`; answer its AUTH challenge with authEvent. */
  openSocket(): WebSocket;
  /** The signed NIP-42 answer to challenge for a socket open to socketUrl
   * (default `wsUrl`). */
  authEvent(challenge: string, socketUrl?: string): Promise<NostrEvent>;
}

export function tagValue(event: NostrEvent, name: string): string | undefined;
export function clientTags(event: NostrEvent): string[][];
