//! One SMTP conversation: commands, replies, the DATA/BDAT body, STARTTLS and the hand-off to the sink.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use smtp_proto::{Error as ParseError, Request};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tracing::Instrument;

use admission::{Busy, Place};

use super::data::{DataReader, Feed};
use super::{InboundMessage, RcptDecision, Shared};

/// Longest command line we take. RFC 5321 asks for 512; extensions make real lines longer.
const MAX_COMMAND_LINE: usize = 4096;
/// Failed commands one session may make before we hang up.
const MAX_ERRORS: u32 = 20;
/// Commands one session may send without completing a message (NOOP floods and the like).
const MAX_IDLE_COMMANDS: u32 = 1000;
const READ_CHUNK: usize = 64 * 1024;
/// Shortest interval a waiting read looks at the server's load again (times four).
const IDLE_RECHECK_MIN: std::time::Duration = std::time::Duration::from_millis(100);

enum Flow {
    Continue,
    Close,
    StartTls,
}

enum Next<S> {
    Close,
    StartTls(S),
}

struct Session {
    shared: Arc<Shared>,
    peer: SocketAddr,
    stop: watch::Receiver<bool>,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    discard_line: bool,
    helo: Option<String>,
    esmtp: bool,
    tls: bool,
    mail_from: Option<String>,
    rcpts: Vec<String>,
    /// Body collected so far by BDAT chunks, and whether it went over the limit.
    bdat: Option<(Vec<u8>, bool)>,
    errors: u32,
    commands: u32,
    started: tokio::time::Instant,
    /// Set when the session budget ran out, for the 421 that says so.
    over_budget: bool,
    /// This connection's place at the listener, and whether it is in the middle of something
    /// (anything but waiting for the next command): a full server pushes out idle sessions first.
    place: Place,
    busy: Option<Busy>,
}

pub(crate) async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    stream: S,
    peer: SocketAddr,
    stop: watch::Receiver<bool>,
    place: Place,
) {
    let span = tracing::info_span!("smtp_session", %peer);
    async move {
        let mut session = Session {
            shared,
            peer,
            stop,
            inbuf: Vec::with_capacity(READ_CHUNK),
            out: Vec::with_capacity(1024),
            discard_line: false,
            helo: None,
            esmtp: false,
            tls: false,
            mail_from: None,
            rcpts: Vec::new(),
            bdat: None,
            errors: 0,
            commands: 0,
            started: tokio::time::Instant::now(),
            over_budget: false,
            place,
            busy: None,
        };
        let greeting = format!("{} ESMTP mailproof ready", session.shared.cfg.hostname);
        session.reply(220, &greeting);
        match session.drive(stream).await {
            Ok(Next::StartTls(stream)) => {
                let Some(acceptor) = session.shared.tls.clone() else {
                    return;
                };
                let idle = session.shared.idle_timeout();
                match tokio::time::timeout(idle, acceptor.accept(stream)).await {
                    Ok(Ok(tls_stream)) => {
                        // RFC 3207: forget everything learned before the handshake.
                        session.helo = None;
                        session.esmtp = false;
                        session.tls = true;
                        session.reset_transaction();
                        if let Err(err) = session.drive(tls_stream).await {
                            tracing::debug!(error = %err, "session ended with an I/O error");
                        }
                    }
                    Ok(Err(err)) => tracing::info!(error = %err, "TLS handshake failed"),
                    Err(_) => tracing::info!("TLS handshake timed out"),
                }
            }
            Ok(Next::Close) => {}
            Err(err) => tracing::debug!(error = %err, "session ended with an I/O error"),
        }
    }
    .instrument(span)
    .await;
}

/// Completes when `signal` turns true (the listener stopping, this session pushed out). A
/// signal whose sender is gone never completes: the listener went without asking this session
/// to end, so it keeps serving its client.
pub(crate) async fn raised(signal: &mut watch::Receiver<bool>) {
    if signal.wait_for(|raised| *raised).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Session {
    fn reply(&mut self, code: u16, text: &str) {
        self.out
            .extend_from_slice(format!("{code} {text}\r\n").as_bytes());
    }

    fn reset_transaction(&mut self) {
        self.mail_from = None;
        self.rcpts.clear();
        self.bdat = None;
    }

    /// Counts a failed command; true when the session has used up its allowance.
    fn error(&mut self, code: u16, text: &str) -> Flow {
        self.reply(code, text);
        self.errors += 1;
        if self.errors >= MAX_ERRORS {
            self.reply(421, "4.7.0 Too many errors, closing connection");
            return Flow::Close;
        }
        Flow::Continue
    }

    async fn flush<S: AsyncWrite + Unpin>(&mut self, stream: &mut S) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let idle = self.shared.idle_timeout();
        let result = tokio::time::timeout(idle, async {
            stream.write_all(&self.out).await?;
            stream.flush().await
        })
        .await;
        self.out.clear();
        match result {
            Ok(done) => done,
            // Not TimedOut: that kind means an idle reader and earns a 421, which this client
            // would not read either.
            Err(_) => Err(io::Error::other("client stopped reading")),
        }
    }

    /// Reads more bytes into `inbuf`; 0 means the client closed, a timeout is an error.
    async fn read_more<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> io::Result<usize> {
        self.inbuf.reserve(READ_CHUNK);
        // The allowed silence shrinks when the server fills up, also for a wait already begun:
        // it is looked at again every few seconds (reading is cancel-safe).
        let started = tokio::time::Instant::now();
        loop {
            let session_left = self
                .shared
                .session_timeout()
                .saturating_sub(self.started.elapsed());
            if session_left.is_zero() {
                self.over_budget = true;
                return Err(io::Error::new(io::ErrorKind::TimedOut, "session budget"));
            }
            let left = self
                .shared
                .idle_timeout()
                .saturating_sub(started.elapsed())
                .min(session_left);
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "idle timeout"));
            }
            let recheck = left.min(self.shared.cfg.busy_idle_timeout.max(IDLE_RECHECK_MIN) / 4);
            if let Ok(read) = tokio::time::timeout(recheck, stream.read_buf(&mut self.inbuf)).await
            {
                return read;
            }
        }
    }

    async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        mut stream: S,
    ) -> io::Result<Next<S>> {
        loop {
            loop {
                if self.discard_line {
                    match memchr::memchr(b'\n', &self.inbuf) {
                        Some(i) => {
                            self.inbuf.drain(..=i);
                            self.discard_line = false;
                        }
                        None => {
                            self.inbuf.clear();
                            break;
                        }
                    }
                }
                let Some(end) = memchr::memchr(b'\n', &self.inbuf) else {
                    if self.inbuf.len() > MAX_COMMAND_LINE {
                        self.inbuf.clear();
                        self.discard_line = true;
                        if let Flow::Close = self.error(500, "5.5.6 Line too long") {
                            self.flush(&mut stream).await?;
                            return Ok(Next::Close);
                        }
                    }
                    break;
                };
                let line: Vec<u8> = self.inbuf.drain(..=end).collect();
                let flow = if line.len() > MAX_COMMAND_LINE {
                    self.error(500, "5.5.6 Line too long")
                } else {
                    match self.command(&line, &mut stream).await {
                        Ok(flow) => flow,
                        Err(err) => return self.read_failed(err, &mut stream).await,
                    }
                };
                match flow {
                    Flow::Continue => {}
                    Flow::Close => {
                        self.flush(&mut stream).await?;
                        let _ = stream.shutdown().await;
                        return Ok(Next::Close);
                    }
                    Flow::StartTls => {
                        self.flush(&mut stream).await?;
                        // Bytes pipelined after STARTTLS were sent in clear text: never act on them.
                        self.inbuf.clear();
                        return Ok(Next::StartTls(stream));
                    }
                }
            }
            self.flush(&mut stream).await?;

            let mut stop = self.stop.clone();
            let mut pushed = self.place.pushed_signal();
            if self.inbuf.is_empty() {
                // Between commands: nothing is lost if a full server closes this session.
                self.busy = None;
            }
            let read = tokio::select! {
                read = self.read_more(&mut stream) => read,
                () = raised(&mut stop) => {
                    self.reply(421, "4.3.2 Service shutting down, try again later");
                    self.flush(&mut stream).await?;
                    return Ok(Next::Close);
                }
                () = raised(&mut pushed) => {
                    tracing::info!("pushed out of a full server for another address");
                    self.reply(421, "4.7.0 Too many connections from your address; this one is closed to make room for others, try again later");
                    self.flush(&mut stream).await?;
                    return Ok(Next::Close);
                }
            };
            if self.busy.is_none() {
                self.busy = Some(self.place.busy());
            }
            match read {
                Ok(0) => return Ok(Next::Close),
                Ok(_) => {}
                Err(err) => return self.read_failed(err, &mut stream).await,
            }
        }
    }

    /// Ends the session after a failed read: an idle client (also one gone quiet in the middle of a
    /// message) is told 421 first.
    async fn read_failed<S: AsyncWrite + Unpin>(
        &mut self,
        err: io::Error,
        stream: &mut S,
    ) -> io::Result<Next<S>> {
        if err.kind() != io::ErrorKind::TimedOut {
            return Err(err);
        }
        let why = if self.over_budget {
            "Session time limit reached"
        } else {
            "Idle timeout"
        };
        tracing::info!("{why}");
        let text = format!(
            "4.4.2 {} {why}, closing connection",
            self.shared.cfg.hostname
        );
        self.reply(421, &text);
        let _ = self.flush(stream).await;
        Ok(Next::Close)
    }

    async fn command<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        line: &[u8],
        stream: &mut S,
    ) -> io::Result<Flow> {
        self.commands += 1;
        if self.commands > MAX_IDLE_COMMANDS {
            self.reply(
                421,
                "4.7.0 Too many commands without a message, closing connection",
            );
            return Ok(Flow::Close);
        }
        let request = match Request::parse(&mut line.iter()) {
            Ok(request) => request.into_owned(),
            Err(err) => {
                let (code, text) = parse_error_reply(&err);
                return Ok(self.error(code, &text));
            }
        };
        let flow = match request {
            Request::Ehlo { host } => {
                self.reset_transaction();
                self.helo = Some(host);
                self.esmtp = true;
                self.ehlo_reply();
                Flow::Continue
            }
            Request::Helo { host } => {
                self.reset_transaction();
                self.helo = Some(host);
                self.esmtp = false;
                let text = format!("{} Hello", self.shared.cfg.hostname);
                self.reply(250, &text);
                Flow::Continue
            }
            Request::Lhlo { .. } => self.error(500, "5.5.1 LHLO is for LMTP; use EHLO"),
            Request::Mail { from } => self.mail(from.address, from.size),
            Request::Rcpt { to } => self.rcpt(to.address).await,
            Request::Data => return self.data(stream).await,
            Request::Bdat {
                chunk_size,
                is_last,
            } => return self.bdat_chunk(stream, chunk_size, is_last).await,
            Request::Rset => {
                self.reset_transaction();
                self.reply(250, "2.0.0 Ok");
                Flow::Continue
            }
            Request::Noop { .. } => {
                self.reply(250, "2.0.0 Ok");
                Flow::Continue
            }
            Request::Quit => {
                self.reply(221, "2.0.0 Bye");
                Flow::Close
            }
            Request::Vrfy { .. } => {
                self.reply(252, "2.5.0 Cannot VRFY user, but will accept the message and try delivery");
                Flow::Continue
            }
            Request::Expn { .. } => self.error(502, "5.5.1 EXPN is not available"),
            Request::Help { .. } => {
                self.reply(214, "2.0.0 See RFC 5321");
                Flow::Continue
            }
            Request::StartTls => self.starttls(),
            Request::Auth { .. } => self.error(
                502,
                "5.5.1 AUTH is not offered here; this server only receives mail for its own domains",
            ),
            Request::Etrn { .. } | Request::Atrn { .. } | Request::Burl { .. } => {
                self.error(502, "5.5.1 Command not implemented")
            }
        };
        Ok(flow)
    }

    fn ehlo_reply(&mut self) {
        let cfg = &self.shared.cfg;
        let mut lines = vec![
            format!("{} Hello", cfg.hostname),
            "PIPELINING".to_owned(),
            format!("SIZE {}", cfg.max_message_bytes),
            "8BITMIME".to_owned(),
            "SMTPUTF8".to_owned(),
            "ENHANCEDSTATUSCODES".to_owned(),
            "CHUNKING".to_owned(),
        ];
        if self.shared.tls.is_some() && !self.tls {
            lines.push("STARTTLS".to_owned());
        }
        let last = lines.len() - 1;
        for (i, line) in lines.iter().enumerate() {
            let sep = if i == last { ' ' } else { '-' };
            self.out
                .extend_from_slice(format!("250{sep}{line}\r\n").as_bytes());
        }
    }

    fn starttls(&mut self) -> Flow {
        if self.tls {
            return self.error(503, "5.5.1 TLS is already active");
        }
        if self.shared.tls.is_none() {
            return self.error(502, "5.5.1 STARTTLS is not offered here");
        }
        self.reply(220, "2.0.0 Ready to start TLS");
        Flow::StartTls
    }

    fn mail(&mut self, address: String, declared_size: usize) -> Flow {
        if self.helo.is_none() {
            return self.error(503, "5.5.1 Send EHLO or HELO first");
        }
        if self.mail_from.is_some() {
            return self.error(503, "5.5.1 Sender already given; send RSET to start over");
        }
        let limit = self.shared.cfg.max_message_bytes;
        if declared_size > limit {
            let text = format!("5.3.4 Message size exceeds the limit of {limit} bytes");
            return self.error(552, &text);
        }
        if !self.shared.limiter.take_message(self.peer.ip()) {
            tracing::info!("message rate limit reached");
            self.reply(
                421,
                "4.7.0 Too many messages from your address, try again later",
            );
            return Flow::Close;
        }
        self.mail_from = Some(address);
        self.reply(250, "2.1.0 Sender ok");
        Flow::Continue
    }

    async fn rcpt(&mut self, address: String) -> Flow {
        if self.mail_from.is_none() {
            return self.error(503, "5.5.1 Send MAIL FROM first");
        }
        if self.rcpts.len() >= self.shared.cfg.max_recipients {
            let text = format!(
                "4.5.3 Too many recipients; at most {} per message",
                self.shared.cfg.max_recipients
            );
            self.reply(452, &text);
            return Flow::Continue;
        }
        match self.shared.sink.check_recipient(&address).await {
            RcptDecision::Accept => {
                if !self.rcpts.contains(&address) {
                    self.rcpts.push(address);
                }
                self.reply(250, "2.1.5 Recipient ok");
                Flow::Continue
            }
            RcptDecision::Reject { code, message } => {
                tracing::info!(rcpt = %address, code, "recipient refused");
                telemetry::global().smtp_message(false);
                let code = if (400..600).contains(&code) {
                    code
                } else {
                    550
                };
                self.error(code, &one_line(&message))
            }
        }
    }

    fn transaction_ready(&mut self) -> Option<Flow> {
        if self.mail_from.is_none() {
            return Some(self.error(503, "5.5.1 Send MAIL FROM first"));
        }
        if self.rcpts.is_empty() {
            return Some(self.error(554, "5.5.1 No valid recipients"));
        }
        None
    }

    async fn data<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
    ) -> io::Result<Flow> {
        if self.bdat.is_some() {
            return Ok(self.error(503, "5.5.1 DATA cannot follow BDAT; send RSET"));
        }
        if let Some(flow) = self.transaction_ready() {
            return Ok(flow);
        }
        self.reply(354, "Start mail input; end with <CRLF>.<CRLF>");
        self.flush(stream).await?;

        let mut reader = DataReader::new(self.shared.cfg.max_message_bytes);
        loop {
            match reader.feed(&self.inbuf) {
                Feed::Done { consumed } => {
                    self.inbuf.drain(..consumed);
                    break;
                }
                Feed::NeedMore { consumed } => {
                    self.inbuf.drain(..consumed);
                }
            }
            if self.read_more(stream).await? == 0 {
                tracing::info!("client disconnected in the middle of DATA; nothing stored");
                return Ok(Flow::Close);
            }
        }
        let oversize = reader.oversize();
        Ok(self.finish_message(reader.into_body(), oversize).await)
    }

    async fn bdat_chunk<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        chunk_size: usize,
        is_last: bool,
    ) -> io::Result<Flow> {
        let ready = self.mail_from.is_some() && !self.rcpts.is_empty();
        let limit = self.shared.cfg.max_message_bytes;
        let (mut body, mut oversize) = self.bdat.take().unwrap_or_default();
        // The chunk's bytes follow the command whatever we think of it; read them all.
        let mut left = chunk_size;
        loop {
            let take = left.min(self.inbuf.len());
            if ready && !oversize {
                if body.len() + take > limit {
                    oversize = true;
                    body = Vec::new();
                } else {
                    body.extend_from_slice(&self.inbuf[..take]);
                }
            }
            self.inbuf.drain(..take);
            left -= take;
            if left == 0 {
                break;
            }
            if self.read_more(stream).await? == 0 {
                tracing::info!("client disconnected in the middle of BDAT; nothing stored");
                return Ok(Flow::Close);
            }
        }
        if !ready {
            return Ok(self
                .transaction_ready()
                .unwrap_or_else(|| self.error(503, "5.5.1 Send MAIL FROM and RCPT TO first")));
        }
        if !is_last {
            self.bdat = Some((body, oversize));
            let text = format!("2.0.0 {chunk_size} octets received");
            self.reply(250, &text);
            return Ok(Flow::Continue);
        }
        Ok(self.finish_message(body, oversize).await)
    }

    async fn finish_message(&mut self, body: Vec<u8>, oversize: bool) -> Flow {
        let mail_from = self.mail_from.take().unwrap_or_default();
        let rcpt_to = std::mem::take(&mut self.rcpts);
        self.bdat = None;
        if oversize {
            let limit = self.shared.cfg.max_message_bytes;
            tracing::info!(limit, "message over the size limit refused");
            let text = format!("5.3.4 Message size exceeds the limit of {limit} bytes");
            return self.error(552, &text);
        }
        let id = format!("{:016X}", rand::random::<u64>());
        let received_at = chrono::Utc::now();
        let helo = self.helo.clone().unwrap_or_default();
        let header = self.received_header(&helo, &id, &rcpt_to, received_at);
        let mut data = Vec::with_capacity(header.len() + body.len());
        data.extend_from_slice(header.as_bytes());
        data.extend_from_slice(&body);
        drop(body);
        let size = data.len();
        let message = InboundMessage {
            mail_from,
            rcpt_to,
            data,
            peer: self.peer,
            helo,
            received_at,
        };
        match self.shared.sink.store(message).await {
            Ok(()) => {
                tracing::info!(%id, size, "message accepted");
                telemetry::global().smtp_message(true);
                self.commands = 0;
                let text = format!("2.0.0 Ok: queued as {id}");
                self.reply(250, &text);
                Flow::Continue
            }
            Err(err) => {
                tracing::error!(%id, error = %err, "storing an incoming message failed");
                telemetry::global().smtp_message(false);
                self.reply(
                    451,
                    "4.3.0 Temporary failure storing the message, try again later",
                );
                Flow::Continue
            }
        }
    }

    fn received_header(
        &self,
        helo: &str,
        id: &str,
        rcpts: &[String],
        at: chrono::DateTime<chrono::Utc>,
    ) -> String {
        let protocol = match (self.esmtp, self.tls) {
            (true, true) => "ESMTPS",
            (true, false) => "ESMTP",
            (false, _) => "SMTP",
        };
        let ip = match self.peer.ip() {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("IPv6:{v6}"),
        };
        // The for clause names the recipient only when there is one, so a message to many does not
        // show each of them the others.
        let for_clause = match rcpts {
            [only] => format!("\r\n\tfor <{}>", header_safe(only)),
            _ => String::new(),
        };
        format!(
            "Received: from {} ([{ip}])\r\n\tby {} with {protocol} id {id}{for_clause};\r\n\t{}\r\n",
            header_safe(helo),
            header_safe(&self.shared.cfg.hostname),
            at.to_rfc2822(),
        )
    }
}

/// Client-supplied text made safe to put in a header: one line, no comment delimiters, bounded length.
fn header_safe(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .take(255)
        .map(|c| {
            if c.is_control() || c.is_whitespace() || c == '(' || c == ')' || c == '<' || c == '>' {
                '?'
            } else {
                c
            }
        })
        .collect();
    if cleaned.is_empty() {
        "unknown".to_owned()
    } else {
        cleaned
    }
}

fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

fn parse_error_reply(err: &ParseError) -> (u16, String) {
    match err {
        ParseError::UnknownCommand => (500, "5.5.1 Command unrecognized".to_owned()),
        ParseError::InvalidSenderAddress => (501, "5.1.7 Invalid sender address".to_owned()),
        ParseError::InvalidRecipientAddress => {
            (501, "5.1.3 Invalid recipient address syntax".to_owned())
        }
        ParseError::SyntaxError { syntax } => (501, format!("5.5.4 Syntax: {syntax}")),
        ParseError::InvalidParameter { param } => (501, format!("5.5.4 Invalid parameter {param}")),
        ParseError::UnsupportedParameter { param } => (
            504,
            format!("5.5.4 Unsupported parameter {}", one_line(param)),
        ),
        ParseError::ResponseTooLong => (500, "5.5.6 Line too long".to_owned()),
        ParseError::NeedsMoreData { .. } | ParseError::InvalidResponse { .. } => {
            (500, "5.5.2 Syntax error".to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SinkError;
    use crate::inbound::limits::Limiter;
    use crate::inbound::{MailSink, SmtpConfig};
    use admission::{Admission, Listener};
    use rand::{Rng, SeedableRng};
    use std::time::Duration;

    struct AcceptSeeds;

    #[async_trait::async_trait]
    impl MailSink for AcceptSeeds {
        async fn check_recipient(&self, rcpt: &str) -> RcptDecision {
            if rcpt.ends_with("@seed.test") {
                RcptDecision::Accept
            } else {
                RcptDecision::unknown_mailbox()
            }
        }

        async fn store(&self, _msg: InboundMessage) -> Result<(), SinkError> {
            Ok(())
        }
    }

    /// Runs one session over in-memory I/O with `input` and returns everything the server said.
    /// A panic anywhere in the session fails the calling test.
    async fn converse(input: &[u8]) -> Vec<u8> {
        let cfg = SmtpConfig {
            hostname: "mx.test".to_owned(),
            max_message_bytes: 4096,
            max_recipients: 3,
            idle_timeout: Duration::from_millis(200),
            ..SmtpConfig::default()
        };
        let admission = Admission::new(Listener::Smtp, cfg.max_connections, 4);
        let shared = Arc::new(Shared {
            admission: admission.clone(),
            limiter: Arc::new(Limiter::new(1000)),
            cfg,
            sink: Arc::new(AcceptSeeds),
            tls: None,
        });
        let peer: SocketAddr = ([127, 0, 0, 1], 40000).into();
        let place = admission.admit(peer.ip(), false).expect("a place");
        let (_stop_tx, stop_rx) = watch::channel(false);
        let (mut client, server) = tokio::io::duplex(16 * 1024);
        let session = run(shared, server, peer, stop_rx, place);
        let talk = async {
            // The server may hang up before reading everything; that is not an error here.
            let _ = client.write_all(input).await;
            let _ = client.shutdown().await;
            let mut output = Vec::new();
            let _ = client.read_to_end(&mut output).await;
            output
        };
        let ((), output) = tokio::join!(session, talk);
        output
    }

    #[tokio::test]
    async fn every_reply_line_starts_with_a_code() {
        let output = converse(
            b"EHLO a\r\nMAIL FROM:<x@y>\r\nRCPT TO:<a@seed.test>\r\nDATA\r\nhi\r\n.\r\nQUIT\r\n",
        )
        .await;
        let text = String::from_utf8(output).expect("replies are ASCII");
        let codes: Vec<&str> = text.lines().map(|l| &l[..3]).collect();
        assert_eq!(codes.first(), Some(&"220"));
        assert_eq!(codes.last(), Some(&"221"));
        assert!(codes.contains(&"354"));
    }

    #[tokio::test]
    async fn random_input_never_panics_and_gets_only_well_formed_replies() {
        let pieces: [&[u8]; 12] = [
            b"EHLO x\r\n",
            b"HELO \xff\xfe\r\n",
            b"MAIL FROM:<a@b> SIZE=10\r\n",
            b"MAIL FROM:<> BODY=8BITMIME SMTPUTF8\r\n",
            b"RCPT TO:<r@seed.test>\r\n",
            b"RCPT TO:<r@other.test> NOTIFY=NEVER\r\n",
            b"DATA\r\n",
            b"BDAT 7\r\n",
            b"BDAT 0 LAST\r\n",
            b".\r\n",
            b"RSET\r\n",
            b"STARTTLS\r\n",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut replies = 0;
        for _ in 0..300 {
            let mut input = Vec::new();
            for _ in 0..rng.gen_range(1..30) {
                match rng.gen_range(0..3) {
                    0 => input.extend((0..rng.gen_range(0..300)).map(|_| rng.gen::<u8>())),
                    1 => input.extend(std::iter::repeat_n(b'.', rng.gen_range(0..5000))),
                    _ => input.extend_from_slice(pieces[rng.gen_range(0..pieces.len())]),
                }
            }
            let output = converse(&input).await;
            for line in output.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let well_formed = line.len() >= 5
                    && line[..3].iter().all(u8::is_ascii_digit)
                    && (line[3] == b' ' || line[3] == b'-')
                    && line.ends_with(b"\r");
                assert!(
                    well_formed,
                    "bad reply line {:?}",
                    String::from_utf8_lossy(line)
                );
                replies += 1;
            }
        }
        assert!(
            replies > 3000,
            "the sessions really ran: {replies} reply lines"
        );
    }
}
