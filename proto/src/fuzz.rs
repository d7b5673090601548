//! Fuzzing the frame decoder (`tests/fuzz/postcard/`, docs/testing.md "Fuzzing").
//!
//! [`target`] is the one input's checks: `cargo test` replays the seeds through it
//! (`fuzz_seeds_postcard`), and the libFuzzer build (`fuzz/libfuzzer/`, `--cfg fuzzing`) calls
//! it for every input.
//!
//! Each input is decoded as a payload of either direction's messages and fed, in two pieces,
//! to a [`FrameDecoder`] as a stream. Beyond "no panic": a message that decodes encodes
//! again and decodes to itself, no payload exceeds the decoder's maximum, and the decoder
//! hands out no more bytes than it was fed. The same bytes as one packet of the zygote's
//! control channel (`decode_packet`): a fork request, a fork reply, a `Ready`.

use crate::frame::HEADER_LEN;
use crate::{FrameDecoder, FrameError, SupervisorMessage, WorkerMessage, decode, encode};
use airlock_fuzz::{Fuzz, Outcome};
use serde::{Serialize, de::DeserializeOwned};
use std::fmt::Debug;

/// The stream decoder's maximum here: small, so oversized frames are met often.
const STREAM_MAX: u32 = 1 << 16;

/// The target's settings: its seeds (no dictionary; the default max length and stack).
pub fn fuzz() -> Fuzz {
    Fuzz::new("postcard")
}

/// The checks on one input, the entry point of the seed replay and of the libFuzzer binary;
/// the outcome is what the random mutator's pool is kept by.
pub fn target(data: &[u8]) -> Outcome {
    let worker = message::<WorkerMessage>(data);
    let supervisor = message::<SupervisorMessage>(data);

    let mut decoder = FrameDecoder::new(STREAM_MAX);
    // Two pieces, cut where the first byte says, so reassembly across reads is exercised.
    let cut = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut handed_out = 0usize;
    let mut payloads = 0usize;
    let mut too_large = false;
    for piece in [&data[..cut], &data[cut..]] {
        decoder.feed(piece);
        loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => {
                    assert!(payload.len() <= STREAM_MAX as usize);
                    handed_out += HEADER_LEN + payload.len();
                    payloads += 1;
                    message::<WorkerMessage>(&payload);
                    message::<SupervisorMessage>(&payload);
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(matches!(e, FrameError::TooLarge { .. }), "{e}");
                    too_large = true;
                    break;
                }
            }
        }
    }
    assert_eq!(handed_out + decoder.buffered(), data.len());
    let truncated = match decoder.finish() {
        Ok(()) => false,
        Err(e) => {
            assert!(matches!(e, FrameError::Truncated { .. }), "{e}");
            true
        }
    };
    let stream = Outcome::hash_of(&(payloads.min(3), too_large, truncated));
    worker.and(supervisor).and(stream).and(packet(data))
}

/// The zygote's control channel: the whole input as one `SOCK_SEQPACKET` packet, as the
/// zygote reads a fork request and the daemon reads the zygote's `Ready` and replies.
fn packet(data: &[u8]) -> Outcome {
    let request = crate::decode_packet::<crate::ForkRequest>(data, 64);
    let reply = crate::decode_packet::<crate::ForkReply>(data, 4096);
    let ready = crate::decode_packet::<WorkerMessage>(data, 4096);
    for ok in [request.is_ok(), reply.is_ok(), ready.is_ok()] {
        // A packet that decodes is exactly one frame: its length field names the rest.
        if ok {
            assert!(data.len() >= HEADER_LEN);
        }
    }
    if let Ok(request) = request {
        let frame = encode(&request).expect("encodes");
        assert_eq!(crate::decode_packet(&frame, 64), Ok(request));
    }
    Outcome::hash_of(&(request.is_ok(), reply.is_ok(), ready.is_ok()))
}

/// Decodes `payload` as a `T`; what decodes must survive a round trip.
fn message<T: Serialize + DeserializeOwned + PartialEq + Debug>(payload: &[u8]) -> Outcome {
    match decode::<T>(payload) {
        Ok(msg) => {
            let frame = encode(&msg).expect("a decoded message encodes");
            let again: T = decode(&frame[HEADER_LEN..]).expect("a re-encoded message decodes");
            assert_eq!(again, msg, "the round trip changed the message");
            Outcome::hash_of(&std::mem::discriminant(&msg))
        }
        Err(e) => Outcome::of(&e.to_string()),
    }
}

#[test]
fn fuzz_seeds_postcard() {
    fuzz().replay(target);
}
