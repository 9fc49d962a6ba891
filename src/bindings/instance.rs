//! State kept per env (Node-API's instance data), not per thread: an embedder may run several
//! envs on one thread, and a reference made in one env must never be used in another.

use super::errors::{napi_ok, JsError};
use super::handover::define_elements;
use napi::sys;
use std::collections::HashMap;
use std::ptr;

/// One env's state, made when the module is loaded into it and freed when the env goes.
pub(super) struct Instance {
    /// The JS strings of the property names the encoder reads (see `marshal.rs`), in an
    /// Array of ours that no JS sees (a reference to a string needs Node-API 10).
    keys: sys::napi_ref,
    /// Each name's index in `keys`, by the name's address: the names are static, so that
    /// identifies them without hashing their text.
    indices: HashMap<usize, u32, ahash::RandomState>,
}

unsafe extern "C" fn drop_instance(env: sys::napi_env, data: *mut std::ffi::c_void, _hint: *mut std::ffi::c_void) {
    // SAFETY: `data` is the Box<Instance> leaked in `install`, finalised once, as the env ends.
    let instance = unsafe { Box::from_raw(data.cast::<Instance>()) };
    // SAFETY: the reference was made in this env, and is deleted only here.
    unsafe { sys::napi_delete_reference(env, instance.keys) };
}

/// Gives `env` its state; called once, as the module is loaded into it.
pub(super) fn install(env: sys::napi_env) -> Result<(), JsError> {
    let (mut array, mut keys) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: env is live (the module's initialisation).
    unsafe {
        napi_ok(sys::napi_create_array(env, &mut array))?;
        napi_ok(sys::napi_create_reference(env, array, 1, &mut keys))?;
    }
    let instance = Box::into_raw(Box::new(Instance { keys, indices: HashMap::default() }));
    // SAFETY: Node owns the Box from here and hands it to `drop_instance`, unless the call
    // fails, and then it is taken back.
    let status = unsafe { sys::napi_set_instance_data(env, instance.cast(), Some(drop_instance), ptr::null_mut()) };
    if status != sys::Status::napi_ok {
        // SAFETY: Node did not take the Box, so the reference is still ours alone.
        unsafe { sys::napi_delete_reference(env, Box::from_raw(instance).keys) };
    }
    napi_ok(status)
}

/// The JS string for the static name `key` in `env`, made once per env: fetching it back is
/// cheaper than making and internalising a new string for every property read of every
/// publish. Runs no JS.
pub(super) fn key(env: sys::napi_env, key: &'static str) -> Result<sys::napi_value, JsError> {
    let mut data = ptr::null_mut();
    // SAFETY: env is live on this thread.
    napi_ok(unsafe { sys::napi_get_instance_data(env, &mut data) })?;
    if data.is_null() {
        return Err(JsError::plain("amqplib-rs was not initialised in this env"));
    }
    // SAFETY: the instance data is only ever the Instance `install` set, alive until the env
    // ends. This is the only borrow of it: nothing below runs JS, so no other call into the
    // addon can begin before it ends.
    let instance = unsafe { &mut *data.cast::<Instance>() };
    let (mut array, mut out) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the reference is strong, made in this env. Reading an element the array has
    // finds it on the array itself, without looking at Array.prototype.
    unsafe {
        napi_ok(sys::napi_get_reference_value(env, instance.keys, &mut array))?;
        if let Some(&index) = instance.indices.get(&(key.as_ptr() as usize)) {
            napi_ok(sys::napi_get_element(env, array, index, &mut out))?;
            return Ok(out);
        }
        // SAFETY: key points at key.len() valid bytes.
        napi_ok(sys::napi_create_string_utf8(env, key.as_ptr().cast(), key.len() as isize, &mut out))?;
    }
    let index = instance.indices.len();
    define_elements(env, array, index, &[out])?;
    instance.indices.insert(key.as_ptr() as usize, index as u32);
    Ok(out)
}
