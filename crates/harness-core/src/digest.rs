//! SHA-256 as lowercase hex: what a trace names tool definitions and configurations by, and
//! what an approval is bound to. Its own module, so that approvals and the trace share it
//! without importing each other.

use sha2::{Digest, Sha256};

/// SHA-256 of some bytes, as lowercase hex (the configuration's hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
