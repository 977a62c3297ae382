//! `harness plugins install`, `remove` and `upgrade` through the binary: into the scratch
//! directory's user plugin directory (`XDG_DATA_HOME`, see `Scratch::harness`), from a file, a
//! directory, a .tar.gz or .zip archive and a scaffolded crate; what discovery then loads; the
//! refusals.

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::check::{scaffold_greet, workspace_root};
use crate::support::{Scratch, bin_dir, fixture, plugin, ran};

/// The user's plugin directory of the scratch directory.
fn data_dir(s: &Scratch) -> PathBuf {
    s.path("xdg-data/harness/plugins")
}

/// `installed.json`, read back.
fn record(s: &Scratch) -> Value {
    serde_json::from_str(&std::fs::read_to_string(data_dir(s).join("installed.json")).unwrap()).unwrap()
}

/// A fixture library copied into the scratch directory, as a downloaded plugin would be.
fn downloaded(s: &Scratch, name: &str, into: &str) -> PathBuf {
    let from = fixture(name);
    let to = s.path(into).join(from.file_name().unwrap());
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(&from, &to).unwrap();
    to
}

/// The plugin named `name` in `plugins list --json`, when it is found.
fn listed(s: &Scratch, name: &str, extra: &[&str]) -> Option<Value> {
    let r = ran(s.harness().args(["plugins", "list", "--json"]).args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()["plugins"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned()
}

/// Runs one call of `tool` and `finish` with the scripted provider; the trace's first step.
fn call(s: &Scratch, tool: &str, arguments: Value) -> Value {
    let script = s.script(&[
        json!({"tool": tool, "arguments": arguments}),
        json!({"tool": "finish", "arguments": {"answer": 1}}),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "go", "--provider", "scripted", "--json", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    s.trace("t.jsonl").remove(0)
}

#[test]
fn a_file_installed_is_found_listed_run_upgraded_and_removed() {
    let s = Scratch::new();
    let file = downloaded(&s, "conformance", "downloads");
    assert!(listed(&s, "conformance", &[]).is_none(), "a fixture never loads by default");
    let r = ran(s.harness().args(["plugins", "install"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("installed conformance 0.1.0 from file "), "{}", r.stdout);

    let installed = data_dir(&s).join("libconformance.so");
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755, "{mode:o}");
    let entry = &record(&s)["plugins"]["conformance"];
    assert_eq!(entry["version"], "0.1.0");
    assert_eq!(entry["abi_version"], "1.0.0");
    assert_eq!(entry["source"], json!({"kind": "file", "path": file.canonicalize().unwrap()}));
    assert_eq!(entry["sha256"].as_str().unwrap().len(), 64);
    // No temporary file is left beside it: the library, the record and the lock that keeps two
    // installs from losing each other's record entry.
    let mut names: Vec<String> =
        std::fs::read_dir(data_dir(&s)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    assert_eq!(names, [".installed.lock", "installed.json", "libconformance.so"]);

    let found = listed(&s, "conformance", &[]).expect("discovery finds the installed plugin");
    assert_eq!(found["path"], json!(installed.canonicalize().unwrap()));
    assert_eq!(found["installed"]["version"], "0.1.0");
    assert_eq!(found["installed"]["source"]["kind"], "file");
    let r = ran(s.harness().args(["plugins", "list"]));
    assert!(r.stdout.contains(&format!("    installed: 0.1.0 from file {}", file.canonicalize().unwrap().display())));
    // `--no-default-plugins` leaves the user's directory out, as the binary's.
    assert!(listed(&s, "conformance", &["--no-default-plugins"]).is_none());

    let step = call(&s, "test_simple_text", json!({}));
    assert_eq!(step["plugin"], "conformance", "{step}");
    assert_eq!(step["result"], "This is a simple text response for testing.", "{step}");

    let r = ran(s.harness().args(["plugins", "upgrade"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("upgraded conformance 0.1.0 -> 0.1.0 (the same file)"), "{}", r.stdout);

    let r = ran(s.harness().args(["plugins", "remove", "conformance"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!installed.exists());
    assert_eq!(record(&s)["plugins"], json!({}));
    assert!(listed(&s, "conformance", &[]).is_none());
    ran(s.harness().args(["plugins", "remove", "conformance"])).usage_error(&["\"conformance\"", "installed: none"]);
}

#[test]
fn a_directory_brings_its_readme_and_licence_and_remove_takes_them() {
    let s = Scratch::new();
    downloaded(&s, "conformance", "pkg");
    s.write("pkg/README.md", "# conformance\n");
    s.write("pkg/LICENSE", "MIT\n");
    s.write("pkg/notes.txt", "not copied\n");
    let r = ran(s.harness().args(["plugins", "install", "pkg"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let docs = data_dir(&s).join("conformance");
    assert_eq!(std::fs::read_to_string(docs.join("README.md")).unwrap(), "# conformance\n");
    assert!(docs.join("LICENSE").is_file() && !docs.join("notes.txt").exists());
    let entry = &record(&s)["plugins"]["conformance"];
    assert_eq!(entry["source"]["kind"], "directory");
    assert_eq!(entry["docs"], json!(["LICENSE", "README.md"]));
    assert!(listed(&s, "conformance", &[]).is_some());

    let r = ran(s.harness().args(["plugins", "remove", "conformance"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!docs.exists() && !data_dir(&s).join("libconformance.so").exists());

    // Two libraries: which one is meant is not guessed.
    downloaded(&s, "clash", "pkg");
    ran(s.harness().args(["plugins", "install", "pkg"])).usage_error(&["pkg", "libclash.so", "libconformance.so"]);

    // A source that is gone cannot be upgraded from; the error says what to do instead.
    std::fs::remove_file(s.path("pkg/libclash.so")).unwrap();
    assert_eq!(ran(s.harness().args(["plugins", "install", "pkg"])).code, 0);
    std::fs::rename(s.path("pkg"), s.path("moved")).unwrap();
    ran(s.harness().args(["plugins", "upgrade", "conformance"])).usage_error(&[
        "which is gone",
        "--force",
        "harness plugins remove conformance",
    ]);
}

#[test]
fn files_that_are_not_plugins_other_abis_and_taken_names_are_refused() {
    let s = Scratch::new();
    let text = s.write("libnotes.so", "not a library\n");
    ran(s.harness().args(["plugins", "install"]).arg(&text))
        .usage_error(&["libnotes.so", "not a loadable shared library"]);
    let future = downloaded(&s, "abi-future", "downloads");
    ran(s.harness().args(["plugins", "install"]).arg(&future)).usage_error(&["libabi_future.so", "ABI 2.0.0"]);
    // Nothing half-installed: the directory holds no library and no record (only the lock).
    let left: Vec<_> = std::fs::read_dir(data_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != ".installed.lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // A plugin found beside the binary already: the installed one would never load.
    let calc = s.path("libcalc.so");
    std::fs::copy(plugin("calc"), &calc).unwrap();
    ran(s.harness().args(["plugins", "install"]).arg(&calc)).usage_error(&["plugin named calc", "--force"]);

    let file = downloaded(&s, "conformance", "downloads");
    assert_eq!(ran(s.harness().args(["plugins", "install"]).arg(&file)).code, 0);
    ran(s.harness().args(["plugins", "install"]).arg(&file)).usage_error(&[
        "installed already",
        "harness plugins upgrade conformance",
        "--force",
    ]);
    let r = ran(s.harness().args(["plugins", "install", "--force"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("(replacing 0.1.0)"), "{}", r.stdout);
    ran(s.harness().args(["plugins", "remove", "calc"])).usage_error(&["\"calc\"", "installed: conformance"]);
    ran(s.harness().args(["plugins", "upgrade", "calc"])).usage_error(&["\"calc\"", "installed: conformance"]);
    ran(s.harness().args(["plugins", "install"])).usage_error(&["<SOURCE>"]);

    // Forced, the shadowed copy is installed with a warning, and discovery says which wins.
    let r = ran(s.harness().args(["plugins", "install", "--force"]).arg(&calc));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning: installing anyway (--force): a plugin named calc"), "{}", r.stderr);
    let r = ran(s.harness().args(["plugins", "list", "--json"]));
    let skipped = r.json()["skipped"].to_string();
    assert!(skipped.contains("libcalc.so") && skipped.contains("the first in directory order wins"), "{skipped}");
}

#[test]
fn a_user_plugin_directory_others_can_write_is_refused_by_install_and_discovery() {
    let s = Scratch::new();
    let dir = data_dir(&s);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
    let file = downloaded(&s, "conformance", "downloads");
    let r = ran(s.harness().args(["plugins", "install"]).arg(&file));
    r.usage_error(&["writable by its group", "chmod go-w", "nothing was installed"]);
    assert!(!dir.join("libconformance.so").exists());

    // A library put there by hand is skipped by discovery, as in any plugin directory.
    std::fs::copy(&file, dir.join("libconformance.so")).unwrap();
    let r = ran(s.harness().args(["plugins", "list", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let skipped = r.json()["skipped"].to_string();
    assert!(skipped.contains("libconformance.so") && skipped.contains("insecure"), "{skipped}");
}

/// The one test that builds: `--path` runs `cargo build --release` on a scaffolded crate in
/// the user's cache directory (one beside the workspace's target directory, kept from run to
/// run so that its dependencies build once), and `upgrade` builds it again after its version
/// changed.
#[test]
fn a_crate_is_built_installed_run_and_upgraded_to_its_new_version() {
    let s = Scratch::new();
    let manifest = scaffold_greet(&s);
    let cache = bin_dir().parent().unwrap().join("install-e2e-cache");
    let install = |args: &[&str]| {
        let mut cmd = s.harness();
        cmd.args(["plugins"]).args(args).env("XDG_CACHE_HOME", &cache);
        ran(&mut cmd)
    };
    let r = install(&["install", "--path", "greet"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("installed greet 0.1.0 from crate "), "{}", r.stdout);
    assert!(cache.join("harness/build/release/libgreet.so").is_file(), "built in the cache directory");
    let entry = &record(&s)["plugins"]["greet"];
    assert_eq!(entry["source"], json!({"kind": "crate", "path": s.path("greet").canonicalize().unwrap()}));
    let step = call(&s, "greet", json!({"name": "Ada"}));
    assert_eq!(step["result"], json!({"greeting": "Hello, Ada!"}), "{step}");

    bump_version(&manifest, "0.1.0", "0.2.0");
    let r = install(&["upgrade", "greet"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("upgraded greet 0.1.0 -> 0.2.0 from crate "), "{}", r.stdout);
    assert_eq!(listed(&s, "greet", &[]).unwrap()["installed"]["version"], "0.2.0");

    // A path with no crate is a usage error naming it.
    install(&["install", "--path", "downloads"]).usage_error(&["--path", "downloads"]);
}

/// Sets the package version in a crate's Cargo.toml.
fn bump_version(manifest: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(manifest).unwrap();
    let from = format!("version = \"{from}\"");
    assert!(text.contains(&from), "{text}");
    std::fs::write(manifest, text.replacen(&from, &format!("version = \"{to}\""), 1)).unwrap();
}

/// A child allowed to write where the user's plugin directory would be could plant a library
/// that the next run loads: such a plugin is refused, even before the directory exists.
#[test]
fn a_write_area_over_the_user_plugin_directory_is_refused_before_it_exists() {
    let s = Scratch::new();
    let liar = downloaded(&s, "effects-liar", "fx");
    let area = s.dir.path().canonicalize().unwrap().join("xdg-data");
    s.write("conf/h.toml", &format!("[plugins.effects-liar]\nallow_paths = [{:?}]\n", area.display().to_string()));
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--no-default-plugins", "--enable", "effects-liar", "--config"])
        .arg("conf/h.toml")
        .arg("--plugins-dir")
        .arg(liar.parent().unwrap()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!area.exists());
    let listed = r.json();
    assert_eq!(listed["plugins"], json!([]), "{listed}");
    let reason = listed["skipped"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("the user's plugin directory"), "{reason}");
}

/// Writes a `.tar.gz` at `to`, its entries added by `build`.
fn tar_gz(to: &Path, build: impl FnOnce(&mut tar::Builder<flate2::write::GzEncoder<std::fs::File>>)) {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(to).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    build(&mut tar);
    tar.into_inner().unwrap().finish().unwrap();
}

/// A tar header of `kind` for `name`, the name written as given: the tar crate's own setters
/// refuse `..`, as a hostile archive's maker would not.
fn tar_header(name: &str, kind: tar::EntryType, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o755);
    header.set_cksum();
    header
}

/// Adds a regular file to a tar.
fn tar_file<W: std::io::Write>(tar: &mut tar::Builder<W>, name: &str, data: &[u8]) {
    tar.append(&tar_header(name, tar::EntryType::Regular, data.len() as u64), data).unwrap();
}

/// Writes a `.zip` at `to`, its entries added by `build`.
fn zip(to: &Path, build: impl FnOnce(&mut zip::ZipWriter<std::fs::File>, zip::write::SimpleFileOptions)) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    build(&mut zip, options);
    zip.finish().unwrap();
}

/// Adds a regular file to a zip.
fn zip_file(zip: &mut zip::ZipWriter<std::fs::File>, options: zip::write::SimpleFileOptions, name: &str, data: &[u8]) {
    use std::io::Write as _;
    zip.start_file(name, options).unwrap();
    zip.write_all(data).unwrap();
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    names
}

#[test]
fn a_tar_gz_and_a_zip_install_with_their_docs_and_leave_nothing_unpacked() {
    let s = Scratch::new();
    let library = std::fs::read(fixture("conformance")).unwrap();
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // As a release is often packed: one top directory holding the library and its docs.
    tar_gz(&s.path("conformance-0.1.0.tar.gz"), |tar| {
        tar.append(&tar_header("conformance-0.1.0/", tar::EntryType::Directory, 0), &[][..]).unwrap();
        tar_file(tar, "conformance-0.1.0/libconformance.so", &library);
        tar_file(tar, "conformance-0.1.0/README.md", b"# conformance\n");
        tar_file(tar, "conformance-0.1.0/LICENSE", b"MIT\n");
        tar_file(tar, "conformance-0.1.0/notes.txt", b"not copied\n");
    });
    let r = ran(s.harness().args(["plugins", "install", "conformance-0.1.0.tar.gz"]).env("TMPDIR", &tmp));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let archive = s.path("conformance-0.1.0.tar.gz").canonicalize().unwrap();
    assert!(
        r.stdout.starts_with(&format!("installed conformance 0.1.0 from archive {}", archive.display())),
        "{}",
        r.stdout
    );
    assert_eq!(std::fs::read(data_dir(&s).join("libconformance.so")).unwrap(), library);
    let entry = &record(&s)["plugins"]["conformance"];
    assert_eq!(entry["source"], json!({"kind": "archive", "path": archive}));
    assert_eq!(entry["docs"], json!(["LICENSE", "README.md"]));
    assert_eq!(std::fs::read_to_string(data_dir(&s).join("conformance/README.md")).unwrap(), "# conformance\n");
    assert!(names(&tmp).is_empty(), "the unpacked archive is removed: {:?}", names(&tmp));
    assert!(listed(&s, "conformance", &[]).is_some());
    let r = ran(s.harness().args(["plugins", "list"]));
    assert!(r.stdout.contains(&format!("    installed: 0.1.0 from archive {}", archive.display())), "{}", r.stdout);

    // Upgraded from the recorded archive, unpacked again.
    let r = ran(s.harness().args(["plugins", "upgrade", "conformance"]).env("TMPDIR", &tmp));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("upgraded conformance 0.1.0 -> 0.1.0 (the same file) from archive "), "{}", r.stdout);
    assert!(names(&tmp).is_empty(), "{:?}", names(&tmp));
    assert_eq!(ran(s.harness().args(["plugins", "remove", "conformance"])).code, 0);

    // A zip, flat, deflated.
    zip(&s.path("conformance.zip"), |zip, options| {
        zip_file(zip, options, "libconformance.so", &library);
        zip_file(zip, options, "COPYING", b"GPL\n");
    });
    let r = ran(s.harness().args(["plugins", "install", "conformance.zip"]).env("TMPDIR", &tmp));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(data_dir(&s).join("libconformance.so")).unwrap(), library);
    let entry = &record(&s)["plugins"]["conformance"];
    assert_eq!(entry["source"], json!({"kind": "archive", "path": s.path("conformance.zip").canonicalize().unwrap()}));
    assert_eq!(entry["docs"], json!(["COPYING"]));
    assert!(names(&tmp).is_empty(), "{:?}", names(&tmp));
    let step = call(&s, "test_simple_text", json!({}));
    assert_eq!(step["plugin"], "conformance", "{step}");
}

#[test]
fn archives_with_escaping_paths_links_devices_or_two_libraries_are_refused_naming_the_entry() {
    let s = Scratch::new();
    let library = std::fs::read(fixture("conformance")).unwrap();
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let refused = |archive: &str, named: &[&str]| {
        let r = ran(s.harness().args(["plugins", "install", archive]).env("TMPDIR", &tmp));
        r.usage_error(&[&[archive][..], named].concat());
        assert!(names(&tmp).is_empty(), "nothing is left unpacked: {:?}", names(&tmp));
        assert!(!data_dir(&s).join("libconformance.so").exists());
    };

    tar_gz(&s.path("parent.tgz"), |tar| {
        tar_file(tar, "pkg/../../libconformance.so", &library);
    });
    refused("parent.tgz", &["\"pkg/../../libconformance.so\"", "`..`", "nothing was installed"]);
    tar_gz(&s.path("absolute.tar.gz"), |tar| tar_file(tar, "/tmp/libconformance.so", &library));
    refused("absolute.tar.gz", &["\"/tmp/libconformance.so\"", "absolute path"]);
    tar_gz(&s.path("symlink.tar.gz"), |tar| {
        let mut header = tar_header("libconformance.so", tar::EntryType::Symlink, 0);
        header.set_link_name("/etc/passwd").unwrap();
        header.set_cksum();
        tar.append(&header, &[][..]).unwrap();
    });
    refused("symlink.tar.gz", &["\"libconformance.so\"", "symbolic link"]);
    tar_gz(&s.path("hardlink.tar.gz"), |tar| {
        tar_file(tar, "README", b"x\n");
        let mut header = tar_header("libconformance.so", tar::EntryType::Link, 0);
        header.set_link_name("README").unwrap();
        header.set_cksum();
        tar.append(&header, &[][..]).unwrap();
    });
    refused("hardlink.tar.gz", &["\"libconformance.so\"", "hard link"]);
    tar_gz(&s.path("device.tar.gz"), |tar| {
        tar.append(&tar_header("null", tar::EntryType::Char, 0), &[][..]).unwrap();
    });
    refused("device.tar.gz", &["\"null\"", "device file"]);

    zip(&s.path("symlink.zip"), |zip, options| zip.add_symlink("libconformance.so", "/etc/passwd", options).unwrap());
    refused("symlink.zip", &["\"libconformance.so\"", "symbolic link"]);
    zip(&s.path("parent.zip"), |zip, options| zip_file(zip, options, "../libconformance.so", &library));
    refused("parent.zip", &["\"../libconformance.so\"", "`..`"]);
    let clash = std::fs::read(fixture("clash")).unwrap();
    zip(&s.path("two.zip"), |zip, options| {
        zip_file(zip, options, "libconformance.so", &library);
        zip_file(zip, options, "libclash.so", &clash);
    });
    refused("two.zip", &["holds 2 library files", "libclash.so", "libconformance.so", "exactly one"]);
    zip(&s.path("none.zip"), |zip, options| zip_file(zip, options, "README", b"x\n"));
    refused("none.zip", &["holds no .so library file"]);
    s.write("broken.zip", "not a zip\n");
    refused("broken.zip", &["cannot read the archive", ".zip"]);
    s.write("broken.tgz", "not gzip\n");
    refused("broken.tgz", &["cannot read the archive"]);
}

/// An archive that unpacks to more than 256 MiB is refused at the entry that goes over,
/// whatever its compressed size (here, some hundred kilobytes of zeros).
#[test]
fn an_archive_unpacking_past_the_bound_is_refused() {
    let s = Scratch::new();
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let library = std::fs::read(fixture("conformance")).unwrap();
    let big = (256 << 20) - library.len() as u64 + 1;
    tar_gz(&s.path("bomb.tar.gz"), |tar| {
        tar_file(tar, "libconformance.so", &library);
        tar.append(&tar_header("README", tar::EntryType::Regular, big), std::io::repeat(0).take(big)).unwrap();
    });
    let r = ran(s.harness().args(["plugins", "install", "bomb.tar.gz"]).env("TMPDIR", &tmp));
    r.usage_error(&["bomb.tar.gz", "\"README\"", "over the bound", "256 MiB"]);
    assert!(names(&tmp).is_empty(), "{:?}", names(&tmp));
}

/// A vendored copy of the scaffolded greet crate at `version`, in a directory source: as
/// `cargo vendor` lays it out, its SDK dependency a registry one (patched to the checkout
/// in the scratch directory's cargo configuration).
fn vendor_greet(s: &Scratch, version: &str) {
    let from = s.path("greet");
    let to = s.path(&format!("vendor/greet-{version}"));
    std::fs::create_dir_all(to.join("src")).unwrap();
    std::fs::copy(from.join("src/lib.rs"), to.join("src/lib.rs")).unwrap();
    std::fs::copy(from.join("README.md"), to.join("README.md")).unwrap();
    // The workspace's lock, as the scaffold tests use: the build reuses what was built.
    std::fs::copy(from.join("Cargo.lock"), to.join("Cargo.lock")).unwrap();
    let toml = std::fs::read_to_string(from.join("Cargo.toml")).unwrap();
    let dev = toml.find("[dev-dependencies]").unwrap();
    let workspace = toml.find("# This crate is a workspace").unwrap();
    let toml = format!("{}{}", &toml[..dev], &toml[workspace..])
        .replace("version = \"0.1.0\"", &format!("version = \"{version}\""));
    let sdk = toml.lines().find(|l| l.starts_with("harness-sdk = ")).unwrap();
    std::fs::write(to.join("Cargo.toml"), toml.replace(sdk, "harness-sdk = \"0.1\"")).unwrap();
    std::fs::write(to.join(".cargo-checksum.json"), r#"{"files":{},"package":null}"#).unwrap();
}

/// `--crate` with `--registry`: cargo fetches the crate from a registry that the scratch
/// directory's cargo configuration replaces with a vendored directory (never contacted), and
/// `upgrade` fetches the newest version again, or the pinned one. The SDK's own dependencies
/// still resolve against crates.io, as the scaffold's do (a cold cargo cache downloads them).
#[test]
fn a_registry_crate_is_fetched_built_and_upgraded_to_the_newest_version() {
    let s = Scratch::new();
    scaffold_greet(&s);
    vendor_greet(&s, "0.1.0");
    let sdk = workspace_root().join("crates/harness-sdk");
    let index = "sparse+https://plugins.invalid/index/";
    s.write(
        ".cargo/config.toml",
        &format!(
            "[registries.plugins]\nindex = {index:?}\n\n[source.plugins-remote]\nregistry = {index:?}\nreplace-with = \"plugins-vendored\"\n\n[source.plugins-vendored]\ndirectory = {:?}\n\n[patch.crates-io]\nharness-sdk = {{ path = {:?} }}\n",
            s.path("vendor").display().to_string(),
            sdk.display().to_string()
        ),
    );
    // A target directory of its own: the --path test builds another libgreet.so meanwhile.
    let cache = bin_dir().parent().unwrap().join("install-e2e-registry-cache");
    let plugins = |args: &[&str]| {
        let mut cmd = s.harness();
        cmd.args(["plugins"]).args(args).env("XDG_CACHE_HOME", &cache);
        ran(&mut cmd)
    };
    let r = plugins(&["install", "--crate", "greet", "--registry", "plugins"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("installed greet 0.1.0 from crate greet 0.1.0 (newest) from registry plugins"),
        "{}",
        r.stdout
    );
    let entry = &record(&s)["plugins"]["greet"];
    assert_eq!(
        entry["source"],
        json!({"kind": "registry", "name": "greet", "registry": "plugins", "pinned": null, "version": "0.1.0"})
    );
    assert_eq!(entry["docs"], json!(["README.md"]));
    let step = call(&s, "greet", json!({"name": "Ada"}));
    assert_eq!(step["result"], json!({"greeting": "Hello, Ada!"}), "{step}");

    // A newer version published: upgrade fetches the newest.
    vendor_greet(&s, "0.2.0");
    let r = plugins(&["upgrade", "greet"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("upgraded greet 0.1.0 -> 0.2.0 from crate greet 0.2.0 (newest)"), "{}", r.stdout);
    assert_eq!(listed(&s, "greet", &[]).unwrap()["installed"]["version"], "0.2.0");

    // Pinned, it stays at its version.
    let r = plugins(&["install", "--force", "--crate", "greet@0.1.0", "--registry", "plugins"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(record(&s)["plugins"]["greet"]["source"]["pinned"], "0.1.0");
    let r = plugins(&["upgrade", "greet"]);
    assert!(
        r.stdout
            .starts_with("upgraded greet 0.1.0 -> 0.1.0 (the same file) from crate greet 0.1.0 from registry plugins"),
        "{}",
        r.stdout
    );

    // A version that is not there: cargo says why, and nothing changes.
    let r = plugins(&["install", "--force", "--crate", "greet@9.9.9", "--registry", "plugins"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("cargo could not fetch crate greet@9.9.9"), "{}", r.stderr);
    plugins(&["install", "--crate", "greet@=1"]).usage_error(&["--crate", "\"greet@=1\"", "NAME@VERSION"]);
}
