'use strict'
// The first module of the worker behind createSyncFn (lib/sync-call.js),
// loaded with --require before any other preload and before the worker's
// script (lib/sync-worker.js): it loads the package, so that the thread is
// in the registry of ended threads as soon as anything of the caller's runs
// in it, and reports on the answers channel (a REPORT) when the worker
// cannot serve: something failed to load or never called serveSync
// ('start'), an error escaped outside a call ('uncaught'), or it called
// process.exit ('exit'). A thread ended by terminate() reports nothing: the
// caller sees it in the registry of ended threads.
//
// Node 12 runs a worker's preloads before it sets workerData: there, this
// module sets itself up when lib/sync-worker.js asks (`setUp`), after the
// other preloads (one of them that throws is then seen as the thread's end).
const worker = require('worker_threads')
const { internal } = require('./sync-call')

// The rings' handles (and the addon's file): in workerData, or, for a
// worker started before its caller made them (lib/sync-call.js,
// `handoff`), posted on its port once made (the caller does that right
// after starting the worker, before it waits for anything). Taken before
// the rest loads, so that the addon loads from the caller's file.
let handles = null
function takeHandles (data) {
  if (handles !== null) return handles
  if (data.handoff === undefined) {
    handles = data
  } else {
    const handoff = new Int32Array(data.handoff)
    while (Atomics.load(handoff, 0) === 0) Atomics.wait(handoff, 0, 0)
    const got = worker.receiveMessageOnPort(data.port)
    if (got === undefined) process.exit(1) // the caller failed to make them: it ends this worker
    handles = got.message
  }
  if (typeof handles.addon === 'string') require('./addon-file').file = handles.addon
  return handles
}
if (internal.isOurs(worker.workerData)) takeHandles(worker.workerData)

const { Channel, internal: { spinRecv } } = require('./channel')
const { ChannelClosedError } = require('./errors')

const { toRecord, SERVE, decode, encodeReturn, encodeThrow, encodeReport, withOutput, largeBytes, notice, post, CALL, PULL } = internal
let requests = null
let answers = null
// This worker's MessagePort (the caller has the other end), its index in
// the pool, and the size above which a message crosses the port
// (lib/sync-call.js, "the wire").
let port = null
let index = 0
let large = Infinity
let serving = false
let reported = false

// The worker's output during a call (and while it loads, until its first
// answer): process.stdout / process.stderr writes kept here as fd, Buffer,
// …, and sent with the answer, which the caller writes before the call
// returns. Outside a call (null) they go as Node sends a worker's output:
// asynchronously, through the parent's event loop.
let captured = null
function capture (stream, fd) {
  const write = stream.write
  stream.write = function (chunk, encoding, callback) {
    const isText = typeof chunk === 'string'
    if (captured === null || !(isText || chunk instanceof Uint8Array)) return write.apply(this, arguments)
    if (typeof encoding === 'function') {
      callback = encoding
      encoding = undefined
    }
    captured.push(fd, isText ? Buffer.from(chunk, typeof encoding === 'string' && Buffer.isEncoding(encoding) ? encoding : 'utf8') : Buffer.from(chunk))
    if (typeof callback === 'function') process.nextTick(callback)
    return true
  }
}

// What the worker wrote since the last answer; none is captured until the
// next call.
function takeOutput () {
  const out = captured
  captured = null
  return out
}

function report (reason, e) {
  if (reported) return
  reported = true
  try {
    sendAnswer(0, withOutput(encodeReport(reason, toRecord(e)), takeOutput()), { timeout: 1000 })
  } catch {
    // The caller finds the thread ended all the same.
  }
}

// Sends an answer: on the ring, or a LARGE one on the port and its notice
// on the ring.
function sendAnswer (id, msg, options) {
  if (msg.length <= large) return answers.send(msg, options)
  const kind = msg[8]
  post(port, id, msg)
  answers.send(notice(id, kind, index), options)
}

// Answers call `id` with what its handler returned (ok) or threw, and the
// output of the call.
function answer (id, ok, value) {
  const out = takeOutput()
  try {
    sendAnswer(id, withOutput(ok ? encodeReturn(id, value) : encodeThrow(id, toRecord(value)), out))
  } catch (e) {
    if (e instanceof ChannelClosedError) return
    // The value does not serialize: the call fails with that.
    sendAnswer(id, withOutput(encodeThrow(id, toRecord(e)), out))
  }
}

// The message of a LARGE CALL `id`, which the caller posts on this
// worker's port once asked (a PULL); { gone: true } if that call no longer
// waits.
let pulling = null
function onPosted (m) {
  if (pulling === null || m.id !== pulling.id) return // nobody asked: dropped
  const { resolve } = pulling
  pulling = null
  port.unref()
  resolve(m)
}
function pull (id) {
  return new Promise((resolve) => {
    pulling = { id, resolve }
    port.ref() // the wait keeps the worker alive
    answers.send(notice(id, PULL, index))
  })
}

// The doorbell (lib/sync-call.js): BELL_RUNG moves on with each ring,
// BELL_ASLEEP counts the workers of the pool that wait for it (a worker
// that dies asleep leaves one too many: its caller rings for nothing).
let bell = null
const BELL_RUNG = 0
const BELL_ASLEEP = 1

// The next request: at once if one is there, else after sleeping on the
// doorbell (V8's own Atomics.waitAsync: a caller's Atomics.notify reaches
// an idle event loop at less cost than a wake-up through the addon's
// thread-safe function), or, where there is none, through recvAsync.
async function next () {
  if (bell === null) return requests.recvAsync()
  for (;;) {
    let request = requests.tryRecv()
    if (request !== Channel.EMPTY) return request
    // Calls that follow each other closely: look for a while first; not
    // while a call of this worker runs (concurrent serving), whose answer
    // the spin would hold up (its caller sends nothing until it has it).
    if (unanswered === 0 && spinRecv(requests) && (request = requests.tryRecv()) !== Channel.EMPTY) return request
    const rung = Atomics.load(bell, BELL_RUNG)
    Atomics.add(bell, BELL_ASLEEP, 1)
    // Announced first, then looked again: a caller that committed before
    // the announcement is seen here, one after it sees the announcement.
    try {
      request = requests.tryRecv()
      if (request === Channel.EMPTY) {
        const rang = Atomics.waitAsync(bell, BELL_RUNG, rung).value
        if (unanswered === 0 || typeof rang === 'string') {
          await rang
        } else if (await Promise.race([rang, settled()]) === undefined) {
          // While calls run: awake again as one is answered, to spin for
          // the next call; the wait on the doorbell, still pending, is
          // ended by a ring (the pool's other workers look and sleep again).
          Atomics.add(bell, BELL_RUNG, 1)
          Atomics.notify(bell, BELL_RUNG)
        }
      }
    } finally {
      Atomics.sub(bell, BELL_ASLEEP, 1)
    }
    if (request !== Channel.EMPTY) return request
  }
}

// A call of `concurrent` serving: answered when its handler settles, while
// the next calls are taken. `unanswered` counts those started and not
// answered yet.
let unanswered = 0
// Resolves the promise of settled(), if one waits.
let onSettled = null
const settled = () => new Promise((resolve) => { onSettled = resolve })
function start (fn, id, args) {
  let value
  try {
    value = fn(...args)
  } catch (e) {
    answer(id, false, e)
    return
  }
  unanswered++
  const done = (ok, v) => {
    unanswered--
    answer(id, ok, v)
    if (onSettled !== null) {
      const resolve = onSettled
      onSettled = null
      resolve()
    }
  }
  Promise.resolve(value).then((v) => done(true, v), (e) => done(false, e))
}

// Microtask turns given to handlers that settle at once (an async function
// that awaits nothing slow) before the worker looks for the next call: its
// spin (lib/channel.js spinRecv) holds the thread, and an answer sent from
// a promise reaction would wait for the spin to end.
const SETTLE_TURNS = 8

// Takes the calls and answers them: one at a time (serveSync), or, where
// `concurrent` (synckit's runAsWorker, lib/synckit.js), each as it comes, as
// synckit's worker does: a call that timed out and still runs does not hold
// up the next ones. The output of concurrent calls goes with the next
// answer sent, whichever call's it was.
async function serve (fn, concurrent) {
  // V8's Atomics.waitAsync keeps no event loop alive: while serving, a timer
  // does (as the addon's async waits do for recvAsync).
  const alive = bell === null ? null : setInterval(() => {}, 0x7fffffff)
  for (;;) {
    let request
    try {
      request = await next()
    } catch (e) {
      if (alive !== null) clearInterval(alive)
      if (e instanceof ChannelClosedError) return
      throw e
    }
    let call = decode(request)
    if (call.large && call.kind === CALL) {
      const posted = await pull(call.id)
      if (posted.gone) continue // the call timed out: nobody waits for its answer
      call = decode(posted.msg)
    }
    if (captured === null) captured = []
    if (concurrent) {
      start(fn, call.id, call.payload)
      for (let k = 0; k < SETTLE_TURNS && unanswered > 0; k++) await null
      continue
    }
    let ok = true
    let value
    try {
      value = await fn(...call.payload)
    } catch (e) {
      ok = false
      value = e
    }
    answer(call.id, ok, value)
  }
}

function setUp () {
  if (requests !== null) return
  const data = worker.workerData
  takeHandles(data)
  requests = new Channel(handles.requests)
  answers = new Channel(handles.answers)
  bell = data.bell === undefined ? null : new Int32Array(data.bell)
  port = data.port
  index = data.index
  large = largeBytes(answers)
  port.on('message', onPosted)
  port.unref()
  captured = []
  capture(process.stdout, 1)
  capture(process.stderr, 2)

  globalThis[SERVE] = (fn, concurrent) => {
    if (serving) throw new Error('serveSync: called twice in one worker')
    serving = true
    serve(fn, concurrent === true).catch((e) => {
      report('uncaught', e)
      process.exit(1)
    })
  }

  process.on('uncaughtException', (e) => {
    report(serving ? 'uncaught' : 'start', e)
    process.exit(1)
  })
  process.on('exit', (code) => {
    report('exit', new Error(`the worker called process.exit(${code})`))
  })
}

// Not in another worker started from one of createSyncFn's, which inherits
// its execArgv (and so this preload).
if (internal.isOurs(worker.workerData)) setUp()

module.exports = { setUp, report, serving: () => serving }
