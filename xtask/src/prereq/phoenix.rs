//! Arize Phoenix (PyPI `arize-phoenix`, pinned in tests/phoenix/requirements.txt) in a Python
//! virtual environment, for the OpenTelemetry export tests; they find its `phoenix` command in
//! `HARNESS_PHOENIX`.

use std::process::Command;

use crate::{Context, on_path, run};

use super::Vars;

/// Creates `target/phoenix-venv` from the requirements file, again whenever that file changes.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    let requirements = context.root.join("tests/phoenix/requirements.txt");
    let venv = context.root.join("target/phoenix-venv");
    let stamp = venv.join("requirements.txt");
    let python = venv.join("bin/python");
    let phoenix = venv.join("bin/phoenix");
    let wanted = std::fs::read(&requirements).map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let fresh = std::fs::read(&stamp).is_ok_and(|had| had == wanted) && phoenix.is_file();
    if !fresh {
        if !on_path("python3") {
            return Err("python3 is missing; run as root: apt-get install -y python3 python3-venv".into());
        }
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))
            .map_err(|e| format!("{e}; on Debian, python3-venv provides venv: apt-get install -y python3-venv"))?;
        run(Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&requirements))?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    }
    Ok(vec![("HARNESS_PHOENIX".into(), phoenix.display().to_string())])
}
