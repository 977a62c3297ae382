//! `harness plugins keygen` and `harness plugins sign`: minisign key pairs and detached
//! signatures (`LIBRARY.minisig`), in minisign's own formats, so that `minisign -V -p KEY.pub
//! -m LIBRARY` checks what `sign` wrote and `sign` takes a password-less key `minisign -G -W`
//! made.
//!
//! Secret keys are written without a password: a prompt would block a CI job that signs what
//! it builds, so the key file's mode (0600) and where it is kept protect it (docs/plugin-authoring.md).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use minisign::{KeyPair, SecretKey, SecretKeyBox};

use crate::Result;
use crate::error::CliError;

/// `harness plugins keygen --out FILE`: FILE (the secret key, mode 0600) and FILE.pub.
pub(crate) fn keygen(out: &Path, force: bool) -> Result<u8> {
    let public = pub_path(out);
    for path in [out, public.as_path()] {
        if !force && std::fs::symlink_metadata(path).is_ok() {
            return Err(CliError::Usage(format!(
                "{} exists already; choose another --out, or pass --force to replace the key pair",
                path.display()
            )));
        }
    }
    let failed = |e: minisign::PError| CliError::Failure(format!("cannot make a key pair: {e}"));
    let KeyPair { pk, sk } = KeyPair::generate_unencrypted_keypair().map_err(failed)?;
    let secret = sk.to_box(Some("harness plugin signing secret key (no password)")).map_err(failed)?;
    let public_box = pk.to_box().map_err(failed)?;
    write_new(out, secret.to_string().as_bytes(), 0o600)?;
    write_new(&public, public_box.to_string().as_bytes(), 0o644)?;
    crate::plugins::emit(&format!(
        "wrote the secret key {} (keep it private; it has no password) and the public key {}\npublic key (for [[trust.publishers]] key = ...): {}\n",
        out.display(),
        public.display(),
        pk.to_base64()
    ))
}

/// `harness plugins sign LIBRARY --key SECRET_KEY`: LIBRARY.minisig beside the library.
pub(crate) fn sign(library: &Path, key: &Path) -> Result<u8> {
    let sk = secret_key(key)?;
    let data = std::fs::File::open(library).map_err(|e| {
        CliError::Usage(format!("cannot read {}: {e}; give the plugin library file to sign", library.display()))
    })?;
    let name = library.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let trusted = format!("timestamp:{}\tfile:{name}", unix_now());
    let signature = minisign::sign(None, &sk, data, Some(&trusted), Some("signature from harness plugins sign"))
        .map_err(|e| CliError::Failure(format!("cannot sign {}: {e}", library.display())))?;
    let target = harness_loader::signature_path(library);
    write_new(&target, signature.to_string().as_bytes(), 0o644)?;
    crate::plugins::emit(&format!("signed {} into {}\n", library.display(), target.display()))
}

/// The secret key in `path`, refused with the fix when it is protected by a password (no
/// prompt: signing must run unattended).
fn secret_key(path: &Path) -> Result<SecretKey> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("cannot read the secret key {}: {e}", path.display())))?;
    let not_a_key = |e: minisign::PError| {
        CliError::Usage(format!(
            "{} is not a minisign secret key ({e}); make one with `harness plugins keygen --out FILE`",
            path.display()
        ))
    };
    let boxed = SecretKeyBox::from_string(&text).map_err(not_a_key)?;
    SecretKey::from_unencrypted_box(boxed).map_err(|_| {
        CliError::Usage(format!(
            "{} is protected by a password (or damaged); harness signs with password-less keys only, so that no prompt blocks a build: make one with `harness plugins keygen --out FILE` (or `minisign -G -W`)",
            path.display()
        ))
    })
}

/// The public key file of a secret key file: FILE.pub.
fn pub_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Writes `bytes` to `path` with `mode`, replacing a file there (never through a link: the
/// old name is removed first, and the new file created exclusively).
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let fail = |e: std::io::Error| CliError::Failure(format!("cannot write {}: {e}", path.display()));
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(fail)?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(fail)
}
