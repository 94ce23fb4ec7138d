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

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use futex_core::{AsyncOutcome, Key, Owner, ParkToken, Protocol, UnparkToken, WaitTable};
use napi::bindgen_prelude::Utf16String;
use napi::Result;
use napi_derive::napi;
use parking_lot::{Condvar, Mutex};

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
}

/// Who learns of a grant or steal.
#[derive(Clone)]
enum Client {
    /// An async request: two waiters of its copy of the JavaScript layer.
    Async { owner: Arc<Resolver>, grant: Token, steal: Token },
    /// A `requestSync` blocked in its thread until granted. A steal needs
    /// no news: its release finds the lock gone.
    Sync(Arc<Parker>),
}

/// Where a blocked `requestSync` sleeps.
#[derive(Default)]
pub(crate) struct Parker {
    granted: Mutex<bool>,
    wake: Condvar,
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

/// The lock request queue and the held locks of one resource name.
#[derive(Default)]
struct Resource {
    queue: VecDeque<Request>,
    /// In the order they were granted. Either one exclusive lock or any
    /// number of shared ones.
    held: Vec<Request>,
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
}

/// An outcome to deliver once the bucket is unlocked.
struct Delivery {
    client: Client,
    id: u64,
    what: UnparkToken,
}

fn deliver(out: Vec<Delivery>) {
    for d in out {
        match d.client {
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
                    parker.wake.notify_one();
                }
            }
        }
    }
}

type Bucket = Mutex<HashMap<Vec<u16>, Resource>>;

pub(crate) struct Manager {
    buckets: Box<[Bucket]>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) static MANAGER: LazyLock<Manager> =
    LazyLock::new(|| Manager { buckets: (0..BUCKETS).map(|_| Mutex::new(HashMap::new())).collect() });

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
        let mut h = DefaultHasher::new();
        name.hash(&mut h);
        &self.buckets[(h.finish() % BUCKETS as u64) as usize]
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
            if ask.if_available {
                // Not grantable: the queue is not empty, or a held lock conflicts.
                let grantable = map.get(name).is_none_or(|r| r.queue.is_empty() && r.compatible(ask.shared));
                if !grantable {
                    return (id, NOT_AVAILABLE);
                }
            }
            if ask.blocking && !ask.steal {
                let blocked = map.get(name).is_some_and(|r| {
                    !(r.queue.is_empty() && r.compatible(ask.shared))
                        && r.held.iter().chain(r.queue.iter()).any(|o| o.thread == thread)
                });
                if blocked {
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
            let request = Request { id, shared, thread, client };
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

    /// Release the lock `id` of `name`, held by the calling copy. False if
    /// it is not held (stolen, or already released).
    fn release(&self, name: &[u16], id: u64) -> bool {
        let mut out = Vec::new();
        {
            let mut map = self.bucket(name).lock();
            let Some(res) = map.get_mut(name) else { return false };
            let Some(i) = res.held.iter().position(|r| r.id == id) else { return false };
            let lock = res.held.remove(i);
            lock.client.cancel(false);
            res.process(&mut out);
            if res.is_empty() {
                map.remove(name);
            }
        }
        deliver(out);
        true
    }

    /// Abort the request `id` of `name`, made by the calling copy. False if
    /// it is not pending (granted already: the grant is on its way).
    fn abort(&self, name: &[u16], id: u64) -> bool {
        let mut out = Vec::new();
        {
            let mut map = self.bucket(name).lock();
            let Some(res) = map.get_mut(name) else { return false };
            let Some(i) = res.queue.iter().position(|r| r.id == id) else { return false };
            let request = res.queue.remove(i).expect("found above");
            request.client.cancel(true);
            res.process(&mut out);
            if res.is_empty() {
                map.remove(name);
            }
        }
        deliver(out);
        true
    }

    /// Terminate remaining locks and requests of the thread `thread` (its
    /// env is being torn down): its requests leave their queues, its locks
    /// are released, and the requests that become grantable are granted.
    pub(crate) fn thread_ended(&self, thread: u32) {
        self.remove_where(|r| r.thread == thread);
    }

    /// A grant that reached a copy that can no longer run it: release it.
    fn lost(&self, id: u64) {
        self.remove_where(|r| r.id == id);
    }

    fn remove_where(&self, gone: impl Fn(&Request) -> bool) {
        for bucket in self.buckets.iter() {
            let mut out = Vec::new();
            {
                let mut map = bucket.lock();
                map.retain(|_, res| {
                    let before = (res.queue.len(), res.held.len());
                    res.queue.retain(|r| !gone(r));
                    res.held.retain(|r| !gone(r));
                    if (res.queue.len(), res.held.len()) != before {
                        res.process(&mut out);
                    }
                    !res.is_empty()
                });
            }
            deliver(out);
        }
    }

    /// Snapshot the lock state: every bucket is locked (in order) for the
    /// whole snapshot, so it shows one moment of the manager.
    fn snapshot(&self) -> Snapshot {
        let maps: Vec<_> = self.buckets.iter().map(|b| b.lock()).collect();
        let info = |name: &Vec<u16>, r: &Request| WebLockInfo {
            name: Utf16String::from(name.clone()),
            shared: r.shared,
            thread_id: r.thread,
        };
        let mut held = Vec::new();
        let mut pending = Vec::new();
        for map in &maps {
            for (name, res) in map.iter() {
                held.extend(res.held.iter().map(|r| info(name, r)));
                pending.extend(res.queue.iter().map(|r| info(name, r)));
            }
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
/// (ifAvailable; nothing pending).
#[napi(js_name = "webLockRequest")]
pub fn web_lock_request(name: Utf16String, flags: u32, thread: u32, grant_slot: u32, steal_slot: u32) -> Result<f64> {
    let owner = this_resolver(grant_slot)?;
    let ask = ask_of(flags, false);
    let grant = Token::new(grant_slot, flags & KEEP_ALIVE != 0, false);
    let steal = Token::new(steal_slot, false, false);
    let (id, status) = MANAGER.request(&name, ask, thread, Client::Async { owner, grant, steal });
    Ok((id * 4 + status) as f64)
}

fn ask_of(flags: u32, blocking: bool) -> Ask {
    Ask { shared: flags & SHARED != 0, if_available: flags & IF_AVAILABLE != 0, steal: flags & STEAL != 0, blocking }
}

/// Requests the lock `name` for this thread and blocks until it is granted
/// (`flags` as for `webLockRequest`, without keep-alive). Returns
/// `id · 4 + status`: 1 granted (release it with `webLockRelease`), 2 not
/// available (ifAvailable), 3 refused: a lock or request of this thread
/// comes first in the name's queue, so blocking would never end. A thread
/// being stopped while it blocks leaves the queue (status 2: it runs no
/// more JavaScript to see it).
#[napi(js_name = "webLockRequestSync")]
pub fn web_lock_request_sync(env: napi::Env, name: Utf16String, flags: u32, thread: u32) -> Result<f64> {
    let parker = Arc::new(Parker::default());
    let (id, status) = MANAGER.request(&name, ask_of(flags, true), thread, Client::Sync(parker.clone()));
    if status != QUEUED {
        return Ok((id * 4 + status) as f64);
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
                MANAGER.release(&name, id);
            }
            return Ok((id * 4 + NOT_AVAILABLE) as f64);
        }
    }
}

/// Releases the held lock `id` of `name`: false if it is not held any more (stolen).
#[napi(js_name = "webLockRelease")]
pub fn web_lock_release(name: Utf16String, id: f64) -> bool {
    MANAGER.release(&name, id as u64)
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
