//! A DNS server on loopback that answers A, TXT and PTR queries from a fixed table, for tests of
//! the lookups mailproof makes (URI blocklists, the built-in filter's use of them, SPF, DKIM,
//! DMARC and reverse DNS for the sender requirements). A name in the table without a record of
//! the asked type answers empty; every other name is NXDOMAIN. Stops when dropped.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::proto::op::{Message, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, PTR, TXT};
use hickory_resolver::proto::rr::Name;
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;

use crate::dns::DnsMode;

/// One record of the table.
#[derive(Debug, Clone)]
pub enum TestRecord {
    A(Ipv4Addr),
    /// A TXT record; strings longer than 255 bytes are split as DNS requires.
    Txt(String),
    /// A PTR record (the name without the trailing dot).
    Ptr(String),
}

pub struct BlocklistDns {
    addr: SocketAddr,
    queries: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl BlocklistDns {
    /// Serves `records` (names without the trailing dot, any case) on a loopback UDP port.
    pub async fn start<'a>(records: impl IntoIterator<Item = (&'a str, Ipv4Addr)>) -> BlocklistDns {
        BlocklistDns::serve(
            records
                .into_iter()
                .map(|(name, a)| (name.to_owned(), TestRecord::A(a))),
        )
        .await
    }

    /// Serves `records` of any type; a name may have several.
    pub async fn serve(records: impl IntoIterator<Item = (String, TestRecord)>) -> BlocklistDns {
        let mut table: HashMap<String, Vec<TestRecord>> = HashMap::new();
        for (name, record) in records {
            table
                .entry(name.trim_end_matches('.').to_ascii_lowercase())
                .or_default()
                .push(record);
        }
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback UDP port for the test DNS server");
        let addr = socket
            .local_addr()
            .expect("local address of a bound socket");
        let queries = Arc::new(AtomicUsize::new(0));
        let counter = queries.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                counter.fetch_add(1, Ordering::SeqCst);
                let Some(reply) = answer(&buf[..n], &table) else {
                    continue;
                };
                let _ = socket.send_to(&reply, peer).await;
            }
        });
        BlocklistDns {
            addr,
            queries,
            task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Lookups through this server, with a short timeout.
    pub fn mode(&self) -> DnsMode {
        DnsMode::Server {
            addr: self.addr,
            timeout: Duration::from_secs(2),
        }
    }

    /// Queries received so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

impl Drop for BlocklistDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(request: &[u8], table: &HashMap<String, Vec<TestRecord>>) -> Option<Vec<u8>> {
    let request = Message::from_vec(request).ok()?;
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    let query = request.queries.first()?.clone();
    let name = query
        .name()
        .to_ascii()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let qtype = query.query_type();
    reply.add_query(query.clone());
    let Some(records) = table.get(&name) else {
        reply.metadata.response_code = ResponseCode::NXDomain;
        return reply.to_vec().ok();
    };
    for record in records {
        let data = match (record, qtype) {
            (TestRecord::A(a), RecordType::A) => RData::A(A(*a)),
            (TestRecord::Txt(text), RecordType::TXT) => {
                let chunks = text
                    .as_bytes()
                    .chunks(255)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect::<Vec<_>>();
                RData::TXT(TXT::new(chunks))
            }
            (TestRecord::Ptr(host), RecordType::PTR) => {
                RData::PTR(PTR(Name::from_ascii(format!("{host}.")).ok()?))
            }
            _ => continue,
        };
        reply.add_answer(Record::from_rdata(query.name().clone(), 60, data));
    }
    reply.to_vec().ok()
}
