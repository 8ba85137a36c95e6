//! A PostgreSQL-protocol counting proxy: forwards bytes between the client and the server on
//! 127.0.0.1 and counts round trips. Every round trip ends with the server's `ReadyForQuery`
//! (`Z`); the client side tells what it was: a simple query (`Q`) or an extended-protocol
//! batch with a statement in it, ended by `Sync`, is a *statement*; a `Sync` alone is sqlx's
//! *ping*. It also knows each connection's backend process id (from `BackendKeyData`), so a
//! test can kill the connections of its own pool and no other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running proxy; dropping it stops accepting (open connections end with their peers).
pub struct CountingProxy {
    /// The URL to give the client: the upstream URL with the proxy's address, TLS disabled.
    pub url: String,
    counts: Arc<Counts>,
    backends: Arc<Mutex<Vec<i32>>>,
    accept: tokio::task::JoinHandle<()>,
}

/// What went over the wire since the last [`CountingProxy::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundTrips {
    /// Round trips of any kind (`ReadyForQuery` from the server).
    pub total: usize,
    /// Round trips that ran a statement.
    pub statements: usize,
    /// Round trips that were a bare `Sync` (sqlx's ping).
    pub pings: usize,
}

#[derive(Default)]
struct Counts {
    total: AtomicUsize,
    statements: AtomicUsize,
    pings: AtomicUsize,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl CountingProxy {
    /// Starts a proxy in front of the server `url` points at (`postgres://user@host:port/db`).
    pub async fn start(url: &str) -> CountingProxy {
        let rest = url
            .split_once("://")
            .map(|(_, rest)| rest)
            .expect("a postgres:// URL");
        let (auth, hostpath) = match rest.rsplit_once('@') {
            Some((auth, hostpath)) => (Some(auth), hostpath),
            None => (None, rest),
        };
        let (hostport, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let upstream = if hostport.contains(':') {
            hostport.to_owned()
        } else {
            format!("{hostport}:5432")
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let local = listener.local_addr().unwrap();
        let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
        let url = format!("postgres://{auth}{local}/{path}?sslmode=disable");
        let counts = Arc::new(Counts::default());
        let backends = Arc::new(Mutex::new(Vec::new()));
        let (counter, pids) = (counts.clone(), backends.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(pump(client, server, counter.clone(), pids.clone()));
            }
        });
        CountingProxy {
            url,
            counts,
            backends,
            accept,
        }
    }

    /// Round trips since the last call.
    pub fn take(&self) -> RoundTrips {
        RoundTrips {
            total: self.counts.total.swap(0, Ordering::SeqCst),
            statements: self.counts.statements.swap(0, Ordering::SeqCst),
            pings: self.counts.pings.swap(0, Ordering::SeqCst),
        }
    }

    /// The backend process ids of every connection made through the proxy.
    pub fn backends(&self) -> Vec<i32> {
        self.backends.lock().unwrap().clone()
    }
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    counts: Arc<Counts>,
    backends: Arc<Mutex<Vec<i32>>>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        // The client's first message (the startup packet) has no type byte.
        let mut parser = Parser {
            untyped_first: true,
            ..Parser::default()
        };
        let mut batch = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            parser.feed(&buf[..n], |kind, _| match kind {
                b'S' => {
                    let slot = if batch {
                        &counts.statements
                    } else {
                        &counts.pings
                    };
                    slot.fetch_add(1, Ordering::SeqCst);
                    batch = false;
                }
                b'Q' => {
                    counts.statements.fetch_add(1, Ordering::SeqCst);
                }
                b'P' | b'B' | b'E' | b'D' | b'C' => batch = true,
                _ => {}
            });
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let mut parser = Parser::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            parser.feed(&buf[..n], |kind, payload| match kind {
                b'Z' => {
                    counts.total.fetch_add(1, Ordering::SeqCst);
                }
                b'K' if payload.len() >= 4 => {
                    let pid = i32::from_be_bytes(payload[..4].try_into().unwrap());
                    backends.lock().unwrap().push(pid);
                }
                _ => {}
            });
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Splits a byte stream into messages (a type byte, a length that counts itself, the payload),
/// across reads; the payload is kept only for `BackendKeyData` (`K`).
#[derive(Default)]
struct Parser {
    untyped_first: bool,
    header: Vec<u8>,
    kind: u8,
    left: usize,
    payload: Vec<u8>,
}

impl Parser {
    fn feed(&mut self, mut bytes: &[u8], mut message: impl FnMut(u8, &[u8])) {
        while !bytes.is_empty() {
            let header_len = if self.untyped_first { 4 } else { 5 };
            if self.left == 0 && self.header.len() < header_len {
                let take = (header_len - self.header.len()).min(bytes.len());
                self.header.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.header.len() == header_len {
                    let (kind, len) = if self.untyped_first {
                        (0, &self.header[0..4])
                    } else {
                        (self.header[0], &self.header[1..5])
                    };
                    self.kind = kind;
                    self.left =
                        (u32::from_be_bytes(len.try_into().unwrap()) as usize).saturating_sub(4);
                    self.payload.clear();
                    if self.left == 0 {
                        self.done(&mut message);
                    }
                }
                continue;
            }
            let take = self.left.min(bytes.len());
            if self.kind == b'K' {
                self.payload.extend_from_slice(&bytes[..take]);
            }
            self.left -= take;
            bytes = &bytes[take..];
            if self.left == 0 {
                self.done(&mut message);
            }
        }
    }

    fn done(&mut self, message: &mut impl FnMut(u8, &[u8])) {
        if self.untyped_first {
            self.untyped_first = false;
        } else {
            message(self.kind, &self.payload);
        }
        self.header.clear();
    }
}
