//! How busy `harness batch --concurrency N` keeps a real llama.cpp server.
//!
//! Starts `llama-server -np SLOTS` on a free loopback port, runs `harness batch` over RUNS
//! requests against it, and samples the server's `/slots` every 20 ms while the batch runs: the
//! average number of slots processing is what the server saw in flight. The harness's own CPU
//! time (user + system of the `harness` child, from `getrusage(RUSAGE_CHILDREN)`) is divided by
//! the steps the batch took.
//!
//! ```text
//! eval "$(cargo xtask env llama)"; cargo build --release -p harness-cli -p calc
//! cargo run --release -p harness-bench --bin server-busy -- --slots 4 --concurrency 4 --runs 100
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What to measure.
struct Options {
    slots: u32,
    concurrency: u32,
    runs: u32,
    threads: u32,
}

fn main() {
    match measure(&options()) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("server-busy: {e}");
            std::process::exit(1);
        }
    }
}

fn options() -> Options {
    let mut o = Options { slots: 4, concurrency: 4, runs: 100, threads: 1 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--slots", Some(v)) => o.slots = v,
            ("--concurrency", Some(v)) => o.concurrency = v,
            ("--runs", Some(v)) => o.runs = v,
            ("--threads", Some(v)) => o.threads = v,
            _ => {
                eprintln!("usage: server-busy [--slots N] [--concurrency N] [--runs N] [--threads N]");
                std::process::exit(2);
            }
        }
    }
    o
}

fn var(name: &str) -> Result<PathBuf, String> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{name} is not set; run: eval \"$(cargo xtask env llama)\""))
}

/// The release `harness` beside this benchmark's own executable.
fn harness_binary() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let binary = me.with_file_name("harness");
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("{} is missing; run: cargo build --release -p harness-cli -p calc", binary.display()))
    }
}

/// The server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(o: &Options) -> Result<(Server, u16), String> {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let context = (o.slots * 2048).to_string();
    let child = Command::new(var("HARNESS_LLAMA_SERVER")?)
        .arg("-m")
        .arg(var("HARNESS_LLAMA_MODEL")?)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "-c", &context, "-np", &o.slots.to_string()])
        .args(["-t", &o.threads.to_string(), "-tb", &o.threads.to_string(), "--temp", "0", "--seed", "1"])
        // This VM hides AMX state from processes; the AMX-repacked kernels crash at start-up.
        .args(["--no-repack", "--slots"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start llama-server: {e}"))?;
    let server = Server(child);
    let started = Instant::now();
    while get(port, "/health").is_none_or(|b| !b.contains("ok")) {
        if started.elapsed() > Duration::from_secs(120) {
            return Err("llama-server did not become healthy within 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((server, port))
}

/// One GET on the loopback server; the body, or `None` when it did not answer.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}

/// Slots processing a request right now, from `/slots`.
fn busy_slots(port: u16) -> Option<u32> {
    let body = get(port, "/slots")?;
    let slots: Value = serde_json::from_str(&body).ok()?;
    let busy = slots.as_array()?.iter().filter(|s| s["is_processing"] == Value::Bool(true)).count();
    u32::try_from(busy).ok()
}

fn measure(o: &Options) -> Result<String, String> {
    let harness = harness_binary()?;
    let (_server, port) = start_server(o)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let requests = dir.path().join("requests.jsonl");
    let lines: String = (1..=o.runs).map(|i| format!("{{\"id\":{i},\"request\":\"calculate {i}+{i}\"}}\n")).collect();
    std::fs::write(&requests, lines).map_err(|e| e.to_string())?;
    let out = dir.path().join("results.jsonl");

    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while sampling.load(Ordering::Relaxed) {
                if let Some(n) = busy_slots(port) {
                    samples.push(n);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            samples
        })
    };
    let started = Instant::now();
    let status = Command::new(&harness)
        .arg("batch")
        .arg(&requests)
        .arg("--out")
        .arg(&out)
        .args(["--concurrency", &o.concurrency.to_string(), "--provider", "llamacpp", "--enable", "calc"])
        .args(["--base-url", &format!("http://127.0.0.1:{port}/v1"), "--router-mode", "constrained"])
        .args(["--max-steps", "3", "--max-reply-tokens", "48", "--timeout", "600", "-q"])
        .status()
        .map_err(|e| format!("cannot run {}: {e}", harness.display()))?;
    let wall = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler.join().map_err(|_| "the /slots sampler panicked".to_owned())?;
    let cpu = children_cpu()?;
    if !status.success() {
        return Err(format!("harness batch failed ({status})"));
    }
    let results = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let steps: u64 = results
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["steps"].as_u64().unwrap_or(0))
        .sum();
    let mean = samples.iter().map(|&n| f64::from(n)).sum::<f64>() / samples.len().max(1) as f64;
    Ok(format!(
        "slots {} concurrency {} runs {}: {} results, {steps} steps in {:.1} s; in flight on average {mean:.2} of {} slots ({:.0}%, {} samples); harness CPU {:.0} us a step",
        o.slots,
        o.concurrency,
        o.runs,
        results.lines().count(),
        wall.as_secs_f64(),
        o.slots,
        100.0 * mean / f64::from(o.slots.min(o.concurrency)),
        samples.len(),
        cpu.as_secs_f64() * 1e6 / steps.max(1) as f64,
    ))
}

/// User and system CPU of the children this process has waited for (the harness).
#[cfg(unix)]
fn children_cpu() -> Result<Duration, String> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; it was zeroed before.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) } == 0;
    if !ok {
        return Ok(Duration::ZERO);
    }
    // SAFETY: getrusage returned 0, so it filled `usage`.
    let usage = unsafe { usage.assume_init() };
    let micros = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Ok(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// Elsewhere the children's CPU time is not measured: the benchmark says so rather than print 0.
#[cfg(not(unix))]
fn children_cpu() -> Result<Duration, String> {
    Err("server-busy reads the harness's CPU time with getrusage(2): run it on Unix".to_owned())
}
