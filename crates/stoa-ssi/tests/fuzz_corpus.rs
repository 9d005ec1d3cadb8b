//! Replays the `ssi` fuzz corpus (crates/stoa-ssi/fuzz: corpus, seeds and
//! the reproducers in regressions) through the check the libFuzzer target
//! runs, so that `cargo test` guards what fuzzing found without a nightly
//! toolchain.

use std::panic;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The regular, non-hidden files of `dir`, sorted; empty if it is missing.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_ssi_fuzz_input_replays_without_panic_or_broken_property() {
    let root = fuzz_dir();
    let corpus = inputs(&root.join("corpus/ssi"));
    assert!(
        !corpus.is_empty(),
        "crates/stoa-ssi/fuzz/corpus/ssi is missing or empty: the corpus must be committed"
    );
    let seeds = inputs(&root.join("seeds/ssi"));
    let regressions = inputs(&root.join("regressions/ssi"));
    let mut failures = Vec::new();
    let mut replayed = 0;
    for file in corpus.iter().chain(&seeds).chain(&regressions) {
        let data = std::fs::read(file).expect("readable corpus file");
        replayed += 1;
        if let Err(e) = panic::catch_unwind(|| stoa_ssi::fuzzing::fuzz_check(&data)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{}: {msg}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {replayed} fuzz inputs fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
