//! The network: pipes (access links and propagation legs), bottleneck links with
//! their queue disciplines, and the routes that chain them for each flow.

pub mod aqm;
pub mod delay_line;
pub mod dynamics;
pub mod link;
pub mod loss;
pub mod pipe;
pub mod qdisc;
pub mod queue;
pub mod stall;
pub mod trace;
