//! The Web Locks lock manager of the process (docs/web-locks.md): the W3C
//! Web Locks API's lock request queues and held lock set, shared by every
//! thread and every copy of the JavaScript layer (`lib/web-locks.js`).
//!
//! The spec runs "request a lock", "release the lock", "abort the request"
//! and "process the lock request queue" one after another on one parallel
//! queue. Here each resource name belongs to one bucket, and each of those
//! steps runs entirely under its bucket's lock: a request leaves its queue
//! and enters the held set in the same critical section, so no other thread
//! ever sees it in neither (or both). Only delivering the grant to the
//! requesting thread (through its copy's resolver, src/resolver.rs) happens
//! after the bucket is unlocked; by then the lock is recorded as held.
//!
//! A request has two async waiters of its copy: `grant`, completed when the
//! lock is granted (it keeps the thread alive if asked), and `steal`,
//! completed if a `steal` request takes the lock away while it is held
//! (it never keeps the thread alive). The native side knows a request by a
//! process-wide id.
//!
//! The fast path (docs/web-locks.md, "The fast path"): a name a copy uses
//! gets a *slot*, one word of shared memory that the JavaScript layer reads
//! and writes with `Atomics` while the name has no queue and nothing held
//! here: 0 is free, a client number is an exclusive lock taken by that copy
//! without a native call, [`NATIVE`] hands the name to the map. Every step
//! here that looks at a name with a slot first *claims* its word (a fast
//! holder becomes a held request of the map), and hands it back ([`tidy`])
//! when the name's queue and held locks are empty again.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use futex_core::{AsyncOutcome, Key, Owner, ParkToken, Protocol, UnparkToken, WaitTable};
use napi::bindgen_prelude::Utf16String;
use napi::{Either, Env, JsValue, Result, Unknown};
use napi_derive::napi;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::resolver::{Resolver, Token};
use crate::{js_alive, this_resolver, SLICE};

/// Buckets of resource names, each behind its own lock.
const BUCKETS: usize = 64;

/// What a grant or steal is delivered as (`lib/futex.js` reads 'handoff' and 'ok').
const GRANTED: UnparkToken = futex_core::lock::TOKEN_HANDOFF;
const STOLEN: UnparkToken = futex_core::lock::TOKEN_RETRY;

/// Answers of [`web_lock_request`], in the low two bits of its result.
const QUEUED: u64 = 0;
const GRANTED_NOW: u64 = 1;
const NOT_AVAILABLE: u64 = 2;
/// Of [`web_lock_request_sync`] only: refused, it would block for ever.
const DEADLOCK: u64 = 3;

/// Flags of [`web_lock_request`].
const SHARED: u32 = 1;
const IF_AVAILABLE: u32 = 2;
const STEAL: u32 = 4;
const KEEP_ALIVE: u32 = 8;

/// A lock request, pending or granted (then it is the spec's lock).
struct Request {
    id: u64,
    shared: bool,
    /// `worker_threads.threadId` of the requesting thread (its client).
    thread: u32,
    client: Client,
    /// A lock taken on the fast path and claimed since: the fast-path
    /// client number of its copy, which releases it by that number; else 0.
    fast: u32,
}

/// Who learns of a grant or steal.
#[derive(Clone)]
enum Client {
    /// An async request: two waiters of its copy of the JavaScript layer.
    Async { owner: Arc<Resolver>, grant: Token, steal: Token },
    /// A `requestSync` blocked in its thread until granted. A steal needs
    /// no news: its release finds the lock gone.
    Sync(Arc<Parker>),
    /// A lock taken on the fast path (by an async request or a
    /// `requestSync`): a steal is news for the copy about the name's slot.
    Fast { owner: Arc<Resolver>, slot: u32 },
    /// A lock whose copy is gone while its thread lives on: nobody will
    /// release it (as a lock whose callback never settles).
    Gone,
}

/// Where a blocked `requestSync` sleeps.
#[derive(Default)]
pub(crate) struct Parker {
    /// Set with `granted`, read without the lock while the thread spins.
    done: AtomicBool,
    granted: Mutex<bool>,
    wake: Condvar,
}

/// Most `yield`s a blocked `requestSync` spends before it sleeps, and the
/// fewest (as the wait table's blocking waiters do).
const SPIN_YIELDS: (u32, u32) = (50, 10);

thread_local! {
    /// Consecutive blocked `requestSync`s of this thread whose spin ended in sleep anyway.
    static SPIN_MISSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl Parker {
    /// Yields until granted, a bounded number of times; false if it never
    /// was. The budget halves after each wait that slept anyway (down to a
    /// floor), so a thread whose waits are long stops paying for the spin.
    fn spin(&self) -> bool {
        let misses = SPIN_MISSES.get();
        let budget = (SPIN_YIELDS.0 >> misses).max(SPIN_YIELDS.1);
        for _ in 0..=budget {
            if self.done.load(Ordering::Acquire) {
                SPIN_MISSES.set(0);
                return true;
            }
            std::thread::yield_now();
        }
        SPIN_MISSES.set((misses + 1).min(8));
        false
    }
}

impl Client {
    /// The copy's waiters of a request that is gone without an outcome
    /// (aborted, or released while held: then only the steal waiter).
    fn cancel(&self, pending: bool) {
        if let Client::Async { owner, grant, steal } = self {
            if pending {
                owner.cancelled(*grant);
            }
            owner.cancelled(*steal);
        }
    }
}

/// The lock request queue and the held locks of one resource name, and
/// its fast-path slot.
#[derive(Default)]
struct Resource {
    queue: VecDeque<Request>,
    /// In the order they were granted. Either one exclusive lock or any
    /// number of shared ones.
    held: Vec<Request>,
    /// The name's word on the fast path, while copies use it.
    slot: Option<u32>,
    /// Copies whose table of names holds this name's slot (`webLockLease`):
    /// the slot stays the name's while any does.
    leases: u32,
}

impl Resource {
    /// The spec's "grantable" for a request first in the queue (or for a
    /// request that would be, with `ifAvailable`), given the held locks.
    fn compatible(&self, shared: bool) -> bool {
        match self.held.first() {
            None => true,
            // All held locks are shared when the first one is.
            Some(first) => shared && first.shared,
        }
    }

    /// Process the lock request queue: grants requests from its front while
    /// the first one is grantable. Only the first item can be grantable, so
    /// this stops at the first that is not.
    fn process(&mut self, out: &mut Vec<Delivery>) {
        while let Some(first) = self.queue.front() {
            if !self.compatible(first.shared) {
                return;
            }
            let request = self.queue.pop_front().expect("front exists");
            out.push(Delivery { client: request.client.clone(), id: request.id, what: GRANTED });
            self.held.push(request);
        }
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.held.is_empty()
    }

    /// The threads whose locks or requests the pending request `id` waits
    /// for: it is granted only once they are released. None if `id` is not
    /// pending here. An exclusive request waits for every held lock and
    /// every request ahead of it; a shared one, for those up to the last
    /// exclusive one among them (the shared ones after it are granted
    /// together with it).
    fn blockers_of(&self, id: u64) -> Option<Vec<u32>> {
        let at = self.queue.iter().position(|r| r.id == id)?;
        let ahead = self.held.iter().chain(self.queue.iter().take(at));
        let until = if self.queue[at].shared {
            match ahead.clone().enumerate().filter(|(_, r)| !r.shared).last() {
                Some((i, _)) => i + 1,
                None => 0,
            }
        } else {
            usize::MAX
        };
        Some(ahead.take(until).map(|r| r.thread).collect())
    }

    /// Whether the queue and held locks here are the whole state of the
    /// name: it has no slot, or its word says so.
    fn is_native(&self) -> bool {
        self.slot.is_none_or(|s| FAST.word(s).load(Ordering::SeqCst) == NATIVE)
    }

    /// Takes the name from the fast path before a step looks at its queue
    /// and held locks: its word becomes [`NATIVE`], and a lock taken on the
    /// fast path becomes a held request. JavaScript only ever changes a
    /// word from 0 to its client number and back, so this ends.
    fn claim(&mut self) {
        let Some(s) = self.slot else { return };
        let word = FAST.word(s);
        loop {
            let current = word.load(Ordering::SeqCst);
            if current == NATIVE {
                return;
            }
            debug_assert!(current & FROZEN == 0, "a frozen word outside a snapshot");
            if word.compare_exchange(current, NATIVE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                if current != FREE {
                    if let Some(holder) = FAST.holder(current as u32, s) {
                        self.held.push(holder);
                    }
                }
                return;
            }
        }
    }
}

/// After a step on `name`: a name with nothing held or queued hands its
/// word back to the fast path, and leaves the map once no copy leases its
/// slot (which goes back to the free slots).
fn tidy(map: &mut HashMap<Vec<u16>, Resource>, name: &[u16]) {
    let Some(res) = map.get(name) else { return };
    if !res.is_empty() {
        return;
    }
    if let Some(s) = res.slot {
        let word = FAST.word(s);
        let _ = word.compare_exchange(NATIVE, FREE, Ordering::SeqCst, Ordering::SeqCst);
        // A lock taken on the fast path keeps the slot bound.
        if res.leases > 0 || word.load(Ordering::SeqCst) != FREE {
            return;
        }
        FAST.free.lock().push(s);
    }
    map.remove(name);
}

/// An outcome to deliver once the bucket is unlocked.
struct Delivery {
    client: Client,
    id: u64,
    what: UnparkToken,
}

fn deliver(out: Vec<Delivery>) {
    deliver_to(out, None);
}

/// Delivers `out`, except the grants to the calling copy `caller` (a
/// release on its thread, inside its N-API call): those are handed back, as
/// the slots of their grant waiters (no longer counted), for the copy to
/// run them in the same turn instead of through its event loop.
fn deliver_to(out: Vec<Delivery>, caller: Option<&Arc<Resolver>>) -> Vec<u32> {
    let mut mine = Vec::new();
    for d in out {
        match d.client {
            Client::Async { owner, grant, .. }
                if d.what == GRANTED && caller.is_some_and(|c| Arc::ptr_eq(c, &owner)) =>
            {
                owner.cancelled(grant);
                mine.push(grant.local_slot());
            }
            // A resolver that can no longer deliver passes the outcome on to
            // `Manager::lost` (through `WEB_LOCKS.lost`): a grant to a
            // thread that is gone is released again.
            Client::Async { owner, grant, steal } => {
                let token = if d.what == GRANTED { grant } else { steal };
                owner.complete(d.id as Key, token.0, AsyncOutcome::Unparked(d.what, &WEB_LOCKS));
            }
            Client::Sync(parker) => {
                if d.what == GRANTED {
                    *parker.granted.lock() = true;
                    parker.done.store(true, Ordering::Release);
                    parker.wake.notify_one();
                }
            }
            // Only ever held, so only ever stolen: news for the copy.
            Client::Fast { owner, slot } => {
                if d.what == STOLEN {
                    owner.complete(slot as Key, Token::web_event(slot).0, AsyncOutcome::Unparked(STOLEN, &WEB_LOCKS));
                }
            }
            Client::Gone => {}
        }
    }
    mine
}

// --- the fast path -------------------------------------------------------------

/// Name slots with a word at once; a name used while all are taken has no
/// slot, and every request for it goes through the map.
const SLOTS: usize = 8192;
/// Words per slot: each slot's word alone on a 64-byte line.
const STRIDE: usize = 16;
/// A word's values: free (nothing held or queued anywhere), a client number
/// (an exclusive lock taken on the fast path by that copy), or the name's
/// state lives in the map. [`FROZEN`] is or-ed in while `query()` reads.
const FREE: i32 = 0;
const NATIVE: i32 = -1;
const FROZEN: i32 = 1 << 30;

/// A copy of the JavaScript layer that takes locks on the fast path.
struct FastClient {
    /// `worker_threads.threadId` of its thread.
    thread: u32,
    owner: Arc<Resolver>,
    /// The names whose slot it holds in its table.
    leases: Mutex<HashSet<Vec<u16>>>,
}

struct Fast {
    words: Box<[AtomicI32]>,
    /// Slots bound to no name.
    free: Mutex<Vec<u32>>,
    /// By client number (0 is never one: it is [`FREE`]).
    clients: RwLock<Vec<Option<Arc<FastClient>>>>,
}

static FAST: LazyLock<Fast> = LazyLock::new(|| Fast {
    words: (0..SLOTS * STRIDE).map(|_| AtomicI32::new(FREE)).collect(),
    free: Mutex::new((0..SLOTS as u32).rev().collect()),
    clients: RwLock::new(vec![None]),
});

impl Fast {
    fn word(&self, slot: u32) -> &AtomicI32 {
        &self.words[slot as usize * STRIDE]
    }

    fn client(&self, number: u32) -> Option<Arc<FastClient>> {
        self.clients.read().get(number as usize).cloned().flatten()
    }

    /// The held request of a lock taken on the fast path by `number`.
    fn holder(&self, number: u32, slot: u32) -> Option<Request> {
        // A client closes only after its words are claimed (`client_closed`).
        let client = self.client(number)?;
        Some(Request {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shared: false,
            thread: client.thread,
            client: Client::Fast { owner: client.owner.clone(), slot },
            fast: number,
        })
    }
}

/// Whether `word` is a lock taken on the fast path (not frozen).
fn is_fast_holder(word: i32) -> bool {
    word > 0 && word < FROZEN
}

type Bucket = Mutex<HashMap<Vec<u16>, Resource>>;

fn bucket_index(name: &[u16]) -> usize {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    (h.finish() % BUCKETS as u64) as usize
}

pub(crate) struct Manager {
    buckets: Box<[Bucket]>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) static MANAGER: LazyLock<Manager> = LazyLock::new(|| {
    // A thread's requests and locks end with it (registered on first use).
    crate::on_thread_end(crate::ThreadEnd::After, |id| MANAGER.thread_ended(id));
    Manager { buckets: (0..BUCKETS).map(|_| Mutex::new(HashMap::new())).collect() }
});

/// What a request asked for.
struct Ask {
    shared: bool,
    if_available: bool,
    steal: bool,
    /// A blocking request: refused (`DEADLOCK`) rather than queued where
    /// a lock or request of its own thread comes first, since that thread
    /// cannot run JavaScript to release or use it while it blocks.
    blocking: bool,
}

impl Manager {
    fn bucket(&self, name: &[u16]) -> &Bucket {
        &self.buckets[bucket_index(name)]
    }

    /// Request a lock. Returns the request's id and whether it was queued,
    /// granted now, or (`ifAvailable`) not available; for each of them the
    /// copy's waiters that are now pending are counted (`Resolver::queued`)
    /// before the bucket is unlocked, so that a grant or steal decided
    /// right after by another thread finds them counted.
    fn request(&self, name: &[u16], ask: Ask, thread: u32, client: Client) -> (u64, u64) {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::new();
        let status = {
            let mut map = self.bucket(name).lock();
            if let Some(res) = map.get_mut(name) {
                res.claim();
            }
            if ask.if_available {
                // Not grantable: the queue is not empty, or a held lock conflicts.
                let grantable = map.get(name).is_none_or(|r| r.queue.is_empty() && r.compatible(ask.shared));
                if !grantable {
                    tidy(&mut map, name);
                    return (id, NOT_AVAILABLE);
                }
            }
            if ask.blocking && !ask.steal {
                let blocked = map.get(name).is_some_and(|r| {
                    !(r.queue.is_empty() && r.compatible(ask.shared))
                        && r.held.iter().chain(r.queue.iter()).any(|o| o.thread == thread)
                });
                if blocked {
                    tidy(&mut map, name);
                    return (id, DEADLOCK);
                }
            }
            if !map.contains_key(name) {
                map.insert(name.to_vec(), Resource::default());
            }
            let res = map.get_mut(name).expect("inserted above");
            if ask.steal {
                for lock in res.held.drain(..) {
                    out.push(Delivery { client: lock.client, id: lock.id, what: STOLEN });
                }
            }
            // A stolen resource's request goes first in its queue, and
            // nothing is held any more: it is grantable. Otherwise a request
            // joins the back of the queue, where it is grantable only if
            // the queue was empty (its front was not grantable, or it
            // would have been granted).
            let shared = ask.shared && !ask.steal;
            let now = (ask.steal || res.queue.is_empty()) && res.compatible(shared);
            if let Client::Async { owner, grant, steal } = &client {
                if !now {
                    owner.queued(*grant);
                }
                owner.queued(*steal);
            }
            let request = Request { id, shared, thread, client, fast: 0 };
            if now {
                res.held.push(request);
                GRANTED_NOW
            } else {
                res.queue.push_back(request);
                QUEUED
            }
        };
        deliver(out);
        (id, status)
    }

    /// Whether the pending blocking request of the thread `start` (as
    /// `blocked` has it) waits, through threads that are themselves blocked
    /// in `requestSync`, for a lock or request of `start`: a wait that no
    /// thread of the cycle can end. The cycle is found one bucket at a time,
    /// then confirmed with every bucket it involves locked at once (in
    /// index order), so that it is one state of the manager, not a mix of
    /// moments. Returns the cycle as (thread, name it waits for), from
    /// `start` on.
    fn cycle(&self, blocked: &HashMap<u32, (Vec<u16>, u64)>, start: u32) -> Option<Vec<(u32, Vec<u16>)>> {
        let blockers = |thread: u32| -> Vec<u32> {
            let Some((name, id)) = blocked.get(&thread) else { return Vec::new() };
            let map = self.bucket(name).lock();
            map.get(name).and_then(|r| r.blockers_of(*id)).unwrap_or_default()
        };
        let mut parent: HashMap<u32, u32> = HashMap::new();
        let mut todo = vec![start];
        let mut last = None;
        'search: while let Some(t) = todo.pop() {
            for b in blockers(t) {
                if b == start {
                    last = Some(t);
                    break 'search;
                }
                if b != t && blocked.contains_key(&b) && !parent.contains_key(&b) {
                    parent.insert(b, t);
                    todo.push(b);
                }
            }
        }
        // start → … → last → start
        let mut path = vec![last?];
        while let Some(&p) = parent.get(path.last().expect("not empty")) {
            path.push(p);
        }
        // The parents lead back to `start`, which has none.
        path.reverse();
        let mut indices: Vec<usize> = path.iter().map(|t| bucket_index(&blocked[t].0)).collect();
        indices.sort_unstable();
        indices.dedup();
        let guards: Vec<_> = indices.iter().map(|&i| (i, self.buckets[i].lock())).collect();
        let confirmed = path.iter().enumerate().all(|(k, t)| {
            let (name, id) = &blocked[t];
            let next = path[(k + 1) % path.len()];
            let i = bucket_index(name);
            let map = &guards.iter().find(|(j, _)| *j == i).expect("locked above").1;
            map.get(name).and_then(|r| r.blockers_of(*id)).is_some_and(|b| b.contains(&next))
        });
        drop(guards);
        confirmed.then(|| path.iter().map(|t| (*t, blocked[t].0.clone())).collect())
    }

    /// Release the lock `id` of `name`, held by the calling copy `caller`
    /// (if known): the grants this makes to it are handed back (see
    /// [`deliver_to`]). None if it is not held (stolen, or already released).
    fn release(&self, name: &[u16], id: u64, caller: Option<&Arc<Resolver>>) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        {
            let mut map = self.bucket(name).lock();
            let res = map.get_mut(name)?;
            // (A lock granted here makes the word NATIVE until it is released.)
            if !res.is_native() {
                return None;
            }
            let i = res.held.iter().position(|r| r.id == id)?;
            let lock = res.held.remove(i);
            lock.client.cancel(false);
            res.process(&mut out);
            tidy(&mut map, name);
        }
        Some(deliver_to(out, caller))
    }

    /// Release the lock of `name` that the copy with client number
    /// `number` took on the fast path, when its word no longer says so
    /// (claimed since, or frozen by a `query()` then); grants to the copy
    /// are handed back as by [`Manager::release`]. None if it is not held
    /// any more (stolen).
    fn fast_release(&self, name: &[u16], number: u32, caller: Option<&Arc<Resolver>>) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        {
            let mut map = self.bucket(name).lock();
            let res = map.get_mut(name)?;
            let s = res.slot?;
            let word = FAST.word(s);
            let current = word.load(Ordering::SeqCst);
            if current != NATIVE {
                // Not claimed: its word is ours unless it was stolen (and
                // maybe taken again since). Only the map changes a client's
                // number, under this lock.
                if current != number as i32 {
                    return None;
                }
                word.store(FREE, Ordering::SeqCst);
                tidy(&mut map, name);
                return Some(Vec::new());
            }
            let i = res.held.iter().position(|r| r.fast == number)?;
            res.held.remove(i);
            res.process(&mut out);
            tidy(&mut map, name);
        }
        Some(deliver_to(out, caller))
    }

    /// Abort the request `id` of `name`, made by the calling copy. False if
    /// it is not pending (granted already: the grant is on its way).
    fn abort(&self, name: &[u16], id: u64) -> bool {
        let mut out = Vec::new();
        {
            let mut map = self.bucket(name).lock();
            let Some(res) = map.get_mut(name) else { return false };
            if !res.is_native() {
                return false;
            }
            let Some(i) = res.queue.iter().position(|r| r.id == id) else { return false };
            let request = res.queue.remove(i).expect("found above");
            request.client.cancel(true);
            res.process(&mut out);
            tidy(&mut map, name);
        }
        deliver(out);
        true
    }

    /// Terminate remaining locks and requests of the thread `thread` (its
    /// env is being torn down): its requests leave their queues, its locks
    /// are released, and the requests that become grantable are granted.
    pub(crate) fn thread_ended(&self, thread: u32) {
        self.remove_where(|r| r.thread == thread, |number| FAST.client(number).is_some_and(|c| c.thread == thread));
    }

    /// The locks of `requestSync`s of the thread `thread` (as for
    /// [`web_lock_sweep_sync`]): released, and the requests that become
    /// grantable are granted.
    fn sweep_sync(&self, thread: u32) {
        self.remove_where(|r| r.thread == thread && matches!(r.client, Client::Sync(_)), |_| false);
    }

    /// A grant that reached a copy that can no longer run it: release it.
    fn lost(&self, id: u64) {
        self.remove_where(|r| r.id == id, |_| false);
    }

    /// Removes the requests and locks for which `gone` holds, and the locks
    /// taken on the fast path by the clients for which `fast_gone` holds.
    fn remove_where(&self, gone: impl Fn(&Request) -> bool, fast_gone: impl Fn(u32) -> bool) {
        for bucket in self.buckets.iter() {
            let mut out = Vec::new();
            {
                let mut map = bucket.lock();
                let mut emptied = Vec::new();
                for (name, res) in map.iter_mut() {
                    if let Some(s) = res.slot {
                        let word = FAST.word(s);
                        let current = word.load(Ordering::SeqCst);
                        // Only the map changes a client's number, under this lock.
                        if is_fast_holder(current) && fast_gone(current as u32) {
                            word.store(FREE, Ordering::SeqCst);
                        }
                        if !res.is_native() {
                            if res.leases == 0 && word.load(Ordering::SeqCst) == FREE {
                                emptied.push(name.clone());
                            }
                            continue;
                        }
                    }
                    let before = (res.queue.len(), res.held.len());
                    res.queue.retain(|r| !gone(r));
                    res.held.retain(|r| !gone(r));
                    if (res.queue.len(), res.held.len()) != before {
                        res.process(&mut out);
                    }
                    if res.is_empty() {
                        emptied.push(name.clone());
                    }
                }
                for name in emptied {
                    tidy(&mut map, &name);
                }
            }
            deliver(out);
        }
    }

    /// Gives the copy a client number for the fast path (`thread` is its
    /// thread's threadId), or returns the one it has.
    fn client(&self, owner: Arc<Resolver>, thread: u32) -> u32 {
        let mut clients = FAST.clients.write();
        if let Some(number) = clients.iter().position(|c| c.as_ref().is_some_and(|c| Arc::ptr_eq(&c.owner, &owner))) {
            return number as u32;
        }
        let number = clients.iter().skip(1).position(Option::is_none).map_or(clients.len(), |i| i + 1);
        let client = Arc::new(FastClient { thread, owner: owner.clone(), leases: Mutex::new(HashSet::new()) });
        if number == clients.len() {
            clients.push(Some(client));
        } else {
            clients[number] = Some(client);
        }
        drop(clients);
        // Its locks taken on the fast path go to the manager when the copy closes.
        owner.on_close(Box::new(move || MANAGER.client_closed(number as u32)));
        number as u32
    }

    /// The copy `number` holds `name` in its table of names from now on:
    /// the name's slot (bound now if it has none), or -1 if every slot is
    /// taken. A name's slot is bound to it while any copy holds it.
    fn lease(&self, name: &[u16], number: u32) -> i32 {
        let Some(client) = FAST.client(number) else { return -1 };
        let mut map = self.bucket(name).lock();
        let mut leases = client.leases.lock();
        if leases.contains(name) {
            return map.get(name).and_then(|r| r.slot).map_or(-1, |s| s as i32);
        }
        let res = map.entry(name.to_vec()).or_default();
        if res.slot.is_none() {
            let Some(s) = FAST.free.lock().pop() else {
                drop(leases);
                tidy(&mut map, name);
                return -1;
            };
            // A free slot's word is FREE; a name with state here starts native.
            if !res.is_empty() {
                FAST.word(s).store(NATIVE, Ordering::SeqCst);
            }
            res.slot = Some(s);
        }
        res.leases += 1;
        leases.insert(name.to_vec());
        res.slot.map_or(-1, |s| s as i32)
    }

    /// The copy `number` no longer holds these names in its table.
    fn forget(&self, names: &[Vec<u16>], number: u32) {
        let Some(client) = FAST.client(number) else { return };
        for name in names {
            if !client.leases.lock().remove(name) {
                continue;
            }
            self.unlease(name);
        }
    }

    fn unlease(&self, name: &[u16]) {
        let mut map = self.bucket(name).lock();
        if let Some(res) = map.get_mut(name) {
            res.leases -= 1;
            tidy(&mut map, name);
        }
    }

    /// The copy with client number `number` is gone (its thread is being
    /// torn down, or it was collected): the locks it took on the fast path
    /// become held requests of a gone client (released when its thread
    /// ends, like its other locks), its leases end, and its number is free.
    pub(crate) fn client_closed(&self, number: u32) {
        let Some(client) = FAST.client(number) else { return };
        let gone = |r: &mut Request| {
            r.client = Client::Gone;
            r.fast = 0;
        };
        for bucket in self.buckets.iter() {
            let mut map = bucket.lock();
            for res in map.values_mut() {
                if let Some(s) = res.slot {
                    if FAST.word(s).load(Ordering::SeqCst) == number as i32 {
                        res.claim();
                    }
                }
                res.held.iter_mut().filter(|r| r.fast == number).for_each(gone);
            }
        }
        let names: Vec<_> = client.leases.lock().drain().collect();
        for name in names {
            self.unlease(&name);
        }
        FAST.clients.write()[number as usize] = None;
    }

    /// Snapshot the lock state: every bucket is locked (in order) for the
    /// whole snapshot, so it shows one moment of the manager.
    /// Words of the fast path are frozen meanwhile (JavaScript then takes
    /// the slow path, which waits for the bucket), and read as held locks.
    fn snapshot(&self) -> Snapshot {
        let maps: Vec<_> = self.buckets.iter().map(|b| b.lock()).collect();
        let info = |name: &Vec<u16>, shared: bool, thread: u32| WebLockInfo {
            name: Utf16String::from(name.clone()),
            shared,
            thread_id: thread,
        };
        let mut held = Vec::new();
        let mut pending = Vec::new();
        let mut frozen = Vec::new();
        for map in &maps {
            for (name, res) in map.iter() {
                if let Some(s) = res.slot {
                    let word = FAST.word(s);
                    loop {
                        let current = word.load(Ordering::SeqCst);
                        if current == NATIVE {
                            break;
                        }
                        if word.compare_exchange(current, current | FROZEN, Ordering::SeqCst, Ordering::SeqCst).is_ok()
                        {
                            frozen.push((s, current));
                            if let Some(client) = (current != FREE).then(|| FAST.client(current as u32)).flatten() {
                                held.push(info(name, false, client.thread));
                            }
                            break;
                        }
                    }
                }
                held.extend(res.held.iter().map(|r| info(name, r.shared, r.thread)));
                pending.extend(res.queue.iter().map(|r| info(name, r.shared, r.thread)));
            }
        }
        for (s, current) in frozen {
            FAST.word(s).store(current, Ordering::SeqCst);
        }
        Snapshot { held, pending }
    }
}

/// The protocol the grants and steals are delivered with: only its `lost`
/// is used (the requests are never in the wait table).
pub(crate) struct WebLocks;

pub(crate) static WEB_LOCKS: WebLocks = WebLocks;

impl Protocol for WebLocks {
    fn left(&self, _key: Key, _token: ParkToken, _was_last: bool) {}

    fn lost(&self, _table: &WaitTable, key: Key, token: UnparkToken) {
        if token == GRANTED {
            MANAGER.lost(key as u64);
        }
    }
}

/// Requests the lock `name` for this thread (`thread`, its threadId), on
/// behalf of the copy whose waiter slots are `grant_slot` and `steal_slot`.
/// `flags`: 1 shared, 2 ifAvailable, 4 steal, 8 the pending request keeps
/// the thread alive. Returns `id · 4 + status`: status 0 queued (both slots
/// pending), 1 granted now (the steal slot pending), 2 not available
/// (ifAvailable; nothing pending); and writes the same number into
/// `answer[at]` (a `Float64Array` of the copy), where its continuation reads
/// it: a termination that lands as this call returns (a `vm` timeout) can
/// skip the store of its return value, never this write.
#[napi(js_name = "webLockRequest")]
#[allow(clippy::too_many_arguments)] // the JavaScript call's arguments, one each
pub fn web_lock_request(
    env: Env,
    name: Utf16String,
    flags: u32,
    thread: u32,
    grant_slot: u32,
    steal_slot: u32,
    answer: Unknown,
    at: u32,
) -> Result<f64> {
    let cell = answer_cell(&env, answer, at)?;
    let owner = this_resolver(grant_slot)?;
    let ask = ask_of(flags, false);
    let grant = Token::new(grant_slot, flags & KEEP_ALIVE != 0, false);
    let steal = Token::new(steal_slot, false, false);
    let (id, status) = MANAGER.request(&name, ask, thread, Client::Async { owner, grant, steal });
    let n = (id * 4 + status) as f64;
    // SAFETY: an element of a Float64Array of this call (checked by
    // `answer_cell`), whose buffer the call's handle keeps alive.
    unsafe { cell.write(n) };
    Ok(n)
}

/// Element `at` of `value`, a `Float64Array`.
fn answer_cell(env: &Env, value: Unknown, at: u32) -> Result<*mut f64> {
    let mut kind = napi::sys::TypedarrayType::int8_array;
    let mut length = 0;
    let mut data = std::ptr::null_mut();
    let mut buffer = std::ptr::null_mut();
    let mut offset = 0;
    // SAFETY: live env and value of this call; out-pointers are locals.
    let status = unsafe {
        napi::sys::napi_get_typedarray_info(
            env.raw(),
            value.raw(),
            &mut kind,
            &mut length,
            &mut data,
            &mut buffer,
            &mut offset,
        )
    };
    if status != napi::sys::Status::napi_ok || kind != napi::sys::TypedarrayType::float64_array || at as usize >= length
    {
        return Err(napi::Error::new(
            napi::Status::InvalidArg,
            "webLockRequest: answer must be a Float64Array with an element at `at`".to_owned(),
        ));
    }
    // SAFETY: `at` is within the array's `length` elements.
    Ok(unsafe { (data as *mut f64).add(at as usize) })
}

fn ask_of(flags: u32, blocking: bool) -> Ask {
    Ask { shared: flags & SHARED != 0, if_available: flags & IF_AVAILABLE != 0, steal: flags & STEAL != 0, blocking }
}

/// Requests the lock `name` for this thread and blocks until it is granted
/// (`flags` as for `webLockRequest`, without keep-alive). Returns
/// `id · 4 + status`: 1 granted (release it with `webLockRelease`), 2 not
/// available (ifAvailable), 3 refused: a lock or request of this thread
/// comes first in the name's queue, so blocking would never end; or, as
/// id 0 (the answer 3 itself), blocking would close a cycle of threads
/// blocked here (`webLockLastCycle` says which). A thread
/// being stopped while it blocks leaves the queue (status 2: it runs no
/// more JavaScript to see it).
#[napi(js_name = "webLockRequestSync")]
pub fn web_lock_request_sync(env: napi::Env, name: Utf16String, flags: u32, thread: u32) -> Result<f64> {
    let parker = Arc::new(Parker::default());
    let (id, status) = MANAGER.request(&name, ask_of(flags, true), thread, Client::Sync(parker.clone()));
    if status != QUEUED {
        return Ok((id * 4 + status) as f64);
    }
    // Registered as blocked, then the cycle looked for, in one step under
    // BLOCKED: of the threads that close a cycle, the last to block sees
    // all the others registered.
    let _blocked = {
        let mut blocked = BLOCKED.lock();
        blocked.insert(thread, (name.to_vec(), id));
        if let Some(cycle) = MANAGER.cycle(&blocked, thread) {
            blocked.remove(&thread);
            drop(blocked);
            // Out of the queue; if it cannot be (the cycle broke meanwhile
            // and the request was granted), it waits as any other.
            if MANAGER.abort(&name, id) {
                LAST_CYCLE.set(Some(cycle));
                return Ok(DEADLOCK as f64);
            }
            None
        } else {
            Some(Registered(thread))
        }
    };
    if parker.spin() {
        return Ok((id * 4 + GRANTED_NOW) as f64);
    }
    let raw_env = env.raw();
    loop {
        {
            let mut granted = parker.granted.lock();
            if !*granted {
                parker.wake.wait_for(&mut granted, SLICE);
            }
            if *granted {
                return Ok((id * 4 + GRANTED_NOW) as f64);
            }
        }
        if !js_alive(raw_env) {
            // Out of the queue; or, granted in the meantime, released.
            if !MANAGER.abort(&name, id) {
                MANAGER.release(&name, id, None);
            }
            return Ok((id * 4 + NOT_AVAILABLE) as f64);
        }
    }
}

/// The threads blocked in `requestSync`: thread → (the name, the request's
/// id). Taken before any bucket's lock, never after.
static BLOCKED: LazyLock<Mutex<HashMap<u32, (Vec<u16>, u64)>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

thread_local! {
    /// The cycle that this thread's last refused `requestSync` would have
    /// closed, for [`web_lock_last_cycle`].
    static LAST_CYCLE: std::cell::RefCell<Option<Vec<(u32, Vec<u16>)>>> = const { std::cell::RefCell::new(None) };
}

/// A thread's entry in [`BLOCKED`], removed when its wait ends.
struct Registered(u32);

impl Drop for Registered {
    fn drop(&mut self) {
        BLOCKED.lock().remove(&self.0);
    }
}

/// The cycle of waits that this thread's last `requestSync` refused with a
/// `DeadlockError` (answer 3, id 0) would have closed: `[threadId, name]`
/// pairs, from this thread on; each waits for a lock or request of the
/// next, and the last for one of this thread's. Empty if there is none.
#[napi(js_name = "webLockLastCycle")]
pub fn web_lock_last_cycle() -> Vec<(u32, Utf16String)> {
    LAST_CYCLE.take().unwrap_or_default().into_iter().map(|(t, n)| (t, Utf16String::from(n))).collect()
}

/// Releases every lock that a `requestSync` of the thread `thread` holds
/// through the addon (not those taken on the fast path), and drops its
/// queued ones. Only for a thread whose JavaScript stack holds no
/// `requestSync` (it runs an event-loop task): whatever one of them still
/// holds belongs to a call that a `vm` timeout stopped.
#[napi(js_name = "webLockSweepSync")]
pub fn web_lock_sweep_sync(thread: u32) {
    MANAGER.sweep_sync(thread)
}

/// Releases the held lock `id` of `name`, on behalf of the copy whose
/// waiters are named with `slot` (-1: one with none): false if it is not
/// held any more (stolen); else true, or the slots (within the copy) of the
/// copy's requests it granted, whose grant waiters are no longer counted:
/// the copy runs them itself.
#[napi(js_name = "webLockRelease")]
pub fn web_lock_release(name: Utf16String, id: f64, slot: i32) -> Either<bool, Vec<u32>> {
    let caller = u32::try_from(slot).ok().and_then(crate::resolver::of_slot);
    released(MANAGER.release(&name, id as u64, caller.as_ref()))
}

fn released(granted: Option<Vec<u32>>) -> Either<bool, Vec<u32>> {
    match granted {
        None => Either::A(false),
        Some(mine) if mine.is_empty() => Either::A(true),
        Some(mine) => Either::B(mine),
    }
}

/// Takes the pending request `id` of `name` out of its queue: false if it
/// is not pending any more (its grant is being delivered).
#[napi(js_name = "webLockAbort")]
pub fn web_lock_abort(name: Utf16String, id: f64) -> bool {
    MANAGER.abort(&name, id as u64)
}

#[napi(object)]
pub struct WebLockInfo {
    pub name: Utf16String,
    pub shared: bool,
    pub thread_id: u32,
}

#[napi(object)]
pub struct Snapshot {
    pub held: Vec<WebLockInfo>,
    pub pending: Vec<WebLockInfo>,
}

/// The lock state of the whole process: held locks and pending requests of
/// every thread.
#[napi(js_name = "webLockQuery")]
pub fn web_lock_query() -> Snapshot {
    MANAGER.snapshot()
}

/// The fast path's client number of the calling copy (the copy whose
/// waiters are named with `slot`), on the thread with threadId `thread`:
/// the value its locks taken on the fast path have in their words.
#[napi(js_name = "webLockClient")]
pub fn web_lock_client(slot: u32, thread: u32) -> Result<u32> {
    let owner = this_resolver(slot)?;
    Ok(MANAGER.client(owner, thread))
}

/// The slot of `name` for the copy with client number `number`, bound to
/// the name until the copy forgets it (`webLockForget`) or goes away; -1
/// if every slot is taken (the name then has no fast path).
#[napi(js_name = "webLockLease")]
pub fn web_lock_lease(name: Utf16String, number: u32) -> i32 {
    MANAGER.lease(&name, number)
}

/// The copy with client number `number` drops these names from its table.
#[napi(js_name = "webLockForget")]
pub fn web_lock_forget(names: Vec<Utf16String>, number: u32) {
    let names: Vec<Vec<u16>> = names.iter().map(|n| n.to_vec()).collect();
    MANAGER.forget(&names, number);
}

/// Releases the lock of `name` that the copy with client number `number`
/// took on the fast path, once its word says something else; answers as
/// `webLockRelease` (`slot`: the copy's, as there).
#[napi(js_name = "webLockFastRelease")]
pub fn web_lock_fast_release(name: Utf16String, number: u32, slot: i32) -> Either<bool, Vec<u32>> {
    let caller = u32::try_from(slot).ok().and_then(crate::resolver::of_slot);
    released(MANAGER.fast_release(&name, number, caller.as_ref()))
}

/// The words of the fast path (one `Int32` per slot, every 16th) as an
/// `ArrayBuffer` over their memory, or `null` where the runtime allows no
/// external buffers. The memory is the process-wide manager's, never freed.
#[napi(js_name = "webLockWords")]
pub fn web_lock_words(env: &Env) -> Result<Unknown<'_>> {
    crate::static_atomics_buffer(env, &FAST.words[..])
}
