//! The calls on hot paths (`wait`, `notify`, `waitAsync`, and the changes
//! made together with their wake-up: `compareExchangeNotify`,
//! `countToZero`) as plain N-API callbacks, registered on the module's
//! exports at load.
//!
//! A generated napi-rs wrapper converts each argument through its generic
//! machinery and opens and closes bookkeeping scopes around every call: for a
//! call whose own work is a bucket lock and a few loads, that was more than
//! half of its cost. Here each argument is read with exactly one N-API call.
//! Arguments arrive already converted and validated by `lib/futex.js`; what
//! memory safety depends on (kind, bounds) is checked again by
//! [`Cell::resolve`], whose errors are thrown as `TypeError` / `RangeError`.

use std::ffi::{c_char, CStr};
use std::ptr;
use std::sync::atomic::Ordering::SeqCst;

use futex_core::{wake, WaitResult};
use napi::bindgen_prelude::Object;
use napi::{sys, Env, JsValue, Result};
use napi_derive::napi;

use crate::cell::{Cell, Expected};
use crate::resolver::Token;
use crate::{check, deadline, js_alive, queued, region, this_resolver, NOT_EQUAL, OK, SLICE, TABLE, TIMED_OUT};

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// Registers the raw callbacks on the module's exports.
#[napi(module_exports)]
pub fn register(exports: Object, env: Env) -> Result<()> {
    let entries: [(&CStr, Callback); 8] = [
        (c"copyBytes", raw_copy_bytes),
        (c"wait", raw_wait),
        (c"notify", raw_notify),
        (c"waitAsync", raw_wait_async),
        (c"waitWatching", raw_wait_watching),
        (c"waitWatchingAsync", raw_wait_watching_async),
        (c"compareExchangeNotify", raw_compare_exchange_notify),
        (c"countToZero", raw_count_to_zero),
    ];
    let env = env.raw();
    for (name, callback) in entries {
        let mut function = ptr::null_mut();
        // SAFETY: live env and exports of the module's initialisation; the
        // names are NUL-terminated literals; the callbacks match N-API's type.
        unsafe {
            check(
                sys::napi_create_function(
                    env,
                    name.as_ptr(),
                    usize::MAX as isize,
                    Some(callback),
                    ptr::null_mut(),
                    &mut function,
                ),
                "napi_create_function",
            )?;
            check(
                sys::napi_set_named_property(env, exports.raw(), name.as_ptr(), function),
                "napi_set_named_property",
            )?;
        }
    }
    Ok(())
}

/// The first `N` arguments of the call (missing ones are `undefined`).
///
/// # Safety
/// `env` and `info` must be those of the running callback.
unsafe fn args<const N: usize>(env: sys::napi_env, info: sys::napi_callback_info) -> [sys::napi_value; N] {
    let mut argv = [ptr::null_mut(); N];
    let mut argc = N;
    // SAFETY: `argv` has room for `argc` values (function contract otherwise).
    unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) };
    argv
}

/// A number argument; NaN if it is not a number.
///
/// # Safety
/// Live handles of the running callback.
unsafe fn number(env: sys::napi_env, value: sys::napi_value) -> f64 {
    let mut n = f64::NAN;
    // SAFETY: live handles; on failure `n` stays NaN.
    unsafe { sys::napi_get_value_double(env, value, &mut n) };
    n
}

/// # Safety
/// Live env of the running callback.
unsafe fn from_u32(env: sys::napi_env, n: u32) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: live env; out-pointer is a local.
    unsafe { sys::napi_create_uint32(env, n, &mut value) };
    value
}

/// # Safety
/// Live env of the running callback.
unsafe fn from_f64(env: sys::napi_env, n: f64) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: live env; out-pointer is a local.
    unsafe { sys::napi_create_double(env, n, &mut value) };
    value
}

/// Throws `error` as the JavaScript error it stands for (a bad index is a
/// `RangeError`, anything else about the arguments a `TypeError`); returns
/// the null handle the callback then returns.
///
/// # Safety
/// Live env of the running callback.
unsafe fn throw(env: sys::napi_env, error: napi::Error) -> sys::napi_value {
    let mut message = error.reason.into_bytes();
    message.retain(|&b| b != 0);
    message.push(0);
    let message = message.as_ptr() as *const c_char;
    // SAFETY: live env; `message` is NUL-terminated and outlives the call.
    unsafe {
        if error.status == napi::Status::InvalidArg && CStr::from_ptr(message).to_bytes().starts_with(b"index") {
            sys::napi_throw_range_error(env, ptr::null(), message);
        } else if error.status == napi::Status::InvalidArg {
            sys::napi_throw_type_error(env, ptr::null(), message);
        } else {
            sys::napi_throw_error(env, ptr::null(), message);
        }
    }
    ptr::null_mut()
}

/// `wait(ta, index, value, timeout)`: blocks; returns 0 'ok', 1 'not-equal',
/// 2 'timed-out' (see `lib/futex.js`).
unsafe extern "C" fn raw_wait(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call.
    unsafe {
        let [ta, index, value, timeout] = args::<4>(env, info);
        wait(env, ta, index, value, None, timeout)
    }
}

/// `waitWatching(ta, index, value, ends, timeout)`: `wait`, except that it
/// also returns 'not-equal' if the count of ended threads is no longer
/// `ends` (compared with the value, under the queue's lock), and is woken
/// 'ok' by any thread's end. For a waiter that sleeps while the threads it
/// watches live (it looked at them after reading `ends`).
unsafe extern "C" fn raw_wait_watching(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call.
    unsafe {
        let [ta, index, value, ends, timeout] = args::<5>(env, info);
        wait(env, ta, index, value, Some(number(env, ends)), timeout)
    }
}

/// The blocking wait of `wait` and, with `ends`, of `waitWatching`.
///
/// # Safety
/// Live handles of the running callback; the array argument keeps its
/// buffer alive for the whole (blocking) call, which is as long as the cell
/// is used.
unsafe fn wait(
    env: sys::napi_env,
    ta: sys::napi_value,
    index: sys::napi_value,
    value: sys::napi_value,
    ends: Option<f64>,
    timeout: sys::napi_value,
) -> sys::napi_value {
    // SAFETY: the function's contract.
    unsafe {
        let resolved = Cell::resolve(env, ta, number(env, index)).and_then(|c| Ok((c, c.expected(env, value)?)));
        let (cell, expected) = match resolved {
            Ok(x) => x,
            Err(e) => return throw(env, e),
        };
        let at = deadline(number(env, timeout));
        let result = match (ends, region::find(cell.key())) {
            // The one decision between the two homes of a waiter.
            (None, Some((region, offset))) => {
                match region.queues().wait(offset, || cell.holds(expected), at, SLICE, || !js_alive(env)) {
                    Ok(result) => result,
                    Err(_) => return throw(env, region::full_error()),
                }
            }
            (Some(ends), Some((region, offset))) => {
                // A watching wait over a region: woken also by every end
                // the region's queues see (a thread or process gone),
                // and lasting at most the region's slice.
                let validate = || cell.holds(expected) && region.queues().ends() as f64 == ends;
                match region.queues().wait_watching(offset, validate, region.slice_end(at), SLICE, || !js_alive(env)) {
                    Ok(result) => result,
                    Err(_) => return throw(env, region::full_error()),
                }
            }
            (None, None) => TABLE.wait(cell.key(), || cell.holds(expected), at, SLICE, || !js_alive(env)),
            (Some(ends), None) => {
                let validate = |_| cell.holds(expected) && ends_are(ends);
                TABLE.park(cell.key(), validate, watch(), || at, SLICE, || !js_alive(env))
            }
        };
        from_u32(
            env,
            match result {
                WaitResult::Ok | WaitResult::Unparked(_) => OK,
                WaitResult::NotEqual => NOT_EQUAL,
                // The thread is stopping: nobody will see this result.
                // (Deadlock is a protocol's answer; a plain wait has none.)
                WaitResult::TimedOut | WaitResult::Interrupted | WaitResult::Deadlock => TIMED_OUT,
            },
        )
    }
}

/// The count of ended threads (`ENDS`) is still `ends`.
fn ends_are(ends: f64) -> bool {
    crate::ENDS[0].load(std::sync::atomic::Ordering::SeqCst) as f64 == ends
}

/// A watching waiter's park: the `Watch` protocol, which every thread's end wakes.
fn watch() -> futex_core::Park {
    futex_core::Park { protocol: &futex_core::wake::WATCH, token: 0, since: std::time::Instant::now() }
}

/// The bytes of a `Uint8Array`: its first byte's address and its length;
/// a `TypeError` for anything else.
///
/// # Safety
/// Live handles of the running callback.
unsafe fn bytes_of(env: sys::napi_env, value: sys::napi_value) -> Result<(*mut u8, usize)> {
    let mut kind = 0;
    let mut length = 0usize;
    let mut data: *mut std::ffi::c_void = ptr::null_mut();
    // SAFETY: live handles; out-pointers are locals.
    let status = unsafe {
        sys::napi_get_typedarray_info(env, value, &mut kind, &mut length, &mut data, ptr::null_mut(), ptr::null_mut())
    };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::uint8_array {
        return Err(napi::Error::new(napi::Status::InvalidArg, "argument is not a Uint8Array".to_owned()));
    }
    Ok((data as *mut u8, length))
}

/// `copyBytes(dst, dstOffset, src, srcOffset, n)`: copies `n` bytes of the
/// `Uint8Array` `src` from `srcOffset` into `dst` at `dstOffset` with the
/// C library's `memmove`. For a channel's large frames: V8 copies into and
/// out of shared memory byte-group by byte-group (`relaxed_memmove`, so that
/// a racing reader never sees a torn word it could not explain), about
/// half as fast. The channel's side lock makes its copies exclusive: no
/// other thread touches those bytes meanwhile. Out of bounds: a `RangeError`.
unsafe extern "C" fn raw_copy_bytes(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call; the arrays keep their buffers alive for
    // the call, and the copy stays within both (checked).
    unsafe {
        let [dst, dst_offset, src, src_offset, n] = args::<5>(env, info);
        let (dst, src) = match (bytes_of(env, dst), bytes_of(env, src)) {
            (Ok(d), Ok(s)) => (d, s),
            (Err(e), _) | (_, Err(e)) => return throw(env, e),
        };
        let (dst_offset, src_offset, n) = (number(env, dst_offset), number(env, src_offset), number(env, n));
        let fits = |offset: f64, length: usize| {
            offset >= 0.0 && n >= 0.0 && offset.fract() == 0.0 && n.fract() == 0.0 && offset + n <= length as f64
        };
        if !fits(dst_offset, dst.1) || !fits(src_offset, src.1) {
            return throw(env, napi::Error::new(napi::Status::InvalidArg, "index out of range".to_owned()));
        }
        if n > 0.0 {
            ptr::copy(src.0.add(src_offset as usize), dst.0.add(dst_offset as usize), n as usize);
        }
        ptr::null_mut()
    }
}

/// `notify(ta, index, count)`: wakes up to `count` waiters (`Infinity`: all);
/// returns how many woke.
unsafe extern "C" fn raw_notify(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call; only the address is used afterwards.
    unsafe {
        let [ta, index, count] = args::<3>(env, info);
        let cell = match Cell::resolve(env, ta, number(env, index)) {
            Ok(c) => c,
            Err(e) => return throw(env, e),
        };
        let count = number(env, count);
        let count = if count >= u32::MAX as f64 { usize::MAX } else { count.max(0.0) as usize };
        let woken = match region::find(cell.key()) {
            Some((region, offset)) => region.notify(offset, count),
            None => TABLE.notify(cell.key(), count),
        };
        from_u32(env, woken as u32)
    }
}

/// `waitAsync(ta, index, value, timeout, keepAlive, slot)`: queues an async
/// waiter of this thread under the name `slot` (its place in the thread's
/// table of promises in `lib/futex.js`). Returns its sequence number (which,
/// with the address, names it for `cancelAsync`), or 0 if the value differs.
/// Its outcome is later handed to the `deliver` callback given to
/// `initAsync`, on this thread; with `keepAlive` the thread's event loop
/// stays alive until then. The caller keeps `ta` alive while it is pending.
unsafe extern "C" fn raw_wait_async(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call.
    unsafe {
        let [ta, index, value, timeout, keep_alive, slot] = args::<6>(env, info);
        wait_async(env, [ta, index, value, timeout, keep_alive, slot], None)
    }
}

/// `waitWatchingAsync(ta, index, value, ends, timeout, keepAlive, slot)`:
/// `waitAsync` as `waitWatching` is `wait`. Its outcome is 'ok' or
/// 'timed-out'; 0 if it did not queue.
unsafe extern "C" fn raw_wait_watching_async(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call.
    unsafe {
        let [ta, index, value, ends, timeout, keep_alive, slot] = args::<7>(env, info);
        wait_async(env, [ta, index, value, timeout, keep_alive, slot], Some(number(env, ends)))
    }
}

/// The async wait of `waitAsync` (its arguments) and, with `ends`, of
/// `waitWatchingAsync`.
///
/// # Safety
/// Live handles of the running callback; memory is only read during it.
unsafe fn wait_async(env: sys::napi_env, argv: [sys::napi_value; 6], ends: Option<f64>) -> sys::napi_value {
    let [ta, index, value, timeout, keep_alive, slot] = argv;
    // SAFETY: the function's contract.
    unsafe {
        let slot = number(env, slot) as u32;
        let owner = match this_resolver(slot) {
            Ok(o) => o,
            Err(e) => return throw(env, e),
        };
        let resolved = Cell::resolve(env, ta, number(env, index)).and_then(|c| Ok((c, c.expected(env, value)?)));
        let (cell, expected) = match resolved {
            Ok(x) => x,
            Err(e) => return throw(env, e),
        };
        let mut keep = false;
        sys::napi_get_value_bool(env, keep_alive, &mut keep);
        let at = deadline(number(env, timeout));
        if let Some((region, offset)) = region::find(cell.key()) {
            // Its deadline is the region's listener's, not the timer's. A
            // watching one (see `wait`) lasts at most the region's slice.
            let token = Token::new(slot, keep, false);
            let queued_here = match ends {
                None => region.wait_async(offset, || cell.holds(expected), owner.clone(), token, at, env, false),
                Some(ends) => {
                    let validate = || cell.holds(expected) && region.queues().ends() as f64 == ends;
                    region.wait_async(offset, validate, owner.clone(), token, region.slice_end(at), env, true)
                }
            };
            return match queued_here {
                Ok(Some(ticket)) => from_f64(env, queued(&owner, ticket, None)),
                Ok(None) => from_f64(env, 0.0),
                Err(e) => throw(env, e),
            };
        }
        let token = Token::new(slot, keep, at.is_some());
        let ticket = match ends {
            None => TABLE.wait_async(cell.key(), || cell.holds(expected), owner.clone(), token.0),
            Some(ends) => {
                let validate = |_| (cell.holds(expected) && ends_are(ends)).then_some(token.0);
                TABLE.park_async(cell.key(), validate, watch(), owner.clone())
            }
        };
        match ticket {
            Some(ticket) => from_f64(env, queued(&owner, ticket, at)),
            None => from_f64(env, 0.0),
        }
    }
}

/// `compareExchangeNotify(ta, index, expected, replacement, count)`:
/// `Atomics.compareExchange(ta, index, expected, replacement)` and, if it
/// took, a wake-up of up to `count` waiters of `ta[index]`, in one call, so
/// that a thread stopped between the two (`worker.terminate()`) cannot
/// leave the change made and its sleepers asleep. `ta` an `Int32Array` or
/// `BigInt64Array`; `expected` and `replacement` numbers (already ToInt32'd)
/// or BigInts, as its elements. Returns the value found, as
/// `Atomics.compareExchange` does.
unsafe extern "C" fn raw_compare_exchange_notify(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call; the array argument keeps its buffer alive
    // for the whole call, which is as long as `cell` is used.
    unsafe {
        let [ta, index, expected, replacement, count] = args::<5>(env, info);
        let resolved = Cell::resolve(env, ta, number(env, index))
            .and_then(|c| Ok((c, c.expected(env, expected)?, c.expected(env, replacement)?)));
        let (cell, expected, replacement) = match resolved {
            Ok(x) => x,
            Err(e) => return throw(env, e),
        };
        let count = number(env, count);
        let count = if count >= u32::MAX as f64 { usize::MAX } else { count.max(0.0) as usize };
        let mut value = ptr::null_mut();
        if let Some((region, offset)) = region::find(cell.key()) {
            // Over a region: the same change, and its wake-up through the
            // region's queues. A process killed between the two leaves its
            // sleepers asleep: the primitives' waiters over region memory
            // look again every slice (docs/region.md, "Primitives").
            match (expected, replacement) {
                (Expected::I32(e), Expected::I32(n)) => {
                    let word = &*(cell.key() as *const std::sync::atomic::AtomicU32);
                    let old = word.compare_exchange(e as u32, n as u32, SeqCst, SeqCst).unwrap_or_else(|v| v);
                    if old == e as u32 {
                        region.notify(offset, count);
                    }
                    sys::napi_create_int32(env, old as i32, &mut value);
                }
                (Expected::I64(e), Expected::I64(n)) => {
                    let word = &*(cell.key() as *const std::sync::atomic::AtomicU64);
                    let old = word.compare_exchange(e as u64, n as u64, SeqCst, SeqCst).unwrap_or_else(|v| v);
                    if old == e as u64 {
                        region.notify(offset, count);
                    }
                    sys::napi_create_bigint_int64(env, old as i64, &mut value);
                }
                _ => unreachable!("both are read as the cell's element type"),
            }
            return value;
        }
        match (expected, replacement) {
            (Expected::I32(e), Expected::I32(n)) => {
                let old = wake::compare_exchange_notify_u32(&TABLE, cell.key(), e as u32, n as u32, count);
                sys::napi_create_int32(env, old as i32, &mut value);
            }
            (Expected::I64(e), Expected::I64(n)) => {
                let old = wake::compare_exchange_notify_u64(&TABLE, cell.key(), e as u64, n as u64, count);
                sys::napi_create_bigint_int64(env, old as i64, &mut value);
            }
            _ => unreachable!("both are read as the cell's element type"),
        }
        value
    }
}

/// `countToZero(ta, index, expected)`: a WaitGroup's counter `ta[index]`
/// reaching zero, its epoch the next element: compare-exchange of the
/// counter `expected → 0` and, if it took, one more on the epoch and a
/// wake-up of every waiter of the epoch, in one call (see
/// `compareExchangeNotify`). Returns the counter found.
unsafe extern "C" fn raw_count_to_zero(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: handles of this call; the array argument keeps its buffer alive
    // for the whole call, which is as long as the cells are used.
    unsafe {
        let [ta, index, expected] = args::<3>(env, info);
        let (count, epoch) = match Cell::resolve_pair(env, ta, number(env, index)) {
            Ok(pair) => pair,
            Err(e) => return throw(env, e),
        };
        let expected = match count.expected(env, expected) {
            Ok(Expected::I32(v)) => v,
            Ok(_) => unreachable!("an Int32Array cell"),
            Err(e) => return throw(env, e),
        };
        let old = match region::find(epoch.key()) {
            Some((region, offset)) => {
                let (c, e) = (
                    &*(count.key() as *const std::sync::atomic::AtomicU32),
                    &*(epoch.key() as *const std::sync::atomic::AtomicU32),
                );
                match c.compare_exchange(expected as u32, 0, SeqCst, SeqCst) {
                    Ok(old) => {
                        e.fetch_add(1, SeqCst);
                        region.notify(offset, usize::MAX);
                        old
                    }
                    Err(old) => old,
                }
            }
            None => wake::count_to_zero(&TABLE, count.key(), epoch.key(), expected as u32),
        };
        let mut value = ptr::null_mut();
        sys::napi_create_int32(env, old as i32, &mut value);
        value
    }
}
