//! The host values behind the WIT resources (`http.body`, `filesystem.contents`): plain data
//! the generated bindings name, so neither the bindings nor the interface modules that serve
//! them depend on each other.

use std::time::Instant;

use crate::port::Room;

/// A response body being read by a plugin (`http.body`).
pub struct Body {
    /// The response, read chunk by chunk.
    pub(crate) response: reqwest::Response,
    /// What the last chunk has left.
    pub(crate) pending: bytes::Bytes,
    /// When the request's timeout runs out.
    pub(crate) deadline: Option<Instant>,
}

/// A file's bytes, held for the guest (`filesystem.contents`), with the room set aside for
/// them in the client's replies ([`crate::port::CallPort::room`]).
#[derive(Debug)]
pub struct Contents {
    pub(crate) data: Vec<u8>,
    pub(crate) room: Room,
}

impl Contents {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The room, for the reply that carries the bytes to keep until it is written.
    pub fn take_room(&mut self) -> Room {
        std::mem::take(&mut self.room)
    }
}
