//! The worker's global allocator: the system allocator, counting the bytes it holds into
//! `monty_types::LIVE_MEMORY`, which is what the Python interpreter's memory limit reads
//! (monty leaves the counting to the embedding program; without it the limit is silently
//! not enforced). One relaxed atomic add or subtract per allocation; the JavaScript engine
//! keeps its own count (`javascript/heap_bytes.rs`) and is unaffected.

use monty_types::{BASELINE_MEMORY, LIVE_MEMORY};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::Ordering;

pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adjusts a counter afterwards, so `System`'s guarantees hold as they are.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_MEMORY.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_MEMORY.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            if new_size >= layout.size() {
                LIVE_MEMORY.fetch_add(new_size - layout.size(), Ordering::Relaxed);
            } else {
                LIVE_MEMORY.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        new
    }
}

/// Starts the program's memory budget from what the process holds now (the interpreter
/// charges a program only what it allocates after this).
pub fn arm() {
    BASELINE_MEMORY.store(LIVE_MEMORY.load(Ordering::Relaxed), Ordering::Relaxed);
}
