//! A safe layer over the Node-API calls the bindings make in several places. Its types carry
//! the invariants the raw calls need, so that those calls' unsafe code is here, once each:
//! - [`JsEnv<'call>`]: the env of a call Node is making into the addon (an entry point, a
//!   finalizer, a poll callback's handle scope), live for `'call`. Made only where Node hands
//!   the env over: here (the hot entry points' `callback`, the finalizers, `HandleScope`),
//!   from napi-rs's `Env` (napi-rs's entry points), or unsafely (`JsEnv::from_raw`);
//! - [`Js<'call>`]: a handle to a JS value, valid for `'call` (Node's, or napi-rs's);
//! - [`Reference`]: a strong reference, used and deleted only in the env that made it;
//!   [`Strings`]: strings kept in an Array of ours;
//! - [`Finalize`] and [`Tagged`]: Rust data that Node owns (an External's, the instance
//!   data, an external Buffer's body), handed back exactly once to be released, and told
//!   apart by type tag.
//!
//! Only calls that run no JS are here (see `mod.rs`): a safe call here can never run the
//! user's JS while a borrow is held. The calls that may stay with the code that keeps
//! borrows out of their way: reading a user's value (`marshal.rs`, through napi-rs's safe
//! value methods on [`Js::unknown`]), calling a function and `napi_async_init` (`socket.rs`).

use super::errors::{guarded, napi_ok, JsError};
use napi::sys;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;

type Result<T> = std::result::Result<T, JsError>;

/// The env of the current call into the addon, for `'call` (see the module documentation).
#[derive(Clone, Copy)]
pub(super) struct JsEnv<'call> {
    raw: sys::napi_env,
    call: PhantomData<&'call ()>,
}

/// A handle to a JS value, valid for `'call`.
#[derive(Clone, Copy)]
pub(super) struct Js<'call> {
    raw: sys::napi_value,
    call: PhantomData<&'call ()>,
}

impl<'call> Js<'call> {
    fn new(raw: sys::napi_value) -> Self {
        Js { raw, call: PhantomData }
    }

    /// The handle of a value napi-rs hands an entry point, valid for the call (`'call`, the
    /// lifetime napi-rs gives it).
    pub(super) fn of<V: napi::JsValue<'call>>(value: &V) -> Self {
        Js::new(value.raw())
    }

    pub(super) fn raw(self) -> sys::napi_value {
        self.raw
    }

    /// As napi-rs's value, to return from a napi-rs entry point in `env`.
    pub(super) fn into_unknown(self, env: &'call napi::Env) -> napi::bindgen_prelude::Unknown<'call> {
        self.unknown(JsEnv::of(env))
    }

    /// As napi-rs's value of `env`'s call, whose safe methods read it (`marshal.rs`).
    pub(super) fn unknown(self, env: JsEnv<'call>) -> napi::bindgen_prelude::Unknown<'call> {
        // SAFETY: the handle is valid for `'call`, the call whose env `env` is.
        unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env.raw, self.raw) }
    }
}

/// What Node owns and hands back once, to be released in its env: an External's data (see
/// [`Tagged`]), the instance data.
pub(super) trait Finalize: Sized + 'static {
    fn finalize(self, env: JsEnv<'_>);
}

/// The data of our Externals. `TAG` tells an External of ours holding a `Self` apart from any
/// other: each type has its own.
pub(super) trait Tagged: Finalize {
    const TAG: sys::napi_type_tag;
}

/// The finalizer of a `Box<T>` Node owns.
unsafe extern "C" fn finalize_box<T: Finalize>(env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is a Box<T> handed to Node with this finalizer (`JsEnv::give`), which
    // Node calls exactly once.
    let data = unsafe { Box::from_raw(hint.cast::<T>()) };
    // A finalizer runs on the env's thread, with the env live until it returns.
    data.finalize(JsEnv { raw: env, call: PhantomData });
}

/// The work of a JS function made by [`JsEnv::function`] (the hot entry points', `hot.rs`),
/// given its call's env and first `N` arguments (undefined where fewer were given).
pub(super) trait Entry<const N: usize> {
    fn run<'call>(env: JsEnv<'call>, args: [Js<'call>; N]) -> Result<Js<'call>>;
}

/// The Node-API callback of every [`Entry`]: its work, any error or panic thrown.
unsafe extern "C" fn callback<const N: usize, E: Entry<N>>(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        // Node calls a function's callback with the env of its call, live until it returns.
        let env = JsEnv { raw: env, call: PhantomData };
        let mut args = [ptr::null_mut(); N];
        let mut argc = N;
        // SAFETY: `info` is the call's, as Node hands it to the callback; `args` has room for
        // `argc` values.
        napi_ok(unsafe { sys::napi_get_cb_info(env.raw, info, &mut argc, args.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) })?;
        E::run(env, args.map(Js::new)).map(Js::raw)
    })
}

/// The body an `external_buffer` owns: V8 is told of its memory until it is freed.
struct Content(Vec<u8>);

impl Finalize for Content {
    fn finalize(self, env: JsEnv<'_>) {
        env.adjust_external_memory(-(self.0.capacity() as i64));
    }
}

/// Strings of ours, kept for the env's life in an Array that no JS ever sees (a reference to
/// a string needs Node-API 10): each is defined at the next index, and read back only from an
/// index it holds, found on the array itself without looking at Array.prototype, so no JS
/// runs either way.
pub(super) struct Strings {
    array: Reference,
    len: u32,
}

impl Strings {
    pub(super) fn new(env: JsEnv<'_>) -> Result<Self> {
        Ok(Strings { array: env.reference(env.array_with_length(0)?)?, len: 0 })
    }

    /// Keeps `string`; returns its index.
    pub(super) fn push(&mut self, env: JsEnv<'_>, string: Js<'_>) -> Result<u32> {
        let array = self.array.get(env)?;
        env.define_properties(array, format!("{}\0", self.len).as_bytes(), &[string])?;
        self.len += 1;
        Ok(self.len - 1)
    }

    pub(super) fn get<'call>(&self, env: JsEnv<'call>, index: u32) -> Result<Js<'call>> {
        if index >= self.len {
            return Err(JsError::plain("No such string"));
        }
        let array = self.array.get(env)?;
        // SAFETY: as for the `make`s of `JsEnv`.
        env.make(|env, out| unsafe { sys::napi_get_element(env, array.raw, index, out) })
    }

    pub(super) fn delete(self, env: JsEnv<'_>) {
        self.array.delete(env);
    }
}

/// What an ArrayBuffer's store may be read as ([`JsEnv::store_with`]): types of which any
/// bytes are a value, aligned to at most 8 bytes. Private to this module, so that these two
/// are all there are.
trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for f64 {}

/// A strong reference to a JS value, made in one env and deleted there, once (it is not
/// Copy, and `delete` takes it). Dropped without `delete`, it leaks the value, no worse.
pub(super) struct Reference {
    env: sys::napi_env,
    raw: sys::napi_ref,
}

impl Reference {
    /// The value, in `env` (refused in any other env than the one that made the reference).
    pub(super) fn get<'call>(&self, env: JsEnv<'call>) -> Result<Js<'call>> {
        if env.raw != self.env {
            return Err(JsError::plain("A reference used in another env"));
        }
        let mut out = ptr::null_mut();
        // SAFETY: a live reference (not deleted: `delete` takes it) of this env, which is live.
        napi_ok(unsafe { sys::napi_get_reference_value(env.raw, self.raw, &mut out) })?;
        Ok(Js::new(out))
    }

    /// Lets go of the value (leaking the reference if `env` is not the one that made it).
    pub(super) fn delete(self, env: JsEnv<'_>) {
        if env.raw == self.env {
            // SAFETY: as for `get`; this is its last use.
            unsafe { sys::napi_delete_reference(env.raw, self.raw) };
        }
    }
}

impl<'call> JsEnv<'call> {
    /// For the socket's env cleanup hook, which Node hands no env.
    ///
    /// # Safety
    /// `raw` is live on this thread for `'call`.
    #[cfg(native_socket)]
    pub(super) unsafe fn from_raw(raw: sys::napi_env) -> Self {
        JsEnv { raw, call: PhantomData }
    }

    /// The env napi-rs hands an entry point: the env of its call.
    pub(super) fn of(env: &'call napi::Env) -> Self {
        JsEnv { raw: env.raw(), call: PhantomData }
    }

    pub(super) fn raw(self) -> sys::napi_env {
        self.raw
    }

    /// A JS function named `name` that runs `E` (see [`Entry`]).
    pub(super) fn function<const N: usize, E: Entry<N>>(self, name: &str) -> Result<Js<'call>> {
        // SAFETY: as for the `make`s below; the name is passed with its length, and the
        // callback is one Node calls as a function's.
        self.make(|env, out| unsafe { sys::napi_create_function(env, name.as_ptr().cast(), name.len() as isize, Some(callback::<N, E>), ptr::null_mut(), out) })
    }

    /// The pointer napi-rs wrapped `object` with: its own allocation of the native value, from
    /// which napi-rs makes each call's `&mut self`. A pointer kept past a call must be this
    /// one: one taken from a call's `&mut self` is derived from that call's borrow, which the
    /// next call's borrow ends (Stacked and Tree Borrows), and every use through it after that
    /// would be undefined behaviour. The caller checks it is the value it expects.
    pub(super) fn wrapped(self, object: Js<'call>) -> Result<*mut c_void> {
        let mut data = ptr::null_mut();
        // SAFETY: the env and the handle are live for `'call`; `data` is a live local. Only the
        // address is read: nothing is dereferenced here.
        napi_ok(unsafe { sys::napi_unwrap(self.raw, object.raw, &mut data) })?;
        Ok(data)
    }

    /// Makes a value through `make`, which calls Node-API with this env and an out-pointer.
    /// Every caller's `make` makes a new value from plain Rust data: no JS runs.
    fn make(self, make: impl FnOnce(sys::napi_env, &mut sys::napi_value) -> sys::napi_status) -> Result<Js<'call>> {
        let mut out = ptr::null_mut();
        napi_ok(make(self.raw, &mut out))?;
        Ok(Js::new(out))
    }

    pub(super) fn undefined(self) -> Result<Js<'call>> {
        // SAFETY (each `make` below): the env is live for `'call`; `out` is a live local, and
        // any bytes passed are a live slice, for the duration of the call.
        self.make(|env, out| unsafe { sys::napi_get_undefined(env, out) })
    }

    pub(super) fn null(self) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_get_null(env, out) })
    }

    pub(super) fn global(self) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_get_global(env, out) })
    }

    pub(super) fn double(self, value: f64) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_create_double(env, value, out) })
    }

    #[cfg(native_socket)]
    pub(super) fn int32(self, value: i32) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_create_int32(env, value, out) })
    }

    /// A string of UTF-8 `bytes`.
    pub(super) fn string(self, bytes: &[u8]) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_create_string_utf8(env, bytes.as_ptr().cast(), bytes.len() as isize, out) })
    }

    /// A new Buffer with a copy of `bytes`.
    pub(super) fn buffer_copy(self, bytes: &[u8]) -> Result<Js<'call>> {
        let mut data = ptr::null_mut();
        self.make(|env, out| unsafe { sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut data, out) })
    }

    /// An Array of `len` holes: made with its length, so that its store is allocated once at
    /// its size (an empty array grows by steps to a store of 17 elements for the first).
    pub(super) fn array_with_length(self, len: usize) -> Result<Js<'call>> {
        self.make(|env, out| unsafe { sys::napi_create_array_with_length(env, len, out) })
    }

    /// A new ArrayBuffer of `len` `T`s, written by `fill`.
    fn store_with<T: Plain>(self, len: usize, fill: impl FnOnce(&mut [T])) -> Result<Js<'call>> {
        let mut data = ptr::null_mut();
        let buffer = self.make(|env, out| unsafe { sys::napi_create_arraybuffer(env, len * std::mem::size_of::<T>(), &mut data, out) })?;
        // An empty store's address may be null: no slice of it is made.
        if len > 0 {
            // SAFETY: the fresh store of `len` `T`s (any bytes are a `T`, and V8 aligns array
            // buffers to 8 bytes, enough for one); no JS has the buffer yet (its handle is
            // returned afterwards), so none can detach it while `fill` writes.
            fill(unsafe { std::slice::from_raw_parts_mut(data.cast::<T>(), len) });
        }
        Ok(buffer)
    }

    /// A new ArrayBuffer of `len` bytes, written by `fill`.
    pub(super) fn arraybuffer_with(self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<Js<'call>> {
        self.store_with(len, fill)
    }

    /// A new Float64Array of `len` numbers, written by `fill`.
    pub(super) fn float64_array_with(self, len: usize, fill: impl FnOnce(&mut [f64])) -> Result<Js<'call>> {
        let buffer = self.store_with(len, fill)?;
        let typed = sys::TypedarrayType::float64_array;
        self.make(|env, out| unsafe { sys::napi_create_typedarray(env, typed, len, buffer.raw, 0, out) })
    }

    /// A Buffer over `content`, which it takes without copying (Node frees it through
    /// `Content`), or a copy where Node refuses external memory (e.g. a sandboxed
    /// runtime). V8 counts the Buffer's memory once; counting it again makes V8 collect when
    /// half as many bodies have piled up: a lower peak for more collections
    /// (benchmarks/RESULTS.md, "Large messages", measures the trade).
    pub(super) fn external_buffer(self, mut content: Vec<u8>) -> Result<Js<'call>> {
        if content.is_empty() {
            return self.buffer_copy(&[]);
        }
        // The store stays where it is while the Vec moves into the Box.
        let (data, len, capacity) = (content.as_mut_ptr(), content.len(), content.capacity());
        let mut out = ptr::null_mut();
        // SAFETY: the env is live; `out` is a live local; the store of `len` bytes at `data`
        // lives in the Box Node frees, through the finalizer, after the Buffer.
        let given = self.give(Content(content), |boxed, finalize| unsafe {
            sys::napi_create_external_buffer(self.raw, len, data.cast(), finalize, boxed, &mut out)
        });
        match given {
            Ok(()) => {
                self.adjust_external_memory(capacity as i64);
                Ok(Js::new(out))
            }
            Err((Content(content), _)) => self.buffer_copy(&content),
        }
    }

    /// Defines own data properties of `object` (writable, enumerable and configurable, as an
    /// assignment makes them), never consulting its prototypes, so no JS runs (see `mod.rs`):
    /// `names`, each NUL-terminated and back to back, one for each of `values`.
    pub(super) fn define_properties(self, object: Js<'call>, names: &[u8], values: &[Js<'call>]) -> Result<()> {
        let mut names = names.split_inclusive(|&b| b == 0);
        let descriptors = values
            .iter()
            .map(|value| match names.next() {
                Some(name) if name.ends_with(&[0]) => Ok(sys::napi_property_descriptor {
                    utf8name: name.as_ptr().cast(),
                    name: ptr::null_mut(),
                    method: None,
                    getter: None,
                    setter: None,
                    value: value.raw,
                    // All three (Node-API takes its fast CreateDataProperty path for exactly
                    // this combination).
                    attributes: sys::PropertyAttributes::writable | sys::PropertyAttributes::enumerable | sys::PropertyAttributes::configurable,
                    data: ptr::null_mut(),
                }),
                _ => Err(JsError::plain("A property without its name")),
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the env and values are live for `'call`; the descriptors' names are
        // NUL-terminated (checked above) in `names`, which outlives the call.
        napi_ok(unsafe { sys::napi_define_properties(self.raw, object.raw, descriptors.len(), descriptors.as_ptr()) })
    }

    /// Reads a value of type `T` through `read`, which calls Node-API with this env, the
    /// value and an out-pointer: `None` if it is not of the type (no coercion: no JS runs).
    fn read<T: Default>(self, value: Js<'call>, read: impl FnOnce(sys::napi_env, sys::napi_value, &mut T) -> sys::napi_status) -> Option<T> {
        let mut out = T::default();
        (read(self.raw, value.raw, &mut out) == sys::Status::napi_ok).then_some(out)
    }

    /// A number, not coerced: None for anything else.
    pub(super) fn get_f64(self, value: Js<'call>) -> Option<f64> {
        // SAFETY (each `read` below): the env and value are live for `'call`; `out` is a live
        // local.
        self.read(value, |env, value, out| unsafe { sys::napi_get_value_double(env, value, out) })
    }

    pub(super) fn get_u32(self, value: Js<'call>) -> Option<u32> {
        self.read(value, |env, value, out| unsafe { sys::napi_get_value_uint32(env, value, out) })
    }

    pub(super) fn get_bool(self, value: Js<'call>) -> Option<bool> {
        self.read(value, |env, value, out| unsafe { sys::napi_get_value_bool(env, value, out) })
    }

    /// Appends a string's UTF-8 (without its NUL) to `out`, at most `room - 1` bytes of it;
    /// returns the bytes appended. A string has whole characters only: never a partial one.
    pub(super) fn append_utf8(self, value: Js<'call>, out: &mut Vec<u8>, room: usize) -> Result<usize> {
        out.reserve(room);
        let at = out.len();
        let mut written = 0usize;
        // SAFETY: the env and value are live for `'call`; `out` has room for `room` bytes past
        // `at`, which Node-API writes at most (the NUL included).
        napi_ok(unsafe { sys::napi_get_value_string_utf8(self.raw, value.raw, out.as_mut_ptr().add(at).cast(), room, &mut written) })?;
        // SAFETY: Node-API initialised `written` bytes (the NUL is not counted).
        unsafe { out.set_len(at + written) };
        Ok(written)
    }

    /// A string's length in UTF-8 bytes.
    pub(super) fn utf8_len(self, value: Js<'call>) -> Result<usize> {
        let mut len = 0;
        // SAFETY: the env and value are live for `'call`; with no buffer, only the length is written.
        napi_ok(unsafe { sys::napi_get_value_string_utf8(self.raw, value.raw, ptr::null_mut(), 0, &mut len) })?;
        Ok(len)
    }

    /// A Buffer's store: its address and length. Whoever reads it through the pointer
    /// answers for no JS running meanwhile (which could detach it).
    pub(super) fn buffer_info(self, value: Js<'call>) -> Result<(*const u8, usize)> {
        let (mut data, mut len) = (ptr::null_mut(), 0);
        // SAFETY: the env and value are live for `'call`; the out-pointers are live locals.
        napi_ok(unsafe { sys::napi_get_buffer_info(self.raw, value.raw, &mut data, &mut len) })?;
        Ok((data.cast_const().cast(), len))
    }

    /// Tells V8 of memory held outside its heap for JS objects (negative: let go of).
    pub(super) fn adjust_external_memory(self, change: i64) {
        let mut total = 0;
        // SAFETY: the env is live on this thread; `total` is a live local.
        unsafe { sys::napi_adjust_external_memory(self.raw, change, &mut total) };
    }

    /// A strong reference to `value`.
    pub(super) fn reference(self, value: Js<'call>) -> Result<Reference> {
        let mut raw = ptr::null_mut();
        // SAFETY: the env and value are live for `'call`.
        napi_ok(unsafe { sys::napi_create_reference(self.raw, value.raw, 1, &mut raw) })?;
        Ok(Reference { env: self.raw, raw })
    }

    /// An External holding `data`, tagged as `T`'s; Node releases it (`Finalize`) when JS lets
    /// go of the External, or at once if Node refuses to make it.
    pub(super) fn external<T: Tagged>(self, data: T) -> Result<Js<'call>> {
        let mut out = ptr::null_mut();
        // SAFETY: the env is live; `out` is a live local; the External's data is the Box.
        self.give(data, |boxed, finalize| unsafe { sys::napi_create_external(self.raw, boxed, finalize, boxed, &mut out) })
            .map_err(|(data, e)| {
                data.finalize(self);
                e
            })?;
        // SAFETY: the env and the new External are live; the tag is static.
        napi_ok(unsafe { sys::napi_type_tag_object(self.raw, out, &T::TAG) })?;
        Ok(Js::new(out))
    }

    /// The data of `value` if it is an External of ours tagged as `T`'s (see [`external`](Self::external)).
    pub(super) fn external_data<T: Tagged>(self, value: Js<'call>) -> Result<Option<&'call T>> {
        let mut tagged = false;
        // SAFETY: the env and value are live for `'call`; the tag is static.
        napi_ok(unsafe { sys::napi_check_object_type_tag(self.raw, value.raw, &T::TAG, &mut tagged) })?;
        if !tagged {
            return Ok(None);
        }
        let mut data = ptr::null_mut();
        // SAFETY: as above; `value` is an External (only `external` tags our objects).
        napi_ok(unsafe { sys::napi_get_value_external(self.raw, value.raw, &mut data) })?;
        // SAFETY: an External tagged `T::TAG` was made by `external::<T>`, and holds a Box<T>
        // until its finalizer runs, which it cannot while the handle `value` keeps it alive
        // (`'call`). Node hands out no other reference to it: it is shared, never mutable.
        Ok(Some(unsafe { &*data.cast::<T>() }))
    }

    /// Gives the env its instance data, which Node releases (`Finalize`) as the env ends.
    pub(super) fn set_instance_data<T: Finalize>(self, data: T) -> Result<()> {
        // SAFETY: the env is live; the instance data is the Box.
        self.give(data, |boxed, finalize| unsafe { sys::napi_set_instance_data(self.raw, boxed, finalize, boxed) }).map_err(|(data, e)| {
            data.finalize(self);
            e
        })
    }

    /// Hands a Box of `data` to Node through `give`, which passes one Node-API call the Box's
    /// address as the finalize hint and `finalize_box::<T>` as the finalizer, for Node to free
    /// it once. If the call fails, Node has not taken it: the data comes back.
    fn give<T: Finalize>(self, data: T, give: impl FnOnce(*mut c_void, sys::napi_finalize) -> sys::napi_status) -> std::result::Result<(), (T, JsError)> {
        let boxed = Box::into_raw(Box::new(data));
        napi_ok(give(boxed.cast(), Some(finalize_box::<T>))).map_err(|e| {
            // SAFETY: the call failed, so Node did not take the Box: it is ours alone.
            (*unsafe { Box::from_raw(boxed) }, e)
        })
    }

    /// The instance data's address (null before `set_instance_data`): whoever dereferences
    /// it answers for the type and for the borrow.
    pub(super) fn instance_data(self) -> Result<*mut c_void> {
        let mut data = ptr::null_mut();
        // SAFETY: the env is live; `data` is a live local.
        napi_ok(unsafe { sys::napi_get_instance_data(self.raw, &mut data) })?;
        Ok(data)
    }
}

/// A handle scope, closed when dropped (a panic included): the values made in it live until
/// then. It gives the env for its own lifetime.
#[cfg(native_socket)]
pub(super) struct HandleScope {
    env: sys::napi_env,
    scope: sys::napi_handle_scope,
}

#[cfg(native_socket)]
impl HandleScope {
    /// # Safety
    /// `env` is live on this thread, which runs no JS (a callback from the env's loop), and
    /// stays live while the scope is open.
    pub(super) unsafe fn open(env: sys::napi_env) -> Self {
        let mut scope = ptr::null_mut();
        // SAFETY: the caller's promise.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        HandleScope { env, scope }
    }

    pub(super) fn env(&self) -> JsEnv<'_> {
        JsEnv { raw: self.env, call: PhantomData }
    }
}

#[cfg(native_socket)]
impl Drop for HandleScope {
    fn drop(&mut self) {
        // SAFETY: closes the scope `open` opened, on the same thread, innermost first (the
        // scope lives in a local of the function that opened it).
        unsafe { sys::napi_close_handle_scope(self.env, self.scope) };
    }
}
