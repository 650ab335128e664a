//! A TCP proxy in front of a real server or database, to cut its connections.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// A TCP proxy in front of a real server, which a test can make refuse
/// connections (and cut the open ones) and accept again, on the same port.
pub struct TcpProxy {
    pub port: u16,
    target: SocketAddr,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl TcpProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = Self::bind(0).await;
        let proxy = Self {
            port: listener.local_addr().unwrap().port(),
            target,
            tasks: Default::default(),
        };
        proxy.serve(listener);
        proxy
    }

    async fn bind(port: u16) -> tokio::net::TcpListener {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .unwrap();
        socket.listen(64).unwrap()
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (target, tasks) = (self.target, self.tasks.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                    continue;
                };
                let pipe = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                tasks.lock().unwrap().push(pipe);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    /// Close the port and cut every open connection.
    pub fn refuse(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Listen on the same port again.
    pub async fn accept_again(&self) {
        // The aborted accept task drops its listener asynchronously.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let listener = Self::bind(self.port).await;
        self.serve(listener);
    }
}
