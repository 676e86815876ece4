//! Loopback address blocks for test and chaos clusters, one per cluster, never shared.

use electd_client::NodeId;

/// The port every node of a test or chaos cluster listens on, each on its own loopback address.
/// Below the kernel's ephemeral range (32768–60999), so no outgoing connection can hold it.
pub const BLOCK_NODE_PORT: u16 = 7100;
/// The port of the claim socket on `127.A.B.254`: whoever holds it owns the block.
const BLOCK_CLAIM_PORT: u16 = 7099;

/// A block of loopback addresses `127.A.B.0/24` that this process owns while the value lives,
/// for one test or chaos cluster: node N listens on `127.A.B.(10+N):7100`.
///
/// Ports taken from the ephemeral range and freed again can be taken by anything else (a
/// parallel test's cluster, an outgoing connection) before a node restarts on them. A block
/// cannot: nothing else binds these addresses, and the block is claimed by a listening socket
/// on `127.A.B.254`, so two processes (two `scripts/test.sh` runs, parallel tests) never share
/// one. The block is picked from the process id and a per-process counter, skipping held ones.
pub struct AddrBlock {
    a: u8,
    b: u8,
    _claim: std::net::TcpListener,
}

impl AddrBlock {
    /// Claims a free block; panics only when 4096 candidates are all held.
    pub fn claim() -> AddrBlock {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = u64::from(std::process::id());
        for _ in 0..4096 {
            let k = splitmix(pid << 20 ^ NEXT.fetch_add(1, Ordering::Relaxed));
            // 127.0.x.x is left to the bundled cluster and to everything else on the host.
            let a = 1 + (k % 254) as u8;
            let b = (k >> 8) as u8;
            let ip = std::net::Ipv4Addr::new(127, a, b, 254);
            if let Ok(l) = std::net::TcpListener::bind((ip, BLOCK_CLAIM_PORT)) {
                return AddrBlock { a, b, _claim: l };
            }
        }
        panic!("no free 127.A.B.0/24 address block among 4096 candidates");
    }

    /// The loopback IP of node `id` (1-based).
    pub fn ip(&self, id: NodeId) -> String {
        format!("127.{}.{}.{}", self.a, self.b, 10 + id)
    }

    /// The loopback IP of the cluster's store (mutex mode): `127.A.B.200`.
    pub fn store_ip(&self) -> String {
        format!("127.{}.{}.200", self.a, self.b)
    }

    /// The block as a subnet, `127.A.B.0/24` (for iptables rules).
    pub fn subnet(&self) -> String {
        format!("127.{}.{}.0/24", self.a, self.b)
    }

    /// `ip:port` of nodes 1..=n.
    pub fn addrs(&self, n: usize) -> Vec<String> {
        (1..=n as NodeId)
            .map(|id| format!("{}:{BLOCK_NODE_PORT}", self.ip(id)))
            .collect()
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A claimed block and the addresses of its nodes 1..=n.
pub fn claim_addrs(n: usize) -> (AddrBlock, Vec<String>) {
    let block = AddrBlock::claim();
    let addrs = block.addrs(n);
    (block, addrs)
}
