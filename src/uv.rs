//! The few libuv functions the socket transport needs, found at run time in the node binary
//! that loaded us (it exports libuv). Resolving them with `dlsym` rather than linking keeps
//! `cargo test` binaries free of undefined symbols.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;
/// `uv_handle_type` of a poll handle.
const UV_POLL: c_int = 8;

pub type PollCallback = unsafe extern "C" fn(handle: *mut c_void, status: c_int, events: c_int);
pub type CloseCallback = unsafe extern "C" fn(handle: *mut c_void);

type PollInit = unsafe extern "C" fn(event_loop: *mut c_void, handle: *mut c_void, fd: c_int) -> c_int;
type PollStart = unsafe extern "C" fn(handle: *mut c_void, events: c_int, cb: PollCallback) -> c_int;
type PollStop = unsafe extern "C" fn(handle: *mut c_void) -> c_int;
type Close = unsafe extern "C" fn(handle: *mut c_void, cb: Option<CloseCallback>);
type HandleSize = unsafe extern "C" fn(kind: c_int) -> usize;

pub struct Uv {
    pub poll_init: PollInit,
    pub poll_start: PollStart,
    pub poll_stop: PollStop,
    pub close: Close,
    pub handle_size: HandleSize,
}

fn symbol(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a name up; the name is NUL-terminated.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if found.is_null() {
        Err(format!("libuv symbol {} not found in this process", name.to_string_lossy()))
    } else {
        Ok(found)
    }
}

/// libuv, or why it could not be found.
pub fn uv() -> Result<&'static Uv, String> {
    static UV: OnceLock<Result<Uv, String>> = OnceLock::new();
    UV.get_or_init(|| {
        // SAFETY: each symbol is libuv's own function of exactly this signature (uv.h).
        unsafe {
            Ok(Uv {
                poll_init: std::mem::transmute::<*mut c_void, PollInit>(symbol(c"uv_poll_init")?),
                poll_start: std::mem::transmute::<*mut c_void, PollStart>(symbol(c"uv_poll_start")?),
                poll_stop: std::mem::transmute::<*mut c_void, PollStop>(symbol(c"uv_poll_stop")?),
                close: std::mem::transmute::<*mut c_void, Close>(symbol(c"uv_close")?),
                handle_size: std::mem::transmute::<*mut c_void, HandleSize>(symbol(c"uv_handle_size")?),
            })
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Memory for one `uv_poll_t`, of the size libuv reports, zeroed; freed by [`free_poll`].
pub fn alloc_poll(uv: &Uv) -> *mut c_void {
    // SAFETY: uv_handle_size is a pure query.
    let size = unsafe { (uv.handle_size)(UV_POLL) };
    let layout = std::alloc::Layout::from_size_align(size, 16).expect("uv_poll_t layout");
    // SAFETY: size is non-zero (libuv handles are dozens of bytes).
    unsafe { std::alloc::alloc_zeroed(layout).cast() }
}

/// The close callback that frees a handle from [`alloc_poll`].
pub unsafe extern "C" fn free_poll(handle: *mut c_void) {
    let uv = uv().expect("libuv was resolved when the handle was made");
    // SAFETY: uv_handle_size is a pure query; the layout is the one alloc_poll used.
    let size = unsafe { (uv.handle_size)(UV_POLL) };
    let layout = std::alloc::Layout::from_size_align(size, 16).expect("uv_poll_t layout");
    // SAFETY: `handle` came from alloc_poll and libuv is done with it (this is its close callback).
    unsafe { std::alloc::dealloc(handle.cast(), layout) };
}

/// `handle->data`, the first field of every libuv handle.
///
/// # Safety
/// `handle` must point at a live libuv handle.
pub unsafe fn set_data(handle: *mut c_void, data: *mut c_void) {
    // SAFETY: uv_handle_t starts with `void* data` (uv.h, UV_HANDLE_FIELDS).
    unsafe { *handle.cast::<*mut c_void>() = data };
}

/// # Safety
/// `handle` must point at a live libuv handle.
pub unsafe fn data(handle: *mut c_void) -> *mut c_void {
    // SAFETY: as in set_data.
    unsafe { *handle.cast::<*mut c_void>() }
}
