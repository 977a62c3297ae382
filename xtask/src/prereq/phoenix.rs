//! Arize Phoenix (PyPI `arize-phoenix`, pinned in tests/phoenix/requirements.txt) in a Python
//! virtual environment, for the OpenTelemetry export tests; they find its `phoenix` command in
//! `HARNESS_PHOENIX`.

use crate::Context;

use super::Vars;

/// Creates `target/phoenix-venv` from the requirements file, again whenever that file changes.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    let phoenix = super::venv::ensure(context, "phoenix", "bin/phoenix")?;
    Ok(vec![("HARNESS_PHOENIX".into(), phoenix.display().to_string())])
}
