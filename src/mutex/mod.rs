//! Mutex mode: a lease on a row of a real PostgreSQL database, the way many teams elect a
//! coordinator (a database row, a Redis key, a Kubernetes Lease, a blob lease). Kept in its
//! plain form so that it can be compared with quorum mode under the same faults: its
//! availability is the store's, and its safety rests on the store's durability (the store's
//! clock plays no part: the row is judged on each node's own clock, `node.rs`).
//!
//! | file | holds |
//! |---|---|
//! | `store.rs` | the table, the one statement that takes or renews the row, the client that sends it through the fault set |
//! | `node.rs` | [`MutexNode`]: the beat, the claim (through the shared lease), the safety argument; as the node's `Engine`, the view, resignation and stop |

mod node;
mod store;

pub use self::node::MutexNode;
pub use self::store::{Store, StoreError};
