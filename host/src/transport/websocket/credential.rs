//! What a WebSocket upgrade must present (docs/protocol.md §3.3): `Authorization: Bearer
//! <token>`, where the token is known itself (`--token`, `WEXEC_TOKEN`, `--ws-token-file`) or
//! only by its SHA-256 digest (`--ws-token-sha256`, Codex's spelling: the token then lives
//! nowhere on the executor).

use sha2::{Digest, Sha256};

/// The accepted bearer token.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// The token.
    Token(String),
    /// The SHA-256 digest of the token.
    Sha256([u8; 32]),
}

impl Credential {
    /// Parses `--ws-token-sha256`: 64 hex digits, either case.
    pub fn from_hex_digest(hex: &str) -> Option<Self> {
        if hex.len() != 64 {
            return None;
        }
        let mut digest = [0u8; 32];
        for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(text, 16).ok()?;
        }
        Some(Self::Sha256(digest))
    }

    /// Whether `presented` is the token, compared in constant time (for a digest, the
    /// presented token's digest is compared).
    pub fn accepts(&self, presented: &[u8]) -> bool {
        match self {
            Self::Token(token) => constant_time_eq(presented, token.as_bytes()),
            Self::Sha256(digest) => constant_time_eq(&Sha256::digest(presented), digest),
        }
    }
}

/// Never prints the secret: settings are logged with `{:?}`.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token(_) => f.write_str("Credential::Token(..)"),
            Self::Sha256(_) => f.write_str("Credential::Sha256(..)"),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    // printf 'secret123' | sha256sum
    const SECRET_DIGEST: &str = "fcf730b6d95236ecd3c9fc2d92d7b6b2bb061514961aec041d6c7a7192f592e4";

    #[test]
    fn a_token_accepts_only_itself() {
        let credential = Credential::Token("secret123".into());
        assert!(credential.accepts(b"secret123"));
        for wrong in [&b"secret12"[..], b"secret1234", b"", b"SECRET123"] {
            assert!(!credential.accepts(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn a_digest_accepts_the_token_it_digests_in_either_case() {
        for hex in [SECRET_DIGEST.to_owned(), SECRET_DIGEST.to_uppercase()] {
            let credential = Credential::from_hex_digest(&hex).expect("valid digest");
            assert!(credential.accepts(b"secret123"));
            assert!(!credential.accepts(b"secret124"));
            assert!(!credential.accepts(SECRET_DIGEST.as_bytes()));
        }
    }

    #[test]
    fn malformed_digests_are_refused() {
        for hex in [
            "",
            "abc",
            &SECRET_DIGEST[1..],
            &format!("{SECRET_DIGEST}0"),
            &SECRET_DIGEST.replace('f', "g"),
            &"é".repeat(32),
        ] {
            assert_eq!(Credential::from_hex_digest(hex), None, "{hex}");
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let shown = format!("{:?}", Credential::Token("secret123".into()));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
