//! What reading a Flink cluster's job listing costs ctasd, without the
//! network: a listing in Flink 2.x's format, fed in chunks as an answer
//! streams in, cut into entries, with the watched jobs' entries decoded.
//! Prints the CPU time per listed entry and per megabyte for a cluster whose
//! every job is watched and for one that lists many jobs ctasd does not
//! watch.
//!
//! `cargo bench --bench listing` (`-- --rounds N` for more rounds).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ctasd::engine::listing::ListingDecoder;
use ctasd::engine::{ListedJob, ListingReader};

/// Bytes a chunk of an answer holds as it arrives.
const CHUNK: usize = 16 << 10;

/// The watched jobs, and how many of their entries were read.
struct Watching {
    watched: HashSet<String>,
    read: usize,
}

impl ListingReader for Watching {
    fn watches(&self, id: &str) -> bool {
        self.watched.contains(id)
    }

    fn read(&mut self, job: ListedJob<'_>) {
        self.read += usize::from(!job.id.is_empty());
    }
}

fn flink_id(n: usize) -> String {
    format!(
        "{:032x}",
        0x5eed_0000_0000_0000_0000_0000_0000_0000_u128 + n as u128
    )
}

/// A listing of `jobs` entries as Flink 2.x writes them, most running.
fn listing(jobs: usize) -> Vec<u8> {
    let entries: Vec<String> = (0..jobs)
        .map(|n| {
            let started = 1_765_000_000_000_i64 + n as i64;
            let (state, ended) = match n % 4 {
                0 => ("FINISHED", started + 60_000),
                _ => ("RUNNING", -1),
            };
            serde_json::json!({
                "jid": flink_id(n), "name": "insert-into_ctas", "state": state,
                "start-time": started, "end-time": ended, "duration": 60_000,
                "last-modification": started + 40,
                "tasks": {"total": 1, "created": 0, "scheduled": 0, "deploying": 0,
                          "running": 1, "finished": 0, "canceling": 0,
                          "canceled": 0, "failed": 0, "reconciling": 0, "initializing": 0}
            })
            .to_string()
        })
        .collect();
    format!("{{\"jobs\":[{}]}}", entries.join(",")).into_bytes()
}

/// One read of `answer`, in chunks: how long it took.
fn read_once(answer: &[u8], reader: &mut Watching) -> Duration {
    let started = Instant::now();
    let mut decoder = ListingDecoder::default();
    for chunk in answer.chunks(CHUNK) {
        decoder.feed(chunk, reader).expect("a listing");
    }
    decoder.finish().expect("a whole listing");
    started.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut rounds = 20;
    while let Some(arg) = args.next() {
        if arg == "--rounds" {
            rounds = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--rounds N");
        }
    }
    // The best of the rounds is what the code costs; the median, what a
    // busy machine made of it.
    println!("reading a job listing, {CHUNK} B chunks, best and median of {rounds} rounds");
    println!("| listed | watched | bytes | per read, best / median | per listed entry | per MB |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (listed, watched) in [
        (1_000, 1_000),
        (50_000, 50_000),
        (200_000, 50),
        (200_000, 50_000),
    ] {
        let answer = listing(listed);
        let mut reader = Watching {
            watched: (0..watched)
                .map(|n| flink_id(n * (listed / watched)))
                .collect(),
            read: 0,
        };
        let mut times: Vec<Duration> = (0..rounds)
            .map(|_| read_once(&answer, &mut reader))
            .collect();
        assert_eq!(reader.read, watched * rounds, "every watched job read");
        times.sort();
        let (best, median) = (times[0], times[times.len() / 2]);
        let megabytes = answer.len() as f64 / 1e6;
        println!(
            "| {listed} | {watched} | {:.1} MB | {:.2} / {:.2} ms | {:.0} ns | {:.2} ms |",
            megabytes,
            best.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
            best.as_secs_f64() * 1e9 / listed as f64,
            best.as_secs_f64() * 1e3 / megabytes,
        );
    }
}
