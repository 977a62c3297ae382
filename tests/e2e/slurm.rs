//! `harness batch --shard auto` under a real Slurm: a one-node cluster (Debian's `slurm-wlm`
//! and `munge`) configured in a temporary directory, started and stopped by the test, runs a
//! four-task job array; one task is killed mid-way and requeued, and the shards merge to what
//! one process writes. Needs root and the programs: `cargo xtask setup slurm`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::batch::comparable;
use crate::support::{Scratch, ran};

const SETUP: &str = "the Slurm test needs root and Debian's slurm-wlm and munge: run `cargo xtask setup slurm` as root";

/// Requests in the batch; ten a shard.
const REQUESTS: usize = 40;

/// A one-node cluster whose daemons this test started; they are stopped when it drops.
struct Cluster {
    dir: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Each by the id of the process the test started, slurmd first.
        for child in self.daemons.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port free now on the loopback interface.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn program(name: &str) -> PathBuf {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is missing: {SETUP}"))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn short_hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Cluster {
    /// Configures munge and Slurm under `dir` and starts munged, slurmctld and slurmd.
    fn start(dir: &Path) -> Self {
        assert!(is_root(), "{SETUP}");
        let host = short_hostname();
        let mut cluster = Cluster { dir: dir.to_owned(), daemons: Vec::new() };
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let key = dir.join("munge.key");
        let made =
            Command::new(program("mungekey")).arg("--create").arg(format!("--keyfile={}", key.display())).status();
        assert!(made.is_ok_and(|s| s.success()), "mungekey --create failed");
        let sock = dir.join("munge.sock");
        let mut munged = Command::new(program("munged"));
        munged
            .args(["--foreground", "--force"])
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--log-file={}", dir.join("munged.log").display()))
            .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
            .arg(format!("--seed-file={}", dir.join("munged.seed").display()));
        cluster.spawn(&mut munged, "munged");
        wait_for("munged's socket", Duration::from_secs(10), || sock.exists());
        let conf = dir.join("slurm.conf");
        std::fs::write(&conf, slurm_conf(dir, &host)).unwrap();
        let mut ctld = Command::new(program("slurmctld"));
        ctld.args(["-D", "-c", "-f"]).arg(&conf);
        cluster.spawn(&mut ctld, "slurmctld");
        let mut slurmd = Command::new(program("slurmd"));
        slurmd.args(["-D", "-f"]).arg(&conf);
        cluster.spawn(&mut slurmd, "slurmd");
        wait_for("the node to be idle (see slurmctld.log and slurmd.log)", Duration::from_secs(60), || {
            let out = cluster.slurm("sinfo").args(["-h", "-o", "%t"]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim() == "idle"
        });
        cluster
    }

    fn spawn(&mut self, cmd: &mut Command, name: &str) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.out"))).unwrap();
        let child = cmd
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}; {SETUP}"));
        self.daemons.push(child);
    }

    /// A Slurm client command pointed at this cluster.
    fn slurm(&self, name: &str) -> Command {
        let mut cmd = Command::new(program(name));
        cmd.env("SLURM_CONF", self.dir.join("slurm.conf"));
        // A job inherits this environment: the plugins beside the binary, a trust store of its own.
        cmd.env_remove("HARNESS_PLUGIN_PATH")
            .env("XDG_CONFIG_HOME", self.dir.join("xdg-config"))
            .env("XDG_DATA_HOME", self.dir.join("xdg-data"));
        cmd
    }

    /// Runs a client command, which must succeed; its stdout.
    fn call(&self, name: &str, args: &[&str]) -> String {
        let out = self.slurm(name).args(args).output().unwrap();
        assert!(out.status.success(), "{name} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The array's tasks still queued or running.
    fn queued(&self, job: &str) -> Vec<String> {
        let out = self.slurm("squeue").args(["-h", "-r", "-o", "%i %t", "-j", job]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
    }
}

/// One node with four CPUs (whatever the machine has: `config_overrides`), one partition.
fn slurm_conf(dir: &Path, host: &str) -> String {
    let d = dir.display();
    let (ctld, slurmd) = (free_port(), free_port());
    format!(
        "ClusterName=harnesstest\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
         SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket={d}/munge.sock\nCredType=cred/munge\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
         SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSchedulerType=sched/backfill\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSlurmdParameters=config_overrides\n\
         ReturnToService=2\nMpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\n\
         NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n\
         PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    )
}

/// Forty scripted requests: a calculation, then finish with its result.
fn requests(s: &Scratch) -> PathBuf {
    let lines: Vec<String> = (0..REQUESTS)
        .map(|i| {
            json!({
                "id": format!("s{i}"),
                "request": format!("square {i}"),
                "script": [
                    {"tool": "calculate", "arguments": {"expression": format!("{i}*{i}")}},
                    {"tool": "finish", "arguments": {"answer": i * i}},
                ],
            })
            .to_string()
        })
        .collect();
    s.write("requests.jsonl", &(lines.join("\n") + "\n"))
}

/// The array job: each task runs its shard, paced so that a task takes some seconds.
fn job_script(s: &Scratch, requests: &Path) -> PathBuf {
    let harness = env!("CARGO_BIN_EXE_harness");
    let dir = s.dir.path().display();
    s.write(
        "job.sh",
        &format!(
            "#!/bin/sh\n#SBATCH --output={dir}/job-%A_%a.log\n\
             exec {harness} batch {} --shard auto --out {dir}/results-$SLURM_ARRAY_TASK_ID.jsonl \
             --provider scripted --concurrency 1 --rpm 300 --progress-every 1\n",
            requests.display()
        ),
    )
}

/// Whole lines in a file (a line cut by a kill has no newline yet).
fn lines_in(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

#[test]
fn a_slurm_job_array_loses_a_task_requeues_it_and_merges_to_the_single_process_result() {
    let s = Scratch::new();
    let cluster = Cluster::start(&s.path("cluster"));
    let input = requests(&s);
    let script = job_script(&s, &input);
    let job = cluster.call(
        "sbatch",
        &["--parsable", "--array=0-3", "--chdir", &s.dir.path().display().to_string(), &script.display().to_string()],
    );
    let victim = s.path("results-2.jsonl");
    wait_for("task 2 to write its first results", Duration::from_secs(60), || lines_in(&victim) >= 2);
    cluster.call("scancel", &[&format!("{job}_2")]);
    wait_for("task 2 to end", Duration::from_secs(30), || {
        !cluster.queued(&job).iter().any(|t| t.starts_with(&format!("{job}_2 ")))
    });
    let cut = lines_in(&victim);
    assert!(cut < REQUESTS / 4, "task 2 was not killed mid-way: it wrote {cut} lines");
    // Requeued, the task runs again with the same array index, and resumes its own --out.
    cluster.call("scontrol", &["requeue", &format!("{job}_2")]);
    cluster.call("scontrol", &["update", &format!("JobId={job}_2"), "StartTime=now"]);
    wait_for("the array to end", Duration::from_secs(180), || cluster.queued(&job).is_empty());
    let log = std::fs::read_to_string(s.path(&format!("job-{job}_2.log"))).unwrap_or_default();
    assert!(log.contains(&format!("{cut} already in")), "the requeued task did not resume: {log}");

    let single =
        ran(s.harness().arg("batch").arg(&input).args(["--out", "single.jsonl", "-q", "--provider", "scripted"]));
    assert_eq!(single.code, 0, "{}", single.stderr);
    let shards: Vec<String> = (0..4).map(|i| format!("results-{i}.jsonl")).collect();
    for shard in &shards {
        assert_eq!(lines_in(&s.path(shard)), REQUESTS / 4, "{shard}");
    }
    let merged =
        ran(s.harness().args(["batch", "merge", "--out", "merged.jsonl", "--requests"]).arg(&input).args(&shards));
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let want = comparable(&std::fs::read_to_string(s.path("single.jsonl")).unwrap());
    let got = comparable(&std::fs::read_to_string(s.path("merged.jsonl")).unwrap());
    assert_eq!(want.len(), REQUESTS);
    assert_eq!(want[5]["answer"], Value::from(25));
    assert_eq!(got, want, "the merged shards differ from the single process's results");
}
