//! User and group accounts: resolves the names written in `users` and `groups` to numeric ids
//! through the system's user database (NSS: `getpwnam_r`, `getgrnam_r`), and knows the daemon's
//! own effective uid for `"@daemon"`.
//!
//! Names are resolved once, when the policy is loaded; a renamed or deleted account takes effect at
//! the next reload.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::ptr;

use libc::c_char;

/// Why an account lookup failed (other than "no such account", which is `Ok(None)`).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The name contains a NUL byte and cannot be passed to the C library.
    #[error("account name contains a NUL byte")]
    NulByte,
    /// The user database itself failed (unreadable file, NSS module error, ...).
    #[error("user database lookup failed: {0}")]
    Database(#[source] io::Error),
}

/// The effective uid the current process runs as.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
}

/// Looks up a user name; `Ok(None)` if no such user exists.
pub fn uid_of_user(name: &str) -> Result<Option<u32>, AccountError> {
    let name = CString::new(name).map_err(|_| AccountError::NulByte)?;
    let mut entry = MaybeUninit::<libc::passwd>::uninit();
    lookup(libc::_SC_GETPW_R_SIZE_MAX, |buffer, found| {
        // SAFETY: `name` is a NUL-terminated string, `entry` is writable storage for one
        // `passwd`, `buffer` is a writable region of exactly `buffer.len()` bytes, and `found` is a
        // valid out-pointer; all outlive the call. glibc's getpwnam_r is thread-safe.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                entry.as_mut_ptr(),
                buffer.as_mut_ptr(),
                buffer.len(),
                found,
            )
        };
        let id = if found.is_null() {
            None
        } else {
            // SAFETY: a non-null result points at `entry`, which getpwnam_r has filled in.
            Some(unsafe { (**found).pw_uid })
        };
        (rc, id)
    })
}

/// Looks up a group name; `Ok(None)` if no such group exists.
pub fn gid_of_group(name: &str) -> Result<Option<u32>, AccountError> {
    let name = CString::new(name).map_err(|_| AccountError::NulByte)?;
    let mut entry = MaybeUninit::<libc::group>::uninit();
    lookup(libc::_SC_GETGR_R_SIZE_MAX, |buffer, found| {
        // SAFETY: as in `uid_of_user`: valid NUL-terminated name, writable `group` storage, a
        // writable buffer of the stated length and a valid out-pointer, all outliving the call.
        let rc = unsafe {
            libc::getgrnam_r(
                name.as_ptr(),
                entry.as_mut_ptr(),
                buffer.as_mut_ptr(),
                buffer.len(),
                found,
            )
        };
        let id = if found.is_null() {
            None
        } else {
            // SAFETY: a non-null result points at `entry`, which getgrnam_r has filled in.
            Some(unsafe { (**found).gr_gid })
        };
        (rc, id)
    })
}

/// Largest scratch buffer we grow to before giving up (huge groups can need a lot).
const MAX_BUFFER: usize = 16 << 20;

/// Runs one `get*nam_r` call with a scratch buffer, growing the buffer while the C library says
/// `ERANGE`. `call` returns the function's error number and the id it found.
fn lookup<T>(
    size_hint: libc::c_int,
    mut call: impl FnMut(&mut [c_char], &mut *mut T) -> (libc::c_int, Option<u32>),
) -> Result<Option<u32>, AccountError> {
    // SAFETY: sysconf only reads a configuration value.
    let hint = unsafe { libc::sysconf(size_hint) };
    let mut size = usize::try_from(hint)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(1024)
        .clamp(1024, MAX_BUFFER);
    loop {
        let mut buffer = vec![0 as c_char; size];
        let mut found: *mut T = ptr::null_mut();
        let (rc, id) = call(&mut buffer, &mut found);
        match rc {
            0 => return Ok(id),
            libc::ERANGE if size < MAX_BUFFER => size = (size * 2).min(MAX_BUFFER),
            // getpwnam_r(3): "0 or ENOENT or ESRCH or EBADF or EPERM or ..." mean "not found".
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(AccountError::Database(io::Error::from_raw_os_error(errno))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_exists_everywhere() {
        assert_eq!(uid_of_user("root").unwrap(), Some(0));
        assert_eq!(gid_of_group("root").unwrap(), Some(0));
    }

    #[test]
    fn unknown_names_are_none() {
        assert_eq!(uid_of_user("airlock-test-no-such-user").unwrap(), None);
        assert_eq!(gid_of_group("airlock-test-no-such-group").unwrap(), None);
    }

    #[test]
    fn nul_bytes_are_rejected() {
        assert!(matches!(uid_of_user("ro\0ot"), Err(AccountError::NulByte)));
    }

    #[test]
    fn effective_uid_matches_the_c_library() {
        // SAFETY: geteuid cannot fail.
        assert_eq!(effective_uid(), unsafe { libc::geteuid() });
    }
}
