//! `airlock secret set|list|delete`: the kernel keyring of this user, directly (no daemon
//! involved), with the reader of a value typed on a terminal without echo.

use crate::EXIT_REQUEST_FAILED;
use crate::args::SecretCommand;
use airlock_supervisor::secrets::store::{KernelKeyring, SecretStore, kernel_keyring};
use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use zeroize::Zeroizing;

/// `airlock secret …`: the kernel keyring of this user, directly (no daemon involved).
pub fn run(action: SecretCommand) -> Result<ExitCode> {
    let keyring = KernelKeyring::new();
    let whose = user_label(keyring.uid());
    match action {
        SecretCommand::Set { name, rest } => {
            if !rest.is_empty() {
                anyhow::bail!(
                    "unexpected argument after the name: the value is read from stdin, never from the command line (`ps` and shell history would show it); try: airlock secret set {name} < file"
                );
            }
            if !airlock_policy::sources::server::is_secret_name(&name) {
                anyhow::bail!(
                    "`{name}` is not a valid secret name (1 to 128 ASCII letters, digits, `.`, `_` and `-`)"
                );
            }
            let value = read_value(&name)?;
            keyring
                .set(&name, &value)
                .with_context(|| format!("cannot store secret `{name}`"))?;
            eprintln!(
                "airlock: stored secret `{name}` in the kernel keyring of {whose}; an airlockd running as this user uses it the next time it starts a server that needs it"
            );
            if keyring.uid() == 0 {
                eprintln!(
                    "airlock: note: the packaged airlockd runs as `airlock`; for it use `sudo -u airlock airlock secret set {name}`"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        SecretCommand::List => {
            let listing = SecretStore::from_environment(false).names();
            let mut out = std::io::stdout().lock();
            for secret in &listing.found {
                writeln!(out, "{}\t{}", secret.name, secret.backend)?;
            }
            for problem in &listing.problems {
                eprintln!("airlock: warning: {problem}");
            }
            if listing.found.is_empty() {
                eprintln!("airlock: no secrets for {whose}");
            }
            Ok(if listing.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_REQUEST_FAILED)
            })
        }
        SecretCommand::Delete { name } => {
            if keyring
                .delete(&name)
                .with_context(|| format!("cannot delete secret `{name}`"))?
            {
                eprintln!("airlock: deleted secret `{name}` from the kernel keyring of {whose}");
                Ok(ExitCode::SUCCESS)
            } else {
                anyhow::bail!("there is no secret `{name}` in the kernel keyring of {whose}")
            }
        }
    }
}

/// "uid 999 (airlock)".
fn user_label(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("uid {uid} ({})", user.name),
        _ => format!("uid {uid}"),
    }
}

/// The secret's value from stdin: a hidden prompt on a terminal, else all of stdin. Exactly one
/// trailing newline is dropped (as for systemd credential files); an empty value is refused.
fn read_value(name: &str) -> Result<Zeroizing<String>> {
    let limit = kernel_keyring::MAX_VALUE_BYTES;
    let bytes = if std::io::stdin().is_terminal() {
        eprint!("value of secret `{name}` (input hidden, end with Enter): ");
        // ECHONL still echoes the Enter, so the next message starts on its own line.
        hidden_terminal::read_line(limit + 1)?
    } else {
        read_stdin(limit + 1)?
    };
    value_from(name, bytes, limit)
}

/// The value of secret `name` in `bytes` (read up to `limit` + 1 bytes, to tell a value over
/// `limit`): one trailing newline dropped, refused if empty, over `limit`, not UTF-8 or with a
/// NUL byte.
fn value_from(
    name: &str,
    mut bytes: Zeroizing<Vec<u8>>,
    limit: usize,
) -> Result<Zeroizing<String>> {
    if bytes.len() > limit {
        anyhow::bail!(
            "the value is longer than {limit} bytes, the most a kernel keyring key holds"
        );
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.is_empty() {
        anyhow::bail!(
            "the value is empty: give it on stdin, e.g. `airlock secret set {name} < token-file`"
        );
    }
    if std::str::from_utf8(&bytes).is_err() {
        anyhow::bail!(
            "the value is not valid UTF-8 (secrets end up in environment variables and HTTP headers)"
        );
    }
    if bytes.contains(&0) {
        anyhow::bail!(
            "the value contains a NUL byte, which no environment variable or header can carry"
        );
    }
    // Checked above; the bytes move into the `String` without a copy.
    Ok(Zeroizing::new(
        String::from_utf8(std::mem::take(&mut *bytes)).unwrap_or_default(),
    ))
}

/// Up to `limit` bytes of stdin, read straight from fd 0 into one zeroed-on-drop buffer
/// (`std::io::Stdin` would keep a copy in its own buffer).
fn read_stdin(limit: usize) -> Result<Zeroizing<Vec<u8>>> {
    let mut buffer = Zeroizing::new(vec![0u8; limit]);
    let mut len = 0;
    while len < limit {
        match nix::unistd::read(std::io::stdin(), &mut buffer[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("cannot read the value from stdin"),
        }
    }
    buffer.truncate(len);
    Ok(buffer)
}

/// Reading a line from the terminal without echoing it.
mod hidden_terminal {
    use anyhow::{Context, Result};
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    use nix::sys::termios::{LocalFlags, SetArg, Termios, tcgetattr, tcsetattr};
    use std::sync::OnceLock;
    use zeroize::{Zeroize, Zeroizing};

    /// The terminal settings to put back if a signal ends the process mid-prompt.
    static SAVED: OnceLock<libc::termios> = OnceLock::new();

    /// Puts echo back when the prompt ends, however it ends (an error, a panic).
    struct Restore(Termios);

    impl Drop for Restore {
        fn drop(&mut self) {
            // TCSAFLUSH: whatever was typed beyond the limit goes, rather than to the shell.
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSAFLUSH, &self.0);
        }
    }

    extern "C" fn restore_and_die(signal: libc::c_int) {
        if let Some(saved) = SAVED.get() {
            // SAFETY: tcsetattr, signal and raise are async-signal-safe; `saved` points to a
            // `termios` that is written once before this handler is installed and never again.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSAFLUSH, saved);
            }
        }
        // SAFETY: as above; the default action then ends the process with this signal, as if
        // the handler had not been there.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    /// One line (without its newline) of at most `limit` bytes, typed without echo. Ctrl-C
    /// and friends end the process as usual, with the terminal's echo back on.
    pub fn read_line(limit: usize) -> Result<Zeroizing<Vec<u8>>> {
        let stdin = std::io::stdin();
        let original = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
        let _ = SAVED.set(original.clone().into());
        for signal in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            let action = SigAction::new(
                SigHandler::Handler(restore_and_die),
                SaFlags::empty(),
                SigSet::empty(),
            );
            // SAFETY: the handler only makes async-signal-safe calls (see `restore_and_die`).
            unsafe { sigaction(signal, &action) }.context("cannot install a signal handler")?;
        }
        let mut hidden = original.clone();
        hidden.local_flags.remove(LocalFlags::ECHO);
        // The Enter still moves the cursor to the next line.
        hidden.local_flags.insert(LocalFlags::ECHONL);
        let _restore = Restore(original);
        tcsetattr(&stdin, SetArg::TCSAFLUSH, &hidden).context("cannot turn off echo")?;
        // Byte by byte from fd 0 (the terminal delivers whole lines anyway), into one buffer.
        let mut line = Zeroizing::new(Vec::with_capacity(limit));
        let mut byte = [0u8; 1];
        while line.len() < limit {
            match nix::unistd::read(&stdin, &mut byte) {
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) => line.push(byte[0]),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e).context("cannot read from the terminal"),
            }
        }
        // The last byte read may be part of the value.
        byte.zeroize();
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(bytes: &[u8], limit: usize) -> Result<String> {
        value_from("t", Zeroizing::new(bytes.to_vec()), limit).map(|v| v.as_str().to_owned())
    }

    #[test]
    fn user_labels() {
        assert_eq!(user_label(0), "uid 0 (root)");
        // No user database has this one.
        assert_eq!(user_label(4_000_000_123), "uid 4000000123");
    }

    #[test]
    fn one_trailing_newline_is_dropped() {
        assert_eq!(value(b"ghp_abc", 10).unwrap(), "ghp_abc");
        assert_eq!(value(b"ghp_abc\n", 10).unwrap(), "ghp_abc");
        assert_eq!(value(b"ghp_abc\n\n", 10).unwrap(), "ghp_abc\n");
        assert_eq!(value(b" a b\r\n", 10).unwrap(), " a b\r");
    }

    #[test]
    fn values_over_the_limit_are_refused() {
        // The reader reads up to limit + 1 bytes to tell.
        assert_eq!(value(b"0123456789", 10).unwrap(), "0123456789");
        assert_eq!(
            value(b"0123456789a", 10).unwrap_err().to_string(),
            "the value is longer than 10 bytes, the most a kernel keyring key holds"
        );
        // Even when the extra byte is the newline that would be dropped.
        assert!(value(b"0123456789\n", 10).is_err());
    }

    #[test]
    fn empty_values_are_refused() {
        for empty in [&b""[..], b"\n"] {
            assert_eq!(
                value(empty, 10).unwrap_err().to_string(),
                "the value is empty: give it on stdin, e.g. `airlock secret set t < token-file`"
            );
        }
    }

    #[test]
    fn values_that_no_header_can_carry_are_refused() {
        assert_eq!(
            value(b"\xff\xfe", 10).unwrap_err().to_string(),
            "the value is not valid UTF-8 (secrets end up in environment variables and HTTP headers)"
        );
        assert_eq!(
            value(b"a\0b", 10).unwrap_err().to_string(),
            "the value contains a NUL byte, which no environment variable or header can carry"
        );
    }
}
