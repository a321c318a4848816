//! Who is on the other end of a loopback connection: the user that owns the client's socket,
//! from the kernel's table of TCP sockets (`/proc/net/tcp`, `/proc/net/tcp6`, as `ss -e` reads
//! it). A listener without a token is on loopback (wexec refuses any other address without
//! one), where every local user can connect: such a listener admits only wexec's own user and
//! root, who could drive wexec through its own processes anyway (docs/protocol.md §3.3). A
//! confined process runs as wexec's user; the sandbox keeps it off the listener
//! (docs/sandbox.md, "What is protected").

use std::net::SocketAddr;

/// Whether the client's end of the connection `peer` → `local` belongs to this process's
/// effective user or to root. `false` when the socket is not found, or no longer belongs to
/// any file (its owner closed it: the table then says uid 0), which is refused.
pub fn is_ours(peer: SocketAddr, local: SocketAddr) -> bool {
    let ours = rustix::process::geteuid().as_raw();
    owner(peer, local).is_some_and(|uid| uid == ours || uid == 0)
}

/// The uid owning the live socket whose local address is `peer` and remote address `local`.
/// An IPv4 connection may come from an IPv6 socket (to `::ffff:127.0.0.1`), listed in
/// `/proc/net/tcp6` with mapped addresses.
fn owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let in_table = |table: &str, from: SocketAddr, to: SocketAddr| {
        let text = std::fs::read_to_string(table).ok()?;
        find_owner(&text, &entry_address(from), &entry_address(to))
    };
    match (peer, local) {
        (SocketAddr::V4(peer_v4), SocketAddr::V4(local_v4)) => {
            in_table("/proc/net/tcp", peer, local).or_else(|| {
                let mapped = |addr: std::net::SocketAddrV4| {
                    SocketAddr::new(addr.ip().to_ipv6_mapped().into(), addr.port())
                };
                in_table("/proc/net/tcp6", mapped(peer_v4), mapped(local_v4))
            })
        }
        _ => in_table("/proc/net/tcp6", peer, local),
    }
}

/// The uid column of the table's line for a socket from `from` to `to` (as the table writes
/// addresses) that still belongs to a file: a closed socket lingering in the table (orphaned,
/// `TIME_WAIT`) has inode 0 and is listed as root's.
fn find_owner(table: &str, from: &str, to: &str) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl, local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid,
        // timeout, inode.
        match fields[..] {
            [_, local, remote, _, _, _, _, uid, _, inode, ..]
                if local == from && remote == to && inode != "0" =>
            {
                uid.parse().ok()
            }
            _ => None,
        }
    })
}

/// `addr` as the kernel's table writes it: each 32-bit word of the address in the host's byte
/// order, in hex, then the port.
fn entry_address(addr: SocketAddr) -> String {
    let octets: Vec<u8> = match addr {
        SocketAddr::V4(v4) => v4.ip().octets().to_vec(),
        SocketAddr::V6(v6) => v6.ip().octets().to_vec(),
    };
    let mut text: String = octets
        .chunks(4)
        .map(|word| {
            let word = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
            format!("{word:08X}")
        })
        .collect();
    text.push_str(&format!(":{:04X}", addr.port()));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_connection_of_this_process_is_this_user() {
        for address in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(address) else {
                continue;
            };
            let local = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(local).unwrap();
            let (_server, peer) = listener.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(
                owner(peer, local),
                Some(rustix::process::geteuid().as_raw()),
                "{address}"
            );
            assert!(is_ours(peer, local));
            drop(client);
        }
        // A client on an IPv6 socket, to an IPv4 listener through a mapped address.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let mapped = format!("[::ffff:127.0.0.1]:{}", local.port());
        if let Ok(client) = std::net::TcpStream::connect(mapped.as_str()) {
            let (_server, peer) = listener.accept().unwrap();
            assert!(peer.is_ipv4(), "{peer}");
            assert!(is_ours(peer, local));
            drop(client);
        }
    }

    #[test]
    fn table_lines_are_read_by_column() {
        let table = concat!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
            "   0: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 20 4 30 10 -1\n",
            // The same client closed and reconnected from the same port: its first socket waits
            // in TIME_WAIT, owned by nobody (uid 0, inode 0).
            "   1: 0100007F:C351 0100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000\n",
        );
        let from = entry_address("127.0.0.1:50000".parse().unwrap());
        let to = entry_address("127.0.0.1:8080".parse().unwrap());
        if cfg!(target_endian = "little") {
            assert_eq!(
                (from.as_str(), to.as_str()),
                ("0100007F:C350", "0100007F:1F90")
            );
            assert_eq!(find_owner(table, &from, &to), Some(1000));
        }
        assert_eq!(find_owner(table, &to, &from), None);
        let closed = entry_address("127.0.0.1:50001".parse().unwrap());
        assert_eq!(
            find_owner(table, &closed, &to),
            None,
            "a closed socket is nobody's"
        );
    }
}
