//! Unix permission bits written as octal strings, e.g. `socket_mode = "0660"`.

/// Why a permission string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileModeError {
    /// The string is not 1 to 4 octal digits.
    #[error("invalid mode \"{text}\": expected octal permission bits such as \"0660\"")]
    NotOctal {
        /// The rejected string.
        text: String,
    },
    /// Bits beyond the permission bits (setuid, setgid, sticky or higher) are set.
    #[error(
        "invalid mode \"{text}\": only permission bits (0000 to 0777) are allowed, not setuid, setgid or sticky"
    )]
    BeyondPermissionBits {
        /// The rejected string.
        text: String,
    },
}

/// The largest accepted mode.
pub const MAX_FILE_MODE: u32 = 0o777;

/// Parses `"0660"`, `"660"` or `"0o660"` into permission bits (at most `0o777`).
pub fn parse_file_mode(text: &str) -> Result<u32, FileModeError> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    let not_octal = || FileModeError::NotOctal {
        text: text.to_owned(),
    };
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        return Err(not_octal());
    }
    let mode = u32::from_str_radix(digits, 8).map_err(|_| not_octal())?;
    if mode > MAX_FILE_MODE {
        return Err(FileModeError::BeyondPermissionBits {
            text: text.to_owned(),
        });
    }
    Ok(mode)
}

/// Formats permission bits the way they are written in the policy file, e.g. `"0660"`.
pub fn format_file_mode(mode: u32) -> String {
    format!("{mode:04o}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_strings() {
        assert_eq!(parse_file_mode("0660"), Ok(0o660));
        assert_eq!(parse_file_mode("660"), Ok(0o660));
        assert_eq!(parse_file_mode("0o600"), Ok(0o600));
        assert_eq!(parse_file_mode("0777"), Ok(0o777));
        assert_eq!(parse_file_mode("0"), Ok(0));
    }

    #[test]
    fn rejects_non_octal_and_special_bits() {
        for text in ["", "0o", "0680", "rw-rw----", "00660", "0x1b6", " 0660"] {
            assert!(
                matches!(parse_file_mode(text), Err(FileModeError::NotOctal { .. })),
                "{text:?}"
            );
        }
        for text in ["4755", "1777", "2770"] {
            assert!(
                matches!(
                    parse_file_mode(text),
                    Err(FileModeError::BeyondPermissionBits { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn formats_with_four_digits() {
        assert_eq!(format_file_mode(0o660), "0660");
        assert_eq!(format_file_mode(0o7), "0007");
    }
}
