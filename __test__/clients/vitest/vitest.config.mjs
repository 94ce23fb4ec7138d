// The VM pools evaluate every test file's modules in a context of its own;
// one worker thread runs all three files.
export default { test: { pool: 'vmThreads', poolOptions: { vmThreads: { singleThread: true } }, testTimeout: 5000 } }
