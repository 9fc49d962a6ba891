//! Handing decoded events to JS: the tape as a Float64Array, its objects (strings, Buffers)
//! as an Array, and the read's content slab (see `tape.rs`). A tape JS has released is
//! written again by the next read that fits, so that a read at a broker's pace (a message or
//! a few) costs no new typed array: per read, only the slab is new.

use super::errors::{napi_ok, JsError};
use crate::connection::Connection;
use crate::serializer::Serializer;
use crate::boundary::TAPE_HELD;
use crate::tape::{Obj, Tape};
use napi::sys;
use std::io::Write;
use std::ptr;

type Result<T> = std::result::Result<T, JsError>;

unsafe extern "C" fn drop_content(env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box<Vec<u8>> leaked in `content_buffer`, finalised exactly once.
    let content = unsafe { Box::from_raw(hint.cast::<Vec<u8>>()) };
    let mut total = 0;
    // SAFETY: finalizers run on the env's own thread.
    unsafe { sys::napi_adjust_external_memory(env, -(content.capacity() as i64), &mut total) };
}

/// A Buffer that takes ownership of an assembled body, without copying it again.
fn content_buffer(env: sys::napi_env, content: Vec<u8>) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    if content.is_empty() {
        let mut data = ptr::null_mut();
        // SAFETY: env is live; creates an empty JS-owned Buffer.
        napi_ok(unsafe { sys::napi_create_buffer(env, 0, &mut data, &mut out) })?;
        return Ok(out);
    }
    let mut boxed = Box::new(content);
    let (data, len, capacity) = (boxed.as_mut_ptr(), boxed.len(), boxed.capacity());
    let hint = Box::into_raw(boxed);
    // SAFETY: the Vec stays alive (leaked into `hint`) until Node runs `drop_content`.
    let status = unsafe {
        sys::napi_create_external_buffer(env, len, data.cast(), Some(drop_content), hint.cast(), &mut out)
    };
    if status == sys::Status::napi_ok {
        // V8 counts the Buffer's memory once; counting it again makes V8 collect when half as
        // many bodies have piled up: a lower peak for more collections (benchmarks/RESULTS.md,
        // "Large messages", measures the trade). The finalizer takes the amount back.
        let mut total = 0;
        // SAFETY: env is live on this thread.
        unsafe { sys::napi_adjust_external_memory(env, capacity as i64, &mut total) };
        return Ok(out);
    }
    // External buffers not allowed (e.g. a sandboxed runtime): fall back to one copy.
    // SAFETY: `hint` was not taken by Node since the call failed; reclaim it.
    let content = unsafe { Box::from_raw(hint) };
    let mut copied = ptr::null_mut();
    napi_ok(unsafe { sys::napi_create_buffer_copy(env, len, content.as_ptr().cast(), &mut copied, &mut out) })?;
    Ok(out)
}

pub(super) fn js_string(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    // SAFETY: env is live; bytes is a valid slice for the duration of the call.
    napi_ok(unsafe { sys::napi_create_string_utf8(env, bytes.as_ptr().cast(), bytes.len() as isize, &mut out) })?;
    Ok(out)
}

fn js_object(env: sys::napi_env, obj: Obj, source: &[u8]) -> Result<sys::napi_value> {
    match obj {
        Obj::Str { start, len } => js_string(env, &source[start..start + len]),
        Obj::Text(text) => js_string(env, text.as_bytes()),
        Obj::Bytes { start, len } => {
            let mut out = ptr::null_mut();
            let mut data = ptr::null_mut();
            let bytes = &source[start..start + len];
            // SAFETY: env is live; copies `len` bytes from a valid slice.
            napi_ok(unsafe { sys::napi_create_buffer_copy(env, len, bytes.as_ptr().cast(), &mut data, &mut out) })?;
            Ok(out)
        }
        Obj::Content(content) => content_buffer(env, content),
    }
}

/// A new Array of `values` (see [`define_elements`]).
pub(super) fn js_array(env: sys::napi_env, values: &[sys::napi_value]) -> Result<sys::napi_value> {
    let mut array = ptr::null_mut();
    // SAFETY: env is live. Made with its length, so that its store is allocated once at its
    // size (an empty array grows by steps to a store of 17 elements for the first).
    napi_ok(unsafe { sys::napi_create_array_with_length(env, values.len(), &mut array) })?;
    define_elements(env, array, 0, values)?;
    Ok(array)
}

/// Puts `values` into `array` from index `from` on, as own data properties defined
/// (CreateDataProperty) rather than set: setting an element that does not exist yet consults
/// Array.prototype, where an indexed accessor would run the user's JS (see `mod.rs`).
pub(super) fn define_elements(env: sys::napi_env, array: sys::napi_value, from: usize, values: &[sys::napi_value]) -> Result<()> {
    // The index names, each NUL-terminated, back to back; the descriptors point into them
    // once all are written (the Vec no longer moves).
    let mut names = Vec::with_capacity(values.len() * 4);
    let mut starts = Vec::with_capacity(values.len());
    for i in from..from + values.len() {
        starts.push(names.len());
        write!(names, "{i}\0").expect("a Vec takes any write");
    }
    let descriptors: Vec<sys::napi_property_descriptor> = values
        .iter()
        .zip(&starts)
        .map(|(&value, &start)| sys::napi_property_descriptor {
            utf8name: names[start..].as_ptr().cast(),
            name: ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value,
            // All three, as an element assigned by JS has them (and Node-API takes its fast
            // CreateDataProperty path for exactly this combination).
            attributes: sys::PropertyAttributes::writable | sys::PropertyAttributes::enumerable | sys::PropertyAttributes::configurable,
            data: ptr::null_mut(),
        })
        .collect();
    // SAFETY: env is live; the descriptors' names are NUL-terminated and outlive the call.
    napi_ok(unsafe { sys::napi_define_properties(env, array, descriptors.len(), descriptors.as_ptr()) })
}

/// Bytes the objects of `tape` and its content slab will copy out of the decoded buffer.
fn bytes_to_copy(tape: &Tape) -> u64 {
    let objects: usize = tape.objects.iter().map(|o| if let Obj::Bytes { len, .. } = o { *len } else { 0 }).sum();
    (objects + tape.pooled_bytes()) as u64
}

/// The read's content slab: one ArrayBuffer with the pooled bodies back to back (see
/// `tape.rs`), or undefined when there are none. JS makes each body a Buffer view of it, so the
/// slab itself need not be a Buffer (which would cost a typed array and a prototype per read).
fn content_slab(env: sys::napi_env, tape: &Tape, source: &[u8]) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    if tape.pooled.is_empty() {
        napi_ok(unsafe { sys::napi_get_undefined(env, &mut out) })?;
        return Ok(out);
    }
    let mut data = ptr::null_mut();
    let bytes = tape.pooled_bytes();
    // SAFETY: env is live; `data` receives a fresh store of `bytes` bytes, which the ranges
    // (each within `source`, together exactly that many bytes) fill completely. Empty bodies
    // alone make an empty slab, whose data pointer may be null: no slice of it is made.
    unsafe {
        napi_ok(sys::napi_create_arraybuffer(env, bytes, &mut data, &mut out))?;
        if bytes == 0 {
            return Ok(out);
        }
        let slab = std::slice::from_raw_parts_mut(data.cast::<u8>(), bytes);
        let mut at = 0;
        for &(start, len) in &tape.pooled {
            slab[at..at + len].copy_from_slice(&source[start..start + len]);
            at += len;
        }
    }
    Ok(out)
}

/// What one read hands to JS: the tape as a Float64Array, its objects as an Array (undefined
/// when there are none) and the read's content slab.
pub(super) struct HandedOver {
    pub tape: sys::napi_value,
    pub objects: sys::napi_value,
    pub slab: sys::napi_value,
    /// The tape is the spare one given, written again (the native socket keeps a new one).
    #[cfg_attr(not(native_socket), allow(dead_code))]
    pub reused: bool,
}

impl HandedOver {
    /// `[tape, objects, slab]`, for the calls that return what they parsed.
    pub fn into_array(self, env: sys::napi_env) -> Result<sys::napi_value> {
        js_array(env, &[self.tape, self.objects, self.slab])
    }
}

/// A new tape has room for this many slots at least, and a power of two: reused from read to
/// read, it soon fits every read.
const MIN_TAPE_SLOTS: usize = 1024;

/// Writes `tape` into `spare` (a Float64Array JS handed back) if JS is done with it and it has
/// room; false otherwise (and for anything else given as a spare).
fn write_into_spare(env: sys::napi_env, spare: sys::napi_value, tape: &Tape) -> bool {
    let mut kind = sys::TypedarrayType::int8_array;
    let (mut length, mut data, mut buffer, mut offset) = (0, ptr::null_mut(), ptr::null_mut(), 0);
    // SAFETY: env is live; fails (and the spare is not used) if it is not a typed array.
    let status = unsafe { sys::napi_get_typedarray_info(env, spare, &mut kind, &mut length, &mut data, &mut buffer, &mut offset) };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::float64_array || length < tape.total_slots() {
        return false;
    }
    // SAFETY: a Float64Array's `length` f64s at `data` (aligned, as V8 lays them out), kept
    // alive by the `spare` handle of this call; no JS runs while the slice is in use. `length`
    // covers the header (`total_slots` counts it), so `TAPE_HELD` is in it.
    let slots = unsafe { std::slice::from_raw_parts_mut(data.cast::<f64>(), length) };
    if slots[TAPE_HELD] != 0.0 {
        return false;
    }
    tape.write_slots(slots);
    true
}

/// The tape as a Float64Array: written into `spare` when JS is done with it and it has room,
/// else into a new one. True when the spare was used.
fn tape_array(env: sys::napi_env, tape: &Tape, spare: Option<sys::napi_value>) -> Result<(sys::napi_value, bool)> {
    if let Some(spare) = spare.filter(|&spare| write_into_spare(env, spare, tape)) {
        return Ok((spare, true));
    }
    // Room to be reused where a spare will be given back (a connection's reads); exactly the
    // slots otherwise (the codec's one-off decodes).
    let needed = tape.total_slots();
    let capacity = if spare.is_some() { needed.next_power_of_two().max(MIN_TAPE_SLOTS) } else { needed };
    let (mut array_buffer, mut data, mut typed) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: env is live; `data` receives a fresh JS-owned store of `capacity` f64s (8-byte
    // aligned, as V8 allocates array buffers) that `write_slots` begins with.
    unsafe {
        napi_ok(sys::napi_create_arraybuffer(env, capacity * 8, &mut data, &mut array_buffer))?;
        tape.write_slots(std::slice::from_raw_parts_mut(data.cast::<f64>(), capacity));
        napi_ok(sys::napi_create_typedarray(env, sys::TypedarrayType::float64_array, capacity, array_buffer, 0, &mut typed))?;
    }
    Ok((typed, false))
}

/// Hands `tape` to JS: its slots into `spare` or a new Float64Array, its objects as an Array,
/// and the read's content slab.
pub(super) fn hand_over(env: sys::napi_env, tape: &mut Tape, source: &[u8], spare: Option<sys::napi_value>) -> Result<HandedOver> {
    let (typed, reused) = tape_array(env, tape, spare)?;
    let slab = content_slab(env, tape, source)?;
    let objects = if tape.objects.is_empty() {
        let mut undefined = ptr::null_mut();
        // SAFETY: env is live.
        napi_ok(unsafe { sys::napi_get_undefined(env, &mut undefined) })?;
        undefined
    } else {
        let values = tape.objects.drain(..).map(|obj| js_object(env, obj, source)).collect::<Result<Vec<_>>>()?;
        js_array(env, &values)?
    };
    Ok(HandedOver { tape: typed, objects, slab, reused })
}

/// What `core` last received, handed to JS: its events, taken onto the tape by the
/// connection's serializer (counting the bytes they copy), into `spare` when JS is done with it.
pub(super) fn hand_over_received(
    env: sys::napi_env,
    core: &mut Connection,
    serializer: &mut Serializer,
    spare: Option<sys::napi_value>,
) -> Result<HandedOver> {
    serializer.serialize_read(core);
    core.bytes_copied += bytes_to_copy(&serializer.tape);
    hand_over(env, &mut serializer.tape, core.read_buffer(), spare)
}
