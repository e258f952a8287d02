//! Measures how many messages per second the inbound server accepts over loopback, with an in-memory
//! sink and with a sink that writes and fsyncs one file per message, for several connection counts.
//!
//! Usage: smtp-bench [--messages N] [--size BYTES] [--connections 1,4,16]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smtp::{InboundMessage, MailSink, RcptDecision, SinkError, SmtpConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Counts messages and keeps nothing: the server's own cost.
struct MemorySink {
    stored: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl MailSink for MemorySink {
    async fn check_recipient(&self, _rcpt: &str) -> RcptDecision {
        RcptDecision::Accept
    }

    async fn store(&self, msg: InboundMessage) -> Result<(), SinkError> {
        std::hint::black_box(&msg.data);
        self.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Writes each message to its own file and fsyncs it before the 250, as a durable store must.
struct FsyncSink {
    dir: PathBuf,
    stored: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl MailSink for FsyncSink {
    async fn check_recipient(&self, _rcpt: &str) -> RcptDecision {
        RcptDecision::Accept
    }

    async fn store(&self, msg: InboundMessage) -> Result<(), SinkError> {
        let path = self.dir.join(format!(
            "{}.eml",
            self.stored.fetch_add(1, Ordering::Relaxed)
        ));
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write as _;
            let mut file = std::fs::File::create(&path)?;
            file.write_all(&msg.data)?;
            file.sync_all()
        })
        .await
        .map_err(SinkError::new)?
        .map_err(SinkError::new)
    }
}

struct Options {
    messages: usize,
    size: usize,
    connections: Vec<usize>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        messages: 2000,
        size: 10 * 1024,
        connections: vec![1, 4, 16],
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--messages" => options.messages = number(&value)?,
            "--size" => options.size = number(&value)?,
            "--connections" => {
                options.connections = value.split(',').map(number).collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(options)
}

fn body(size: usize) -> Vec<u8> {
    let mut body =
        b"From: bench@example.org\r\nTo: seed@bench.test\r\nSubject: bench\r\n\r\n".to_vec();
    let line = [b'x'; 76];
    while body.len() < size {
        body.extend_from_slice(&line);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b".\r\n");
    body
}

/// One client connection sending `count` messages, MAIL/RCPT/DATA pipelined as real senders do.
async fn client(addr: SocketAddr, count: usize, body: Arc<Vec<u8>>) -> Result<(), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut expect = async |code: &str| -> Result<(), String> {
        loop {
            let line = lines
                .next_line()
                .await
                .map_err(|e| e.to_string())?
                .ok_or("server closed the connection")?;
            if !line.starts_with(code) {
                return Err(format!("expected {code}, got {line}"));
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return Ok(());
            }
        }
    };
    expect("220").await?;
    write
        .write_all(b"EHLO bench.example\r\n")
        .await
        .map_err(|e| e.to_string())?;
    expect("250").await?;
    for _ in 0..count {
        write
            .write_all(b"MAIL FROM:<bench@example.org>\r\nRCPT TO:<seed@bench.test>\r\nDATA\r\n")
            .await
            .map_err(|e| e.to_string())?;
        expect("250").await?;
        expect("250").await?;
        expect("354").await?;
        write.write_all(&body).await.map_err(|e| e.to_string())?;
        expect("250").await?;
    }
    write
        .write_all(b"QUIT\r\n")
        .await
        .map_err(|e| e.to_string())?;
    expect("221").await
}

async fn run(
    sink: Arc<dyn MailSink>,
    connections: usize,
    messages: usize,
    body: Arc<Vec<u8>>,
) -> Result<Duration, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let cfg = SmtpConfig {
        hostname: "bench.local".to_owned(),
        max_connections: connections + 8,
        max_connections_per_ip: connections + 8,
        messages_per_minute_per_ip: u32::MAX,
        ..SmtpConfig::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(smtp::serve(listener, cfg, sink, async move {
        let _ = stop_rx.await;
    }));
    let per_connection = messages.div_ceil(connections);
    let started = Instant::now();
    let clients: Vec<_> = (0..connections)
        .map(|_| tokio::spawn(client(addr, per_connection, Arc::clone(&body))))
        .collect();
    for handle in clients {
        handle.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed();
    let _ = stop_tx.send(());
    server
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(elapsed)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let options = parse_options()?;
    let body = Arc::new(body(options.size));
    let dir = std::env::temp_dir().join(format!("smtp-bench-{}", std::process::id()));
    println!(
        "smtp-bench: {} messages of {} bytes per run over loopback, MAIL/RCPT/DATA pipelined",
        options.messages,
        body.len()
    );
    println!(
        "{:<8} {:>11} {:>9} {:>10} {:>10} {:>8}",
        "sink", "connections", "messages", "seconds", "msg/s", "MB/s"
    );
    for sink_name in ["memory", "fsync"] {
        for &connections in &options.connections {
            // fsync is slow: fewer messages keep the run short while still averaging many syncs.
            let messages = if sink_name == "fsync" {
                options.messages / 4
            } else {
                options.messages
            };
            let stored = Arc::new(AtomicU64::new(0));
            let sink: Arc<dyn MailSink> = if sink_name == "memory" {
                Arc::new(MemorySink {
                    stored: Arc::clone(&stored),
                })
            } else {
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                Arc::new(FsyncSink {
                    dir: dir.clone(),
                    stored: Arc::clone(&stored),
                })
            };
            let elapsed = run(sink, connections, messages, Arc::clone(&body)).await?;
            let sent = messages.div_ceil(connections) * connections;
            let count = stored.load(Ordering::Relaxed);
            if count != sent as u64 {
                return Err(format!(
                    "{sink_name}: sent {sent} messages but {count} were stored"
                ));
            }
            let seconds = elapsed.as_secs_f64();
            println!(
                "{:<8} {:>11} {:>9} {:>10.3} {:>10.0} {:>8.1}",
                sink_name,
                connections,
                sent,
                seconds,
                sent as f64 / seconds,
                (sent * body.len()) as f64 / seconds / 1e6
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}
