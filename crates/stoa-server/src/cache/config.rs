//! The cache's configuration, beside its code: `[[cache_zone]]` (top
//! level: where objects are kept) and a route's (or site's) `cache =
//! {...}` (which zone, the key, bypass rules, default lifetimes, who may
//! purge), checked at load into [`ZoneSpec`]s and a [`CacheRoute`] on
//! the route's `Edge`. The reference is docs/CONFIG.md, "Caching".

use super::key::{Bypass, KeySpec};
use super::store::{Zone, ZoneSpec};
use crate::units::{Dur, Size};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::cidr::TrustedProxies;

/// `[[cache_zone]]`: a named store of cached responses, shared by every
/// worker and by the routes that name it; kept across reloads (memory)
/// and restarts (disk).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ZoneTable {
    /// The name routes give in `cache = { zone = "..." }`.
    pub(crate) name: String,
    /// Object bytes held in memory, least recently used out first
    /// (default 64 MiB; nginx `keys_zone` is a key index, this the bodies).
    pub(crate) memory: Option<Size>,
    /// A directory for objects on disk (nginx `proxy_cache_path`);
    /// without it the zone is memory only.
    pub(crate) disk: Option<String>,
    /// Bytes on disk (default 1 GiB; nginx `max_size`).
    pub(crate) disk_size: Option<Size>,
    /// Larger responses are passed through, never stored (default
    /// 64 MiB; Varnish has none, nginx none).
    pub(crate) max_object: Option<Size>,
    /// An object unused this long is removed, fresh or not (default 10
    /// minutes; nginx `inactive`).
    pub(crate) inactive: Option<Dur>,
}

const DEFAULT_MEMORY: u64 = 64 << 20;
const DEFAULT_DISK_SIZE: u64 = 1 << 30;
const DEFAULT_MAX_OBJECT: u64 = 64 << 20;
const DEFAULT_INACTIVE: Duration = Duration::from_secs(600);

impl ZoneTable {
    /// The zone's settings, checked; `resolve` makes a relative `disk`
    /// path absolute (relative to the file). Errors name the key.
    pub(crate) fn spec(
        &self,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<ZoneSpec, (&'static str, String)> {
        let n = &self.name;
        if n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err((
                "name",
                format!("`{n}`: a zone's name is letters, digits, `_` and `-`"),
            ));
        }
        let memory = self.memory.map_or(DEFAULT_MEMORY, |s| s.0);
        let max_object = self.max_object.map_or(DEFAULT_MAX_OBJECT, |s| s.0);
        let disk = match &self.disk {
            Some(d) if d.is_empty() => return Err(("disk", "is empty".into())),
            Some(d) => Some(resolve(d)),
            None => None,
        };
        let disk_size = self.disk_size.map_or(DEFAULT_DISK_SIZE, |s| s.0);
        if self.disk_size.is_some() && disk.is_none() {
            return Err(("disk_size", "needs `disk` (a directory)".into()));
        }
        if memory == 0 && disk.is_none() {
            return Err(("memory", "is 0 and the zone has no `disk`".into()));
        }
        if max_object == 0 {
            return Err(("max_object", "must be more than 0".into()));
        }
        let inactive = self.inactive.map_or(DEFAULT_INACTIVE, |d| d.0);
        if inactive.is_zero() {
            return Err(("inactive", "must be more than 0".into()));
        }
        Ok(ZoneSpec {
            name: n.clone(),
            memory,
            disk,
            disk_size,
            max_object,
            inactive,
        })
    }
}

/// `cache = {...}` of a route, or of a site as its routes' default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CacheTable {
    /// A `[[cache_zone]]`'s name.
    pub(crate) zone: String,
    /// What tells requests apart (nginx `proxy_cache_key`, Varnish
    /// `vcl_hash`): "scheme", "host", "path", "query", "method",
    /// "header:NAME", "cookie:NAME", "arg:NAME". Default: the first four.
    pub(crate) key: Option<Vec<String>>,
    /// Requests that go to the application and are not stored (nginx
    /// `proxy_cache_bypass` + `proxy_no_cache`).
    pub(crate) bypass: Option<BypassTable>,
    /// The lifetime of responses that give none (nginx
    /// `proxy_cache_valid`); 0: RFC 9111 §4.2.2's heuristic only.
    pub(crate) default_ttl: Option<Dur>,
    /// How long requests for an object being fetched wait for it
    /// (nginx `proxy_cache_lock_timeout`) before they fetch themselves.
    pub(crate) lock_timeout: Option<Dur>,
    /// RFC 5861 defaults, for responses that say none.
    pub(crate) stale_while_revalidate: Option<Dur>,
    pub(crate) stale_if_error: Option<Dur>,
    /// Addresses allowed to `PURGE` (`stoa_h1::cidr` ranges); none by
    /// default.
    pub(crate) purge: Option<Vec<String>>,
    /// Request methods answered from the cache: "GET" and "HEAD" (HEAD is
    /// filled with a GET).
    pub(crate) methods: Option<Vec<String>>,
}

/// `bypass = {...}`: any match sends the request to the application,
/// neither looked up nor stored (WordPress's logged-in cookies, a
/// `nocache` argument...). Names may end in `*`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct BypassTable {
    #[serde(default)]
    pub(crate) cookies: Vec<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) headers: Vec<String>,
}

/// A route's cache settings, checked: what `route::cache` reads.
#[derive(Debug)]
pub(crate) struct CacheRoute {
    pub(crate) zone: Arc<Zone>,
    pub(crate) key: KeySpec,
    pub(crate) bypass: Bypass,
    pub(crate) default_ttl: Duration,
    pub(crate) lock_timeout: Duration,
    pub(crate) stale_while_revalidate: Duration,
    pub(crate) stale_if_error: Duration,
    /// Who may `PURGE` (empty: nobody).
    pub(crate) purge: TrustedProxies,
    /// GET requests are answered from the cache.
    pub(crate) get: bool,
    /// HEAD requests are answered from the cache (from a stored GET).
    pub(crate) head: bool,
}

/// The key when a route gives none: one object per URL.
pub(crate) const DEFAULT_KEY: [&str; 4] = ["scheme", "host", "path", "query"];

impl CacheTable {
    /// The route's [`CacheRoute`]: its zone found among those the file
    /// declares (`zones`, by name). Errors name the key (`zone`, `key`...).
    pub(crate) fn build(&self, zones: &[Arc<Zone>]) -> Result<CacheRoute, (String, String)> {
        let e = |k: &str, m: String| (k.to_owned(), m);
        let zone = zones
            .iter()
            .find(|z| z.name() == self.zone)
            .cloned()
            .ok_or_else(|| e("zone", format!("no [[cache_zone]] named `{}`", self.zone)))?;
        let parts: Vec<String> = match &self.key {
            Some(k) if k.is_empty() => return Err(e("key", "is empty".into())),
            Some(k) => k.clone(),
            None => DEFAULT_KEY.iter().map(|s| s.to_string()).collect(),
        };
        let key = KeySpec::parse(&parts).map_err(|m| e("key", m))?;
        let b = self.bypass.as_ref();
        let empty = BypassTable::default();
        let b = b.unwrap_or(&empty);
        let bypass = Bypass::new(&b.cookies, &b.args, &b.headers).map_err(|m| e("bypass", m))?;
        let d = |v: &Option<Dur>, default: Duration| v.map_or(default, |d| d.0);
        let lock_timeout = d(&self.lock_timeout, Duration::from_secs(5));
        let purge = TrustedProxies::parse(self.purge.iter().flatten().map(String::as_str))
            .map_err(|m| e("purge", m.to_string()))?;
        let (mut get, mut head) = (false, false);
        for m in self
            .methods
            .as_deref()
            .unwrap_or(&["GET".into(), "HEAD".into()])
        {
            match m.as_str() {
                "GET" => get = true,
                "HEAD" => head = true,
                other => {
                    return Err(e(
                        "methods",
                        format!("`{other}`: only GET and HEAD responses are cached"),
                    ))
                }
            }
        }
        Ok(CacheRoute {
            zone,
            key,
            bypass,
            default_ttl: d(&self.default_ttl, Duration::ZERO),
            lock_timeout,
            stale_while_revalidate: d(&self.stale_while_revalidate, Duration::ZERO),
            stale_if_error: d(&self.stale_if_error, Duration::ZERO),
            purge,
            get,
            head,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{from_str, Overrides};
    use std::path::Path;

    fn load(routes: &str) -> Result<crate::config::Runtime, String> {
        let text = format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"127.0.0.1:9\"]\n\
             [[cache_zone]]\nname = \"pages\"\nmemory = \"1 MiB\"\n\
             [[site]]\nroot = \".\"\n{routes}"
        );
        let ov = Overrides {
            dry_run: true,
            ..Overrides::default()
        };
        from_str(&text, "t.toml", Path::new("."), &ov).map_err(|e| e.to_string())
    }

    #[test]
    fn a_proxy_route_with_a_cache_gets_its_settings_on_its_edge() {
        let rt = load(
            "[[site.route]]\nprefix = \"/app/\"\nproxy = { pool = \"app\" }\n\
             cache = { zone = \"pages\", lock_timeout = \"2s\", methods = [\"GET\"] }\n",
        )
        .expect("loads");
        let c = rt.sites[0].routes[0].edge.cache.as_ref().expect("cached");
        assert_eq!(c.lock_timeout, std::time::Duration::from_secs(2));
        assert!(c.get && !c.head);
        // The site's root (its static files) is not cached.
        assert!(rt.sites[0].edge.cache.is_none());
    }

    #[test]
    fn a_cache_on_static_files_is_refused_with_a_pointer_to_the_file_cache() {
        let e =
            load("[[site.route]]\nprefix = \"/s/\"\nstatic = {}\ncache = { zone = \"pages\" }\n")
                .expect_err("refused");
        assert!(e.contains("route[0].cache") && e.contains("[cache]"), "{e}");
    }

    #[test]
    fn an_unknown_zone_a_bad_key_part_and_a_bad_method_are_refused_by_name() {
        let r = |c: &str| {
            load(&format!(
                "[[site.route]]\nprefix = \"/a/\"\nproxy = {{ pool = \"app\" }}\ncache = {c}\n"
            ))
            .expect_err("refused")
        };
        let e = r("{ zone = \"nope\" }");
        assert!(e.contains("cache.zone") && e.contains("`nope`"), "{e}");
        let e = r("{ zone = \"pages\", key = [\"path\", \"colour\"] }");
        assert!(e.contains("cache.key") && e.contains("colour"), "{e}");
        let e = r("{ zone = \"pages\", methods = [\"POST\"] }");
        assert!(e.contains("cache.methods"), "{e}");
        let e = r("{ zone = \"pages\", lock_timeout = \"soon\" }");
        assert!(e.contains("soon"), "{e}");
    }

    #[test]
    fn a_zone_with_a_bad_name_or_a_disk_size_without_disk_is_refused() {
        let ov = Overrides {
            dry_run: true,
            ..Overrides::default()
        };
        let z = |t: &str| {
            from_str(
                &format!("[[cache_zone]]\n{t}\n[[site]]\nroot = \".\"\n"),
                "t.toml",
                Path::new("."),
                &ov,
            )
            .map_err(|e| e.to_string())
        };
        assert!(z("name = \"a b\"").expect_err("name").contains("name"));
        assert!(z("name = \"a\"\ndisk_size = \"1G\"")
            .expect_err("disk_size")
            .contains("disk_size"));
        assert!(z("name = \"a\"\n[[cache_zone]]\nname = \"a\"")
            .expect_err("twice")
            .contains("already"));
    }
}
