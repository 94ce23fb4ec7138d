'use strict'
// WaitGroup, Barrier, ManualResetEvent and AutoResetEvent over a shared
// region: the same object in every thread of every process that maps it.
// Real processes (fixtures/region-primitives-child.js, a main thread and
// two workers each: THREADS), each with a hard timeout.
const assert = require('assert')
const path = require('path')
const { test, describe, after } = require('./harness')
const { until, startChild, regionSkip, stressRounds } = require('./util')
const { SharedRegion, WaitGroup, Barrier, ManualResetEvent, AutoResetEvent, AsyncLock, Condition, Semaphore, RwLock, Once, SharedRegionError, LockOwnershipError, LockTimeoutError, DeadlockError, ACQUIRED, OWNER_DIED } = require('..')
const binding = require('../lib/native')
const { Mutex, Condition: AtomicsCondition } = require('../atomics-mutex')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-primitives-child.js')
const HARD_TIMEOUT = 40000
const THREADS = 3 // of each child process
const {
  AT, BYTES, ARRIVED, RELEASED, CONSUMED, ERRORS, SLEEPING, PARTIES, ITEMS, TAKEN, HOLDING, TURNS,
  PERMITS, WANTED, RUNS, FIRSTS, COUNTER, EVENT_WORD, SEMAPHORE_SEQ, RWLOCK_SEQ
} = require('./fixtures/region-primitives-layout')

const skip = regionSkip()

let n = 0
// Every region a test made goes at the end, also after a failure.
const made = []
if (!skip.skip) {
  after(() => {
    for (const name of made) SharedRegion.unlink(name)
  })
}
function fresh () {
  const name = `pr${process.pid}-${++n}`
  made.push(name)
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: BYTES })
  return { name, region, w: new Int32Array(region.buffer) }
}

const child = (args) => startChild(FIXTURE, args, HARD_TIMEOUT)

// Two survivors (survivor(0), survivor(1)) loop beside a victim (victim(r))
// killed with SIGKILL after a random number of turns, `rounds` times; then
// the survivors must go on for 100 more turns before they are killed too.
async function killAtRandom (w, rounds, survivor, victim) {
  const survivors = [0, 1].map(survivor)
  for (let r = 0; r < rounds; r++) {
    const kid = victim(r)
    const start = Atomics.load(w, TURNS)
    await until(() => Atomics.load(w, TURNS) > start + 5 + Math.floor(Math.random() * 40), 'the victim to run')
    kid.kill('SIGKILL')
    await kid.exited
  }
  const before = Atomics.load(w, TURNS)
  await until(() => Atomics.load(w, TURNS) > before + 100, 'the survivors to go on')
  for (const s of survivors) s.kill('SIGKILL')
  await Promise.all(survivors.map((s) => s.exited))
}

// The places in line for the object at byte `at` of `buffer` (entries of
// `kinds` in the holds table, lib/region-holds.js), by arrival:
// { entry, kind, bell }.
function placesOf (buffer, at, kinds) {
  const { holdsOf, layout: { ENTRIES_AT, ENTRY_WORDS, OWNER, OBJECT, KIND, AUX, BELL } } = require('../lib/region-holds')
  const t = holdsOf(new Int32Array(buffer, at, 1)).w
  const places = []
  for (let e = ENTRIES_AT; e < t.length; e += ENTRY_WORDS) {
    if (t[e + OWNER] !== 0 && t[e + OBJECT] === at + 1 && kinds.includes(t[e + KIND])) {
      places.push({ entry: e, kind: t[e + KIND], bell: t[e + BELL], aux: t[e + AUX] })
    }
  }
  return places.sort((a, b) => (a.aux - b.aux) | 0).map(({ entry, kind, bell }) => ({ entry, kind, bell }))
}

// The bell of entry `entry` of the holds table (it stays, and only moves
// on, once the place is left).
function bellOf (buffer, at, entry) {
  const { holdsOf, layout: { BELL } } = require('../lib/region-holds')
  return Atomics.load(holdsOf(new Int32Array(buffer, at, 1)).w, entry + BELL)
}

async function allExit (kids) {
  const ends = await Promise.all(kids.map((k) => k.exited))
  assert.deepStrictEqual(ends, ends.map(() => ({ code: 0, signal: null })))
}

describe('ownerless primitives in a shared region', skip, () => {
  test('WaitGroup: waiters of 3 processes (blocking and async) are released by done() of 4 others', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const wg = new WaitGroup(region.buffer, AT.WaitGroup, 4)
    const waiters = [0, 1, 2].map(() => child(['wg-wait', name]))
    // Nobody is released before the count reaches zero.
    const local = wg.waitAsync({ timeout: 30000 })
    for (let i = 0; i < 4; i++) {
      assert.strictEqual(Atomics.load(w, RELEASED), 0)
      await child(['wg-done', name]).exited
      assert.strictEqual(wg.count, 3 - i)
    }
    assert.strictEqual(await local, true)
    await allExit(waiters)
    assert.strictEqual(Atomics.load(w, RELEASED), 3 * THREADS)
    SharedRegion.unlink(name)
  })

  test('Barrier: 4 processes × (main thread + 2 workers), 200 generations, nobody passes early', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const barrier = new Barrier(region.buffer, AT.Barrier, 4 * THREADS)
    Atomics.store(w, PARTIES, 4 * THREADS)
    const kids = [0, 1, 2, 3].map(() => child(['barrier', name, '200']))
    await allExit(kids)
    assert.strictEqual(Atomics.load(w, ERRORS), 0)
    assert.strictEqual(Atomics.load(w, ARRIVED), 4 * THREADS * 200)
    assert.strictEqual(barrier.waiting, 0)
    assert.strictEqual(barrier.isBroken, false)
    SharedRegion.unlink(name)
  })

  test('Barrier: a party that times out breaks it for the parties of other processes', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const barrier = new Barrier(region.buffer, AT.Barrier, THREADS + 2)
    Atomics.store(w, PARTIES, THREADS + 2)
    // One child's parties arrive, and this thread's party, which times out: the
    // generation breaks and the child's parties throw (their ERRORS stays 0,
    // their process exits 1 with BarrierBrokenError).
    const kid = child(['barrier', name, '1'])
    await until(() => barrier.waiting === THREADS, 'the parties of the child to arrive')
    await assert.rejects(barrier.waitAsync({ timeout: 50 }), { name: 'LockTimeoutError' })
    assert.strictEqual(barrier.isBroken, true)
    assert.deepStrictEqual(await kid.exited, { code: 1, signal: null })
    barrier.reset()
    assert.strictEqual(barrier.isBroken, false)
    SharedRegion.unlink(name)
  })

  test('ManualResetEvent: one set() releases every waiter of every process', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const ev = new ManualResetEvent(region.buffer, AT.ManualResetEvent)
    const kids = [0, 1, 2].map(() => child(['manual-wait', name]))
    const local = ev.waitAsync()
    // Wait until the six waiters of the children have marked W and sleep.
    await until(() => (Atomics.load(w, EVENT_WORD) & 1) === 1, 'a waiter to mark the event')
    assert.strictEqual(Atomics.load(w, RELEASED), 0)
    ev.set()
    assert.strictEqual(await local, true)
    await allExit(kids)
    assert.strictEqual(Atomics.load(w, RELEASED), 3 * THREADS)
    ev.reset()
    assert.strictEqual(await ev.waitAsync({ timeout: 20 }), false)
    SharedRegion.unlink(name)
  })

  test('AutoResetEvent: each set() releases one waiter of the processes, as long as one waits', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const ev = new AutoResetEvent(region.buffer, AT.AutoResetEvent)
    const N = 300
    const kids = [0, 1, 2].map(() => child(['auto-take', name, String(N)]))
    for (let i = 0; i < N; i++) {
      ev.set()
      // The next set only once this one was taken: none coalesce.
      await until(() => Atomics.load(w, CONSUMED) === i + 1, `signal ${i + 1} to be taken`)
    }
    await allExit(kids)
    assert.strictEqual(Atomics.load(w, CONSUMED), N, 'every signal taken exactly once')
    assert.strictEqual(ev.isSet, false)
    SharedRegion.unlink(name)
  })

  test('AutoResetEvent: a waiter killed with SIGKILL takes no signal with it', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const ev = new AutoResetEvent(region.buffer, AT.AutoResetEvent)
    const sleepers = [0, 1, 2].map(() => child(['auto-sleep', name]))
    await until(() => Atomics.load(w, SLEEPING) === 3, 'the sleepers to wait')
    for (const s of sleepers) s.kill('SIGKILL')
    await Promise.all(sleepers.map((s) => s.exited))
    ev.set()
    assert.strictEqual(await ev.waitAsync({ timeout: 5000 }), true)
    assert.strictEqual(ev.isSet, false)
    SharedRegion.unlink(name)
  })

  test('a process killed while it sleeps on a WaitGroup leaves no waiter behind to wake', { timeout: 60000 }, async () => {
    const { name, region } = fresh()
    const wg = new WaitGroup(region.buffer, AT.WaitGroup, 1)
    const kid = child(['wg-wait', name])
    await until(() => binding.regionInfo(new Int32Array(region.buffer), 1).queued === THREADS, 'the waiters of the child to queue')
    kid.kill('SIGKILL')
    await kid.exited
    wg.done()
    assert.strictEqual(await wg.waitAsync({ timeout: 1000 }), true)
    SharedRegion.unlink(name)
  })
})

describe('Condition in a shared region, with an AsyncLock in a region', skip, () => {
  test('a producer here, takers in 3 processes (blocking and async): every item taken exactly once', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const lock = new AsyncLock(region.buffer, AT.AsyncLock)
    const cond = new Condition(region.buffer, AT.Condition)
    const N = 600
    const kids = [0, 1, 2].map(() => child(['cond-take', name, String(N)]))
    for (let i = 0; i < N; i++) {
      await lock.runExclusive(() => {
        w[ITEMS]++
        cond.notifyOne()
      })
      if (i % 50 === 0) await new Promise(setImmediate)
    }
    await until(() => Atomics.load(w, TAKEN) === N, 'every item to be taken')
    await lock.runExclusive(() => cond.notifyAll())
    await allExit(kids)
    assert.strictEqual(w[TAKEN], N)
    assert.strictEqual(w[ITEMS], 0)
    assert.strictEqual(lock.isLocked, false)
    SharedRegion.unlink(name)
  })

  test('notifyAll wakes the sleepers of every process; a sleeper killed with SIGKILL is not waited for', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const lock = new AsyncLock(region.buffer, AT.AsyncLock)
    const cond = new Condition(region.buffer, AT.Condition)
    const sleepers = [0, 1].map(() => child(['cond-sleep', name]))
    await until(() => Atomics.load(w, SLEEPING) === 2, 'both sleepers to wait')
    // Both released the lock to sleep: it is free, and this thread's wait
    // sleeps beside them.
    await lock.lockAsync()
    const waiting = cond.waitAsync(lock, { timeout: 10000 })
    await lock.lockAsync().then(async (release) => {
      // Dead before the notify: a sleeper killed after it could relock
      // first and die holding the lock (then this waiter is told so).
      sleepers[0].kill('SIGKILL')
      await sleepers[0].exited
      // The death wakes the watching sleepers to look (the sequence has not
      // moved: they sleep again); the notify counts those asleep.
      const seq = new Int32Array(region.buffer, AT.Condition, 1)
      await until(() => binding.regionInfo(seq, 0).queued === 2, 'this thread\'s waiter and the other sleeper to sleep again')
      assert.strictEqual(cond.notifyAll() >= 1, true, 'at least this thread\'s waiter woke')
      release()
    })
    // The other sleeper may relock first: it unlocks at once.
    assert.strictEqual(await waiting, 'ok')
    lock.unlock()
    for (const s of sleepers) s.kill('SIGKILL')
    await Promise.all(sleepers.map((s) => s.exited))
    SharedRegion.unlink(name)
  })

  test('a holder killed while a waiter relocks: the waiter returns owner-died', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const lock = new AsyncLock(region.buffer, AT.AsyncLock)
    const cond = new Condition(region.buffer, AT.Condition)
    await lock.lockAsync()
    const waiting = cond.waitAsync(lock)
    // The child takes the lock, wakes this waiter (which then waits to
    // relock) and is killed holding it.
    const holder = child(['cond-hold', name])
    await until(() => Atomics.load(w, HOLDING) === 1, 'the child to hold the lock and notify')
    holder.kill('SIGKILL')
    await holder.exited
    assert.strictEqual(await waiting, OWNER_DIED)
    assert.strictEqual(lock.tryLock(), false, 'held by this thread')
    lock.unlock()
    SharedRegion.unlink(name)
  })

  test('errors: a lock of this process, a lock not held, a timeout', async () => {
    const { name, region } = fresh()
    const lock = new AsyncLock(region.buffer, AT.AsyncLock)
    const cond = new Condition(region.buffer, AT.Condition)
    assert.throws(() => cond.wait(new AsyncLock()), (e) => e instanceof SharedRegionError && e.code === 'ERR_REGION_UNSUPPORTED')
    await assert.rejects(cond.waitAsync(new AsyncLock()), (e) => e instanceof SharedRegionError && e.code === 'ERR_REGION_UNSUPPORTED')
    assert.throws(() => cond.wait(lock), LockOwnershipError)
    await assert.rejects(cond.waitAsync(lock), LockOwnershipError)
    assert.throws(() => cond.wait({}), TypeError)
    await lock.lockAsync()
    assert.strictEqual(await cond.waitAsync(lock, { timeout: 30 }), 'timed-out')
    assert.strictEqual(await cond.waitAsync(lock, { timeout: 0 }), 'timed-out')
    const ac = new AbortController()
    const aborted = cond.waitAsync(lock, { signal: ac.signal })
    ac.abort()
    await assert.rejects(aborted, { name: 'AbortError' })
    assert.strictEqual(lock.tryLock(), false, 'held again after the abort')
    lock.unlock()
    assert.strictEqual(cond.notifyOne(), 0)
    assert.strictEqual(cond.notifyAll(), 0)
    SharedRegion.unlink(name)
  })
})

describe('Semaphore in a shared region', skip, () => {
  function semaphore (permits, wanted) {
    const r = fresh()
    r.sem = new Semaphore(r.region.buffer, AT.Semaphore, permits)
    Atomics.store(r.w, PERMITS, permits)
    Atomics.store(r.w, WANTED, wanted)
    return r
  }

  test('4 processes × (main thread + 2 workers), 1 and 2 permits at a time: never more holders than permits', { timeout: 60000 }, async () => {
    for (const wanted of [1, 2]) {
      const { name, w, sem } = semaphore(3, wanted)
      const kids = [0, 1, 2, 3].map(() => child(['sem-loop', name, '300']))
      await allExit(kids)
      assert.strictEqual(Atomics.load(w, ERRORS), 0)
      assert.strictEqual(Atomics.load(w, TURNS), 4 * THREADS * 300)
      assert.strictEqual(sem.value, 3, 'every permit back')
      SharedRegion.unlink(name)
    }
  })

  test('holders killed with SIGKILL: their permits come back to the next acquirer, once', { timeout: 60000 }, async () => {
    const { name, w, sem } = semaphore(5, 1)
    const holders = [2, 2].map((k) => child(['sem-hold', name, String(k)]))
    await until(() => Atomics.load(w, HOLDING) === 2, 'both holders to acquire')
    assert.strictEqual(sem.value, 1)
    assert.strictEqual(sem.tryAcquire(2), false)
    const pending = sem.acquireAsync({ permits: 5, timeout: 10000 })
    for (const h of holders) h.kill('SIGKILL')
    const release = await pending
    assert.strictEqual(sem.value, 0)
    release()
    assert.strictEqual(sem.value, 5, 'given back once, not twice')
    assert.strictEqual(sem.tryAcquire(5), true)
    sem.release(5)
    assert.strictEqual(sem.value, 5)
    SharedRegion.unlink(name)
  })

  test('acquirers in line across processes: the first gets its permits, a smaller request behind it does not pass it', { timeout: 60000 }, async () => {
    const { name, w, sem } = semaphore(4, 1)
    assert.strictEqual(sem.tryAcquire(3), true)
    const big = child(['sem-want', name, '4', String(ITEMS)])
    // In line once the newcomers' grace (1 ms) is up: a free permit is
    // refused to this thread's tryAcquire.
    await until(() => {
      if (!sem.tryAcquire(1)) return true
      sem.release(1)
      return false
    }, 'the big request to stand in line')
    const small = child(['sem-want', name, '1', String(TAKEN)])
    assert.strictEqual(Atomics.load(w, SEMAPHORE_SEQ) & 1, 1, 'W: waiters in line') // SEQ
    sem.release(1) // 2 free: enough for the small one (now or when it comes), not for the first in line
    assert.strictEqual(Atomics.load(w, TAKEN), 0)
    sem.release(2) // 4 free: the first in line
    await until(() => Atomics.load(w, ITEMS) === 1, 'the big request to be served')
    assert.strictEqual(Atomics.load(w, TAKEN), 0, 'the small one still waits')
    big.kill('SIGKILL')
    await big.exited
    await until(() => Atomics.load(w, TAKEN) === 1, 'the small one, once the big one\'s permits came back')
    small.kill('SIGKILL')
    await small.exited
    assert.strictEqual(sem.tryAcquire(4), true, 'every permit back')
    sem.release(4)
    SharedRegion.unlink(name)
  })

  // No thundering herd: the waiters sleep on their places' bells, and only
  // the first of the line is rung; the one served rings the next while
  // permits are left.
  test('a release rings the first in line only; the one served rings the next while permits are left', { timeout: 60000 }, async () => {
    const { name, w, region, sem } = semaphore(0, 1)
    const WAITING = [3] // the Semaphore's places (lib/region-semaphore.js)
    const words = [90, 91, 92] // free words of the layout
    const kids = []
    for (const k of words) {
      kids.push(child(['sem-want', name, '1', String(k)]))
      await until(() => placesOf(region.buffer, AT.Semaphore, WAITING).length === kids.length, `waiter ${kids.length} in line`)
    }
    const before = placesOf(region.buffer, AT.Semaphore, WAITING)
    sem.release(1)
    await until(() => Atomics.load(w, words[0]) === 1, 'the first in line to be served')
    assert.deepStrictEqual(placesOf(region.buffer, AT.Semaphore, WAITING), before.slice(1), 'the others were not rung')
    assert.deepStrictEqual([Atomics.load(w, words[1]), Atomics.load(w, words[2])], [0, 0])
    sem.release(2)
    await until(() => Atomics.load(w, words[1]) === 1 && Atomics.load(w, words[2]) === 1, 'the next two (the second rung by the first)')
    for (const kid of kids) kid.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    // The second release, by a thread that held none, paid the first
    // waiter's permit (lib/region-semaphore.js): the two others' come back.
    const release = await sem.acquireAsync({ permits: 2, timeout: 10000 })
    release()
    assert.strictEqual(sem.value, 2)
    SharedRegion.unlink(name)
  })

  test('a waiter rung first that gives up (aborted) rings the next before its promise settles', { timeout: 60000 }, async () => {
    const { name, w, region, sem } = semaphore(0, 1)
    const WAITING = [3]
    const ac = new AbortController()
    const mine = sem.acquireAsync({ signal: ac.signal }).then(() => 'acquired', (e) => e.name)
    await until(() => placesOf(region.buffer, AT.Semaphore, WAITING).length === 1, 'this thread in line')
    const kid = child(['sem-want', name, '1', '90']) // a free word of the layout
    await until(() => placesOf(region.buffer, AT.Semaphore, WAITING).length === 2, 'the child in line behind it')
    const next = placesOf(region.buffer, AT.Semaphore, WAITING)[1]
    sem.release(1) // rings this thread's place, the first
    ac.abort() // which gives up before it looked
    assert.strictEqual(await mine, 'AbortError')
    assert.ok(bellOf(region.buffer, AT.Semaphore, next.entry) > next.bell, 'the child was rung when this thread left the line')
    await until(() => Atomics.load(w, 90) === 1, 'the child to be served')
    kid.kill('SIGKILL')
    await kid.exited
    SharedRegion.unlink(name)
  })

  test('a release by another process pays the holder\'s permits: its death then gives nothing back', { timeout: 60000 }, async () => {
    const { name, w, sem } = semaphore(3, 1)
    const holder = child(['sem-hold', name, '2'])
    await until(() => Atomics.load(w, HOLDING) === 1, 'the holder to acquire')
    sem.release(2) // on the holder's behalf
    assert.strictEqual(sem.value, 3)
    holder.kill('SIGKILL')
    await holder.exited
    assert.strictEqual(sem.tryAcquire(3), true)
    assert.strictEqual(sem.tryAcquire(1), false, 'no permit counted twice')
    sem.release(3)
    assert.strictEqual(sem.value, 3)
    SharedRegion.unlink(name)
  })

  test('processes killed at random points of acquire / release loops: no permit lost or doubled', { timeout: 120000 }, async () => {
    const { name, w, sem } = semaphore(2, 1)
    const rounds = stressRounds(25)
    await killAtRandom(w, rounds, () => child(['sem-loop', name, '-1']), () => child(['sem-loop', name, '-1']))
    assert.strictEqual(Atomics.load(w, ERRORS), 0, 'never more holders than permits')
    // Everyone is dead now: the next acquirer gets every permit back.
    assert.strictEqual(await sem.acquireAsync({ permits: 2, timeout: 5000 }).then((release) => { release(); return true }), true)
    assert.strictEqual(sem.value, 2)
    assert.strictEqual(sem.tryAcquire(3), false)
    SharedRegion.unlink(name)
  })

  test('128 threads of 8 processes killed holding read locks and permits: one tryWrite and one tryAcquire get all of them back', { timeout: 60000 }, async () => {
    const { name, w, region } = fresh()
    const sem = new Semaphore(region.buffer, AT.Semaphore, 200)
    const rw = new RwLock(region.buffer, AT.RwLock)
    // More give-backs than one transaction's log holds (docs/region.md, "Primitives").
    const kids = []
    for (let p = 0; p < 8; p++) {
      kids.push(child(['hold-many', name, '16']))
      await until(() => Atomics.load(w, HOLDING) === 16 * (p + 1), `the 16 threads of process ${p + 1}`)
    }
    assert.strictEqual(Atomics.load(w, AT.RwLock / 4 + 1), 128, 'READERS')
    for (const k of kids) k.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    assert.strictEqual(rw.tryWrite(), ACQUIRED, 'every dead reader gone at once')
    assert.strictEqual(rw.readers, 0)
    rw.writeUnlock()
    assert.strictEqual(sem.tryAcquire(200), true, 'every permit back at once')
    sem.release(200)
    SharedRegion.unlink(name)
  })

  test('a region unlinked and made again: the new one starts with a table of its own; the old one, if it never used its table, is told', async () => {
    const { name, region } = fresh()
    const old = new Semaphore(region.buffer, AT.Semaphore, 2)
    assert.strictEqual(old.tryAcquire(1), true) // an entry in the old region's table
    const unused = SharedRegion.open(name) // the same mapping, another buffer: a table of its own to open
    SharedRegion.unlink(name)
    const again = SharedRegion.open(name, { bytes: BYTES })
    const sem = new Semaphore(again.buffer, AT.Semaphore, 2)
    assert.strictEqual(sem.tryAcquire(2), true, 'nothing of the old region counts here')
    sem.release(2)
    old.release(1) // the old region goes on with its own table
    assert.strictEqual(old.value, 2)
    const late = new Semaphore(unused.buffer, AT.Semaphore)
    assert.throws(() => late.tryAcquire(1), (e) => e instanceof SharedRegionError && e.code === 'ERR_REGION_NOT_FOUND')
    SharedRegion.unlink(name)
  })

  test('timeouts, signals, errors; the value here and in the other processes', { timeout: 60000 }, async () => {
    const { name, sem, region } = semaphore(1, 1)
    const again = new Semaphore(region.buffer, AT.Semaphore)
    assert.strictEqual(again.value, 1)
    await sem.acquireAsync()
    assert.strictEqual(again.value, 0)
    assert.throws(() => sem.acquire(20), LockTimeoutError)
    assert.throws(() => sem.acquire({ permits: 1, timeout: 0 }), LockTimeoutError)
    await assert.rejects(sem.acquireAsync({ timeout: 20 }), LockTimeoutError)
    const ac = new AbortController()
    const aborted = sem.acquireAsync({ signal: ac.signal })
    ac.abort()
    await assert.rejects(aborted, { name: 'AbortError' })
    sem.release()
    assert.throws(() => sem.release(0x7fffffff), RangeError)
    assert.strictEqual(sem.value, 1, 'unchanged by the refused release')
    assert.throws(() => sem.acquire({ permits: 0 }), RangeError)
    assert.strictEqual(await sem.runExclusive(() => sem.value), 0)
    assert.strictEqual(sem.value, 1)
    SharedRegion.unlink(name)
  })
})

// The words of the RwLock at AT.RwLock and its entries in the holds table
// (lib/region-holds.js: OWNER, OBJECT, KIND, COUNT, AUX, BELL), for a
// failure's message.
function rwState (rw, w) {
  const i = AT.RwLock / 4
  const { holdsOf, layout: { ENTRIES_AT, ENTRY_WORDS } } = require('../lib/region-holds')
  const table = holdsOf(new Int32Array(rw.buffer, AT.RwLock, 4)).w
  const entries = []
  for (let e = ENTRIES_AT; e < table.length; e += ENTRY_WORDS) {
    if (table[e] !== 0 && table[e + 1] === i * 4 + 1) {
      entries.push(`{owner ${table[e]} (${binding.regionOwnerAlive(w, table[e]) ? 'alive' : 'dead'}) kind ${table[e + 2]} count ${table[e + 3]} aux ${table[e + 4]} bell ${table[e + 5]}}`)
    }
  }
  const writer = Atomics.load(w, i) >>> 1
  return `STATE writer ${writer} (${writer === 0 ? '-' : binding.regionOwnerAlive(w, writer) ? 'alive' : 'dead'}), READERS ${Atomics.load(w, i + 1)}, SEQ ${Atomics.load(w, i + 3)}, ` +
    `this thread ${binding.regionOwner(w)}, now ${Date.now() | 0}, entries ${entries.join(' ') || 'none'}`
}

describe('RwLock in a shared region', skip, () => {
  function rwlock () {
    const r = fresh()
    r.rw = new RwLock(r.region.buffer, AT.RwLock)
    return r
  }

  test('4 processes × (main thread + 2 workers), reads and writes: writers alone, readers together', { timeout: 60000 }, async () => {
    const { name, w, rw } = rwlock()
    const kids = [0, 1, 2, 3].map((k) => child(['rw-loop', name, '300', String(k)]))
    await allExit(kids)
    assert.strictEqual(Atomics.load(w, ERRORS), 0)
    assert.strictEqual(Atomics.load(w, TURNS), 4 * THREADS * 300)
    assert.strictEqual(rw.readers, 0)
    assert.strictEqual(rw.isWriteLocked, false)
    SharedRegion.unlink(name)
  })

  test('readers of two processes hold it together; a writer waits for both, and holds new readers off', { timeout: 60000 }, async () => {
    const { name, w, rw } = rwlock()
    const readers = [0, 1].map(() => child(['rw-hold', name, 'read']))
    await until(() => Atomics.load(w, HOLDING) === 2, 'both readers')
    assert.strictEqual(rw.readers, 2)
    assert.strictEqual(rw.tryWrite(), false)
    const writing = rw.writeAsync({ timeout: 10000 })
    await until(() => (Atomics.load(w, RWLOCK_SEQ) & 1) === 1, 'the writer to stand in line') // SEQ's LINED
    assert.strictEqual(rw.tryRead(), false, 'a waiting writer holds new readers off')
    assert.throws(() => rw.read(), DeadlockError, 'this thread waits to write')
    await child(['rw-try', name, String(ITEMS)]).exited
    assert.strictEqual(Atomics.load(w, ITEMS), 2, 'a reader of another process is held off too')
    readers[0].kill('SIGKILL')
    await readers[0].exited
    assert.strictEqual(rw.tryRead(), false)
    readers[1].kill('SIGKILL')
    const release = await writing
    assert.strictEqual(release.ownerDied, false, 'readers that die leave nothing to repair')
    assert.strictEqual(rw.readers, 0)
    const read = release.downgrade()
    assert.strictEqual(rw.readers, 1)
    assert.strictEqual(rw.tryRead(), ACQUIRED)
    rw.readUnlock()
    read()
    assert.strictEqual(rw.tryWrite(), ACQUIRED)
    rw.writeUnlock()
    SharedRegion.unlink(name)
  })

  test('waiters go in the order they came: a reader in line before a writer goes first', { timeout: 60000 }, async () => {
    const { name, w, rw } = rwlock()
    const writer = child(['rw-hold', name, 'write'])
    await until(() => Atomics.load(w, HOLDING) === 1, 'the writer')
    const reader = child(['rw-read', name, String(ITEMS)])
    await until(() => (Atomics.load(w, RWLOCK_SEQ) & 1) === 1, 'the reader to stand in line') // SEQ's LINED
    let written = false
    const writing = rw.writeAsync({ timeout: 20000 }).then((release) => {
      written = true
      return release
    })
    writer.kill('SIGKILL')
    await until(() => Atomics.load(w, ITEMS) === 1, 'the reader, first in line, to be let in').catch((e) => {
      e.message += ` (written here: ${written}; ${rwState(rw, w)})`
      throw e
    })
    assert.strictEqual(written, false, 'the writer that came later waits for it')
    reader.kill('SIGKILL')
    const release = await writing
    assert.strictEqual(release.ownerDied, false, 'the reader took the dead writer\'s lock over, and was told')
    release()
    SharedRegion.unlink(name)
  })

  test('a reader and a writer that stand in line in the same millisecond go in the order they came: the reader first', { timeout: 60000 }, async () => {
    const { name, w, rw } = rwlock()
    const CLOCK = 80 // 0: the workers' clocks stand still at T; then they run
    const FIRST = 81 // who got in first: 1 the reader, 2 the writer
    const T = Date.now() - 1000
    const inLine = (kind) => placesOf(rw.buffer, AT.RwLock, [kind]).length > 0
    const code = `
      const { workerData: { root, name, at, T, CLOCK, FIRST, role }, parentPort } = require('worker_threads')
      const { SharedRegion, RwLock } = require(root)
      const w = new Int32Array(SharedRegion.open(name).buffer)
      const real = Date.now
      Date.now = () => Atomics.load(w, CLOCK) === 0 ? T : Math.max(real(), T + 10)
      const rw = new RwLock(w.buffer, at)
      const keep = setInterval(() => {}, 1000)
      const got = role === 'read' ? rw.readAsync({ timeout: 30000 }) : rw.writeAsync({ timeout: 30000 })
      got.then((release) => {
        Atomics.compareExchange(w, FIRST, 0, role === 'read' ? 1 : 2)
        release()
        clearInterval(keep)
        parentPort.postMessage('in')
      }, (e) => { clearInterval(keep); parentPort.postMessage(String(e)) })
    `
    const { Worker } = require('worker_threads')
    const start = (role) => {
      const worker = new Worker(code, { eval: true, workerData: { root: path.join(__dirname, '..'), name, at: AT.RwLock, T, CLOCK, FIRST, role } })
      return new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) })
    }
    assert.strictEqual(rw.tryWrite(), ACQUIRED)
    const reader = start('read')
    await until(() => inLine(4), 'the reader to stand in line')
    const writer = start('write')
    await until(() => inLine(5), 'the writer to stand in line, after it')
    Atomics.store(w, CLOCK, 1)
    rw.writeUnlock()
    assert.deepStrictEqual(await Promise.all([reader, writer]), ['in', 'in'])
    assert.strictEqual(Atomics.load(w, FIRST), 1, 'the reader, who came first, went first')
    SharedRegion.unlink(name)
  })

  // The readers right behind a reader at the head of the line are rung
  // with it; a writer after them, and the readers behind that writer, are not.
  test('a write unlock rings the first reader in line and the readers right behind it, not the writer after them', { timeout: 60000 }, async () => {
    const { name, w, region, rw } = rwlock()
    const LINE = [4, 5] // READ_WAIT, WRITE_WAIT (lib/region-rwlock.js)
    assert.strictEqual(rw.tryWrite(), ACQUIRED)
    const kids = []
    const stand = async (args) => {
      kids.push(child(args))
      await until(() => placesOf(region.buffer, AT.RwLock, LINE).length === kids.length, `${args[0]} ${kids.length} in line`)
    }
    // Free words of the layout: 90, 91, 92.
    await stand(['rw-read', name, '90'])
    await stand(['rw-read', name, '91'])
    await stand(['rw-hold', name, 'write'])
    await stand(['rw-read', name, '92'])
    const before = placesOf(region.buffer, AT.RwLock, LINE)
    assert.deepStrictEqual(before.map((p) => p.kind), [4, 4, 5, 4])
    rw.writeUnlock()
    await until(() => Atomics.load(w, 90) === 1 && Atomics.load(w, 91) === 1, 'the two readers at the head to read together')
    assert.deepStrictEqual(placesOf(region.buffer, AT.RwLock, LINE), before.slice(2), 'the writer and the reader behind it were not rung')
    assert.strictEqual(Atomics.load(w, HOLDING), 0, 'the writer waits for the readers')
    kids[0].kill('SIGKILL')
    kids[1].kill('SIGKILL')
    await until(() => Atomics.load(w, HOLDING) === 1, 'the writer, once both readers died')
    assert.strictEqual(Atomics.load(w, 92), 0, 'the last reader waits for the writer')
    kids[2].kill('SIGKILL')
    await until(() => Atomics.load(w, 92) === 1, 'the last reader, once the writer died')
    kids[3].kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    SharedRegion.unlink(name)
  })

  // A writer in line that gives up rings the readers behind it, together:
  // the first alone would leave the second waiting for as long as the
  // first reads.
  test('a writer that leaves the line (aborted) rings the readers behind it together', { timeout: 60000 }, async () => {
    const { name, w, region, rw } = rwlock()
    const LINE = [4, 5] // READ_WAIT, WRITE_WAIT (lib/region-rwlock.js)
    assert.strictEqual(rw.tryRead(), ACQUIRED)
    const ac = new AbortController()
    // Behind this thread's own read lock: in line, async.
    const writing = rw.writeAsync({ signal: ac.signal }).then(() => 'acquired', (e) => e.name)
    await until(() => placesOf(region.buffer, AT.RwLock, LINE).length === 1, 'the writer in line')
    const kids = []
    for (const k of [90, 91]) { // free words of the layout
      kids.push(child(['rw-read', name, String(k)]))
      await until(() => placesOf(region.buffer, AT.RwLock, LINE).length === kids.length + 1, `reader ${kids.length} in line`)
    }
    assert.deepStrictEqual([Atomics.load(w, 90), Atomics.load(w, 91)], [0, 0], 'the readers wait behind the writer')
    const readers = placesOf(region.buffer, AT.RwLock, LINE).slice(1)
    ac.abort()
    assert.strictEqual(await writing, 'AbortError')
    // Rung by the writer's leaving (done before its promise settled), not
    // by a slice later.
    assert.deepStrictEqual(readers.map((p) => bellOf(region.buffer, AT.RwLock, p.entry) > p.bell), [true, true])
    await until(() => Atomics.load(w, 90) === 1 && Atomics.load(w, 91) === 1, 'both readers, rung together when the writer left')
    rw.readUnlock()
    for (const kid of kids) kid.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    SharedRegion.unlink(name)
  })

  test('a writer killed with SIGKILL: the next acquirer (reader or writer) takes it over, told owner-died', { timeout: 60000 }, async () => {
    for (const next of ['read', 'write', 'readAsync']) {
      const { name, w, rw } = rwlock()
      const writer = child(['rw-hold', name, 'write'])
      await until(() => Atomics.load(w, HOLDING) === 1, 'the writer')
      assert.strictEqual(rw.isWriteLocked, true)
      assert.strictEqual(rw.tryRead(), false)
      writer.kill('SIGKILL')
      await writer.exited
      if (next === 'read') {
        assert.strictEqual(rw.tryRead(), OWNER_DIED)
        assert.strictEqual(rw.tryWrite(), false)
        rw.readUnlock()
      } else if (next === 'write') {
        assert.strictEqual(rw.write(5000), OWNER_DIED)
        rw.writeUnlock()
      } else {
        const release = await rw.readAsync()
        assert.strictEqual(release.ownerDied, true)
        release()
      }
      assert.strictEqual(rw.tryWrite(), ACQUIRED, 'told once')
      rw.writeUnlock()
      SharedRegion.unlink(name)
    }
  })

  test('processes killed at random points of read / write loops: exclusion holds, the lock stays usable', { timeout: 120000 }, async () => {
    const { name, w, rw } = rwlock()
    const rounds = stressRounds(25)
    await killAtRandom(w, rounds, (k) => child(['rw-loop', name, '-1', String(k)]), (r) => child(['rw-loop', name, '-1', String(2 + (r % 14))]))
    assert.strictEqual(Atomics.load(w, ERRORS), 0, 'a writer never inside with anyone')
    const status = rw.write(5000)
    assert.ok(status === ACQUIRED || status === OWNER_DIED)
    assert.strictEqual(rw.readers, 0, 'dead readers gone')
    rw.writeUnlock()
    SharedRegion.unlink(name)
  })

  test('ownership, deadlocks, timeouts, signals', { timeout: 60000 }, async () => {
    const { name, rw } = rwlock()
    assert.throws(() => rw.readUnlock(), LockOwnershipError)
    assert.throws(() => rw.writeUnlock(), LockOwnershipError)
    assert.throws(() => rw.downgrade(), LockOwnershipError)
    assert.strictEqual(rw.read(), ACQUIRED)
    assert.throws(() => rw.write(), DeadlockError)
    assert.strictEqual(rw.tryWrite(), false)
    rw.readUnlock()
    assert.strictEqual(rw.write(), ACQUIRED)
    assert.throws(() => rw.read(), DeadlockError)
    assert.throws(() => rw.write(), DeadlockError)
    const again = new RwLock(rw.buffer, AT.RwLock)
    assert.strictEqual(again.isWriteLocked, true)
    await assert.rejects(again.readAsync({ timeout: 20 }), LockTimeoutError)
    const ac = new AbortController()
    const aborted = again.writeAsync({ signal: ac.signal })
    ac.abort()
    await assert.rejects(aborted, { name: 'AbortError' })
    rw.writeUnlock()
    assert.strictEqual(await rw.runRead(() => rw.readers), 1)
    assert.strictEqual(await rw.runWrite((info) => info.ownerDied), false)
    assert.strictEqual(rw.readers, 0)
    SharedRegion.unlink(name)
  })
})

describe('Once and the Atomics.Mutex shape in a shared region', skip, () => {
  test('Once: 4 processes × (main thread + 2 workers) call it together; fn runs exactly once', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const once = new Once(region.buffer, AT.Once)
    const kids = [0, 1, 2, 3].map(() => child(['once-run', name]))
    await allExit(kids)
    assert.strictEqual(Atomics.load(w, RUNS), 1)
    assert.strictEqual(Atomics.load(w, FIRSTS), 1)
    assert.strictEqual(once.isDone, true)
    assert.strictEqual(once.run(() => assert.fail('done already')), false)
    SharedRegion.unlink(name)
  })

  test('Once: fn\'s process killed inside fn; the next caller runs fn again, told ownerDied', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const once = new Once(region.buffer, AT.Once)
    const dying = child(['once-die', name])
    await until(() => Atomics.load(w, HOLDING) === 1, 'fn to start in the child')
    const running = once.runAsync((info) => info.ownerDied, { timeout: 10000 })
    dying.kill('SIGKILL')
    await dying.exited
    assert.strictEqual(await running, true)
    assert.strictEqual(once.isDone, true)
    SharedRegion.unlink(name)
  })

  test('Atomics.Mutex: 4 processes × (main thread + 2 workers) increment a plain counter under it', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const mutex = new Mutex(region.buffer, AT.Mutex)
    const kids = [0, 1, 2, 3].map(() => child(['mutex-count', name, '500']))
    await allExit(kids)
    assert.strictEqual(w[COUNTER], 4 * THREADS * 500)
    const token = Mutex.lockIfAvailable(mutex, 0)
    assert.ok(token !== null && token.locked)
    // A Condition of the proposal's shape waits with it, across processes too.
    const cv = new AtomicsCondition(region.buffer, AT.AtomicsCondition)
    assert.strictEqual(AtomicsCondition.waitFor(cv, token, 10), false)
    assert.strictEqual(AtomicsCondition.notify(cv), 0)
    token.unlock()
    SharedRegion.unlink(name)
  })
})
