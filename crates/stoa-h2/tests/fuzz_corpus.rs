//! Replays the `h2_conn` fuzz inputs (fuzz/corpus, seeds and regressions)
//! through the same check the libFuzzer target runs, so that `cargo test
//! -p stoa-h2` guards what fuzzing found without building the server
//! (crates/stoa-server/tests/fuzz_corpus.rs replays them too).

use std::path::Path;

#[test]
fn every_h2_conn_fuzz_input_replays_without_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for dir in ["corpus", "seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join("h2_conn")) else {
            assert_ne!(dir, "corpus", "fuzz/corpus/h2_conn is missing");
            continue;
        };
        for e in entries {
            let path = e.expect("a readable directory entry").path();
            let data = std::fs::read(&path).expect("a readable fuzz input");
            stoa_h2::fuzzing::fuzz_check(&data);
            replayed += 1;
        }
    }
    assert!(replayed > 0);
}
