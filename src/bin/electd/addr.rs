//! `--node ADDR`: where the node a command talks to is, one flag for every command.

/// `--node ADDR` (or `ELECTD_NODE`): the node a command talks to.
#[derive(clap::Args, Debug)]
pub struct NodeAddr {
    /// The node to ask, IP:PORT (or HOST:PORT).
    #[arg(
        id = "node",
        long = "node",
        value_name = "ADDR",
        env = "ELECTD_NODE",
        default_value = "127.0.0.1:7001",
        global = true
    )]
    pub addr: String,
}
