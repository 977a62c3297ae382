//! A Python virtual environment built from one of the test suite's requirements files: the
//! MCP SDK's and Phoenix's are made the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Context, on_path, run};

/// Creates `target/NAME-venv` from `tests/NAME/requirements.txt`, again whenever that file
/// changes or `program` (a path inside the venv, such as `bin/python`) is missing; returns
/// the path of `program`.
pub(super) fn ensure(context: &Context, name: &str, program: &str) -> Result<PathBuf, String> {
    let requirements = context.root.join(format!("tests/{name}/requirements.txt"));
    let venv = context.root.join(format!("target/{name}-venv"));
    let stamp = venv.join("requirements.txt");
    let wanted = std::fs::read(&requirements).map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let program = venv.join(program);
    if std::fs::read(&stamp).is_ok_and(|had| had == wanted) && program.is_file() {
        return Ok(program);
    }
    create(&venv, &requirements)?;
    std::fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(program)
}

/// A new venv at `venv` (the old one removed) with `requirements` installed.
fn create(venv: &Path, requirements: &Path) -> Result<(), String> {
    if !on_path("python3") {
        return Err("python3 is missing; run as root: apt-get install -y python3 python3-venv".into());
    }
    let _ = std::fs::remove_dir_all(venv);
    run(Command::new("python3").arg("-m").arg("venv").arg(venv))
        .map_err(|e| format!("{e}; on Debian, python3-venv provides venv: apt-get install -y python3-venv"))?;
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
        .arg(requirements))
}
