import type { ShownEvent, View, ViewStatus } from './index.js';

/** What useArtifacts returns; the same object until the view changes. */
export interface ArtifactsSnapshot {
  artifacts: ShownEvent[];
  status: ViewStatus;
  pending: number;
}

/** A view's external store (one per view). */
export interface ArtifactStore {
  subscribe(onChange: () => void): () => void;
  getSnapshot(): ArtifactsSnapshot;
}

export function artifactStore(view: View): ArtifactStore;

/** React's useSyncExternalStore, as the binding uses it. */
export type UseSyncExternalStore = <T>(subscribe: (onChange: () => void) => () => void,
  getSnapshot: () => T, getServerSnapshot?: () => T) => T;

/** Makes the hook useArtifacts(view) from React's useSyncExternalStore. */
export function bindUseArtifacts(useSyncExternalStore: UseSyncExternalStore): (view: View) => ArtifactsSnapshot;
