//! `contents`: whole files read and kept by the host, so that a result carries them as base64
//! (`responder.respond-with-base64`) without the bytes being copied into the plugin and back,
//! and without validating megabytes of JSON that the host itself wrote.

use std::time::Instant;

use wasmtime::component::Resource;

use super::{Error, ErrorKind};
use crate::runtime::bindings::wexec::plugin::filesystem::HostContents;
use crate::runtime::state::HostState;
use crate::transport::Reservation;

/// Most bytes of `contents` one instance may hold at once: they live outside its linear memory,
/// so its memory limit does not count them.
pub const MAX_HELD_BYTES: u64 = 64 * 1024 * 1024;

/// A file's bytes, held for the guest, with the room reserved for them in the connection's
/// replies ([`crate::transport::Outbound::reserve`]).
#[derive(Debug)]
pub struct Contents {
    data: Vec<u8>,
    reserved: Reservation,
}

impl Contents {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The reservation, for the reply that carries the bytes to keep until it is written.
    pub fn take_reservation(&mut self) -> Reservation {
        std::mem::take(&mut self.reserved)
    }
}

impl HostState {
    /// Reserves room in the calling connection's replies for `bytes` of contents, waiting
    /// while its client is not reading them (the wait is host time, not the guest's).
    pub(super) async fn reserve_contents(&mut self, bytes: u64) -> Reservation {
        let Some(reply) = self.call.as_ref().and_then(|call| call.reply.as_ref()) else {
            return Reservation::default();
        };
        // While the client keeps up, as cheap as an atomic operation.
        if let Some(reserved) = reply.outbound().try_reserve(bytes) {
            return reserved;
        }
        let outbound = reply.outbound().clone();
        let started = Instant::now();
        // A closed connection reads nothing: there is nothing to hold back.
        let reserved = outbound.reserve(bytes).await.unwrap_or_default();
        self.clock.add_host_time(started.elapsed());
        reserved
    }

    /// Keeps `data` for the guest, within [`MAX_HELD_BYTES`].
    pub(super) fn hold_contents(
        &mut self,
        data: Vec<u8>,
        reserved: Reservation,
    ) -> Result<Resource<Contents>, Error> {
        let len = data.len() as u64;
        if self.contents_held + len > MAX_HELD_BYTES {
            return Err(Error {
                kind: ErrorKind::TooLarge,
                message: format!(
                    "file contents held by the host would exceed {MAX_HELD_BYTES} bytes: drop some first"
                ),
            });
        }
        let contents = self
            .table()
            .push(Contents { data, reserved })
            .map_err(|err| Error {
                kind: ErrorKind::Other,
                message: format!("cannot hold file contents: {err}"),
            })?;
        self.contents_held += len;
        Ok(contents)
    }

    /// Takes the contents back from the guest (the handle is consumed).
    pub fn take_contents(&mut self, contents: Resource<Contents>) -> wasmtime::Result<Contents> {
        let contents = self.table().delete(contents)?;
        self.contents_held -= contents.data.len() as u64;
        Ok(contents)
    }
}

impl HostContents for HostState {
    async fn len(&mut self, contents: Resource<Contents>) -> u64 {
        // A handle the guest holds is in the table; anything else is reported as empty.
        self.table()
            .get(&contents)
            .map_or(0, |contents| contents.data.len() as u64)
    }

    async fn drop(&mut self, contents: Resource<Contents>) -> wasmtime::Result<()> {
        self.take_contents(contents).map(drop)
    }
}
