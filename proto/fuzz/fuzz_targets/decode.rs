//! Feeds arbitrary bytes to both message decoders and to the stream decoder.
//! Run with `cargo +nightly fuzz run decode` from `proto/`.
#![no_main]

use airlock_proto::{FrameDecoder, SupervisorMessage, WorkerMessage, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode::<WorkerMessage>(data);
    let _ = decode::<SupervisorMessage>(data);
    let mut dec = FrameDecoder::new(1 << 16);
    dec.feed(data);
    while let Ok(Some(payload)) = dec.next_payload() {
        let _ = decode::<WorkerMessage>(&payload);
        let _ = decode::<SupervisorMessage>(&payload);
    }
    let _ = dec.finish();
});
