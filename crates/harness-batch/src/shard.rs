//! Shards: which lines of the requests file this worker runs, given as `I/N` or found in the
//! environment a cluster scheduler sets (`auto`).

use std::fmt;
use std::str::FromStr;

/// This worker takes the lines whose 0-based index is `index` modulo `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This worker's index, from 0.
    pub index: usize,
    /// How many workers share the file.
    pub count: usize,
}

impl Shard {
    /// The whole file.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether the line numbered `line` (from 1) is this shard's.
    pub fn takes(self, line: usize) -> bool {
        (line - 1) % self.count == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || format!("{s:?} is not I/N: give a worker index I from 0 and a worker count N, as 0/4");
        let (i, n) = s.split_once('/').ok_or_else(usage)?;
        let index: usize = i.trim().parse().map_err(|_| usage())?;
        let count: usize = n.trim().parse().map_err(|_| usage())?;
        if count == 0 {
            return Err(format!("{s:?}: the worker count N must be at least 1"));
        }
        if index >= count {
            return Err(format!("{s:?}: the worker index I runs from 0 to {} (N - 1)", count - 1));
        }
        Ok(Shard { index, count })
    }
}

/// `--shard`: a fixed `I/N`, or `auto` (from a scheduler's environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    /// `I/N` as given.
    Fixed(Shard),
    /// Read from `SLURM_ARRAY_TASK_ID` (its place among `SLURM_ARRAY_TASK_COUNT` tasks, or the
    /// shard itself with `--shards N`), or `JOB_COMPLETION_INDEX` with `--shards N`.
    Auto,
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(Self::Auto);
        }
        s.parse().map(Self::Fixed).map_err(|e| format!("{e}, or auto (from a Slurm array or a Kubernetes indexed Job)"))
    }
}

impl ShardSpec {
    /// This worker's shard. `shards` is `--shards N`, which `JOB_COMPLETION_INDEX` needs (a
    /// Kubernetes pod is not told the Job's completions); `env` reads a variable.
    pub fn resolve(self, shards: Option<usize>, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let auto = match self {
            Self::Fixed(shard) if shards.is_some() => {
                return Err(format!("--shards goes with --shard auto only; --shard {shard} already gives the count"));
            }
            Self::Fixed(shard) => return Ok(shard),
            Self::Auto => from_environment(shards, &env)?,
        };
        Ok(auto)
    }
}

/// A whole number from 0 in the variable `name`, when it is set.
fn number(env: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>, String> {
    let Some(text) = env(name) else { return Ok(None) };
    text.trim().parse().map(Some).map_err(|_| format!("--shard auto: {name}={text:?} is not a whole number from 0"))
}

/// The shard a Slurm array task or a Kubernetes indexed pod is.
fn from_environment(shards: Option<usize>, env: &impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
    if let Some(id) = number(env, "SLURM_ARRAY_TASK_ID")? {
        // With --shards N the task id is the shard, so that one task resubmitted on its own
        // (`sbatch --array=2`, an array of one) still knows its place.
        if let Some(count) = shards {
            return checked(Some(id), count, || {
                format!("SLURM_ARRAY_TASK_ID={id} is out of range for --shards {count} (tasks 0 to {})", count - 1)
            });
        }
        let count = number(env, "SLURM_ARRAY_TASK_COUNT")?.ok_or(
            "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; is this an sbatch --array task?",
        )?;
        // `--array=1-4` numbers tasks from 1: the shard is the task's place in the array.
        let min = number(env, "SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        return checked(id.checked_sub(min), count, || {
            format!(
                "SLURM_ARRAY_TASK_ID={id} is not within an array of {count} tasks from {min}: \
                 give sbatch a contiguous --array such as --array=0-{}, or --shards N",
                count.saturating_sub(1)
            )
        });
    }
    if let Some(index) = number(env, "JOB_COMPLETION_INDEX")? {
        let count = shards.ok_or(
            "--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job) but the shard count is not: \
             add --shards N with N the Job's completions",
        )?;
        return checked(Some(index), count, || {
            format!("JOB_COMPLETION_INDEX={index} is out of range for --shards {count} (indexes 0 to {})", count - 1)
        });
    }
    Err("--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes \
         indexed Job) is set; outside a scheduler give --shard I/N"
        .to_owned())
}

/// `index` of `count` when it is in range; the error says why not.
fn checked(index: Option<usize>, count: usize, why: impl Fn() -> String) -> Result<Shard, String> {
    if count == 0 {
        return Err("--shard auto: the shard count is 0; give at least 1".to_owned());
    }
    match index {
        Some(index) if index < count => Ok(Shard { index, count }),
        _ => Err(format!("--shard auto: {}", why())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn shards_parse_and_split_by_line_number() {
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        for bad in ["3/3", "1/0", "x", "1", "-1/2", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let s = Shard { index: 1, count: 3 };
        assert_eq!((1..=7).filter(|&l| s.takes(l)).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!("auto".parse::<ShardSpec>(), Ok(ShardSpec::Auto));
        let e = "autox".parse::<ShardSpec>().unwrap_err();
        assert!(e.contains("or auto"), "{e}");
    }

    #[test]
    fn slurm_arrays_give_the_task_its_place() {
        let slurm =
            env(&[("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_COUNT", "4"), ("SLURM_ARRAY_TASK_MIN", "0")]);
        assert_eq!(ShardSpec::Auto.resolve(None, &slurm), Ok(Shard { index: 2, count: 4 }));
        let from_one =
            env(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_COUNT", "4"), ("SLURM_ARRAY_TASK_MIN", "1")]);
        assert_eq!(ShardSpec::Auto.resolve(None, &from_one), Ok(Shard { index: 3, count: 4 }));
        let sparse =
            env(&[("SLURM_ARRAY_TASK_ID", "9"), ("SLURM_ARRAY_TASK_COUNT", "3"), ("SLURM_ARRAY_TASK_MIN", "0")]);
        let e = ShardSpec::Auto.resolve(None, &sparse).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_ID=9") && e.contains("--array=0-2"), "{e}");
        // A task resubmitted alone is an array of one: --shards says where it belongs.
        let alone =
            env(&[("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_COUNT", "1"), ("SLURM_ARRAY_TASK_MIN", "2")]);
        assert_eq!(ShardSpec::Auto.resolve(None, &alone), Ok(Shard { index: 0, count: 1 }));
        assert_eq!(ShardSpec::Auto.resolve(Some(4), &alone), Ok(Shard { index: 2, count: 4 }));
        let e = ShardSpec::Auto.resolve(Some(2), &alone).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_ID=2 is out of range for --shards 2"), "{e}");
        let e = ShardSpec::Auto.resolve(None, env(&[("SLURM_ARRAY_TASK_ID", "1")])).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_COUNT is not"), "{e}");
    }

    #[test]
    fn kubernetes_indexes_need_the_count() {
        let pod = env(&[("JOB_COMPLETION_INDEX", "5")]);
        assert_eq!(ShardSpec::Auto.resolve(Some(8), &pod), Ok(Shard { index: 5, count: 8 }));
        let e = ShardSpec::Auto.resolve(None, &pod).unwrap_err();
        assert!(e.contains("--shards N"), "{e}");
        let e = ShardSpec::Auto.resolve(Some(4), &pod).unwrap_err();
        assert!(e.contains("out of range for --shards 4"), "{e}");
        let e = ShardSpec::Auto.resolve(Some(4), env(&[("JOB_COMPLETION_INDEX", "x")])).unwrap_err();
        assert!(e.contains("not a whole number"), "{e}");
    }

    #[test]
    fn auto_outside_a_scheduler_and_shards_with_a_fixed_shard_are_refused() {
        let e = ShardSpec::Auto.resolve(None, env(&[])).unwrap_err();
        assert!(e.contains("neither SLURM_ARRAY_TASK_ID") && e.contains("--shard I/N"), "{e}");
        let e = ShardSpec::Fixed(Shard { index: 0, count: 2 }).resolve(Some(2), env(&[])).unwrap_err();
        assert!(e.contains("--shards goes with --shard auto"), "{e}");
    }
}
