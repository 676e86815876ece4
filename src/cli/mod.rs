//! The `electd` binary's commands besides running a node: the client commands against one
//! node (`client`) and the supervisor that runs a command only while its node claims (`run`),
//! both told where the node is by `--node` (`addr`).

pub mod addr;
pub mod client;
pub mod run;
