//! `stoa bench tree DIR [--size 61MB] [--seed S]`: writes a WebBench-like
//! workload tree that a scenario's `[tree]` mix can request.
//!
//! File sizes follow the four classes of SPECweb99's file set (the
//! successor of WebBench's WBTREE): class 0 is 0.1-0.9 KB, class 1 1-9 KB,
//! class 2 10-90 KB, class 3 100-900 KB, nine sizes per class. The *number*
//! of files in each class follows the access mix of those benchmarks (35 %,
//! 50 %, 14 %, 1 %), so that a mix which picks every file with the same
//! weight requests the classes in those proportions. Files go 100 to a
//! directory (`d000/`, `d001/`, ...); contents are printable and fixed by the
//! seed. The tree stops at the first file that reaches the size asked for.

use crate::cli::CliError;
use crate::util::{parse_size, Rng};
use std::io::Write;
use std::path::PathBuf;

/// Share of files in each class, in percent.
pub const CLASS_SHARE: [u64; 4] = [35, 50, 14, 1];

/// Size of file `k` (1..=9) of class `c` (0..=3), in bytes.
pub fn class_size(c: u32, k: u64) -> u64 {
    k * 1024 * 10u64.pow(c) / 10
}

/// The files of a tree of about `total` bytes: (relative path, size).
pub fn layout(total: u64, seed: u64) -> Vec<(String, u64)> {
    let mut rng = Rng::new(seed, 0x7472_6565);
    let mut out = Vec::new();
    let mut sum = 0;
    while sum < total {
        let x = rng.below(100);
        let c = match x {
            0..=34 => 0,
            35..=84 => 1,
            85..=98 => 2,
            _ => 3,
        };
        let k = rng.below(9) + 1;
        let size = class_size(c, k);
        let i = out.len();
        out.push((format!("d{:03}/c{c}_{i:05}.html", i / 100), size));
        sum += size;
    }
    out
}

pub fn main(args: &[String], out: &mut dyn Write) -> Result<u8, CliError> {
    let mut dir = None;
    let mut size = 61 * 1024 * 1024;
    let mut seed = 1;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let mut value = |name: &str| {
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| CliError::Usage(format!("tree: {name} needs a value")));
            i += 1;
            v
        };
        match a.as_str() {
            "--size" => {
                let v = value("--size")?;
                size = parse_size(&v).ok_or_else(|| {
                    CliError::Usage(format!("tree: --size {v:?}: not a size (e.g. 61MB)"))
                })?;
            }
            "--seed" => {
                let v = value("--seed")?;
                seed = v
                    .parse()
                    .map_err(|_| CliError::Usage(format!("tree: --seed {v:?}: not a number")))?;
            }
            "-h" | "--help" => {
                let _ = writeln!(
                    out,
                    "stoa bench tree DIR [--size 61MB] [--seed S]: see docs/BENCH.md"
                );
                return Ok(0);
            }
            s if s.starts_with('-') => {
                return Err(CliError::Usage(format!("tree: unknown option {s}")))
            }
            s => {
                if dir.is_some() {
                    return Err(CliError::Usage("tree: one directory only".into()));
                }
                dir = Some(PathBuf::from(s));
            }
        }
    }
    let dir = dir.ok_or_else(|| CliError::Usage("tree: no directory given".into()))?;
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CliError::Fatal(format!(
            "{}: exists and is not empty",
            dir.display()
        )));
    }
    let files = layout(size, seed);
    // One block of printable text, fixed by the seed, cut to each size.
    let mut rng = Rng::new(seed, 0x626c_6f63);
    let block: Vec<u8> = (0..1024 * 1024)
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789."
                    [rng.below(64) as usize]
            }
        })
        .collect();
    let fatal =
        |p: &std::path::Path, e: std::io::Error| CliError::Fatal(format!("{}: {e}", p.display()));
    let mut counts = [0u64; 4];
    let mut total = 0;
    for (n, (rel, size)) in files.iter().enumerate() {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fatal(parent, e))?;
        }
        let start = (n * 4099) % (block.len() / 2);
        let mut f = std::fs::File::create(&p).map_err(|e| fatal(&p, e))?;
        let mut left = *size as usize;
        let mut off = start;
        while left > 0 {
            let take = left.min(block.len() - off);
            f.write_all(&block[off..off + take])
                .map_err(|e| fatal(&p, e))?;
            left -= take;
            off = 0;
        }
        let class = rel
            .split('/')
            .nth(1)
            .and_then(|f| f.as_bytes().get(1))
            .map_or(0, |b| b - b'0');
        counts[class as usize % 4] += 1;
        total += size;
    }
    let _ = writeln!(
        out,
        "wrote {} files, {total} bytes, in {} (class 0/1/2/3 files: {}/{}/{}/{})",
        files.len(),
        dir.display(),
        counts[0],
        counts[1],
        counts[2],
        counts[3]
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_reaches_the_size_and_follows_the_class_shares() {
        let files = layout(61 * 1024 * 1024, 1);
        let total: u64 = files.iter().map(|f| f.1).sum();
        assert!((61 * 1024 * 1024..62 * 1024 * 1024).contains(&total));
        let mut counts = [0u64; 4];
        for (p, _) in &files {
            counts[(p.as_bytes()[6] - b'0') as usize] += 1;
        }
        let n = files.len() as f64;
        for c in 0..4 {
            let share = 100.0 * counts[c] as f64 / n;
            assert!(
                (share - CLASS_SHARE[c] as f64).abs() < 3.0,
                "class {c}: {share}"
            );
        }
        assert_eq!(layout(1 << 20, 9), layout(1 << 20, 9));
        assert_ne!(layout(1 << 20, 9), layout(1 << 20, 10));
    }
}
