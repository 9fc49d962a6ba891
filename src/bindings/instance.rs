//! State kept per env (Node-API's instance data), not per thread: an embedder may run several
//! envs on one thread, and a reference made in one env must never be used in another.

use super::env::{Finalize, Js, JsEnv, Strings};
use super::errors::{JsError, WordsArgs};
use napi::bindgen_prelude::{Env, Function, FunctionRef, Unknown};
use std::collections::HashMap;

/// The function lib/core_errors.js words the core's errors with: (id, a, b, c) to an Error.
type Words = FunctionRef<WordsArgs, Unknown<'static>>;

/// One env's state, made when the module is loaded into it and freed when the env goes.
pub(super) struct Instance {
    /// The JS strings of the property names the encoder reads (see `marshal.rs`).
    keys: Strings,
    /// Each name's index in `keys`, by the name's address and length: the names are static, so
    /// that identifies them without hashing their text (the address alone does not: a name may
    /// be laid out as the start of a longer one, "app" of "appId").
    indices: HashMap<(usize, usize), u32, ahash::RandomState>,
    /// The words of the core's errors (`errors.rs`), once JS has given them.
    words: Option<Words>,
}

impl Finalize for Instance {
    fn finalize(self, env: JsEnv<'_>) {
        self.keys.delete(env);
    }
}

/// Gives `env` its state; called once, as the module is loaded into it.
pub(super) fn install(env: JsEnv<'_>) -> Result<(), JsError> {
    env.set_instance_data(Instance { keys: Strings::new(env)?, indices: HashMap::default(), words: None })
}

/// Runs `f` on the env's state. `f` must run no JS, so that no other call into the addon can
/// begin while it holds the state.
fn with_instance<T>(env: JsEnv<'_>, f: impl FnOnce(&mut Instance) -> T) -> Result<T, JsError> {
    let data = env.instance_data()?;
    if data.is_null() {
        return Err(JsError::plain("amqplib-rs was not initialised in this env"));
    }
    // SAFETY: the instance data is only ever the Instance `install` set, alive until the env
    // ends. This is the only borrow of it, for `f` alone, which runs no JS.
    Ok(f(unsafe { &mut *data.cast::<Instance>() }))
}

/// The JS string for the static name `key` in `env`, made once per env: fetching it back is
/// cheaper than making and internalising a new string for every property read of every
/// publish. Runs no JS.
pub(super) fn key<'call>(env: JsEnv<'call>, key: &'static str) -> Result<Js<'call>, JsError> {
    let identity = (key.as_ptr() as usize, key.len());
    with_instance(env, |instance| {
        if let Some(&index) = instance.indices.get(&identity) {
            return instance.keys.get(env, index);
        }
        let out = env.string(key.as_bytes())?;
        let index = instance.keys.push(env, out)?;
        instance.indices.insert(identity, index);
        Ok(out)
    })?
}

/// Keeps the words of the core's errors for this env (`setErrorWords`).
pub(super) fn set_error_words(env: &Env, words: Function<'_, WordsArgs, Unknown<'static>>) -> Result<(), JsError> {
    let words = words.create_ref()?;
    with_instance(JsEnv::of(env), |instance| instance.words = Some(words))
}

/// The words of the core's errors, as JS gave them.
pub(super) fn error_words<'call>(env: &'call Env) -> Result<Function<'call, WordsArgs, Unknown<'static>>, JsError> {
    let words = with_instance(JsEnv::of(env), |instance| instance.words.as_ref().map(|words| words.borrow_back(env)))?;
    Ok(words.ok_or_else(|| JsError::plain("no words for the core's errors"))??)
}
