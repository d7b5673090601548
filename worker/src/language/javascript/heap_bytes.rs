//! The engine's allocator: the C library's `malloc`, counting the bytes the runtime holds.
//!
//! `stats.heap_used_bytes` used to come from `JS_ComputeMemoryUsage`, which walks every
//! object, shape and atom of the heap: about a tenth of a forked worker's CPU time for a
//! trivial program, spent after the program ended and before `Done`. Counting at allocation
//! time costs one `malloc_usable_size` per call instead, and reading the count costs nothing.

use rquickjs::allocator::Allocator;
use std::cell::Cell;
use std::rc::Rc;

/// Bytes the engine holds from `malloc` now (usable sizes, so what the C library set aside).
#[derive(Debug, Clone, Default)]
pub struct HeapBytes(Rc<Cell<usize>>);

impl HeapBytes {
    pub fn get(&self) -> usize {
        self.0.get()
    }

    fn add(&self, ptr: *mut u8) {
        if !ptr.is_null() {
            // SAFETY: `ptr` was just returned by malloc/calloc/realloc and is live.
            let n = unsafe { libc::malloc_usable_size(ptr.cast()) };
            self.0.set(self.0.get().saturating_add(n));
        }
    }

    fn remove(&self, ptr: *mut u8) {
        if !ptr.is_null() {
            // SAFETY: `ptr` is a live allocation of this allocator, not yet freed.
            let n = unsafe { libc::malloc_usable_size(ptr.cast()) };
            self.0.set(self.0.get().saturating_sub(n));
        }
    }
}

/// `malloc` and friends, each allocation counted in a [`HeapBytes`].
#[derive(Debug)]
pub struct CountingAllocator(pub HeapBytes);

// SAFETY: every pointer comes from the C library's allocator, which aligns to at least 16
// bytes (more than `usize`) and gives at least the size asked for; `usable_size` is the C
// library's own answer for its allocations.
unsafe impl Allocator for CountingAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        // SAFETY: plain malloc; a null result is passed on to QuickJS as out of memory.
        let ptr = unsafe { libc::malloc(size) }.cast::<u8>();
        self.0.add(ptr);
        ptr
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        // SAFETY: plain calloc, which checks `count * size` for overflow itself.
        let ptr = unsafe { libc::calloc(count, size) }.cast::<u8>();
        self.0.add(ptr);
        ptr
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        self.0.remove(ptr);
        // SAFETY: the caller passes an allocation of this allocator (rquickjs's contract).
        unsafe { libc::free(ptr.cast()) };
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        // Counted out before the call: a successful realloc may free `ptr`. On failure the old
        // block stays allocated, so it is counted back in.
        self.0.remove(ptr);
        // SAFETY: `ptr` is null or an allocation of this allocator (rquickjs's contract).
        let moved = unsafe { libc::realloc(ptr.cast(), new_size) }.cast::<u8>();
        if moved.is_null() && new_size != 0 {
            self.0.add(ptr);
        } else {
            self.0.add(moved);
        }
        moved
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller passes a live allocation of this allocator.
        unsafe { libc::malloc_usable_size(ptr.cast()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_held_and_forgets_what_is_freed() {
        let bytes = HeapBytes::default();
        let mut a = CountingAllocator(bytes.clone());
        let p = a.alloc(1000);
        assert!(bytes.get() >= 1000);
        // SAFETY: p is this allocator's, live.
        let q = unsafe { a.realloc(p, 100_000) };
        assert!(bytes.get() >= 100_000);
        let r = a.calloc(10, 10);
        let held = bytes.get();
        // SAFETY: r and q are this allocator's, live, freed once each.
        unsafe { a.dealloc(r) };
        assert!(bytes.get() < held);
        // SAFETY: q is this allocator's, live, freed once.
        unsafe { a.dealloc(q) };
        assert_eq!(bytes.get(), 0);
    }
}
