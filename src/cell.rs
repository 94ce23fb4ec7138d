//! From a JavaScript typed array and an index to the address of one shared
//! element, which is also the element's wait-queue key.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use napi::{sys, Error, Result, Status};

use crate::check;

/// One element of an `Int32Array` or `BigInt64Array` on a `SharedArrayBuffer`.
#[derive(Clone, Copy)]
pub enum Cell {
    I32(*const AtomicI32),
    I64(*const AtomicI64),
}

/// The value a waiter expects to find, of the array's element type.
#[derive(Clone, Copy)]
pub enum Expected {
    I32(i32),
    I64(i64),
}

fn type_error(msg: &str) -> Error {
    Error::new(Status::InvalidArg, msg.to_owned())
}

/// Of `ta`, an `Int32Array` or `BigInt64Array` (anything else is a
/// `TypeError`): whether its elements are 64-bit, the address of its first
/// element, and its length.
///
/// # Safety
/// `env` and `ta` must be the live handles of the current N-API call.
unsafe fn elements(env: sys::napi_env, ta: sys::napi_value) -> Result<(bool, *mut c_void, usize)> {
    let mut kind = 0;
    let mut length = 0usize;
    let mut data: *mut c_void = ptr::null_mut();
    // Fails with napi_invalid_arg unless `ta` is a typed array.
    // SAFETY: live env/value handles (function contract); all out-pointers
    // are valid locals; the buffer handle and byte offset are not requested
    // (`data` already has the offset applied).
    let status = unsafe {
        sys::napi_get_typedarray_info(env, ta, &mut kind, &mut length, &mut data, ptr::null_mut(), ptr::null_mut())
    };
    match kind {
        _ if status != sys::Status::napi_ok => Err(type_error("argument is not an Int32Array or BigInt64Array")),
        sys::TypedarrayType::int32_array => Ok((false, data, length)),
        sys::TypedarrayType::bigint64_array => Ok((true, data, length)),
        _ => Err(type_error("argument is not an Int32Array or BigInt64Array")),
    }
}

impl Cell {
    /// Resolves `ta[index]`. The JS layer has already validated and converted
    /// the arguments with the spec's rules (including "is it shared", which
    /// decides between errors users can see); this re-checks what memory
    /// safety depends on, kind and bounds, instead of trusting it.
    ///
    /// Memory is only ever read through the returned cell during the N-API
    /// call that resolved it, while the array argument keeps its buffer alive.
    /// A queued waiter keeps nothing but the address, as an integer key.
    ///
    /// # Safety
    /// `env` and `ta` must be the live handles of the current N-API call, and
    /// the cell must not be read after that call returns.
    pub unsafe fn resolve(env: sys::napi_env, ta: sys::napi_value, index: f64) -> Result<Cell> {
        // SAFETY: the function contract.
        let (is_i64, data, length) = unsafe { elements(env, ta)? };
        if !(index >= 0.0 && index < length as f64 && index.fract() == 0.0) {
            return Err(Error::new(Status::InvalidArg, "index out of range".to_owned()));
        }
        let index = index as usize;
        // `data` points at the view's first element (N-API applies the byte
        // offset), and `index < length`, so the element lies inside the buffer.
        Ok(if is_i64 {
            Cell::I64((data as *const AtomicI64).wrapping_add(index))
        } else {
            Cell::I32((data as *const AtomicI32).wrapping_add(index))
        })
    }

    /// Resolves `ta[index]` and `ta[index + 1]` of an `Int32Array` (a word
    /// and the one after it, such as a WaitGroup's counter and epoch), with
    /// one look at the array.
    ///
    /// # Safety
    /// As [`resolve`](Self::resolve).
    pub unsafe fn resolve_pair(env: sys::napi_env, ta: sys::napi_value, index: f64) -> Result<(Cell, Cell)> {
        // SAFETY: the function contract.
        let (is_i64, data, length) = unsafe { elements(env, ta)? };
        if is_i64 {
            return Err(type_error("argument is not an Int32Array"));
        }
        if !(index >= 0.0 && index + 1.0 < length as f64 && index.fract() == 0.0) {
            return Err(Error::new(Status::InvalidArg, "index out of range".to_owned()));
        }
        let first = (data as *const AtomicI32).wrapping_add(index as usize);
        // Both lie inside the buffer: `index + 1 < length`.
        Ok((Cell::I32(first), Cell::I32(first.wrapping_add(1))))
    }

    /// The address of element 0 of `ta`, a shared `Int32Array` or
    /// `BigInt64Array` (its presence slot base; see `addressOf`).
    ///
    /// # Safety
    /// `env` and `ta` must be the live handles of the current N-API call.
    pub unsafe fn base(env: sys::napi_env, ta: sys::napi_value) -> Result<usize> {
        // SAFETY: the function contract.
        let (_, data, _) = unsafe { elements(env, ta)? };
        Ok(data as usize)
    }

    /// The element's address: the wait-queue key.
    pub fn key(self) -> usize {
        match self {
            Cell::I32(p) => p as usize,
            Cell::I64(p) => p as usize,
        }
    }

    /// Reads the expected value from `value` as this cell's element type: a
    /// number (already ToInt32'd by the JS layer) or a BigInt.
    ///
    /// # Safety
    /// `env` and `value` must be live handles of the current N-API call.
    pub unsafe fn expected(self, env: sys::napi_env, value: sys::napi_value) -> Result<Expected> {
        match self {
            Cell::I32(_) => {
                let mut v = 0;
                // SAFETY: live handles (function contract).
                check(unsafe { sys::napi_get_value_int32(env, value, &mut v) }, "napi_get_value_int32")?;
                Ok(Expected::I32(v))
            }
            Cell::I64(_) => {
                let mut v = 0;
                let mut lossless = false;
                // SAFETY: live handles (function contract).
                check(
                    unsafe { sys::napi_get_value_bigint_int64(env, value, &mut v, &mut lossless) },
                    "napi_get_value_bigint_int64",
                )?;
                Ok(Expected::I64(v))
            }
        }
    }

    /// Whether the element currently holds `expected` (a sequentially
    /// consistent load, as `Atomics.wait` performs).
    ///
    /// # Safety
    /// The `SharedArrayBuffer` this cell points into must be alive.
    pub unsafe fn holds(self, expected: Expected) -> bool {
        // SAFETY: the caller keeps the buffer alive; the element is in bounds
        // and naturally aligned (typed arrays enforce alignment of their
        // byte offset), and shared memory is only accessed atomically here.
        unsafe {
            match (self, expected) {
                (Cell::I32(p), Expected::I32(v)) => (*p).load(Ordering::SeqCst) == v,
                (Cell::I64(p), Expected::I64(v)) => (*p).load(Ordering::SeqCst) == v,
                _ => false,
            }
        }
    }
}
