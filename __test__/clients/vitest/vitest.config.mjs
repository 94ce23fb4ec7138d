// The VM pools evaluate every test file's modules in a context of its own;
// one worker thread runs all three files.
// No cache: a run writes nothing into the tree.
export default { cacheDir: false, test: { cache: false, pool: 'vmThreads', poolOptions: { vmThreads: { singleThread: true } }, testTimeout: 5000 } }
