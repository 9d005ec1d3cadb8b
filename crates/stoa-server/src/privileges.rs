//! Running as someone other than root. Started as root, Stoa serves as
//! `user` (its primary group and supplementary groups too): workers, CGI
//! scripts and spawned application pools all run as that user. Without a
//! `user` key that is `nobody`, as nginx does; only `user = "root"` keeps
//! root.
//!
//! How: with a user to become ([`account_to_become`]), Stoa is two
//! processes (`crate::broker`): a parent that stays root (it reads the
//! configuration, certificates and keys, binds and opens log files, again
//! on every reload) and a server process that becomes the user between
//! fork and exec ([`Account::become_it`]), so the process that reads
//! requests is never root, not even during start-up. One process (not
//! started as root, or `user = "root"`) calls [`drop_to`], which then has
//! nothing to drop and says so; given a user as root it still becomes it,
//! the whole process.
//!
//! Why not root in the server process: the workers read files named by
//! the network, and a path bug must not read what only root may. The price
//! is that a reload cannot bind new privileged ports (already "on restart
//! only"), and a pool of its own user (`[[pool]] user`) needs the server to
//! keep root (`user = "root"` written out): its processes switch between
//! fork and exec ([`Account::become_it`]).

use std::ffi::{CStr, CString};

/// Whether Stoa runs as root (and so may start a pool as another user).
pub fn is_root() -> bool {
    euid() == 0
}
use std::path::Path;

/// A user to run as, looked up in the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// Its primary and supplementary groups (getgrouplist), looked up
    /// ahead so that a freshly forked child only makes syscalls.
    pub groups: Vec<libc::gid_t>,
}

impl Account {
    /// `getpwnam_r`: the account of `name`, or a message saying why not.
    pub fn lookup(name: &str) -> Result<Account, String> {
        let cname = CString::new(name).map_err(|_| format!("user `{name}`: contains a NUL"))?;
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        // SAFETY: an all-zero passwd is a valid value for getpwnam_r to
        // overwrite (pointers null, numbers 0).
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the name is
        // NUL-terminated, `pw` and `buf` are ours with their true sizes.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pw,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc != 0 {
            return Err(format!(
                "user `{name}`: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        if found.is_null() {
            return Err(format!("user `{name}`: no such user"));
        }
        let mut groups = vec![0 as libc::gid_t; 64];
        loop {
            let mut n = groups.len() as libc::c_int;
            // SAFETY: `groups` holds `n` entries; getgrouplist writes at
            // most that many and says how many it needs when short.
            let rc = unsafe {
                libc::getgrouplist(cname.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n)
            };
            if rc >= 0 {
                groups.truncate(n.max(0) as usize);
                break;
            }
            if n as usize <= groups.len() || groups.len() >= 65536 {
                groups = vec![pw.pw_gid];
                break;
            }
            groups.resize(n as usize, 0);
        }
        Ok(Account {
            name: name.to_owned(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
            groups,
        })
    }

    /// Becomes this account: groups, gid, then uid. Only syscalls, so it
    /// may run in a child between fork and exec (`pre_exec`).
    pub fn become_it(&self) -> std::io::Result<()> {
        // SAFETY: setgroups/setgid/setuid are plain syscalls on values we
        // own (`groups` outlives the call); they take no locks.
        unsafe {
            if libc::setgroups(self.groups.len(), self.groups.as_ptr()) != 0
                || libc::setgid(self.gid) != 0
                || libc::setuid(self.uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// What [`drop_to`] did, for the start-up log.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not root: nothing to drop (`user`, if given, is ignored).
    NotRoot,
    /// `user = "root"` was written out: still root.
    KeptRoot,
    Dropped(Account),
}

fn euid() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The account a process started with this `user` key must become: none
/// when not root (nothing to drop) or with `user = "root"` written out;
/// else `user`, by default `nobody`, which must exist and not be uid 0.
pub fn account_to_become(user: Option<&str>) -> Result<Option<Account>, String> {
    if euid() != 0 {
        return Ok(None);
    }
    let name = user.unwrap_or("nobody");
    if name == "root" {
        return Ok(None);
    }
    let acct = Account::lookup(name).map_err(|e| {
        if user.is_none() {
            format!(
                "started as root with no `user` key, and {e}: set `user` to the account to run as"
            )
        } else {
            e
        }
    })?;
    if acct.uid == 0 {
        return Err(format!(
            "user `{name}` has uid 0: write `user = \"root\"` to run as root"
        ));
    }
    Ok(Some(acct))
}

/// Becomes `user` (default `nobody`) if running as root: the whole
/// process, in one-process mode. `owned` are paths created as root that
/// the user must own afterwards (the pools' private socket directory, the
/// access log).
pub fn drop_to(user: Option<&str>, owned: &[&Path]) -> Result<Outcome, String> {
    if euid() != 0 {
        return Ok(Outcome::NotRoot);
    }
    let Some(acct) = account_to_become(user)? else {
        return Ok(Outcome::KeptRoot);
    };
    let name = acct.name.as_str();
    for p in owned {
        std::os::unix::fs::chown(p, Some(acct.uid), Some(acct.gid))
            .map_err(|e| format!("chown {} to {name}: {e}", p.display()))?;
    }
    // Groups and gid while still root, then the uid; glibc applies set*id
    // to every thread of the process.
    acct.become_it()
        .map_err(|e| format!("becoming {name} (uid {}): {e}", acct.uid))?;
    // SAFETY: a plain syscall; it must fail now.
    if unsafe { libc::setuid(0) } == 0 {
        return Err("setuid(0) still succeeds after dropping privileges".into());
    }
    Ok(Outcome::Dropped(acct))
}

/// The name of the account with `uid`, for messages.
pub fn user_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `Account::lookup`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as in `Account::lookup`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_name points to a NUL-terminated
    // string inside `buf`, which outlives this borrow.
    Some(
        unsafe { CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_a_missing_user_are_told_apart() {
        assert_eq!(Account::lookup("root").map(|a| a.uid), Ok(0));
        let e = Account::lookup("no-such-user-stoa").expect_err("missing");
        assert!(e.contains("no such user"), "{e}");
        assert!(Account::lookup("a\0b").is_err());
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }
}
