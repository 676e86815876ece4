//! The `electd` binary's commands besides running a node: the client commands against one
//! node (`client`) and the supervisor that runs a command only while its node claims (`run`).

pub mod client;
pub mod run;
