//! One stub for the outside SMTP servers a test talks to (a caller's provider, a mail host): it
//! listens on a loopback port, can demand AUTH (PLAIN or LOGIN, without TLS), records every
//! accepted message with its envelope, can hand each message on to another SMTP server before it
//! answers 250 (as a provider delivers to the seed addresses), and answers the codes a test asks
//! for at RCPT or at the end of DATA.
//!
//! Commands are parsed and the EHLO reply is written by `smtp-proto` (Stalwart's, which the
//! inbound listener uses too); relaying goes through `lettre`, the workspace's SMTP client. No
//! crate offers this as a server: `mailin-embedded` runs a thread per connection with a blocking
//! handler, which cannot relay through an async client before it answers, and `samotop` is no
//! longer kept up.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use lettre::address::Envelope;
use lettre::transport::smtp::client::Tls;
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use smtp_proto::{EhloResponse, Request, AUTH_LOGIN, AUTH_PLAIN, EXT_8BIT_MIME, EXT_AUTH};
use smtp_proto::{EXT_ENHANCED_STATUS_CODES, EXT_SMTP_UTF8};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// The longest command or message line the stub reads; nothing a test sends comes near it.
const MAX_LINE: usize = 64 * 1024;
/// How long a relay may take before the stub answers 451.
const RELAY_TIMEOUT: Duration = Duration::from_secs(60);

/// One message the stub accepted.
#[derive(Clone, Debug)]
pub struct Received {
    /// The envelope sender (`MAIL FROM`), empty for the null sender.
    pub mail_from: String,
    /// The envelope recipients (`RCPT TO`) the stub accepted, in order.
    pub rcpt_to: Vec<String>,
    /// The message as sent, dot-stuffing undone, ending with the line break before the final dot.
    pub data: Vec<u8>,
    /// The user that authenticated, if any.
    pub user: Option<String>,
}

/// An SMTP reply the test makes the stub give.
#[derive(Clone, Debug)]
pub struct Reply {
    pub code: u16,
    /// The text after the code, e.g. `5.1.1 Mailbox refused`.
    pub text: String,
}

impl Reply {
    pub fn new(code: u16, text: &str) -> Reply {
        Reply {
            code,
            text: text.to_owned(),
        }
    }
}

type RcptAnswer = Arc<dyn Fn(&str) -> Option<Reply> + Send + Sync>;

/// How a stub behaves; [`SmtpStub::builder`] starts one that takes any mail without AUTH.
#[derive(Clone)]
pub struct Builder {
    hostname: String,
    credentials: Option<(String, String)>,
    relay: Option<SocketAddr>,
    rcpt: Option<RcptAnswer>,
    data: Option<Reply>,
}

impl Builder {
    /// The name the stub gives in its greeting and EHLO reply, and as a relay in its own EHLO.
    pub fn hostname(mut self, hostname: &str) -> Builder {
        self.hostname = hostname.to_owned();
        self
    }

    /// Demand AUTH with this user and password before `MAIL FROM` (530 without, 535 if wrong).
    pub fn auth(mut self, user: &str, password: &str) -> Builder {
        self.credentials = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Hand every accepted message to the SMTP server at `to` (without TLS or AUTH) before
    /// answering 250; if that fails, answer 451 and record nothing.
    pub fn relay_to(mut self, to: SocketAddr) -> Builder {
        self.relay = Some(to);
        self
    }

    /// Answer `RCPT TO:<address>` with what `answer` returns for the address, where it returns
    /// one (the recipient is then not taken).
    pub fn answer_rcpt(
        mut self,
        answer: impl Fn(&str) -> Option<Reply> + Send + Sync + 'static,
    ) -> Builder {
        self.rcpt = Some(Arc::new(answer));
        self
    }

    /// Answer every message at the end of DATA with `reply` instead of taking it (a 2xx reply
    /// still records it).
    pub fn answer_data(mut self, reply: Reply) -> Builder {
        self.data = Some(reply);
        self
    }

    /// Listens on 127.0.0.1 (port chosen by the system) until the test's runtime ends.
    pub async fn start(self) -> SmtpStub {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap_or_else(|e| panic!("bind a stub SMTP server on 127.0.0.1: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the stub's address: {e}"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            config: self,
            received: received.clone(),
        });
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(Session::new(shared.clone()).run(stream));
            }
        });
        SmtpStub { addr, received }
    }
}

/// A running stub; it stops when the test's runtime ends.
#[derive(Clone)]
pub struct SmtpStub {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl SmtpStub {
    pub fn builder() -> Builder {
        Builder {
            hostname: "smtp-stub.test".to_owned(),
            credentials: None,
            relay: None,
            rcpt: None,
            data: None,
        }
    }

    /// Every message accepted so far, in order of arrival.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

struct Shared {
    config: Builder,
    received: Arc<Mutex<Vec<Received>>>,
}

struct Session {
    shared: Arc<Shared>,
    user: Option<String>,
    mail_from: Option<String>,
    rcpt_to: Vec<String>,
}

/// What one command leaves the session to do.
enum Next {
    Reply(u16, String),
    /// The reply is already written.
    Continue,
    Quit,
}

fn reply(code: u16, text: &str) -> Next {
    Next::Reply(code, text.to_owned())
}

impl Session {
    fn new(shared: Arc<Shared>) -> Session {
        Session {
            shared,
            user: None,
            mail_from: None,
            rcpt_to: Vec::new(),
        }
    }

    fn config(&self) -> &Builder {
        &self.shared.config
    }

    async fn run(mut self, stream: TcpStream) {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let greeting = format!("220 {} ESMTP testkit stub\r\n", self.config().hostname);
        if write.write_all(greeting.as_bytes()).await.is_err() {
            return;
        }
        while let Some(line) = read_line(&mut read).await {
            let next = match Request::parse(&mut line.iter()) {
                Ok(request) => {
                    self.command(request.into_owned(), &mut read, &mut write)
                        .await
                }
                Err(_) => reply(500, "5.5.2 Syntax error"),
            };
            let done = match next {
                Next::Reply(code, text) => write
                    .write_all(format!("{code} {text}\r\n").as_bytes())
                    .await
                    .is_err(),
                Next::Continue => false,
                Next::Quit => true,
            };
            if done {
                return;
            }
        }
    }

    async fn command(
        &mut self,
        request: Request<String>,
        read: &mut BufReader<OwnedReadHalf>,
        write: &mut OwnedWriteHalf,
    ) -> Next {
        match request {
            Request::Ehlo { .. } => {
                let mut ehlo = EhloResponse::new(self.config().hostname.as_str());
                ehlo.capabilities = EXT_8BIT_MIME | EXT_ENHANCED_STATUS_CODES | EXT_SMTP_UTF8;
                if self.config().credentials.is_some() {
                    ehlo.capabilities |= EXT_AUTH;
                    ehlo.auth_mechanisms = AUTH_PLAIN | AUTH_LOGIN;
                }
                let mut out = Vec::new();
                if ehlo.write(&mut out).is_err() || write.write_all(&out).await.is_err() {
                    return Next::Quit;
                }
                Next::Continue
            }
            Request::Helo { .. } => Next::Reply(250, self.config().hostname.clone()),
            Request::Auth {
                mechanism,
                initial_response,
            } => self.auth(mechanism, initial_response, read, write).await,
            Request::Mail { from } => {
                if self.config().credentials.is_some() && self.user.is_none() {
                    return reply(530, "5.7.0 Authentication required");
                }
                self.mail_from = Some(from.address);
                self.rcpt_to.clear();
                reply(250, "2.1.0 OK")
            }
            Request::Rcpt { to } => {
                if self.mail_from.is_none() {
                    return reply(503, "5.5.1 MAIL first");
                }
                if let Some(answer) = self.config().rcpt.as_ref().and_then(|f| f(&to.address)) {
                    return Next::Reply(answer.code, answer.text);
                }
                self.rcpt_to.push(to.address);
                reply(250, "2.1.5 OK")
            }
            Request::Data => self.data(read, write).await,
            Request::Rset => {
                self.mail_from = None;
                self.rcpt_to.clear();
                reply(250, "2.0.0 OK")
            }
            Request::Noop { .. } => reply(250, "2.0.0 OK"),
            Request::Quit => {
                let _ = write.write_all(b"221 2.0.0 Bye\r\n").await;
                Next::Quit
            }
            _ => reply(502, "5.5.1 Not implemented"),
        }
    }

    async fn auth(
        &mut self,
        mechanism: u64,
        initial: String,
        read: &mut BufReader<OwnedReadHalf>,
        write: &mut OwnedWriteHalf,
    ) -> Next {
        let Some((user, password)) = self.config().credentials.clone() else {
            return reply(502, "5.5.1 AUTH not offered");
        };
        if self.user.is_some() {
            return reply(503, "5.5.1 Already authenticated");
        }
        // The initial response, if sent, stands for the answer to the first prompt.
        let mut initial = (!initial.is_empty()).then_some(initial);
        let given = match mechanism {
            AUTH_PLAIN => step(&mut initial, b"334 \r\n", read, write)
                .await
                .and_then(|plain| {
                    // authzid NUL authcid NUL password
                    let mut parts = plain.splitn(3, |b| *b == 0).skip(1);
                    Some((parts.next()?.to_vec(), parts.next()?.to_vec()))
                }),
            AUTH_LOGIN => match step(&mut initial, b"334 VXNlcm5hbWU6\r\n", read, write).await {
                Some(login) => step(&mut initial, b"334 UGFzc3dvcmQ6\r\n", read, write)
                    .await
                    .map(|password| (login, password)),
                None => None,
            },
            _ => return reply(504, "5.5.4 Unrecognized authentication type"),
        };
        match given {
            Some((u, p)) if u == user.as_bytes() && p == password.as_bytes() => {
                self.user = Some(user);
                reply(235, "2.7.0 Authentication successful")
            }
            Some(_) => reply(535, "5.7.8 Authentication credentials invalid"),
            None => reply(501, "5.5.2 Cannot decode the response"),
        }
    }

    async fn data(
        &mut self,
        read: &mut BufReader<OwnedReadHalf>,
        write: &mut OwnedWriteHalf,
    ) -> Next {
        let Some(mail_from) = self.mail_from.take() else {
            return reply(503, "5.5.1 MAIL first");
        };
        if self.rcpt_to.is_empty() {
            self.mail_from = Some(mail_from);
            return reply(503, "5.5.1 RCPT first");
        }
        let rcpt_to = std::mem::take(&mut self.rcpt_to);
        if write
            .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
            .await
            .is_err()
        {
            return Next::Quit;
        }
        let mut data = Vec::new();
        loop {
            let Some(line) = read_line(read).await else {
                return Next::Quit;
            };
            if line == b".\r\n" || line == b".\n" {
                break;
            }
            data.extend_from_slice(line.strip_prefix(b".").unwrap_or(&line));
        }
        let received = Received {
            mail_from,
            rcpt_to,
            data,
            user: self.user.clone(),
        };
        if let Some(answer) = &self.config().data {
            if answer.code / 100 == 2 {
                self.record(received);
            }
            return Next::Reply(answer.code, answer.text.clone());
        }
        if let Some(to) = self.config().relay {
            if let Err(e) = relay(to, &self.config().hostname, &received).await {
                return Next::Reply(451, format!("4.4.1 Relay to {to} failed: {e}"));
            }
        }
        self.record(received);
        reply(250, "2.0.0 OK")
    }

    fn record(&self, received: Received) {
        if let Ok(mut all) = self.shared.received.lock() {
            all.push(received);
        }
    }
}

/// One base64 step of an AUTH exchange, decoded: `initial` if still there, else the client's
/// answer to `prompt`.
async fn step(
    initial: &mut Option<String>,
    prompt: &[u8],
    read: &mut BufReader<OwnedReadHalf>,
    write: &mut OwnedWriteHalf,
) -> Option<Vec<u8>> {
    if let Some(given) = initial.take() {
        return decode(given.as_bytes());
    }
    write.write_all(prompt).await.ok()?;
    decode(&read_line(read).await?)
}

/// One line including its line break; `None` at the end of the stream or past [`MAX_LINE`].
async fn read_line(read: &mut BufReader<OwnedReadHalf>) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let mut limited = (&mut *read).take(MAX_LINE as u64);
    match limited.read_until(b'\n', &mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) if line.ends_with(b"\n") => Some(line),
        Ok(_) => None,
    }
}

fn decode(line: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?.trim();
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

async fn relay(to: SocketAddr, hostname: &str, message: &Received) -> Result<(), crate::Error> {
    let from = match message.mail_from.as_str() {
        "" => None,
        from => Some(from.parse()?),
    };
    let rcpt_to = message
        .rcpt_to
        .iter()
        .map(|r| r.parse())
        .collect::<Result<Vec<_>, _>>()?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(to.ip().to_string())
        .port(to.port())
        .tls(Tls::None)
        .hello_name(ClientId::Domain(hostname.to_owned()))
        .timeout(Some(RELAY_TIMEOUT))
        .build();
    // lettre ends the data with CRLF . CRLF whatever it ends with, so the message's own final
    // line break is left to it, as `smtp::send_via` does.
    let data = message.data.strip_suffix(b"\r\n").unwrap_or(&message.data);
    transport
        .send_raw(&Envelope::new(from, rcpt_to)?, data)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use lettre::transport::smtp::authentication::{Credentials, Mechanism};

    use super::*;

    async fn send(
        stub: &SmtpStub,
        login: Option<(&str, Mechanism)>,
        rcpt: &str,
        data: &[u8],
    ) -> Result<(), lettre::transport::smtp::Error> {
        let mut transport =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(stub.addr.ip().to_string())
                .port(stub.addr.port())
                .tls(Tls::None);
        if let Some((password, mechanism)) = login {
            transport = transport
                .credentials(Credentials::new("user".into(), password.into()))
                .authentication(vec![mechanism]);
        }
        let envelope = Envelope::new(
            Some("from@a.example".parse().expect("address")),
            vec![rcpt.parse().expect("address")],
        )
        .expect("envelope");
        // As the service sends: lettre adds the final line break itself.
        let data = data.strip_suffix(b"\r\n").unwrap_or(data);
        transport.build().send_raw(&envelope, data).await.map(drop)
    }

    #[tokio::test]
    async fn relays_after_auth_and_records_on_both_sides() {
        let inner = SmtpStub::builder().start().await;
        let outer = SmtpStub::builder()
            .auth("user", "pw")
            .relay_to(inner.addr)
            .start()
            .await;
        let data = b"Subject: hi\r\n\r\n.dot first\r\nend\r\n";
        send(&outer, Some(("pw", Mechanism::Plain)), "to@b.example", data)
            .await
            .expect("PLAIN with the right password");
        send(&outer, Some(("pw", Mechanism::Login)), "to@b.example", data)
            .await
            .expect("LOGIN with the right password");
        let (sent, relayed) = (outer.received(), inner.received());
        assert_eq!(sent.len(), 2);
        assert_eq!(relayed.len(), 2);
        for m in sent.iter().chain(&relayed) {
            assert_eq!(m.data, data, "dot-stuffing undone, bytes unchanged");
            assert_eq!(m.mail_from, "from@a.example");
            assert_eq!(m.rcpt_to, ["to@b.example"]);
        }
        assert_eq!(sent[0].user.as_deref(), Some("user"));
        assert_eq!(relayed[0].user, None);
    }

    #[tokio::test]
    async fn refuses_without_or_with_wrong_credentials() {
        let stub = SmtpStub::builder().auth("user", "pw").start().await;
        for (login, code) in [
            (None, 530),
            (Some(("wrong", Mechanism::Plain)), 535),
            (Some(("wrong", Mechanism::Login)), 535),
        ] {
            let err = send(&stub, login, "to@b.example", b"x\r\n")
                .await
                .expect_err("refused");
            assert_eq!(err.status().map(u16::from), Some(code), "{err}");
        }
        assert!(stub.received().is_empty());
    }

    #[tokio::test]
    async fn answers_the_codes_it_is_told_and_a_failed_relay_with_451() {
        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let stub = SmtpStub::builder()
            .answer_rcpt(|rcpt| {
                rcpt.starts_with("reject@")
                    .then(|| Reply::new(550, "5.1.1 Mailbox refused"))
            })
            .relay_to(closed)
            .start()
            .await;
        let err = send(&stub, None, "reject@b.example", b"x\r\n")
            .await
            .expect_err("refused recipient");
        assert_eq!(err.status().map(u16::from), Some(550), "{err}");
        let err = send(&stub, None, "to@b.example", b"x\r\n")
            .await
            .expect_err("nothing listens where it relays");
        assert_eq!(err.status().map(u16::from), Some(451), "{err}");
        assert!(stub.received().is_empty());

        let stub = SmtpStub::builder()
            .answer_data(Reply::new(554, "5.7.1 Spam"))
            .start()
            .await;
        let err = send(&stub, None, "to@b.example", b"x\r\n")
            .await
            .expect_err("refused message");
        assert_eq!(err.status().map(u16::from), Some(554), "{err}");
        assert!(stub.received().is_empty());
    }
}
