//! Files under a root directory, opened so that no path, `..` or symlink
//! leads out of it (`openat2(RESOLVE_BENEATH)`): what the static and SSI
//! handlers share. A leaf: it imports nothing of the crate.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A root directory, opened once at load time.
#[derive(Debug)]
pub struct Root {
    /// The canonical root, without a trailing '/'.
    pub path: PathBuf,
    /// The same as a string (roots are UTF-8, checked on open).
    pub path_str: String,
    fd: OwnedFd,
}

impl Root {
    pub fn open(root: &Path) -> Result<Root, String> {
        let canon = root
            .canonicalize()
            .map_err(|e| format!("root `{}`: {e}", root.display()))?;
        if !canon.is_dir() {
            return Err(format!("root `{}` is not a directory", canon.display()));
        }
        let dir = File::open(&canon).map_err(|e| format!("root `{}`: {e}", canon.display()))?;
        let mut path_str = canon
            .to_str()
            .ok_or_else(|| format!("root `{}` is not UTF-8", canon.display()))?
            .to_owned();
        while path_str.ends_with('/') {
            path_str.pop();
        }
        Ok(Root {
            path: canon,
            path_str,
            fd: dir.into(),
        })
    }

    /// Opens `rel` (a normalized path, starting with '/') beneath the
    /// root: the kernel refuses any path, `..` or symlink that resolves
    /// outside it. `follow_symlinks` lets symlinks lead out (Debian's
    /// DokuWiki links lib/tpl out of its root). Refusals are
    /// `PermissionDenied`.
    pub fn open_beneath(&self, rel: &str, follow_symlinks: bool) -> io::Result<File> {
        let full = rel;
        let rel = rel.trim_start_matches('/');
        let rel = if rel.is_empty() { "." } else { rel };
        let c = CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut how: libc::open_how = zeroed_open_how();
        // O_NONBLOCK: a FIFO planted in the root must not hang the worker.
        how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY) as u64;
        how.resolve = if follow_symlinks {
            libc::RESOLVE_NO_MAGICLINKS
        } else {
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS
        };
        // SAFETY: the root fd is open for the life of `self`; `c` is a
        // valid NUL-terminated string; `how` is a properly initialised
        // open_how whose size we pass.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us and
            // nobody else owns it.
            return Ok(unsafe { File::from_raw_fd(fd as i32) });
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENOSYS) => self.open_checked(rel, follow_symlinks),
            Some(libc::EXDEV) | Some(libc::ELOOP) => {
                tracing::warn!(
                    "{}{full}: a symlink leads out of the root (follow_symlinks = false): refused",
                    self.path_str
                );
                Err(io::ErrorKind::PermissionDenied.into())
            }
            _ => Err(err),
        }
    }

    /// Kernels before 5.6 lack openat2: resolve the path and check it is
    /// still under the root. Racy against a concurrent symlink swap, hence
    /// only a fallback.
    fn open_checked(&self, rel: &str, follow_symlinks: bool) -> io::Result<File> {
        let full = self.path.join(rel);
        let canon = full.canonicalize()?;
        if !follow_symlinks && !canon.starts_with(&self.path) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(canon)
    }
}

fn zeroed_open_how() -> libc::open_how {
    // SAFETY: open_how is a plain C struct of integers; all-zero is its
    // documented "no flags" value.
    unsafe { std::mem::zeroed() }
}
