//! openraft's type configuration for electd: no application data, only elections. A leaf of
//! its own so that storage, network and the node all import it from below.

use std::io::Cursor;

// `declare_raft_types!` in 0.9 expects `Cursor` in scope for the default snapshot data type.
openraft::declare_raft_types!(
    /// openraft's type configuration: no application data, only elections.
    pub TypeConfig: D = (), R = ()
);
