//! The floor under a pre-started execution (the comparisons bench): the same hops with none of
//! Airlock's code, so that the bench can say how much of an execution's time after idle is the
//! machine and how much is Airlock. It answers `GET`/`POST` on a Unix socket with a fixed
//! small JSON body, one thread per connection, in one of four modes:
//!
//! - `direct`: it answers itself (client → server → client, two hops; blocking `std` I/O);
//! - `hyper`: the same answer from hyper on a multi-thread tokio runtime, the HTTP stack
//!   `airlockd` uses, with no handler code of Airlock's;
//! - `relay`: each request is handed to a process forked for it in advance and waiting in a
//!   blocking read on a socket pair; that process answers and the server answers the client
//!   (four hops, a fresh process per request, never reused, as an execution on a pre-started
//!   worker). 1 ms after the answer the server hangs up on that process, reaps it and forks
//!   the next, as `airlockd`'s pool does for an execution running alone (`AFTER_ANSWER`);
//! - `relay-at-once`: the same, with the hang-up, the reaping and the next fork right after the
//!   answer (the order `airlockd` had before `AFTER_ANSWER`);
//! - `relay-pool`: `airlockd`'s pool with none of its code: four processes forked in advance;
//!   each request takes one (or waits for one), and a thread of its own hangs up on it, reaps
//!   it and forks its replacement at once. What a client sending its next request as soon as
//!   the last one answered (a tight loop) pays for a fresh process per request.
//!
//! With `HEAP_KIB` and `TOUCHED_PAGES` the server first fills a heap of that size, and every
//! forked process writes to `TOUCHED_PAGES` pages of it before it waits (each write a
//! copy-on-write fault), as a forked worker's warm-up copies the zygote's heap: a fork then
//! copies that heap's page tables, and its exit tears them down.
//!
//! Used by `cargo bench -p airlock-benches --bench comparisons` (`benches/floor_with_monty.py`,
//! `benches/tight_with_monty.py`).
//! Usage: `airlock-bench-floor MODE SOCKET [HEAP_KIB TOUCHED_PAGES]`. Not a server for anything
//! else: it trusts its client and panics on anything unexpected.

// A bench helper: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

const BODY: &[u8] = br#"{"status":"ok","value":2}"#;

/// The pages every forked process writes to before it waits (empty without `HEAP_KIB`).
static HEAP: OnceLock<Heap> = OnceLock::new();

struct Heap {
    start: usize,
    touched: usize,
}

const PAGE: usize = 4096;

/// How many processes `relay-pool` keeps forked in advance (`airlockd`'s default pool).
const POOL: usize = 4;

#[derive(Clone)]
enum Mode {
    Direct,
    Relay { after_answer: Duration },
    Pool(Arc<Pool>),
}

/// `relay-pool`'s processes: [`POOL`] forked in advance and shared by the connections; a used
/// one goes to the refill thread, which hangs up on it, reaps it and forks the next.
struct Pool {
    ready: Mutex<mpsc::Receiver<Child>>,
    used: mpsc::Sender<Child>,
}

impl Pool {
    fn start() -> Arc<Pool> {
        let (ready_tx, ready) = mpsc::sync_channel::<Child>(POOL);
        let (used, used_rx) = mpsc::channel::<Child>();
        for _ in 0..POOL {
            ready_tx.send(Child::fork()).unwrap();
        }
        std::thread::spawn(move || {
            for child in used_rx {
                child.hang_up();
                ready_tx.send(Child::fork()).unwrap();
            }
        });
        Arc::new(Pool {
            ready: Mutex::new(ready),
            used,
        })
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mode, socket) = (args.next().unwrap(), args.next().unwrap());
    let heap_kib: usize = args.next().map_or(0, |v| v.parse().unwrap());
    let touched: usize = args.next().map_or(0, |v| v.parse().unwrap());
    // Filled (every page written) so that it is resident and a fork copies its page tables.
    let heap = vec![1u8; heap_kib * 1024].leak();
    assert!(
        touched * PAGE <= heap.len(),
        "TOUCHED_PAGES is more than the heap holds"
    );
    let start = heap.as_mut_ptr() as usize;
    HEAP.set(Heap { start, touched }).ok().unwrap();
    let _ = std::fs::remove_file(&socket);
    let mode = match mode.as_str() {
        "direct" => Mode::Direct,
        "relay" => Mode::Relay {
            after_answer: Duration::from_millis(1),
        },
        "relay-at-once" => Mode::Relay {
            after_answer: Duration::ZERO,
        },
        "relay-pool" => Mode::Pool(Pool::start()),
        "hyper" => return hyper_server(&socket),
        other => panic!("unknown mode {other}: direct, hyper, relay, relay-at-once or relay-pool"),
    };
    let listener = UnixListener::bind(&socket).unwrap();
    for stream in listener.incoming() {
        let stream = stream.unwrap();
        let mode = mode.clone();
        std::thread::spawn(move || serve(stream, mode));
    }
}

/// Answers the requests of one connection until the client hangs up.
fn serve(mut client: UnixStream, mode: Mode) {
    let mut buf = vec![0u8; 64 * 1024];
    let answer = [
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            BODY.len()
        )
        .as_bytes(),
        BODY,
    ]
    .concat();
    let mut next = match mode {
        Mode::Relay { .. } => Some(Child::fork()),
        Mode::Direct | Mode::Pool(_) => None,
    };
    while read_request(&mut client, &mut buf) {
        match &mode {
            Mode::Direct => client.write_all(&answer).unwrap(),
            Mode::Relay { after_answer } => {
                let child = next.take().unwrap();
                child.ask();
                client.write_all(&answer).unwrap();
                if !after_answer.is_zero() {
                    std::thread::sleep(*after_answer);
                }
                child.hang_up();
                next = Some(Child::fork());
            }
            Mode::Pool(pool) => {
                // Waits for the refill when all four are used.
                let child = pool.ready.lock().unwrap().recv().unwrap();
                child.ask();
                client.write_all(&answer).unwrap();
                pool.used.send(child).unwrap();
            }
        }
    }
}

/// Reads one request (head and `content-length` body); false when the client hung up.
fn read_request(client: &mut UnixStream, buf: &mut [u8]) -> bool {
    let mut n = 0;
    loop {
        let read = client.read(&mut buf[n..]).unwrap();
        if read == 0 {
            return false;
        }
        n += read;
        let Some(end) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        if n >= end + 4 + length {
            return true;
        }
    }
}

/// A process forked in advance, blocked in a read of its end of a socket pair: it answers one
/// message and then waits for the hang-up before it exits, as a pre-started worker does.
struct Child {
    socket: OwnedFd,
    pid: libc::pid_t,
}

impl Child {
    fn fork() -> Child {
        let mut pair = [0; 2];
        // SAFETY: `pair` has room for the two descriptors socketpair writes.
        let rc =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()) };
        assert_eq!(rc, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just created and are owned here alone.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        // SAFETY: the child calls only async-signal-safe functions (read, write, _exit) before
        // it exits, so forking this multi-threaded process is sound.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let fd = theirs.as_raw_fd();
            let heap = HEAP.get().unwrap();
            let mut byte = [0u8; 1];
            // SAFETY: `byte` is a valid one-byte buffer; `fd` is this process's end; the heap's
            // pages are this process's copy of a leaked allocation of at least `touched` pages.
            // Every other descriptor is closed first (the server's end of this pair and of the
            // other pooled processes' pairs): a copy held here would keep their reads from
            // ever seeing the hang-up.
            unsafe {
                let fd_u32 = u32::try_from(fd).unwrap();
                libc::syscall(libc::SYS_close_range, 3u32, fd_u32 - 1, 0u32);
                libc::syscall(libc::SYS_close_range, fd_u32 + 1, u32::MAX, 0u32);
                for page in 0..heap.touched {
                    std::ptr::write_volatile((heap.start + page * PAGE) as *mut u8, 2);
                }
                while libc::read(fd, byte.as_mut_ptr().cast(), 1) == 1 {
                    libc::write(fd, byte.as_ptr().cast(), 1);
                }
                libc::_exit(0);
            }
        }
        drop(theirs);
        Child { socket: ours, pid }
    }

    /// One message there and its answer back.
    fn ask(&self) {
        let mut byte = [1u8];
        // SAFETY: `byte` is a valid one-byte buffer; the descriptor is open while `self` is.
        let (sent, read) = unsafe {
            (
                libc::write(self.socket.as_raw_fd(), byte.as_ptr().cast(), 1),
                libc::read(self.socket.as_raw_fd(), byte.as_mut_ptr().cast(), 1),
            )
        };
        assert_eq!((sent, read), (1, 1), "the relay's child did not answer");
    }

    /// Closes its socket (its read returns 0 and it exits) and reaps it.
    fn hang_up(self) {
        drop(self.socket);
        // SAFETY: `pid` is this process's child, not yet reaped; a null status is allowed.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

/// The `hyper` mode: the fixed answer from hyper's HTTP/1 server on tokio's multi-thread
/// runtime, as `airlockd` serves, with nothing of Airlock's in the handler.
fn hyper_server(socket: &str) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(BODY)))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}
