//! The PHP preset (Caddy's `php_fastcgi`): a PHP application through a
//! FastCGI pool, done safely. Routing (`route::php_step`) chooses, per
//! request, between the two handlers it holds.

use super::configure::{Configure, Ctx, Fail};
use super::fastcgi::FastCgiRoute;
use super::Handler;
use crate::upstream::Protocol;
use serde::Deserialize;
use std::sync::Arc;

/// `php = {...}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhpRouteConfig {
    pub pool: String,
    /// The script run for paths that name no file (default "/index.php";
    /// "" for none: 404).
    pub front_controller: Option<String>,
    /// Extra FastCGI parameters.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
}

/// `php = {...}` resolved.
#[derive(Debug)]
pub(crate) struct PhpRoute {
    /// Runs the scripts: `Handler::FastCgi`.
    pub(crate) fastcgi: Handler,
    /// Serves the files that are not scripts (never a `.php`):
    /// `Handler::Static`.
    pub(crate) statics: Handler,
    /// Run for paths that name no file; None: 404.
    pub(crate) front_controller: Option<String>,
}

impl Configure for PhpRouteConfig {
    fn configure(&self, cx: &Ctx<'_>) -> Result<Handler, Fail> {
        let pool = (cx.pool)(&self.pool, Protocol::FastCgi).map_err(Fail::at("php.pool"))?;
        let Some(root) = &cx.site.root else {
            return Err(Fail::new(
                "php",
                "runs files under the site's `root`, and the site has none",
            ));
        };
        let mut index = vec!["index.php".to_owned()];
        index.extend(cx.site.index.iter().filter(|n| *n != "index.php").cloned());
        let statics = cx
            .site
            .open_static(root, index, cx.site.autoindex, None)
            .map_err(Fail::at("php"))?;
        let front_controller = match self.front_controller.as_deref() {
            None => Some("/index.php".to_owned()),
            Some("") => None,
            Some(p) if p.starts_with('/') => Some(p.to_owned()),
            Some(_) => return Err(Fail::new("php.front_controller", "must start with '/'")),
        };
        Ok(Handler::Php(Arc::new(PhpRoute {
            fastcgi: Handler::FastCgi(Arc::new(FastCgiRoute {
                pool,
                pool_name: self.pool.clone(),
                document_root: cx.site.document_root.clone(),
                split_path: Some(".php".to_owned()),
                params: self
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                buffering: cx.request_buffering,
                retries: Default::default(),
            })),
            statics: Handler::Static(Arc::new(statics)),
            front_controller,
        })))
    }

    fn runs_scripts(&self) -> bool {
        true
    }

    fn script_marker(&self) -> Option<&str> {
        Some(".php")
    }
}
