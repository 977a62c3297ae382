//! Signed plugins: a detached minisign signature beside a library (`libx.so.minisig`), checked
//! against the publishers the operator trusts (`[[trust.publishers]]`), over the bytes of the
//! very open through which the library is hashed and loaded (see `library_file`).
//!
//! The rule, in full:
//! - no signature file: unsigned; refused when signatures are required, admitted otherwise;
//! - a signature file: it must parse, be made by the key of a trusted publisher, and verify
//!   over the library's bytes; anything else (a changed library, a key nobody trusts, a
//!   malformed file) refuses the plugin, whether signatures are required or not: a signature
//!   that cannot be checked is never taken for a signature that was.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::cache::Verified;
use crate::library_file::LibraryFile;

/// The largest signature file read: a minisign signature is about 300 bytes.
const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;

/// A publisher whose signatures the operator trusts: a name and a minisign public key.
#[derive(Debug, Clone)]
pub struct Publisher {
    name: String,
    key: minisign_verify::PublicKey,
    /// The key's base64 line, as the plugin cache records the key that verified a file.
    line: String,
}

impl Publisher {
    /// A publisher named `name` with the minisign public key `key`: the base64 line of a
    /// `.pub` file (`RWQ...`), or the whole file with its comment line. `Err` says what is wrong.
    pub fn new(name: &str, key: &str) -> Result<Self, String> {
        let trimmed = key.trim();
        let parsed = if trimmed.starts_with("untrusted comment:") {
            minisign_verify::PublicKey::decode(trimmed)
        } else {
            minisign_verify::PublicKey::from_base64(trimmed)
        };
        let key = parsed.map_err(|e| {
            format!(
                "publisher {name:?}: its key is not a minisign public key ({e}); give the RW... line of its .pub file"
            )
        })?;
        let line = key_line(trimmed);
        Ok(Self { name: name.to_owned(), key, line })
    }

    /// The publisher's name, as the operator gave it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The base64 line of a key given as the line alone or as a whole `.pub` file.
fn key_line(key: &str) -> String {
    key.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("").to_owned()
}

/// A signature checked: who signed it, and, when the library's bytes were read to verify it
/// (not vouched for by the plugin cache), what the cache may record of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    /// The trusted publisher that signed it; `None`: unsigned.
    pub(crate) signed_by: Option<String>,
    /// The verdict to record, when it was verified now.
    pub(crate) verified: Option<Verified>,
}

/// What the operator trusts and requires of plugin signatures.
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    /// The trusted publishers, in configuration order.
    pub publishers: Vec<Publisher>,
    /// Refuse a plugin that no trusted publisher signed (`[trust] require_signed = true`).
    pub require_signed: bool,
}

/// The signature file of a library: its path with `.minisig` added (`libx.so.minisig`).
pub fn signature_path(library: &Path) -> PathBuf {
    let mut name = library.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// Checks the library at `library` (opened once, without following a link) against the text
/// of the signature file `signature` (`None`: there is none) under `policy`: the signer's
/// name, `None` for an unsigned plugin that may load, or `Err` with the reason and the fix.
pub fn check_signature(
    library: &Path,
    signature: (&Path, Option<&str>),
    policy: &SignaturePolicy,
) -> Result<Option<String>, String> {
    let file = LibraryFile::open(library)?;
    check_with(&file, signature, policy, None).map(|c| c.signed_by)
}

/// Checks the open library `file` against the signature beside it (see [`check_signature`]);
/// `known` is what the plugin cache recorded for the file as it is now: when the signature
/// file is the one recorded and its key is still trusted, the library is not read again.
pub(crate) fn check(file: &LibraryFile, policy: &SignaturePolicy, known: Option<&Verified>) -> Result<Checked, String> {
    let path = signature_path(file.path());
    let text = read_signature(&path)?;
    check_with(file, (&path, text.as_deref()), policy, known)
}

fn check_with(
    file: &LibraryFile,
    (signature, text): (&Path, Option<&str>),
    policy: &SignaturePolicy,
    known: Option<&Verified>,
) -> Result<Checked, String> {
    let Some(text) = text else {
        return if policy.require_signed {
            Err(format!(
                "it is not signed, and signatures are required ([trust] require_signed = true); sign it with `harness plugins sign {} --key KEY` and trust that key in [[trust.publishers]]",
                file.path().display()
            ))
        } else {
            Ok(Checked::default())
        };
    };
    let digest = sha256_hex(text.as_bytes());
    if let Some(known) = known.filter(|k| k.signature == digest)
        && let Some(publisher) = policy.publishers.iter().find(|p| p.line == known.key)
    {
        return Ok(Checked { signed_by: Some(publisher.name.clone()), verified: None });
    }
    let shown = signature.display();
    let sig = minisign_verify::Signature::decode(text).map_err(|e| {
        format!("its signature {shown} is not a minisign signature ({e}); sign it again with `harness plugins sign`, or remove {shown} to load it unsigned")
    })?;
    for publisher in &policy.publishers {
        let mut verifier = match publisher.key.verify_stream(&sig) {
            Ok(verifier) => verifier,
            Err(minisign_verify::Error::UnexpectedKeyId) => continue,
            Err(e) => {
                return Err(format!(
                    "its signature {shown} cannot be checked ({e}); sign it again with `harness plugins sign`"
                ));
            }
        };
        file.for_each_chunk(|chunk| verifier.update(chunk))
            .map_err(|e| format!("cannot be read to check its signature: {e}"))?;
        return match verifier.finalize() {
            Ok(()) => Ok(Checked {
                signed_by: Some(publisher.name.clone()),
                verified: Some(Verified { signature: digest, key: publisher.line.clone() }),
            }),
            Err(_) => Err(format!(
                "its signature {shown} does not match the file (it changed after it was signed by publisher {:?}, or the signature is for another file); get the file again from its publisher, or sign it again",
                publisher.name
            )),
        };
    }
    Err(format!(
        "it is signed ({shown}) by a key that no trusted publisher holds; add the publisher's public key to [[trust.publishers]] (docs/operators.md), or remove {shown} to load it unsigned"
    ))
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The signature file's text, `None` when there is none; never read through a link.
pub fn read_signature(path: &Path) -> Result<Option<String>, String> {
    let file = match no_follow_options().open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if is_link(&e) => {
            return Err(format!(
                "its signature {} is a symbolic link; put the signature file itself there",
                path.display()
            ));
        }
        Err(e) => return Err(format!("its signature {} cannot be read: {e}", path.display())),
    };
    let mut text = String::new();
    file.take(MAX_SIGNATURE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("its signature {} cannot be read as text: {e}", path.display()))?;
    Ok(Some(text))
}

#[cfg(unix)]
fn no_follow_options() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

#[cfg(not(unix))]
fn no_follow_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    o
}

#[cfg(unix)]
fn is_link(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_link(_: &std::io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    // The public key of minisign's own documentation.
    const PUBLIC: &str = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3";

    #[test]
    fn a_key_that_is_not_minisign_s_is_refused_naming_the_publisher() {
        let e = Publisher::new("chem", "not a key").unwrap_err();
        assert!(e.contains("publisher \"chem\"") && e.contains("minisign public key"), "{e}");
        assert!(Publisher::new("ok", PUBLIC).is_ok());
    }

    #[test]
    fn unsigned_is_admitted_unless_signatures_are_required() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"hello\n").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        assert_eq!(check(&file, &SignaturePolicy::default(), None), Ok(Checked::default()));
        let required = SignaturePolicy { require_signed: true, ..Default::default() };
        let e = check(&file, &required, None).unwrap_err();
        assert!(e.contains("not signed") && e.contains("harness plugins sign"), "{e}");
    }

    #[test]
    fn a_malformed_signature_is_a_refusal_even_when_none_is_required() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"hello\n").unwrap();
        std::fs::write(signature_path(&path), "garbage").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let e = check(&file, &SignaturePolicy::default(), None).unwrap_err();
        assert!(e.contains("liba.so.minisig") && e.contains("not a minisign signature"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_signature_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"hello\n").unwrap();
        std::fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), signature_path(&path)).unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let e = check(&file, &SignaturePolicy::default(), None).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    /// A key pair and the signature of `bytes`, made by the minisign crate as `plugins sign` makes them.
    fn signed(bytes: &[u8]) -> (String, String) {
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let signature = minisign::sign(None, &pair.sk, bytes, None, None).unwrap();
        (pair.pk.to_base64(), signature.to_string())
    }

    #[test]
    fn a_good_signature_names_its_publisher_and_a_changed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"hello\n").unwrap();
        let (key, signature) = signed(b"hello\n");
        std::fs::write(signature_path(&path), &signature).unwrap();
        let policy = SignaturePolicy { publishers: vec![Publisher::new("team", &key).unwrap()], require_signed: true };
        let checked = check(&LibraryFile::open(&path).unwrap(), &policy, None).unwrap();
        assert_eq!(checked.signed_by.as_deref(), Some("team"));
        let verified = checked.verified.expect("verified now, so recorded");
        assert_eq!(verified.key, key);
        std::fs::write(&path, b"hellO\n").unwrap();
        let e = check(&LibraryFile::open(&path).unwrap(), &policy, None).unwrap_err();
        assert!(e.contains("does not match the file"), "{e}");
    }

    /// The plugin cache's verdict stands in for reading the file only for the same signature
    /// file and a key still trusted (the cache answers only for the file's same state).
    #[test]
    fn a_recorded_verdict_serves_only_the_same_signature_and_a_key_still_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"hello\n").unwrap();
        let (key, signature) = signed(b"hello\n");
        std::fs::write(signature_path(&path), &signature).unwrap();
        let policy = SignaturePolicy { publishers: vec![Publisher::new("team", &key).unwrap()], require_signed: false };
        let verified = check(&LibraryFile::open(&path).unwrap(), &policy, None).unwrap().verified.unwrap();
        // Bytes changed behind the verdict's back: served from it (the library is not read).
        std::fs::write(&path, b"other\n").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let served = check(&file, &policy, Some(&verified)).unwrap();
        assert_eq!((served.signed_by.as_deref(), served.verified), (Some("team"), None));
        // Another signature file, or the key no longer trusted: read and checked again.
        let stale = Verified { signature: "0".repeat(64), ..verified.clone() };
        assert!(check(&file, &policy, Some(&stale)).is_err());
        let (other, _) = signed(b"x");
        let untrusted =
            SignaturePolicy { publishers: vec![Publisher::new("other", &other).unwrap()], require_signed: false };
        let e = check(&file, &untrusted, Some(&verified)).unwrap_err();
        assert!(e.contains("no trusted publisher holds"), "{e}");
    }
}
