//! A DNS server on loopback that answers A queries from a fixed table, for tests of the lookups
//! mailproof makes (URI blocklists, and the built-in filter's use of them). Every other name is
//! NXDOMAIN. Stops when dropped.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::proto::op::{Message, ResponseCode};
use hickory_resolver::proto::rr::rdata::A;
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;

use crate::dns::DnsMode;

pub struct BlocklistDns {
    addr: SocketAddr,
    queries: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl BlocklistDns {
    /// Serves `records` (names without the trailing dot, any case) on a loopback UDP port.
    pub async fn start<'a>(records: impl IntoIterator<Item = (&'a str, Ipv4Addr)>) -> BlocklistDns {
        let table: HashMap<String, Ipv4Addr> = records
            .into_iter()
            .map(|(name, a)| (name.to_ascii_lowercase(), a))
            .collect();
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

fn answer(request: &[u8], table: &HashMap<String, Ipv4Addr>) -> Option<Vec<u8>> {
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
    let found = table.get(&name).copied();
    let qtype = query.query_type();
    reply.add_query(query.clone());
    match found {
        Some(a) if qtype == RecordType::A => {
            reply.add_answer(Record::from_rdata(query.name().clone(), 60, RData::A(A(a))));
        }
        Some(_) => {}
        None => reply.metadata.response_code = ResponseCode::NXDomain,
    }
    reply.to_vec().ok()
}
