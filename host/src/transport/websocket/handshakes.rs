//! Accepted sockets still sending their HTTP request head. Each may take up to 10 s and holds
//! a descriptor meanwhile, so they are bounded; but a full table must not turn away the next
//! client, or anyone who opens sockets and never finishes a head (a slowloris) locks everyone
//! out before authentication. So a new socket always gets in, and the one it displaces is the
//! oldest pending head of its own address once that address holds [`MAX_PER_ADDRESS`], else
//! the oldest pending head of all. A real client sends its head at once and is never the
//! oldest for long.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// Pending heads in all.
pub const MAX_PENDING: usize = 256;

/// Pending heads from one address.
pub const MAX_PER_ADDRESS: usize = 64;

/// The pending heads, oldest first.
#[derive(Debug, Default)]
pub struct Handshakes {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    /// By arrival: the address and what ends the handshake when it is displaced.
    pending: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
    per_address: HashMap<IpAddr, usize>,
}

/// One pending head; leaves the table when dropped.
#[derive(Debug)]
pub struct Pending {
    handshakes: Arc<Handshakes>,
    id: u64,
    /// Resolves when a newer socket displaced this one.
    pub displaced: oneshot::Receiver<()>,
}

impl Handshakes {
    /// An empty table.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Admits a socket from `address`, displacing an older pending head if the table is full.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Pending {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let crowded = table.per_address.get(&address).copied().unwrap_or(0) >= MAX_PER_ADDRESS;
        let victim = if crowded {
            table
                .pending
                .iter()
                .find(|(_, (from, _))| *from == address)
                .map(|(&id, _)| id)
        } else if table.pending.len() >= MAX_PENDING {
            table.pending.keys().next().copied()
        } else {
            None
        };
        if let Some(id) = victim {
            table.remove(id);
        }
        let id = table.next;
        table.next += 1;
        let (displace, displaced) = oneshot::channel();
        table.pending.insert(id, (address, displace));
        *table.per_address.entry(address).or_default() += 1;
        Pending {
            handshakes: Arc::clone(self),
            id,
            displaced,
        }
    }

    /// How many heads are pending.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pending
            .len()
    }
}

impl Table {
    /// Removes `id`; dropping its sender ends its handshake if it is still waiting.
    fn remove(&mut self, id: u64) {
        if let Some((address, _displace)) = self.pending.remove(&id)
            && let Some(count) = self.per_address.get_mut(&address)
        {
            *count -= 1;
            if *count == 0 {
                self.per_address.remove(&address);
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        (self.handshakes.table.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn gone(pending: &mut Pending) -> bool {
        pending.displaced.try_recv() == Err(oneshot::error::TryRecvError::Closed)
    }

    #[test]
    fn a_full_table_displaces_the_oldest_and_a_crowded_address_its_own_oldest() {
        let handshakes = Handshakes::new();
        let mut crowd: Vec<Pending> = (0..MAX_PER_ADDRESS)
            .map(|_| handshakes.admit(address(1)))
            .collect();
        let mut other = handshakes.admit(address(2));
        assert!(!crowd.iter_mut().any(gone), "room for another address");
        // The crowded address displaces its own oldest, not anyone else's.
        let mut newest = handshakes.admit(address(1));
        assert!(gone(&mut crowd[0]));
        assert!(!gone(&mut crowd[1]) && !gone(&mut other));
        assert_eq!(handshakes.len(), MAX_PER_ADDRESS + 1);
        // Many addresses: the table stays full, and the oldest of all go first.
        let mut others: Vec<Pending> = (0..MAX_PENDING)
            .map(|index| handshakes.admit(address(3 + (index % 100) as u8)))
            .collect();
        assert_eq!(handshakes.len(), MAX_PENDING);
        assert!(crowd.iter_mut().all(gone) && gone(&mut other) && gone(&mut newest));
        assert!(!others.iter_mut().any(gone));
        drop(others);
        assert_eq!(handshakes.len(), 0);
    }
}
