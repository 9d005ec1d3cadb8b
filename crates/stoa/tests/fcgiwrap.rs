//! Issue 9: Debian's fcgiwrap as a FastCGI pool Stoa spawns (its listening
//! socket as fd 0), running shell CGI scripts with PATH_INFO URLs through
//! `split_path`; and scripts and spawned pools run as an unprivileged user
//! (`user = "www-data"`).
//!
//! Needs the Debian package fcgiwrap (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;
use std::os::unix::fs::PermissionsExt;

const FCGIWRAP: &str = "/usr/sbin/fcgiwrap";
const SOURCE_MARKER: &str = "SCRIPT-SOURCE-MARKER";

fn script(dir: &TempDir, rel: &str, body: &str) {
    let p = dir.write(
        rel,
        format!(
            "#!/bin/sh\n# {SOURCE_MARKER}\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n{body}"
        ),
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn fcgiwrap_pool() -> String {
    require(FCGIWRAP, "fcgiwrap");
    format!("[[pool]]\nname = \"cgiwrap\"\ncommand = [\"{FCGIWRAP}\"]\nprocesses = 1\n")
}

/// Issue 9, RFC 3875 §4.1.5 and §4.1.13: a `.sh` script behind fcgiwrap,
/// with `split_path = ".sh"`, gets SCRIPT_NAME up to `.sh` and the rest of
/// the path as PATH_INFO (`/x.sh/extra`), and fcgiwrap runs the file
/// Stoa names in SCRIPT_FILENAME; the script's source is never served.
#[test]
fn fcgiwrap_runs_a_shell_script_with_path_info_through_split_path() {
    let dir = TempDir::new("fcgiwrap");
    let show = "echo \"SN=$SCRIPT_NAME PI=$PATH_INFO QS=$QUERY_STRING SF=$SCRIPT_FILENAME\"\n";
    script(&dir, "www/x.sh", show);
    script(&dir, "www/sub/y.sh", show);
    let www = dir.join("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nsuffix = \".sh\"\nfastcgi = {{ pool = \"cgiwrap\", split_path = \".sh\" }}\n\n{}",
            fcgiwrap_pool()
        ),
    );
    let server = Server::with_config(&cfg);
    let w = www.display();
    let cases = [
        (
            "/x.sh/extra",
            format!("SN=/x.sh PI=/extra QS= SF={w}/x.sh\n"),
        ),
        (
            "/x.sh/a/b.txt?q=1&r=2",
            format!("SN=/x.sh PI=/a/b.txt QS=q=1&r=2 SF={w}/x.sh\n"),
        ),
        ("/x.sh", format!("SN=/x.sh PI= QS= SF={w}/x.sh\n")),
        ("/x.sh/", format!("SN=/x.sh PI=/ QS= SF={w}/x.sh\n")),
        (
            "/sub/y.sh/more/x.sh",
            format!("SN=/sub/y.sh PI=/more/x.sh QS= SF={w}/sub/y.sh\n"),
        ),
    ];
    for (path, want) in cases {
        let r = server.get(path);
        assert_eq!(r.status, 200, "{path}: {r:?}\n{}", server.stderr());
        assert_eq!(r.text(), want, "{path}");
    }
    for path in ["/x.sh.", "/X.SH", "/x.sh%20", "/sub/"] {
        let r = server.get(path);
        assert!(
            !r.text().contains(SOURCE_MARKER),
            "{path}: source served: {r:?}"
        );
    }
}

/// The uid of a user, from /etc/passwd.
fn uid_of_user(name: &str) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&name))
                .then(|| f.get(2).and_then(|u| u.parse().ok()))
                .flatten()
        })
        .unwrap_or_else(|| panic!("no user {name} in /etc/passwd"))
}

/// Issue 9: with top-level `user = "www-data"`, a server started as root
/// runs CGI scripts and the processes of spawned pools (fcgiwrap, and the
/// scripts it runs) as www-data, never as root (least privilege: a bug
/// in a script must not own the machine).
///
#[test]
fn scripts_and_spawned_pools_run_as_www_data() {
    assert!(
        is_root(),
        "this test starts Stoa as root to see it drop to www-data"
    );
    let www_data = uid_of_user("www-data");
    assert_ne!(www_data, 0);
    let dir = TempDir::new("www-data");
    script(&dir, "cgi/id.cgi", "id -u\n");
    script(&dir, "www/id.sh", "id -u\n");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "{}\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi\" }}\n\n\
             [[site.route]]\nsuffix = \".sh\"\nfastcgi = {{ pool = \"cgiwrap\", split_path = \".sh\" }}\n\n{}",
            CONFIG_PRELUDE.replace("user = \"root\"", "user = \"www-data\""),
            fcgiwrap_pool()
        ),
    );
    let server = Server::with_config(&cfg);
    let r = server.get("/cgi-bin/id.cgi");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.stderr());
    assert_eq!(
        r.text().trim(),
        www_data.to_string(),
        "the CGI script's uid"
    );
    let r = server.get("/id.sh");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.stderr());
    assert_eq!(
        r.text().trim(),
        www_data.to_string(),
        "the uid of a script fcgiwrap runs"
    );
    // The fcgiwrap process itself.
    let wraps: Vec<i32> = common::processes()
        .into_iter()
        .map(|(p, ..)| p)
        .filter(|&p| cmdline(p).starts_with(FCGIWRAP))
        .filter(|&p| {
            // Ours: a descendant of this Stoa.
            let mut q = p;
            for _ in 0..4 {
                let parent = common::processes()
                    .into_iter()
                    .find(|&(pid, ..)| pid == q)
                    .map(|(_, _, pp, _)| pp)
                    .unwrap_or(0);
                if parent == server.pid() {
                    return true;
                }
                q = parent;
            }
            false
        })
        .collect();
    assert!(!wraps.is_empty(), "no fcgiwrap under stoa {}", server.pid());
    for p in wraps {
        assert_eq!(uid_of(p), Some(www_data), "fcgiwrap {p}");
    }
}
