'use strict'
// What the host lets this thread do, found once per thread when the package
// loads.
//
// `Atomics`: the thread's built-in object, taken once here, so that no call
// of the package reads the global `Atomics` again (a getter installed there
// would run inside the package's calls). Every module that uses Atomics takes
// it from here. Where the runtime has none (`node --no-harmony-atomics` on
// Node 16–20), a stand-in takes its place whose functions throw
// AtomicsUnavailableError (ERR_NO_ATOMICS): the package still loads, `wait`,
// `notify` and `waitAsync` work on the addon alone, and what needs Atomics
// (the primitives' words) fails with that error when it is called.
//
// `canBlock`: the spec's [[CanBlock]] (AgentCanSuspend()). An embedder may
// forbid blocking on a thread (V8's Isolate::SetAllowAtomicsWait(false), as
// Electron's renderer does); V8's Atomics.wait then throws a TypeError. V8 is
// asked once: Atomics.wait on a fresh array with a value that differs answers
// 'not-equal' where waiting is allowed, and throws where it is not (DoWait
// checks AgentCanSuspend after converting its arguments and before comparing).
// Every blocking call of the package throws the same TypeError there.
const { AtomicsUnavailableError } = require('./errors')

const builtin = typeof Atomics === 'object' && Atomics !== null ? Atomics : undefined

function unavailable (name) {
  return function () {
    throw new AtomicsUnavailableError(
      `Atomics.${name} is not available: this runtime has no Atomics (node --no-harmony-atomics?). ` +
      'The primitives of shared-futex need it; wait, notify and waitAsync work without it')
  }
}

const NAMES = ['add', 'and', 'compareExchange', 'exchange', 'isLockFree', 'load', 'notify', 'or', 'store', 'sub', 'wait', 'waitAsync', 'xor']
const standIn = {}
for (const name of NAMES) standIn[name] = unavailable(name)
Object.freeze(standIn)

// V8's TypeError for a wait on a thread that may not block, or null.
function probeCanBlock () {
  if (builtin === undefined || typeof builtin.wait !== 'function') return null
  try {
    builtin.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0)
    return null
  } catch (e) {
    return e instanceof TypeError ? e : null
  }
}
const refusal = probeCanBlock()
const canBlock = refusal === null
const NATIVE = 'Atomics.wait'

// The TypeError a blocking call named `what` throws where the thread may not
// block: V8's own message with the call's name in it ("Atomics.wait cannot be
// called in this context" becomes "AsyncLock.lock cannot be called in this
// context").
function cannotBlock (what) {
  const message = String(refusal.message)
  return new TypeError(message.startsWith(NATIVE) ? what + message.slice(NATIVE.length) : `${what}: ${message}`)
}

// For every blocking method, once its arguments are checked and before it
// touches anything: throws where this thread may not block.
function checkCanBlock (what) {
  if (!canBlock) throw cannotBlock(what)
}

module.exports = {
  Atomics: builtin === undefined ? standIn : builtin,
  hasAtomics: builtin !== undefined,
  canBlock,
  cannotBlock,
  checkCanBlock
}
