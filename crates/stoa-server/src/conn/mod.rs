//! Connection loops: read, parse, hand each request to routing through an
//! [`Exchange`](crate::exchange::Exchange), keep alive or close. They
//! never import handlers.

pub mod h1;
