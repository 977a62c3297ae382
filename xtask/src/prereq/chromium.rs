//! Headless Chromium, for the HTML trace report test (tests/e2e/trace.rs).

use crate::{Context, apt_install, on_path};

use super::Vars;

/// Installs Debian's `chromium` when it is not on PATH.
pub(crate) fn ensure(_: &Context) -> Result<Vars, String> {
    if !on_path("chromium") {
        apt_install(&["chromium"], "the HTML trace report test")?;
    }
    Ok(Vars::new())
}
