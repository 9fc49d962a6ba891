//! The few libuv functions the socket transport needs, found at run time in the node binary
//! that loaded us (it exports libuv). Resolving them with `dlsym` rather than linking keeps
//! `cargo test` binaries free of undefined symbols.

use std::alloc::Layout;
use std::ffi::{c_int, c_void, CStr};
use std::io;
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

/// The layout of a `uv_poll_t`, of the size libuv reports; None for a size no allocation can
/// have (zero, for which `alloc_zeroed` is undefined, or one too large for a `Layout`).
fn poll_layout(uv: &Uv) -> Option<Layout> {
    // SAFETY: uv_handle_size is a pure query.
    handle_layout(unsafe { (uv.handle_size)(UV_POLL) })
}

fn handle_layout(size: usize) -> Option<Layout> {
    if size == 0 {
        return None;
    }
    Layout::from_size_align(size, 16).ok()
}

/// Memory for one `uv_poll_t`, zeroed; freed by [`free_poll`]. Out of memory is an error
/// (ENOMEM, which the connect reports to JS) rather than an abort.
pub fn alloc_poll(uv: &Uv) -> io::Result<*mut c_void> {
    let layout = poll_layout(uv).ok_or_else(|| io::Error::other("libuv reports no usable size for uv_poll_t"))?;
    // SAFETY: the layout's size is non-zero.
    let poll = unsafe { std::alloc::alloc_zeroed(layout) };
    if poll.is_null() {
        return Err(io::Error::from_raw_os_error(libc::ENOMEM));
    }
    Ok(poll.cast())
}

/// The close callback that frees a handle from [`alloc_poll`].
pub unsafe extern "C" fn free_poll(handle: *mut c_void) {
    // alloc_poll made the handle with this layout, so it is there; were it not, leaking the
    // handle beats a panic, which cannot unwind into libuv.
    let Some(layout) = uv().ok().and_then(poll_layout) else { return };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_size_no_allocation_can_have_is_refused() {
        assert_eq!(handle_layout(0), None);
        assert_eq!(handle_layout(usize::MAX), None);
        let layout = handle_layout(136).unwrap();
        assert_eq!((layout.size(), layout.align()), (136, 16));
    }
}
