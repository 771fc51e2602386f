// comb-client/react: a view as a React external store. It does not import
// React (comb-client has no dependency on it): hand it React's
// useSyncExternalStore once, and use the hook it returns.
//
//   import { useSyncExternalStore } from 'react';
//   import { bindUseArtifacts } from 'comb-client/react';
//   const useArtifacts = bindUseArtifacts(useSyncExternalStore);
//   function Tasks({ view }) {
//     const { artifacts, status, pending } = useArtifacts(view);
//     ...
//   }

const stores = new WeakMap();

/**
 * The external store of a view (an ArtifactView or a TabView), one per
 * view: subscribe(onChange) (to its 'change', 'pending' and 'status'
 * events; returns the unsubscribe function) and getSnapshot(), which
 * returns the same object until the view changes: {artifacts (view.all(),
 * pending writes included, marked `pending: true`), status, pending (the
 * count of writes not yet accepted)}.
 */
export function artifactStore(view) {
	let store = stores.get(view);
	if (store)
		return store;
	let snapshot = null;
	// always listening, so a snapshot is never stale, subscribed or not
	const invalidate = () => {
		snapshot = null;
	};
	view.on('change', invalidate).on('pending', invalidate).on('status', invalidate);
	store = {
		subscribe(onChange) {
			view.on('change', onChange).on('pending', onChange).on('status', onChange);
			return () => {
				view.off('change', onChange).off('pending', onChange).off('status', onChange);
			};
		},
		getSnapshot() {
			snapshot ??= { artifacts: view.all(), status: view.status, pending: view.pending };
			return snapshot;
		},
	};
	stores.set(view, store);
	return store;
}

/**
 * The hook useArtifacts(view) -> {artifacts, status, pending} (see
 * artifactStore), made with React's useSyncExternalStore.
 */
export function bindUseArtifacts(useSyncExternalStore) {
	return function useArtifacts(view) {
		const store = artifactStore(view);
		return useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
	};
}
