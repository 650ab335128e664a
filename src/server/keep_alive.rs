//! The open connections as the connection cap sees them: which are busy
//! answering, and which are idle keep-alive connections waiting for a next
//! request that may never come. At the cap, the connection idle the longest
//! is closed to let a new client in, as nginx does, instead of answering
//! every newcomer 503 while idle sockets hold every place.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Instant;
use tokio::sync::Notify;

/// One open connection.
#[derive(Default)]
pub struct Connection {
    /// Requests being answered on it now.
    busy: AtomicUsize,
    /// Requests answered on it so far.
    answered: AtomicU64,
    /// When its last answer was done, in milliseconds since the registry
    /// began.
    idle_since: AtomicU64,
    /// Picked to make room; closed once its current answer is done.
    picked: AtomicBool,
    close: Notify,
}

impl Connection {
    /// Resolves once the connection is picked to make room.
    pub async fn picked(&self) {
        self.close.notified().await;
    }
}

/// Held while a request is answered on a connection.
pub struct Answering {
    connection: Arc<Connection>,
    epoch: Instant,
}

impl Drop for Answering {
    fn drop(&mut self) {
        let connection = &self.connection;
        let now = self.epoch.elapsed().as_millis() as u64;
        connection.idle_since.store(now, Ordering::SeqCst);
        connection.answered.fetch_add(1, Ordering::SeqCst);
        connection.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every open connection, by id.
pub struct OpenConnections {
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
}

impl Default for OpenConnections {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::default(),
        }
    }
}

impl OpenConnections {
    /// A new connection, until [`OpenConnections::closed`] with its id.
    pub fn opened(&self) -> (u64, Arc<Connection>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::default());
        self.lock().insert(id, connection.clone());
        (id, connection)
    }

    pub fn closed(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Marks a request as being answered on `connection` until the guard
    /// is dropped.
    pub fn answering(&self, connection: &Arc<Connection>) -> Answering {
        connection.busy.fetch_add(1, Ordering::SeqCst);
        Answering {
            connection: connection.clone(),
            epoch: self.epoch,
        }
    }

    /// Picks the keep-alive connection idle the longest (it has answered a
    /// request and answers none now) and tells it to close; whether there
    /// was one. A connection that never sent a whole request is not idle
    /// but slow, and its header time-out deals with it.
    pub fn close_the_idlest(&self) -> bool {
        let open = self.lock();
        let idlest = open
            .values()
            .filter(|c| {
                c.busy.load(Ordering::SeqCst) == 0
                    && c.answered.load(Ordering::SeqCst) > 0
                    && !c.picked.load(Ordering::SeqCst)
            })
            .min_by_key(|c| c.idle_since.load(Ordering::SeqCst));
        let Some(idlest) = idlest else {
            return false;
        };
        idlest.picked.store(true, Ordering::SeqCst);
        idlest.close.notify_one();
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keep_alive_connection_idle_longest_is_picked_never_a_busy_or_fresh_one() {
        let open = OpenConnections::default();
        let (_, fresh) = open.opened();
        let (_, idle_first) = open.opened();
        let (_, idle_later) = open.opened();
        let (_, busy) = open.opened();
        drop(open.answering(&idle_first));
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(open.answering(&idle_later));
        drop(open.answering(&busy));
        let _answering = open.answering(&busy);

        assert!(open.close_the_idlest());
        assert!(idle_first.picked.load(Ordering::SeqCst));
        assert!(open.close_the_idlest());
        assert!(idle_later.picked.load(Ordering::SeqCst));
        assert!(
            !open.close_the_idlest(),
            "only a busy and a fresh one are left"
        );
        assert!(!busy.picked.load(Ordering::SeqCst));
        assert!(!fresh.picked.load(Ordering::SeqCst));
    }
}
