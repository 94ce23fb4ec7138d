'use strict'
// Items: undefined, null, a boolean, a number or a string as bytes, cloned
// exactly as structured clone clones them, without v8.serialize (whose
// serializer object costs microseconds for the smallest value). Used by
// Channel's 'v8' codec and by the synchronous call's messages.
//
//   tag (uint8)    then
//   0 undefined    -
//   1 null         -
//   2 false        -
//   3 true         -
//   4 number       float64 (NaN, -0, every double)
//   5 one-byte     uint32 length, then the characters (each below U+0100)
//   6 two-byte     uint32 length, then the UTF-16 code units (lone
//                  surrogates too)
//
// Multi-byte fields are little-endian (every thread of a process is on
// one machine; Buffer's LE methods spell it out). A v8.serialize output
// begins with 0xFF, which no item does.
const T_UNDEFINED = 0
const T_NULL = 1
const T_FALSE = 2
const T_TRUE = 3
const T_NUMBER = 4
const T_ONE_BYTE = 5
const T_TWO_BYTE = 6
const NOT_ONE_BYTE = /[^\u0000-\u00ff]/ // eslint-disable-line no-control-regex

// Bytes of `v` as an item, or -1 if it is not one.
function itemBytes (v) {
  switch (typeof v) {
    case 'undefined': case 'boolean': return 1
    case 'number': return 9
    case 'string': return 5 + (NOT_ONE_BYTE.test(v) ? 2 * v.length : v.length)
    case 'object': return v === null ? 1 : -1
    default: return -1
  }
}

// Writes item `v` into the Buffer at `at`; `n` is itemBytes(v) (>= 0),
// which for a string says its form without looking at it again. Returns
// where it ends.
function writeItem (buf, at, v, n) {
  switch (typeof v) {
    case 'undefined': buf[at] = T_UNDEFINED; return at + 1
    case 'boolean': buf[at] = v ? T_TRUE : T_FALSE; return at + 1
    case 'number':
      buf[at] = T_NUMBER
      return buf.writeDoubleLE(v, at + 1)
    case 'string': {
      const one = n === 5 + v.length
      buf[at] = one ? T_ONE_BYTE : T_TWO_BYTE
      buf.writeUInt32LE(v.length, at + 1)
      return at + 5 + buf.write(v, at + 5, one ? 'latin1' : 'utf16le')
    }
    default: buf[at] = T_NULL; return at + 1
  }
}

// Reads the item at `at` of the Buffer into out[k]; returns where it ends.
function readItem (buf, at, out, k) {
  const tag = buf[at]
  if (tag <= T_TRUE) {
    out[k] = tag === T_UNDEFINED ? undefined : tag === T_NULL ? null : tag === T_TRUE
    return at + 1
  }
  if (tag === T_NUMBER) {
    out[k] = buf.readDoubleLE(at + 1)
    return at + 9
  }
  const n = buf.readUInt32LE(at + 1)
  const bytes = tag === T_ONE_BYTE ? n : 2 * n
  out[k] = buf.toString(tag === T_ONE_BYTE ? 'latin1' : 'utf16le', at + 5, at + 5 + bytes)
  return at + 5 + bytes
}

module.exports = { itemBytes, writeItem, readItem }
