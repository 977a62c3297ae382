//! Tokens kept between runs: one file per server URL and client id, under
//! `$XDG_CACHE_HOME/harness/mcp-oauth` (`~/.cache/harness/mcp-oauth`), in a directory only
//! the user can enter (0700), each file readable by the user alone (0600). A file that others
//! could read is not trusted (nor read): its token may have been seen.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// An access token and when it expires (seconds since the epoch; `None`: not said).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Token {
    pub(crate) access_token: String,
    pub(crate) expires_at: Option<u64>,
}

impl Token {
    /// Whether it is still good `margin` seconds from `now`.
    pub(crate) fn fresh(&self, now: u64, margin: u64) -> bool {
        self.expires_at.is_none_or(|at| at > now.saturating_add(margin))
    }
}

/// What a file holds: the token, and whose it is (checked on reading).
#[derive(Serialize, Deserialize)]
struct Stored {
    url: String,
    client_id: String,
    #[serde(flatten)]
    token: Token,
}

/// The file of `url`'s token for `client_id`; `None` without a home or cache directory.
pub(crate) fn path(url: &str, client_id: &str) -> Option<PathBuf> {
    let digest = Sha256::digest(format!("{url}\n{client_id}").as_bytes());
    let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let base = harness_trust::user_dir("XDG_CACHE_HOME", ".cache")?;
    Some(base.join("harness").join("mcp-oauth").join(format!("{name}.json")))
}

/// The token in `path`, if it is there, is `url`'s for `client_id`, and only the user can read it.
pub(crate) fn load(path: &Path, url: &str, client_id: &str) -> Option<Token> {
    let file = std::fs::File::open(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        if meta.mode() & 0o077 != 0 || meta.uid() != uid {
            return None;
        }
    }
    let stored: Stored = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    (stored.url == url && stored.client_id == client_id).then_some(stored.token)
}

/// Writes the token to `path` (0600, in a 0700 directory), replacing the file whole.
pub(crate) fn save(path: &Path, url: &str, client_id: &str, token: &Token) -> Result<(), String> {
    let dir = path.parent().ok_or_else(|| format!("{} has no directory", path.display()))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
    let stored = Stored { url: url.to_owned(), client_id: client_id.to_owned(), token: token.clone() };
    let text = serde_json::to_vec(&stored).map_err(|e| format!("cannot write the token ({e})"))?;
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&partial).and_then(|mut f| f.write_all(&text).and_then(|()| f.sync_all()));
    let renamed = written.and_then(|()| std::fs::rename(&partial, path));
    renamed.map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        format!("cannot write {} ({e})", path.display())
    })
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_token_file_is_the_users_alone_and_names_its_owner() {
        let dir = std::env::temp_dir().join(format!("harness-oauth-store-{}", std::process::id()));
        let path = dir.join("mcp-oauth").join("t.json");
        let token = Token { access_token: "secret-token".into(), expires_at: Some(5) };
        save(&path, "https://m.example/mcp", "me", &token).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(load(&path, "https://m.example/mcp", "me").unwrap().access_token, "secret-token");
        assert!(load(&path, "https://m.example/mcp", "someone-else").is_none());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load(&path, "https://m.example/mcp", "me").is_none(), "a file others can read is not trusted");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(token.fresh(0, 4) && !token.fresh(1, 4));
    }
}
