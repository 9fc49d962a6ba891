//! State kept per env (Node-API's instance data), not per thread: an embedder may run several
//! envs on one thread, and a reference made in one env must never be used in another.

use super::env::{Finalize, Js, JsEnv, Strings};
use super::errors::JsError;
use std::collections::HashMap;

/// One env's state, made when the module is loaded into it and freed when the env goes.
pub(super) struct Instance {
    /// The JS strings of the property names the encoder reads (see `marshal.rs`).
    keys: Strings,
    /// Each name's index in `keys`, by the name's address: the names are static, so that
    /// identifies them without hashing their text.
    indices: HashMap<usize, u32, ahash::RandomState>,
}

impl Finalize for Instance {
    fn finalize(self, env: JsEnv<'_>) {
        self.keys.delete(env);
    }
}

/// Gives `env` its state; called once, as the module is loaded into it.
pub(super) fn install(env: JsEnv<'_>) -> Result<(), JsError> {
    env.set_instance_data(Instance { keys: Strings::new(env)?, indices: HashMap::default() })
}

/// The JS string for the static name `key` in `env`, made once per env: fetching it back is
/// cheaper than making and internalising a new string for every property read of every
/// publish. Runs no JS.
pub(super) fn key<'call>(env: JsEnv<'call>, key: &'static str) -> Result<Js<'call>, JsError> {
    let data = env.instance_data()?;
    if data.is_null() {
        return Err(JsError::plain("amqplib-rs was not initialised in this env"));
    }
    // SAFETY: the instance data is only ever the Instance `install` set, alive until the env
    // ends. This is the only borrow of it: nothing below runs JS, so no other call into the
    // addon can begin before it ends.
    let instance = unsafe { &mut *data.cast::<Instance>() };
    if let Some(&index) = instance.indices.get(&(key.as_ptr() as usize)) {
        return instance.keys.get(env, index);
    }
    let out = env.string(key.as_bytes())?;
    let index = instance.keys.push(env, out)?;
    instance.indices.insert(key.as_ptr() as usize, index);
    Ok(out)
}
