//! The store in-process: fills followed from several threads, keys that
//! must never mix, bounds, purges, disk files across restarts and their
//! corruption, write failures.

use super::*;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// A directory of its own under the system's temporary directory.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "stoa-store-{name}-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            disk::first_generation()
        ));
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spec(name: &str, disk: Option<&TempDir>) -> ZoneSpec {
    ZoneSpec {
        name: name.to_owned(),
        memory: 64 * MIB,
        disk: disk.map(|d| d.0.clone()),
        disk_size: 1 << 30,
        max_object: 16 * MIB,
        inactive: Duration::from_secs(86400),
    }
}

fn meta(head: &str, variant: &str, tags: &[&str]) -> Meta {
    Meta {
        status: 200,
        head: Bytes::copy_from_slice(head.as_bytes()),
        variant: variant.as_bytes().into(),
        request_time: UNIX_EPOCH_PLUS(1_700_000_000_000),
        response_time: UNIX_EPOCH_PLUS(1_700_000_000_250),
        tags: tags.iter().map(|t| t.as_bytes().into()).collect(),
        len: None,
    }
}

#[allow(non_snake_case)]
fn UNIX_EPOCH_PLUS(ms: u64) -> SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(ms)
}

fn key(k: &str, url: &str) -> StoreKey {
    StoreKey::new(k.as_bytes(), url.as_bytes())
}

/// `n` bytes that differ from another seed's at every few positions.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    }
}

/// Fills `key` with `body` from a local task (as the fetch does); whether
/// it was stored.
fn fill(zone: &Arc<Zone>, key: &StoreKey, m: Meta, body: &[u8], store: bool) -> bool {
    let Begin::Lead(mut g) = zone.begin(key) else {
        panic!("a fill of this key runs already");
    };
    let body = body.to_vec();
    let local = tokio::task::LocalSet::new();
    runtime().block_on(local.run_until(async move {
        let t = tokio::task::spawn_local(async move {
            g.set_head(m, store);
            for piece in body.chunks(64 * 1024) {
                g.append(piece).expect("append");
            }
            g.finish()
        });
        t.await.expect("fill task")
    }))
}

/// All of a fill's body, as a client reads it; Err when it failed.
async fn read_all(f: &Fill) -> Result<Vec<u8>, Vec<u8>> {
    let mut out = Vec::new();
    loop {
        match f.read(out.len() as u64).await {
            Chunk::Mem(b) => {
                assert!(!b.is_empty());
                out.extend_from_slice(&b);
            }
            Chunk::File(file, at, len) => {
                assert!(len > 0);
                let mut buf = vec![0u8; len as usize];
                file.read_exact_at(&mut buf, at)
                    .expect("read the fill's file");
                out.extend_from_slice(&buf);
            }
            Chunk::End => return Ok(out),
            Chunk::Failed => return Err(out),
        }
    }
}

/// A stored object's body, from memory or its file.
fn body(obj: &Object) -> Vec<u8> {
    match &obj.body {
        Body::Mem(b) => b.to_vec(),
        Body::Disk(_) => {
            let (f, at, len) = obj.file().expect("open the object's file");
            let mut buf = vec![0u8; len as usize];
            f.read_exact_at(&mut buf, at)
                .expect("read the object's file");
            buf
        }
    }
}

fn one(zone: &Zone, k: &StoreKey) -> Arc<Object> {
    let v = zone.lookup(k);
    assert_eq!(v.len(), 1, "one variant of {:?}", k.bytes);
    v[0].clone()
}

fn wait_loaded(zone: &Zone) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while zone.loading() {
        assert!(
            Instant::now() < deadline,
            "the index was not rebuilt in time"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Files (not directories) under `dir`, `tmp/` aside.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name() != Some(std::ffi::OsStr::new("tmp")) {
                    todo.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Collapsed forwarding (nginx `proxy_cache_lock`, Varnish's waiting
/// list): one fill answers every waiter, on whatever thread, with the
/// same bytes, past the memory threshold into the spill file too.
fn many_waiters_get_identical_bytes(disk: Option<&TempDir>, store: bool) {
    let zone = Zone::open(&spec("collapse", disk)).expect("zone");
    wait_loaded(&zone);
    let k = key("https\0example.com\0/big\0", "example.com/big");
    let Begin::Lead(mut g) = zone.begin(&k) else {
        panic!("the first request leads");
    };
    let body = pattern((3 * MIB + 12345) as usize, 7);
    let (joined, joined_rx) = mpsc::channel();
    let mut readers = Vec::new();
    for _ in 0..6 {
        let (zone, k, joined) = (zone.clone(), k.clone(), joined.clone());
        readers.push(std::thread::spawn(move || {
            let Begin::Wait(f) = zone.begin(&k) else {
                panic!("later requests wait for the fill");
            };
            joined.send(()).expect("joined");
            runtime().block_on(async {
                let m = f.head().await.expect("a head");
                (m, read_all(&f).await)
            })
        }));
    }
    for _ in 0..6 {
        joined_rx.recv().expect("a reader joined");
    }
    let local = tokio::task::LocalSet::new();
    let b = body.clone();
    let stored = runtime().block_on(local.run_until(async move {
        tokio::task::spawn_local(async move {
            g.set_head(meta("Content-Type: text/plain\r\n", "", &[]), store);
            // Uneven pieces, so that chunks and file ranges interleave.
            let mut at = 0;
            let mut n = 1;
            while at < b.len() {
                let end = (at + n * 997).min(b.len());
                g.append(&b[at..end]).expect("append");
                at = end;
                n = n % 97 + 1;
            }
            g.finish()
        })
        .await
        .expect("fill task")
    }));
    assert_eq!(stored, store);
    for r in readers {
        let (m, got) = r.join().expect("reader thread");
        assert_eq!(&m.head[..], b"Content-Type: text/plain\r\n");
        let got = got.expect("the fill completed");
        assert_eq!(got.len(), body.len());
        assert!(got == body, "a waiter got other bytes");
    }
    if store {
        assert_eq!(body_of_one(&zone, &k), body);
    } else {
        assert!(zone.lookup(&k).is_empty());
    }
    // The fill is over: the next request leads a new one.
    assert!(matches!(zone.begin(&k), Begin::Lead(_)));
}

fn body_of_one(zone: &Zone, k: &StoreKey) -> Vec<u8> {
    body(&one(zone, k))
}

#[test]
fn waiters_on_several_threads_get_the_same_bytes_from_one_fill_in_memory() {
    many_waiters_get_identical_bytes(None, true);
}

#[test]
fn waiters_on_several_threads_get_the_same_bytes_from_one_fill_on_disk() {
    let d = TempDir::new("collapse-disk");
    many_waiters_get_identical_bytes(Some(&d), true);
}

#[test]
fn an_uncacheable_response_reaches_every_waiter_through_a_spill_file() {
    many_waiters_get_identical_bytes(None, false);
}

#[test]
fn two_keys_never_share_an_object() {
    let zone = Zone::detached(&spec("two", None)).expect("zone");
    let (a, b) = (key("a\0/x\0", "h/x"), key("a\0/y\0", "h/y"));
    assert!(fill(
        &zone,
        &a,
        meta("X-K: a\r\n", "", &[]),
        b"body of a",
        true
    ));
    assert!(zone.lookup(&b).is_empty(), "b found a's object");
    assert!(fill(
        &zone,
        &b,
        meta("X-K: b\r\n", "", &[]),
        b"body of b",
        true
    ));
    assert_eq!(body(&one(&zone, &a)), b"body of a");
    assert_eq!(body(&one(&zone, &b)), b"body of b");
    assert_eq!(&one(&zone, &b).meta.head[..], b"X-K: b\r\n");
}

#[test]
fn keys_whose_hashes_collide_are_told_apart_by_their_full_bytes() {
    let zone = Zone::detached(&spec("collide", None)).expect("zone");
    let a = StoreKey::with_hash(b"host\0/a\0", 42, b"host/a");
    let b = StoreKey::with_hash(b"host\0/b\0", 42, b"host/b");
    assert!(fill(&zone, &a, meta("", "", &[]), b"AAAA", true));
    assert!(zone.lookup(&b).is_empty(), "a collision served another key");
    // Nor do they collapse onto each other's fills.
    let Begin::Lead(ga) = zone.begin(&a) else {
        panic!("a leads")
    };
    assert!(matches!(zone.begin(&b), Begin::Lead(_)));
    drop(ga);
    assert!(fill(&zone, &b, meta("", "", &[]), b"BBBB", true));
    assert_eq!(body(&one(&zone, &a)), b"AAAA");
    assert_eq!(body(&one(&zone, &b)), b"BBBB");
    assert_eq!(zone.remove(&a), 1);
    assert_eq!(body(&one(&zone, &b)), b"BBBB");
}

#[test]
fn variants_of_a_key_are_kept_most_recent_first_and_replaced_by_variant() {
    let zone = Zone::detached(&spec("vary", None)).expect("zone");
    let k = key("k", "h/k");
    fill(&zone, &k, meta("", "gzip", &[]), b"gz", true);
    fill(&zone, &k, meta("", "br", &[]), b"br", true);
    fill(&zone, &k, meta("", "gzip", &[]), b"gz2", true);
    let v = zone.lookup(&k);
    let got: Vec<(&[u8], Vec<u8>)> = v.iter().map(|o| (&o.meta.variant[..], body(o))).collect();
    assert_eq!(
        got,
        vec![
            (&b"gzip"[..], b"gz2".to_vec()),
            (&b"br"[..], b"br".to_vec())
        ]
    );
    assert_eq!(zone.stats().objects, 2);
}

#[test]
fn a_reload_with_the_same_name_keeps_the_zone_and_its_objects() {
    let name = format!("reload-{}", disk::first_generation());
    let mut s = spec(&name, None);
    let z1 = zone(&s).expect("zone");
    let k = key("k", "h/k");
    fill(&z1, &k, meta("", "", &[]), b"kept", true);
    s.memory = 32 * MIB;
    let z2 = zone(&s).expect("zone again");
    assert!(Arc::ptr_eq(&z1, &z2));
    assert_eq!(body(&one(&z2, &k)), b"kept");
    assert!(zones().iter().any(|z| z.name() == name));
    // A configuration without it drops it; naming it again starts anew.
    retain(&[]);
    assert!(!zones().iter().any(|z| z.name() == name));
    let z3 = zone(&s).expect("a new zone");
    assert!(!Arc::ptr_eq(&z1, &z3));
    assert!(z3.lookup(&k).is_empty());
    retain(&[]);
}

#[test]
fn a_restart_finds_the_objects_on_disk_with_their_fields() {
    let d = TempDir::new("restart");
    let small = key("https\0h\0/small\0", "h/small");
    let large = key("https\0h\0/large\0", "h/large");
    let large_body = pattern((2 * MIB) as usize, 3);
    {
        let z = Zone::open(&spec("restart", Some(&d))).expect("zone");
        wait_loaded(&z);
        assert!(fill(
            &z,
            &small,
            meta("ETag: \"1\"\r\n", "gzip", &["t1", "t2"]),
            b"small body",
            true
        ));
        assert!(fill(&z, &large, meta("", "", &[]), &large_body, true));
        // The small body is held in memory too; the large one only on disk.
        assert!(one(&z, &small).mem().is_some());
        assert!(one(&z, &large).mem().is_none());
    }
    let z = Zone::open(&spec("restart", Some(&d))).expect("zone again");
    wait_loaded(&z);
    let s = one(&z, &small);
    assert_eq!(body(&s), b"small body");
    assert_eq!(
        s.meta,
        Meta {
            len: Some(10),
            ..meta("ETag: \"1\"\r\n", "gzip", &["t1", "t2"])
        }
    );
    assert_eq!(body(&one(&z, &large)), large_body);
    assert_eq!(z.stats().objects, 2);
    // Tags and URLs are indexed again.
    assert_eq!(z.purge_tag(b"t2"), 1);
    assert_eq!(z.purge_url(b"h/large"), 1);
    assert!(files(&d.0).is_empty(), "purged objects' files are removed");
}

#[test]
fn corrupt_truncated_and_foreign_files_are_removed_at_start_and_never_served() {
    let d = TempDir::new("corrupt");
    let keys: Vec<StoreKey> = (0..4).map(|i| key(&format!("k{i}"), "h/k")).collect();
    {
        let z = Zone::open(&spec("corrupt", Some(&d))).expect("zone");
        wait_loaded(&z);
        for (i, k) in keys.iter().enumerate() {
            fill(&z, k, meta("", "", &[]), &pattern(5000, i as u8), true);
        }
    }
    let paths = files(&d.0);
    assert_eq!(paths.len(), 4);
    let path_of = |k: &StoreKey| -> PathBuf {
        paths
            .iter()
            .find(|p| disk::read_header(p).is_ok_and(|(key, _, _)| key.bytes == k.bytes))
            .expect("its file")
            .clone()
    };
    // A flipped byte in the header (the checksum catches it).
    let p0 = path_of(&keys[0]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p0)
        .expect("open");
    f.write_all_at(b"\xff", 40).expect("write");
    // A body cut short (a crash before the last write).
    let p1 = path_of(&keys[1]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p1)
        .expect("open");
    f.set_len(3000).expect("truncate");
    // Another format version.
    let p2 = path_of(&keys[2]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p2)
        .expect("open");
    f.write_all_at(&9u32.to_le_bytes(), 8).expect("write");
    // A file that is not ours at all, where ours are.
    let foreign = p0.with_file_name("not-an-object");
    std::fs::write(&foreign, b"hello").expect("write");
    let z = Zone::open(&spec("corrupt", Some(&d))).expect("zone again");
    wait_loaded(&z);
    for k in &keys[..3] {
        assert!(z.lookup(k).is_empty(), "a damaged file was served");
    }
    assert_eq!(body(&one(&z, &keys[3])), pattern(5000, 3));
    for p in [&p0, &p1, &p2, &foreign] {
        assert!(!p.exists(), "{} was not removed", p.display());
    }
    assert_eq!(z.stats().store_failures, 4);
}

#[test]
fn a_response_larger_than_max_object_is_delivered_but_not_stored() {
    for dir in [None, Some(TempDir::new("max"))] {
        let mut s = spec("max", dir.as_ref());
        s.max_object = 100_000;
        let z = Zone::open(&s).expect("zone");
        wait_loaded(&z);
        let k = key("big", "h/big");
        let Begin::Lead(mut g) = z.begin(&k) else {
            panic!("lead")
        };
        let f = g.fill();
        let big = pattern(300_000, 1);
        g.set_head(meta("", "", &[]), true);
        for p in big.chunks(7000) {
            g.append(p).expect("append");
        }
        assert!(!g.finish(), "stored past max_object");
        assert_eq!(runtime().block_on(read_all(&f)), Ok(big));
        assert!(z.lookup(&k).is_empty());
        // One announced as larger is not stored either.
        let mut m = meta("", "", &[]);
        m.len = Some(200_000);
        assert!(!fill(&z, &k, m, b"short", true));
        assert!(fill(&z, &k, meta("", "", &[]), &pattern(100_000, 2), true));
        if let Some(d) = &dir {
            assert_eq!(files(&d.0).len(), 1, "only the stored object has a file");
        }
    }
}

#[test]
fn memory_is_bounded_least_recently_used_first() {
    let mut s = spec("lru", None);
    // Room for three 1000-byte objects (and their keys and heads).
    s.memory = 3 * 1010;
    let z = Zone::detached(&s).expect("zone");
    let k: Vec<StoreKey> = (0..4).map(|i| key(&format!("k{i}"), "h")).collect();
    for kk in &k[..3] {
        assert!(fill(&z, kk, meta("", "", &[]), &[0u8; 1000], true));
    }
    // k0 is used again; k1 is now the least recently used.
    one(&z, &k[0]);
    assert!(fill(&z, &k[3], meta("", "", &[]), &[0u8; 1000], true));
    assert!(z.lookup(&k[1]).is_empty(), "the least recently used stayed");
    for i in [0, 2, 3] {
        one(&z, &k[i]);
    }
    let st = z.stats();
    assert_eq!(st.objects, 3);
    assert!(st.memory_bytes <= s.memory);
    // A smaller bound at a reload evicts at once.
    let mut smaller = s.clone();
    smaller.memory = 1010;
    z.set_bounds(&smaller);
    assert_eq!(z.stats().objects, 1);
}

#[test]
fn objects_with_files_leave_memory_first_and_disk_is_bounded_too() {
    let d = TempDir::new("disk-lru");
    let mut s = spec("disk-lru", Some(&d));
    s.memory = 2500;
    s.disk_size = 3 * 2200;
    let z = Zone::open(&s).expect("zone");
    wait_loaded(&z);
    let k: Vec<StoreKey> = (0..4).map(|i| key(&format!("k{i}"), "h")).collect();
    for (i, kk) in k.iter().enumerate() {
        assert!(fill(
            &z,
            kk,
            meta("", "", &[]),
            &pattern(2000, i as u8),
            true
        ));
    }
    // Three files fit; the first object went; of the others only the
    // most recent is still in memory, the others are read from disk.
    assert!(z.lookup(&k[0]).is_empty());
    let st = z.stats();
    assert_eq!(st.objects, 3);
    assert!(st.disk_bytes <= s.disk_size && st.memory_bytes <= s.memory);
    assert_eq!(files(&d.0).len(), 3);
    let o1 = one(&z, &k[1]);
    assert!(o1.mem().is_none());
    assert_eq!(body(&o1), pattern(2000, 1));
    assert!(one(&z, &k[3]).mem().is_some());
}

#[test]
fn objects_unused_for_inactive_are_removed() {
    let mut s = spec("inactive", None);
    s.inactive = Duration::from_millis(1);
    let z = Zone::detached(&s).expect("zone");
    let k = key("k", "h");
    fill(&z, &k, meta("", "", &[]), b"x", true);
    // The time a lookup compares with, not a synchronisation.
    std::thread::sleep(Duration::from_millis(5));
    assert!(z.lookup(&k).is_empty());
    assert_eq!(z.stats().objects, 0);
}

#[test]
fn purge_by_url_removes_every_variant_of_every_key_of_that_url() {
    let z = Zone::detached(&spec("purge", None)).expect("zone");
    let (a, b, c) = (
        key("h\0/p\0mobile", "h/p"),
        key("h\0/p\0desktop", "h/p"),
        key("h\0/q\0", "h/q"),
    );
    fill(&z, &a, meta("", "gzip", &[]), b"1", true);
    fill(&z, &a, meta("", "br", &[]), b"2", true);
    fill(&z, &b, meta("", "", &[]), b"3", true);
    fill(&z, &c, meta("", "", &[]), b"4", true);
    assert_eq!(z.purge_url(b"h/p"), 3);
    assert!(z.lookup(&a).is_empty() && z.lookup(&b).is_empty());
    assert_eq!(body(&one(&z, &c)), b"4");
    assert_eq!(z.purge_url(b"h/p"), 0);
    assert_eq!(z.stats().purges, 3);
}

#[test]
fn purge_by_tag_removes_every_object_carrying_it() {
    let z = Zone::detached(&spec("tags", None)).expect("zone");
    let k: Vec<StoreKey> = (0..3).map(|i| key(&format!("k{i}"), "h")).collect();
    fill(&z, &k[0], meta("", "", &["post-1", "front"]), b"0", true);
    fill(&z, &k[1], meta("", "", &["post-2", "front"]), b"1", true);
    fill(&z, &k[2], meta("", "", &["post-2"]), b"2", true);
    assert_eq!(z.purge_tag(b"front"), 2);
    assert_eq!(body(&one(&z, &k[2])), b"2");
    assert_eq!(z.purge_tag(b"post-1"), 0);
    assert_eq!(z.purge_tag(b"post-2"), 1);
    assert_eq!(z.stats().objects, 0);
}

#[test]
fn a_failed_fill_releases_its_waiters_and_stores_nothing() {
    let z = Zone::detached(&spec("fail", None)).expect("zone");
    let k = key("k", "h");
    // Before a head: waiters learn there is none.
    let Begin::Lead(g) = z.begin(&k) else {
        panic!("lead")
    };
    let waiter = {
        let (z, k) = (z.clone(), k.clone());
        let Begin::Wait(f) = z.begin(&k) else {
            panic!("wait")
        };
        std::thread::spawn(move || runtime().block_on(f.head()))
    };
    drop(g);
    assert_eq!(waiter.join().expect("waiter"), None);
    // After part of the body: waiters get what came, then Failed.
    let Begin::Lead(mut g) = z.begin(&k) else {
        panic!("a new lead after the failure")
    };
    let f = g.fill();
    g.set_head(meta("", "", &[]), true);
    g.append(b"partial").expect("append");
    let reader = std::thread::spawn(move || runtime().block_on(read_all(&f)));
    drop(g);
    assert_eq!(reader.join().expect("reader"), Err(b"partial".to_vec()));
    assert!(z.lookup(&k).is_empty());
    assert!(matches!(z.begin(&k), Begin::Lead(_)));
}

#[test]
fn a_key_marked_uncacheable_is_not_collapsed_for_a_while() {
    let z = Zone::detached(&spec("hfm", None)).expect("zone");
    let k = key("k", "h");
    z.mark_uncacheable(&k, Duration::from_secs(30));
    assert!(matches!(z.begin(&k), Begin::Uncacheable));
    assert!(matches!(z.begin(&key("other", "h")), Begin::Lead(_)));
    z.mark_uncacheable(&k, Duration::ZERO);
    assert!(matches!(z.begin(&k), Begin::Lead(_)));
}

#[test]
fn a_304_refresh_updates_the_fields_and_keeps_the_body_across_a_restart() {
    let d = TempDir::new("refresh");
    let k = key("k", "h/k");
    let big = pattern((MIB + 5) as usize, 9);
    {
        let z = Zone::open(&spec("refresh", Some(&d))).expect("zone");
        wait_loaded(&z);
        fill(
            &z,
            &k,
            meta("ETag: \"a\"\r\nX-V: 1\r\n", "", &[]),
            &big,
            true,
        );
        let old = one(&z, &k);
        let mut m = old.meta.clone();
        m.head = Bytes::from_static(b"ETag: \"a\"\r\nX-V: 2\r\n");
        m.response_time = UNIX_EPOCH_PLUS(1_800_000_000_000);
        // The waiters of the revalidating fill get the refreshed object.
        let Begin::Lead(g) = z.begin(&k) else {
            panic!("lead")
        };
        let f = g.fill();
        let new = z.update_meta(&old, m.clone());
        g.finish_with(&new);
        let (h, b) = runtime().block_on(async { (f.head().await, read_all(&f).await) });
        assert_eq!(h.map(|h| h.head), Some(m.head.clone()));
        assert_eq!(b, Ok(big.clone()));
        let now = one(&z, &k);
        assert_eq!(now.meta.head, m.head);
        assert_eq!(body(&now), big);
        assert_eq!(files(&d.0).len(), 1, "the old file went");
    }
    let z = Zone::open(&spec("refresh", Some(&d))).expect("zone again");
    wait_loaded(&z);
    let o = one(&z, &k);
    assert_eq!(&o.meta.head[..], b"ETag: \"a\"\r\nX-V: 2\r\n");
    assert_eq!(body(&o), big);
}

#[test]
fn a_full_disk_abandons_the_disk_copy_and_the_fill_still_completes() {
    let d = TempDir::new("enospc");
    let z = Zone::open(&spec("enospc", Some(&d))).expect("zone");
    wait_loaded(&z);
    // The copy fails after about 1.5 MiB: past the memory threshold, so
    // the rest of the body goes to another file for the readers.
    z.set_write_budget(MIB + MIB / 2);
    let k = key("big", "h/big");
    let big = pattern((3 * MIB) as usize, 5);
    let Begin::Lead(mut g) = z.begin(&k) else {
        panic!("lead")
    };
    let f = g.fill();
    g.set_head(meta("", "", &[]), true);
    for p in big.chunks(50_000) {
        g.append(p).expect("append goes on past the disk error");
    }
    assert!(!g.finish(), "stored without its disk copy");
    assert_eq!(runtime().block_on(read_all(&f)), Ok(big));
    assert!(z.lookup(&k).is_empty());
    assert!(files(&d.0).is_empty());
    assert!(z.stats().store_failures >= 1);
    // A small object whose copy fails is still kept in memory.
    z.set_write_budget(10);
    let s = key("small", "h/small");
    assert!(fill(&z, &s, meta("", "", &[]), b"small", true));
    let o = one(&z, &s);
    assert_eq!(o.mem().map(|b| &b[..]), Some(&b"small"[..]));
    assert!(o.file().is_err());
}

#[test]
fn expired_hit_for_miss_marks_do_not_accumulate() {
    let z = Zone::detached(&spec("marks", None)).expect("zone");
    for i in 0..5000 {
        z.mark_uncacheable(&key(&format!("k{i}"), "h"), Duration::ZERO);
    }
    assert!(z.index().keys.len() < 4096, "expired marks were kept");
}

#[test]
fn a_new_file_never_takes_the_name_of_an_object_it_replaces() {
    let d = TempDir::new("names");
    let k = key("k", "h/k");
    {
        let z = Zone::open(&spec("names", Some(&d))).expect("zone");
        wait_loaded(&z);
        fill(&z, &k, meta("", "", &[]), b"first", true);
    }
    let z = Zone::open(&spec("names", Some(&d))).expect("zone again");
    wait_loaded(&z);
    // The next generation is the one the loaded file has (two runs in
    // the same instant, as far as names go).
    let old = files(&d.0);
    let gen = old[0]
        .extension()
        .and_then(|e| u64::from_str_radix(&e.to_string_lossy(), 16).ok())
        .expect("a generation");
    if let Some(zd) = &z.disk {
        zd.generation.store(gen, Ordering::Relaxed);
    }
    assert!(fill(&z, &k, meta("", "", &[]), b"second", true));
    let now = files(&d.0);
    assert_eq!(now.len(), 1);
    assert_ne!(now, old);
    drop(z);
    let z = Zone::open(&spec("names", Some(&d))).expect("zone a third time");
    wait_loaded(&z);
    assert_eq!(body(&one(&z, &k)), b"second");
}
