// comb-client: the public entry point (browsers and Node 20). The JSON file
// store is Node-only and lives at 'comb-client/file-store'.
export { CombClient, CombError } from './src/client.js';
export { ArtifactView } from './src/view.js';
export { TabView, tabsSupported } from './src/tabs.js';
export { IncrementalReader } from './src/reader.js';
export { MemoryStore, IndexedDBStore } from './src/stores.js';
export { tagValue, clientTags } from './src/tags.js';
