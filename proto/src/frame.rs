//! Length-prefixed postcard framing.
//!
//! A frame is a 4-byte little-endian payload length followed by exactly that many bytes of
//! postcard. The length is checked against a maximum *before* anything is buffered, and a
//! payload must decode to exactly one message with no bytes left over, so a confused or
//! hostile peer can make the other side neither allocate without bound nor act on half a
//! message.

use serde::{Serialize, de::DeserializeOwned};

/// Largest payload either side accepts: big enough for a 16 MiB program plus its envelope,
/// small enough that a bogus length cannot make a peer reserve gigabytes.
pub const MAX_FRAME_LEN: u32 = 32 * 1024 * 1024;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge { len: u64, max: u32 },
    #[error("frame payload is malformed: {0}")]
    Malformed(String),
    #[error("frame payload has {0} trailing bytes after the message")]
    TrailingBytes(usize),
    #[error("stream ended inside a frame ({have} of {need} bytes received)")]
    Truncated { have: usize, need: usize },
}

/// Serialises `msg` into one frame (header included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = postcard::to_extend(msg, vec![0u8; HEADER_LEN])
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    let payload_len = out.len() - HEADER_LEN;
    let header = u32::try_from(payload_len)
        .ok()
        .filter(|len| *len <= MAX_FRAME_LEN)
        .ok_or(FrameError::TooLarge {
            len: u64::try_from(payload_len).unwrap_or(u64::MAX),
            max: MAX_FRAME_LEN,
        })?;
    out[..HEADER_LEN].copy_from_slice(&header.to_le_bytes());
    Ok(out)
}

/// Decodes one payload (without header) into a message; the whole payload must be consumed.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let (msg, rest) = postcard::take_from_bytes::<T>(payload)
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::TrailingBytes(rest.len()));
    }
    Ok(msg)
}

/// Decodes a packet that must hold exactly one frame (header and payload), as a
/// `SOCK_SEQPACKET` socket delivers it: the zygote's control channel.
pub fn decode_packet<T: DeserializeOwned>(packet: &[u8], max: u32) -> Result<T, FrameError> {
    let Some((header, payload)) = packet.split_first_chunk::<HEADER_LEN>() else {
        return Err(FrameError::Truncated {
            have: packet.len(),
            need: HEADER_LEN,
        });
    };
    let need = payload_len(*header, max)?;
    if payload.len() < need {
        return Err(FrameError::Truncated {
            have: payload.len(),
            need,
        });
    }
    if payload.len() > need {
        return Err(FrameError::TrailingBytes(payload.len() - need));
    }
    decode(payload)
}

/// Reads the payload length from a frame header and checks it against `max`.
pub fn payload_len(header: [u8; HEADER_LEN], max: u32) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(header);
    if len > max {
        return Err(FrameError::TooLarge {
            len: u64::from(len),
            max,
        });
    }
    Ok(len as usize)
}

/// An incremental decoder for a byte stream: feed it whatever the socket returned and take
/// complete payloads out. Used by the supervisor's async reader; the worker reads frames
/// with blocking `read_exact` instead.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    start: usize,
    max: u32,
}

impl FrameDecoder {
    pub fn new(max: u32) -> Self {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            max,
        }
    }

    /// Appends bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Returns the next complete payload, `Ok(None)` when more bytes are needed, or an error
    /// for a length over the maximum (checked as soon as the header is complete, before the
    /// payload is buffered).
    pub fn next_payload(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&avail[..HEADER_LEN]);
        let len = payload_len(header, self.max)?;
        if avail.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let payload = avail[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.start += HEADER_LEN + len;
        // Compact once the consumed prefix dominates, so a long-lived stream does not grow.
        if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(payload))
    }

    /// Call at end of stream: an error if a partial frame is still buffered.
    pub fn finish(&self) -> Result<(), FrameError> {
        let avail = &self.buf[self.start..];
        if avail.is_empty() {
            return Ok(());
        }
        let need = if avail.len() < HEADER_LEN {
            HEADER_LEN
        } else {
            let mut header = [0u8; HEADER_LEN];
            header.copy_from_slice(&avail[..HEADER_LEN]);
            HEADER_LEN + u32::from_le_bytes(header) as usize
        };
        Err(FrameError::Truncated {
            have: avail.len(),
            need,
        })
    }

    /// Bytes buffered but not yet returned.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// Blocking helpers for `std::io` streams (the worker's side).
pub mod blocking {
    use super::{FrameError, HEADER_LEN, decode, encode, payload_len};
    use serde::{Serialize, de::DeserializeOwned};
    use std::io::{self, Read, Write};

    #[derive(Debug, thiserror::Error)]
    pub enum IoFrameError {
        #[error("i/o on the ipc socket failed: {0}")]
        Io(#[from] io::Error),
        #[error(transparent)]
        Frame(#[from] FrameError),
        #[error("the peer closed the ipc socket")]
        Closed,
    }

    /// Reads one frame and decodes it. Allocates at most the announced length, which was
    /// checked against `max` first.
    pub fn read_message<T: DeserializeOwned>(
        r: &mut impl Read,
        max: u32,
    ) -> Result<T, IoFrameError> {
        let mut header = [0u8; HEADER_LEN];
        match r.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(IoFrameError::Closed),
            Err(e) => return Err(e.into()),
        }
        let len = payload_len(header, max)?;
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                IoFrameError::Frame(FrameError::Truncated { have: 0, need: len })
            } else {
                IoFrameError::Io(e)
            }
        })?;
        Ok(decode(&payload)?)
    }

    /// Encodes and writes one frame in a single `write_all`.
    pub fn write_message<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), IoFrameError> {
        let bytes = encode(msg)?;
        w.write_all(&bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::*;

    fn sample_messages() -> Vec<WorkerMessage> {
        vec![
            WorkerMessage::Ready {
                protocol_version: crate::PROTOCOL_VERSION,
                lockdown: LockdownReport {
                    landlock_abi: 6,
                    landlock_fully_enforced: true,
                    seccomp_allowed_syscalls: 20,
                    forked: true,
                },
            },
            WorkerMessage::ToolReferences(ToolReferences {
                calls: vec![ToolReference {
                    namespace: "github".into(),
                    name: "search_issues".into(),
                    at: SourcePosition { line: 2, column: 7 },
                    argument: Some(LiteralObject {
                        at: SourcePosition {
                            line: 2,
                            column: 28,
                        },
                        open: false,
                        positional: false,
                        properties: vec![LiteralProperty {
                            key: "q".into(),
                            at: SourcePosition {
                                line: 2,
                                column: 30,
                            },
                            value_at: SourcePosition {
                                line: 2,
                                column: 33,
                            },
                            value: Some(LiteralKind::String),
                            scalar: Some(crate::LiteralScalar::String("is:open".into())),
                        }],
                    }),
                }],
            }),
            WorkerMessage::ToolCall {
                id: 7,
                tool: "github.search_issues".into(),
                args_json: r#"{"q":"bug"}"#.into(),
                at: Some(SourcePosition { line: 3, column: 9 }),
            },
            WorkerMessage::Idle { results: 3 },
            WorkerMessage::Console {
                level: ConsoleLevel::Warn,
                text: "careful ✓".into(),
            },
            WorkerMessage::Progress {
                value_json: "0.5".into(),
            },
            WorkerMessage::Done {
                outcome: Outcome::Error(ExecError::new(ErrorKind::Runtime, "boom")),
                stats: WorkerStats::default(),
            },
            WorkerMessage::Done {
                outcome: Outcome::Error(ExecError {
                    name: Some("TypeError".into()),
                    line: Some(2),
                    column: Some(8),
                    explanation: Some(
                        "g.nodes is undefined: g is the result of tools.memory.read_graph (line 1), an object with keys entities (array of 3)".into(),
                    ),
                    ..ExecError::new(ErrorKind::Runtime, "cannot read property 'map' of undefined")
                }),
                stats: WorkerStats::default(),
            },
        ]
    }

    #[test]
    fn round_trip_every_worker_message() {
        for msg in sample_messages() {
            let frame = encode(&msg).unwrap();
            let mut dec = FrameDecoder::new(MAX_FRAME_LEN);
            dec.feed(&frame);
            let payload = dec.next_payload().unwrap().unwrap();
            assert_eq!(decode::<WorkerMessage>(&payload).unwrap(), msg);
            assert!(dec.next_payload().unwrap().is_none());
            dec.finish().unwrap();
        }
    }

    #[test]
    fn round_trip_supervisor_messages() {
        let msgs = vec![
            SupervisorMessage::Start(StartExecution {
                execution_id: "ex_1".into(),
                language: Language::TypeScript,
                code: "const x: number = 1; x".into(),
                limits: Limits {
                    timeout_ms: 1000,
                    memory_bytes: 1 << 26,
                    stack_bytes: 1 << 20,
                    max_tool_calls: 10,
                    max_output_bytes: 1 << 20,
                },
                determinism: crate::Determinism {
                    clock_ms: 1_790_000_000_000,
                    seed: [7; 32],
                },
                report_idle: true,
            }),
            SupervisorMessage::ToolResult {
                id: 1,
                result: Ok("{}".into()),
                clock_ms: 1_790_000_000_001,
            },
            SupervisorMessage::ToolResult {
                id: 2,
                result: Err(ToolFailure {
                    code: "unknown_tool".into(),
                    message: "no tool".into(),
                    hint: Some("did you mean x?".into()),
                }),
                clock_ms: 1_790_000_000_002,
            },
            SupervisorMessage::Cancel,
            SupervisorMessage::Proceed,
        ];
        for msg in msgs {
            let frame = encode(&msg).unwrap();
            assert_eq!(
                decode::<SupervisorMessage>(&frame[HEADER_LEN..]).unwrap(),
                msg
            );
        }
    }

    #[test]
    fn frames_split_at_every_byte_boundary_reassemble() {
        let msgs = sample_messages();
        let stream: Vec<u8> = msgs.iter().flat_map(|m| encode(m).unwrap()).collect();
        for split in 0..stream.len() {
            let mut dec = FrameDecoder::new(MAX_FRAME_LEN);
            let mut got = Vec::new();
            dec.feed(&stream[..split]);
            while let Some(p) = dec.next_payload().unwrap() {
                got.push(decode::<WorkerMessage>(&p).unwrap());
            }
            dec.feed(&stream[split..]);
            while let Some(p) = dec.next_payload().unwrap() {
                got.push(decode::<WorkerMessage>(&p).unwrap());
            }
            assert_eq!(got, msgs, "split at {split}");
        }
    }

    #[test]
    fn oversized_length_is_rejected_before_buffering() {
        let mut dec = FrameDecoder::new(1024);
        dec.feed(&(1025u32).to_le_bytes());
        assert_eq!(
            dec.next_payload(),
            Err(FrameError::TooLarge {
                len: 1025,
                max: 1024
            })
        );
        let mut dec = FrameDecoder::new(MAX_FRAME_LEN);
        dec.feed(&u32::MAX.to_le_bytes());
        assert!(matches!(
            dec.next_payload(),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn truncated_stream_is_reported_at_finish() {
        let frame = encode(&SupervisorMessage::Cancel).unwrap();
        let mut dec = FrameDecoder::new(MAX_FRAME_LEN);
        dec.feed(&frame[..frame.len() - 1]);
        assert_eq!(dec.next_payload(), Ok(None));
        assert!(matches!(dec.finish(), Err(FrameError::Truncated { .. })));
        let mut dec = FrameDecoder::new(MAX_FRAME_LEN);
        dec.feed(&[1, 0]);
        assert!(matches!(
            dec.finish(),
            Err(FrameError::Truncated { have: 2, need: 4 })
        ));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut payload = encode(&SupervisorMessage::Cancel).unwrap()[HEADER_LEN..].to_vec();
        payload.push(0);
        assert_eq!(
            decode::<SupervisorMessage>(&payload),
            Err(FrameError::TrailingBytes(1))
        );
    }

    #[test]
    fn unknown_variant_tag_is_rejected() {
        // Tag 200 is far past the last variant of either enum.
        assert!(matches!(
            decode::<SupervisorMessage>(&[200, 1]),
            Err(FrameError::Malformed(_))
        ));
        assert!(matches!(
            decode::<WorkerMessage>(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn a_huge_inner_length_does_not_allocate_past_the_frame() {
        // ToolCall { id, tool: String with announced length 2^31 } inside a 12-byte frame.
        let payload = [1u8, 7, 0x80, 0x80, 0x80, 0x80, 0x08, b'a', b'b'];
        assert!(matches!(
            decode::<WorkerMessage>(&payload),
            Err(FrameError::Malformed(_))
        ));
    }

    /// A deterministic pseudo-random sweep of single-byte damage; the fuzz target
    /// (`crate::fuzz`, seeds in `tests/fuzz/postcard/`) goes further.
    #[test]
    fn random_bytes_never_panic() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds: Vec<Vec<u8>> = sample_messages()
            .iter()
            .map(|m| encode(m).unwrap()[HEADER_LEN..].to_vec())
            .collect();
        for i in 0..20_000 {
            let mut bytes = seeds[i % seeds.len()].clone();
            let flips = (next() % 4) as usize + 1;
            for _ in 0..flips {
                if bytes.is_empty() {
                    break;
                }
                let at = (next() as usize) % bytes.len();
                bytes[at] = next() as u8;
            }
            if next() % 3 == 0 {
                let cut = (next() as usize) % (bytes.len() + 1);
                bytes.truncate(cut);
            }
            let _ = decode::<WorkerMessage>(&bytes);
            let _ = decode::<SupervisorMessage>(&bytes);
            let mut dec = FrameDecoder::new(4096);
            dec.feed(&bytes);
            while let Ok(Some(p)) = dec.next_payload() {
                let _ = decode::<WorkerMessage>(&p);
            }
        }
    }

    #[test]
    fn blocking_reader_round_trips_and_reports_close() {
        let mut buf = Vec::new();
        blocking::write_message(&mut buf, &SupervisorMessage::Cancel).unwrap();
        let mut r = &buf[..];
        let msg: SupervisorMessage = blocking::read_message(&mut r, MAX_FRAME_LEN).unwrap();
        assert_eq!(msg, SupervisorMessage::Cancel);
        assert!(matches!(
            blocking::read_message::<SupervisorMessage>(&mut r, MAX_FRAME_LEN),
            Err(blocking::IoFrameError::Closed)
        ));
    }

    #[test]
    fn a_packet_is_exactly_one_frame() {
        let request = crate::ForkRequest {
            memory_ceiling_bytes: 1 << 30,
            cpu_seconds: 30,
            warm_up: true,
        };
        let frame = encode(&request).unwrap();
        assert_eq!(decode_packet::<crate::ForkRequest>(&frame, 64), Ok(request));
        assert!(matches!(
            decode_packet::<crate::ForkRequest>(&frame[..frame.len() - 1], 64),
            Err(FrameError::Truncated { .. })
        ));
        let mut longer = frame.clone();
        longer.push(0);
        assert_eq!(
            decode_packet::<crate::ForkRequest>(&longer, 64),
            Err(FrameError::TrailingBytes(1))
        );
        assert!(matches!(
            decode_packet::<crate::ForkRequest>(&frame[..2], 64),
            Err(FrameError::Truncated { have: 2, need: 4 })
        ));
        assert!(matches!(
            decode_packet::<crate::ForkRequest>(&frame, 2),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
