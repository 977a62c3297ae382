//! A Python virtual environment with the official MCP SDK (tests/mcp/requirements.txt), for
//! the MCP interop tests; the tests find its interpreter in `HARNESS_MCP_PYTHON`.

use std::process::Command;

use crate::{Context, on_path, run};

use super::Vars;

/// Creates `target/mcp-venv` from the requirements file, again whenever that file changes.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    let requirements = context.root.join("tests/mcp/requirements.txt");
    let venv = context.root.join("target/mcp-venv");
    let stamp = venv.join("requirements.txt");
    let python = venv.join("bin/python");
    let wanted = std::fs::read(&requirements).map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let fresh = std::fs::read(&stamp).is_ok_and(|had| had == wanted) && python.is_file();
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
    Ok(vec![("HARNESS_MCP_PYTHON".into(), python.display().to_string())])
}
