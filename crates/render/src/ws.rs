//! One JSON command/response/event websocket to a browser, shared by CDP and WebDriver BiDi.
//!
//! Both protocols send `{"id", "method", "params"}` commands and answer with the same `id`; all
//! other messages are events. A reader task routes answers to their waiting callers and events to
//! the subscribers whose filter matches, so many slots can talk over one socket at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::error::RenderError;
use domain::Engine;

/// Largest message accepted from a browser: a tall 3x screenshot in base64 fits comfortably.
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

type Filter = Box<dyn Fn(&Value) -> bool + Send + Sync>;

struct Subscriber {
    id: u64,
    filter: Filter,
    tx: mpsc::UnboundedSender<Value>,
}

#[derive(Default)]
struct Routes {
    pending: HashMap<u64, oneshot::Sender<Value>>,
    subscribers: Vec<Subscriber>,
    /// Set once the socket is gone: later commands fail at once instead of waiting for a timeout.
    closed: Option<String>,
}

/// A command/event connection; cheap to share behind an `Arc`.
pub(crate) struct Connection {
    engine: Engine,
    out: mpsc::UnboundedSender<Message>,
    routes: Arc<Mutex<Routes>>,
    next_id: AtomicU64,
    /// Milliseconds; long while the engine starts (a busy machine), short once it runs.
    command_timeout_ms: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

/// Events for one subscriber; unsubscribes when dropped.
pub(crate) struct Events {
    id: u64,
    rx: mpsc::UnboundedReceiver<Value>,
    routes: Arc<Mutex<Routes>>,
}

impl Events {
    /// The next matching event, or `None` when the connection closed.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        self.rx.recv().await
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.routes.lock() {
            routes.subscribers.retain(|s| s.id != self.id);
        }
    }
}

impl Connection {
    /// Opens the websocket at `url`; `command_timeout` bounds every later command.
    pub(crate) async fn open(
        engine: Engine,
        url: &str,
        command_timeout: Duration,
    ) -> Result<Connection, RenderError> {
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let connect = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
        let (socket, _) = tokio::time::timeout(command_timeout, connect)
            .await
            .map_err(|_| RenderError::EngineStart {
                engine,
                reason: format!("no websocket handshake at {url} within {command_timeout:?}"),
            })?
            .map_err(|e| RenderError::EngineStart {
                engine,
                reason: format!("websocket {url}: {e}"),
            })?;
        let (mut sink, mut stream) = socket.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        let routes = Arc::new(Mutex::new(Routes::default()));

        let writer = tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
        });

        let reader_routes = routes.clone();
        let reader = tokio::spawn(async move {
            let reason = loop {
                match stream.next().await {
                    Some(Ok(Message::Text(text))) => route(&reader_routes, text.as_str()),
                    Some(Ok(Message::Binary(bytes))) => {
                        if let Ok(text) = std::str::from_utf8(&bytes) {
                            route(&reader_routes, text);
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        break "the browser closed the websocket".to_string()
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break format!("websocket error: {e}"),
                };
            };
            if let Ok(mut routes) = reader_routes.lock() {
                routes.closed = Some(reason);
                // Dropping the senders wakes every waiter with an error.
                routes.pending.clear();
                routes.subscribers.clear();
            }
        });

        Ok(Connection {
            engine,
            out,
            routes,
            next_id: AtomicU64::new(1),
            command_timeout_ms: AtomicU64::new(millis(command_timeout)),
            reader,
            writer,
        })
    }

    /// True while the socket is open.
    pub(crate) fn is_open(&self) -> bool {
        self.routes
            .lock()
            .map(|r| r.closed.is_none())
            .unwrap_or(false)
    }

    /// Registers for events that `filter` accepts; register before sending the command that
    /// causes them, so none is missed.
    pub(crate) fn subscribe(
        &self,
        filter: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Events {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut routes) = self.routes.lock() {
            if routes.closed.is_none() {
                routes.subscribers.push(Subscriber {
                    id,
                    filter: Box::new(filter),
                    tx,
                });
            }
        }
        Events {
            id,
            rx,
            routes: self.routes.clone(),
        }
    }

    /// Sends `method` with `params` (plus `extra` top-level fields such as a CDP `sessionId`) and
    /// returns the raw answer message.
    pub(crate) async fn call_raw(
        &self,
        method: &str,
        params: Value,
        extra: Option<(&str, &str)>,
    ) -> Result<Value, RenderError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some((key, value)) = extra {
            message[key] = Value::String(value.to_string());
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut routes = self.routes.lock().map_err(|_| self.died("lock poisoned"))?;
            if let Some(reason) = &routes.closed {
                return Err(self.died(reason));
            }
            routes.pending.insert(id, tx);
        }
        if self
            .out
            .send(Message::Text(message.to_string().into()))
            .is_err()
        {
            return Err(self.died("the websocket writer stopped"));
        }
        tracing::trace!(engine = %self.engine, id, method, "command sent");
        let command_timeout = self.command_timeout();
        match tokio::time::timeout(command_timeout, rx).await {
            Ok(Ok(answer)) => {
                tracing::trace!(engine = %self.engine, id, method, "answered");
                Ok(answer)
            }
            Ok(Err(_)) => {
                let reason = self
                    .routes
                    .lock()
                    .ok()
                    .and_then(|r| r.closed.clone())
                    .unwrap_or_else(|| "the websocket closed".into());
                Err(self.died(&reason))
            }
            Err(_) => {
                if let Ok(mut routes) = self.routes.lock() {
                    routes.pending.remove(&id);
                }
                Err(RenderError::EngineHung {
                    engine: self.engine,
                    what: format!("{method} got no answer within {command_timeout:?}"),
                })
            }
        }
    }

    /// Bounds every later command (the start-up commands ran under a longer one).
    pub(crate) fn set_command_timeout(&self, timeout: Duration) {
        self.command_timeout_ms
            .store(millis(timeout), Ordering::Relaxed);
    }

    fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms.load(Ordering::Relaxed))
    }

    fn died(&self, reason: &str) -> RenderError {
        RenderError::EngineDied {
            engine: self.engine,
            reason: reason.to_string(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
        // Subscribers living in their own tasks (dialog handlers) learn that the socket is gone.
        if let Ok(mut routes) = self.routes.lock() {
            routes
                .closed
                .get_or_insert_with(|| "the connection was dropped".into());
            routes.subscribers.clear();
        }
    }
}

fn route(routes: &Mutex<Routes>, text: &str) {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        tracing::debug!("ignoring a browser message that is not JSON");
        return;
    };
    let Ok(mut routes) = routes.lock() else {
        return;
    };
    // Answers carry the command id; BiDi events have `"type":"event"` and CDP events no id.
    let is_event =
        message.get("type").and_then(Value::as_str) == Some("event") || message.get("id").is_none();
    if !is_event {
        if let Some(waiter) = message
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| routes.pending.remove(&id))
        {
            let _ = waiter.send(message);
        }
        return;
    }
    tracing::trace!(method = ?message.get("method"), "event");
    routes
        .subscribers
        .retain(|s| !((s.filter)(&message) && s.tx.send(message.clone()).is_err()));
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
