//! Replays the fuzz corpora (fuzz/corpus, fuzz/seeds and the crash
//! reproducers in fuzz/regressions) through the same checks the libFuzzer
//! targets run, so that `cargo test` guards what fuzzing once found without
//! needing a nightly toolchain or cargo-fuzz.

#[path = "../../../fuzz/checks.rs"]
mod checks;

use std::panic;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The regular, non-hidden files of `dir`, sorted; empty if it is missing.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
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
fn every_fuzz_corpus_input_replays_without_panic_or_invariant_violation() {
    let root = fuzz_dir();
    let mut failures = Vec::new();
    let mut replayed = 0usize;
    for &target in checks::TARGETS {
        let corpus = inputs(&root.join("corpus").join(target));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{target} is missing or empty: the corpus must be committed"
        );
        let seeds = inputs(&root.join("seeds").join(target));
        let regressions = inputs(&root.join("regressions").join(target));
        for file in corpus.iter().chain(&seeds).chain(&regressions) {
            let data = std::fs::read(file).expect("readable corpus file");
            replayed += 1;
            if let Err(e) = panic::catch_unwind(|| checks::run(target, &data)) {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failures.push(format!("{target}: {}: {msg}", file.display()));
            }
        }
    }
    assert!(replayed > 0);
    assert!(
        failures.is_empty(),
        "{} of {replayed} fuzz inputs fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_replay_knows_every_fuzz_target_in_fuzz_cargo_toml() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let declared: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "stoa-fuzz")
        .collect();
    assert_eq!(
        declared,
        checks::TARGETS,
        "fuzz targets and checks::TARGETS differ"
    );
}
