//! Where a plugin's tools run, and why: the placement rule (docs/security.md §3).
//!
//! A plugin runs in the harness's own process only when the operator vouches for it: the
//! `--isolation in-process` flag typed for this run, a `[plugins.NAME] isolation =
//! "in-process"` in the configuration (not when `harness.lock` pins another file, unless a
//! trusted publisher signed this one), or its
//! file installed beside the harness executable with every offered tool `pure`. Every other
//! plugin file runs in a confined child, whatever its tools declare: a declaration is the
//! plugin's own word, and the file could have come from anywhere.

use std::path::{Path, PathBuf};

use harness_sandbox::confine::EffectSet;

use crate::isolation::Isolation;
use crate::options::DiscoveryOptions;

/// Where a plugin runs and the rule that put it there, in the rule's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `--isolation` on the command line: the operator's choice for every plugin of this run.
    CommandLine {
        /// The mode typed.
        isolation: Isolation,
    },
    /// `[plugins.NAME] isolation = "process"` in the configuration.
    ConfiguredProcess,
    /// `[plugins.NAME] isolation = "in-process"` in the configuration.
    ConfiguredInProcess,
    /// `[plugins.NAME] isolation = "in-process"`, and `harness.lock` pins another library,
    /// but a trusted publisher signed this one: a signed upgrade needs no new lock.
    SignedInProcess {
        /// The trusted publisher that signed it.
        publisher: String,
    },
    /// `[plugins.NAME] isolation = "in-process"`, but `harness.lock` pins another library.
    PinMismatch {
        /// The SHA-256 `harness.lock` pins.
        pinned: String,
        /// The SHA-256 of the file found (`unreadable` when it could not be read).
        found: String,
    },
    /// The configuration's own `isolation` for every plugin it does not name.
    ConfigDefault {
        /// The mode it gives.
        isolation: Isolation,
    },
    /// Beside the harness executable, every offered tool `pure`: installed with the harness.
    InstalledBesideHarness,
    /// Some offered tool declares an effect other than `pure`.
    DeclaresEffects {
        /// The classes, as `reads+writes`.
        effects: String,
    },
    /// Found in a plugin directory that is not the harness's own, and not named by the
    /// configuration: a confined child, whatever it declares.
    NotVouched {
        /// The directory it was found in.
        dir: PathBuf,
    },
}

impl Placement {
    /// Where the plugin's tools run.
    pub fn isolation(&self) -> Isolation {
        match self {
            Self::CommandLine { isolation } | Self::ConfigDefault { isolation } => *isolation,
            Self::ConfiguredInProcess | Self::SignedInProcess { .. } | Self::InstalledBesideHarness => {
                Isolation::InProcess
            }
            Self::ConfiguredProcess
            | Self::PinMismatch { .. }
            | Self::DeclaresEffects { .. }
            | Self::NotVouched { .. } => Isolation::Process,
        }
    }

    /// The rule's name, for JSON: `not_vouched`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CommandLine { .. } => "command_line",
            Self::ConfiguredProcess => "configured_process",
            Self::ConfiguredInProcess => "configured_in_process",
            Self::SignedInProcess { .. } => "signed_in_process",
            Self::PinMismatch { .. } => "pin_mismatch",
            Self::ConfigDefault { .. } => "config_default",
            Self::InstalledBesideHarness => "installed_beside_harness",
            Self::DeclaresEffects { .. } => "declares_effects",
            Self::NotVouched { .. } => "not_vouched",
        }
    }

    /// Why, in words, for `plugins list`: `found in /x, not vouched for: ...`.
    pub fn reason(&self, plugin: &str) -> String {
        match self {
            Self::CommandLine { isolation } => format!("--isolation {} on the command line", isolation.as_str()),
            Self::ConfiguredProcess => format!("[plugins.{plugin}] isolation = \"process\" in the configuration"),
            Self::ConfiguredInProcess => format!("[plugins.{plugin}] isolation = \"in-process\" in the configuration"),
            Self::SignedInProcess { publisher } => format!(
                "[plugins.{plugin}] isolation = \"in-process\" in the configuration; harness.lock pins another file, but this one is signed by trusted publisher {publisher:?}"
            ),
            Self::PinMismatch { pinned, found } => format!(
                "[plugins.{plugin}] isolation = \"in-process\" is not honoured: harness.lock pins library sha256 {pinned}, the file's is {found}; review the file, then run `harness lock`"
            ),
            Self::ConfigDefault { isolation } => {
                format!("isolation = \"{}\" in the configuration", isolation.as_str())
            }
            Self::InstalledBesideHarness => "installed beside the harness".to_owned(),
            Self::DeclaresEffects { effects } => format!("declares {effects}"),
            Self::NotVouched { dir } => format!(
                "found in {}, not vouched for: [plugins.{plugin}] isolation = \"in-process\" in a trusted configuration runs it in-process",
                dir.display()
            ),
        }
    }
}

impl DiscoveryOptions {
    /// Where `plugin`, whose library is `path` (canonical), runs given the effects of its
    /// offered tools: the first rule that decides, in the order of [`Placement`].
    ///
    /// `sha256` gives the SHA-256 of the library, asked only when `harness.lock` pins one: it
    /// must be read from the open file that is then loaded, never from the path again.
    pub fn placement_of(
        &self,
        plugin: &str,
        path: &Path,
        effects: EffectSet,
        sha256: impl FnOnce() -> Option<String>,
    ) -> Placement {
        self.placement_of_signed(plugin, path, effects, None, sha256)
    }

    /// Where `plugin` runs, as [`Self::placement_of`] says, for a library the trusted
    /// publisher `signed_by` signed: a `[plugins.NAME] isolation = "in-process"` holds for it
    /// even when `harness.lock` pins another file (its signature vouches for the upgrade).
    pub fn placement_of_signed(
        &self,
        plugin: &str,
        path: &Path,
        effects: EffectSet,
        signed_by: Option<&str>,
        sha256: impl FnOnce() -> Option<String>,
    ) -> Placement {
        self.by_command_line()
            .or_else(|| self.by_plugin_section(plugin, signed_by, sha256))
            .or_else(|| self.by_config_default(path))
            .unwrap_or_else(|| self.by_default(path, effects))
    }

    /// Where `plugin` runs (see [`Self::placement_of`]).
    pub fn isolation_of(
        &self,
        plugin: &str,
        path: &Path,
        effects: EffectSet,
        sha256: impl FnOnce() -> Option<String>,
    ) -> Isolation {
        self.placement_of(plugin, path, effects, sha256).isolation()
    }

    fn by_command_line(&self) -> Option<Placement> {
        self.isolation.map(|isolation| Placement::CommandLine { isolation })
    }

    /// `[plugins.NAME] isolation`; in-process only for the file `harness.lock` pins, if it
    /// pins one, or a file a trusted publisher signed.
    fn by_plugin_section(
        &self,
        plugin: &str,
        signed_by: Option<&str>,
        sha256: impl FnOnce() -> Option<String>,
    ) -> Option<Placement> {
        match self.settings.get(plugin)?.isolation? {
            Isolation::Process => Some(Placement::ConfiguredProcess),
            Isolation::InProcess => Some(match self.pins.get(plugin) {
                Some(pinned) => match (sha256(), signed_by) {
                    (Some(found), _) if found == *pinned => Placement::ConfiguredInProcess,
                    (_, Some(publisher)) => Placement::SignedInProcess { publisher: publisher.to_owned() },
                    (found, None) => Placement::PinMismatch {
                        pinned: pinned.clone(),
                        found: found.unwrap_or_else(|| "unreadable".to_owned()),
                    },
                },
                None => Placement::ConfiguredInProcess,
            }),
        }
    }

    /// The configuration's global `isolation`: `in-process` only for plugins installed beside
    /// the harness, since it names no plugin (a cloned repository's file could say it).
    fn by_config_default(&self, path: &Path) -> Option<Placement> {
        match self.config_isolation? {
            Isolation::InProcess if !self.is_beside_harness(path) => None,
            isolation => Some(Placement::ConfigDefault { isolation }),
        }
    }

    /// Nobody chose: in-process for an installed pure plugin, else a confined child.
    fn by_default(&self, path: &Path, effects: EffectSet) -> Placement {
        if !effects.is_pure() {
            Placement::DeclaresEffects { effects: effects.describe() }
        } else if self.is_beside_harness(path) {
            Placement::InstalledBesideHarness
        } else {
            Placement::NotVouched { dir: path.parent().map(Path::to_path_buf).unwrap_or_default() }
        }
    }

    /// Whether `path` (canonical) lies directly in the harness's own directory.
    fn is_beside_harness(&self, path: &Path) -> bool {
        self.harness_dir.as_deref().is_some_and(|dir| path.parent() == Some(dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::PluginSettings;

    fn options(harness_dir: &str) -> DiscoveryOptions {
        DiscoveryOptions { harness_dir: Some(harness_dir.into()), ..Default::default() }
    }

    fn with_section(mut o: DiscoveryOptions, plugin: &str, isolation: Isolation) -> DiscoveryOptions {
        o.settings.insert(plugin.into(), PluginSettings { isolation: Some(isolation), ..Default::default() });
        o
    }

    fn no_pin() -> Option<String> {
        None
    }

    const PURE: EffectSet = EffectSet { reads: false, writes: false, network: false };
    const WRITES: EffectSet = EffectSet { reads: false, writes: true, network: false };

    #[test]
    fn only_a_pure_plugin_installed_beside_the_harness_runs_in_process_by_default() {
        let o = options("/opt/harness");
        let beside = Path::new("/opt/harness/libcalc.so");
        let elsewhere = Path::new("/home/u/repo/plugins/libcalc.so");
        assert_eq!(o.placement_of("calc", beside, PURE, no_pin), Placement::InstalledBesideHarness);
        assert_eq!(
            o.placement_of("calc", beside, WRITES, no_pin),
            Placement::DeclaresEffects { effects: "writes".into() }
        );
        let p = o.placement_of("calc", elsewhere, PURE, no_pin);
        assert_eq!(p, Placement::NotVouched { dir: "/home/u/repo/plugins".into() });
        assert_eq!(p.isolation(), Isolation::Process);
        assert!(p.reason("calc").contains("[plugins.calc] isolation = \"in-process\""), "{}", p.reason("calc"));
        // A subdirectory of the harness's directory is not the harness's directory.
        let below = Path::new("/opt/harness/sub/libcalc.so");
        assert_eq!(o.isolation_of("calc", below, PURE, no_pin), Isolation::Process);
        assert_eq!(DiscoveryOptions::default().isolation_of("calc", beside, PURE, no_pin), Isolation::Process);
    }

    #[test]
    fn the_command_line_then_the_plugins_section_then_the_configuration_decide() {
        let elsewhere = Path::new("/srv/plugins/libx.so");
        let o = with_section(options("/opt/harness"), "x", Isolation::InProcess);
        assert_eq!(o.placement_of("x", elsewhere, WRITES, no_pin), Placement::ConfiguredInProcess);
        let o = DiscoveryOptions { isolation: Some(Isolation::Process), ..o };
        assert_eq!(
            o.placement_of("x", elsewhere, PURE, no_pin),
            Placement::CommandLine { isolation: Isolation::Process }
        );
        let o = with_section(options("/opt/harness"), "x", Isolation::Process);
        assert_eq!(o.placement_of("x", Path::new("/opt/harness/libx.so"), PURE, no_pin), Placement::ConfiguredProcess);
        // The configuration's global in-process covers only what is installed beside the harness.
        let o = DiscoveryOptions { config_isolation: Some(Isolation::InProcess), ..options("/opt/harness") };
        assert_eq!(o.isolation_of("x", elsewhere, PURE, no_pin), Isolation::Process);
        assert_eq!(o.isolation_of("x", Path::new("/opt/harness/libx.so"), WRITES, no_pin), Isolation::InProcess);
    }

    #[test]
    fn a_section_that_vouches_for_a_pinned_plugin_holds_only_for_the_pinned_file() {
        let path = Path::new("/srv/plugins/libx.so");
        let mut o = with_section(options("/opt/harness"), "x", Isolation::InProcess);
        o.pins.insert("x".into(), "aa11".into());
        assert_eq!(o.placement_of("x", path, PURE, || Some("aa11".into())), Placement::ConfiguredInProcess);
        let p = o.placement_of("x", path, PURE, || Some("bb22".into()));
        assert_eq!(p, Placement::PinMismatch { pinned: "aa11".into(), found: "bb22".into() });
        assert_eq!(p.isolation(), Isolation::Process);
        let p = o.placement_of("x", path, PURE, no_pin);
        assert!(matches!(p, Placement::PinMismatch { .. }), "{p:?}");
        assert_eq!(p.isolation(), Isolation::Process);
    }

    /// A trusted publisher's signature vouches for an upgrade that the lock does not pin; an
    /// unsigned file the lock does not pin still falls back to a child.
    #[test]
    fn a_signed_upgrade_runs_in_process_without_a_new_lock() {
        let path = Path::new("/srv/plugins/libx.so");
        let mut o = with_section(options("/opt/harness"), "x", Isolation::InProcess);
        o.pins.insert("x".into(), "aa11".into());
        let p = o.placement_of_signed("x", path, PURE, Some("chem"), || Some("bb22".into()));
        assert_eq!(p, Placement::SignedInProcess { publisher: "chem".into() });
        assert_eq!(p.isolation(), Isolation::InProcess);
        assert!(p.reason("x").contains("signed by trusted publisher \"chem\""), "{}", p.reason("x"));
        let p = o.placement_of_signed("x", path, PURE, None, || Some("bb22".into()));
        assert!(matches!(p, Placement::PinMismatch { .. }), "{p:?}");
        // A signature alone vouches for nothing the configuration did not ask for.
        let bare = options("/opt/harness");
        let p = bare.placement_of_signed("x", path, PURE, Some("chem"), no_pin);
        assert_eq!(p.isolation(), Isolation::Process);
    }
}
