//! Ids, tokens and their hashes.
//!
//! Ids are opaque to clients: a one-letter kind prefix and 80 random bits in base32, short
//! enough to read in logs. Tokens carry 256 random bits and are stored only as SHA-256
//! hashes, so a copy of the database authenticates no one.

use base64::Engine as _;
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The SHA-256 of a token, the only form in which tokens are stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Even a hash is a secret's fingerprint: show only a prefix.
        write!(f, "TokenHash({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// Hex, for the batches hub processes share (the database holds the same hashes).
impl serde::Serialize for TokenHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let hex: String = self.0.iter().map(|byte| format!("{byte:02x}")).collect();
        serializer.serialize_str(&hex)
    }
}

impl<'de> serde::Deserialize<'de> for TokenHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        let mut hash = [0u8; 32];
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(serde::de::Error::custom("a token hash is 64 hex digits"));
        }
        for (byte, pair) in hash.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(serde::de::Error::custom)?;
            *byte = u8::from_str_radix(pair, 16).map_err(serde::de::Error::custom)?;
        }
        Ok(TokenHash(hash))
    }
}

impl TokenHash {
    pub fn of(token: &str) -> TokenHash {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }
}

/// The source of every random id and secret the hub mints. Seeded from the OS in
/// production; tests may seed it to make runs repeatable.
pub struct IdSource {
    rng: rand::rngs::StdRng,
}

impl std::fmt::Debug for IdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdSource")
    }
}

impl IdSource {
    pub fn from_os() -> IdSource {
        IdSource {
            rng: rand::rngs::StdRng::from_os_rng(),
        }
    }

    pub fn seeded(seed: u64) -> IdSource {
        IdSource {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
        }
    }

    /// `<prefix>_` followed by 80 random bits in base32.
    pub fn id(&mut self, prefix: &str) -> String {
        let mut bytes = [0u8; 10];
        self.rng.fill_bytes(&mut bytes);
        let mut text = String::with_capacity(prefix.len() + 17);
        text.push_str(prefix);
        text.push('_');
        let mut bits: u128 = 0;
        for byte in bytes {
            bits = (bits << 8) | u128::from(byte);
        }
        for index in (0..16).rev() {
            text.push(BASE32[((bits >> (index * 5)) & 31) as usize] as char);
        }
        text
    }

    /// A new secret of 32 random bytes, base64url, with a prefix (`rt_` for tokens).
    pub fn secret(&mut self, prefix: &str) -> String {
        let mut bytes = [0u8; 32];
        self.rng.fill_bytes(&mut bytes);
        let mut text = String::from(prefix);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(bytes, &mut text);
        text
    }

    /// A new token and its hash.
    pub fn token(&mut self) -> (String, TokenHash) {
        let token = self.secret("rt_");
        let hash = TokenHash::of(&token);
        (token, hash)
    }
}

/// Whether `text` has the shape of an id [`IdSource::id`] mints with `prefix`: a client may
/// paste a secret (an invite code) where an id belongs, and such text must not be logged.
pub fn is_id(text: &str, prefix: &str) -> bool {
    text.len() == prefix.len() + 1 + 16
        && text.starts_with(prefix)
        && text.as_bytes()[prefix.len()] == b'_'
        && text.as_bytes()[prefix.len() + 1..]
            .iter()
            .all(|b| BASE32.contains(b))
}

/// Whether a presented token has the shape of one of ours; anything else is refused
/// before it is hashed.
pub fn is_token_shaped(token: &str) -> bool {
    token.len() >= 3 + 43
        && token.len() <= 256
        && token.starts_with("rt_")
        && token[3..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_distinct() {
        let mut source = IdSource::seeded(7);
        let a = source.id("p");
        let b = source.id("p");
        assert_ne!(a, b);
        assert!(a.starts_with("p_") && a.len() == 18, "{a}");
        assert!(a[2..].bytes().all(|b| BASE32.contains(&b)));
        assert!(is_id(&a, "p"));
        assert!(!is_id(&a, "i"));
        assert!(!is_id(&source.secret(""), "i"), "a code is not an id");
        assert!(
            !is_id("i_ABCDEFGHIJKLMNOP", "i"),
            "upper case is not base32 here"
        );
        assert!(!is_id("i_é", "i"));
    }

    #[test]
    fn tokens_have_256_bits_and_hash_stably() {
        let mut source = IdSource::from_os();
        let (token, hash) = source.token();
        assert!(token.starts_with("rt_"));
        assert_eq!(token.len(), 3 + 43);
        assert!(is_token_shaped(&token));
        assert_eq!(TokenHash::of(&token), hash);
        assert!(!format!("{hash:?}").contains(&token));
        assert!(!is_token_shaped("rt_short"));
        assert!(!is_token_shaped(&format!("xx_{}", &token[3..])));
    }
}
