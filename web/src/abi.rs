//! The WebAssembly interface (`wasm32` only), for `web/www/src/mlpl.js`.
//!
//! Strings cross as UTF-8 in linear memory: JavaScript asks `mlpl_alloc` for
//! room, writes its text and calls a function, which frees the text and leaves
//! its JSON answer for `mlpl_result_ptr` / `mlpl_result_len` to read. The module
//! imports from `env`: the clocks (`performance.now()`, `Date.now()`), the step
//! sink and a panic reporter.

use std::cell::RefCell;

#[link(wasm_import_module = "env")]
extern "C" {
    fn mlpl_now_ms() -> f64;
    fn mlpl_unix_ms() -> f64;
    fn mlpl_step(train_loop: u32, step: u32, total: u32, loss: f64, step_ms: f64);
    fn mlpl_panic(ptr: *const u8, len: usize);
}

thread_local! {
    static RESULT: RefCell<String> = const { RefCell::new(String::new()) };
    static SESSION: RefCell<Option<super::Session>> = const { RefCell::new(None) };
}

fn now_ms() -> f64 {
    unsafe { mlpl_now_ms() }
}

fn unix_ms() -> f64 {
    unsafe { mlpl_unix_ms() }
}

fn step(train_loop: usize, step: usize, total: usize, loss: f64, step_ms: f64) {
    unsafe { mlpl_step(train_loop as u32, step as u32, total as u32, loss, step_ms) }
}

fn init() {
    mlpl_devices::clock::set_source(now_ms, unix_ms);
    std::panic::set_hook(Box::new(|info| {
        let text = info.to_string();
        unsafe { mlpl_panic(text.as_ptr(), text.len()) }
    }));
}

/// Takes the text JavaScript wrote at `ptr` (allocated by `mlpl_alloc`).
unsafe fn take(ptr: *mut u8, len: usize) -> String {
    let bytes = Vec::from_raw_parts(ptr, len, len);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn answer(s: String) {
    RESULT.with(|r| *r.borrow_mut() = s);
}

#[no_mangle]
pub extern "C" fn mlpl_init() {
    init();
}

#[no_mangle]
pub extern "C" fn mlpl_alloc(len: usize) -> *mut u8 {
    let mut v = Vec::<u8>::with_capacity(len);
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

#[no_mangle]
pub extern "C" fn mlpl_result_ptr() -> *const u8 {
    RESULT.with(|r| r.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn mlpl_result_len() -> usize {
    RESULT.with(|r| r.borrow().len())
}

#[no_mangle]
pub unsafe extern "C" fn mlpl_check(ptr: *mut u8, len: usize) {
    answer(super::check(&take(ptr, len)));
}

#[no_mangle]
pub unsafe extern "C" fn mlpl_hover(ptr: *mut u8, len: usize, offset: usize) {
    answer(super::hover(&take(ptr, len), offset));
}

#[no_mangle]
pub unsafe extern "C" fn mlpl_complete(ptr: *mut u8, len: usize, offset: usize) {
    answer(super::complete(&take(ptr, len), offset));
}

/// `compare`'s report of two experiment records (`{"a", "b"}`).
#[no_mangle]
pub unsafe extern "C" fn mlpl_compare(ptr: *mut u8, len: usize) {
    answer(super::compare(&take(ptr, len)));
}

/// Runs a whole program in a fresh session.
#[no_mangle]
pub unsafe extern "C" fn mlpl_run(ptr: *mut u8, len: usize) {
    let src = take(ptr, len);
    answer(super::Session::new(Some(step)).run(&src, 0));
}

/// Runs a cell in the module's one session (created on first use).
#[no_mangle]
pub unsafe extern "C" fn mlpl_run_cell(ptr: *mut u8, len: usize, first_line: usize) {
    let src = take(ptr, len);
    let out = SESSION.with(|s| {
        s.borrow_mut()
            .get_or_insert_with(|| super::Session::new(Some(step)))
            .run(&src, first_line)
    });
    answer(out);
}

/// Forgets the session's workspace.
#[no_mangle]
pub extern "C" fn mlpl_reset() {
    SESSION.with(|s| *s.borrow_mut() = None);
}

// The C library functions CORE-MATH's `pow` names on a path for an internal
// error (a message, then `exit`); WebAssembly has no C library, so they are
// defined here: the message is dropped and `exit` panics, which the page
// reports as an internal error. (`printf` is variadic in C: in the wasm32 C ABI
// that is the format and a pointer to the arguments.)
#[no_mangle]
pub extern "C" fn printf(_format: *const u8, _args: *const u8) -> i32 {
    0
}

#[no_mangle]
pub extern "C" fn puts(_text: *const u8) -> i32 {
    0
}

#[no_mangle]
pub extern "C" fn exit(status: i32) -> ! {
    panic!("the C math library called exit({status})")
}
